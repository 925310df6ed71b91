//! The pod's shim socket, claimed without a race.
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
//! listening socket; and the server's unlink at its shutdown ([`release`]). Under the
//! lock, a socket that refuses is never one that is about to listen, and a socket
//! file is only unlinked by its own server or after its server died.
//!
//! The lock file goes away with the socket ([`release`]): a `start` that waited on
//! the removed file finds, once it holds the lock, that the path names another file
//! (or none), and opens the path again ([`PathLock::take`]). A server that dies
//! leaves both files; the next `start` replaces the socket and reuses the lock file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// The lock file of the socket at `socket`: `<socket>.lock`.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut p = socket.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// The exclusive lock on a socket's path; released on drop.
#[derive(Debug)]
pub struct PathLock {
    _file: File,
    path: PathBuf,
}

impl PathLock {
    /// Wait for the lock of the socket at `socket` (the holders keep it for a bind and
    /// a spawn, or an unlink: moments).
    pub fn take(socket: &Path) -> io::Result<PathLock> {
        let path = lock_path(socket);
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
            file.lock()?;
            // The holder before us may have removed the file ([`release`]): a lock on
            // an inode the path no longer names excludes nobody.
            let held = file.metadata()?;
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.dev() == held.dev() && m.ino() == held.ino() => {
                    return Ok(PathLock { _file: file, path })
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// What a socket path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// A server accepts connections there.
    Serving,
    /// A socket (or other file) that refuses them: under the lock, a dead server's.
    Stale,
    /// Nothing.
    Absent,
}

fn probe(path: &Path) -> io::Result<Found> {
    match UnixStream::connect(path) {
        Ok(_) => Ok(Found::Serving),
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
    },
}

/// Take the socket path `path` for a new server, or find the server that has it.
/// `between_bind_and_listen` runs with the socket bound and not yet listening (a
/// test stands there; `start` passes nothing).
pub fn claim(path: &Path, between_bind_and_listen: impl FnOnce()) -> io::Result<Claim> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let lock = PathLock::take(path)?;
    match probe(path)? {
        Found::Serving => return Ok(Claim::Serving),
        Found::Stale => remove(path)?,
        Found::Absent => {}
    }
    let fd = warren_sys::sock::bind_unix(path)?;
    between_bind_and_listen();
    if let Err(e) = warren_sys::sock::listen(fd.as_fd()) {
        let _ = remove(path);
        return Err(e);
    }
    Ok(Claim::Bound {
        listener: UnixListener::from(fd),
        lock,
    })
}

/// Remove `path`; gone already is fine.
fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The server gives up its socket, while it still listens (so, under the lock, the
/// path is still its own): the socket and its lock file are removed. The listener is
/// closed afterwards by the caller.
pub fn release(path: &Path) -> io::Result<()> {
    remove_under(path, PathLock::take(path)?)
}

/// Undo a [`claim`] whose server could not be started: the socket path is removed
/// under the lock still held.
pub fn abandon(path: &Path, lock: PathLock) {
    let _ = remove_under(path, lock);
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
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    fn ino(path: &Path) -> u64 {
        std::fs::symlink_metadata(path).unwrap().ino()
    }

    /// Whether `/proc/locks` shows a process blocked on a lock of the file with inode
    /// `ino` (a waiter's line: `N: -> FLOCK  ADVISORY  WRITE pid maj:min:ino ...`).
    fn someone_waits_on(ino: u64) -> bool {
        let locks = std::fs::read_to_string("/proc/locks").unwrap();
        locks.lines().any(|l| {
            l.contains("->")
                && l.split_whitespace()
                    .any(|f| f.rsplit(':').next() == Some(&ino.to_string()) && f.contains(':'))
        })
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
        // B is blocked on A's lock (seen in /proc/locks), or it got through: the bug.
        let lock_ino = ino(&lock_path(&path));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !someone_waits_on(lock_ino) {
            assert!(
                !b.is_finished(),
                "start B went on while A was between bind and listen: {:?}",
                b.join().unwrap()
            );
            assert!(Instant::now() < deadline, "start B neither waits nor ends");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(ino(&path), a_socket, "A's socket was replaced");
        go_on.send(()).unwrap();
        let Claim::Bound { listener, lock } = a.join().unwrap().unwrap() else {
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
        let Claim::Bound { listener, lock } = claim(&path, || {}).unwrap() else {
            panic!("a dead socket taken for a server")
        };
        drop(lock);
        let _c = UnixStream::connect(&path).unwrap();
        listener.accept().unwrap();
        // While it listens, the next claim finds it.
        assert!(matches!(claim(&path, || {}).unwrap(), Claim::Serving));
    }

    #[test]
    fn release_removes_both_files_and_a_waiter_locks_the_new_one() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let Claim::Bound { listener, lock } = claim(&path, || {}).unwrap() else {
            panic!("nothing served there")
        };
        drop(lock);
        // A waiter queued on the lock file that release is about to remove.
        let held = PathLock::take(&path).unwrap();
        let old = ino(&lock_path(&path));
        // Kept open, so that its inode number is not reused for the new file.
        let _old_file = File::open(lock_path(&path)).unwrap();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                let l = PathLock::take(&path).unwrap();
                let now = ino(&lock_path(&path));
                drop(l);
                now
            })
        };
        while !someone_waits_on(old) {
            assert!(!waiter.is_finished());
            std::thread::sleep(Duration::from_millis(1));
        }
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
        let Claim::Bound { listener, lock } = claim(&path, || {}).unwrap() else {
            panic!("nothing served there")
        };
        drop(lock);
        release(&path).unwrap();
        drop(listener);
        assert!(!path.exists() && !lock_path(&path).exists());
    }
}
