//! The steps a spawned child performs before exec, and how it performs each: raw
//! syscalls on data the parent built, no allocation (see the module above).

use std::ffi::CString;
use std::os::fd::RawFd;
use std::ptr;

use super::{errno, report, wait_parent, READY_MARK, SYNC_MARK};

/// One action the zone's child performs before exec, in order.
#[derive(Debug)]
pub enum Step {
    /// `unshare(flags)`.
    Unshare(libc::c_int),
    /// `mount(source, target, fstype, flags, data)`.
    Mount {
        source: Option<CString>,
        target: CString,
        fstype: Option<CString>,
        flags: libc::c_ulong,
        data: Option<CString>,
    },
    /// `mkdir(path, mode)`; an existing directory is not an error.
    Mkdir { path: CString, mode: libc::mode_t },
    /// `mknod(path, mode, dev)`.
    Mknod {
        path: CString,
        mode: libc::mode_t,
        dev: libc::dev_t,
    },
    /// `symlink(target, link)`.
    Symlink { target: CString, link: CString },
    /// Create an empty regular file (a bind-mount target); an existing file is fine.
    CreateFile { path: CString, mode: libc::mode_t },
    /// `sethostname(name)` in the (new) UTS namespace.
    Sethostname(Vec<u8>),
    /// Set `lo` up in the (new) network namespace.
    LoopbackUp,
    /// `chdir(new_root); pivot_root(".", "."); umount2(".", MNT_DETACH); chdir("/")`.
    PivotRoot { new_root: CString },
    /// `dup2(from, to)`.
    Dup2 { from: RawFd, to: RawFd },
    /// `chdir(path)`.
    Chdir(CString),
    /// `umask(mask)`.
    Umask(libc::mode_t),
    /// Block until the parent's after-clone callback has succeeded (a byte arrives on
    /// the go pipe); EOF means it failed, and the child gives up with ECANCELED.
    WaitParent,
    /// Open `path` in the child's (new) mount namespace and move the descriptor to `fd`.
    /// A file opened before the clone belongs to the parent's namespace and cannot be
    /// the source of a bind mount in the child's.
    Open {
        path: CString,
        flags: libc::c_int,
        mode: libc::mode_t,
        fd: RawFd,
    },
    /// Run the inner step; if it fails with ENOENT (a path this kernel or root does
    /// not have, e.g. /proc/acpi), skip it instead of failing the boot.
    Optional(Box<Step>),
    /// `prctl(PR_SET_NO_NEW_PRIVS, 1)`.
    NoNewPrivs,
    /// Load this seccomp BPF program (after `NoNewPrivs`; last before exec).
    Seccomp(Vec<crate::harden::SockFilter>),
    /// Attach the detached mount `fd` (from `open_tree`, see [`crate::userns`]) at
    /// `target`: `move_mount(fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)`.
    MoveMount { fd: RawFd, target: CString },
    /// After `setns` into the zone's user namespace: `setgroups([])`,
    /// `setresgid(0,0,0)`, `setresuid(0,0,0)`, so the process is the zone's root.
    BecomeRoot,
    /// `fchownat(path, uid, gid, AT_SYMLINK_NOFOLLOW)`.
    Chown {
        path: CString,
        uid: libc::uid_t,
        gid: libc::gid_t,
    },
    /// Run the inner step; the errno given is not a failure (e.g. EEXIST for a device
    /// node the root already has).
    Tolerate(libc::c_int, Box<Step>),
    /// `setns(fd, nstype)`: join a namespace opened before the clone (the zone's user
    /// namespace, an OCI `namespaces[].path`).
    Setns { fd: RawFd, nstype: libc::c_int },
    /// Tell the parent this step was reached and wait for its go (one byte); the
    /// parent's [`Event::Sync`] handler runs meanwhile (e.g. hooks in the child's
    /// namespaces, uid maps of its new user namespace).
    Sync(u32),
    /// Tell the parent the child is set up: [`spawn_staged`] returns the pid now and
    /// the child goes on alone (an OCI `create`, which leaves it waiting for `start`).
    Ready,
    /// `openat(dirfd, path, flags)` moved to `fd`: reaches a host file through a
    /// directory descriptor opened before the clone, after pivot_root hid the path.
    /// Opening a fifo for writing blocks until a reader comes (the OCI exec fifo).
    OpenAt {
        dirfd: RawFd,
        path: CString,
        flags: libc::c_int,
        fd: RawFd,
    },
    /// Open `path` for writing (close-on-exec, at the lowest free number, so a low
    /// RLIMIT_NOFILE does not stand in the way; a fifo blocks until a reader comes),
    /// write `data` to it and keep it open: exec closing it is the reader's EOF (the
    /// OCI exec fifo, reopened through /proc/self/fd).
    OpenAndWrite { path: CString, data: Vec<u8> },
    /// Fail with ELOOP (a symlink), ENOTDIR (not a directory), EXDEV (outside) or
    /// ENOENT unless `rel` is a directory beneath the directory `root`, reached without
    /// any symlink (see [`crate::steps::check_beneath`]). Put before a mount whose
    /// target lies in a tree the zone or its image controls.
    CheckBeneath { root: CString, rel: CString },
    /// Write `data` to descriptor `fd` (a byte on the exec fifo: "opened").
    WriteFd { fd: RawFd, data: Vec<u8> },
    /// Write `data` to the file at `path` (a sysctl under /proc/sys, oom_score_adj).
    WriteFile { path: CString, data: Vec<u8> },
    /// `setrlimit(resource, {soft, hard})`.
    Rlimit {
        resource: libc::c_int,
        soft: u64,
        hard: u64,
    },
    /// Drop every capability not in `keep` from the bounding set.
    DropBounding(u64),
    /// Become `uid`/`gid` with supplementary `groups`, keeping the permitted
    /// capabilities across the change (raw syscalls: no libc setxid broadcast).
    SetIds {
        uid: libc::uid_t,
        gid: libc::gid_t,
        groups: Vec<libc::gid_t>,
    },
    /// Set the effective, permitted and inheritable sets and raise the ambient set.
    SetCaps(crate::harden::CapSets),
    /// Allocate a pty from the devpts instance whose `ptmx` is at `ptmx`, keep the
    /// slave as `slave_fd`, send the master over the connected Unix socket `socket`
    /// (SCM_RIGHTS, as runc's `--console-socket`) and close it.
    Console {
        ptmx: CString,
        socket: RawFd,
        slave_fd: RawFd,
        rows: u16,
        cols: u16,
    },
    /// `setsid`, make `fd` (a pty slave) the controlling terminal, and dup it onto
    /// stdin, stdout and stderr.
    Ctty(RawFd),
    /// `setsid`: a new session without a controlling terminal.
    Setsid,
    /// Hide `path`: bind `null` (/dev/null) over a file, or a read-only bind of the
    /// empty directory `empty` over a directory (an empty read-only tmpfs where that
    /// bind fails); a path that does not exist is skipped.
    Mask {
        path: CString,
        null: CString,
        empty: CString,
    },
    /// Without pivot_root (`--no-pivot`): move the mount at `new_root` onto `/` and
    /// chroot into it.
    MoveRoot { new_root: CString },
}

/// One step, as raw syscalls only (this runs in the cloned child).
pub(super) fn run_step(step: &Step, go_fd: RawFd, report_fd: RawFd) -> Result<(), ()> {
    let ok = |rc: libc::c_int| if rc < 0 { Err(()) } else { Ok(()) };
    match step {
        // SAFETY: unshare takes flags only.
        Step::Unshare(flags) => ok(unsafe { libc::unshare(*flags) }),
        Step::Mount {
            source,
            target,
            fstype,
            flags,
            data,
        } => {
            // SAFETY: all pointers are NUL-terminated CStrings owned by the plan, or NULL
            // where mount(2) accepts NULL.
            ok(unsafe {
                libc::mount(
                    opt_ptr(source),
                    target.as_ptr(),
                    opt_ptr(fstype),
                    *flags,
                    opt_ptr(data).cast(),
                )
            })
        }
        Step::Mkdir { path, mode } => {
            // SAFETY: `path` is a NUL-terminated CString owned by the plan.
            let rc = unsafe { libc::mkdir(path.as_ptr(), *mode) };
            if rc < 0 && errno() != libc::EEXIST {
                Err(())
            } else {
                Ok(())
            }
        }
        // SAFETY: `path` is a NUL-terminated CString owned by the plan.
        Step::Mknod { path, mode, dev } => ok(unsafe { libc::mknod(path.as_ptr(), *mode, *dev) }),
        Step::Symlink { target, link } => {
            // SAFETY: both are NUL-terminated CStrings owned by the plan.
            ok(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) })
        }
        Step::CreateFile { path, mode } => {
            // SAFETY: `path` is a NUL-terminated CString; the fd is closed right after.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                    *mode as libc::c_uint,
                )
            };
            if fd < 0 {
                return Err(());
            }
            // SAFETY: `fd` was just opened by us.
            unsafe { libc::close(fd) };
            Ok(())
        }
        Step::Sethostname(name) => {
            // SAFETY: the slice is valid for its length.
            ok(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) })
        }
        Step::LoopbackUp => loopback_up(),
        Step::WaitParent => wait_parent(go_fd),
        Step::PivotRoot { new_root } => {
            let dot = c".";
            let slash = c"/";
            // SAFETY: every pointer is a NUL-terminated string alive for the call.
            unsafe {
                ok(libc::chdir(new_root.as_ptr()))?;
                ok(libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) as libc::c_int)?;
                ok(libc::umount2(dot.as_ptr(), libc::MNT_DETACH))?;
                ok(libc::chdir(slash.as_ptr()))
            }
        }
        // SAFETY: dup2 on descriptors; invalid ones make it fail with EBADF.
        Step::Dup2 { from, to } => ok(unsafe { libc::dup2(*from, *to) }),
        // SAFETY: `path` is a NUL-terminated CString owned by the plan.
        Step::Chdir(path) => ok(unsafe { libc::chdir(path.as_ptr()) }),
        Step::Open {
            path,
            flags,
            mode,
            fd,
        } => {
            // SAFETY: `path` is a NUL-terminated CString owned by the plan.
            let got = unsafe { libc::open(path.as_ptr(), *flags, *mode as libc::c_uint) };
            if got < 0 {
                return Err(());
            }
            if got != *fd {
                // SAFETY: both are descriptors; dup3 keeps O_CLOEXEC only if asked.
                let rc = unsafe { libc::dup3(got, *fd, *flags & libc::O_CLOEXEC) };
                // SAFETY: `got` was opened above and is ours to close.
                unsafe { libc::close(got) };
                if rc < 0 {
                    return Err(());
                }
            }
            Ok(())
        }
        Step::Optional(inner) => match run_step(inner, go_fd, report_fd) {
            Err(()) if errno() == libc::ENOENT => Ok(()),
            r => r,
        },
        Step::Tolerate(e, inner) => match run_step(inner, go_fd, report_fd) {
            Err(()) if errno() == *e => Ok(()),
            r => r,
        },
        // SAFETY: setns takes a descriptor and flags.
        Step::Setns { fd, nstype } => ok(unsafe { libc::setns(*fd, *nstype) }),
        Step::Sync(n) => {
            report(report_fd, SYNC_MARK, *n as i32)?;
            wait_parent(go_fd)
        }
        Step::Ready => report(report_fd, READY_MARK, 0),
        Step::OpenAt {
            dirfd,
            path,
            flags,
            fd,
        } => crate::steps::open_at(*dirfd, path, *flags, *fd),
        Step::WriteFile { path, data } => crate::steps::write_file(path, data),
        Step::OpenAndWrite { path, data } => crate::steps::open_and_write(path, data),
        Step::CheckBeneath { root, rel } => crate::steps::check_beneath(root, rel),
        Step::WriteFd { fd, data } => {
            // SAFETY: `data` is readable for its length.
            let n = unsafe { libc::write(*fd, data.as_ptr().cast(), data.len()) };
            if n < 0 {
                Err(())
            } else {
                Ok(())
            }
        }
        Step::Rlimit {
            resource,
            soft,
            hard,
        } => crate::steps::rlimit(*resource, *soft, *hard),
        Step::DropBounding(keep) => crate::harden::drop_bounding(*keep),
        Step::SetIds { uid, gid, groups } => crate::harden::set_ids(*uid, *gid, groups),
        Step::SetCaps(sets) => crate::harden::set_caps(sets),
        Step::Console {
            ptmx,
            socket,
            slave_fd,
            rows,
            cols,
        } => crate::steps::console(ptmx, *socket, *slave_fd, *rows, *cols),
        Step::Ctty(fd) => crate::steps::ctty(*fd),
        // SAFETY: setsid takes no arguments.
        Step::Setsid => ok(unsafe { libc::setsid() }),
        Step::Mask { path, null, empty } => crate::steps::mask(path, null, empty),
        Step::MoveRoot { new_root } => crate::steps::move_root(new_root),
        Step::NoNewPrivs => crate::harden::no_new_privs(),
        Step::Seccomp(filter) => crate::harden::load_seccomp(filter),
        Step::MoveMount { fd, target } => {
            let empty = c"";
            // SAFETY: "" with MOVE_MOUNT_F_EMPTY_PATH names the descriptor itself;
            // `target` is a NUL-terminated CString owned by the plan.
            ok(unsafe {
                libc::syscall(
                    libc::SYS_move_mount,
                    *fd,
                    empty.as_ptr(),
                    libc::AT_FDCWD,
                    target.as_ptr(),
                    crate::userns::MOVE_MOUNT_F_EMPTY_PATH,
                )
            } as libc::c_int)
        }
        Step::BecomeRoot => crate::userns::become_root(),
        Step::Chown { path, uid, gid } => {
            // SAFETY: `path` is a NUL-terminated CString owned by the plan.
            ok(unsafe {
                libc::fchownat(
                    libc::AT_FDCWD,
                    path.as_ptr(),
                    *uid,
                    *gid,
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            })
        }
        Step::Umask(mask) => {
            // SAFETY: umask cannot fail.
            unsafe { libc::umask(*mask) };
            Ok(())
        }
    }
}

/// `ip link set lo up` with two ioctls; allocation-free.
fn loopback_up() -> Result<(), ()> {
    // SAFETY: socket takes plain integers.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(());
    }
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `ifr` is a valid ifreq naming "lo"; SIOCGIFFLAGS fills ifru_flags.
    let mut rc = unsafe { libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut ifr) };
    if rc == 0 {
        // SAFETY: the union's flags member was just written by the kernel.
        unsafe { ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
        // SAFETY: as above, SIOCSIFFLAGS reads ifru_flags.
        rc = unsafe { libc::ioctl(sock, libc::SIOCSIFFLAGS, &ifr) };
    }
    let saved = errno();
    // SAFETY: `sock` is ours.
    unsafe { libc::close(sock) };
    if rc < 0 {
        // Restore errno for the caller's report.
        // SAFETY: __errno_location returns this thread's errno slot.
        unsafe { *libc::__errno_location() = saved };
        return Err(());
    }
    Ok(())
}

fn opt_ptr(s: &Option<CString>) -> *const libc::c_char {
    s.as_ref().map_or(ptr::null(), |s| s.as_ptr())
}
