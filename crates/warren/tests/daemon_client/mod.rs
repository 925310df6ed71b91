//! Driving a `warren-daemon` from tests: start it on a temporary socket and state root
//! (killed when the guard drops), and talk to it with a real HTTP client, curl
//! `--unix-socket` (plus a minimal HTTP/1.1 client over the socket for the load test,
//! where 100 curl processes would measure process creation instead of the daemon).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Env, WARREN};

/// The daemon binary beside the CLI (`cargo test --workspace` builds both), or
/// `$WARREN_DAEMON_EXE` (a release build, to measure: SPEC.md).
pub fn daemon_exe() -> PathBuf {
    let p = std::env::var_os("WARREN_DAEMON_EXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(WARREN).with_file_name("warren-daemon"));
    assert!(
        p.exists(),
        "{} is missing: build it with 'cargo build -p warren-daemon' (scripts/test.sh does, through cargo test --workspace)",
        p.display()
    );
    p
}

/// A running daemon, killed (and waited for) on drop.
pub struct Daemon {
    pub child: std::process::Child,
    pub socket: PathBuf,
    /// A 0755 directory for the socket, reachable by unprivileged peers.
    pub dir: tempfile::TempDir,
}

impl Daemon {
    /// Start a daemon on `env`'s root with a socket in a new directory.
    pub fn start(env: &Env, extra: &[&str]) -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("warren-daemon-test-")
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let socket = dir.path().join("warren.sock");
        Daemon::start_at(env, dir, socket, extra)
    }

    /// Start one on a given socket (a restart).
    pub fn start_at(env: &Env, dir: tempfile::TempDir, socket: PathBuf, extra: &[&str]) -> Daemon {
        let child = Command::new(daemon_exe())
            .env("WARREN_ROOT", env.root())
            .env("WARREN_RUN_DIR", env.root().join("run"))
            .env("WARREN_OCI_ROOT", env.root().join("oci"))
            .env_remove("WARREN_CGROUP")
            .env_remove("WARREN_STORAGE")
            .arg("--socket")
            .arg(&socket)
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let d = Daemon { child, socket, dir };
        let t = Instant::now();
        while UnixStream::connect(&d.socket).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the daemon did not listen on {} within 10 s",
                d.socket.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    /// SIGKILL it, keeping the socket directory for a restart.
    pub fn kill(mut self) -> (tempfile::TempDir, PathBuf) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        (dir, self.socket.clone())
    }

    /// A request with curl; (status, body).
    pub fn curl(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        curl_as(&self.socket, &[], method, path, body)
    }

    /// A request that must answer `want`; its body as JSON.
    #[track_caller]
    pub fn json(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        want: u16,
    ) -> serde_json::Value {
        let (status, text) = self.curl(method, path, body);
        assert_eq!(status, want, "{method} {path}: {text}");
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {text}"))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// curl over the socket, run through `wrap` (e.g. setpriv as another user).
pub fn curl_as(
    socket: &Path,
    wrap: &[&str],
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, String) {
    let (prog, pre) = match wrap {
        [] => ("curl", &[][..]),
        [p, rest @ ..] => (*p, rest),
    };
    let mut c = Command::new(prog);
    c.args(pre);
    if !wrap.is_empty() {
        c.arg("curl");
    }
    c.args(["-sS", "--max-time", "120", "--unix-socket"])
        .arg(socket)
        .args(["-X", method, "-w", "\n%{http_code}"]);
    if body.is_some() {
        c.args([
            "-H",
            "content-type: application/json",
            "--data-binary",
            "@-",
        ]);
    }
    c.arg(format!("http://warren{path}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("curl runs (apt-get install curl)");
    let mut stdin = child.stdin.take().expect("piped");
    let data = body.unwrap_or("").as_bytes().to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("curl ends");
    let _ = feeder.join();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        code.trim().parse().unwrap_or_else(|_| {
            panic!(
                "curl {method} {path}: no status: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        }),
        body.to_string(),
    )
}

/// A minimal HTTP/1.1 request over the socket (`Connection: close`): (status, body).
pub fn raw(
    socket: &Path,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    let b = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: warren\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    )?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let status = resp
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {resp:?}")))?;
    let body = resp
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Ok((status, body))
}

/// The state the CLI reports for `zone`.
pub fn cli_state(env: &Env, zone: &str) -> String {
    env.state(zone)
}

/// Poll `f` until it is true or `limit` passes.
#[track_caller]
pub fn wait_for(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < limit,
            "gave up after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
