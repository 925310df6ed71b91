//! User namespaces and idmapped mounts.
//!
//! A zone's user namespace must exist, with its id maps written, *before* the zone's
//! child is cloned: the child mounts the zone's root as the host's root (in a new
//! mount namespace owned by the host) from idmapped mounts that need the namespace,
//! and only then joins it with `setns`. So [`Namespaces::create`] clones a throwaway
//! process into a new user namespace (plus, in the same call, the network, UTS and
//! IPC namespaces the zone will own, so that they belong to the zone's user namespace
//! and its root has capabilities there), writes `uid_map`/`gid_map` from the host
//! (warren runs as real root, so any map is allowed), opens the namespace files and
//! kills the process. The namespaces live on through the descriptors.
//!
//! The throwaway shares warren's memory (`CLONE_VM`) and runs on a small stack of its
//! own, so creating it copies no page tables; it only ever calls `pause(2)`.
//!
//! It must never outlive warren nor hold what warren held: it gets its own copy of
//! the descriptor table (no `CLONE_FILES`, which would share warren's table and so
//! keep the zone's lock file open through it) and closes every descriptor from 3 up
//! but its report pipe before anything else (`close_range`); it asks for SIGKILL when
//! warren dies (`PR_SET_PDEATHSIG`) and then checks that warren is still its parent
//! (warren may have died between the clone and the prctl). So a `kill -9` of warren
//! at any moment leaves no process holding a zone's lock (issue 22, item 1).
//!
//! [`open_tree_idmapped`] makes a detached copy of a mount (`open_tree` with
//! `OPEN_TREE_CLONE`) and gives it the namespace's id mapping (`mount_setattr` with
//! `MOUNT_ATTR_IDMAP`), so files owned by host uid 0 appear owned by the zone's root
//! without a single chown; [`crate::spawn::Step::MoveMount`] attaches it in the child.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use crate::cvt;

/// `OPEN_TREE_CLONE` (linux/mount.h).
pub const OPEN_TREE_CLONE: libc::c_uint = 1;
/// `MOUNT_ATTR_RDONLY`.
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_NOSUID`.
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
/// `MOUNT_ATTR_NODEV`.
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
/// `MOUNT_ATTR_NOEXEC`.
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;
/// `MOUNT_ATTR_IDMAP`.
pub const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
/// `MOVE_MOUNT_F_EMPTY_PATH`.
pub const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// `struct mount_attr` (linux/mount.h, MOUNT_ATTR_SIZE_VER0).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// The namespaces a zone owns through its user namespace.
#[derive(Debug)]
pub struct Namespaces {
    /// `/proc/<pid>/ns/user` of the throwaway.
    pub user: File,
    /// Its network namespace, when asked for (`CLONE_NEWNET`).
    pub net: Option<File>,
    /// Its UTS namespace, when asked for.
    pub uts: Option<File>,
    /// Its IPC namespace, when asked for.
    pub ipc: Option<File>,
    holder: Option<Holder>,
}

/// The throwaway process and its stack; reaped (and the stack freed) on drop.
#[derive(Debug)]
struct Holder {
    pid: i32,
    stack: *mut libc::c_void,
    len: usize,
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = crate::proc::kill(self.pid, libc::SIGKILL);
        let _ = crate::proc::waitpid_blocking(self.pid);
        // SAFETY: `stack` is the mapping of `len` bytes made in `create`; the process
        // that ran on it has been reaped above, so nothing uses it any more. (Had the
        // wait failed the child could not exist: waitpid fails only for a pid that is
        // not our child.)
        unsafe { libc::munmap(self.stack, self.len) };
    }
}

const HOLDER_STACK: usize = 64 * 1024;

/// What the throwaway does before it pauses, read through the shared address space.
#[repr(C)]
struct HoldArgs {
    /// The host uid and gid that will own the user namespace.
    uid: libc::uid_t,
    gid: libc::gid_t,
    /// CLONE_NEWNET/NEWUTS/NEWIPC, created after (and so owned by) the user namespace.
    extra: libc::c_int,
    /// Where it reports: 0 when the namespaces exist, else the errno.
    report: RawFd,
    /// warren's pid: the holder exits at once if its parent is no longer this one.
    parent: libc::pid_t,
}

/// Close every descriptor except `keep` (raw syscalls, allocation-free): the holder's
/// copy of warren's table, so it holds no lock file, namespace, or pipe — not even
/// warren's stdout and stderr, which a caller waiting for their end would wait on.
/// Returns false if `close_range` failed (the caller gives up: a holder that might
/// hold warren's lock must not exist).
///
/// # Safety
/// Closes descriptors of the calling process's table: only for a process whose table
/// is its own copy (a child cloned without `CLONE_FILES`).
unsafe fn close_all_but(keep: RawFd) -> bool {
    let close = |lo: libc::c_uint, hi: libc::c_uint| -> bool {
        // SAFETY: close_range takes integers; the caller guarantees the table is ours.
        lo > hi || unsafe { libc::syscall(libc::SYS_close_range, lo, hi, 0) } == 0
    };
    let keep = keep as libc::c_uint;
    (keep == 0 || close(0, keep - 1)) && close(keep + 1, libc::c_uint::MAX)
}

/// The throwaway: become the owner ids, create the user namespace (so its owner, and
/// the host user its per-user counters are charged to, is the zone's own host uid,
/// not root), then the namespaces it owns; report; pause until killed.
extern "C" fn hold(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points at the parent's `HoldArgs`, which stays alive until the
    // parent has read our report (it blocks on the pipe), and we read it only before
    // writing that report. Everything below is raw syscalls: no allocation, no locks.
    // We were cloned without CLONE_FILES, so `close_all_but` closes our own copy of
    // the table, never warren's descriptors.
    unsafe {
        let a = &*(arg as *const HoldArgs);
        let report = a.report;
        // Hold nothing of warren's: our copy of its descriptor table, closed.
        if !close_all_but(report) {
            libc::syscall(libc::SYS_exit, 1);
        }
        let step = |rc: libc::c_long| -> bool { rc >= 0 };
        let ok = step(libc::syscall(
            libc::SYS_setgroups,
            0,
            std::ptr::null::<libc::gid_t>(),
        )) && step(libc::syscall(libc::SYS_setresgid, a.gid, a.gid, a.gid))
            && step(libc::syscall(libc::SYS_setresuid, a.uid, a.uid, a.uid))
            && step(libc::unshare(libc::CLONE_NEWUSER) as libc::c_long)
            && (a.extra == 0 || step(libc::unshare(a.extra) as libc::c_long));
        // Die with warren. Set after the id changes, which clear it (commit_creds);
        // then, if warren died before the prctl, go now.
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
            || libc::getppid() != a.parent
        {
            libc::syscall(libc::SYS_exit, 1);
        }
        let code: i32 = if ok { 0 } else { *libc::__errno_location() };
        let bytes = code.to_ne_bytes();
        libc::write(report, bytes.as_ptr().cast(), bytes.len());
        libc::close(report);
        loop {
            libc::pause();
        }
    }
}

impl Namespaces {
    /// New user namespace (plus `extra` of CLONE_NEWNET/NEWUTS/NEWIPC, owned by it)
    /// with `map` (the text for `uid_map` and `gid_map`, e.g. "0 1048576 65536"),
    /// owned by host `owner` (uid, gid): the kernel charges the per-user counters of
    /// everything inside (inotify instances and watches, POSIX message queue bytes,
    /// namespaces, …) to that host user, so one zone can exhaust only its own.
    /// The caller must be single-threaded or at least must not rely on other threads
    /// while this runs (the throwaway only makes syscalls and pauses).
    pub fn create(
        extra: libc::c_int,
        map: &str,
        owner: (libc::uid_t, libc::gid_t),
        proc_root: &Path,
    ) -> io::Result<Namespaces> {
        Self::create_then(extra, map, owner, proc_root, || {})
    }

    /// [`Namespaces::create`], calling `while_held` once the holder has made the
    /// namespaces and before it is killed (warren's crash point for that window).
    pub fn create_then(
        extra: libc::c_int,
        map: &str,
        owner: (libc::uid_t, libc::gid_t),
        proc_root: &Path,
        while_held: impl FnOnce(),
    ) -> io::Result<Namespaces> {
        // SAFETY: an anonymous private mapping with no address hint; checked below.
        let stack = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                HOLDER_STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if stack == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let (rd, wr) = match crate::spawn::pipe_cloexec() {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: no process runs on the mapping yet.
                unsafe { libc::munmap(stack, HOLDER_STACK) };
                return Err(e);
            }
        };
        let mut args = HoldArgs {
            uid: owner.0,
            gid: owner.1,
            extra,
            report: wr.as_raw_fd(),
            parent: crate::getpid(),
        };
        let flags = libc::CLONE_VM | libc::SIGCHLD;
        // SAFETY: the stack grows down, so the child starts at the top of the mapping
        // (16-byte aligned: mmap returns page-aligned memory and the length is a
        // multiple of 16). The child runs `hold`, which makes raw syscalls only: it
        // neither allocates nor touches memory it shares with us through CLONE_VM but
        // `args`, which outlives its use (we wait for the report below).
        let pid = unsafe {
            libc::clone(
                hold,
                stack.cast::<u8>().add(HOLDER_STACK).cast(),
                flags,
                (&mut args as *mut HoldArgs).cast(),
            )
        };
        if pid < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: no process runs on the mapping (the clone failed).
            unsafe { libc::munmap(stack, HOLDER_STACK) };
            return Err(e);
        }
        let holder = Holder {
            pid,
            stack,
            len: HOLDER_STACK,
        };
        drop(wr);
        let mut code = [0u8; 4];
        let mut got = 0;
        while got < code.len() {
            // SAFETY: the destination range lies inside `code`.
            let n = unsafe {
                libc::read(
                    rd.as_raw_fd(),
                    code[got..].as_mut_ptr().cast(),
                    code.len() - got,
                )
            };
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if n <= 0 {
                return Err(io::Error::other(
                    "the user-namespace holder died before reporting",
                ));
            }
            got += n as usize;
        }
        let code = i32::from_ne_bytes(code);
        if code != 0 {
            return Err(io::Error::from_raw_os_error(code));
        }
        while_held();
        let dir = proc_root.join(pid.to_string());
        std::fs::write(dir.join("uid_map"), map)?;
        std::fs::write(dir.join("gid_map"), map)?;
        let open = |ns: &str| File::open(dir.join("ns").join(ns));
        let want = |flag: libc::c_int, ns: &str| -> io::Result<Option<File>> {
            if extra & flag != 0 {
                open(ns).map(Some)
            } else {
                Ok(None)
            }
        };
        let user = open("user")?;
        let net = want(libc::CLONE_NEWNET, "net")?;
        let uts = want(libc::CLONE_NEWUTS, "uts")?;
        let ipc = want(libc::CLONE_NEWIPC, "ipc")?;
        // Not needed any more; it is reaped when the namespaces are dropped or
        // [`Namespaces::reap`] is called, so the wait does not delay the boot.
        let _ = crate::proc::kill(pid, libc::SIGKILL);
        Ok(Namespaces {
            user,
            net,
            uts,
            ipc,
            holder: Some(holder),
        })
    }

    /// Reap the throwaway process now.
    pub fn reap(&mut self) {
        self.holder.take();
    }
}

/// A detached copy of the mount tree at `path` (`open_tree(OPEN_TREE_CLONE |
/// AT_RECURSIVE)`), mapped through `userns` (`MOUNT_ATTR_IDMAP`) with `attrs` set on
/// every mount of it (MOUNT_ATTR_RDONLY, …). Close-on-exec.
pub fn open_tree_idmapped(path: &Path, userns: &File, attrs: u64) -> io::Result<OwnedFd> {
    detached_with(
        path,
        libc::AT_RECURSIVE as libc::c_uint,
        MOUNT_ATTR_IDMAP | attrs,
        0,
        userns.as_raw_fd() as u64,
    )
}

/// A detached bind of the directory at `path` alone (no submounts) with `set` set and
/// `clear` cleared on it (`MOUNT_ATTR_*`), mapped through `userns` when given: a
/// sandbox's shared, read-only /dev, whose device nodes must open (so `MOUNT_ATTR_NODEV`
/// is cleared even when the state root's filesystem is mounted nodev). Close-on-exec.
pub fn open_tree_with(
    path: &Path,
    set: u64,
    clear: u64,
    userns: Option<&File>,
) -> io::Result<OwnedFd> {
    match userns {
        Some(ns) => detached_with(
            path,
            0,
            MOUNT_ATTR_IDMAP | set,
            clear,
            ns.as_raw_fd() as u64,
        ),
        None => detached_with(path, 0, set, clear, 0),
    }
}

/// Attach the detached mount `fd` (from `open_tree`/`fsmount`) at `target` in the
/// caller's mount namespace (`move_mount` with `MOVE_MOUNT_F_EMPTY_PATH`).
pub fn move_mount(fd: std::os::fd::BorrowedFd<'_>, target: &Path) -> io::Result<()> {
    let t = crate::cstring(std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str()))?;
    let empty = c"";
    // SAFETY: "" with MOVE_MOUNT_F_EMPTY_PATH names the descriptor itself; `t` is
    // NUL-terminated and outlives the call; `fd` is a live descriptor (borrowed).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    cvt(rc as libc::c_int).map(drop)
}

/// A detached, read-only, nosuid, nodev bind of the single file (or tree) at `path`
/// (`open_tree(OPEN_TREE_CLONE)` + `mount_setattr`), close-on-exec. Executing a host
/// binary through it (`execveat(fd, "")`) makes `/proc/<pid>/exe` point into this
/// read-only mount, so a zone that can reach that link cannot chmod, chown or write
/// the host's binary through it (EROFS): runc's CVE-2019-5736 class, without a copy.
pub fn open_tree_readonly(path: &Path) -> io::Result<OwnedFd> {
    detached_with(
        path,
        0,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        0,
        0,
    )
}

/// `open_tree(path, OPEN_TREE_CLONE | recursive)` then `mount_setattr` of `attr_set`
/// and `attr_clr` (with `userns_fd` for MOUNT_ATTR_IDMAP) on it, `recursive` too.
fn detached_with(
    path: &Path,
    recursive: libc::c_uint,
    attr_set: u64,
    attr_clr: u64,
    userns_fd: u64,
) -> io::Result<OwnedFd> {
    let c = crate::cstring(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))?;
    // SAFETY: `c` is NUL-terminated; open_tree returns a new descriptor or -1.
    let fd = cvt(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | recursive,
        )
    } as libc::c_int)?;
    // SAFETY: open_tree succeeded, so `fd` is a new descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let attr = MountAttr {
        attr_set,
        attr_clr,
        propagation: 0,
        userns_fd,
    };
    let empty = c"";
    // SAFETY: `attr` is a valid struct mount_attr of the size passed; "" with
    // AT_EMPTY_PATH names `fd` itself.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | recursive,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    } as libc::c_int)?;
    Ok(fd)
}

/// Join the user namespace the process is in already (after `setns`) as its root:
/// `setgroups([])`, `setresgid(0,0,0)`, `setresuid(0,0,0)`. Allocation-free.
pub(crate) fn become_root() -> Result<(), ()> {
    let ok = |rc: libc::c_int| if rc < 0 { Err(()) } else { Ok(()) };
    // SAFETY: setgroups with a zero count reads no memory; the others take integers.
    // Raw syscalls, not the libc wrappers: glibc's setresuid signals every thread
    // (setxid broadcast), which is wrong in a cloned child.
    unsafe {
        ok(libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) as libc::c_int)?;
        ok(libc::syscall(libc::SYS_setresgid, 0, 0, 0) as libc::c_int)?;
        ok(libc::syscall(libc::SYS_setresuid, 0, 0, 0) as libc::c_int)
    }
}

/// For `warren login`, after joining the zone's user namespace: become its root.
pub fn become_root_in_userns() -> io::Result<()> {
    become_root().map_err(|_| io::Error::last_os_error())
}
