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
//! [`open_tree_idmapped`] makes a detached copy of a mount (`open_tree` with
//! `OPEN_TREE_CLONE`) and gives it the namespace's id mapping (`mount_setattr` with
//! `MOUNT_ATTR_IDMAP`), so files owned by host uid 0 appear owned by the zone's root
//! without a single chown; [`crate::spawn::Step::MoveMount`] attaches it in the child.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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

extern "C" fn hold(_: *mut libc::c_void) -> libc::c_int {
    loop {
        // SAFETY: pause has no preconditions; the process only waits for SIGKILL.
        unsafe { libc::pause() };
    }
}

impl Namespaces {
    /// New user namespace (plus `extra` of CLONE_NEWNET/NEWUTS/NEWIPC, owned by it)
    /// with `map` (the text for `uid_map` and `gid_map`, e.g. "0 1048576 65536").
    /// The caller must be single-threaded or at least must not rely on other threads
    /// while this runs (the throwaway only pauses, so it touches no shared state).
    pub fn create(extra: libc::c_int, map: &str, proc_root: &Path) -> io::Result<Namespaces> {
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
        let flags = libc::CLONE_VM | libc::CLONE_NEWUSER | extra | libc::SIGCHLD;
        // SAFETY: the stack grows down, so the child starts at the top of the mapping
        // (16-byte aligned: mmap returns page-aligned memory and the length is a
        // multiple of 16). The child runs `hold`, which calls only pause(2): it
        // neither allocates nor touches memory it shares with us through CLONE_VM.
        let pid = unsafe {
            libc::clone(
                hold,
                stack.cast::<u8>().add(HOLDER_STACK).cast(),
                flags,
                std::ptr::null_mut(),
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
    let c = crate::cstring(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))?;
    // SAFETY: `c` is NUL-terminated; open_tree returns a new descriptor or -1.
    let fd = cvt(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint,
        )
    } as libc::c_int)?;
    // SAFETY: open_tree succeeded, so `fd` is a new descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP | attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    let empty = c"";
    // SAFETY: `attr` is a valid struct mount_attr of the size passed; "" with
    // AT_EMPTY_PATH names `fd` itself.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            empty.as_ptr(),
            (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint,
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
