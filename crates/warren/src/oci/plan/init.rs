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
        mounts::mount_entry(p, m, i, userns)
            .map_err(|e| format!("mounts[{n}] ({}): {e}", m.destination().display()))?;
    }
    devices::devices(p, linux, rootfs, userns)?;
    Ok(())
}
