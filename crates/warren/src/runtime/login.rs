//! `warren login` (alias `exec`, and `shell`): run a command inside a running zone, as
//! zlogin and `podman exec` do.
//!
//! The warren process joins the zone's cgroups and namespaces ([`join`], the one join
//! of `sandbox::join`, shared with `warren oci exec` and `warren cp`), then starts the
//! command through the one spawn protocol (`warren_sys::spawn`) with the zone's
//! confinement as the plan's last steps: rlimits, capabilities, no_new_privs, seccomp.
//! The command is thus inside the zone's pid namespace too. Its user (`-u`), working
//! directory (`-w`) and environment (defaults, the zone's `env`, `-e`) are fields of the
//! sandbox spec's `Process`, resolved inside the joined zone (`login_user`). It never
//! holds a descriptor of the caller's: with a terminal on stdin and stdout (or `-t`) it
//! gets a pty from the zone's own devpts, otherwise three pipes, in a new session
//! either way, and this process relays the bytes (`login_io`; docs/isolation.md,
//! "The caller's terminal").
//!
//! Failures that are warren's own end as errors the CLI maps to 125; a command that
//! cannot be found is [`Error::Command`] with `missing` (127), one that cannot be
//! executed the same without (126); the command's own status is returned as is.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use warren_sys::harden::CapSets;
use warren_sys::libc;
use warren_sys::spawn::{ExecTarget, SpawnPlan, Step};

use super::login_user::{self, Identity};
use crate::cgroups::CgroupSet;
use crate::error::{Error, IoContext, Result};
use crate::isolation::Confinement;
use crate::sandbox::join::{JoinError, Target};
use crate::state::InitId;

/// Namespaces joined, in order: mnt after the others, because after it the host's
/// paths are gone; user last of all, because joining it gives up the host's
/// privileges (the zone's network, UTS, IPC and cgroup namespaces are owned by the
/// zone's user namespace, its mount and pid namespaces by the host's).
pub const NAMESPACES: [&str; 7] = ["cgroup", "ipc", "uts", "net", "pid", "mnt", "user"];

/// The running zone a login (or a `cp` helper) joins.
pub struct ZoneRef<'a> {
    pub zone: &'a str,
    pub init: InitId,
    pub cgroups: &'a CgroupSet,
    pub confinement: &'a Confinement,
    pub rlimits: &'a std::collections::BTreeMap<String, crate::isolation::rlimits::Limit>,
    /// The zone's default environment (config key `env`).
    pub env: &'a [String],
    pub proc_root: &'a Path,
}

/// Whether the command gets a pty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tty {
    /// When stdin and stdout are both terminals.
    Auto,
    /// Always (`-t`).
    Force,
    /// Never (`-T`).
    Never,
}

/// What to run, as whom, where.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The command; empty: the user's login shell.
    pub argv: &'a [String],
    /// `-e` entries: `KEY=VALUE`, or `KEY` for the caller's value.
    pub env: &'a [String],
    /// `-u NAME|UID[:GID|:GROUP]`.
    pub user: Option<&'a str>,
    /// `-w DIR`.
    pub cwd: Option<&'a str>,
    pub tty: Tty,
}

/// A joined zone: whether its init has exited, and how to say it is gone.
pub struct Joined {
    init: OwnedFd,
    zone: String,
}

impl Joined {
    /// Whether the zone's init has exited (its pidfd is readable).
    pub fn init_exited(&self) -> bool {
        warren_sys::proc::pidfd_wait(self.init.as_fd(), Duration::ZERO).unwrap_or(false)
    }

    /// The error for a zone halted under the caller's feet.
    pub fn gone(&self) -> Error {
        gone(&self.zone)
    }
}

fn gone(zone: &str) -> Error {
    Error::WrongState {
        zone: zone.into(),
        state: crate::state::ZoneState::Installed,
        remedy: "its init has exited; boot it again".into(),
    }
}

/// Join the zone's cgroups and namespaces and become root of its user namespace;
/// the process is then in the zone's `/`. Also marks the process undumpable: it holds
/// the caller's terminal (or host files) inside the zone's namespaces, and no zone
/// process may ptrace it or open its descriptors.
pub fn join(z: &ZoneRef<'_>) -> Result<Joined> {
    let zone = z.zone;
    warren_sys::proc::set_undumpable().ctx(|| format!("zone '{zone}': PR_SET_DUMPABLE"))?;
    // Opened before the start-time check in Target::open, so it is init's: a halt racing
    // this login is then told apart from any other failure by polling it.
    let init = warren_sys::proc::pidfd_open(z.init.pid).map_err(|_| gone(zone))?;
    let joined = Joined {
        init,
        zone: zone.to_string(),
    };
    let target = Target::open(z.proc_root, z.init.pid, z.init.start_time, &NAMESPACES)
        .map_err(|_| gone(zone))?;
    crate::fault::pause("login.before-join");
    for f in z.cgroups.self_join_files() {
        OpenOptions::new()
            .write(true)
            .open(&f)
            .and_then(|mut file| file.write_all(b"0"))
            .map_err(|source| {
                // A halt removes the cgroups once the zone's processes are gone.
                if joined.init_exited() || source.kind() == std::io::ErrorKind::NotFound {
                    return gone(zone);
                }
                Error::Io {
                    context: format!("zone '{zone}': joining cgroup {}", f.display()),
                    source,
                }
            })?;
    }
    target.enter().map_err(|e| match e {
        JoinError::Gone => gone(zone),
        JoinError::Setns { .. } if joined.init_exited() => gone(zone),
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
    Ok(joined)
}

/// Join the zone whose init is `z.init`, then run `req` in it. Returns the command's
/// exit status (128 + signal if it was killed).
pub fn login(z: &ZoneRef<'_>, req: &Request<'_>) -> Result<i32> {
    let zone = z.zone;
    let joined = join(z)?;
    // Resolved inside the zone, with its root's rights: its own files, never the host's.
    let passwd = login_user::read_zone_file(Path::new("/etc/passwd")).unwrap_or_default();
    let who = match req.user {
        None => Identity::root(&passwd),
        Some(u) => {
            let group = login_user::read_zone_file(Path::new("/etc/group")).unwrap_or_default();
            login_user::resolve(u, &passwd, &group)
                .map_err(|e| Error::Invalid(format!("zone '{zone}': {e}")))?
        }
    };
    let shell = who
        .shell
        .clone()
        .filter(|s| Path::new(s).is_file())
        .unwrap_or_else(|| "/bin/sh".into());
    let argv: Vec<String> = if req.argv.is_empty() {
        vec![shell.clone(), "-l".into()]
    } else {
        req.argv.to_vec()
    };
    let env = login_user::environment(
        &who,
        &shell,
        std::env::var("TERM").ok(),
        z.env,
        req.env,
        |k| std::env::var(k).ok(),
    )
    .map_err(|e| Error::Invalid(format!("zone '{zone}': {e}")))?;
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or(super::ZONE_PATH, |(_, v)| v.as_str());
    let program = resolve(&argv[0], path).ok_or_else(|| Error::Command {
        zone: zone.into(),
        program: argv[0].clone(),
        missing: true,
        message: format!(
            "command not found in the zone's PATH ({path}); give its absolute path inside the zone"
        ),
    })?;
    let cwd = match req.cwd {
        Some(d) if !d.starts_with('/') => {
            return Err(Error::Invalid(format!(
                "zone '{zone}': -w {d:?}: give an absolute path inside the zone"
            )))
        }
        Some(d) => PathBuf::from(d),
        // A login shell starts at home, as after any login; a command in /, as before.
        None if req.argv.is_empty() && Path::new(&who.home).is_dir() => PathBuf::from(&who.home),
        None => PathBuf::from("/"),
    };
    crate::fault::pause("login.before-spawn");
    let command = Command {
        zone,
        joined: &joined,
        program: &program,
        argv: &argv,
        env: &env,
        cwd: &cwd,
        cwd_given: req.cwd.is_some(),
        who: &who,
        confinement: z.confinement,
        rlimits: z.rlimits,
    };
    let pty = match req.tty {
        Tty::Force => true,
        Tty::Never => false,
        Tty::Auto => warren_sys::pty::isatty(0) && warren_sys::pty::isatty(1),
    };
    if pty {
        super::login_io::run_on_pty(&command)
    } else {
        super::login_io::run_on_pipes(&command)
    }
}

/// Find a program in `path` (the login's PATH, in the zone).
fn resolve(program: &str, path: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    path.split(':')
        .filter(|d| d.starts_with('/'))
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
pub(super) struct Command<'a> {
    pub zone: &'a str,
    pub joined: &'a Joined,
    pub program: &'a Path,
    pub argv: &'a [String],
    pub env: &'a [(String, String)],
    pub cwd: &'a Path,
    /// `-w` was given (its failure is then the caller's to fix).
    pub cwd_given: bool,
    pub who: &'a Identity,
    pub confinement: &'a Confinement,
    pub rlimits: &'a std::collections::BTreeMap<String, crate::isolation::rlimits::Limit>,
}

/// The command's stdio: a pty of the zone's devpts (its controlling terminal), or
/// three pipes (stdin, stdout, stderr); in a new session either way.
pub(super) enum Stdio {
    Pty(RawFd),
    Pipes([RawFd; 3]),
}

impl Command<'_> {
    /// Spawn it with `stdio`, the zone's confinement last; returns its pid once it has
    /// exec'd. The plan is the one sandbox builder's, with no root and no parent's go.
    pub(super) fn spawn(&self, stdio: Stdio) -> Result<i32> {
        use crate::sandbox::spec::{Caps, Process, SandboxSpec};
        let zone = self.zone;
        let (stdio, ctty) = match stdio {
            Stdio::Pty(fd) => (Vec::new(), Some(fd)),
            Stdio::Pipes(fds) => (fds.into_iter().zip(0..).collect(), None),
        };
        let mut caps = Caps::keep(self.confinement.keep);
        if self.who.uid != 0 {
            // Another user holds no capability (as after its own login); the bounding
            // set stays the zone's, so its set-id programs work as in the zone.
            caps.sets = CapSets::default();
        }
        let mut spec = SandboxSpec::joined(Process {
            exec: ExecTarget::Path(cstr(&self.program.to_string_lossy())?),
            argv: self.argv.iter().map(|a| cstr(a)).collect::<Result<_>>()?,
            envp: self
                .env
                .iter()
                .map(|(k, v)| cstr(&format!("{k}={v}")))
                .collect::<Result<_>>()?,
            rlimits: self
                .rlimits
                .iter()
                .filter_map(|(name, l)| {
                    crate::isolation::rlimits::resource(name)
                        .map(|r| (r, l.soft, l.hard, format!("rlimit.{name}")))
                })
                .collect(),
            caps,
            umask: None,
            cwd: Some(self.cwd.to_path_buf()),
            ids: Some((self.who.uid, self.who.gid, self.who.groups.clone())),
            ctty,
            setsid: true,
            gate: Vec::new(),
            no_new_privs: true,
            seccomp: Some(self.confinement.filter.clone()),
        });
        spec.stdio = stdio;
        let plan = crate::sandbox::plan(spec)
            .map_err(|e| Error::Invalid(format!("zone '{zone}': {e}")))?;
        warren_sys::spawn::spawn_zone(&plan.spawn).map_err(|e| {
            use warren_sys::spawn::SpawnError as E;
            // Forking into a pid namespace whose init has exited (or is exiting: the
            // kernel stops allocating pids there first) fails with ENOMEM.
            let dying = matches!(&e, E::Clone(c) if c.raw_os_error() == Some(libc::ENOMEM));
            if dying || self.joined.init_exited() {
                return Error::WrongState {
                    zone: zone.into(),
                    state: crate::state::ZoneState::Installed,
                    remedy: "its init has exited (it was halted while this login started); boot it again".into(),
                };
            }
            if let E::Exec(err) = &e {
                let missing = err.raw_os_error() == Some(libc::ENOENT);
                return Error::Command {
                    zone: zone.into(),
                    program: self.program.display().to_string(),
                    missing,
                    message: if missing {
                        format!("exec: {err} (no such file in the zone, or its interpreter is missing)")
                    } else {
                        format!("exec: {err} (check that it is an executable file for this host and its mode allows the user to run it)")
                    },
                };
            }
            Error::Invalid(format!(
                "zone '{zone}': starting {}: {}",
                self.program.display(),
                self.describe(&plan.spawn, e)
            ))
        })
    }

    /// A spawn failure in words: which step, or the exec.
    fn describe(&self, plan: &SpawnPlan, e: warren_sys::spawn::SpawnError) -> String {
        use warren_sys::spawn::SpawnError as E;
        match e {
            // EAGAIN from fork: this process joined the zone's pids cgroup, which is full.
            E::Clone(e) if e.raw_os_error() == Some(libc::EAGAIN) => format!(
                "fork: {e} (the zone is at its process limit, pids.max: raise max-processes / max-threads with 'warren config set', or stop some of its processes)"
            ),
            E::Clone(e) => format!("fork: {e}"),
            E::Step { index, error } => match plan.steps.get(index) {
                Some(Step::Seccomp(_)) => format!("loading the seccomp filter: {error}"),
                Some(Step::DropBounding(_) | Step::SetCaps(_)) => {
                    format!("dropping capabilities: {error}")
                }
                Some(Step::Rlimit { resource, .. }) => format!("rlimit {resource}: {error}"),
                Some(Step::Ctty(_)) => format!("taking the zone's pty as terminal: {error}"),
                Some(Step::Chdir(_)) if self.cwd_given => format!(
                    "-w {}: {error}; give a directory that exists in the zone",
                    self.cwd.display()
                ),
                Some(Step::Chdir(_)) => {
                    format!("changing to {}: {error}", self.cwd.display())
                }
                Some(Step::SetIds { uid, gid, .. }) => format!(
                    "becoming uid {uid} gid {gid}: {error} (ids must lie within the zone's 65536)"
                ),
                _ => format!("setting up its stdio and session: {error}"),
            },
            E::Exec(e) => format!("exec: {e}"),
            E::Pipe(e) => format!("talking to the child: {e}"),
            E::Setup(never) => match never {},
        }
    }
}
