//! Spawning a zone's init: `clone(2)` into new namespaces, then a precomputed list of
//! steps (mounts, device nodes, pivot_root, …), then `execve`.
//!
//! The child runs between `clone` and `execve` in a copy of the parent's address space.
//! It must not allocate, lock or touch anything another thread might hold, so every
//! string it needs is built by the parent *before* the clone ([`SpawnPlan`] owns them) and
//! the child only walks the plan issuing raw syscalls. A failing step is reported to the
//! parent as `(step index, errno)` over a close-on-exec pipe; EOF on that pipe means
//! `execve` succeeded.
//!
//! Some setup can only happen from outside once the child exists (a veth pair moved
//! into its network namespace, by pid). [`spawn_zone_with`] runs a callback in the
//! parent right after the clone, while the child walks its steps; a
//! [`Step::WaitParent`] in the plan blocks the child until the callback has succeeded
//! (one byte on a second pipe). If the callback fails, the parent closes that pipe
//! without writing, the child reads EOF and exits, and the callback's error is returned.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;

use crate::cvt;

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
    /// Keep only the capabilities in this mask (bit n = capability n): bounding,
    /// ambient, effective, permitted and inheritable sets (see [`crate::harden`]).
    KeepCaps(u64),
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

/// What the parent of [`spawn_staged`] is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The child exists (host pid); a [`Step::WaitParent`] waits for this handler.
    Cloned(i32),
    /// The child reached [`Step::Sync`] `n` and waits for this handler.
    Sync(u32),
}

/// What to execute once the steps are done.
#[derive(Debug)]
pub enum ExecTarget {
    /// A path resolved inside the zone's root.
    Path(CString),
    /// An open file descriptor (`execveat(fd, "", …, AT_EMPTY_PATH)`), so a host binary
    /// can run as the zone's init without being visible inside the zone.
    Fd(RawFd),
}

/// Everything the child needs, built by the parent.
#[derive(Debug)]
pub struct SpawnPlan {
    /// `CLONE_NEW*` flags for the clone.
    pub clone_flags: libc::c_int,
    pub steps: Vec<Step>,
    pub exec: ExecTarget,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    /// How many descriptors after stdio the process is meant to inherit (3 up to
    /// `3 + pass_fds`, e.g. OCI `--preserve-fds`). Every other descriptor is made
    /// close-on-exec as the child's last act before its seccomp filter and exec, whatever
    /// the steps opened (see [`crate::fds`]).
    pub pass_fds: u32,
}

/// Why a spawn failed; `E` is the after-clone callback's error type.
#[derive(Debug)]
pub enum SpawnError<E = std::convert::Infallible> {
    /// `clone` itself failed (e.g. EAGAIN at pid_max, ENOSPC at a namespace limit).
    Clone(io::Error),
    /// Step `index` of the plan failed in the child.
    Step { index: usize, error: io::Error },
    /// The final exec failed.
    Exec(io::Error),
    /// Talking to the child failed.
    Pipe(io::Error),
    /// The parent's after-clone callback failed; the child was told to give up.
    Setup(E),
}

const EXEC_STEP: u32 = u32::MAX;
/// Report-pipe index of a [`Step::Sync`] message (the errno field carries `n`).
const SYNC_MARK: u32 = u32::MAX - 1;
/// Report-pipe index of a [`Step::Ready`] message.
const READY_MARK: u32 = u32::MAX - 2;

/// Clone a child into new namespaces, run `plan.steps` in it and exec `plan.exec`.
/// Returns the child's pid (in the caller's pid namespace) once the exec has succeeded.
pub fn spawn_zone(plan: &SpawnPlan) -> Result<i32, SpawnError> {
    spawn_zone_with(plan, |_| Ok(()))
}

/// [`spawn_zone`], running `after_clone(child_pid)` in the parent right after the
/// clone. A plan that needs the callback's work done before exec contains
/// [`Step::WaitParent`]; the child passes it only if the callback returned `Ok`.
/// One protocol: this is [`spawn_staged`] with a handler for [`Event::Cloned`] only.
pub fn spawn_zone_with<E>(
    plan: &SpawnPlan,
    after_clone: impl FnOnce(i32) -> Result<(), E>,
) -> Result<i32, SpawnError<E>> {
    let mut after_clone = Some(after_clone);
    spawn_staged(plan, |event| match event {
        Event::Cloned(pid) => after_clone.take().map_or(Ok(()), |f| f(pid)),
        Event::Sync(_) => Ok(()),
    })
}

/// A NULL-terminated array of pointers into `strings` (for execve), built before a
/// fork so the child need not allocate.
pub(crate) fn pointer_array(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(ptr::null()))
        .collect()
}

fn opt_ptr(s: &Option<CString>) -> *const libc::c_char {
    s.as_ref().map_or(ptr::null(), |s| s.as_ptr())
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The child's side: returns only on failure, with (step index, errno).
fn run_child(
    plan: &SpawnPlan,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    empty: *const libc::c_char,
    go_fd: RawFd,
    report_fd: RawFd,
) -> (u32, i32) {
    // Until it execs, the child is a copy of warren holding warren's descriptors (an
    // OCI init waits for `start` like that, reachable by processes exec'd into the
    // container): non-dumpable, no process of the sandbox may ptrace it or open its
    // /proc/<pid>/fd, /proc/<pid>/exe or memory. exec makes the new program dumpable
    // again as the kernel decides.
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } < 0 {
        return (0, errno());
    }
    let first_closed = 3 + plan.pass_fds.min(i32::MAX as u32 - 3) as RawFd;
    let mut sealed = false;
    for (i, step) in plan.steps.iter().enumerate() {
        // Nothing but stdio and the descriptors meant for the process survives exec:
        // flagged right before the seccomp filter (which may not allow close_range),
        // after every step that opens something.
        if !sealed && matches!(step, Step::Seccomp(_)) {
            if let Err(e) = crate::fds::cloexec_from_raw(first_closed) {
                return (i as u32, e);
            }
            sealed = true;
        }
        if run_step(step, go_fd, report_fd).is_err() {
            return (i as u32, errno());
        }
    }
    if !sealed {
        if let Err(e) = crate::fds::cloexec_from_raw(first_closed) {
            return (EXEC_STEP, e);
        }
    }
    match plan.exec {
        // SAFETY: `argv`/`envp` are NULL-terminated arrays of pointers into CStrings owned
        // by `plan`, alive until exec replaces the image; the path is NUL-terminated.
        ExecTarget::Path(ref path) => unsafe {
            libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        },
        // SAFETY: as above; `empty` is a NUL-terminated "" required by AT_EMPTY_PATH.
        ExecTarget::Fd(fd) => unsafe {
            libc::syscall(
                libc::SYS_execveat,
                fd,
                empty,
                argv.as_ptr(),
                envp.as_ptr(),
                libc::AT_EMPTY_PATH,
            );
        },
    }
    (EXEC_STEP, errno())
}

/// One step, as raw syscalls only (this runs in the cloned child).
fn run_step(step: &Step, go_fd: RawFd, report_fd: RawFd) -> Result<(), ()> {
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
        Step::KeepCaps(keep) => crate::harden::keep_caps(*keep),
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

/// Write an 8-byte (index, value) message on the report pipe.
fn report(fd: RawFd, index: u32, value: i32) -> Result<(), ()> {
    let mut buf = [0u8; 8];
    buf[..4].copy_from_slice(&index.to_ne_bytes());
    buf[4..].copy_from_slice(&value.to_ne_bytes());
    // SAFETY: `buf` is 8 readable bytes; a pipe write of 8 bytes is atomic.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n == 8 {
        Ok(())
    } else {
        Err(())
    }
}

/// Clone a child, run `plan.steps` in it and exec, telling `on_event` when the child
/// exists ([`Event::Cloned`]) and whenever it reaches a [`Step::Sync`]. Returns the
/// child's pid when it has exec'd, or as soon as it reaches [`Step::Ready`] (then it
/// goes on alone and a later failure is no longer reported). A handler error makes
/// the child give up at its next wait and is returned as [`SpawnError::Setup`].
/// The caller must be single-threaded; it is checked, and a spawn from a process with
/// more threads fails with [`SpawnError::Clone`].
pub fn spawn_staged<E>(
    plan: &SpawnPlan,
    mut on_event: impl FnMut(Event) -> Result<(), E>,
) -> Result<i32, SpawnError<E>> {
    let argv = pointer_array(&plan.argv);
    let envp = pointer_array(&plan.envp);
    let empty = c"";
    let (rd, wr) = pipe_cloexec().map_err(SpawnError::Pipe)?;
    let (go_rd, go_wr) = pipe_cloexec().map_err(SpawnError::Pipe)?;
    let waits_for_clone = plan.steps.iter().any(|s| matches!(s, Step::WaitParent));
    crate::fds::ensure_single_threaded().map_err(SpawnError::Clone)?;

    let flags = (plan.clone_flags | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: a raw clone with a NULL stack behaves like fork: the child continues on a
    // copy of this stack. The process is single-threaded (checked just above), and the
    // child touches nothing but the pre-built `plan`, `argv`, `envp` and raw syscalls
    // (no allocation, no locks) before it execs or calls _exit.
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
        return Err(SpawnError::Clone(io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(go_wr);
        drop(rd);
        let (index, errno) = run_child(
            plan,
            &argv,
            &envp,
            empty.as_ptr(),
            go_rd.as_raw_fd(),
            wr.as_raw_fd(),
        );
        let _ = report(wr.as_raw_fd(), index, errno);
        crate::exit_now(127);
    }
    let pid = pid as i32;
    drop(wr);
    let mut go_wr = Some(go_wr);
    let mut failed: Option<E> = None;
    let go = |go_wr: &mut Option<OwnedFd>, failed: &mut Option<E>, r: Result<(), E>| {
        match r {
            Ok(()) => {
                if let Some(w) = go_wr.as_ref() {
                    let b = [1u8];
                    // SAFETY: `w` is our open pipe end and `b` one readable byte; the
                    // read end stays open in this process, so no EPIPE.
                    unsafe { libc::write(w.as_raw_fd(), b.as_ptr().cast(), 1) };
                }
            }
            Err(e) => {
                *failed = Some(e);
                *go_wr = None;
            }
        }
    };
    let r = on_event(Event::Cloned(pid));
    if r.is_err() || waits_for_clone {
        go(&mut go_wr, &mut failed, r);
    }
    let give_up = |e: E| {
        let _ = crate::proc::kill(pid, libc::SIGKILL);
        let _ = crate::proc::waitpid_blocking(pid);
        SpawnError::Setup(e)
    };
    loop {
        let mut buf = [0u8; 8];
        let n = read_full(rd.as_raw_fd(), &mut buf).map_err(SpawnError::Pipe)?;
        if n == 0 {
            return match failed {
                None => Ok(pid),
                Some(e) => Err(give_up(e)),
            };
        }
        let index = u32::from_ne_bytes(buf[..4].try_into().expect("4 bytes"));
        let value = i32::from_ne_bytes(buf[4..].try_into().expect("4 bytes"));
        match index {
            SYNC_MARK => {
                if failed.is_none() {
                    let r = on_event(Event::Sync(value as u32));
                    go(&mut go_wr, &mut failed, r);
                }
            }
            READY_MARK => {
                return match failed {
                    None => Ok(pid),
                    Some(e) => Err(give_up(e)),
                }
            }
            _ => {
                let _ = crate::proc::waitpid_blocking(pid);
                let error = io::Error::from_raw_os_error(value);
                let waited = plan
                    .steps
                    .get(index as usize)
                    .is_some_and(|s| matches!(s, Step::WaitParent | Step::Sync(_)));
                return match failed {
                    Some(e) if waited => Err(SpawnError::Setup(e)),
                    _ if index == EXEC_STEP => Err(SpawnError::Exec(error)),
                    _ => Err(SpawnError::Step {
                        index: index as usize,
                        error,
                    }),
                };
            }
        }
    }
}

/// Read one byte from the go pipe; EOF (the parent failed) is ECANCELED.
fn wait_parent(go_fd: RawFd) -> Result<(), ()> {
    let mut b = [0u8; 1];
    loop {
        // SAFETY: `b` is one writable byte; `go_fd` is the go pipe's read end.
        let n = unsafe { libc::read(go_fd, b.as_mut_ptr().cast(), 1) };
        if n == 1 {
            return Ok(());
        }
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n == 0 {
            // SAFETY: __errno_location returns this thread's errno slot.
            unsafe { *libc::__errno_location() = libc::ECANCELED };
        }
        return Err(());
    }
}

/// A close-on-exec pipe `(read, write)`.
pub fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn read_full(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: the destination range lies inside `buf`.
        let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        got += n as usize;
    }
    Ok(got)
}
