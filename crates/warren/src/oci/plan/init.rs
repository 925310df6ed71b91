//! The container init's plan: namespaces, the rootfs, pivot_root, the wait for
//! `start`, then the process.

use super::*;

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

/// Build the container init's plan: config.json as a sandbox, then the one builder.
pub fn init_plan(i: &InitInputs<'_>) -> Result<(Plan, Vec<String>), PlanError> {
    let (spec, notes) = init_spec(i)?;
    Ok((crate::sandbox::plan(spec)?, notes))
}

/// Refuse what needs a mount namespace of the container's own when it has none.
fn check_mount_namespace(
    i: &InitInputs<'_>,
    linux: &oci_spec::runtime::Linux,
) -> Result<(), PlanError> {
    let spec = i.spec;
    let needs = |what: &str| {
        Err(PlanError::field(
            what,
            format!("needs a mount namespace of the container's own; add {{\"type\": \"mount\"}} to linux.namespaces or remove {what}"),
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
    Ok(())
}

/// config.json (and what `create` prepared) as a sandbox (the field mapping).
pub fn init_spec(i: &InitInputs<'_>) -> Result<(SandboxSpec, Vec<String>), PlanError> {
    let spec = i.spec;
    let linux = spec.linux().clone().unwrap_or_default();
    let new = new_namespaces(spec);
    // A namespace the config does not list is the runtime's (runtime-spec): without a
    // mount namespace of its own the container sees the runtime's filesystem, so
    // nothing that would change it may be asked for (runc refuses the same).
    let own_mnt = new.contains(&LinuxNamespaceType::Mount)
        || i.join.iter().any(|(t, _)| *t == LinuxNamespaceType::Mount);
    if !own_mnt {
        check_mount_namespace(i, &linux)?;
    }
    if new.contains(&LinuxNamespaceType::Time) {
        return Err(PlanError::field(
            "linux.namespaces",
            "a time namespace is not supported by warren; remove it",
        ));
    }
    let mut flags = 0;
    for t in &new {
        if !matches!(t, LinuxNamespaceType::Cgroup) {
            flags |= ns_flag(*t);
        }
    }
    let userns = new.contains(&LinuxNamespaceType::User);
    let user = match i.join.iter().find(|(t, _)| *t == LinuxNamespaceType::User) {
        Some((_, fd)) => UserNs::Join(*fd),
        None if userns => UserNs::New,
        None => UserNs::Inherit,
    };
    let join = i
        .join
        .iter()
        .filter(|(t, _)| *t != LinuxNamespaceType::User)
        .map(|(t, fd)| (ns_flag(*t), *fd, t.to_string()))
        .collect();
    let root_prop = match linux.rootfs_propagation().as_deref() {
        None | Some("") => libc::MS_SLAVE | libc::MS_REC,
        Some(other) => *parse_options(&[other.to_string()])
            .propagation
            .first()
            .ok_or_else(|| PlanError::field("linux.rootfsPropagation", format!("{other:?}: expected private, shared, slave or unbindable (r-prefixed for recursive)")))?,
    };
    let rootfs = i.rootfs;
    let root = if own_mnt {
        Some(root_spec(i, &linux, root_prop, userns)?)
    } else {
        None
    };
    let process = spec
        .process()
        .clone()
        .ok_or_else(|| PlanError::field("process", "missing; config.json must say what to run"))?;
    let terminal = process.terminal().unwrap_or(false);
    let console = if terminal {
        let socket = i.console_socket.ok_or_else(|| {
            PlanError::field(
                "process.terminal",
                "true but no --console-socket was given; pass one (the pty master is sent there)",
            )
        })?;
        let size = process.console_size();
        Some(Console::Pty {
            ptmx: if own_mnt {
                secure_join(rootfs, Path::new("/dev/pts/ptmx"))
            } else {
                PathBuf::from("/dev/ptmx")
            },
            socket,
            slave_fd: CONSOLE_SLAVE_FD,
            rows: size.map_or(0, |s| s.height() as u16),
            cols: size.map_or(0, |s| s.width() as u16),
            dev_console: own_mnt.then(|| secure_join(rootfs, Path::new("/dev/console"))),
        })
    } else {
        None
    };
    let hostname = match spec.hostname().as_deref().filter(|h| !h.is_empty()) {
        Some(h) => {
            let joined_uts = i.join.iter().any(|(t, _)| *t == LinuxNamespaceType::Uts);
            if !new.contains(&LinuxNamespaceType::Uts) && !joined_uts {
                return Err(PlanError::field("hostname", "set but the container has no uts namespace of its own (new or joined by path); add {\"type\": \"uts\"} or drop hostname"));
            }
            Some(h.as_bytes().to_vec())
        }
        None => None,
    };
    let mut sysctls: Vec<(String, String)> = linux
        .sysctl()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    sysctls.sort();
    if let Some((k, _)) = sysctls
        .iter()
        .find(|(k, _)| k.contains("..") || k.contains('\0'))
    {
        return Err(PlanError::field(
            "linux.sysctl",
            format!("{k:?} is not a sysctl name; use dotted names such as net.ipv4.ip_forward"),
        ));
    }
    let gate = vec![
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
    let (process_spec, notes) = process_spec(&process, &i.process, gate)?;
    let sandbox = SandboxSpec {
        namespaces: Namespaces {
            new: flags,
            user,
            join,
            cgroup: new.contains(&LinuxNamespaceType::Cgroup),
        },
        // Nothing happens in the child before the parent's go (cgroups, id maps): the
        // user namespace is joined after it, as every other.
        sync: Some(SyncPoint::First),
        root,
        hostname,
        loopback_up: false,
        hooks_sync: i.hooks_sync.then_some(HOOKS_SYNC),
        sysctls,
        oom_score_adj: process.oom_score_adj(),
        console,
        stdio: Vec::new(),
        // exec.fifo is reached through the state directory's descriptor, which only
        // root may search: hold it (O_PATH) before becoming the process's user, and
        // reopen it for writing through /proc/self/fd after `create` has returned.
        hold: Some(Hold {
            dirfd: i.state_dir_fd,
            path: "exec.fifo".into(),
            flags: libc::O_PATH | libc::O_CLOEXEC,
            fd: FIFO_PATH_FD,
            what: "hold exec.fifo".into(),
        }),
        pass_fds: 0,
        process: process_spec,
    };
    Ok((sandbox, notes))
}

/// The container's own root: `/`'s propagation, the rootfs bound onto itself,
/// `mounts[]` in order, the device nodes and /dev links, masks, read-only root.
fn root_spec(
    i: &InitInputs<'_>,
    linux: &oci_spec::runtime::Linux,
    root_prop: libc::c_ulong,
    userns: bool,
) -> Result<Root, PlanError> {
    let spec = i.spec;
    let rootfs = i.rootfs;
    let mut mounts = vec![MountEntry {
        target: rootfs.to_path_buf(),
        prepare: Prepare::AsIs,
        kind: MountKind::Mount {
            source: Some(rootfs.as_os_str().as_bytes().to_vec()),
            fstype: None,
            flags: libc::MS_BIND | libc::MS_REC,
            data: None,
        },
        then: Vec::new(),
    }];
    for (n, m) in spec.mounts().iter().flatten().enumerate() {
        let field = format!("mounts[{n}] ({})", m.destination().display());
        mounts.extend(mounts::entries(m, i).map_err(|e| match e {
            PlanError::Field { field: f, problem } => {
                PlanError::field(format!("{field}.{f}"), problem)
            }
            other => other,
        })?);
    }
    let (nodes, links) = devices::nodes(linux, rootfs, userns)?;
    let shared = root_prop & libc::MS_SHARED != 0;
    let propagation_set = linux
        .rootfs_propagation()
        .as_deref()
        .is_some_and(|r| !r.is_empty());
    Ok(Root {
        path: rootfs.to_path_buf(),
        inside: vec![rootfs.to_path_buf()],
        propagation: root_prop,
        private_parent: i.rootfs_parent_mount.clone().filter(|_| shared),
        mounts,
        nodes,
        links,
        change: if i.no_pivot {
            RootChange::MoveRoot
        } else {
            RootChange::PivotRoot
        },
        // As runc: the propagation applies to the container's own root, which exists
        // as "/" only after the root change.
        propagation_after: propagation_set.then_some(root_prop),
        masked: linux.masked_paths().clone().unwrap_or_default(),
        readonly_paths: linux.readonly_paths().clone().unwrap_or_default(),
        readonly: spec
            .root()
            .as_ref()
            .and_then(|r| r.readonly())
            .unwrap_or(false),
        // The runtime spec: the process keeps the caller's umask unless
        // process.user.umask says otherwise.
        umask_after: warren_sys::proc::current_umask() as libc::mode_t,
    })
}
