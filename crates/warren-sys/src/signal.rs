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

/// Make `cmd`'s child start with no signal blocked. A zone's init blocks every signal
/// (see [`block_all`]) and a blocked mask survives fork and exec, so without this its
/// services would never see the SIGTERM of a halt (std does not reset the mask on
/// every spawn path).
pub fn unblock_all_in_child(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the forked child before exec; it only calls
    // sigemptyset and sigprocmask, both async-signal-safe, on a set on its own stack.
    unsafe {
        cmd.pre_exec(|| {
            let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
            libc::sigemptyset(set.as_mut_ptr());
            let rc = libc::sigprocmask(libc::SIG_SETMASK, set.as_ptr(), std::ptr::null_mut());
            crate::cvt(rc).map(drop)
        });
    }
}
