//! Processes: pidfds, signals, waiting, joining namespaces.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::cvt;

/// `pidfd_open(pid, 0)`: a descriptor that names this process and no later one with
/// the same pid.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes plain integers and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `pidfd_getfd(pidfd, fd, 0)`: a duplicate, in this process, of descriptor `fd` of
/// the process behind `pidfd` (the same open file; close-on-exec set by the kernel).
/// Needs ptrace access to that process (`PTRACE_MODE_ATTACH_REALCREDS`).
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: a valid pidfd, a descriptor number of that process and flags 0; the
    // syscall reads no memory of ours and returns a new descriptor or -1.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just installed this descriptor in our table; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(got as i32) })
}

/// `pidfd_send_signal(pidfd, sig, NULL, 0)`.
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: i32) -> io::Result<()> {
    // SAFETY: a valid pidfd, a signal number and a NULL siginfo, as the syscall allows.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Wait until the process behind `pidfd` has exited, at most `timeout`.
/// Returns true if it exited.
pub fn pidfd_wait(pidfd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    loop {
        // SAFETY: `pfd` is one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(rc > 0);
    }
}

/// `prctl(PR_SET_MEMORY_MERGE, 1)`: make every anonymous mapping of this process (and of
/// the children it forks and the programs it execs) mergeable by KSM.
pub fn set_memory_merge() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only; PR_SET_MEMORY_MERGE reads no memory.
    cvt(unsafe {
        libc::prctl(
            libc::PR_SET_MEMORY_MERGE,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    })
    .map(drop)
}

/// How many ranges one `process_madvise` call takes (the kernel's `UIO_MAXIOV`).
const MAX_IOV: usize = 1024;

/// `process_madvise(pidfd, ranges, MADV_PAGEOUT, 0)`: ask the kernel to reclaim the
/// pages of `ranges` (start, length; page-aligned, as /proc/PID/maps gives them) in the
/// address space of the process behind `pidfd`, swapping anonymous pages out where
/// there is swap. Pages mapped by more than one process are left alone by the kernel.
/// Returns the bytes advised; the ranges are sent in batches of `UIO_MAXIOV`, and a
/// batch the kernel stops early (a range unmapped meanwhile) ends the call with what
/// was done.
pub fn process_madvise_pageout(
    pidfd: BorrowedFd<'_>,
    ranges: &[(usize, usize)],
) -> io::Result<u64> {
    process_madvise(pidfd, ranges, libc::MADV_PAGEOUT)
}

/// `process_madvise(pidfd, ranges, MADV_WILLNEED, 0)`: ask the kernel to read the
/// swapped-out pages of `ranges` back into the swap cache now (asynchronously for a
/// disk, at once for zram), so the process's next touch of them is a minor fault.
/// Batches and the return value as [`process_madvise_pageout`].
pub fn process_madvise_willneed(
    pidfd: BorrowedFd<'_>,
    ranges: &[(usize, usize)],
) -> io::Result<u64> {
    process_madvise(pidfd, ranges, libc::MADV_WILLNEED)
}

fn process_madvise(
    pidfd: BorrowedFd<'_>,
    ranges: &[(usize, usize)],
    advice: libc::c_int,
) -> io::Result<u64> {
    let mut done = 0u64;
    for batch in ranges.chunks(MAX_IOV) {
        let iov: Vec<libc::iovec> = batch
            .iter()
            .map(|&(start, len)| libc::iovec {
                iov_base: start as *mut libc::c_void,
                iov_len: len,
            })
            .collect();
        let want: usize = batch.iter().map(|&(_, len)| len).sum();
        // SAFETY: `iov` is a live array of `iov.len()` iovecs (at most UIO_MAXIOV) for
        // the duration of the call; the addresses in it are the target process's, which
        // the kernel only interprets in that process's address space and never
        // dereferences in ours; the pidfd is borrowed and valid; flags must be 0.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_process_madvise,
                pidfd.as_raw_fd(),
                iov.as_ptr(),
                iov.len(),
                advice,
                0u32,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if done > 0 { Ok(done) } else { Err(e) };
        }
        done += rc as u64;
        if (rc as usize) < want {
            break;
        }
    }
    Ok(done)
}

/// `kill(pid, sig)`.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill takes plain integers.
    cvt(unsafe { libc::kill(pid, sig) }).map(drop)
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Exited(i32),
    Signaled(i32),
}

impl ExitStatus {
    /// The shell's convention: the code, or 128 + the signal.
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Exited(c) => c,
            ExitStatus::Signaled(s) => 128 + s,
        }
    }
}

fn decode(status: i32) -> ExitStatus {
    if libc::WIFSIGNALED(status) {
        ExitStatus::Signaled(libc::WTERMSIG(status))
    } else {
        ExitStatus::Exited(libc::WEXITSTATUS(status))
    }
}

/// `waitpid(pid, 0)`, retrying on EINTR.
pub fn waitpid_blocking(pid: i32) -> io::Result<ExitStatus> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid int for waitpid to fill.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(decode(status));
    }
}

/// `waitpid(-1, 0)`, retrying on EINTR: wait for any child to end; its pid and status.
/// ECHILD when the caller has no child left.
pub fn wait_any() -> io::Result<(i32, ExitStatus)> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid int for waitpid to fill.
        let rc = unsafe { libc::waitpid(-1, &mut status, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok((rc, decode(status)));
    }
}

/// `waitpid(pid, WNOHANG)`: `Some` if a child (pid, or any child for -1) was reaped.
pub fn waitpid_nohang(pid: i32) -> io::Result<Option<(i32, ExitStatus)>> {
    let mut status = 0;
    // SAFETY: `status` is a valid int for waitpid to fill.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    if rc == 0 {
        return Ok(None);
    }
    Ok(Some((rc, decode(status))))
}

/// `setns(fd, 0)`: join the namespace behind `fd` (the kernel infers its type).
pub fn setns(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns takes a descriptor and a flag; an invalid fd makes it fail.
    cvt(unsafe { libc::setns(fd.as_raw_fd(), 0) }).map(drop)
}

/// `fork()`; only for single-threaded callers, which is checked (an error otherwise).
/// Returns 0 in the child.
pub fn fork() -> io::Result<i32> {
    crate::fds::ensure_single_threaded()?;
    // SAFETY: the process is single-threaded (checked just above), so the child
    // inherits no lock held by another thread.
    cvt(unsafe { libc::fork() })
}

/// Fork a helper that must neither outlive the caller nor hold what it holds (a zone's
/// lock file, pipes, loop devices): in the child, every descriptor from 3 up is closed
/// (its own copy of the table), it asks for SIGKILL when the caller dies
/// (`PR_SET_PDEATHSIG`) and exits at once if the caller died before that. The helper
/// works by path only. Single-threaded callers only (checked, as [`fork`]). Returns 0
/// in the child.
pub fn fork_helper() -> io::Result<i32> {
    let parent = crate::getpid();
    let pid = fork()?;
    if pid == 0 {
        // SAFETY: a forked child has its own copy of the descriptor table; closing it
        // touches nothing of the parent's. prctl and getppid take integers only.
        let ok = unsafe {
            libc::syscall(libc::SYS_close_range, 3, libc::c_uint::MAX, 0) == 0
                && libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) == 0
                && libc::getppid() == parent
        };
        if !ok {
            crate::exit_now(1);
        }
    }
    Ok(pid)
}

/// `setsid()`.
pub fn setsid() -> io::Result<()> {
    // SAFETY: no arguments; fails with EPERM for a group leader.
    cvt(unsafe { libc::setsid() }).map(drop)
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphans below us are reparented to us.
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: plain integer arguments.
    cvt(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }).map(drop)
}

/// `prctl(PR_SET_PDEATHSIG, sig)`: the kernel sends `sig` to this process when the thread
/// that forked it exits. Check [`getppid`] afterwards: the parent may already be gone.
pub fn set_pdeathsig(sig: i32) -> io::Result<()> {
    // SAFETY: plain integer arguments; an invalid signal makes prctl fail with EINVAL.
    cvt(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) }).map(drop)
}

/// `prctl(PR_SET_DUMPABLE, 0)`: no process of a lower privilege may ptrace this one or
/// open its /proc/<pid>/fd (a `warren login` that joined a zone holds the caller's
/// terminal).
pub fn set_undumpable() -> io::Result<()> {
    // SAFETY: plain integer arguments.
    cvt(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) }).map(drop)
}

/// This process's umask (read by setting it and putting it back at once).
pub fn current_umask() -> u32 {
    // SAFETY: umask cannot fail; the second call restores the value the first returned.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    }
}

/// `getppid()`.
pub fn getppid() -> i32 {
    // SAFETY: getppid has no preconditions and cannot fail.
    unsafe { libc::getppid() }
}

/// Sleep until killed: `pause()` in a loop (a caught signal only wakes it up).
pub fn pause_forever() -> ! {
    loop {
        // SAFETY: pause has no arguments; it returns only when a handler ran.
        unsafe { libc::pause() };
    }
}
