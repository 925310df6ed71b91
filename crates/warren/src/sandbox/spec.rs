//! What a sandbox is, as data: the one description that a zone's boot (`runtime`) and
//! an OCI container's `create` (`oci::plan`) convert their configs into, and that
//! [`super::plan`] turns into the steps of a spawn plan in one fixed order.
//!
//! Every path is a host path already resolved by the front end (a zone's paths are
//! checked step by step in the child with [`Prepare::CheckBeneath`]; an OCI bundle's
//! are resolved inside its rootfs before the clone); every descriptor is one the
//! front end holds open until the spawn returns.

use std::ffi::CString;
use std::os::fd::RawFd;
use std::path::PathBuf;

use warren_sys::harden::{CapSets, SockFilter};
use warren_sys::libc;
use warren_sys::spawn::ExecTarget;

/// One sandbox: its namespaces, its root, its identity and its process.
#[derive(Debug)]
pub struct SandboxSpec {
    pub namespaces: Namespaces,
    /// When the parent's go comes (cgroups, id maps, network set up by the parent);
    /// `None`: the parent has nothing to do (a login).
    pub sync: Option<SyncPoint>,
    /// Its own root, in its own mount namespace; `None`: the runtime's filesystem.
    pub root: Option<Root>,
    pub hostname: Option<Vec<u8>>,
    /// Bring up `lo` of its own network namespace.
    pub loopback_up: bool,
    /// Stop at `Sync(n)` right before the root change (OCI createRuntime and
    /// createContainer hooks run then).
    pub hooks_sync: Option<u32>,
    /// `sysctl` name (dotted) and value, written after the root change.
    pub sysctls: Vec<(String, String)>,
    pub oom_score_adj: Option<i32>,
    pub console: Option<Console>,
    /// `dup2(from, to)` right before the process part (e.g. the console log as stdout).
    pub stdio: Vec<(RawFd, RawFd)>,
    /// A descriptor opened (`openat`) while the sandbox is still privileged and kept
    /// at a fixed number for the process part (OCI: `exec.fifo`, held `O_PATH`).
    pub hold: Option<Hold>,
    /// Descriptors 3.. the process inherits (OCI `--preserve-fds`).
    pub pass_fds: u32,
    pub process: Process,
}

impl SandboxSpec {
    /// A process started in a sandbox the caller has already joined (`warren login`,
    /// `oci exec`): no namespaces or root of its own, nothing from the parent, stdio as
    /// inherited; the front end sets what differs.
    pub fn joined(process: Process) -> SandboxSpec {
        SandboxSpec {
            namespaces: Namespaces::default(),
            sync: None,
            root: None,
            hostname: None,
            loopback_up: false,
            hooks_sync: None,
            sysctls: Vec::new(),
            oom_score_adj: None,
            console: None,
            stdio: Vec::new(),
            hold: None,
            pass_fds: 0,
            process,
        }
    }
}

/// The namespaces: new ones made by the clone, others joined by descriptor.
#[derive(Debug, Default)]
pub struct Namespaces {
    /// `CLONE_NEW*` flags of the clone (never `CLONE_NEWCGROUP`: see `cgroup`).
    pub new: libc::c_int,
    pub user: UserNs,
    /// Joined by descriptor, in order: (nstype, fd, name for messages). Not the user
    /// namespace ([`UserNs::Join`]).
    pub join: Vec<(libc::c_int, RawFd, String)>,
    /// A new cgroup namespace, made right after the parent has moved the process into
    /// its cgroups (so the namespace's root is the sandbox's own cgroup).
    pub cgroup: bool,
}

/// The user namespace and how the process becomes its root.
#[derive(Debug, Default, Clone, Copy)]
pub enum UserNs {
    /// The runtime's.
    #[default]
    Inherit,
    /// Made by the clone (`CLONE_NEWUSER` in `new`): the parent writes the id maps
    /// before its go; then the process becomes uid 0 with every capability.
    New,
    /// Joined by descriptor after the parent's go; the process becomes its root.
    Join(RawFd),
}

/// Where the parent's go comes in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPoint {
    /// First of all (`Step::WaitParent`, passed when the after-clone handler is done):
    /// the user namespace's maps and the cgroups are needed by every later step (OCI).
    First,
    /// After the root is built and stdio set up (`Step::Sync(ROOT_BUILT)`), so the
    /// parent's cgroup move (an RCU grace period on cgroup v1) overlaps the mounts; the
    /// user namespace is joined after it, so every mount is made with the host's
    /// privileges in the mount namespace the host owns (zones). The child says when it
    /// gets there: the parent's `Event::Sync(ROOT_BUILT)` handler runs after its
    /// after-clone handler, with the child's stdout already its console.
    AfterRoot,
}

/// The [`Step::Sync`](warren_sys::spawn::Step::Sync) number of [`SyncPoint::AfterRoot`].
pub const ROOT_BUILT: u32 = 0;

/// The sandbox's own root.
#[derive(Debug)]
pub struct Root {
    /// The directory that becomes `/`.
    pub path: PathBuf,
    /// The sandbox's own directories: before the root change, every path a step
    /// creates or mounts on lies beneath one of them (`sandbox::invariants`).
    pub inside: Vec<PathBuf>,
    /// `/`'s propagation, first of all in the new mount namespace.
    pub propagation: libc::c_ulong,
    /// A mount made private before the root change (pivot_root refuses a shared
    /// parent mount).
    pub private_parent: Option<PathBuf>,
    /// What builds the root and what is mounted in it, in order.
    pub mounts: Vec<MountEntry>,
    /// Device nodes, made after the mounts (with umask 0: modes are exact).
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
    pub change: RootChange,
    /// `/`'s propagation again after the root change (OCI `rootfsPropagation`).
    pub propagation_after: Option<libc::c_ulong>,
    /// Masked and read-only paths (as the sandbox sees them, applied after the
    /// root change with `sandbox::masks`).
    pub masked: Vec<String>,
    pub readonly_paths: Vec<String>,
    /// Remount `/` read-only last.
    pub readonly: bool,
    /// The umask the root's steps end with (they run under umask 0).
    pub umask_after: libc::mode_t,
}

/// A `/dev` link: (link path, target).
pub type Link = (PathBuf, String);

/// How the root becomes `/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootChange {
    PivotRoot,
    /// `mount --move` onto `/` and chroot (OCI `--no-pivot`).
    MoveRoot,
}

/// One entry of the root's mount list: a target made ready, then mounted on.
#[derive(Debug)]
pub struct MountEntry {
    pub target: PathBuf,
    pub prepare: Prepare,
    pub kind: MountKind,
    /// Follow-up `mount(NULL, target, NULL, flags, data)` calls: remounts (read-only,
    /// nodev) and propagation changes, in order.
    pub then: Vec<(libc::c_ulong, Option<String>)>,
}

/// What is done to a mount target before the mount.
#[derive(Debug, Clone)]
pub enum Prepare {
    /// Nothing (the front end made it, or an earlier entry did).
    AsIs,
    /// In the child: refuse unless `rel` is a directory beneath `root` reached without
    /// a symlink (a zone's tree, which an image or a tenant controls).
    CheckBeneath { root: PathBuf, rel: String },
    /// `mkdir -p` of the target beneath `root`, one component at a time.
    Dirs { root: PathBuf },
    /// The target's parent directories beneath `root`, then an empty file (for the
    /// bind of a file).
    File { root: PathBuf },
}

/// What goes on a target.
#[derive(Debug)]
pub enum MountKind {
    /// `mount(2)`.
    Mount {
        source: Option<Vec<u8>>,
        fstype: Option<String>,
        flags: libc::c_ulong,
        data: Option<String>,
    },
    /// A detached mount (open_tree, fsmount) attached by descriptor.
    Attach { fd: RawFd, what: String },
    /// A directory (mode exact), owned by `owner` when given.
    Dir {
        mode: libc::mode_t,
        owner: Option<(u32, u32)>,
    },
    /// A symlink to `to` (an existing entry is kept).
    Link { to: String },
    /// Open the target (`open(2)` with `flags` and `mode`), give it to `owner` when
    /// given, and keep it at `fd`: a file or directory that a later mount covers (a
    /// zone's console and /dev/shm in its own storage, beside the root the overlay is
    /// mounted over), bound in the root afterwards through `/proc/self/fd/<fd>`.
    Keep {
        flags: libc::c_int,
        mode: libc::mode_t,
        owner: Option<(u32, u32)>,
        fd: RawFd,
    },
}

/// A device node in the sandbox's `/dev`.
#[derive(Debug, Clone)]
pub struct Node {
    /// Where it goes (host path, inside the root).
    pub at: PathBuf,
    /// The same node on the host, bound instead where mknod is refused.
    pub host: PathBuf,
    /// `S_IFCHR`, `S_IFBLK` or `S_IFIFO`.
    pub kind: libc::mode_t,
    pub major: u32,
    pub minor: u32,
    pub mode: libc::mode_t,
    pub uid: u32,
    pub gid: u32,
    /// Make its parent directories beneath this root first.
    pub dirs_beneath: Option<PathBuf>,
    /// Bind the host's node instead of mknod (in a new user namespace, mknod is
    /// refused).
    pub bind: bool,
}

/// The sandbox's console.
#[derive(Debug)]
pub enum Console {
    /// A log already open at `fd` (a mount entry's [`MountKind::Keep`], in storage
    /// the sandbox cannot reach by a path), bound on `dev_console`, which must exist
    /// (a zone's console, `runtime::console`).
    Log { fd: RawFd, dev_console: PathBuf },
    /// A pty of the sandbox's devpts: the master is sent to `socket`, the slave kept
    /// at `slave_fd`, bound on `dev_console` when there is one (OCI `terminal`).
    Pty {
        ptmx: PathBuf,
        socket: RawFd,
        slave_fd: RawFd,
        rows: u16,
        cols: u16,
        dev_console: Option<PathBuf>,
    },
}

/// A descriptor opened relative to a directory and kept at `fd`.
#[derive(Debug)]
pub struct Hold {
    pub dirfd: RawFd,
    pub path: String,
    pub flags: libc::c_int,
    pub fd: RawFd,
    pub what: String,
}

/// The process: what runs and with which identity and confinement (an init's, a
/// login's or an exec'd one's).
#[derive(Debug)]
pub struct Process {
    pub exec: ExecTarget,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    /// (resource, soft, hard, name for messages).
    pub rlimits: Vec<(libc::c_int, u64, u64, String)>,
    pub caps: Caps,
    pub umask: Option<libc::mode_t>,
    pub cwd: Option<PathBuf>,
    /// uid, gid, supplementary groups; `None`: stay who it is (root of its namespace).
    pub ids: Option<(u32, u32, Vec<u32>)>,
    /// Take this descriptor as the controlling terminal and stdio (in a new session).
    pub ctty: Option<RawFd>,
    /// A new session without a terminal (when `ctty` is `None`).
    pub setsid: bool,
    /// Steps run once the identity is set and before no_new_privs (OCI `create`'s
    /// ready report and the wait for `start`).
    pub gate: Vec<super::Described>,
    pub no_new_privs: bool,
    pub seccomp: Option<Vec<SockFilter>>,
}

/// Capabilities the process keeps.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub bounding: u64,
    pub sets: CapSets,
}

impl Caps {
    /// Exactly `keep`, in every set but the ambient one (a zone's root and a login).
    pub fn keep(keep: u64) -> Caps {
        Caps {
            bounding: keep,
            sets: CapSets {
                effective: keep,
                permitted: keep,
                inheritable: keep,
                ambient: 0,
            },
        }
    }
}
