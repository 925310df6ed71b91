//! `warren login`: run a command inside a running zone, as zlogin does.
//!
//! The warren process joins the zone's cgroups and namespaces (the one join of
//! `sandbox::join`, shared with `warren oci exec`), then starts the command through the
//! one spawn protocol (`warren_sys::spawn`) with the zone's confinement as the plan's
//! last steps: rlimits, capabilities, no_new_privs, seccomp. The command is thus inside
//! the zone's pid namespace too. It never holds a descriptor of the caller's: with a
//! terminal on stdin and stdout it gets a pty from the zone's own devpts, otherwise
//! three pipes, in a new session either way, and this process relays the bytes
//! (docs/isolation.md, "The caller's terminal").

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use warren_sys::libc;
use warren_sys::spawn::{ExecTarget, SpawnPlan, Step};

use crate::cgroups::CgroupSet;
use crate::error::{Error, IoContext, Result};
use crate::isolation::Confinement;
use crate::sandbox::join::{JoinError, Target};
use crate::state::InitId;

/// Namespaces joined, in order: mnt after the others, because after it the host's
/// paths are gone; user last of all, because joining it gives up the host's
/// privileges (the zone's network, UTS, IPC and cgroup namespaces are owned by the
/// zone's user namespace, its mount and pid namespaces by the host's).
const NAMESPACES: [&str; 7] = ["cgroup", "ipc", "uts", "net", "pid", "mnt", "user"];

/// Join the zone whose init is `init`, then run `argv` (or root's login shell).
/// Returns the command's exit status (128 + signal if it was killed).
pub fn login(
    zone: &str,
    init: InitId,
    cgroups: &CgroupSet,
    confinement: &Confinement,
    rlimits: &std::collections::BTreeMap<String, crate::isolation::rlimits::Limit>,
    argv: &[String],
    proc_root: &Path,
) -> Result<i32> {
    let gone = || Error::WrongState {
        zone: zone.into(),
        state: crate::state::ZoneState::Installed,
        remedy: "its init has exited; boot it again".into(),
    };
    // This process holds the caller's terminal inside the zone's namespaces while it
    // relays: no zone process may ptrace it or open its descriptors.
    warren_sys::proc::set_undumpable().ctx(|| format!("zone '{zone}': PR_SET_DUMPABLE"))?;
    let target =
        Target::open(proc_root, init.pid, init.start_time, &NAMESPACES).map_err(|_| gone())?;
    for f in cgroups.procs_files() {
        OpenOptions::new()
            .write(true)
            .open(&f)
            .and_then(|mut file| file.write_all(b"0"))
            .ctx(|| format!("zone '{zone}': joining cgroup {}", f.display()))?;
    }
    target.enter().map_err(|e| match e {
        JoinError::Gone => gone(),
        JoinError::Setns { ns, source } => Error::Io {
            context: format!("zone '{zone}': joining its {ns} namespace"),
            source,
        },
    })?;
    if target.has_user() {
        warren_sys::userns::become_root_in_userns()
            .ctx(|| format!("zone '{zone}': becoming root of its user namespace"))?;
    }
    std::env::set_current_dir("/").ctx(|| format!("zone '{zone}': chdir /"))?;

    let shell = root_shell();
    let argv: Vec<String> = if argv.is_empty() {
        vec![shell.clone(), "-l".into()]
    } else {
        argv.to_vec()
    };
    let program = resolve(&argv[0]).ok_or_else(|| {
        Error::Invalid(format!(
            "zone '{zone}': {}: command not found in the zone's PATH",
            argv[0]
        ))
    })?;
    let mut env = vec![
        ("PATH".to_string(), super::ZONE_PATH.to_string()),
        ("HOME".into(), "/root".into()),
        ("USER".into(), "root".into()),
        ("LOGNAME".into(), "root".into()),
        ("SHELL".into(), shell),
        ("container".into(), "warren".into()),
    ];
    if let Ok(term) = std::env::var("TERM") {
        env.push(("TERM".into(), term));
    }
    let command = Command {
        zone,
        program: &program,
        argv: &argv,
        env: &env,
        confinement,
        rlimits,
    };
    if warren_sys::pty::isatty(0) && warren_sys::pty::isatty(1) {
        run_on_pty(&command)
    } else {
        run_on_pipes(&command)
    }
}

/// root's shell from the zone's /etc/passwd, else /bin/sh.
fn root_shell() -> String {
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|p| {
            p.lines()
                .find(|l| l.starts_with("root:"))
                .and_then(|l| l.rsplit(':').next())
                .map(str::to_string)
        })
        .filter(|s| Path::new(s).is_file())
        .unwrap_or_else(|| "/bin/sh".into())
}

/// Find a program in the zone's PATH.
fn resolve(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    super::ZONE_PATH
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
        })
}

fn cstr(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::Invalid(format!("{s:?} contains a NUL byte")))
}

/// The command to start, and the zone's confinement to start it under.
struct Command<'a> {
    zone: &'a str,
    program: &'a Path,
    argv: &'a [String],
    env: &'a [(String, String)],
    confinement: &'a Confinement,
    rlimits: &'a std::collections::BTreeMap<String, crate::isolation::rlimits::Limit>,
}

impl Command<'_> {
    /// Spawn it with `stdio` (steps that give it its stdin, stdout, stderr and a new
    /// session) first, the zone's confinement last; returns its pid once it has exec'd.
    fn spawn(&self, stdio: Vec<Step>) -> Result<i32> {
        let zone = self.zone;
        let mut steps = stdio;
        for (name, l) in self.rlimits {
            if let Some(resource) = crate::isolation::rlimits::resource(name) {
                steps.push(Step::Rlimit {
                    resource,
                    soft: l.soft,
                    hard: l.hard,
                });
            }
        }
        steps.push(Step::Chdir(cstr("/")?));
        steps.push(Step::KeepCaps(self.confinement.keep));
        steps.push(Step::NoNewPrivs);
        steps.push(Step::Seccomp(self.confinement.filter.clone()));
        let plan = SpawnPlan {
            clone_flags: 0,
            steps,
            exec: ExecTarget::Path(cstr(&self.program.to_string_lossy())?),
            argv: self.argv.iter().map(|a| cstr(a)).collect::<Result<_>>()?,
            envp: self
                .env
                .iter()
                .map(|(k, v)| cstr(&format!("{k}={v}")))
                .collect::<Result<_>>()?,
            pass_fds: 0,
            into_cgroup: None,
        };
        crate::sandbox::invariants::check(&plan, &[])
            .map_err(|e| Error::Invalid(format!("zone '{zone}': internal error: {e}")))?;
        warren_sys::spawn::spawn_zone(&plan).map_err(|e| {
            Error::Invalid(format!(
                "zone '{zone}': starting {}: {}",
                self.program.display(),
                describe(&plan, e)
            ))
        })
    }
}

/// A spawn failure in words: which step, or the exec.
fn describe(plan: &SpawnPlan, e: warren_sys::spawn::SpawnError) -> String {
    use warren_sys::spawn::SpawnError as E;
    match e {
        // EAGAIN from fork: this process joined the zone's pids cgroup, which is full.
        E::Clone(e) if e.raw_os_error() == Some(libc::EAGAIN) => format!(
            "fork: {e} (the zone is at its process limit, pids.max: raise max-processes / max-threads with 'warren config set', or stop some of its processes)"
        ),
        E::Clone(e) => format!("fork: {e}"),
        E::Step { index, error } => match plan.steps.get(index) {
            Some(Step::Seccomp(_)) => format!("loading the seccomp filter: {error}"),
            Some(Step::KeepCaps(_)) => format!("dropping capabilities: {error}"),
            Some(Step::Rlimit { resource, .. }) => format!("rlimit {resource}: {error}"),
            Some(Step::Ctty(_)) => format!("taking the zone's pty as terminal: {error}"),
            _ => format!("setting up its stdio and session: {error}"),
        },
        E::Exec(e) => format!("exec: {e}"),
        E::Pipe(e) => format!("talking to the child: {e}"),
        E::Setup(never) => match never {},
    }
}

/// Run the command on a pty of the zone's devpts and relay it to our terminal.
fn run_on_pty(c: &Command<'_>) -> Result<i32> {
    let zone = c.zone;
    let (master, slave_path) =
        warren_sys::pty::open_master().ctx(|| format!("zone '{zone}': opening a pty"))?;
    let slave = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&slave_path)
        .ctx(|| format!("zone '{zone}': opening {}", slave_path.display()))?;
    let _ = warren_sys::pty::copy_winsize(0, master.as_raw_fd());
    let pid = c.spawn(vec![Step::Ctty(slave.as_raw_fd())])?;
    drop(slave);
    let raw = warren_sys::pty::raw_mode(0).ok();
    let m = master.as_raw_fd();
    let mut buf = [0u8; 8192];
    let mut stdin_open = true;
    loop {
        let fds: Vec<i32> = if stdin_open { vec![m, 0] } else { vec![m] };
        let revents = warren_sys::pty::poll_in(&fds, 200).ctx(|| "polling the pty".to_string())?;
        if revents[0] != 0 {
            let n = warren_sys::pty::read_fd(m, &mut buf).unwrap_or(0);
            if n == 0 {
                break;
            }
            if warren_sys::pty::write_fd(1, &buf[..n]).is_err() {
                break;
            }
        }
        if stdin_open && revents.get(1).copied().unwrap_or(0) != 0 {
            let n = warren_sys::pty::read_fd(0, &mut buf).unwrap_or(0);
            if n == 0 {
                stdin_open = false;
            } else {
                let _ = warren_sys::pty::write_fd(m, &buf[..n]);
            }
        }
        if revents[0] & (libc::POLLHUP | libc::POLLERR) != 0 && revents[0] & libc::POLLIN == 0 {
            break;
        }
    }
    drop(raw);
    let status =
        warren_sys::proc::waitpid_blocking(pid).ctx(|| "waiting for the command".to_string())?;
    Ok(status.code())
}

/// Run the command on three pipes in a new session and relay them to this process's
/// stdio until it exits (and its output is drained).
fn run_on_pipes(c: &Command<'_>) -> Result<i32> {
    let zone = c.zone;
    let pipe = || warren_sys::spawn::pipe_cloexec().ctx(|| format!("zone '{zone}': making a pipe"));
    let (in_r, in_w) = pipe()?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let dup = |from: &OwnedFd, to: RawFd| Step::Dup2 {
        from: from.as_raw_fd(),
        to,
    };
    let pid = c.spawn(vec![
        dup(&in_r, 0),
        dup(&out_w, 1),
        dup(&err_w, 2),
        Step::Setsid,
    ])?;
    drop((in_r, out_w, err_w));
    warren_sys::pty::set_nonblocking(in_w.as_raw_fd(), true)
        .ctx(|| "making the command's stdin non-blocking".to_string())?;
    let mut status = None;
    let relay = relay(Some(in_w), out_r, err_r, || {
        if status.is_none() {
            status = warren_sys::proc::waitpid_nohang(pid)
                .ok()
                .flatten()
                .map(|(_, s)| s);
        }
        status.is_some()
    })
    .ctx(|| format!("zone '{zone}': relaying the command's stdio"));
    let status = match status {
        Some(s) => s,
        None => warren_sys::proc::waitpid_blocking(pid)
            .ctx(|| format!("zone '{zone}': waiting for {}", c.program.display()))?,
    };
    relay?;
    Ok(status.code())
}

/// Pump between this process's stdio and a command's pipes until both output pipes
/// reach EOF, or the command has exited and its pipes stayed quiet for a moment (a
/// background process of the zone may hold them open forever; login does not wait).
fn relay(
    mut to_child: Option<OwnedFd>,
    out: OwnedFd,
    err: OwnedFd,
    mut exited: impl FnMut() -> bool,
) -> std::io::Result<()> {
    use warren_sys::pty::{poll, read_fd, write_fd, write_some};
    let (out, err) = (File::from(out), File::from(err));
    let (out, err) = (out.as_raw_fd(), err.as_raw_fd());
    let mut buf = [0u8; 8192];
    let mut pending: Vec<u8> = Vec::new();
    let mut our_stdin_open = true;
    let mut open = [true, true];
    let mut quiet_after_exit = 0;
    while open.iter().any(|o| *o) {
        let mut fds = Vec::with_capacity(4);
        for (i, fd) in [out, err].into_iter().enumerate() {
            if open[i] {
                fds.push((fd, libc::POLLIN));
            }
        }
        let child_in = to_child.as_ref().map(|s| s.as_raw_fd());
        if let Some(c) = child_in {
            if !pending.is_empty() {
                fds.push((c, libc::POLLOUT));
            } else if our_stdin_open {
                fds.push((0, libc::POLLIN));
            }
        }
        let revents = poll(&fds, 100)?;
        let mut busy = false;
        for (&(fd, _), &ev) in fds.iter().zip(&revents) {
            if ev == 0 {
                continue;
            }
            busy = true;
            if fd == out || fd == err {
                let n = read_fd(fd, &mut buf)?;
                let i = usize::from(fd == err);
                if n == 0 || write_fd(if i == 0 { 1 } else { 2 }, &buf[..n]).is_err() {
                    // EOF, or our reader went away: stop relaying this stream.
                    open[i] = false;
                }
            } else if fd == 0 {
                let n = read_fd(0, &mut buf).unwrap_or(0);
                if n == 0 {
                    our_stdin_open = false;
                    to_child = None;
                } else {
                    pending.extend_from_slice(&buf[..n]);
                }
            } else if Some(fd) == child_in {
                match write_some(fd, &pending) {
                    Ok(n) => {
                        pending.drain(..n);
                        if pending.is_empty() && !our_stdin_open {
                            to_child = None;
                        }
                    }
                    // The command closed its stdin: drop what it will never read.
                    Err(_) => {
                        pending.clear();
                        to_child = None;
                    }
                }
            }
        }
        if !busy && exited() {
            quiet_after_exit += 1;
            if quiet_after_exit >= 2 {
                break;
            }
        }
    }
    Ok(())
}
