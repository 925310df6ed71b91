//! `kill`: a signal to the init (or every process with `--all`).

use super::*;

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
