//! Kernel notifications for a watcher loop: epoll, eventfd and inotify.
//!
//! One thread can wait on many sources at once: an [`Epoll`] holds eventfds (a cgroup
//! v1 `cgroup.event_control` registration signals one) and an [`Inotify`] instance
//! (cgroup v2's `memory.events` is modified on each OOM event), each added with a
//! token the wait hands back. Every descriptor is close-on-exec and non-blocking, so
//! none reaches a child and a read never stalls the loop. Adding and removing
//! descriptors from another thread while one waits is allowed (epoll_ctl and
//! inotify_add_watch are thread-safe).

use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use crate::cvt;

/// An epoll instance.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// Readable (`EPOLLIN`).
pub const IN: u32 = libc::EPOLLIN as u32;
/// Edge-triggered: one event per change of readiness, not one per wait while ready.
pub const EDGE: u32 = libc::EPOLLET as u32;

impl Epoll {
    /// `epoll_create1(EPOLL_CLOEXEC)`.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes a flag word and returns a new descriptor or -1.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    /// Watch `fd` for `events` (e.g. [`IN`], or `IN | EDGE`); [`Epoll::wait`] returns
    /// `token` when they come. An fd already ready is reported at the next wait,
    /// edge-triggered or not.
    pub fn add(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: both descriptors are open (borrowed for the call) and `ev` is a
        // valid epoll_event the kernel only reads.
        cvt(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut ev,
            )
        })?;
        Ok(())
    }

    /// Stop watching `fd`. Closing it does the same only once no other copy of the
    /// open file exists: a `pidfd_getfd` duplicate must be removed before it is closed,
    /// or the set goes on reporting it under a closed number.
    pub fn remove(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: both descriptors are open; the event is ignored for DEL but must be
        // non-NULL on old kernels.
        cvt(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd.as_raw_fd(),
                &mut ev,
            )
        })?;
        Ok(())
    }

    /// Wait up to `timeout` (None: for ever) for ready descriptors; their tokens
    /// (empty on timeout or on a signal).
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<Vec<u64>> {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
        // SAFETY: `events` is a writable array of the length passed.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(Vec::new());
            }
            return Err(e);
        }
        Ok(events[..n as usize].iter().map(|e| e.u64).collect())
    }
}

/// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes an initial value and flags and returns a new descriptor.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Read (and so reset) an eventfd's counter; 0 if nothing was signalled.
pub fn eventfd_take(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut f = std::fs::File::from(fd.try_clone_to_owned()?);
    let mut buf = [0u8; 8];
    match f.read(&mut buf) {
        Ok(8) => Ok(u64::from_ne_bytes(buf)),
        Ok(_) => Ok(0),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
        Err(e) => Err(e),
    }
}

/// An inotify instance (close-on-exec, non-blocking).
#[derive(Debug)]
pub struct Inotify {
    fd: OwnedFd,
}

/// `IN_MODIFY`: the file was written (cgroup v2 notifies `memory.events` so).
pub const IN_MODIFY: u32 = libc::IN_MODIFY;

impl Inotify {
    pub fn new() -> io::Result<Inotify> {
        // SAFETY: inotify_init1 takes flags and returns a new descriptor or -1.
        let fd = cvt(unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) })?;
        // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Inotify { fd })
    }

    /// Watch `path` for `mask`; the watch descriptor events name.
    pub fn add_watch(&self, path: &Path, mask: u32) -> io::Result<i32> {
        use std::os::unix::ffi::OsStrExt;
        let c = crate::cstring(path.as_os_str().as_bytes())?;
        // SAFETY: an open inotify descriptor and a NUL-terminated path that lives
        // through the call.
        cvt(unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) })
    }

    /// Remove a watch (the kernel removes it itself when the file goes).
    pub fn rm_watch(&self, wd: i32) -> io::Result<()> {
        // SAFETY: plain integers; a stale wd gives EINVAL, nothing else.
        cvt(unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), wd) })?;
        Ok(())
    }

    /// The watch descriptors of every event queued now (empty if none).
    pub fn read_events(&self) -> io::Result<Vec<i32>> {
        let mut f = std::fs::File::from(self.fd.try_clone()?);
        let mut buf = [0u8; 4096];
        let mut wds = Vec::new();
        loop {
            let n = match f.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(wds),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Ok(wds);
            }
            wds.extend(parse_events(&buf[..n]));
        }
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsFd for Inotify {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The watch descriptors of a buffer of `struct inotify_event` records.
fn parse_events(buf: &[u8]) -> Vec<i32> {
    const HEAD: usize = 16; // wd, mask, cookie, len: four 32-bit fields
    let mut wds = Vec::new();
    let mut at = 0;
    while at + HEAD <= buf.len() {
        let field = |i: usize| {
            let b = &buf[at + 4 * i..at + 4 * i + 4];
            u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
        };
        wds.push(field(0) as i32);
        at += HEAD + field(3) as usize;
    }
    wds
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_edge_is_reported_once_and_removed_fds_are_not() {
        use std::io::Write;
        use std::os::unix::net::UnixStream;
        let ep = Epoll::new().unwrap();
        let (mut a, b) = UnixStream::pair().unwrap();
        ep.add(b.as_fd(), IN | EDGE, 7).unwrap();
        assert!(ep.wait(Some(Duration::ZERO)).unwrap().is_empty());
        a.write_all(b"x").unwrap();
        assert_eq!(ep.wait(Some(Duration::from_secs(1))).unwrap(), vec![7]);
        // Still readable, but no new edge.
        assert!(ep.wait(Some(Duration::ZERO)).unwrap().is_empty());
        a.write_all(b"y").unwrap();
        assert_eq!(ep.wait(Some(Duration::from_secs(1))).unwrap(), vec![7]);
        ep.remove(b.as_fd()).unwrap();
        a.write_all(b"z").unwrap();
        assert!(ep.wait(Some(Duration::ZERO)).unwrap().is_empty());
        assert!(crate::fds::nofile_limit().unwrap() > 3);
    }

    use super::*;
    use std::io::Write;

    #[test]
    fn an_eventfd_wakes_the_epoll_with_its_token() {
        let ep = Epoll::new().unwrap();
        let a = eventfd().unwrap();
        let b = eventfd().unwrap();
        ep.add(a.as_fd(), IN, 7).unwrap();
        ep.add(b.as_fd(), IN, 9).unwrap();
        assert!(ep.wait(Some(Duration::from_millis(0))).unwrap().is_empty());
        std::fs::File::from(b.try_clone().unwrap())
            .write_all(&3u64.to_ne_bytes())
            .unwrap();
        assert_eq!(ep.wait(Some(Duration::from_secs(5))).unwrap(), vec![9]);
        assert_eq!(eventfd_take(b.as_fd()).unwrap(), 3);
        assert_eq!(eventfd_take(b.as_fd()).unwrap(), 0);
        ep.remove(b.as_fd()).unwrap();
        assert!(ep.wait(Some(Duration::from_millis(0))).unwrap().is_empty());
    }

    #[test]
    fn an_inotify_modify_is_read_back_as_its_watch() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.events");
        std::fs::write(&file, "oom_kill 0\n").unwrap();
        let ino = Inotify::new().unwrap();
        let ep = Epoll::new().unwrap();
        ep.add(ino.as_fd(), IN, 1).unwrap();
        let wd = ino.add_watch(&file, IN_MODIFY).unwrap();
        assert!(ino.read_events().unwrap().is_empty());
        std::fs::write(&file, "oom_kill 1\n").unwrap();
        assert_eq!(ep.wait(Some(Duration::from_secs(5))).unwrap(), vec![1]);
        let wds = ino.read_events().unwrap();
        assert!(!wds.is_empty() && wds.iter().all(|&w| w == wd), "{wds:?}");
        ino.rm_watch(wd).unwrap();
    }

    #[test]
    fn inotify_records_with_names_are_skipped_whole() {
        let mut buf = Vec::new();
        for (wd, name_len) in [(3i32, 16u32), (5, 0)] {
            buf.extend(wd.to_ne_bytes());
            buf.extend(2u32.to_ne_bytes());
            buf.extend(0u32.to_ne_bytes());
            buf.extend(name_len.to_ne_bytes());
            buf.extend(vec![0u8; name_len as usize]);
        }
        assert_eq!(parse_events(&buf), vec![3, 5]);
    }
}
