//! The clone itself: `clone3(CLONE_INTO_CGROUP)` when the plan names a cgroup v2
//! directory and the kernel can, else the classic `clone`.
//!
//! With `CLONE_INTO_CGROUP` (Linux 5.7) the child is born in its cgroup: nothing has
//! to write its pid into `cgroup.procs` afterwards, so the migration (and the
//! `cgroup_threadgroup_rwsem` write lock a migration takes, with its RCU grace period
//! when the lock is not already in its fast mode) is skipped. When clone3 or the flag
//! is missing (ENOSYS before 5.3, E2BIG for a struct the kernel does not know, EINVAL
//! for an unknown flag), the classic clone runs and [`IntoCgroup::placed`] stays
//! false: the caller migrates the child as before. The first refusal is remembered for
//! the life of the process, so a kernel without it costs one failed syscall.

use std::cell::Cell;
use std::io;
use std::os::fd::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

/// `CLONE_INTO_CGROUP` (include/uapi/linux/sched.h); libc declares it as a c_int.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` up to `cgroup` (CLONE_ARGS_SIZE_VER2, 88 bytes).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// Set once the kernel refused clone3 or `CLONE_INTO_CGROUP`.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// A cgroup v2 directory the child should be born in (a [`super::SpawnPlan`] option).
#[derive(Debug)]
pub struct IntoCgroup {
    /// An open descriptor of the cgroup's directory (O_PATH will do); the caller keeps
    /// it open until the spawn returns.
    pub dir: RawFd,
    placed: Cell<bool>,
}

impl IntoCgroup {
    pub fn new(dir: RawFd) -> IntoCgroup {
        IntoCgroup {
            dir,
            placed: Cell::new(false),
        }
    }

    /// Whether the last spawn of the plan cloned the child straight into the cgroup.
    /// Set before the parent's after-clone handler runs, so the handler skips the
    /// migration when it is true.
    pub fn placed(&self) -> bool {
        self.placed.get()
    }
}

/// Whether `clone3(CLONE_INTO_CGROUP)` has not (yet) been refused in this process.
pub fn into_cgroup_supported() -> bool {
    !UNSUPPORTED.load(Ordering::Relaxed)
}

/// Clone like fork (the child continues on a copy of this stack) with namespace
/// `flags`, into `into`'s cgroup when possible. Returns what the raw syscall returns:
/// the pid in the parent, 0 in the child.
///
/// # Safety
/// As for a raw `clone` with a NULL stack: the process must be single-threaded and the
/// child may only use memory prepared before the call and raw syscalls until it execs
/// or `_exit`s.
pub(super) unsafe fn clone_child(flags: libc::c_int, into: Option<&IntoCgroup>) -> io::Result<i32> {
    if let Some(into) = into {
        into.placed.set(false);
        if !UNSUPPORTED.load(Ordering::Relaxed) {
            let args = CloneArgs {
                // The namespace bits; the exit signal has a field of its own.
                flags: (flags as u32 as u64) | CLONE_INTO_CGROUP,
                exit_signal: libc::SIGCHLD as u64,
                cgroup: into.dir as u64,
                ..CloneArgs::default()
            };
            // SAFETY: `args` is a live, initialised clone_args of the size passed; a
            // zero stack with zero stack_size makes clone3 fork-like, which the
            // caller's contract covers.
            let pid = unsafe {
                libc::syscall(
                    libc::SYS_clone3,
                    &args as *const CloneArgs,
                    std::mem::size_of::<CloneArgs>(),
                )
            };
            if pid >= 0 {
                if pid > 0 {
                    into.placed.set(true);
                }
                return Ok(pid as i32);
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOSYS | libc::E2BIG | libc::EINVAL) => {
                    UNSUPPORTED.store(true, Ordering::Relaxed)
                }
                _ => return Err(e),
            }
        }
    }
    let flags = (flags | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: the caller's contract (single-threaded, child touches only prepared
    // memory and raw syscalls); a NULL stack makes clone fork-like.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            ptr::null_mut::<libc::c_void>(),
            ptr::null_mut::<libc::c_void>(),
            ptr::null_mut::<libc::c_void>(),
            0,
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid as i32)
}
