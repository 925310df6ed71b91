//! The process part of a plan (init's and `exec`'s): argv, env, rlimits, user,
//! capabilities, cwd, terminal, no_new_privs and seccomp, in runc's order.

use super::*;

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

/// `process` as the sandbox's process, with `gate` run once its identity is set
/// (the init's wait for `start`: a failure to become the process's user must fail
/// `create`). Returns notes (clamped rlimits, unknown capabilities) for the log.
pub fn process_spec(
    process: &Process,
    i: &ProcessInputs<'_>,
    gate: Vec<crate::sandbox::Described>,
) -> Result<(crate::sandbox::spec::Process, Vec<String>), PlanError> {
    let mut notes = Vec::new();
    let args = process
        .args()
        .clone()
        .filter(|a| !a.is_empty())
        .ok_or_else(|| PlanError::field("process.args", "empty; give the program to run"))?;
    let env = process.env().clone().unwrap_or_default();
    let path_env = env
        .iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .unwrap_or(DEFAULT_PATH);
    let exe = resolve_exec(i.root, &args[0], path_env).ok_or_else(|| {
        PlanError::field(
            "process.args[0]",
            format!(
                "exec: {:?}: executable file not found in $PATH (PATH={path_env}); name a program present in the rootfs",
                args[0]
            ),
        )
    })?;
    let mut rlimits = Vec::new();
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
        rlimits.push((resource, soft, hard, format!("{:?}", r.typ())));
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
    let user = process.user();
    let cwd = process.cwd();
    if !cwd.as_os_str().is_empty() && !cwd.is_absolute() {
        return Err(PlanError::field(
            "process.cwd",
            format!(
                "{:?} is relative; the runtime spec wants an absolute path such as \"/\"",
                cwd.display()
            ),
        ));
    }
    let cs = |v: &[String]| v.iter().map(|a| cstr(a)).collect::<Result<Vec<_>, _>>();
    let spec = crate::sandbox::spec::Process {
        exec: ExecTarget::Path(cstr(&exe)?),
        argv: cs(&args)?,
        envp: cs(&env)?,
        rlimits,
        caps: Caps {
            bounding,
            sets: warren_sys::harden::CapSets {
                effective,
                permitted,
                inheritable,
                ambient,
            },
        },
        umask: user.umask().map(|m| m as libc::mode_t),
        cwd: (!cwd.as_os_str().is_empty()).then(|| cwd.clone()),
        ids: Some((
            user.uid(),
            user.gid(),
            user.additional_gids().clone().unwrap_or_default(),
        )),
        ctty: i.console.then_some(CONSOLE_SLAVE_FD),
        setsid: false,
        gate,
        no_new_privs: process.no_new_privileges().unwrap_or(false),
        seccomp: i.seccomp.map(<[SockFilter]>::to_vec),
    };
    Ok((spec, notes))
}

/// What `oci exec` starts in a container it has joined: the parent's go (its cgroup
/// move), a console pty when asked, then the process.
pub fn exec_plan(
    process: &Process,
    i: &ProcessInputs<'_>,
    console_socket: Option<RawFd>,
    pass_fds: u32,
) -> Result<(Plan, Vec<String>), PlanError> {
    let (process_spec, notes) = process_spec(process, i, Vec::new())?;
    let size = process.console_size();
    let mut spec = SandboxSpec::joined(process_spec);
    // The parent's go: it moves the process into the container's cgroups first.
    spec.sync = Some(SyncPoint::First);
    spec.console = console_socket.map(|socket| Console::Pty {
        ptmx: PathBuf::from("/dev/pts/ptmx"),
        socket,
        slave_fd: CONSOLE_SLAVE_FD,
        rows: size.map_or(0, |s| s.height() as u16),
        cols: size.map_or(0, |s| s.width() as u16),
        dev_console: None,
    });
    spec.pass_fds = pass_fds;
    Ok((crate::sandbox::plan(spec)?, notes))
}
