//! The web servers of `warren bench scale --workload http`: one per bridged zone,
//! serving the same small site, started through `warren login` before the timed run.
//!
//! - `busybox`: busybox httpd (the host's static busybox through the `host` template's
//!   /usr), one process that forks per connection.
//! - `nginx`: Debian's nginx from the host's /usr through the sparse root (nothing is
//!   installed in the zone), one master and one worker, a config of its own in the
//!   zone's private /etc, every temporary path under /tmp.
//!
//! The site is the page mix a consolidated web server sees ([`PAGES`], [`MIX`]): small
//! html pages, a 30 KiB asset, a 200 KiB image and a missing page (404), so that a
//! response's cost varies as it does in the study's web load. The load itself is
//! [`super::openloop`].

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result};

/// Which web server the zones run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Server {
    Busybox,
    Nginx,
}

/// One page of the site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Page {
    pub path: &'static str,
    /// The status the server must answer with.
    pub status: u16,
    /// Body bytes of a 200 answer (0 for the 404: its body is the server's).
    pub bytes: usize,
}

/// The site: a small html page, a 30 KiB asset (a script or style sheet), a 200 KiB
/// image, and a page that does not exist.
pub const PAGES: [Page; 4] = [
    Page {
        path: "/index.html",
        status: 200,
        bytes: 2 << 10,
    },
    Page {
        path: "/asset.js",
        status: 200,
        bytes: 30 << 10,
    },
    Page {
        path: "/image.jpg",
        status: 200,
        bytes: 200 << 10,
    },
    Page {
        path: "/missing.html",
        status: 404,
        bytes: 0,
    },
];

/// The mix, as indexes into [`PAGES`], walked round-robin by each zone's requests: 60 %
/// html, 25 % asset, 10 % image, 5 % not found (a 20-request cycle, interleaved so
/// that a short run still sees every kind).
pub const MIX: [usize; 20] = [0, 1, 0, 2, 0, 1, 0, 0, 1, 0, 3, 0, 1, 0, 2, 0, 1, 0, 0, 0];

/// The page of a zone's `k`-th request.
pub fn page_of(k: u64) -> &'static Page {
    &PAGES[MIX[(k % MIX.len() as u64) as usize]]
}

/// Where each server's program is on the host (and so in a `host`-template zone).
pub fn find(server: Server) -> Result<PathBuf> {
    match server {
        Server::Busybox => crate::storage::template::find_static_busybox(),
        Server::Nginx => ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or_else(|| {
                Error::Unsupported(
                    "--server nginx: nginx is not installed on the host (zones run it from the host's /usr through the sparse root); apt-get install nginx-light, or use --server busybox".into(),
                )
            }),
    }
}

/// The nginx config each zone gets (its own /etc is private).
fn nginx_conf(port: u16) -> String {
    format!(
        "user root;\nworker_processes 1;\ndaemon on;\npid /tmp/nginx-bench.pid;\nerror_log /tmp/nginx-bench.err;\n\
events {{ worker_connections 1024; }}\n\
http {{\n  access_log off;\n  default_type application/octet-stream;\n\
  client_body_temp_path /tmp/nb; proxy_temp_path /tmp/np; fastcgi_temp_path /tmp/nf;\n\
  uwsgi_temp_path /tmp/nu; scgi_temp_path /tmp/ns;\n\
  server {{ listen {port} backlog=4096; root /var/www; }}\n}}\n"
    )
}

/// Run as root inside a fresh zone: write the site and start the server (it
/// daemonizes). `busybox` makes the files; `bin` is the server.
pub fn setup_script(server: Server, bin: &Path, busybox: &Path, port: u16) -> String {
    let bb = busybox.display();
    let mut s = String::from("set -e\nmkdir -p /var/www\ncd /var/www\n");
    for p in PAGES.iter().filter(|p| p.status == 200) {
        // A byte that is safe in every file type; the size is what matters.
        s.push_str(&format!(
            "{bb} head -c {} /dev/zero | {bb} tr '\\0' 'w' > .{}\n",
            p.bytes, p.path
        ));
    }
    match server {
        Server::Busybox => s.push_str(&format!("{} httpd -p {port} -h /var/www\n", bin.display())),
        Server::Nginx => {
            s.push_str(&format!(
                "cat > /etc/nginx-bench.conf <<'EOF'\n{}EOF\n{} -c /etc/nginx-bench.conf\n",
                nginx_conf(port),
                bin.display()
            ));
        }
    }
    s
}

/// Wait until every address accepts a connection, up to `timeout`. Err: the first
/// address that did not.
pub fn wait_ready(addrs: &[SocketAddr], timeout: Duration) -> std::result::Result<(), SocketAddr> {
    let deadline = Instant::now() + timeout;
    for a in addrs {
        loop {
            if TcpStream::connect_timeout(a, Duration::from_millis(200)).is_ok() {
                break;
            }
            if Instant::now() > deadline {
                return Err(*a);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_sixty_twentyfive_ten_five() {
        let mut count = [0; 4];
        for k in 0..MIX.len() as u64 {
            let p = page_of(k);
            count[PAGES.iter().position(|q| q == p).unwrap()] += 1;
        }
        assert_eq!(count, [12, 5, 2, 1]);
        // The cycle repeats.
        assert_eq!(page_of(3), page_of(3 + MIX.len() as u64));
    }

    #[test]
    fn setup_writes_every_page_and_starts_the_server() {
        let s = setup_script(
            Server::Busybox,
            Path::new("/bin/busybox"),
            Path::new("/bin/busybox"),
            80,
        );
        assert!(s.contains("head -c 2048 /dev/zero"), "{s}");
        assert!(s.contains("head -c 204800 /dev/zero"), "{s}");
        assert!(s.contains("> ./image.jpg"), "{s}");
        assert!(!s.contains("missing"), "{s}");
        assert!(s.ends_with("/bin/busybox httpd -p 80 -h /var/www\n"), "{s}");
        let n = setup_script(
            Server::Nginx,
            Path::new("/usr/sbin/nginx"),
            Path::new("/bin/busybox"),
            8080,
        );
        assert!(n.contains("listen 8080 backlog=4096;"), "{n}");
        assert!(
            n.ends_with("/usr/sbin/nginx -c /etc/nginx-bench.conf\n"),
            "{n}"
        );
    }
}
