//! One epoll set: wait for many descriptors at once (the agent's watch over every
//! suspended zone's sockets, docs/suspend.md, "One wait for all suspended zones").

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::cvt;

/// An epoll instance (close-on-exec).
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
        // SAFETY: plain flags; returns a new descriptor or -1.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: the kernel just returned this descriptor; nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    /// Watch `fd` for `events` (e.g. `IN | EDGE`); `token` comes back with its events.
    /// An fd already ready is reported at the next wait, edge-triggered or not.
    pub fn add(&self, fd: BorrowedFd<'_>, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: both descriptors are valid for the call; `ev` is a valid epoll_event
        // the kernel only reads.
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

    /// Stop watching `fd`. Needed before closing a descriptor whose open file another
    /// process also holds (a `pidfd_getfd` duplicate): epoll forgets an entry only when
    /// the file's last descriptor closes, so without this the set would go on reporting
    /// it under a closed number.
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: valid descriptors; `ev` is ignored by EPOLL_CTL_DEL (non-NULL for
        // kernels before 2.6.9).
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

    /// Wait at most `timeout` for events; the tokens of those that came go into `out`
    /// (cleared first). An interrupted wait returns with none.
    pub fn wait(&self, out: &mut Vec<u64>, timeout: Duration) -> io::Result<()> {
        out.clear();
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `evs` is a writable array of 64 epoll_events and 64 is passed as its
        // length; the kernel writes at most that many.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), evs.as_mut_ptr(), 64, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        out.extend(evs[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

/// The soft `RLIMIT_NOFILE`: how many descriptors this process may hold.
pub fn nofile_limit() -> io::Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit the kernel writes.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) })?;
    Ok(r.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn an_edge_is_reported_once_and_deleted_fds_are_not() {
        let ep = Epoll::new().unwrap();
        let (mut a, b) = UnixStream::pair().unwrap();
        ep.add(b.as_fd(), IN | EDGE, 7).unwrap();
        let mut out = Vec::new();
        ep.wait(&mut out, Duration::ZERO).unwrap();
        assert!(out.is_empty());
        a.write_all(b"x").unwrap();
        ep.wait(&mut out, Duration::from_secs(1)).unwrap();
        assert_eq!(out, vec![7]);
        // Still readable, but no new edge.
        ep.wait(&mut out, Duration::ZERO).unwrap();
        assert!(out.is_empty());
        a.write_all(b"y").unwrap();
        ep.wait(&mut out, Duration::from_secs(1)).unwrap();
        assert_eq!(out, vec![7]);
        ep.delete(b.as_fd()).unwrap();
        a.write_all(b"z").unwrap();
        ep.wait(&mut out, Duration::ZERO).unwrap();
        assert!(out.is_empty());
        assert!(nofile_limit().unwrap() > 3);
    }
}
