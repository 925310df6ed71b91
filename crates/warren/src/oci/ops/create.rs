//! `create` (and the create half of `run`): the container's record, cgroups and init,
//! which waits on `exec.fifo` for `start`.

use super::*;

pub struct CreateArgs<'a> {
    pub id: &'a str,
    pub bundle: &'a Path,
    pub pid_file: Option<&'a Path>,
    pub console_socket: Option<&'a Path>,
    pub no_pivot: bool,
    /// `--preserve-fds N`: descriptors 3 to 3+N-1 reach the process; no other does.
    pub preserve_fds: u32,
}

pub fn create(ctx: &Ctx, a: &CreateArgs<'_>) -> Result<()> {
    let id = a.id;
    state::check_id(id)?;
    let bundle = std::fs::canonicalize(a.bundle).map_err(|e| {
        Error::Invalid(format!(
            "container '{id}': bundle {}: {e}",
            a.bundle.display()
        ))
    })?;
    let spec = load_spec(id, &bundle)?;
    let root = spec.root().clone().ok_or_else(|| {
        Error::Invalid(format!(
            "container '{id}': config.json has no root; add \"root\": {{\"path\": \"rootfs\"}}"
        ))
    })?;
    let rootfs = std::fs::canonicalize(bundle.join(root.path())).map_err(|e| {
        Error::Invalid(format!(
            "container '{id}': root.path {}: {e}; the bundle must hold the root filesystem",
            root.path().display()
        ))
    })?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&ctx.root)
        .ctx(|| format!("creating the state root {}", ctx.root.display()))?;
    let dir = state::dir(&ctx.root, id);
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(Error::Invalid(format!(
                "container '{id}': container with id exists: {id}; delete it first or pick another id"
            )))
        }
        Err(e) => return Err(e).ctx(|| format!("creating {}", dir.display())),
    }
    let mut record = Record {
        id: id.into(),
        bundle: bundle.clone(),
        pid: None,
        start_time: None,
        created: state::now_rfc3339(),
        cgroups: None,
        cgroups_made: None,
        annotations: spec
            .annotations()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        awaiting_start: true,
        rootfs: rootfs.clone(),
    };
    let result = create_in(ctx, a, &spec, &mut record, &rootfs);
    if let Err(e) = result {
        let cleanup = destroy(ctx, &record).err();
        return Err(e.with_cleanup(cleanup));
    }
    Ok(())
}

fn create_in(
    ctx: &Ctx,
    a: &CreateArgs<'_>,
    spec: &Spec,
    record: &mut Record,
    rootfs: &Path,
) -> Result<()> {
    let id = a.id;
    let inval = |m: String| Error::Invalid(format!("container '{id}': {m}"));
    state::save(&ctx.root, record)?;
    let dir = state::dir(&ctx.root, id);
    // 0622 as runc: the process may already be its (unprivileged) user when it opens
    // the fifo for writing; the state directory keeps other users out.
    warren_sys::fs::mkfifo(&dir.join("exec.fifo"), 0o622)
        .and_then(|()| {
            std::fs::set_permissions(
                dir.join("exec.fifo"),
                std::os::unix::fs::PermissionsExt::from_mode(0o622),
            )
        })
        .ctx(|| format!("creating {}/exec.fifo", dir.display()))?;
    let linux = spec.linux().clone().unwrap_or_default();
    if plan::new_namespaces(spec).contains(&LinuxNamespaceType::User) {
        // The init opens exec.fifo (by its directory's fd) as the container's root,
        // which is an unprivileged id on the host: as runc, the fifo belongs to it
        // and the directory may be searched.
        let root_of = |maps: &Option<Vec<oci_spec::runtime::LinuxIdMapping>>| {
            plan::host_id_of_root(maps.as_deref().unwrap_or_default())
        };
        let (uid, gid) = (root_of(linux.uid_mappings()), root_of(linux.gid_mappings()));
        let fifo = dir.join("exec.fifo");
        std::os::unix::fs::chown(&fifo, uid, gid)
            .ctx(|| format!("container '{id}': chown {}", fifo.display()))?;
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o711))
            .ctx(|| format!("container '{id}': chmod {}", dir.display()))?;
    }
    let resources = linux.resources().clone().unwrap_or_default();
    let (limits, notes) =
        cgroup::limits(&resources, cgroup::host_has_memsw()).map_err(|e| inval(e.to_string()))?;
    for n in notes {
        ctx.log.warn(&format!("container '{id}': {n}"));
    }
    let dev_rules = resources.devices().clone().unwrap_or_default();
    let devices = Some(cgroup::device_writes(&dev_rules));
    let cgpath = linux
        .cgroups_path()
        .as_ref()
        .map(|p| p.display().to_string());
    let place = cgroup::place(cgpath.as_deref(), id, ctx.systemd_cgroup, ctx.cgroup_nest)
        .map_err(&inval)?;
    let made = cgroup::create(&place, ctx.cgroup_nest, &limits, devices, &ctx.proc_root)?;
    let set = made.set;
    record.cgroups_made = Some(made.made);
    record.cgroups = Some(set.clone());
    state::save(&ctx.root, record)?;

    // Namespaces joined by path: opened now; a pid namespace is joined here, by the
    // parent, so the clone lands in it.
    let mut join_files: Vec<(LinuxNamespaceType, File)> = Vec::new();
    for ns in linux.namespaces().iter().flatten() {
        if let Some(path) = ns.path() {
            let f = File::open(path).map_err(|e| {
                inval(format!(
                    "linux.namespaces {}: path {}: {e}",
                    ns.typ(),
                    path.display()
                ))
            })?;
            if ns.typ() == LinuxNamespaceType::Pid {
                warren_sys::proc::setns(f.as_fd()).ctx(|| {
                    format!(
                        "container '{id}': joining the pid namespace {}",
                        path.display()
                    )
                })?;
            } else {
                join_files.push((ns.typ(), f));
            }
        }
    }
    let join: Vec<(LinuxNamespaceType, RawFd)> = join_files
        .iter()
        .map(|(t, f)| (*t, f.as_raw_fd()))
        .collect();
    let console = match a.console_socket {
        Some(p) => Some(std::os::unix::net::UnixStream::connect(p).ctx(|| {
            format!(
                "container '{id}': connecting to the console socket {}",
                p.display()
            )
        })?),
        None => None,
    };
    let state_dir = File::open(&dir).ctx(|| format!("opening {}", dir.display()))?;
    let seccomp = seccomp_filter(id, spec)?;
    let h = hooks_of(spec);
    let early_hooks = h.create_runtime().as_ref().is_some_and(|v| !v.is_empty())
        || h.create_container().as_ref().is_some_and(|v| !v.is_empty())
        || h.prestart().as_ref().is_some_and(|v| !v.is_empty());
    let hard = |res: libc::c_int| warren_sys::getrlimit(res).ok().map(|(_, h)| h);
    let terminal = spec
        .process()
        .as_ref()
        .and_then(|p| p.terminal())
        .unwrap_or(false);
    let inputs = InitInputs {
        id,
        spec,
        bundle: &record.bundle,
        rootfs,
        cgroups: &set,
        join: &join,
        state_dir_fd: state_dir.as_raw_fd(),
        console_socket: console.as_ref().map(|c| c.as_raw_fd()),
        no_pivot: a.no_pivot,
        hooks_sync: early_hooks,
        rootfs_parent_mount: std::fs::read_to_string(ctx.proc_root.join("self/mountinfo"))
            .ok()
            .and_then(|m| plan::mount_holding(&m, rootfs)),
        process: ProcessInputs {
            id,
            // Without a mount namespace of its own the program is found in ours.
            root: if plan::has_own_mount_namespace(spec) {
                rootfs
            } else {
                Path::new("/")
            },
            seccomp: seccomp.as_deref(),
            console: terminal,
            hard_limit: &hard,
        },
    };
    let (mut p, notes) = plan::init_plan(&inputs).map_err(|e| inval(e.to_string()))?;
    p.spawn.pass_fds = a.preserve_fds;
    let cgroups = CgroupEntry::open(&format!("container '{id}'"), &set)?;
    cgroups.prepare(&mut p);
    for n in notes {
        ctx.log.warn(&format!("container '{id}': {n}"));
    }

    let maps = (
        linux.uid_mappings().clone().unwrap_or_default(),
        linux.gid_mappings().clone().unwrap_or_default(),
    );
    let userns = plan::new_namespaces(spec).contains(&LinuxNamespaceType::User);
    let snapshot = record.clone();
    let child = std::cell::Cell::new(0);
    let pid = warren_sys::spawn::spawn_staged(&p.spawn, |ev| -> Result<()> {
        match ev {
            Event::Cloned(pid) => {
                child.set(pid);
                if userns {
                    let line = |m: &Vec<oci_spec::runtime::LinuxIdMapping>| {
                        m.iter()
                            .map(|m| format!("{} {} {}\n", m.container_id(), m.host_id(), m.size()))
                            .collect::<String>()
                    };
                    for (file, text) in [("uid_map", line(&maps.0)), ("gid_map", line(&maps.1))] {
                        let path = ctx.proc_root.join(format!("{pid}/{file}"));
                        std::fs::write(&path, text).ctx(|| {
                            format!(
                                "container '{id}': writing linux.{}Mappings to {}",
                                &file[..3],
                                path.display()
                            )
                        })?;
                    }
                }
                cgroups.after_clone(&p, pid, "its init")
            }
            Event::Sync(_) => {
                let pid = child.get();
                let r = Record {
                    pid: Some(pid),
                    ..snapshot.clone()
                };
                let st = state_json(&r, Status::Creating).to_string();
                let none = Vec::new();
                hooks::run_host(id, "prestart", h.prestart().as_ref().unwrap_or(&none), &st)?;
                hooks::run_host(
                    id,
                    "createRuntime",
                    h.create_runtime().as_ref().unwrap_or(&none),
                    &st,
                )?;
                hooks::run_in_container(
                    id,
                    "createContainer",
                    h.create_container().as_ref().unwrap_or(&none),
                    &st,
                    pid,
                    &ctx.proc_root,
                )
            }
        }
    });
    let pid = pid.map_err(|e| spawn_error(id, &p, e))?;
    let start_time = crate::stats::proc_start_time(&ctx.proc_root, pid).ok_or_else(|| {
        refused(format!(
            "container '{id}': its init (pid {pid}) exited during create"
        ))
    })?;
    record.pid = Some(pid);
    record.start_time = Some(start_time);
    state::save(&ctx.root, record)?;
    if let Some(f) = a.pid_file {
        write_pid_file(f, pid)?;
    }
    Ok(())
}
