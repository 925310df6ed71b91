//! OCI hooks: programs run at points of the lifecycle with the container's state
//! JSON on stdin. createRuntime, poststart and poststop run in the runtime's
//! namespaces; createContainer and startContainer in the container's mount
//! namespace (joined by a short-lived child of the runtime).

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oci_spec::runtime::Hook;
use warren_sys::libc;
use warren_sys::spawn::{ExecTarget, SpawnPlan, Step};

use crate::error::{Error, Result};

fn timeout(h: &Hook) -> Duration {
    Duration::from_secs(h.timeout().filter(|t| *t > 0).unwrap_or(30) as u64)
}

fn failed(id: &str, kind: &str, n: usize, h: &Hook, why: String) -> Error {
    Error::Refused(format!(
        "container '{id}': hooks.{kind}[{n}] {}: {why}",
        h.path().display()
    ))
}

fn exit_text(code: i32) -> String {
    format!("exited with status {code}; fix the hook or remove it from config.json")
}

/// Run `hooks` one after the other in the runtime's namespaces; the first failure
/// stops them.
pub fn run_host(id: &str, kind: &str, hooks: &[Hook], state: &str) -> Result<()> {
    for (n, h) in hooks.iter().enumerate() {
        let args = h.args().clone().unwrap_or_default();
        let mut cmd = Command::new(h.path());
        if let Some(a0) = args.first() {
            cmd.arg0(a0);
        }
        cmd.args(args.iter().skip(1))
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for e in h.env().iter().flatten() {
            if let Some((k, v)) = e.split_once('=') {
                cmd.env(k, v);
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| failed(id, kind, n, h, format!("cannot run it: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(state.as_bytes());
        }
        let deadline = Instant::now() + timeout(h);
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => break,
                Ok(Some(status)) => {
                    use std::os::unix::process::ExitStatusExt;
                    let code = status
                        .code()
                        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
                    return Err(failed(id, kind, n, h, exit_text(code)));
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(failed(id, kind, n, h, "timed out and was killed".into()));
                }
            }
        }
    }
    Ok(())
}

/// Run `hooks` in the mount namespace of process `pid` (host pid).
pub fn run_in_container(
    id: &str,
    kind: &str,
    hooks: &[Hook],
    state: &str,
    pid: i32,
    proc_root: &Path,
) -> Result<()> {
    for (n, h) in hooks.iter().enumerate() {
        let mnt = std::fs::File::open(proc_root.join(format!("{pid}/ns/mnt"))).map_err(|e| {
            failed(
                id,
                kind,
                n,
                h,
                format!("cannot open the container's mount namespace: {e}"),
            )
        })?;
        let (rd, wr) = warren_sys::spawn::pipe_cloexec()
            .map_err(|e| failed(id, kind, n, h, format!("pipe: {e}")))?;
        let c = |s: &str| super::plan::cstr(s).map_err(|e| failed(id, kind, n, h, e.to_string()));
        let args = h
            .args()
            .clone()
            .unwrap_or_else(|| vec![h.path().display().to_string()]);
        let plan = SpawnPlan {
            clone_flags: 0,
            steps: vec![
                Step::Setns {
                    fd: mnt.as_raw_fd(),
                    nstype: libc::CLONE_NEWNS,
                },
                Step::Dup2 {
                    from: rd.as_raw_fd(),
                    to: 0,
                },
            ],
            exec: ExecTarget::Path(c(&h.path().display().to_string())?),
            argv: args.iter().map(|a| c(a)).collect::<Result<_>>()?,
            envp: h
                .env()
                .iter()
                .flatten()
                .map(|e| c(e))
                .collect::<Result<_>>()?,
            pass_fds: 0,
            into_cgroup: None,
        };
        let child = warren_sys::spawn::spawn_zone(&plan)
            .map_err(|e| failed(id, kind, n, h, format!("cannot run it: {e:?}")))?;
        drop(rd);
        let _ = warren_sys::pty::write_fd(wr.as_raw_fd(), state.as_bytes());
        drop(wr);
        let pidfd = warren_sys::proc::pidfd_open(child)
            .map_err(|e| failed(id, kind, n, h, format!("pidfd: {e}")))?;
        let done = warren_sys::proc::pidfd_wait(pidfd.as_fd(), timeout(h)).unwrap_or(false);
        if !done {
            let _ = warren_sys::proc::kill(child, libc::SIGKILL);
        }
        let status = warren_sys::proc::waitpid_blocking(child)
            .map_err(|e| failed(id, kind, n, h, format!("wait: {e}")))?;
        if !done {
            return Err(failed(id, kind, n, h, "timed out and was killed".into()));
        }
        if status.code() != 0 {
            return Err(failed(id, kind, n, h, exit_text(status.code())));
        }
    }
    Ok(())
}
