//! The agent's control socket: how `halt`, `reboot` and `delete` ask a running agent to
//! let go of a zone's sockets before they return (docs/suspend.md, "One wait for all
//! suspended zones").
//!
//! The agent holds duplicates of a suspended zone's listeners ([`super::wake_hold`]).
//! It lets go when the zone's init exits, but only once its loop sees that, after the
//! halt has returned: a host-network zone booted at once could find its port still
//! bound by the agent's copy (`EADDRINUSE`). So a halt asks, once the zone's processes
//! are gone: one JSON line `{"release":"<zone>"}` over the unix socket
//! `<root>/locks/agent-agent.sock` (beside the agent's lock; the directory is root's
//! alone), answered `{"released":true|false}` (false: nothing of that zone was held)
//! once the agent has closed its duplicates. The listener sits in the agent's one
//! epoll set, so the answer comes at once while the agent waits, or after the tick in
//! hand.
//!
//! Never a hang: the connect does not wait (a full backlog is an answer too), and the
//! whole exchange is bounded by [`ANSWER_TIMEOUT`]; then the halt goes on and says so.
//! No agent (no socket, or a stale one: refused) costs one failed `connect`. The agent
//! never asks itself (its own evictions halt zones): the peer's pid says who listens.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::layout::Layout;

/// How long a halt waits for the agent's answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the agent waits for a request's line once a client connected.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(100);

/// The socket's path: beside the agent's lock.
pub fn socket_path(layout: &Layout) -> PathBuf {
    layout.locks().join("agent-agent.sock")
}

/// A path to `path` that fits a unix socket address (108 bytes): itself, or, for a
/// deep state root, the same file through `/proc/self/fd/N/` of its directory (the
/// returned file keeps N open; keep it while the path is used).
fn addressable(path: &Path) -> io::Result<(PathBuf, Option<std::fs::File>)> {
    if path.as_os_str().len() < 100 {
        return Ok((path.to_path_buf(), None));
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok((path.to_path_buf(), None));
    };
    let d = std::fs::File::open(dir)?;
    use std::os::fd::AsRawFd;
    let short = PathBuf::from(format!("/proc/self/fd/{}", d.as_raw_fd())).join(name);
    Ok((short, Some(d)))
}

/// What a halt's request came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// No agent listens on this root.
    NoAgent,
    /// This process is the agent (it lets go of its own evictions itself).
    Itself,
    /// The agent answered: whether it held (and has now let go of) anything of the zone.
    Released(bool),
    /// The agent (pid, if known) did not answer in time, or the exchange failed.
    NoAnswer(Option<i32>, String),
}

/// Ask the agent running on `layout`'s root, if one does, to let go of zone `zone`'s
/// sockets; at most `timeout`.
pub fn ask_release(layout: &Layout, zone: &str, timeout: Duration) -> Asked {
    let deadline = Instant::now() + timeout;
    let path = socket_path(layout);
    let (addr, _dir) = match addressable(&path) {
        Ok(a) => a,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Asked::NoAgent,
        Err(e) => return Asked::NoAnswer(None, format!("{}: {e}", path.display())),
    };
    let fd = match warren_sys::sock::connect_unix_now(&addr) {
        Ok(fd) => fd,
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(warren_sys::libc::ENOENT | warren_sys::libc::ECONNREFUSED)
            ) =>
        {
            return Asked::NoAgent
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            return Asked::NoAnswer(None, "its control socket's backlog is full".into())
        }
        Err(e) => return Asked::NoAnswer(None, format!("connecting to {}: {e}", path.display())),
    };
    let pid = warren_sys::sock::peer_pid(fd.as_fd()).ok();
    if pid == Some(std::process::id() as i32) {
        return Asked::Itself;
    }
    let failed = |e: io::Error| Asked::NoAnswer(pid, e.to_string());
    let mut s = UnixStream::from(fd);
    let line = format!("{}\n", serde_json::json!({ "release": zone }));
    if let Err(e) = s
        .set_nonblocking(false)
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .and_then(|()| s.write_all(line.as_bytes()))
    {
        return failed(e);
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Asked::NoAnswer(pid, format!("no answer within {} s", timeout.as_secs()));
        }
        if let Err(e) = s.set_read_timeout(Some(left)) {
            return failed(e);
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.contains(&b'\n') || got.len() > 4096 {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Asked::NoAnswer(pid, format!("no answer within {} s", timeout.as_secs()))
            }
            Err(e) => return failed(e),
        }
    }
    match answer(&got) {
        Some(released) => Asked::Released(released),
        None => Asked::NoAnswer(
            pid,
            format!(
                "an answer it could not read: {:?}",
                String::from_utf8_lossy(&got)
            ),
        ),
    }
}

/// The zone a request line names (pure).
pub fn request(line: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(line.trim_ascii()).ok()?;
    Some(v.get("release")?.as_str()?.to_string())
}

/// Whether an answer line says something was released (pure); `None`: not an answer.
pub fn answer(line: &[u8]) -> Option<bool> {
    let v: serde_json::Value = serde_json::from_slice(line.trim_ascii()).ok()?;
    v.get("released")?.as_bool()
}

/// A halt's request ([`ask_release`]) with what it came to said on stderr when the agent
/// did not answer: the halt is done all the same.
pub fn release_for_halt(layout: &Layout, zone: &str) {
    if let Asked::NoAnswer(pid, why) = ask_release(layout, zone, ANSWER_TIMEOUT) {
        eprintln!(
            "warren: zone '{zone}': halted, but the agent{} did not confirm that it let go of the zone's sockets ({why}); it lets go when its loop sees the zone's init gone, and until then a boot that binds the same address can fail with EADDRINUSE",
            pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
        );
    }
}

/// The agent's end: a listener in its epoll set, removed when dropped.
pub struct Control {
    listener: UnixListener,
    path: PathBuf,
}

impl Control {
    /// Listen on `layout`'s control socket. The caller holds the root's agent lock, so
    /// a socket file already there is a dead agent's: replaced.
    pub fn bind(layout: &Layout) -> io::Result<Control> {
        let path = socket_path(layout);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let (addr, _dir) = addressable(&path)?;
        let listener = UnixListener::bind(&addr)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        Ok(Control { listener, path })
    }

    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.listener.as_fd()
    }

    /// Every request waiting now: (the zone named, the connection to answer on). A
    /// client that sends nothing within [`REQUEST_TIMEOUT`] or garbage is dropped.
    pub fn requests(&self) -> Vec<(String, UnixStream)> {
        let mut out = Vec::new();
        while let Ok((mut s, _)) = self.listener.accept() {
            let mut line = Vec::new();
            let mut buf = [0u8; 256];
            let deadline = Instant::now() + REQUEST_TIMEOUT;
            let ok = s.set_nonblocking(false).is_ok();
            while ok && !line.contains(&b'\n') && line.len() <= 4096 {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
                    break;
                }
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => line.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let end = line.iter().position(|b| *b == b'\n').unwrap_or(line.len());
            if let Some(zone) = request(&line[..end]) {
                out.push((zone, s));
            }
        }
        out
    }

    /// Answer a request: `released` says whether anything of the zone was held.
    pub fn answer(s: &UnixStream, released: bool) {
        let line = format!("{}\n", serde_json::json!({ "released": released }));
        // A client that gave up is no error of the agent's (and never a SIGPIPE).
        let _ = warren_sys::sock::send_nosignal(s.as_fd(), line.as_bytes());
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_are_one_json_line() {
        assert_eq!(request(br#"{"release":"web1"}"#).as_deref(), Some("web1"));
        assert_eq!(
            request(b"{\"release\":\"web1\"}\r\n").as_deref(),
            Some("web1")
        );
        assert_eq!(request(br#"{"release":1}"#), None);
        assert_eq!(request(b"release web1"), None);
        assert_eq!(answer(b"{\"released\":true}\n"), Some(true));
        assert_eq!(answer(br#"{"released":false}"#), Some(false));
        assert_eq!(answer(b""), None);
    }

    /// A round trip with a listener in this process (then the peer is "itself"), no
    /// agent at all, and an agent that never answers: bounded.
    #[test]
    fn a_halt_never_waits_longer_than_its_timeout() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path());
        std::fs::create_dir_all(layout.locks()).unwrap();
        assert_eq!(
            ask_release(&layout, "z", Duration::from_millis(200)),
            Asked::NoAgent
        );
        let c = Control::bind(&layout).unwrap();
        assert_eq!(
            ask_release(&layout, "z", Duration::from_millis(200)),
            Asked::Itself
        );
        drop(c);
        assert!(!socket_path(&layout).exists());
        // A stale socket file (a killed agent): refused, so no agent.
        let stale = UnixListener::bind(socket_path(&layout)).unwrap();
        drop(stale);
        assert_eq!(
            ask_release(&layout, "z", Duration::from_millis(200)),
            Asked::NoAgent
        );
        assert!(request(b"").is_none());
    }

    #[test]
    fn a_deep_root_is_reached_through_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("d".repeat(60)).join("e".repeat(60));
        std::fs::create_dir_all(&deep).unwrap();
        let path = deep.join("agent.sock");
        let (addr, dir) = addressable(&path).unwrap();
        assert!(dir.is_some() && addr.as_os_str().len() < 100, "{addr:?}");
        let l = UnixListener::bind(&addr).unwrap();
        assert!(path.exists());
        drop(l);
    }
}
