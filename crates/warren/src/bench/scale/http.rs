//! The http workload of `warren bench scale`: busybox httpd in each bridged zone (the
//! host's static busybox through the `host` template's /usr) serving one small file,
//! and a load generator in this process: `clients` threads per zone, each doing
//! connect, `GET / HTTP/1.0`, read to EOF, close (no keep-alive), for the duration.
//! Response time is from connect to the last byte.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The page each zone serves (1 KiB).
pub fn body() -> String {
    let mut s = String::from("<html><body>");
    while s.len() < 1024 - 14 {
        s.push_str("warren ");
    }
    s.truncate(1024 - 14);
    s + "</body></html>"
}

/// Run as root inside a fresh zone: write the page and start httpd (it daemonizes).
pub fn setup_script(busybox: &Path, port: u16) -> String {
    format!(
        "set -e\nmkdir -p /var/www\nprintf '%s' '{}' > /var/www/index.html\n{} httpd -p {port} -h /var/www\n",
        body(),
        busybox.display()
    )
}

/// One zone's share of the load.
#[derive(Debug, Clone, Default)]
pub struct ZoneLoad {
    pub requests: u64,
    pub errors: u64,
    /// Response times of successful requests, ms.
    pub latencies_ms: Vec<f64>,
}

/// Wait until every address accepts a connection, up to `timeout`. Err: the first
/// address that did not.
pub fn wait_ready(addrs: &[SocketAddr], timeout: Duration) -> Result<(), SocketAddr> {
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

fn one_request(addr: &SocketAddr, expect: usize) -> Option<f64> {
    let t = Instant::now();
    let mut s = TcpStream::connect_timeout(addr, Duration::from_secs(5)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /index.html HTTP/1.0\r\nHost: zone\r\n\r\n")
        .ok()?;
    let mut buf = Vec::with_capacity(expect + 512);
    s.read_to_end(&mut buf).ok()?;
    let ok = buf.starts_with(b"HTTP/1.") && buf.windows(4).any(|w| w == b" 200") && {
        buf.len() >= expect
    };
    ok.then(|| t.elapsed().as_secs_f64() * 1000.0)
}

/// Load every address with `clients` threads each for `duration`; one result per
/// address, in order.
pub fn load(addrs: &[SocketAddr], clients: usize, duration: Duration) -> Vec<ZoneLoad> {
    let stop = Arc::new(AtomicBool::new(false));
    let expect = body().len();
    let mut handles = Vec::new();
    for (i, a) in addrs.iter().enumerate() {
        for _ in 0..clients {
            let (a, stop) = (*a, stop.clone());
            handles.push((
                i,
                std::thread::spawn(move || {
                    let mut z = ZoneLoad::default();
                    while !stop.load(Ordering::Relaxed) {
                        z.requests += 1;
                        match one_request(&a, expect) {
                            Some(ms) => z.latencies_ms.push(ms),
                            None => z.errors += 1,
                        }
                    }
                    z
                }),
            ));
        }
    }
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let mut out = vec![ZoneLoad::default(); addrs.len()];
    for (i, h) in handles {
        if let Ok(z) = h.join() {
            out[i].requests += z.requests;
            out[i].errors += z.errors;
            out[i].latencies_ms.extend(z.latencies_ms);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn body_is_one_kib_and_safe_in_single_quotes() {
        assert_eq!(body().len(), 1024);
        assert!(!body().contains('\''));
        assert!(setup_script(Path::new("/bin/busybox"), 80).contains("/bin/busybox httpd -p 80"));
    }

    /// The generator against a tiny HTTP/1.0 server on loopback.
    #[test]
    fn load_counts_requests_and_latency() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let mut req = [0u8; 512];
                let _ = s.read(&mut req);
                let b = body();
                let _ = write!(
                    s,
                    "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{b}",
                    b.len()
                );
            }
        });
        wait_ready(&[addr], Duration::from_secs(2)).unwrap();
        let r = load(&[addr], 2, Duration::from_millis(300));
        assert_eq!(r.len(), 1);
        assert!(r[0].requests > 0 && r[0].latencies_ms.len() as u64 + r[0].errors == r[0].requests);
        assert!(r[0].latencies_ms.iter().all(|&m| m > 0.0));
    }
}
