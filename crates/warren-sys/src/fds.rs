//! Descriptor hygiene: what a zone, a login or an OCI process may inherit.
//!
//! A descriptor that the caller of `warren` holds without close-on-exec would
//! otherwise survive every fork and exec into the zone (runc's CVE-2024-21626 class:
//! a directory descriptor of the host is a way out of any root). Two rules, applied
//! here once for every spawn path:
//! - at start, `warren` marks every inherited descriptor past stdio close-on-exec
//!   ([`cloexec_from`]), so none reaches a child by accident;
//! - every child marks every descriptor past those it is meant to pass close-on-exec as
//!   its last step before seccomp and exec (`cloexec_from_raw`, allocation-free, in
//!   `spawn`), so a descriptor opened later without `O_CLOEXEC` cannot leak either.

use std::io;
use std::os::fd::RawFd;

/// Put the open file of `from` on descriptor number `to` (which keeps its number and
/// close-on-exec, now for `from`'s file), atomically: a write on `to` from another
/// thread goes whole to the old file or the new. `from` stays open.
pub fn replace(from: std::os::fd::BorrowedFd<'_>, to: RawFd) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: dup3 takes plain descriptor numbers and fails cleanly on bad ones; `to`
    // is the caller's to replace.
    crate::cvt(unsafe { libc::dup3(from.as_raw_fd(), to, libc::O_CLOEXEC) }).map(drop)
}

/// Mark every descriptor numbered `first` or higher close-on-exec.
pub fn cloexec_from(first: RawFd) -> io::Result<()> {
    cloexec_from_raw(first).map_err(io::Error::from_raw_os_error)
}

/// [`cloexec_from`] without allocation, for a cloned child: returns the errno.
pub(crate) fn cloexec_from_raw(first: RawFd) -> Result<(), i32> {
    let first = first.max(0) as libc::c_uint;
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets descriptor flags; it takes
    // plain integers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO);
    if e != libc::ENOSYS && e != libc::EINVAL {
        return Err(e);
    }
    // Kernels before 5.11 lack CLOSE_RANGE_CLOEXEC: flag each descriptor below the
    // larger RLIMIT_NOFILE value (a descriptor may sit above a lowered soft limit), at
    // most the kernel's default nr_open.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    let top = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.max(lim.rlim_max).min(1 << 20) as libc::c_uint
    } else {
        1 << 20
    };
    for fd in first..top {
        // SAFETY: fcntl on any integer is safe; a closed one answers EBADF.
        let flags = unsafe { libc::fcntl(fd as RawFd, libc::F_GETFD) };
        if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
            // SAFETY: as above, on an open descriptor.
            unsafe { libc::fcntl(fd as RawFd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
        }
    }
    Ok(())
}

/// Descriptors passed by systemd socket activation (`sd_listen_fds(3)` semantics):
/// `listen_pid` and `listen_fds` are the values of `$LISTEN_PID` and `$LISTEN_FDS`.
/// None unless `$LISTEN_PID` is this process; then descriptors 3 .. 3 + n, each
/// checked to be open and marked close-on-exec. Taken at most once per process (a
/// second call returns none), so no descriptor gets two owners.
pub fn listen_fds(
    listen_pid: Option<&str>,
    listen_fds: Option<&str>,
) -> io::Result<Vec<std::os::fd::OwnedFd>> {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::sync::atomic::{AtomicBool, Ordering};
    static TAKEN: AtomicBool = AtomicBool::new(false);
    let mine = listen_pid
        .and_then(|p| p.trim().parse::<i32>().ok())
        .is_some_and(|p| p == crate::getpid());
    let Some(n) = listen_fds.filter(|_| mine) else {
        return Ok(Vec::new());
    };
    let n: RawFd = n.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("LISTEN_FDS={n:?} is not a count of descriptors"),
        )
    })?;
    if !(0..=64).contains(&n) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("LISTEN_FDS={n}: expected 0 to 64 descriptors"),
        ));
    }
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for fd in 3..3 + n {
        // SAFETY: fcntl on any integer is safe; a closed one answers EBADF.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above, on a descriptor just seen open.
        unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
        // SAFETY: the descriptor is open (checked above) and was handed to this
        // process by its activator ($LISTEN_PID is our pid); TAKEN makes this the only
        // place that ever takes ownership of it.
        out.push(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    Ok(out)
}

/// Open this process's /proc directory for [`ensure_single_threaded`] now, while the
/// host's /proc is still the one mounted (before joining a zone's or container's
/// mount namespace). Cheap; idempotent.
pub fn prime_thread_check() {
    let _ = ensure_single_threaded();
}

/// Fail unless this process has exactly one thread. `fork` and a raw `clone` are only
/// sound in a single-threaded process (the child could inherit a lock another thread
/// holds). The count is read through a descriptor of this process's /proc directory,
/// opened the first time this runs, so the check still works after the caller joined
/// a zone's mount namespace.
pub fn ensure_single_threaded() -> io::Result<()> {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::OnceLock;
    static SELF_DIR: OnceLock<Option<OwnedFd>> = OnceLock::new();
    let dir = SELF_DIR.get_or_init(|| {
        // SAFETY: the path is a NUL-terminated literal; the result is a new descriptor.
        let fd = unsafe {
            libc::open(
                c"/proc/self".as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        // SAFETY: a non-negative `fd` was just opened and is owned by nobody else.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    });
    let Some(dir) = dir else {
        return Err(io::Error::other(
            "cannot verify that the process is single-threaded: /proc is not mounted",
        ));
    };
    // SAFETY: `dir` is an open directory descriptor; the name is NUL-terminated.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c"stat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    // On the stack, not the heap: a zone's init calls this before each fork and never
    // allocates (field 20 ends within the first ~450 bytes: the command name is at most
    // 16 bytes and every earlier field at most 20 digits).
    let mut buf = [0u8; 1024];
    let mut len = 0;
    while len < buf.len() {
        match f.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // Field 20 (num_threads) counts from after the command name's closing parenthesis
    // (the name itself may hold any byte, the rest is ASCII).
    let stat = &buf[..len];
    let threads = stat
        .iter()
        .rposition(|&b| b == b')')
        .and_then(|i| std::str::from_utf8(&stat[i + 1..]).ok())
        .and_then(|rest| rest.split_whitespace().nth(17))
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| io::Error::other("unreadable /proc/self/stat"))?;
    if threads != 1 {
        return Err(io::Error::other(format!(
            "refusing to fork from a process with {threads} threads (only sound single-threaded)"
        )));
    }
    Ok(())
}

/// The soft `RLIMIT_NOFILE`: how many descriptors this process may hold.
pub fn nofile_limit() -> io::Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit the kernel writes.
    crate::cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) })?;
    Ok(r.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Whether descriptor `fd` is open and close-on-exec.
    fn is_cloexec(fd: RawFd) -> bool {
        // SAFETY: fcntl(F_GETFD) only reads the descriptor's flags.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        flags >= 0 && flags & libc::FD_CLOEXEC != 0
    }

    #[test]
    fn cloexec_from_flags_every_later_descriptor() {
        // SAFETY: a plain open of /dev/null without O_CLOEXEC, closed below.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) };
        assert!(fd > 2);
        assert!(!is_cloexec(fd));
        cloexec_from(fd).unwrap();
        assert!(is_cloexec(fd));
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd) };
        let f = std::fs::File::open("/dev/null").unwrap();
        assert!(is_cloexec(f.as_raw_fd()));
    }
}
