//! config.json → the spawn plan of a container's init (and of `exec`'d processes).
//!
//! The same `warren_sys::spawn` machinery as a zone boot runs it: every path and
//! string is built here, before the clone; the child only walks the steps. Paths
//! inside the rootfs are resolved here too, with symlinks followed *inside* the
//! rootfs ([`secure_join`]), so a container's own links cannot aim a mount at a host
//! path. Order of the init's steps (runc's, where the spec leaves it open):
//!
//! 1. wait for the parent (uid/gid maps, cgroups); join a user namespace by path
//! 2. join the other namespaces given by path; a new cgroup namespace
//! 3. `/` rslave (or `rootfsPropagation`), the rootfs bound onto itself, `mounts[]`
//!    in order, device nodes, /dev links, the console pty
//! 4. hostname; [sync: createRuntime and createContainer hooks]; pivot_root
//! 5. sysctls, masked and read-only paths, read-only root; hold `exec.fifo`
//! 6. rlimits, (seccomp without no_new_privs), user and capabilities, cwd,
//!    controlling terminal: a failure here makes `create` fail with the reason
//! 7. ready: `create` returns; block on `exec.fifo` until `start`
//! 8. no_new_privs, seccomp, exec

use std::ffi::CString;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use oci_spec::runtime::{LinuxNamespaceType, Mount, Process, Spec};
use warren_sys::harden::{CapSets, SockFilter};
use warren_sys::libc;
use warren_sys::spawn::{ExecTarget, SpawnPlan, Step};

use crate::cgroups::{CgroupSet, CgroupVersion};

/// The fd the console pty's slave is kept at in the child until it becomes stdio.
pub const CONSOLE_SLAVE_FD: RawFd = 901;
/// The fd the exec fifo is held at (O_PATH) while the init is still root.
pub const FIFO_PATH_FD: RawFd = 903;
/// The PATH used when the process's env has none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Steps with what each does, for error messages.
#[derive(Debug)]
pub struct Plan {
    pub spawn: SpawnPlan,
    pub what: Vec<String>,
}

impl Plan {
    pub fn new(clone_flags: libc::c_int) -> Plan {
        Plan {
            spawn: SpawnPlan {
                clone_flags,
                steps: Vec::new(),
                exec: ExecTarget::Path(CString::default()),
                argv: Vec::new(),
                envp: Vec::new(),
                pass_fds: 0,
            },
            what: Vec::new(),
        }
    }
    pub fn push(&mut self, step: Step, what: impl Into<String>) {
        self.spawn.steps.push(step);
        self.what.push(what.into());
    }
    fn mount(
        &mut self,
        src: Option<&[u8]>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: Option<&str>,
    ) -> Result<(), String> {
        let what = format!(
            "mount {} on {}",
            fstype
                .map(str::to_string)
                .or(src.map(|s| String::from_utf8_lossy(s).into_owned()))
                .unwrap_or_else(|| "(remount)".into()),
            target.display()
        );
        let step = Step::Mount {
            source: src.map(cbytes).transpose()?,
            target: cpath(target)?,
            fstype: fstype.map(cstr).transpose()?,
            flags,
            data: data.map(cstr).transpose()?,
        };
        self.push(step, what);
        Ok(())
    }
}

pub fn cbytes(b: &[u8]) -> Result<CString, String> {
    CString::new(b).map_err(|_| format!("{:?} contains a NUL byte", String::from_utf8_lossy(b)))
}
pub fn cstr(s: &str) -> Result<CString, String> {
    cbytes(s.as_bytes())
}
pub fn cpath(p: &Path) -> Result<CString, String> {
    cbytes(p.as_os_str().as_bytes())
}

/// `root` joined with the container path `path`, following symlinks as if `root`
/// were `/` (an absolute link restarts at `root`, `..` stops at it). Components that
/// do not exist yet are taken as they are.
pub fn secure_join(root: &Path, path: &Path) -> PathBuf {
    let mut todo: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut cur: Vec<std::ffi::OsString> = Vec::new();
    let mut links = 0;
    while let Some(part) = todo.pop() {
        if part == ".." {
            cur.pop();
            continue;
        }
        cur.push(part);
        let host: PathBuf = cur.iter().fold(root.to_path_buf(), |p, c| p.join(c));
        let Ok(target) = std::fs::read_link(&host) else {
            continue;
        };
        links += 1;
        if links > 40 {
            break;
        }
        cur.pop();
        if target.is_absolute() {
            cur.clear();
        }
        for c in target.components().rev() {
            match c {
                Component::Normal(n) => todo.push(n.to_os_string()),
                Component::ParentDir => todo.push("..".into()),
                _ => {}
            }
        }
    }
    cur.iter().fold(root.to_path_buf(), |p, c| p.join(c))
}

/// Mount flags, propagation flags and the fs-specific data of `options`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MountOptions {
    pub flags: libc::c_ulong,
    pub propagation: Vec<libc::c_ulong>,
    pub data: Vec<String>,
    pub bind: bool,
    pub recursive: bool,
}

pub fn parse_options(options: &[String]) -> MountOptions {
    let mut m = MountOptions::default();
    for o in options {
        let (set, clear): (libc::c_ulong, libc::c_ulong) = match o.as_str() {
            "ro" => (libc::MS_RDONLY, 0),
            "rw" => (0, libc::MS_RDONLY),
            "nosuid" => (libc::MS_NOSUID, 0),
            "suid" => (0, libc::MS_NOSUID),
            "nodev" => (libc::MS_NODEV, 0),
            "dev" => (0, libc::MS_NODEV),
            "noexec" => (libc::MS_NOEXEC, 0),
            "exec" => (0, libc::MS_NOEXEC),
            "sync" => (libc::MS_SYNCHRONOUS, 0),
            "async" => (0, libc::MS_SYNCHRONOUS),
            "dirsync" => (libc::MS_DIRSYNC, 0),
            "mand" => (libc::MS_MANDLOCK, 0),
            "nomand" => (0, libc::MS_MANDLOCK),
            "noatime" => (libc::MS_NOATIME, 0),
            "atime" => (0, libc::MS_NOATIME),
            "nodiratime" => (libc::MS_NODIRATIME, 0),
            "diratime" => (0, libc::MS_NODIRATIME),
            "relatime" => (libc::MS_RELATIME, 0),
            "norelatime" => (0, libc::MS_RELATIME),
            "strictatime" => (libc::MS_STRICTATIME, 0),
            "nostrictatime" => (0, libc::MS_STRICTATIME),
            "remount" => (libc::MS_REMOUNT, 0),
            "bind" => {
                m.bind = true;
                (0, 0)
            }
            "rbind" => {
                m.bind = true;
                m.recursive = true;
                (0, 0)
            }
            "private" | "rprivate" | "shared" | "rshared" | "slave" | "rslave" | "unbindable"
            | "runbindable" => {
                let base = match o.trim_start_matches('r') {
                    "private" => libc::MS_PRIVATE,
                    "shared" => libc::MS_SHARED,
                    "slave" => libc::MS_SLAVE,
                    _ => libc::MS_UNBINDABLE,
                };
                let rec = if o.starts_with('r') { libc::MS_REC } else { 0 };
                m.propagation.push(base | rec);
                (0, 0)
            }
            // Options of other runtimes' own features, not the kernel's.
            "tmpcopyup" | "notmpcopyup" | "copy-symlink" | "z" | "Z" | "U" => (0, 0),
            other => {
                m.data.push(other.to_string());
                (0, 0)
            }
        };
        m.flags = (m.flags | set) & !clear;
    }
    m
}

/// Capability names to a bit mask; unknown names are returned separately.
pub fn cap_mask<'a>(names: impl Iterator<Item = &'a str>) -> (u64, Vec<String>) {
    let mut mask = 0u64;
    let mut unknown = Vec::new();
    for n in names {
        match crate::isolation::caps::NAMES.iter().position(|c| *c == n) {
            Some(bit) => mask |= 1 << bit,
            None => unknown.push(n.to_string()),
        }
    }
    (mask, unknown)
}

fn caps_of(set: &Option<oci_spec::runtime::Capabilities>) -> (u64, Vec<String>) {
    let names: Vec<String> = set
        .iter()
        .flatten()
        .map(|c| {
            serde_json::to_value(c)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        })
        .collect();
    cap_mask(names.iter().map(String::as_str))
}

fn rlimit_resource(t: oci_spec::runtime::PosixRlimitType) -> libc::c_int {
    use oci_spec::runtime::PosixRlimitType as R;
    (match t {
        R::RlimitCpu => libc::RLIMIT_CPU,
        R::RlimitFsize => libc::RLIMIT_FSIZE,
        R::RlimitData => libc::RLIMIT_DATA,
        R::RlimitStack => libc::RLIMIT_STACK,
        R::RlimitCore => libc::RLIMIT_CORE,
        R::RlimitRss => libc::RLIMIT_RSS,
        R::RlimitNproc => libc::RLIMIT_NPROC,
        R::RlimitNofile => libc::RLIMIT_NOFILE,
        R::RlimitMemlock => libc::RLIMIT_MEMLOCK,
        R::RlimitAs => libc::RLIMIT_AS,
        R::RlimitLocks => libc::RLIMIT_LOCKS,
        R::RlimitSigpending => libc::RLIMIT_SIGPENDING,
        R::RlimitMsgqueue => libc::RLIMIT_MSGQUEUE,
        R::RlimitNice => libc::RLIMIT_NICE,
        R::RlimitRtprio => libc::RLIMIT_RTPRIO,
        R::RlimitRttime => libc::RLIMIT_RTTIME,
    }) as libc::c_int
}

/// Find `program` the way execvp would, looking at paths inside `root`. Returns the
/// path as the container sees it.
pub fn resolve_exec(root: &Path, program: &str, path_env: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &str| {
        std::fs::metadata(secure_join(root, Path::new(p)))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(program).then(|| program.to_string());
    }
    path_env
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| format!("{}/{program}", d.trim_end_matches('/')))
        .find(|p| executable(p))
}

/// What the process part of the plan needs besides the `Process`.
pub struct ProcessInputs<'a> {
    pub id: &'a str,
    /// Where the container's `/` is as this process sees it (for PATH lookup).
    pub root: &'a Path,
    pub seccomp: Option<&'a [SockFilter]>,
    /// Take the terminal from this fd (set up by a `Console` step) if terminal.
    pub console: bool,
    /// Our own hard limits per resource, to clamp to (no CAP_SYS_RESOURCE).
    pub hard_limit: &'a dyn Fn(libc::c_int) -> Option<u64>,
}

/// argv, envp and the exec path of `process`; its steps from rlimits to seccomp.
/// Returns notes (clamped rlimits, unknown capabilities) for the log.
pub fn process_steps(
    p: &mut Plan,
    process: &Process,
    i: &ProcessInputs<'_>,
) -> Result<Vec<String>, String> {
    process_steps_around(p, process, i, Vec::new())
}

/// [`process_steps`] with `between` pushed after the user, capabilities, cwd and
/// terminal are set and before no_new_privs and a trailing seccomp filter (the init's
/// wait for `start`: a failure to become the process's user must fail `create`).
pub fn process_steps_around(
    p: &mut Plan,
    process: &Process,
    i: &ProcessInputs<'_>,
    between: Vec<(Step, String)>,
) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    let args = process
        .args()
        .clone()
        .filter(|a| !a.is_empty())
        .ok_or("process.args is empty; give the program to run")?;
    let env = process.env().clone().unwrap_or_default();
    let path_env = env
        .iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .unwrap_or(DEFAULT_PATH);
    let exe = resolve_exec(i.root, &args[0], path_env).ok_or_else(|| {
        format!(
            "exec: {:?}: executable file not found in $PATH (process.args[0]; PATH={path_env})",
            args[0]
        )
    })?;
    p.spawn.exec = ExecTarget::Path(cstr(&exe)?);
    p.spawn.argv = args.iter().map(|a| cstr(a)).collect::<Result<_, _>>()?;
    p.spawn.envp = env.iter().map(|e| cstr(e)).collect::<Result<_, _>>()?;

    for r in process.rlimits().iter().flatten() {
        let resource = rlimit_resource(r.typ());
        let (mut soft, mut hard) = (r.soft(), r.hard());
        if let Some(ours) = (i.hard_limit)(resource) {
            if hard > ours {
                notes.push(format!(
                    "process.rlimits {:?}: hard limit {hard} is above the runtime's own {ours} and raising it needs CAP_SYS_RESOURCE; using {ours}",
                    r.typ()
                ));
                hard = ours;
                soft = soft.min(ours);
            }
        }
        p.push(
            Step::Rlimit {
                resource,
                soft,
                hard,
            },
            format!("set {:?}", r.typ()),
        );
    }
    let nnp = process.no_new_privileges().unwrap_or(false);
    // Without no_new_privs, loading a filter needs CAP_SYS_ADMIN: load it while root.
    if let (Some(f), false) = (i.seccomp, nnp) {
        p.push(Step::Seccomp(f.to_vec()), "load the seccomp filter");
    }
    let caps = process.capabilities().clone().unwrap_or_default();
    let (bounding, u1) = caps_of(caps.bounding());
    let (effective, u2) = caps_of(caps.effective());
    let (permitted, u3) = caps_of(caps.permitted());
    let (inheritable, u4) = caps_of(caps.inheritable());
    let (ambient, u5) = caps_of(caps.ambient());
    let mut unknown: Vec<String> = [u1, u2, u3, u4, u5].concat();
    unknown.sort();
    unknown.dedup();
    if !unknown.is_empty() {
        notes.push(format!(
            "process.capabilities: {} unknown to this kernel, skipped",
            unknown.join(", ")
        ));
    }
    p.push(Step::DropBounding(bounding), "drop bounding capabilities");
    let user = process.user();
    if let Some(mask) = user.umask() {
        p.push(Step::Umask(mask as libc::mode_t), "set the umask");
    }
    let cwd = process.cwd();
    if !cwd.as_os_str().is_empty() {
        p.push(
            Step::Chdir(cpath(cwd)?),
            format!("chdir to process.cwd {}", cwd.display()),
        );
    }
    p.push(
        Step::SetIds {
            uid: user.uid(),
            gid: user.gid(),
            groups: user.additional_gids().clone().unwrap_or_default(),
        },
        format!("become uid {} gid {}", user.uid(), user.gid()),
    );
    p.push(
        Step::SetCaps(CapSets {
            effective,
            permitted,
            inheritable,
            ambient,
        }),
        "set capabilities",
    );
    if i.console {
        p.push(
            Step::Ctty(CONSOLE_SLAVE_FD),
            "take the console as controlling terminal",
        );
    }
    for (step, what) in between {
        p.push(step, what);
    }
    if nnp {
        p.push(Step::NoNewPrivs, "set no_new_privs");
        if let Some(f) = i.seccomp {
            p.push(Step::Seccomp(f.to_vec()), "load the seccomp filter");
        }
    }
    Ok(notes)
}

/// Everything `create` prepared before the clone that the steps refer to.
pub struct InitInputs<'a> {
    pub id: &'a str,
    pub spec: &'a Spec,
    pub bundle: &'a Path,
    pub rootfs: &'a Path,
    pub cgroups: &'a CgroupSet,
    /// Namespaces to join: (type, open fd of `path`). A pid namespace is joined by
    /// the parent before the clone and is not listed.
    pub join: &'a [(LinuxNamespaceType, RawFd)],
    /// Open directory of the container's state (for the exec fifo).
    pub state_dir_fd: RawFd,
    pub console_socket: Option<RawFd>,
    pub no_pivot: bool,
    /// Stop at a Sync before pivot_root for createRuntime/createContainer hooks.
    pub hooks_sync: bool,
    /// The mount the rootfs lives on (the longest mount point that holds it), from the
    /// runtime's mountinfo ([`mount_holding`]); made private before pivot_root when
    /// `rootfsPropagation` shares `/`, as runc does, since pivot_root refuses a shared
    /// parent mount.
    pub rootfs_parent_mount: Option<PathBuf>,
    pub process: ProcessInputs<'a>,
}

/// The mount point in `mountinfo` (the text of /proc/self/mountinfo) that holds
/// `path`: the longest one that is a prefix of it (pure).
pub fn mount_holding(mountinfo: &str, path: &Path) -> Option<PathBuf> {
    let unescape = |s: &str| {
        s.replace("\\040", " ")
            .replace("\\011", "\t")
            .replace("\\012", "\n")
            .replace("\\134", "\\")
    };
    mountinfo
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .map(|m| PathBuf::from(unescape(m)))
        .filter(|m| path.starts_with(m))
        .max_by_key(|m| m.as_os_str().len())
}

/// The sync number of the hook point.
pub const HOOKS_SYNC: u32 = 1;

fn ns_flag(t: LinuxNamespaceType) -> libc::c_int {
    match t {
        LinuxNamespaceType::Mount => libc::CLONE_NEWNS,
        LinuxNamespaceType::Cgroup => libc::CLONE_NEWCGROUP,
        LinuxNamespaceType::Uts => libc::CLONE_NEWUTS,
        LinuxNamespaceType::Ipc => libc::CLONE_NEWIPC,
        LinuxNamespaceType::User => libc::CLONE_NEWUSER,
        LinuxNamespaceType::Pid => libc::CLONE_NEWPID,
        LinuxNamespaceType::Network => libc::CLONE_NEWNET,
        LinuxNamespaceType::Time => 0x80,
    }
}

/// The host id that container id 0 maps to under `maps`, if any (pure).
pub fn host_id_of_root(maps: &[oci_spec::runtime::LinuxIdMapping]) -> Option<u32> {
    maps.iter()
        .find(|m| m.container_id() == 0 && m.size() > 0)
        .map(|m| m.host_id())
}

/// Whether the container has a mount namespace of its own (new, or joined by path);
/// without one it runs in the runtime's filesystem.
pub fn has_own_mount_namespace(spec: &Spec) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().clone())
        .unwrap_or_default()
        .iter()
        .any(|n| n.typ() == LinuxNamespaceType::Mount)
}

/// Which namespaces are new (not joined by path).
pub fn new_namespaces(spec: &Spec) -> Vec<LinuxNamespaceType> {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().clone())
        .unwrap_or_default()
        .iter()
        .filter(|n| n.path().is_none())
        .map(|n| n.typ())
        .collect()
}

/// Build the container init's plan.
pub fn init_plan(i: &InitInputs<'_>) -> Result<(Plan, Vec<String>), String> {
    let spec = i.spec;
    let linux = spec.linux().clone().unwrap_or_default();
    let new = new_namespaces(spec);
    // A namespace the config does not list is the runtime's (runtime-spec): without a
    // mount namespace of its own the container sees the runtime's filesystem, so
    // nothing that would change it may be asked for (runc refuses the same).
    let own_mnt = new.contains(&LinuxNamespaceType::Mount)
        || i.join.iter().any(|(t, _)| *t == LinuxNamespaceType::Mount);
    if !own_mnt {
        let needs = |what: &str| {
            Err(format!(
                "{what} needs a mount namespace of the container's own; add {{\"type\": \"mount\"}} to linux.namespaces or remove {what}"
            ))
        };
        if spec.mounts().as_ref().is_some_and(|m| !m.is_empty()) {
            return needs("mounts");
        }
        if linux.masked_paths().as_ref().is_some_and(|m| !m.is_empty()) {
            return needs("linux.maskedPaths");
        }
        if linux
            .readonly_paths()
            .as_ref()
            .is_some_and(|m| !m.is_empty())
        {
            return needs("linux.readonlyPaths");
        }
        if linux.devices().as_ref().is_some_and(|m| !m.is_empty()) {
            return needs("linux.devices");
        }
        if linux
            .rootfs_propagation()
            .as_deref()
            .is_some_and(|r| !r.is_empty())
        {
            return needs("linux.rootfsPropagation");
        }
        if spec
            .root()
            .as_ref()
            .and_then(|r| r.readonly())
            .unwrap_or(false)
        {
            return needs("root.readonly");
        }
        if i.no_pivot {
            return needs("--no-pivot");
        }
    }
    if new.contains(&LinuxNamespaceType::Time) {
        return Err(
            "linux.namespaces: a time namespace is not supported by warren; remove it".into(),
        );
    }
    let mut flags = 0;
    for t in &new {
        if !matches!(t, LinuxNamespaceType::Cgroup) {
            flags |= ns_flag(*t);
        }
    }
    let userns = new.contains(&LinuxNamespaceType::User);
    let mut p = Plan::new(flags);
    // Nothing happens in the child before the parent's go (cgroups, id maps): the
    // user namespace is joined after it, as every other.
    p.push(
        Step::WaitParent,
        "wait for the runtime to set up cgroups and id maps",
    );
    for (t, fd) in i
        .join
        .iter()
        .filter(|(t, _)| *t == LinuxNamespaceType::User)
    {
        p.push(
            Step::Setns {
                fd: *fd,
                nstype: ns_flag(*t),
            },
            "join the user namespace",
        );
    }
    if userns {
        p.push(
            Step::SetIds {
                uid: 0,
                gid: 0,
                groups: Vec::new(),
            },
            "become root of the new user namespace",
        );
        p.push(
            Step::SetCaps(CapSets {
                effective: u64::MAX >> 23,
                permitted: u64::MAX >> 23,
                inheritable: 0,
                ambient: 0,
            }),
            "regain capabilities in the new user namespace",
        );
    }
    for (t, fd) in i
        .join
        .iter()
        .filter(|(t, _)| *t != LinuxNamespaceType::User)
    {
        p.push(
            Step::Setns {
                fd: *fd,
                nstype: ns_flag(*t),
            },
            format!("join the {t} namespace"),
        );
    }
    if new.contains(&LinuxNamespaceType::Cgroup) {
        p.push(
            Step::Unshare(libc::CLONE_NEWCGROUP),
            "create the cgroup namespace",
        );
    }
    let root_prop = match linux.rootfs_propagation().as_deref() {
        None | Some("") => libc::MS_SLAVE | libc::MS_REC,
        Some(other) => *parse_options(&[other.to_string()])
            .propagation
            .first()
            .ok_or_else(|| format!("linux.rootfsPropagation {other:?}: expected private, shared, slave or unbindable (r-prefixed for recursive)"))?,
    };
    let rootfs = i.rootfs;
    if own_mnt {
        rootfs_steps(&mut p, i, &linux, root_prop, userns)?;
    }
    let terminal = spec
        .process()
        .as_ref()
        .and_then(|p| p.terminal())
        .unwrap_or(false);
    if terminal {
        let socket = i
            .console_socket
            .ok_or("process.terminal is true but no --console-socket was given; pass one (the pty master is sent there)")?;
        let size = spec.process().as_ref().and_then(|p| p.console_size());
        let ptmx = if own_mnt {
            secure_join(rootfs, Path::new("/dev/pts/ptmx"))
        } else {
            PathBuf::from("/dev/ptmx")
        };
        p.push(
            Step::Console {
                ptmx: cpath(&ptmx)?,
                socket,
                slave_fd: CONSOLE_SLAVE_FD,
                rows: size.map_or(0, |s| s.height() as u16),
                cols: size.map_or(0, |s| s.width() as u16),
            },
            "allocate the console pty (needs a devpts mount at /dev/pts) and send it to the console socket",
        );
        if own_mnt {
            let console = secure_join(rootfs, Path::new("/dev/console"));
            p.push(
                Step::Tolerate(
                    libc::EEXIST,
                    Box::new(Step::CreateFile {
                        path: cpath(&console)?,
                        mode: 0o600,
                    }),
                ),
                "create /dev/console",
            );
            let src = format!("/proc/self/fd/{CONSOLE_SLAVE_FD}");
            p.mount(Some(src.as_bytes()), &console, None, libc::MS_BIND, None)?;
        }
    }
    if let Some(h) = spec.hostname().as_deref().filter(|h| !h.is_empty()) {
        let joined_uts = i.join.iter().any(|(t, _)| *t == LinuxNamespaceType::Uts);
        if !new.contains(&LinuxNamespaceType::Uts) && !joined_uts {
            return Err("hostname is set but the container has no uts namespace of its own (new or joined by path); add {\"type\": \"uts\"} or drop hostname".into());
        }
        p.push(Step::Sethostname(h.as_bytes().to_vec()), "set the hostname");
    }
    if i.hooks_sync {
        p.push(
            Step::Sync(HOOKS_SYNC),
            "wait for the createRuntime and createContainer hooks",
        );
    }
    if !own_mnt {
        // The runtime's filesystem: no root to change to.
    } else if i.no_pivot {
        p.push(
            Step::MoveRoot {
                new_root: cpath(rootfs)?,
            },
            "move the rootfs onto / and chroot (--no-pivot)",
        );
    } else {
        p.push(
            Step::PivotRoot {
                new_root: cpath(rootfs)?,
            },
            format!("pivot_root into {}", rootfs.display()),
        );
    }
    if own_mnt
        && linux
            .rootfs_propagation()
            .as_deref()
            .is_some_and(|r| !r.is_empty())
    {
        // As runc: the propagation applies to the container's own root, which exists
        // as "/" only now.
        p.mount(None, Path::new("/"), None, root_prop, None)?;
    }
    let mut sysctls: Vec<(String, String)> = linux
        .sysctl()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    sysctls.sort();
    for (k, v) in sysctls {
        if k.contains("..") || k.contains('\0') {
            return Err(format!("linux.sysctl {k:?} is not a sysctl name"));
        }
        let path = format!("/proc/sys/{}", k.replace('.', "/"));
        p.push(
            Step::WriteFile {
                path: cstr(&path)?,
                data: v.clone().into_bytes(),
            },
            format!("set sysctl {k}={v}"),
        );
    }
    if let Some(adj) = spec.process().as_ref().and_then(|p| p.oom_score_adj()) {
        p.push(
            Step::WriteFile {
                path: cstr("/proc/self/oom_score_adj")?,
                data: adj.to_string().into_bytes(),
            },
            "set process.oomScoreAdj",
        );
    }
    if own_mnt {
        let masked = linux.masked_paths().clone().unwrap_or_default();
        let readonly = linux.readonly_paths().clone().unwrap_or_default();
        let masks = crate::sandbox::masks::steps(
            Path::new("/"),
            Path::new("/dev"),
            masked.iter().map(String::as_str),
            readonly.iter().map(String::as_str),
        )?;
        for (step, what) in masks {
            p.push(step, what);
        }
    }
    if spec
        .root()
        .as_ref()
        .and_then(|r| r.readonly())
        .unwrap_or(false)
    {
        p.mount(
            None,
            Path::new("/"),
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
            None,
        )?;
    }
    // exec.fifo is reached through the state directory's descriptor, which only root
    // may search: hold it (O_PATH) before becoming the process's user, and reopen it
    // for writing through /proc/self/fd after `create` has returned.
    p.push(
        Step::OpenAt {
            dirfd: i.state_dir_fd,
            path: cstr("exec.fifo")?,
            flags: libc::O_PATH | libc::O_CLOEXEC,
            fd: FIFO_PATH_FD,
        },
        "hold exec.fifo",
    );
    let process = spec
        .process()
        .clone()
        .ok_or("process is missing; config.json must say what to run")?;
    let wait_for_start = vec![
        (Step::Ready, "report the container created".to_string()),
        // One byte tells `start` the fifo was opened; EOF at exec tells it the process
        // runs.
        (
            Step::OpenAndWrite {
                path: cstr(&format!("/proc/self/fd/{FIFO_PATH_FD}"))?,
                data: b"0".to_vec(),
            },
            "wait for start (open exec.fifo through /proc/self/fd; needs /proc)".to_string(),
        ),
    ];
    let notes = process_steps_around(&mut p, &process, &i.process, wait_for_start)?;
    Ok((p, notes))
}

/// The container's own root, in its own mount namespace: `/`'s propagation, the
/// rootfs bound onto itself, `mounts[]` in order, the device nodes and /dev links.
fn rootfs_steps(
    p: &mut Plan,
    i: &InitInputs<'_>,
    linux: &oci_spec::runtime::Linux,
    root_prop: libc::c_ulong,
    userns: bool,
) -> Result<(), String> {
    let spec = i.spec;
    let rootfs = i.rootfs;
    p.mount(None, Path::new("/"), None, root_prop, None)?;
    if root_prop & libc::MS_SHARED != 0 {
        if let Some(parent) = &i.rootfs_parent_mount {
            p.mount(None, parent, None, libc::MS_PRIVATE, None)?;
        }
    }
    let rb = rootfs.as_os_str().as_bytes();
    p.mount(Some(rb), rootfs, None, libc::MS_BIND | libc::MS_REC, None)?;

    for (n, m) in spec.mounts().iter().flatten().enumerate() {
        mount_entry(p, m, i, userns)
            .map_err(|e| format!("mounts[{n}] ({}): {e}", m.destination().display()))?;
    }
    devices(p, linux, rootfs, userns)?;
    Ok(())
}

/// mkdir -p of `dir` inside the rootfs, one step per component (existing is fine).
fn mkdirs(p: &mut Plan, rootfs: &Path, dir: &Path) -> Result<(), String> {
    let rel = dir
        .strip_prefix(rootfs)
        .map_err(|_| format!("{} is outside the rootfs", dir.display()))?;
    let mut at = rootfs.to_path_buf();
    for c in rel.components() {
        at.push(c);
        p.push(
            Step::Mkdir {
                path: cpath(&at)?,
                mode: 0o755,
            },
            format!("create {}", at.display()),
        );
    }
    Ok(())
}

fn mount_entry(p: &mut Plan, m: &Mount, i: &InitInputs<'_>, userns: bool) -> Result<(), String> {
    let rootfs = i.rootfs;
    if !m.destination().is_absolute() {
        return Err("destination must be an absolute path".into());
    }
    let dest = secure_join(rootfs, m.destination());
    let typ = m.typ().clone().unwrap_or_default();
    let o = parse_options(&m.options().clone().unwrap_or_default());
    let data = (!o.data.is_empty()).then(|| o.data.join(","));
    if typ == "bind" || o.bind {
        let src = m.source().clone().ok_or("a bind mount needs a source")?;
        let src = if src.is_absolute() {
            src
        } else {
            i.bundle.join(src)
        };
        let meta = std::fs::metadata(&src).map_err(|e| format!("source {}: {e}", src.display()))?;
        if meta.is_dir() {
            mkdirs(p, rootfs, &dest)?;
        } else {
            if let Some(parent) = dest.parent() {
                mkdirs(p, rootfs, parent)?;
            }
            p.push(
                Step::Tolerate(
                    libc::EEXIST,
                    Box::new(Step::CreateFile {
                        path: cpath(&dest)?,
                        mode: 0o644,
                    }),
                ),
                format!("create {}", dest.display()),
            );
        }
        let rec = if o.recursive { libc::MS_REC } else { 0 };
        p.mount(
            Some(src.as_os_str().as_bytes()),
            &dest,
            None,
            libc::MS_BIND | rec,
            data.as_deref(),
        )?;
        let extra = o.flags & !libc::MS_REMOUNT;
        if extra != 0 {
            p.mount(
                None,
                &dest,
                None,
                libc::MS_BIND | libc::MS_REMOUNT | rec | extra,
                None,
            )?;
        }
    } else if typ == "cgroup" || typ == "cgroup2" {
        cgroup_mount(p, &dest, i.cgroups, o.flags, rootfs, userns)?;
    } else {
        mkdirs(p, rootfs, &dest)?;
        let src = m
            .source()
            .clone()
            .map(|s| std::os::unix::ffi::OsStringExt::into_vec(s.into_os_string()))
            .unwrap_or_else(|| typ.clone().into_bytes());
        let fstype = if typ.is_empty() {
            None
        } else {
            Some(typ.as_str())
        };
        p.mount(Some(&src), &dest, fstype, o.flags, data.as_deref())?;
    }
    for prop in &o.propagation {
        p.mount(None, &dest, None, *prop, None)?;
    }
    Ok(())
}

/// A cgroup mount: on v1, a tmpfs with a read-only bind of each of the container's
/// own cgroup directories (so it sees only itself, with or without a cgroup
/// namespace); on v2, a bind of its directory.
fn cgroup_mount(
    p: &mut Plan,
    dest: &Path,
    set: &CgroupSet,
    flags: libc::c_ulong,
    rootfs: &Path,
    _userns: bool,
) -> Result<(), String> {
    mkdirs(p, rootfs, dest)?;
    let ro = flags & libc::MS_RDONLY;
    let base = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    match set.version {
        CgroupVersion::V2 => {
            let dir = &set.dirs.first().ok_or("the container has no cgroup")?.1;
            p.mount(
                Some(dir.as_os_str().as_bytes()),
                dest,
                None,
                libc::MS_BIND,
                None,
            )?;
            p.mount(
                None,
                dest,
                None,
                libc::MS_BIND | libc::MS_REMOUNT | base | ro,
                None,
            )?;
        }
        CgroupVersion::V1 => {
            p.mount(Some(b"tmpfs"), dest, Some("tmpfs"), base, Some("mode=755"))?;
            for (ctrls, dir) in &set.dirs {
                let at = dest.join(ctrls);
                p.push(
                    Step::Mkdir {
                        path: cpath(&at)?,
                        mode: 0o755,
                    },
                    format!("create {}", at.display()),
                );
                p.mount(
                    Some(dir.as_os_str().as_bytes()),
                    &at,
                    None,
                    libc::MS_BIND,
                    None,
                )?;
                p.mount(
                    None,
                    &at,
                    None,
                    libc::MS_BIND | libc::MS_REMOUNT | base | ro,
                    None,
                )?;
                if ctrls.contains(',') {
                    for c in ctrls.split(',') {
                        let link = dest.join(c);
                        p.push(
                            Step::Tolerate(
                                libc::EEXIST,
                                Box::new(Step::Symlink {
                                    target: cstr(ctrls)?,
                                    link: cpath(&link)?,
                                }),
                            ),
                            format!("link {}", link.display()),
                        );
                    }
                }
            }
            if ro != 0 {
                p.mount(
                    None,
                    dest,
                    None,
                    libc::MS_REMOUNT | base | ro,
                    Some("mode=755"),
                )?;
            }
        }
    }
    Ok(())
}

/// The runtime-spec's default devices, then `linux.devices`; the /dev links.
fn devices(
    p: &mut Plan,
    linux: &oci_spec::runtime::Linux,
    rootfs: &Path,
    userns: bool,
) -> Result<(), String> {
    let mut list: Vec<(PathBuf, libc::mode_t, u64, u64, u32, u32, u32)> =
        crate::isolation::devices::NODES
            .iter()
            .map(|n| {
                (
                    Path::new("/dev").join(n.name),
                    libc::S_IFCHR,
                    n.major as u64,
                    n.minor as u64,
                    n.mode,
                    0,
                    0,
                )
            })
            .collect();
    for d in linux.devices().iter().flatten() {
        use oci_spec::runtime::LinuxDeviceType as T;
        let kind = match d.typ() {
            T::C | T::U => libc::S_IFCHR,
            T::B => libc::S_IFBLK,
            T::P => libc::S_IFIFO,
            T::A => {
                return Err(format!(
                    "linux.devices {}: type must be c, b, u or p",
                    d.path().display()
                ))
            }
        };
        list.retain(|x| x.0 != *d.path());
        list.push((
            d.path().clone(),
            kind,
            d.major() as u64,
            d.minor() as u64,
            d.file_mode().unwrap_or(0o666),
            d.uid().unwrap_or(0),
            d.gid().unwrap_or(0),
        ));
    }
    // linux.devices get exactly their fileMode (and uid, gid), whatever the runtime's
    // umask: mknod under umask 0, the caller's umask back afterwards (runtime spec:
    // the process keeps it unless process.user.umask says otherwise).
    if !userns {
        p.push(Step::Umask(0), "clear the umask for the device nodes");
    }
    for (path, kind, major, minor, mode, uid, gid) in list {
        let at = secure_join(rootfs, &path);
        if let Some(parent) = at.parent() {
            mkdirs(p, rootfs, parent)?;
        }
        if userns {
            // mknod is refused in a user namespace: bind the host's node instead.
            p.push(
                Step::Tolerate(
                    libc::EEXIST,
                    Box::new(Step::CreateFile {
                        path: cpath(&at)?,
                        mode: 0o644,
                    }),
                ),
                format!("create {}", at.display()),
            );
            p.mount(
                Some(path.as_os_str().as_bytes()),
                &at,
                None,
                libc::MS_BIND,
                None,
            )?;
        } else {
            p.push(
                Step::Tolerate(
                    libc::EEXIST,
                    Box::new(Step::Mknod {
                        path: cpath(&at)?,
                        mode: kind | (mode & 0o7777),
                        dev: libc::makedev(major as u32, minor as u32),
                    }),
                ),
                format!("create device {}", path.display()),
            );
            if (uid, gid) != (0, 0) {
                p.push(
                    Step::Chown {
                        path: cpath(&at)?,
                        uid,
                        gid,
                    },
                    format!("give {} to {uid}:{gid}", path.display()),
                );
            }
        }
    }
    if !userns {
        p.push(
            Step::Umask(warren_sys::proc::current_umask() as libc::mode_t),
            "restore the caller's umask",
        );
    }
    for (name, target) in crate::isolation::devices::LINKS {
        let link = format!("/dev/{name}");
        let at = secure_join(rootfs, Path::new(&link));
        p.push(
            Step::Tolerate(
                libc::EEXIST,
                Box::new(Step::Symlink {
                    target: cstr(target)?,
                    link: cpath(&at)?,
                }),
            ),
            format!("link {link}"),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden plans: the init plan of several configs keeps every sandbox invariant
    /// (sandbox::invariants), and the steps land where the runtime spec wants them.
    #[test]
    fn init_plans_keep_the_sandbox_invariants() {
        let dir = tempfile::tempdir().unwrap();
        let rootfs = dir.path().join("rootfs");
        for d in ["proc", "dev", "sys", "tmp", "bin"] {
            std::fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        std::fs::write(rootfs.join("bin/sh"), "").unwrap();
        std::fs::set_permissions(
            rootfs.join("bin/sh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let cgroups = CgroupSet {
            version: CgroupVersion::V1,
            dirs: Vec::new(),
        };
        let filter = vec![SockFilter {
            code: 6,
            jt: 0,
            jf: 0,
            k: 0x7fff_0000,
        }];
        let hard = |_: libc::c_int| None;
        type Edit = Box<dyn Fn(&mut Spec)>;
        // (name, config edit, terminal, --no-pivot)
        let variants: Vec<(&str, Edit, bool, bool)> = vec![
            ("default", Box::new(|_: &mut Spec| {}), false, false),
            (
                "user namespace",
                Box::new(|s: &mut Spec| {
                    let mut linux = s.linux().clone().unwrap();
                    let mut ns = linux.namespaces().clone().unwrap();
                    ns.push(
                        oci_spec::runtime::LinuxNamespaceBuilder::default()
                            .typ(LinuxNamespaceType::User)
                            .build()
                            .unwrap(),
                    );
                    linux.set_namespaces(Some(ns));
                    s.set_linux(Some(linux));
                }),
                false,
                false,
            ),
            (
                "terminal, no_new_privs off",
                Box::new(|s: &mut Spec| {
                    let mut p = s.process().clone().unwrap();
                    p.set_terminal(Some(true));
                    p.set_no_new_privileges(Some(false));
                    s.set_process(Some(p));
                }),
                true,
                false,
            ),
            ("no pivot", Box::new(|_: &mut Spec| {}), false, true),
        ];
        for (name, edit, console, no_pivot) in variants {
            let mut spec = Spec::default();
            let mut process = spec.process().clone().unwrap();
            process.set_args(Some(vec!["sh".into()]));
            spec.set_process(Some(process));
            edit(&mut spec);
            let i = InitInputs {
                id: "golden",
                spec: &spec,
                bundle: dir.path(),
                rootfs: &rootfs,
                cgroups: &cgroups,
                join: &[],
                state_dir_fd: 10,
                console_socket: console.then_some(11),
                no_pivot,
                hooks_sync: true,
                rootfs_parent_mount: None,
                process: ProcessInputs {
                    id: "golden",
                    root: &rootfs,
                    seccomp: Some(&filter),
                    console,
                    hard_limit: &hard,
                },
            };
            let (p, _) = init_plan(&i).unwrap_or_else(|e| panic!("{name}: {e}"));
            crate::sandbox::invariants::check(&p.spawn, &[&rootfs])
                .unwrap_or_else(|e| panic!("{name}: {e} ({})", p.what[e.index]));
            let at = |want: &dyn Fn(&Step) -> bool| p.spawn.steps.iter().position(want);
            let ready = at(&|s| matches!(s, Step::Ready)).expect("a Ready step");
            let set_ids = at(&|s| matches!(s, Step::SetIds { .. })).expect("SetIds");
            // The user is applied before create returns, the filter after start.
            assert!(set_ids < ready, "{name}: SetIds after Ready");
            let last_filter = p
                .spawn
                .steps
                .iter()
                .rposition(|s| matches!(s, Step::Seccomp(_)))
                .expect("a filter");
            let nnp = spec.process().as_ref().unwrap().no_new_privileges() == Some(true);
            if nnp {
                assert_eq!(
                    last_filter,
                    p.spawn.steps.len() - 1,
                    "{name}: filter not last"
                );
            }
            assert!(
                matches!(p.spawn.steps[0], Step::WaitParent),
                "{name}: the first step is the parent's go"
            );
        }
    }

    #[test]
    fn the_mount_holding_a_path_is_the_longest_prefix() {
        let mi = "22 1 8:1 / / rw shared:1 - ext4 /dev/sda1 rw\n\
                  30 22 0:5 / /var/lib rw shared:2 - tmpfs tmpfs rw\n\
                  31 22 0:6 / /var/lib/c\\040d rw - tmpfs tmpfs rw\n";
        let at = |p: &str| mount_holding(mi, Path::new(p)).unwrap();
        assert_eq!(at("/var/lib/x/rootfs"), Path::new("/var/lib"));
        assert_eq!(at("/var/lib/c d/rootfs"), Path::new("/var/lib/c d"));
        assert_eq!(at("/home/u"), Path::new("/"));
        // A prefix of the string that is not a path prefix does not count.
        assert_eq!(at("/var/library"), Path::new("/"));
    }

    #[test]
    fn the_host_id_of_the_container_root() {
        let m = |c: u32, h: u32, n: u32| {
            oci_spec::runtime::LinuxIdMappingBuilder::default()
                .container_id(c)
                .host_id(h)
                .size(n)
                .build()
                .unwrap()
        };
        assert_eq!(host_id_of_root(&[m(0, 200000, 65536)]), Some(200000));
        assert_eq!(
            host_id_of_root(&[m(1, 100001, 10), m(0, 5000, 1)]),
            Some(5000)
        );
        assert_eq!(host_id_of_root(&[m(1, 100001, 10)]), None);
        assert_eq!(host_id_of_root(&[]), None);
    }

    #[test]
    fn options_split_into_flags_propagation_and_data() {
        let o = parse_options(
            &[
                "nosuid",
                "strictatime",
                "mode=755",
                "size=65536k",
                "rprivate",
                "ro",
            ]
            .map(String::from),
        );
        assert_eq!(
            o.flags,
            libc::MS_NOSUID | libc::MS_STRICTATIME | libc::MS_RDONLY
        );
        assert_eq!(o.propagation, vec![libc::MS_PRIVATE | libc::MS_REC]);
        assert_eq!(o.data, vec!["mode=755", "size=65536k"]);
        let b = parse_options(&["rbind", "rw", "tmpcopyup"].map(String::from));
        assert!(b.bind && b.recursive && b.flags == 0 && b.data.is_empty());
    }

    #[test]
    fn secure_join_keeps_links_inside_the_root() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("usr/bin")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("escape")).unwrap();
        std::os::unix::fs::symlink("../../..", root.join("usr/bin/up")).unwrap();
        std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
        assert_eq!(
            secure_join(root, Path::new("/escape/passwd")),
            root.join("etc/passwd")
        );
        assert_eq!(
            secure_join(root, Path::new("/usr/bin/up/x")),
            root.join("x")
        );
        assert_eq!(secure_join(root, Path::new("/../../a")), root.join("a"));
        assert_eq!(
            secure_join(root, Path::new("/bin/sh")),
            root.join("usr/bin/sh")
        );
        std::fs::write(root.join("usr/bin/sh"), "").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            root.join("usr/bin/sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_eq!(
            resolve_exec(root, "sh", "/sbin:/bin"),
            Some("/bin/sh".into())
        );
        assert_eq!(resolve_exec(root, "/bin/sh", ""), Some("/bin/sh".into()));
        assert_eq!(resolve_exec(root, "nope", "/bin"), None);
    }

    #[test]
    fn capability_names_become_bits() {
        let (m, unknown) = cap_mask(["CAP_CHOWN", "CAP_KILL", "CAP_NOPE"].into_iter());
        assert_eq!(m, 1 | 1 << 5);
        assert_eq!(unknown, vec!["CAP_NOPE"]);
    }
}
