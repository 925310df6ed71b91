//! The agent's control socket: how `halt`, `reboot` and `delete` ask a running agent to
//! let go of a zone's sockets before they return, and `resume` (with the wake of
//! `login`, `exec` and `cp`) before it thaws the zone (docs/suspend.md, "One wait for
//! all suspended zones").
//!
//! The agent holds duplicates of a suspended zone's listeners ([`super::wake_hold`]).
//! It lets go when the zone's init exits, but only once its loop sees that, after the
//! halt has returned: a host-network zone booted at once could find its port still
//! bound by the agent's copy (`EADDRINUSE`). So a halt of a zone that was suspended
//! (its record said so, or its cgroup was frozen, when the halt began: the agent holds
//! nothing of any other zone) asks, once the zone's processes are gone: one JSON line
//! `{"release":"<zone>","init":<pid>}` over the unix socket
//! `<root>/locks/agent-agent.sock` (beside the agent's lock; the directory is root's
//! alone), answered `{"released":true|false}` (false: nothing of that zone was held)
//! once the agent's closer thread has closed its duplicates. The init pid names the
//! suspension: a request that arrives late (the agent was busy) never releases a
//! holding of the same zone booted and suspended again since, whose init differs. The
//! listener sits in the agent's one epoll set, so the answer comes at once while the
//! agent waits, or after the tick in hand. The agent takes at most [`PER_WAKE`]
//! requests a wake-up; an accept that fails (out of descriptors: the connection stays
//! queued and the level-triggered set would return at once forever) is said and takes
//! the socket out of the set until the next tick.
//!
//! A `resume` asks the same, before it thaws the zone ([`release_for_resume`]): the
//! agent would otherwise let go only at its next tick (when it reads the resume in the
//! journal), and a halt right after the resume — of a zone no longer suspended, so it
//! does not ask — would leave the port bound meanwhile. The resume holds the zone's
//! lock while it asks and thaws, and the agent takes nothing from a zone whose lock a
//! command holds, so it cannot hold the zone again between its answer and the thaw.
//!
//! Never a hang: the connect does not wait (a full backlog is an answer too), and the
//! whole exchange is bounded by [`ANSWER_TIMEOUT`]; then the verb goes on and says so.
//! No agent (no socket, or a stale one: refused) costs one failed `connect`. The agent
//! never asks itself (its own evictions halt zones, its wakes resume them): the
//! peer's pid says who listens.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::layout::Layout;

/// How long a halt or a resume waits for the agent's answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the agent waits for a request's line once a client connected.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(100);

/// Requests the agent takes a wake-up; more wait for the next.
pub const PER_WAKE: usize = 8;

/// A halt's request: let go of `zone`'s holding, if its init is `init`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub zone: String,
    /// The suspension's init; `None` (a client that did not say): any holding of the zone.
    pub init: Option<i32>,
}

impl Request {
    /// Whether a holding of zone `zone` whose init is `init` is the one asked for.
    pub fn names(&self, zone: &str, init: i32) -> bool {
        self.zone == zone && self.init.is_none_or(|i| i == init)
    }
}

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
/// sockets (held while its init was `init`); at most `timeout`.
pub fn ask_release(layout: &Layout, zone: &str, init: Option<i32>, timeout: Duration) -> Asked {
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
    let line = match init {
        Some(i) => serde_json::json!({ "release": zone, "init": i }),
        None => serde_json::json!({ "release": zone }),
    };
    let line = format!("{line}\n");
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
            return Asked::NoAnswer(
                pid,
                format!("no answer within {:.1} s", timeout.as_secs_f64()),
            );
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
                return Asked::NoAnswer(
                    pid,
                    format!("no answer within {:.1} s", timeout.as_secs_f64()),
                )
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

/// The request a line makes (pure).
pub fn request(line: &[u8]) -> Option<Request> {
    let v: serde_json::Value = serde_json::from_slice(line.trim_ascii()).ok()?;
    let init = match v.get("init") {
        None | Some(serde_json::Value::Null) => None,
        Some(i) => Some(i32::try_from(i.as_i64()?).ok()?),
    };
    Some(Request {
        zone: v.get("release")?.as_str()?.to_string(),
        init,
    })
}

/// Whether an answer line says something was released (pure); `None`: not an answer.
pub fn answer(line: &[u8]) -> Option<bool> {
    let v: serde_json::Value = serde_json::from_slice(line.trim_ascii()).ok()?;
    v.get("released")?.as_bool()
}

/// A halt's request ([`ask_release`]) for the suspension whose init was `init`; a
/// warning for the verb's outcome when the agent did not answer (`done`: what the verb
/// did, "halted", "rebooted", "deleted"): the verb is done all the same.
pub fn release_for_halt(layout: &Layout, zone: &str, init: i32, done: &str) -> Option<String> {
    release_for(
        layout,
        zone,
        init,
        done,
        "its loop sees the zone's init gone",
    )
}

/// A resume's request, made before it thaws the zone (under the zone's lock, which
/// keeps the agent from holding the zone again meanwhile): a halt right after the
/// resume then finds nothing of the zone held. A warning for the resume's outcome when
/// the agent did not answer: the resume goes on all the same.
pub fn release_for_resume(layout: &Layout, zone: &str, init: i32) -> Option<String> {
    release_for(
        layout,
        zone,
        init,
        "resumed",
        "its next tick reads the resume from the journal",
    )
}

/// [`ask_release`] for the suspension whose init was `init`, bounded by
/// [`ANSWER_TIMEOUT`]; no agent is no warning ([`no_answer_warning`]).
fn release_for(layout: &Layout, zone: &str, init: i32, done: &str, until: &str) -> Option<String> {
    match ask_release(layout, zone, Some(init), ANSWER_TIMEOUT) {
        Asked::NoAnswer(pid, why) => Some(no_answer_warning(done, pid, &why, until)),
        Asked::NoAgent | Asked::Itself | Asked::Released(_) => None,
    }
}

/// What a verb says when the agent did not confirm it let go (pure): `done`, what the
/// verb did; `until`, when the agent lets go on its own.
pub fn no_answer_warning(done: &str, pid: Option<i32>, why: &str, until: &str) -> String {
    format!(
        "{done}, but the agent{} did not confirm that it let go of the zone's sockets ({why}); it lets go when {until}, and until then a boot that binds the same address can fail with EADDRINUSE",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )
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

    /// The requests waiting now, at most [`PER_WAKE`]: (the request, the connection
    /// to answer on), and the error that stopped the accepts if one did (not
    /// `WouldBlock`: none left). A client that sends nothing within
    /// [`REQUEST_TIMEOUT`] or garbage is dropped.
    pub fn requests(&self) -> (Vec<(Request, UnixStream)>, Option<io::Error>) {
        requests_from(|| self.listener.accept().map(|(s, _)| s))
    }
}

/// [`Control::requests`] over `accept`.
fn requests_from(
    mut accept: impl FnMut() -> io::Result<UnixStream>,
) -> (Vec<(Request, UnixStream)>, Option<io::Error>) {
    let mut out = Vec::new();
    for _ in 0..PER_WAKE {
        let mut s = match accept() {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            // ECONNABORTED: that client gave up; the next may be there.
            Err(e)
                if e.kind() == io::ErrorKind::Interrupted
                    || e.raw_os_error() == Some(warren_sys::libc::ECONNABORTED) =>
            {
                continue
            }
            Err(e) => return (out, Some(e)),
        };
        {
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
            if let Some(r) = request(&line[..end]) {
                out.push((r, s));
            }
        }
    }
    (out, None)
}

impl Control {
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
        let r = |zone: &str, init: Option<i32>| {
            Some(Request {
                zone: zone.into(),
                init,
            })
        };
        assert_eq!(request(br#"{"release":"web1"}"#), r("web1", None));
        assert_eq!(request(b"{\"release\":\"web1\"}\r\n"), r("web1", None));
        assert_eq!(
            request(br#"{"release":"web1","init":4242}"#),
            r("web1", Some(4242))
        );
        assert_eq!(request(br#"{"release":1}"#), None);
        assert_eq!(request(br#"{"release":"web1","init":"x"}"#), None);
        assert_eq!(request(br#"{"release":"web1","init":99999999999}"#), None);
        assert_eq!(request(b"release web1"), None);
        assert!(request(b"").is_none());
        assert_eq!(answer(b"{\"released\":true}\n"), Some(true));
        assert_eq!(answer(br#"{"released":false}"#), Some(false));
        assert_eq!(answer(b""), None);
    }

    /// A late request names the suspension it was for: the same zone held again under
    /// another init is not released by it.
    #[test]
    fn a_request_releases_only_the_suspension_it_names() {
        let old = Request {
            zone: "web1".into(),
            init: Some(100),
        };
        assert!(old.names("web1", 100));
        assert!(!old.names("web1", 200), "a later suspension of the zone");
        assert!(!old.names("web2", 100));
        let any = Request {
            zone: "web1".into(),
            init: None,
        };
        assert!(any.names("web1", 200));
    }

    /// No agent, a listener in this process ("itself"), a stale socket file, and an
    /// agent that accepts and never answers (another process): each call returns, the
    /// last within its timeout and a margin, measured.
    #[test]
    fn a_halt_never_waits_longer_than_its_timeout() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout::new(tmp.path());
        std::fs::create_dir_all(layout.locks()).unwrap();
        let ask = |t: Duration| ask_release(&layout, "z", Some(1), t);
        assert_eq!(ask(Duration::from_millis(200)), Asked::NoAgent);
        let c = Control::bind(&layout).unwrap();
        assert_eq!(ask(Duration::from_millis(200)), Asked::Itself);
        drop(c);
        assert!(!socket_path(&layout).exists());
        // A stale socket file (a killed agent): refused, so no agent.
        let stale = UnixListener::bind(socket_path(&layout)).unwrap();
        drop(stale);
        assert_eq!(ask(Duration::from_millis(200)), Asked::NoAgent);
        std::fs::remove_file(socket_path(&layout)).unwrap();
        // An agent that accepts and never answers: another process, so that the
        // socket's peer is not this one.
        let path = socket_path(&layout);
        let script = format!(
            "import socket, sys, time\n\
            s = socket.socket(socket.AF_UNIX)\n\
            s.bind({:?})\n\
            s.listen(8)\n\
            print('listening', flush=True)\n\
            c, _ = s.accept()\n\
            time.sleep(60)\n",
            path.to_str().unwrap()
        );
        let mut stuck = match std::process::Command::new("python3")
            .args(["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                panic!("this test needs python3 on the host for an agent that never answers: {e}")
            }
        };
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(stuck.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "listening");
        let timeout = Duration::from_millis(500);
        let t = Instant::now();
        let r = ask(timeout);
        let took = t.elapsed();
        let _ = stuck.kill();
        let _ = stuck.wait();
        assert!(
            matches!(&r, Asked::NoAnswer(Some(p), why) if *p == stuck.id() as i32 && why == "no answer within 0.5 s"),
            "{r:?}"
        );
        assert!(took >= timeout, "{took:?}");
        assert!(
            took < timeout + Duration::from_secs(2),
            "asking an agent that never answers took {took:?} (timeout {timeout:?})"
        );
    }

    /// At most [`PER_WAKE`] requests a wake-up, and an accept error stops the round and
    /// is returned (the caller says it and backs off) rather than ending it silently.
    #[test]
    fn requests_are_capped_a_wake_up_and_accept_errors_are_returned() {
        let mut clients = Vec::new();
        let mut n = 0;
        let (out, err) = requests_from(|| {
            n += 1;
            let (a, mut b) = UnixStream::pair()?;
            std::io::Write::write_all(&mut b, br#"{"release":"z"}"#)?;
            b.shutdown(std::net::Shutdown::Write)?;
            clients.push(b);
            Ok(a)
        });
        assert_eq!(out.len(), PER_WAKE);
        assert_eq!(n, PER_WAKE);
        assert!(err.is_none());
        let mut calls = 0;
        let (out, err) = requests_from(|| {
            calls += 1;
            Err(io::Error::from_raw_os_error(warren_sys::libc::EMFILE))
        });
        assert!(out.is_empty());
        assert_eq!(calls, 1, "an accept error ends the round");
        assert_eq!(
            err.and_then(|e| e.raw_os_error()),
            Some(warren_sys::libc::EMFILE)
        );
        let (out, err) = requests_from(|| Err(io::ErrorKind::WouldBlock.into()));
        assert!(out.is_empty() && err.is_none());
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
