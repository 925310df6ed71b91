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
//! 5. the parent's go when it comes after the root (a sync point the child announces),
//!    the user namespace, the cgroup namespace; a held descriptor;
//! 6. the process: rlimits; a seccomp filter that needs privilege to load (without
//!    no_new_privs); the bounding set; umask, cwd, ids, capabilities, terminal or
//!    session; the gate (OCI `create`/`start`); no_new_privs and the filter, last.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use warren_sys::harden::CapSets;
use warren_sys::libc;
use warren_sys::spawn::{ExecTarget, SpawnPlan, Step};

use super::invariants::Violation;
use super::root::{after_root_change, build_root, change_root, console};
use super::spec::*;

pub use super::error::{cbytes, cpath, cstr, spawn_error, PlanError};

/// A spawn plan with what each step does, for error messages.
#[derive(Debug)]
pub struct Plan {
    pub spawn: SpawnPlan,
    pub what: Vec<String>,
}

impl Plan {
    pub(super) fn new(clone_flags: libc::c_int, pass_fds: u32) -> Plan {
        Plan {
            spawn: SpawnPlan {
                clone_flags,
                steps: Vec::new(),
                exec: ExecTarget::Path(CString::default()),
                argv: Vec::new(),
                envp: Vec::new(),
                pass_fds,
                into_cgroup: None,
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

    pub(super) fn mount(
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

    pub(super) fn tolerate_exists(&mut self, step: Step, what: String) {
        self.push(Step::Tolerate(libc::EEXIST, Box::new(step)), what);
    }

    /// `mkdir -p` of `dir` beneath `root`, one component at a time (existing is fine).
    pub(super) fn dirs(&mut self, root: &Path, dir: &Path) -> Result<(), PlanError> {
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
            Step::Sync(ROOT_BUILT),
            "wait for the parent to move it into its cgroups, set up its network and open its console",
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
