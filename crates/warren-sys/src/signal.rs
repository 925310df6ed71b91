//! Signals, as a zone's init handles them: block everything, then take signals
//! synchronously with `sigtimedwait` (no handlers, no async-signal-safety puzzles).

use std::io;
use std::time::Duration;

fn full_set() -> libc::sigset_t {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigfillset initialises the set it is given.
    unsafe {
        libc::sigfillset(set.as_mut_ptr());
        set.assume_init()
    }
}

/// Block every blockable signal in this (single-threaded) process.
pub fn block_all() -> io::Result<()> {
    let set = full_set();
    // SAFETY: `set` is initialised; the old mask is not wanted.
    let rc = unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    crate::cvt(rc).map(drop)
}

/// Wait for any signal for at most `timeout`; `None` on timeout.
pub fn wait_any(timeout: Duration) -> io::Result<Option<i32>> {
    let set = full_set();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `set` and `ts` are initialised; the siginfo pointer may be NULL.
    let rc = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(rc))
}

/// Wait for one of `sigs` (which must be blocked in every thread, or it may be
/// delivered elsewhere) for at most `timeout`; `None` on timeout or interruption.
pub fn wait_for(sigs: &[i32], timeout: Duration) -> io::Result<Option<i32>> {
    let set = set_of(sigs);
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `set` and `ts` are initialised; the siginfo pointer may be NULL.
    let rc = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(rc))
}

fn set_of(sigs: &[i32]) -> libc::sigset_t {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set; sigaddset only sets bits in it (an invalid
    // signal number makes it return -1 and leaves the set unchanged).
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for &s in sigs {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        set.assume_init()
    }
}

/// A signal mask saved by [`block`], to give back to [`restore`].
pub struct SavedMask(libc::sigset_t);

/// Block `sigs` in the calling thread; they stay pending until taken with [`take`] or
/// the mask is restored. Returns the previous mask.
pub fn block(sigs: &[i32]) -> io::Result<SavedMask> {
    let set = set_of(sigs);
    let mut old = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `set` is initialised and `old` is writable; sigprocmask fills `old`.
    let rc = unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, old.as_mut_ptr()) };
    crate::cvt(rc)?;
    // SAFETY: sigprocmask succeeded, so it wrote the old mask.
    Ok(SavedMask(unsafe { old.assume_init() }))
}

/// Put back a mask saved by [`block`] (pending signals that it unblocks are delivered).
pub fn restore(mask: &SavedMask) -> io::Result<()> {
    // SAFETY: `mask.0` is a mask the kernel gave us; the old mask is not wanted.
    let rc = unsafe { libc::sigprocmask(libc::SIG_SETMASK, &mask.0, std::ptr::null_mut()) };
    crate::cvt(rc).map(drop)
}

/// Take one pending signal of `sigs` (which must be blocked) without waiting.
pub fn take(sigs: &[i32]) -> Option<i32> {
    let set = set_of(sigs);
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `set` and `ts` are initialised; the siginfo pointer may be NULL.
    let rc = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    (rc > 0).then_some(rc)
}

/// Restore the default action of SIGPIPE (Rust ignores it), so a writer to a closed
/// pipe ends quietly like other Unix tools.
pub fn default_sigpipe() {
    // SAFETY: setting a standard disposition for a valid signal number.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Ignore `sig` in this process (e.g. SIGINT in `warren login` while a child owns it).
pub fn ignore(sig: i32) {
    // SAFETY: setting a standard disposition for a valid signal number.
    unsafe { libc::signal(sig, libc::SIG_IGN) };
}

/// Fork and exec `path` with `argv`/`envp`, with every signal unblocked and at its
/// default action in the child, stdin on /dev/null, in its own session, cwd "/".
/// (A zone's init blocks all signals; its services must not inherit that mask.)
/// The caller must be single-threaded. Returns the child's pid.
pub fn spawn_with_default_signals(
    path: &std::ffi::CStr,
    argv: &[std::ffi::CString],
    envp: &[std::ffi::CString],
) -> io::Result<i32> {
    let argv_p = crate::spawn::pointer_array(argv);
    let envp_p = crate::spawn::pointer_array(envp);
    let devnull = c"/dev/null";
    let root = c"/";
    let (rd, wr) = crate::spawn::pipe_cloexec()?;
    let pid = crate::proc::fork()?;
    if pid == 0 {
        // Child: raw syscalls on pre-built data only.
        // SAFETY: every pointer is NUL-terminated and alive; failures end in _exit after
        // reporting errno on the close-on-exec pipe.
        unsafe {
            let mut empty = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
            libc::sigemptyset(empty.as_mut_ptr());
            for sig in 1..libc::SIGRTMIN() {
                libc::signal(sig, libc::SIG_DFL);
            }
            libc::sigprocmask(libc::SIG_SETMASK, empty.as_ptr(), std::ptr::null_mut());
            libc::setsid();
            libc::chdir(root.as_ptr());
            let fd = libc::open(devnull.as_ptr(), libc::O_RDONLY);
            if fd > 0 {
                libc::dup2(fd, 0);
                libc::close(fd);
            }
            libc::execve(path.as_ptr(), argv_p.as_ptr(), envp_p.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(
                std::os::fd::AsRawFd::as_raw_fd(&wr),
                (&errno as *const i32).cast(),
                4,
            );
            libc::_exit(127);
        }
    }
    drop(wr);
    let mut buf = [0u8; 4];
    let mut file = std::fs::File::from(rd);
    match std::io::Read::read(&mut file, &mut buf) {
        Ok(4) => {
            let _ = crate::proc::waitpid_blocking(pid);
            Err(io::Error::from_raw_os_error(i32::from_ne_bytes(buf)))
        }
        _ => Ok(pid),
    }
}

/// The last signal [`catch`]'s handler saw (0: none since [`uncatch`]).
static CAUGHT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn note_signal(sig: libc::c_int) {
    // One atomic store: async-signal-safe.
    CAUGHT.store(sig, std::sync::atomic::Ordering::SeqCst);
}

/// Catch `sigs` with a handler that only notes the signal (read it with [`caught`]),
/// so that a long command (e.g. `warren bench scale` on Ctrl-C) can stop at its next
/// check and undo what it made instead of dying with it. SA_RESTART: interrupted
/// system calls are restarted. Handlers are reset to the default by exec, so the
/// children spawned meanwhile are not affected. Undo with [`uncatch`].
pub fn catch(sigs: &[i32]) -> io::Result<()> {
    for &sig in sigs {
        let mut sa = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
        // SAFETY: a zeroed sigaction is a valid value (empty mask, no flags); we set the
        // handler, a function that is async-signal-safe (one atomic store), and
        // SA_RESTART; sigaction copies the struct and the old action is not wanted.
        let rc = unsafe {
            let p = sa.as_mut_ptr();
            (*p).sa_sigaction = note_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            (*p).sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut (*p).sa_mask);
            libc::sigaction(sig, p, std::ptr::null_mut())
        };
        crate::cvt(rc)?;
    }
    Ok(())
}

/// The signal noted by [`catch`]'s handler, if one came (it stays noted until
/// [`uncatch`], so every check on the way out sees it).
pub fn caught() -> Option<i32> {
    match CAUGHT.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Put `sigs` back to their default action (after [`catch`]).
pub fn uncatch(sigs: &[i32]) {
    for &sig in sigs {
        // SAFETY: setting a standard disposition for a valid signal number.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    CAUGHT.store(0, std::sync::atomic::Ordering::SeqCst);
}
