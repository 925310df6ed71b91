//! The OCI verbs: effects on the host, in the order the runtime-spec gives.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use oci_spec::runtime::{LinuxNamespaceType, Process, Spec};
use warren_sys::libc;
use warren_sys::spawn::{Event, SpawnError};

use super::plan::{self, InitInputs, ProcessInputs};
use super::state::{self, Record, Status, Verb};
use super::{cgroup, hooks, Ctx};
use crate::error::{Error, IoContext, Result};

fn refused(msg: String) -> Error {
    Error::Refused(msg)
}

/// Read and parse `<bundle>/config.json`.
pub fn load_spec(id: &str, bundle: &Path) -> Result<Spec> {
    let path = bundle.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::Invalid(format!(
            "container '{id}': cannot read {}: {e}; pass the bundle directory holding config.json with --bundle",
            path.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| {
        Error::Invalid(format!(
            "container '{id}': {} is malformed: {e}; fix it (see 'warren oci spec' for a valid one)",
            path.display()
        ))
    })
}

/// The runtime-spec state document.
pub fn state_json(r: &Record, status: Status) -> serde_json::Value {
    let mut v = serde_json::json!({
        "ociVersion": super::OCI_VERSION,
        "id": r.id,
        "status": status.to_string(),
        "bundle": r.bundle,
        "rootfs": r.rootfs,
        "created": r.created,
        "owner": "",
        "annotations": r.annotations,
    });
    if let (Some(pid), true) = (r.pid, status != Status::Stopped) {
        v["pid"] = pid.into();
    } else {
        v["pid"] = 0.into();
    }
    v
}

fn hooks_of(spec: &Spec) -> oci_spec::runtime::Hooks {
    spec.hooks().clone().unwrap_or_default()
}

fn write_pid_file(path: &Path, pid: i32) -> Result<()> {
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    crate::fsutil::atomic_write(&path, pid.to_string().as_bytes(), true)
        .ctx(|| format!("writing the pid file {}", path.display()))
}

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
    let (limits, notes) = cgroup::limits(&resources, cgroup::host_has_memsw()).map_err(&inval)?;
    for n in notes {
        ctx.log.warn(&format!("container '{id}': {n}"));
    }
    let dev_rules = resources.devices().clone().unwrap_or_default();
    let devices = Some(cgroup::device_writes(&dev_rules));
    let own = cgroup::own_path(&ctx.proc_root);
    let cgpath = linux
        .cgroups_path()
        .as_ref()
        .map(|p| p.display().to_string());
    let leaf = cgroup::leaf_name(cgpath.as_deref(), &own, id, ctx.systemd_cgroup);
    let set = cgroup::create(&leaf, &limits, devices, &ctx.proc_root)?;
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
    let seccomp = match linux.seccomp() {
        Some(profile) => Some(
            super::seccomp::filter(profile).map_err(|e| inval(format!("linux.seccomp: {e}")))?,
        ),
        None => None,
    };
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
    let (mut p, notes) = plan::init_plan(&inputs).map_err(&inval)?;
    p.spawn.pass_fds = a.preserve_fds;
    for n in notes {
        ctx.log.warn(&format!("container '{id}': {n}"));
    }

    let procs: Vec<(PathBuf, File)> = set
        .procs_files()
        .into_iter()
        .map(|f| {
            OpenOptions::new()
                .write(true)
                .open(&f)
                .map(|h| (f.clone(), h))
                .ctx(|| format!("container '{id}': opening {}", f.display()))
        })
        .collect::<Result<_>>()?;
    let maps = (
        linux.uid_mappings().clone().unwrap_or_default(),
        linux.gid_mappings().clone().unwrap_or_default(),
    );
    let userns = plan::new_namespaces(spec).contains(&LinuxNamespaceType::User);
    let snapshot = record.clone();
    let child = std::cell::Cell::new(0);
    crate::sandbox::invariants::check(&p.spawn, &[rootfs])
        .map_err(|e| inval(format!("internal error: {e}")))?;
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
                for (path, mut f) in procs.iter().map(|(p, f)| (p, f)) {
                    f.write_all(pid.to_string().as_bytes()).ctx(|| {
                        format!("container '{id}': moving its init into {}", path.display())
                    })?;
                }
                Ok(())
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

fn spawn_error(id: &str, p: &plan::Plan, e: SpawnError<Error>) -> Error {
    match e {
        SpawnError::Setup(e) => e,
        SpawnError::Clone(source) => Error::Io {
            context: format!("container '{id}': creating its namespaces failed"),
            source,
        },
        SpawnError::Step { index, error } => Error::Io {
            context: format!(
                "container '{id}': setup step {} ({}) failed",
                index + 1,
                p.what.get(index).map(String::as_str).unwrap_or("?")
            ),
            source: error,
        },
        SpawnError::Exec(source) => Error::Io {
            context: format!("container '{id}': exec of process.args[0] failed"),
            source,
        },
        SpawnError::Pipe(source) => Error::Io {
            context: format!("container '{id}': talking to its init failed"),
            source,
        },
    }
}

/// Kill everything left, remove the cgroups and the state directory.
fn destroy(ctx: &Ctx, r: &Record) -> Result<()> {
    if let Some(set) = &r.cgroups {
        if cgroup::is_frozen(set) {
            let _ = cgroup::freeze(&r.id, set, false);
        }
        set.kill_all(Duration::from_secs(10))?;
        set.remove(Duration::from_secs(5))?;
    } else if let (Some(pid), Some(st)) = (r.pid, r.start_time) {
        if crate::stats::proc_start_time(&ctx.proc_root, pid) == Some(st) {
            let _ = warren_sys::proc::kill(pid, libc::SIGKILL);
        }
    }
    let dir = state::dir(&ctx.root, &r.id);
    crate::fsutil::remove_tree(&dir).ctx(|| format!("removing {}", dir.display()))
}

pub fn start(ctx: &Ctx, id: &str) -> Result<()> {
    let mut r = state::load(&ctx.root, id)?;
    let status = state::observe_host(&r, &ctx.proc_root);
    state::allowed(id, status, Verb::Start).map_err(refused)?;
    let spec = load_spec(id, &r.bundle)?;
    let h = hooks_of(&spec);
    let pid = r.pid.expect("created containers have a pid");
    let st = state_json(&r, Status::Created).to_string();
    if let Some(hs) = h.start_container() {
        hooks::run_in_container(id, "startContainer", hs, &st, pid, &ctx.proc_root)?;
    }
    let fifo = state::dir(&ctx.root, id).join("exec.fifo");
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .ctx(|| format!("container '{id}': opening {}", fifo.display()))?;
    // Wait for the init's byte (it opened the fifo), then for EOF (it exec'd).
    let mut got_byte = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = [0u8; 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) if got_byte => break,
            Ok(0) => {}
            Ok(_) => got_byte = true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => {
                return Err(e).ctx(|| format!("container '{id}': reading {}", fifo.display()))
            }
        }
        if state::observe_host(&r, &ctx.proc_root) == Status::Stopped && !got_byte {
            return Err(refused(format!(
                "container '{id}': its init exited before start; see the runtime log"
            )));
        }
        if Instant::now() > deadline {
            return Err(refused(format!(
                "container '{id}': its init did not exec within 30 s of start"
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    r.awaiting_start = false;
    state::save(&ctx.root, &r)?;
    let _ = std::fs::remove_file(&fifo);
    if let Some(hs) = h.poststart() {
        let st = state_json(&r, Status::Running).to_string();
        if let Err(e) = hooks::run_host(id, "poststart", hs, &st) {
            ctx.log.warn(&e.to_string());
        }
    }
    Ok(())
}

pub fn state(ctx: &Ctx, id: &str) -> Result<serde_json::Value> {
    let r = state::load(&ctx.root, id)?;
    Ok(state_json(&r, state::observe_host(&r, &ctx.proc_root)))
}

/// A signal name (TERM, SIGTERM) or number.
pub fn parse_signal(s: &str) -> Result<i32> {
    if let Ok(n) = s.parse::<i32>() {
        if (1..=64).contains(&n) {
            return Ok(n);
        }
    }
    let name = s.trim_start_matches("SIG").to_ascii_uppercase();
    let n = match name.as_str() {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "TERM" => libc::SIGTERM,
        "CONT" => libc::SIGCONT,
        "STOP" => libc::SIGSTOP,
        "WINCH" => libc::SIGWINCH,
        "PWR" => libc::SIGPWR,
        "ALRM" => libc::SIGALRM,
        "CHLD" => libc::SIGCHLD,
        "PIPE" => libc::SIGPIPE,
        "TSTP" => libc::SIGTSTP,
        "TTIN" => libc::SIGTTIN,
        "TTOU" => libc::SIGTTOU,
        "ABRT" => libc::SIGABRT,
        _ => {
            return Err(Error::Invalid(format!(
                "signal {s:?} is not known; use a name such as TERM or KILL, or a number"
            )))
        }
    };
    Ok(n)
}

pub fn kill(ctx: &Ctx, id: &str, signal: &str, all: bool) -> Result<()> {
    let sig = parse_signal(signal)?;
    let r = state::load(&ctx.root, id)?;
    let status = state::observe_host(&r, &ctx.proc_root);
    if all {
        if let Some(set) = &r.cgroups {
            for pid in set.pids()? {
                let _ = warren_sys::proc::kill(pid, sig);
            }
            if cgroup::is_frozen(set) && sig == libc::SIGKILL {
                cgroup::freeze(id, set, false)?;
            }
        }
        return Ok(());
    }
    state::allowed(id, status, Verb::Kill).map_err(refused)?;
    let pid = r.pid.expect("a live container has a pid");
    let fd = warren_sys::proc::pidfd_open(pid)
        .ctx(|| format!("container '{id}': opening its init {pid}"))?;
    if crate::stats::proc_start_time(&ctx.proc_root, pid) != r.start_time {
        return Err(refused(format!("container '{id}': container not running")));
    }
    warren_sys::proc::pidfd_send_signal(fd.as_fd(), sig)
        .ctx(|| format!("container '{id}': sending signal {sig} to pid {pid}"))
}

pub fn delete(ctx: &Ctx, id: &str, force: bool) -> Result<()> {
    let r = match state::load(&ctx.root, id) {
        Ok(r) => r,
        Err(e)
            if force
                && !state::dir(&ctx.root, id).join("state.json").exists()
                && state::check_id(id).is_ok() =>
        {
            let _ = e;
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let status = state::observe_host(&r, &ctx.proc_root);
    state::allowed(id, status, Verb::Delete { force }).map_err(refused)?;
    let ran = r.pid.is_some();
    destroy(ctx, &r)?;
    if ran {
        if let Ok(spec) = load_spec(id, &r.bundle) {
            if let Some(hs) = hooks_of(&spec).poststop() {
                let st = state_json(&r, Status::Stopped).to_string();
                if let Err(e) = hooks::run_host(id, "poststop", hs, &st) {
                    ctx.log.warn(&e.to_string());
                }
            }
        }
    }
    Ok(())
}

pub fn pause(ctx: &Ctx, id: &str, on: bool) -> Result<()> {
    let r = state::load(&ctx.root, id)?;
    let status = state::observe_host(&r, &ctx.proc_root);
    state::allowed(id, status, if on { Verb::Pause } else { Verb::Resume }).map_err(refused)?;
    let set = r.cgroups.as_ref().expect("a running container has cgroups");
    cgroup::freeze(id, set, on)
}

pub fn pids(ctx: &Ctx, id: &str) -> Result<Vec<i32>> {
    let r = state::load(&ctx.root, id)?;
    Ok(match &r.cgroups {
        Some(set) => set.pids()?,
        None => Vec::new(),
    })
}

pub fn update(ctx: &Ctx, id: &str, resources: &str) -> Result<()> {
    let r = state::load(&ctx.root, id)?;
    let text = if resources == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .ctx(|| "reading resources from stdin".to_string())?;
        s
    } else {
        std::fs::read_to_string(resources)
            .ctx(|| format!("container '{id}': reading --resources {resources}"))?
    };
    let res: oci_spec::runtime::LinuxResources = serde_json::from_str(&text).map_err(|e| {
        Error::Invalid(format!(
            "container '{id}': --resources {resources}: {e}; expected linux.resources JSON"
        ))
    })?;
    let (limits, _) = cgroup::limits(&res, cgroup::host_has_memsw())
        .map_err(|e| Error::Invalid(format!("container '{id}': {e}")))?;
    let set = r
        .cgroups
        .as_ref()
        .ok_or_else(|| refused(format!("container '{id}': it has no cgroups yet")))?;
    cgroup::apply(id, set, &limits)
}

pub struct ExecArgs<'a> {
    pub id: &'a str,
    pub process: Process,
    pub console_socket: Option<&'a Path>,
    pub pid_file: Option<&'a Path>,
    pub detach: bool,
    /// `--preserve-fds N`: descriptors 3 to 3+N-1 reach the process; no other does.
    pub preserve_fds: u32,
}

/// Run a process in a running container. Returns its exit status (0 with --detach).
pub fn exec(ctx: &Ctx, a: ExecArgs<'_>) -> Result<i32> {
    let id = a.id;
    // This process joins the container's namespaces holding the runtime's
    // descriptors: no container process may ptrace it or open them.
    warren_sys::proc::set_undumpable().ctx(|| format!("container '{id}': PR_SET_DUMPABLE"))?;
    let r = state::load(&ctx.root, id)?;
    let status = state::observe_host(&r, &ctx.proc_root);
    state::allowed(id, status, Verb::Exec).map_err(refused)?;
    let spec = load_spec(id, &r.bundle)?;
    let pid = r.pid.expect("a live container has a pid");
    let terminal = a.process.terminal().unwrap_or(false);
    if terminal && a.console_socket.is_none() {
        return Err(Error::Invalid(format!(
            "container '{id}': --tty (process.terminal) needs --console-socket"
        )));
    }
    // Everything on the host side is opened before joining the mount namespace.
    let console = match a.console_socket {
        Some(p) => Some(
            std::os::unix::net::UnixStream::connect(p)
                .ctx(|| format!("container '{id}': connecting to {}", p.display()))?,
        ),
        None => None,
    };
    let mut pid_file = match a.pid_file {
        Some(p) => Some(
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o644)
                .open(p)
                .ctx(|| format!("opening the pid file {}", p.display()))?,
        ),
        None => None,
    };
    let procs: Vec<(PathBuf, File)> = r
        .cgroups
        .iter()
        .flat_map(|s| s.procs_files())
        .map(|f| {
            OpenOptions::new()
                .write(true)
                .open(&f)
                .map(|h| (f.clone(), h))
                .ctx(|| format!("container '{id}': opening {}", f.display()))
        })
        .collect::<Result<_>>()?;
    let seccomp = match spec.linux().as_ref().and_then(|l| l.seccomp().clone()) {
        Some(profile) => Some(
            super::seccomp::filter(&profile)
                .map_err(|e| Error::Invalid(format!("container '{id}': linux.seccomp: {e}")))?,
        ),
        None => None,
    };
    // The one join (sandbox::join), user first: an OCI container's namespaces are all
    // owned by its user namespace, if it has one.
    let start_time = r
        .start_time
        .ok_or_else(|| refused(format!("container '{id}': its init exited")))?;
    let target = crate::sandbox::join::Target::open(
        &ctx.proc_root,
        pid,
        start_time,
        &["user", "ipc", "uts", "net", "pid", "cgroup", "mnt"],
    )
    .map_err(|_| refused(format!("container '{id}': its init exited")))?;
    let hard = |res: libc::c_int| warren_sys::getrlimit(res).ok().map(|(_, h)| h);
    target.enter().map_err(|e| match e {
        crate::sandbox::join::JoinError::Gone => {
            refused(format!("container '{id}': its init exited"))
        }
        crate::sandbox::join::JoinError::Setns { ns, source } => Error::Io {
            context: format!("container '{id}': joining its {ns} namespace"),
            source,
        },
    })?;
    let mut p = plan::Plan::new(0);
    p.spawn.pass_fds = a.preserve_fds;
    p.push(
        warren_sys::spawn::Step::WaitParent,
        "wait for the runtime to move it into the container's cgroups",
    );
    if let Some(c) = &console {
        p.push(
            warren_sys::spawn::Step::Console {
                ptmx: plan::cstr("/dev/pts/ptmx").expect("no NUL"),
                socket: c.as_raw_fd(),
                slave_fd: plan::CONSOLE_SLAVE_FD,
                rows: a.process.console_size().map_or(0, |s| s.height() as u16),
                cols: a.process.console_size().map_or(0, |s| s.width() as u16),
            },
            "allocate a pty and send it to the console socket",
        );
    }
    let inputs = ProcessInputs {
        id,
        root: Path::new("/"),
        seccomp: seccomp.as_deref(),
        console: terminal,
        hard_limit: &hard,
    };
    let notes = plan::process_steps(&mut p, &a.process, &inputs)
        .map_err(|e| Error::Invalid(format!("container '{id}': {e}")))?;
    for n in notes {
        ctx.log.warn(&format!("container '{id}': {n}"));
    }
    crate::sandbox::invariants::check(&p.spawn, &[])
        .map_err(|e| Error::Invalid(format!("container '{id}': internal error: {e}")))?;
    let child = warren_sys::spawn::spawn_staged(&p.spawn, |ev| -> Result<()> {
        if let Event::Cloned(child) = ev {
            for (path, mut f) in procs.iter().map(|(p, f)| (p, f)) {
                f.write_all(child.to_string().as_bytes()).ctx(|| {
                    format!(
                        "container '{id}': moving the process into {}",
                        path.display()
                    )
                })?;
            }
        }
        Ok(())
    })
    .map_err(|e| spawn_error(id, &p, e))?;
    if let Some(f) = pid_file.as_mut() {
        f.write_all(child.to_string().as_bytes())
            .ctx(|| "writing the pid file".to_string())?;
    }
    drop(console);
    if a.detach {
        return Ok(0);
    }
    let status = warren_sys::proc::waitpid_blocking(child)
        .ctx(|| format!("container '{id}': waiting for the process"))?;
    Ok(status.code())
}
