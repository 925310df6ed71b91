//! `exec`: a new process in a running container, through the one join.

use super::*;

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
    let who = format!("container '{id}'");
    let cgroups = r
        .cgroups
        .as_ref()
        .map(|set| CgroupEntry::open_for_join(&who, set))
        .transpose()?;
    let seccomp = seccomp_filter(id, &spec)?;
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
    let inputs = ProcessInputs {
        id,
        root: Path::new("/"),
        seccomp: seccomp.as_deref(),
        console: terminal,
        hard_limit: &hard,
    };
    let (mut p, notes) = plan::exec_plan(
        &a.process,
        &inputs,
        console.as_ref().map(|c| c.as_raw_fd()),
        a.preserve_fds,
    )
    .map_err(|e| Error::Invalid(format!("container '{id}': {e}")))?;
    for n in notes {
        ctx.log.warn(&format!("container '{id}': {n}"));
    }
    if let Some(c) = &cgroups {
        c.prepare(&mut p);
    }
    let child = warren_sys::spawn::spawn_staged(&p.spawn, |ev| -> Result<()> {
        match (ev, &cgroups) {
            (Event::Cloned(child), Some(c)) => c.after_clone(&p, child, "the process"),
            _ => Ok(()),
        }
    })
    .map_err(|e| match e {
        // Forking into a pid namespace whose init has exited (or is exiting: the
        // kernel stops allocating pids there first) fails with ENOMEM.
        SpawnError::Clone(c) if c.raw_os_error() == Some(libc::ENOMEM) => refused(format!(
            "container '{id}': its init has exited (it stopped while this exec started); nothing can run in it any more"
        )),
        e => spawn_error(id, &p, e),
    })?;
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
