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
