//! `warren login`: run a command inside a running zone, as zlogin does.
//!
//! The warren process itself joins the zone's cgroups and namespaces (it is single
//! threaded, as `setns` into a mount namespace requires), then starts the command as
//! its child, which is thus inside the zone's pid namespace too. With a terminal on
//! stdin, the command gets a pty from the zone's own devpts and warren relays bytes.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use warren_sys::libc;

use crate::cgroups::CgroupSet;
use crate::error::{Error, IoContext, Result};
use crate::isolation::Confinement;
use crate::state::InitId;
use crate::stats;

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
    let ns_dir = proc_root.join(init.pid.to_string()).join("ns");
    let mut fds = Vec::new();
    for ns in NAMESPACES {
        let theirs = ns_dir.join(ns);
        let ours = proc_root.join("self/ns").join(ns);
        let same = match (std::fs::metadata(&theirs), std::fs::metadata(&ours)) {
            (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
            (Err(_), _) => return Err(gone()),
            _ => false,
        };
        if !same {
            fds.push((ns, File::open(&theirs).map_err(|_| gone())?));
        }
    }
    // The namespace descriptors pin the zone; make sure they are the zone's init's.
    if stats::proc_start_time(proc_root, init.pid) != Some(init.start_time) {
        return Err(gone());
    }
    for f in cgroups.procs_files() {
        OpenOptions::new()
            .write(true)
            .open(&f)
            .and_then(|mut file| file.write_all(b"0"))
            .ctx(|| format!("zone '{zone}': joining cgroup {}", f.display()))?;
    }
    let mut joined_user = false;
    for (ns, f) in &fds {
        warren_sys::proc::setns(f.as_fd())
            .ctx(|| format!("zone '{zone}': joining its {ns} namespace"))?;
        joined_user |= *ns == "user";
    }
    if joined_user {
        warren_sys::userns::become_root_in_userns()
            .ctx(|| format!("zone '{zone}': becoming root of its user namespace"))?;
    }
    for (name, l) in rlimits {
        if let Some(r) = crate::isolation::rlimits::resource(name) {
            warren_sys::setrlimit(r, l.soft, l.hard)
                .ctx(|| format!("zone '{zone}': setting rlimit.{name}"))?;
        }
    }
    std::env::set_current_dir("/").ctx(|| format!("zone '{zone}': chdir /"))?;
    // The same confinement as the zone's init, on this (single-threaded) process, so
    // the command and everything it starts inherit it. Nothing below needs privilege.
    warren_sys::harden::confine(confinement.keep, &confinement.filter)
        .ctx(|| format!("zone '{zone}': dropping capabilities and loading the seccomp filter"))?;

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
    if warren_sys::pty::isatty(0) && warren_sys::pty::isatty(1) {
        run_on_pty(zone, &program, &argv, &env)
    } else {
        let status = std::process::Command::new(&program)
            .arg0(&argv[0])
            .args(&argv[1..])
            .env_clear()
            .envs(env)
            .status()
            .map_err(|e| start_error(zone, &program, e))?;
        use std::os::unix::process::ExitStatusExt;
        Ok(status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
    }
}

use std::os::unix::process::CommandExt;

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

fn run_on_pty(
    zone: &str,
    program: &Path,
    argv: &[String],
    env: &[(String, String)],
) -> Result<i32> {
    let (master, slave) =
        warren_sys::pty::open_master().ctx(|| format!("zone '{zone}': opening a pty"))?;
    let _ = warren_sys::pty::copy_winsize(0, master.as_raw_fd());
    let c_argv = argv.iter().map(|a| cstr(a)).collect::<Result<Vec<_>>>()?;
    let c_env = env
        .iter()
        .map(|(k, v)| cstr(&format!("{k}={v}")))
        .collect::<Result<Vec<_>>>()?;
    let c_slave = cstr(&slave.to_string_lossy())?;
    let c_prog = cstr(&program.to_string_lossy())?;
    let pid = warren_sys::pty::spawn_on_pty(&c_slave, &c_prog, &c_argv, &c_env)
        .map_err(|e| start_error(zone, program, e))?;
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

/// Starting the command failed; EAGAIN from fork means the zone is at its process
/// limit (its pids cgroup), which the bare errno does not say.
fn start_error(zone: &str, program: &Path, source: std::io::Error) -> Error {
    let hint = if source.raw_os_error() == Some(warren_sys::libc::EAGAIN) {
        " (the zone is at its process limit, pids.max: raise max-processes / max-threads with 'warren config set', or stop some of its processes)"
    } else {
        ""
    };
    Error::Io {
        context: format!("zone '{zone}': starting {}{hint}", program.display()),
        source,
    }
}
