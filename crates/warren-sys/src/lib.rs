//! warren-sys: the one place where warren calls the kernel through `unsafe`.
//!
//! Everything here is a thin wrapper over a Linux syscall (through `libc`) with a safe
//! signature. Each `unsafe` block carries a `// SAFETY:` comment naming the invariant and
//! why it holds at that call. The rest of warren is `#![forbid(unsafe_code)]`.
//!
//! What this crate owns: raw syscalls (clone, mount, pivot_root, setns, pidfd, ioctls,
//! ptys, signals, xattrs). What it must not do: decide anything. Policy (which mounts,
//! which namespaces, which limits) is built by the `warren` crate as plain data and handed
//! to [`spawn::spawn_zone`] to execute.

pub mod bare;
pub mod bpf;
pub mod fds;
pub mod fs;
pub mod harden;
pub mod init;
pub mod loopdev;
pub mod notify;
pub mod proc;
pub mod pty;
pub mod signal;
pub mod sock;
pub mod spawn;
mod steps;
pub mod swap;
pub mod tree;
pub mod userns;
pub mod walk;

/// Constants (MS_*, CLONE_*, signal numbers) for callers that build plans.
pub use libc;

use std::ffi::CStr;
use std::io;

/// Convert a `-1`-style libc return value into an `io::Result`.
pub(crate) fn cvt<T: PartialEq + From<i8>>(ret: T) -> io::Result<T> {
    if ret == T::from(-1) {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Build a `CString` from bytes, mapping an interior NUL to `InvalidInput`.
pub fn cstring(bytes: impl Into<Vec<u8>>) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// The kernel release string (`uname -r`).
pub fn kernel_release() -> String {
    let mut uts = std::mem::MaybeUninit::<libc::utsname>::zeroed();
    // SAFETY: `uts` is a valid, writable utsname; uname only writes into it.
    let rc = unsafe { libc::uname(uts.as_mut_ptr()) };
    if rc != 0 {
        return "unknown".into();
    }
    // SAFETY: uname returned 0, so the struct is initialised and `release` is NUL-terminated.
    let uts = unsafe { uts.assume_init() };
    // SAFETY: `release` is a NUL-terminated C string inside `uts`, which outlives the borrow.
    let release = unsafe { CStr::from_ptr(uts.release.as_ptr()) };
    release.to_string_lossy().into_owned()
}

/// The effective user id of this process.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// This process's id.
pub fn getpid() -> i32 {
    // SAFETY: getpid has no preconditions and cannot fail.
    unsafe { libc::getpid() }
}

/// `(soft, hard)` of RLIMIT_NOFILE.
pub fn rlimit_nofile() -> io::Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit for getrlimit to fill.
    cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) })?;
    Ok((r.rlim_cur, r.rlim_max))
}

/// `(soft, hard)` of resource `resource` (RLIMIT_*).
pub fn getrlimit(resource: libc::c_int) -> io::Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit for getrlimit to fill; a bad resource fails EINVAL.
    cvt(unsafe { libc::getrlimit(resource as libc::__rlimit_resource_t, &mut r) })?;
    Ok((r.rlim_cur, r.rlim_max))
}

/// `setrlimit(resource, {soft, hard})` for this process.
pub fn setrlimit(resource: libc::c_int, soft: u64, hard: u64) -> io::Result<()> {
    let r = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `r` is a valid rlimit read by the call.
    cvt(unsafe { libc::setrlimit(resource as libc::__rlimit_resource_t, &r) }).map(drop)
}

/// `_exit(2)`: leave now without running destructors or atexit handlers.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit has no preconditions; it never returns.
    unsafe { libc::_exit(code) }
}
