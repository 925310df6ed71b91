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
