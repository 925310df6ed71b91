//! The pod's shim socket, claimed without a race, and without waiting forever.
//!
//! Every container of a pod runs `start` with the same socket address: the first one
//! binds it and starts the server, the others find it served and answer with its
//! address. A socket file that refuses connections is a server that died, and is
//! replaced. But a socket also refuses between its `bind` and its `listen`: a `start`
//! arriving in that window of another's would take the new socket for stale, unlink it
//! and bind its own, leaving the first server listening on a path nobody can reach,
//! never shut down (a review finding).
//!
//! So every decision about the path is taken under an exclusive `flock(2)` on
//! `<socket>.lock` beside it ([`PathLock`]): `start`'s probe, the unlink of a stale
//! socket, the bind and the listen ([`claim`]), held until the server has the
//! listening socket; the server's unlink at its shutdown ([`release`]); and the
//! `delete` action's removal of a dead server's files ([`clean_stale`]). Under the
//! lock, a socket that refuses is never one that is about to listen, and a socket
//! file is only unlinked by its own server or after its server died.
//!
//! Nothing waits unbounded (a second review finding): the lock is taken by polling
//! (`LOCK_NB`) for at most [`LOCK_WAIT`], then the wait fails naming the holder (its
//! pid, command line and state, from `/proc`) and the remedy; and the probe is a
//! non-blocking connect, under which a server whose backlog is full counts as
//! serving (it lives) instead of holding the prober, and the lock, until it accepts.
//! A `start` or server that is stopped (SIGSTOP) or stuck while it holds the lock thus
//! costs the pod's later `start`s an error after [`LOCK_WAIT`], not a hang.
//!
//! The lock file goes away with the socket ([`release`]): a `start` that waited on
//! the removed file finds, once it holds the lock, that the path names another file
//! (or none), and opens the path again ([`PathLock::take`]). A server that dies
//! leaves both files; the `delete` action containerd runs after a shim died removes
//! them ([`clean_stale`]), and otherwise the next `start` of the pod replaces the
//! socket and reuses the lock file.
//!
//! A server whose [`release`] cannot get the lock within [`LOCK_WAIT`] (its holder is
//! stuck) still unlinks its socket, if the path still names that very socket file
//! (same device and inode as recorded at its bind, [`SocketFile`]), and leaves the
//! lock file. That unlink without the lock is safe: while the server listens, nobody
//! else unlinks its socket (a probe finds it serving, so nobody takes it for stale)
//! and nobody binds another on the path (`bind` fails while a file is there), so the
//! path cannot name a newer server's socket between the check and the unlink. The
//! lock file must stay: a stuck holder still has it locked, and a file removed under
//! it would let the next `start` lock a new file beside it, deciding about the path
//! at the same time as the stuck one if it resumes.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a `start` or a server's [`release`] waits for the socket's lock before it
/// gives up. Holders keep it for moments (a probe, a bind and a spawn; or an unlink),
/// so a wait this long means a stopped or stuck holder. containerd sets no bound of
/// its own on a shim's `start` (1.6 to 2.x run the binary and wait for its answer;
/// their timeouts cover a shim's load, cleanup and shutdown, not its start), and
/// kubelet's CRI deadline (`--runtime-request-timeout`, 2 minutes) ends its call but
/// not containerd's wait: this is the only bound, well inside kubelet's.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The longest pause between two tries of the lock.
const POLL_MAX: Duration = Duration::from_millis(20);

/// The lock file of the socket at `socket`: `<socket>.lock`.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut p = socket.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// The socket file a server bound (device and inode of the path right after the
/// bind): at its shutdown, the server unlinks the path only if it still names this
/// file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketFile {
    dev: u64,
    ino: u64,
}

impl SocketFile {
    /// The file that `path` names now.
    pub fn at(path: &Path) -> io::Result<SocketFile> {
        let m = std::fs::symlink_metadata(path)?;
        Ok(SocketFile {
            dev: m.dev(),
            ino: m.ino(),
        })
    }

    /// Whether `path` names this file (not another, and not none).
    pub fn is_at(self, path: &Path) -> bool {
        SocketFile::at(path).is_ok_and(|f| f == self)
    }

    /// The form [`SocketFile::parse`] reads (`start` passes it to the server in its
    /// environment): `<dev>:<ino>`.
    pub fn encode(self) -> String {
        format!("{}:{}", self.dev, self.ino)
    }

    /// The file [`SocketFile::encode`] wrote, or `None`.
    pub fn parse(s: &str) -> Option<SocketFile> {
        let (dev, ino) = s.split_once(':')?;
        Some(SocketFile {
            dev: dev.parse().ok()?,
            ino: ino.parse().ok()?,
        })
    }
}

/// The exclusive lock on a socket's path; released on drop.
#[derive(Debug)]
pub struct PathLock {
    _file: File,
    path: PathBuf,
}

impl PathLock {
    /// Take the lock of the socket at `socket`, waiting at most `wait`; past it, a
    /// `TimedOut` error naming the holder and the remedy.
    pub fn take(socket: &Path, wait: Duration) -> io::Result<PathLock> {
        match PathLock::try_take(socket, wait)? {
            Some(lock) => Ok(lock),
            None => Err(held_too_long(&lock_path(socket), wait)),
        }
    }

    /// Take the lock of the socket at `socket` within `wait` (zero: one try), or
    /// `None`. It polls (`LOCK_NB`, 1 ms doubling to 20 ms): a blocking `flock` could
    /// not be bounded without a signal.
    pub fn try_take(socket: &Path, wait: Duration) -> io::Result<Option<PathLock>> {
        let path = lock_path(socket);
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(1);
        loop {
            // Close-on-exec (std's default): the server that `start` spawns while
            // holding the lock must not hold it for its whole life.
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .custom_flags(warren_sys::libc::O_NOFOLLOW)
                .open(&path)?;
            loop {
                match file.try_lock() {
                    Ok(()) => break,
                    Err(TryLockError::WouldBlock) => {}
                    Err(TryLockError::Error(e)) => return Err(e),
                }
                let now = Instant::now();
                if now >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(pause.min(deadline - now));
                pause = (pause * 2).min(POLL_MAX);
            }
            // The holder before us may have removed the file ([`release`]): a lock on
            // an inode the path no longer names excludes nobody.
            let held = file.metadata()?;
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.dev() == held.dev() && m.ino() == held.ino() => {
                    return Ok(Some(PathLock { _file: file, path }))
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// A process's state letter from `/proc/<pid>/stat`, in words where it explains a
/// lock held too long.
fn state_of(pid: i32) -> Option<&'static str> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    match stat.rsplit(')').next()?.split_whitespace().next()? {
        "T" => Some("stopped"),
        "t" => Some("stopped by a tracer"),
        "D" => Some("in uninterruptible sleep"),
        _ => None,
    }
}

/// The error of a wait for the lock file `lock` that lasted `waited`: who holds it
/// (pid, command line, state) and what to do.
fn held_too_long(lock: &Path, waited: Duration) -> io::Error {
    let holders = warren::lock::holders(Path::new("/proc"), lock);
    let who = if holders.is_empty() {
        warren::lock::describe(&holders)
    } else {
        holders
            .iter()
            .map(|h| match state_of(h.pid) {
                Some(s) => format!("{h}, {s}"),
                None => h.to_string(),
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let fix = if holders.is_empty() {
        format!("find it with `fuser -v {}`", lock.display())
    } else {
        let pids: Vec<String> = holders.iter().map(|h| h.pid.to_string()).collect();
        format!(
            "resume it if it is stopped (`kill -CONT {0}`) or kill it (`kill {0}`)",
            pids.join(" ")
        )
    };
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "the socket's lock {} has been held for more than {} s by {who} (a `start` or \
             server of this pod that stopped or hangs while it decides about the socket): \
             {fix}; containerd's next attempt then goes on",
            lock.display(),
            waited.as_secs_f64(),
        ),
    )
}

/// What a socket path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// A server accepts connections there, or lives with its backlog full.
    Serving,
    /// A socket (or other file) that refuses them: under the lock, a dead server's.
    Stale,
    /// Nothing.
    Absent,
}

/// Connect to `path` without waiting (the probe runs under the lock: a blocking
/// connect to a server whose backlog is full would hold it until that server
/// accepts, forever if it is stopped).
fn probe(path: &Path) -> io::Result<Found> {
    match warren_sys::sock::connect_unix_now(path) {
        Ok(_) => Ok(Found::Serving),
        // The backlog is full: the server lives (a socket whose server died refuses),
        // it is only slow to accept, or stopped.
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Found::Serving),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(Found::Stale),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Found::Absent),
        Err(e) => Err(e),
    }
}

/// The outcome of [`claim`].
#[derive(Debug)]
pub enum Claim {
    /// Another server of the group listens on the path: answer with its address.
    Serving,
    /// Ours: the socket listens on the path. Keep the lock until the server holds
    /// the listener (or until the path is removed again, on failure).
    Bound {
        listener: UnixListener,
        lock: PathLock,
        /// The socket file, for the server's [`release`].
        socket: SocketFile,
    },
}

/// Take the socket path `path` for a new server, or find the server that has it;
/// the lock is waited for at most [`LOCK_WAIT`]. `between_bind_and_listen` runs with
/// the socket bound and not yet listening (a test stands there; `start` passes
/// nothing).
pub fn claim(path: &Path, between_bind_and_listen: impl FnOnce()) -> io::Result<Claim> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let lock = PathLock::take(path, LOCK_WAIT)?;
    match probe(path)? {
        Found::Serving => return Ok(Claim::Serving),
        Found::Stale => remove(path)?,
        Found::Absent => {}
    }
    let fd = warren_sys::sock::bind_unix(path)?;
    let socket = match SocketFile::at(path) {
        Ok(s) => s,
        Err(e) => {
            let _ = remove(path);
            return Err(e);
        }
    };
    between_bind_and_listen();
    if let Err(e) = warren_sys::sock::listen(fd.as_fd()) {
        let _ = remove(path);
        return Err(e);
    }
    Ok(Claim::Bound {
        listener: UnixListener::from(fd),
        lock,
        socket,
    })
}

/// Remove `path`; gone already is fine.
fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The outcome of a [`release`] that got the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The socket and its lock file are removed.
    Removed,
    /// The path names another file than the server's socket (or none): both files
    /// are left to whoever has them.
    NotOurs,
}

/// The server gives up its socket `own` at `path`, while it still listens (so the
/// path cannot be taken from it meanwhile, see the module's doc): under the lock,
/// waited for at most `wait`, the socket and its lock file are removed. The listener
/// is closed afterwards by the caller.
///
/// Without the lock in time, the socket is removed all the same if the path still
/// names `own`, the lock file is left (its holder still has it), and the error names
/// the holder.
pub fn release(path: &Path, own: SocketFile, wait: Duration) -> io::Result<Released> {
    match PathLock::try_take(path, wait)? {
        Some(lock) if own.is_at(path) => {
            remove_under(path, lock)?;
            Ok(Released::Removed)
        }
        Some(_) => Ok(Released::NotOurs),
        None => {
            let socket = if !own.is_at(path) {
                "left: it is not this server's".to_string()
            } else {
                match remove(path) {
                    Ok(()) => "removed".to_string(),
                    Err(e) => format!("not removed: {e}"),
                }
            };
            let e = held_too_long(&lock_path(path), wait);
            Err(io::Error::new(
                e.kind(),
                format!("{e} (the socket {socket}; the lock file stays)"),
            ))
        }
    }
}

/// Undo a [`claim`] whose server could not be started: the socket path is removed
/// under the lock still held.
pub fn abandon(path: &Path, lock: PathLock) {
    let _ = remove_under(path, lock);
}

/// Remove a dead server's socket at `path` and its lock file (the `delete` action,
/// which containerd runs after a shim died): under the lock, taken without waiting
/// (a holder is a `start` or a server deciding about the path now: the files are
/// theirs), and only if the socket refuses or is gone, as [`claim`] would find it.
/// Returns whether the files were removed.
pub fn clean_stale(path: &Path) -> io::Result<bool> {
    let gone = |p: &Path| std::fs::symlink_metadata(p).is_err();
    if gone(path) && gone(&lock_path(path)) {
        return Ok(false);
    }
    let Some(lock) = PathLock::try_take(path, Duration::ZERO)? else {
        return Ok(false);
    };
    match probe(path)? {
        Found::Serving => Ok(false),
        Found::Stale | Found::Absent => remove_under(path, lock).map(|()| true),
    }
}

/// Remove the socket at `path` and its lock file, holding `lock`, then let go: a
/// waiter finds its file gone and opens the path again.
fn remove_under(path: &Path, lock: PathLock) -> io::Result<()> {
    remove(path)?;
    remove(&lock.path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;
    use std::sync::mpsc;

    fn ino(path: &Path) -> u64 {
        std::fs::symlink_metadata(path).unwrap().ino()
    }

    /// Claim `path`, which nothing serves, for a server: its listener and socket file,
    /// the lock let go (as `start` does once the server holds the listener).
    fn bound(path: &Path) -> (UnixListener, SocketFile) {
        let Claim::Bound {
            listener,
            lock,
            socket,
        } = claim(path, || {}).unwrap()
        else {
            panic!("{} is served already", path.display())
        };
        drop(lock);
        (listener, socket)
    }

    /// How many descriptors of this process name `path` (a waiter for the lock has
    /// the lock file open while it polls; it shows in no `/proc/locks` line).
    fn opened(path: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == path))
            .count()
    }

    /// Wait until `n` descriptors name `path`, while `t` runs.
    fn until_opened<T>(path: &Path, n: usize, t: &std::thread::JoinHandle<T>) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while opened(path) < n {
            assert!(!t.is_finished(), "the waiter ended instead of waiting");
            assert!(
                Instant::now() < deadline,
                "the waiter never opened the lock"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The review's race, stood in deterministically: `start` A is between its bind
    /// and its listen (its socket refuses) when `start` B probes. B must wait for A,
    /// then find A serving; A's socket must stay on the path.
    #[test]
    fn a_start_between_anothers_bind_and_listen_waits_and_finds_it_serving() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let (in_window, a_in_window) = mpsc::channel();
        let (go_on, a_go_on) = mpsc::channel::<()>();
        let a = {
            let path = path.clone();
            std::thread::spawn(move || {
                claim(&path, || {
                    in_window.send(()).unwrap();
                    a_go_on.recv().unwrap();
                })
            })
        };
        a_in_window.recv().unwrap();
        let e = UnixStream::connect(&path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
        let a_socket = ino(&path);
        let b = {
            let path = path.clone();
            std::thread::spawn(move || claim(&path, || {}))
        };
        // B has the lock file open beside A's (it polls), and does not get through
        // while A holds it: if it did, it would have replaced A's socket (the bug).
        until_opened(&lock_path(&path), 2, &b);
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !b.is_finished(),
            "start B went on while A was between bind and listen: {:?}",
            b.join().unwrap()
        );
        assert_eq!(ino(&path), a_socket, "A's socket was replaced");
        go_on.send(()).unwrap();
        let Claim::Bound { listener, lock, .. } = a.join().unwrap().unwrap() else {
            panic!("A found a server")
        };
        // Until A lets go (its server has the socket), B waits.
        std::thread::sleep(Duration::from_millis(20));
        assert!(!b.is_finished());
        drop(lock);
        assert!(matches!(b.join().unwrap().unwrap(), Claim::Serving));
        assert_eq!(ino(&path), a_socket);
        let _c = UnixStream::connect(&path).unwrap();
        listener.accept().unwrap();
    }

    #[test]
    fn a_dead_servers_socket_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        drop(UnixListener::bind(&path).unwrap());
        assert_eq!(probe(&path).unwrap(), Found::Stale);
        let (listener, socket) = bound(&path);
        assert!(socket.is_at(&path));
        let _c = UnixStream::connect(&path).unwrap();
        listener.accept().unwrap();
        // While it listens, the next claim finds it.
        assert!(matches!(claim(&path, || {}).unwrap(), Claim::Serving));
    }

    /// Review finding: a blocking probe of a server whose backlog is full (a slow or
    /// stopped server) held `start`, and the lock, until it accepted. The probe must
    /// count it as serving (it lives) at once.
    #[test]
    fn a_full_backlog_counts_as_serving_without_waiting() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let fd = warren_sys::sock::bind_unix(&path).unwrap();
        warren_sys::sock::listen_backlog(fd.as_fd(), 0).unwrap();
        // A backlog of 0 holds one pending connection; the next finds it full.
        let _pending = warren_sys::sock::connect_unix_now(&path).unwrap();
        let e = warren_sys::sock::connect_unix_now(&path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        let t = Instant::now();
        assert_eq!(probe(&path).unwrap(), Found::Serving);
        assert!(matches!(claim(&path, || {}).unwrap(), Claim::Serving));
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        drop(fd);
    }

    /// Review finding: the lock's wait had no bound, so a `start` stopped while it
    /// held the lock held every later `start` of the pod. The wait now ends within
    /// its bound with an error naming the holder (here this very process).
    #[test]
    fn a_lock_held_too_long_fails_the_wait_in_time_naming_the_holder() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let held = PathLock::take(&path, LOCK_WAIT).unwrap();
        let wait = Duration::from_millis(300);
        let t = Instant::now();
        let e = PathLock::take(&path, wait).unwrap_err();
        let took = t.elapsed();
        assert!(
            took >= wait && took < wait + Duration::from_secs(2),
            "{took:?}"
        );
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        let msg = e.to_string();
        let me = std::process::id();
        assert!(msg.contains(&format!("pid {me} (")), "{msg}");
        assert!(msg.contains(&format!("kill -CONT {me}")), "{msg}");
        assert!(
            msg.contains(&lock_path(&path).display().to_string()),
            "{msg}"
        );
        // One try, no wait.
        assert!(PathLock::try_take(&path, Duration::ZERO).unwrap().is_none());
        drop(held);
        assert!(PathLock::try_take(&path, Duration::ZERO).unwrap().is_some());
    }

    #[test]
    fn release_removes_both_files_and_a_waiter_locks_the_new_one() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let (listener, _) = bound(&path);
        // A waiter queued on the lock file that release is about to remove.
        let held = PathLock::take(&path, LOCK_WAIT).unwrap();
        let old = ino(&lock_path(&path));
        // Kept open, so that its inode number is not reused for the new file.
        let _old_file = File::open(lock_path(&path)).unwrap();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                let l = PathLock::take(&path, LOCK_WAIT).unwrap();
                let now = ino(&lock_path(&path));
                drop(l);
                now
            })
        };
        until_opened(&lock_path(&path), 3, &waiter);
        // The server lets go of its socket (what release does once it has the lock).
        remove_under(&path, held).unwrap();
        drop(listener);
        assert!(!path.exists());
        // The waiter woke on the removed file, went round and locked a new one, which
        // the path names.
        let relocked = waiter.join().unwrap();
        assert_ne!(relocked, old);
        assert_eq!(ino(&lock_path(&path)), relocked);
        std::fs::remove_file(lock_path(&path)).unwrap();
        // And release itself, with nobody waiting.
        let (listener, socket) = bound(&path);
        assert_eq!(
            release(&path, socket, LOCK_WAIT).unwrap(),
            Released::Removed
        );
        drop(listener);
        assert!(!path.exists() && !lock_path(&path).exists());
    }

    /// Review finding: the server's release at shutdown waited for the lock without
    /// a bound. Now, past the bound, it removes its own socket (only if the path
    /// still names it), leaves the lock file to its holder and says who that is; and
    /// it never unlinks a newer server's socket, with or without the lock.
    #[test]
    fn release_without_the_lock_removes_only_its_own_socket_and_keeps_the_lock_file() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let wait = Duration::from_millis(200);
        let (listener, socket) = bound(&path);
        // A stuck holder.
        let stuck = PathLock::take(&path, LOCK_WAIT).unwrap();
        let t = Instant::now();
        let e = release(&path, socket, wait).unwrap_err();
        assert!(
            t.elapsed() < wait + Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("pid {} (", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains("the socket removed"), "{msg}");
        assert!(!path.exists(), "its own socket stays");
        assert!(lock_path(&path).exists(), "the held lock file was removed");
        drop(listener);
        drop(stuck);

        // Server A's socket was replaced by a newer server B's (as after a manual
        // removal): A's release leaves B's socket, with the lock and without.
        let (a, a_socket) = bound(&path);
        std::fs::remove_file(&path).unwrap();
        let b = UnixListener::bind(&path).unwrap();
        let b_socket = SocketFile::at(&path).unwrap();
        assert_ne!(a_socket, b_socket);
        let stuck = PathLock::take(&path, LOCK_WAIT).unwrap();
        let msg = release(&path, a_socket, wait).unwrap_err().to_string();
        assert!(msg.contains("it is not this server's"), "{msg}");
        assert!(b_socket.is_at(&path), "B's socket was unlinked");
        drop(stuck);
        assert_eq!(
            release(&path, a_socket, LOCK_WAIT).unwrap(),
            Released::NotOurs
        );
        assert!(b_socket.is_at(&path), "B's socket was unlinked");
        assert!(lock_path(&path).exists());
        let _c = UnixStream::connect(&path).unwrap();
        b.accept().unwrap();
        drop(a);
    }

    /// Review finding: a killed server's lock file stayed for good. The `delete`
    /// action's cleanup removes a dead server's socket and lock file, and nothing
    /// that a live server or a lock holder has.
    #[test]
    fn clean_stale_removes_a_dead_servers_files_only() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let lock_file = lock_path(&path);
        // Nothing there: nothing created.
        assert!(!clean_stale(&path).unwrap());
        assert!(!lock_file.exists());
        let (listener, _) = bound(&path);
        // Served: left.
        assert!(!clean_stale(&path).unwrap());
        assert!(path.exists() && lock_file.exists());
        // The server dies (its socket refuses), while a `start` holds the lock: left
        // to that `start`.
        drop(listener);
        let held = PathLock::take(&path, LOCK_WAIT).unwrap();
        assert!(!clean_stale(&path).unwrap());
        assert!(path.exists() && lock_file.exists());
        drop(held);
        // Dead, lock free: both removed.
        assert!(clean_stale(&path).unwrap());
        assert!(!path.exists() && !lock_file.exists());
        // A lock file alone (a server that timed out on its release): removed.
        drop(PathLock::take(&path, LOCK_WAIT).unwrap());
        assert!(lock_file.exists());
        assert!(clean_stale(&path).unwrap());
        assert!(!lock_file.exists());
    }

    #[test]
    fn a_socket_file_survives_the_environment() {
        let f = SocketFile { dev: 2049, ino: 77 };
        assert_eq!(SocketFile::parse(&f.encode()), Some(f));
        assert_eq!(SocketFile::parse("2049"), None);
        assert_eq!(SocketFile::parse("a:1"), None);
    }
}
