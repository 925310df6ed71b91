//! The one plan builder: a [`SandboxSpec`] becomes the steps of a spawn plan, in one
//! order for every front end (a zone's boot, `warren login`, an OCI container's init
//! and `oci exec`), checked against `sandbox::invariants` before it is returned.
//!
//! The order:
//!
//! 1. the parent's go, when it comes first, and the user namespace (joined, or made by
//!    the clone and its root taken); the other namespaces joined by descriptor; a new
//!    cgroup namespace when the go came first;
//! 2. the root, under umask 0: `/`'s propagation, a private parent mount, the mount
//!    list in order, the device nodes, the /dev links, the console;
//! 3. hostname, `lo` up; the hooks' sync point; the root change and `/`'s propagation
//!    after it;
//! 4. sysctls, oom_score_adj, masked and read-only paths, a read-only `/`, the umask
//!    the root's steps end with; stdio;
//! 5. the parent's go when it comes after the root, the user namespace, the cgroup
//!    namespace; a held descriptor;
//! 6. the process: rlimits; a seccomp filter that needs privilege to load (without
//!    no_new_privs); the bounding set; umask, cwd, ids, capabilities, terminal or
//!    session; the gate (OCI `create`/`start`); no_new_privs and the filter, last.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use warren_sys::harden::CapSets;
use warren_sys::libc;
use warren_sys::spawn::{ExecTarget, SpawnError, SpawnPlan, Step};

use super::invariants::Violation;
use super::spec::*;

/// Why a spec could not become a plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A string or path that cannot reach the kernel.
    #[error("{0:?} contains a NUL byte")]
    Nul(String),
    /// A field of the front end's config (`process.args`, `linux.devices`, ...) and
    /// what is wrong with it, with the fix.
    #[error("{field}: {problem}")]
    Field { field: String, problem: String },
    /// The builder broke one of its own invariants (a bug in warren).
    #[error("internal error: {0}")]
    Invariant(#[from] Violation),
}

impl PlanError {
    pub fn field(field: impl Into<String>, problem: impl Into<String>) -> PlanError {
        PlanError::Field {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// `b` as a C string.
pub fn cbytes(b: &[u8]) -> Result<CString, PlanError> {
    CString::new(b).map_err(|_| PlanError::Nul(String::from_utf8_lossy(b).into_owned()))
}

pub fn cstr(s: &str) -> Result<CString, PlanError> {
    cbytes(s.as_bytes())
}

pub fn cpath(p: &Path) -> Result<CString, PlanError> {
    cbytes(p.as_os_str().as_bytes())
}

/// A spawn plan with what each step does, for error messages.
#[derive(Debug)]
pub struct Plan {
    pub spawn: SpawnPlan,
    pub what: Vec<String>,
}

impl Plan {
    fn new(clone_flags: libc::c_int, pass_fds: u32) -> Plan {
        Plan {
            spawn: SpawnPlan {
                clone_flags,
                steps: Vec::new(),
                exec: ExecTarget::Path(CString::default()),
                argv: Vec::new(),
                envp: Vec::new(),
                pass_fds,
            },
            what: Vec::new(),
        }
    }

    pub fn push(&mut self, step: Step, what: impl Into<String>) {
        self.spawn.steps.push(step);
        self.what.push(what.into());
    }

    /// What step `index` does, for a failure's message.
    pub fn describe(&self, index: usize) -> &str {
        self.what.get(index).map(String::as_str).unwrap_or("?")
    }

    fn mount(
        &mut self,
        source: Option<&[u8]>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: Option<&str>,
    ) -> Result<(), PlanError> {
        let what = match (fstype, source) {
            (Some(t), _) => format!("mount {t} on {}", target.display()),
            (None, Some(s)) => format!(
                "mount {} on {}",
                String::from_utf8_lossy(s),
                target.display()
            ),
            (None, None) => format!("remount {}", target.display()),
        };
        let step = Step::Mount {
            source: source.map(cbytes).transpose()?,
            target: cpath(target)?,
            fstype: fstype.map(cstr).transpose()?,
            flags,
            data: data.map(cstr).transpose()?,
        };
        self.push(step, what);
        Ok(())
    }

    fn tolerate_exists(&mut self, step: Step, what: String) {
        self.push(Step::Tolerate(libc::EEXIST, Box::new(step)), what);
    }

    /// `mkdir -p` of `dir` beneath `root`, one component at a time (existing is fine).
    fn dirs(&mut self, root: &Path, dir: &Path) -> Result<(), PlanError> {
        let rel = dir.strip_prefix(root).map_err(|_| {
            PlanError::Invariant(Violation {
                index: self.what.len(),
                what: format!("{} is outside {}", dir.display(), root.display()),
            })
        })?;
        let mut at = root.to_path_buf();
        for c in rel.components() {
            at.push(c);
            self.tolerate_exists(
                Step::Mkdir {
                    path: cpath(&at)?,
                    mode: 0o755,
                },
                format!("create {}", at.display()),
            );
        }
        Ok(())
    }
}

/// Build the plan of `spec`: the one order above, checked against the invariants.
pub fn plan(spec: SandboxSpec) -> Result<Plan, PlanError> {
    let ns = &spec.namespaces;
    let mut p = Plan::new(ns.new, spec.pass_fds);
    if spec.sync == Some(SyncPoint::First) {
        p.push(
            Step::WaitParent,
            "wait for the parent to set up cgroups and id maps",
        );
        user_namespace(&mut p, ns.user);
    }
    for (nstype, fd, name) in &ns.join {
        p.push(
            Step::Setns {
                fd: *fd,
                nstype: *nstype,
            },
            format!("join the {name} namespace"),
        );
    }
    if spec.sync == Some(SyncPoint::First) && ns.cgroup {
        cgroup_namespace(&mut p);
    }
    if let Some(root) = &spec.root {
        build_root(&mut p, root)?;
    }
    console(&mut p, &spec)?;
    if let Some(h) = &spec.hostname {
        p.push(Step::Sethostname(h.clone()), "set the hostname");
    }
    if spec.loopback_up {
        p.push(Step::LoopbackUp, "bring up lo");
    }
    if let Some(n) = spec.hooks_sync {
        p.push(
            Step::Sync(n),
            "wait for the createRuntime and createContainer hooks",
        );
    }
    if let Some(root) = &spec.root {
        change_root(&mut p, root)?;
    }
    for (k, v) in &spec.sysctls {
        let path = format!("/proc/sys/{}", k.replace('.', "/"));
        p.push(
            Step::WriteFile {
                path: cstr(&path)?,
                data: v.clone().into_bytes(),
            },
            format!("set sysctl {k}={v}"),
        );
    }
    if let Some(adj) = spec.oom_score_adj {
        p.push(
            Step::WriteFile {
                path: cstr("/proc/self/oom_score_adj")?,
                data: adj.to_string().into_bytes(),
            },
            "set oom_score_adj",
        );
    }
    if let Some(root) = &spec.root {
        after_root_change(&mut p, root)?;
    }
    for (from, to) in &spec.stdio {
        p.push(
            Step::Dup2 {
                from: *from,
                to: *to,
            },
            format!("set up descriptor {to}"),
        );
    }
    if spec.sync == Some(SyncPoint::AfterRoot) {
        p.push(
            Step::WaitParent,
            "wait for the parent to move it into its cgroups and set up its network",
        );
        user_namespace(&mut p, ns.user);
        if ns.cgroup {
            cgroup_namespace(&mut p);
        }
    }
    if let Some(h) = &spec.hold {
        p.push(
            Step::OpenAt {
                dirfd: h.dirfd,
                path: cstr(&h.path)?,
                flags: h.flags,
                fd: h.fd,
            },
            h.what.clone(),
        );
    }
    let inside: Vec<PathBuf> = spec.root.iter().flat_map(|r| r.inside.clone()).collect();
    process(&mut p, spec.process)?;
    let inside: Vec<&Path> = inside.iter().map(PathBuf::as_path).collect();
    super::invariants::check(&p.spawn, &inside)?;
    Ok(p)
}

fn user_namespace(p: &mut Plan, user: UserNs) {
    match user {
        UserNs::Inherit => {}
        UserNs::New => {
            p.push(
                Step::SetIds {
                    uid: 0,
                    gid: 0,
                    groups: Vec::new(),
                },
                "become root of the new user namespace",
            );
            p.push(
                Step::SetCaps(CapSets {
                    effective: u64::MAX >> 23,
                    permitted: u64::MAX >> 23,
                    inheritable: 0,
                    ambient: 0,
                }),
                "regain capabilities in the new user namespace",
            );
        }
        UserNs::Join(fd) => {
            p.push(
                Step::Setns {
                    fd,
                    nstype: libc::CLONE_NEWUSER,
                },
                "join the user namespace",
            );
            p.push(Step::BecomeRoot, "become root of the user namespace");
        }
    }
}

fn cgroup_namespace(p: &mut Plan) {
    p.push(
        Step::Unshare(libc::CLONE_NEWCGROUP),
        "create the cgroup namespace",
    );
}

/// Before the root change: propagation, mounts, nodes, links.
fn build_root(p: &mut Plan, root: &Root) -> Result<(), PlanError> {
    p.push(Step::Umask(0), "clear the umask (modes are exact)");
    p.mount(None, Path::new("/"), None, root.propagation, None)?;
    if let Some(parent) = &root.private_parent {
        p.mount(None, parent, None, libc::MS_PRIVATE, None)?;
    }
    for m in &root.mounts {
        mount_entry(p, m)?;
    }
    for n in &root.nodes {
        node(p, n)?;
    }
    for (link, to) in &root.links {
        p.tolerate_exists(
            Step::Symlink {
                target: cstr(to)?,
                link: cpath(link)?,
            },
            format!("create link {}", link.display()),
        );
    }
    Ok(())
}

fn mount_entry(p: &mut Plan, m: &MountEntry) -> Result<(), PlanError> {
    let target = &m.target;
    match &m.prepare {
        Prepare::AsIs => {}
        Prepare::CheckBeneath { root, rel } => p.push(
            Step::CheckBeneath {
                root: cpath(root)?,
                rel: cstr(rel)?,
            },
            format!(
                "check that /{rel} is a directory inside the root {}, reached without symlinks; a root whose /{rel} is a symlink, a file or missing is refused: make it a directory in the template (or the zone)",
                root.display()
            ),
        ),
        Prepare::Dirs { root } => p.dirs(root, target)?,
        Prepare::File { root } => {
            if let Some(parent) = target.parent() {
                p.dirs(root, parent)?;
            }
            p.tolerate_exists(
                Step::CreateFile {
                    path: cpath(target)?,
                    mode: 0o644,
                },
                format!("create {}", target.display()),
            );
        }
    }
    match &m.kind {
        MountKind::Mount {
            source,
            fstype,
            flags,
            data,
        } => p.mount(
            source.as_deref(),
            target,
            fstype.as_deref(),
            *flags,
            data.as_deref(),
        )?,
        MountKind::Attach { fd, what } => p.push(
            Step::MoveMount {
                fd: *fd,
                target: cpath(target)?,
            },
            format!("attach {what} on {}", target.display()),
        ),
        MountKind::Dir { mode, owner } => {
            p.tolerate_exists(
                Step::Mkdir {
                    path: cpath(target)?,
                    mode: *mode,
                },
                format!("create {}", target.display()),
            );
            if let Some((uid, gid)) = owner {
                p.push(
                    Step::Chown {
                        path: cpath(target)?,
                        uid: *uid,
                        gid: *gid,
                    },
                    format!("give {} to {uid}:{gid}", target.display()),
                );
            }
        }
        MountKind::Link { to } => p.tolerate_exists(
            Step::Symlink {
                target: cstr(to)?,
                link: cpath(target)?,
            },
            format!("create link {}", target.display()),
        ),
    }
    for (flags, data) in &m.then {
        p.mount(None, target, None, *flags, data.as_deref())?;
    }
    Ok(())
}

fn node(p: &mut Plan, n: &Node) -> Result<(), PlanError> {
    if let (Some(root), Some(parent)) = (&n.dirs_beneath, n.at.parent()) {
        p.dirs(root, parent)?;
    }
    if n.bind {
        p.tolerate_exists(
            Step::CreateFile {
                path: cpath(&n.at)?,
                mode: 0o644,
            },
            format!("create {}", n.at.display()),
        );
        return p.mount(
            Some(n.host.as_os_str().as_bytes()),
            &n.at,
            None,
            libc::MS_BIND,
            None,
        );
    }
    p.tolerate_exists(
        Step::Mknod {
            path: cpath(&n.at)?,
            mode: n.kind | (n.mode & 0o7777),
            dev: libc::makedev(n.major, n.minor),
        },
        format!("create device {}", n.at.display()),
    );
    if (n.uid, n.gid) != (0, 0) {
        p.push(
            Step::Chown {
                path: cpath(&n.at)?,
                uid: n.uid,
                gid: n.gid,
            },
            format!("give {} to {}:{}", n.at.display(), n.uid, n.gid),
        );
    }
    Ok(())
}

/// The console: a log file or a pty, bound on the root's /dev/console.
fn console(p: &mut Plan, spec: &SandboxSpec) -> Result<(), PlanError> {
    let (fd, dev_console) = match &spec.console {
        None => return Ok(()),
        Some(Console::Log {
            mount_fd,
            dir,
            file,
            fd,
            dev_console,
        }) => {
            p.tolerate_exists(
                Step::Mkdir {
                    path: cpath(dir)?,
                    mode: 0o700,
                },
                format!("create {}", dir.display()),
            );
            p.push(
                Step::MoveMount {
                    fd: *mount_fd,
                    target: cpath(dir)?,
                },
                format!("attach the console's tmpfs on {}", dir.display()),
            );
            p.push(
                Step::Open {
                    path: cpath(file)?,
                    flags: libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                    mode: 0,
                    fd: *fd,
                },
                format!("open {}", file.display()),
            );
            (*fd, Some(dev_console))
        }
        Some(Console::Pty {
            ptmx,
            socket,
            slave_fd,
            rows,
            cols,
            dev_console,
        }) => {
            p.push(
                Step::Console {
                    ptmx: cpath(ptmx)?,
                    socket: *socket,
                    slave_fd: *slave_fd,
                    rows: *rows,
                    cols: *cols,
                },
                "allocate the console pty (needs a devpts mount at /dev/pts) and send it to the console socket",
            );
            (*slave_fd, dev_console.as_ref())
        }
    };
    if let Some(at) = dev_console {
        p.tolerate_exists(
            Step::CreateFile {
                path: cpath(at)?,
                mode: 0o600,
            },
            format!("create {}", at.display()),
        );
        let src = format!("/proc/self/fd/{fd}");
        p.mount(Some(src.as_bytes()), at, None, libc::MS_BIND, None)?;
    }
    Ok(())
}

fn change_root(p: &mut Plan, root: &Root) -> Result<(), PlanError> {
    let new_root = cpath(&root.path)?;
    match root.change {
        RootChange::PivotRoot => p.push(
            Step::PivotRoot { new_root },
            format!("pivot_root into {}", root.path.display()),
        ),
        RootChange::MoveRoot => p.push(
            Step::MoveRoot { new_root },
            "move the root onto / and chroot (--no-pivot)",
        ),
    }
    if let Some(prop) = root.propagation_after {
        // The root's own propagation, which exists as "/" only now (as runc).
        p.mount(None, Path::new("/"), None, prop, None)?;
    }
    Ok(())
}

/// After the root change: masks, a read-only `/`, the umask back.
fn after_root_change(p: &mut Plan, root: &Root) -> Result<(), PlanError> {
    let masks = super::masks::steps(
        Path::new("/"),
        Path::new("/dev"),
        root.masked.iter().map(String::as_str),
        root.readonly_paths.iter().map(String::as_str),
    )?;
    for (step, what) in masks {
        p.push(step, what);
    }
    if root.readonly {
        p.mount(
            None,
            Path::new("/"),
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
            None,
        )?;
    }
    p.push(Step::Umask(root.umask_after), "set the umask");
    Ok(())
}

/// The process part, in runc's order; no_new_privs and the filter last.
fn process(p: &mut Plan, mut pr: Process) -> Result<(), PlanError> {
    p.spawn.exec = pr.exec;
    p.spawn.argv = pr.argv;
    p.spawn.envp = pr.envp;
    for (resource, soft, hard, name) in pr.rlimits {
        p.push(
            Step::Rlimit {
                resource,
                soft,
                hard,
            },
            format!("set {name}"),
        );
    }
    // Without no_new_privs, loading a filter needs CAP_SYS_ADMIN: load it while root.
    if !pr.no_new_privs {
        if let Some(f) = pr.seccomp.take() {
            p.push(Step::Seccomp(f), "load the seccomp filter");
        }
    }
    p.push(
        Step::DropBounding(pr.caps.bounding),
        "drop bounding capabilities",
    );
    if let Some(mask) = pr.umask {
        p.push(Step::Umask(mask), "set the process's umask");
    }
    if let Some(cwd) = &pr.cwd {
        p.push(
            Step::Chdir(cpath(cwd)?),
            format!("chdir to {}", cwd.display()),
        );
    }
    if let Some((uid, gid, groups)) = pr.ids {
        p.push(
            Step::SetIds { uid, gid, groups },
            format!("become uid {uid} gid {gid}"),
        );
    }
    p.push(Step::SetCaps(pr.caps.sets), "set capabilities");
    if let Some(fd) = pr.ctty {
        p.push(
            Step::Ctty(fd),
            "take the terminal as controlling terminal and stdio",
        );
    } else if pr.setsid {
        p.push(Step::Setsid, "start a new session");
    }
    for (step, what) in pr.gate {
        p.push(step, what);
    }
    if pr.no_new_privs {
        p.push(Step::NoNewPrivs, "set no_new_privs");
    }
    if let Some(f) = pr.seccomp {
        p.push(Step::Seccomp(f), "load the seccomp filter");
    }
    Ok(())
}

/// A failed spawn in words: the sandbox (`kind` "zone" or "container", its name),
/// what it was doing ("boot step", "setup step") and what it runs ("init",
/// "process"); the clone's errno gets the host limit it points at.
pub fn spawn_error(
    (kind, name): (&str, &str),
    doing: &str,
    runs: &str,
    plan: &Plan,
    e: SpawnError<crate::error::Error>,
) -> crate::error::Error {
    use crate::error::Error;
    let who = format!("{kind} '{name}'");
    match e {
        SpawnError::Setup(e) => e,
        SpawnError::Clone(source) => {
            let hint = match source.raw_os_error() {
                Some(libc::EAGAIN) => " (a process limit was reached: check kernel.pid_max, kernel.threads-max and the pids cgroup)",
                Some(libc::ENOSPC) => " (a namespace limit was reached: check user.max_*_namespaces)",
                Some(libc::ENOMEM) => " (out of memory)",
                _ => "",
            };
            Error::Io {
                context: format!("{who}: creating its namespaces failed{hint}"),
                source,
            }
        }
        SpawnError::Step { index, error } => Error::Io {
            context: format!(
                "{who}: {doing} {} ({}) failed",
                index + 1,
                plan.describe(index)
            ),
            source: error,
        },
        SpawnError::Exec(source) => {
            let prog = match &plan.spawn.exec {
                ExecTarget::Path(p) => p.to_string_lossy().into_owned(),
                ExecTarget::Fd(_) => "warren-init".into(),
            };
            Error::Io {
                context: format!(
                    "{who}: starting {runs} {prog} failed (is it present and executable inside the {kind}?)"
                ),
                source,
            }
        }
        SpawnError::Pipe(source) => Error::Io {
            context: format!("{who}: talking to its new process failed"),
            source,
        },
    }
}
