//! What every spawn plan must satisfy, whichever front end built it (a zone's boot,
//! `warren login`, an OCI `create` or `exec`). Checked on each plan right before it is
//! spawned, so a builder that breaks one fails loudly instead of running; and tested
//! on plans built from zone and OCI configs (pure).
//!
//! 1. **Confinement last.** After the first seccomp filter only steps that give up
//!    privilege or wait may follow (capabilities, ids, umask, cwd, terminal, the
//!    `create`/`start` handshake, no_new_privs, another filter): no mount, node,
//!    namespace join or file write runs under a filter that could have been bypassed
//!    before it, or with privileges the filter was meant to bound.
//! 2. **The parent's go first.** A plan with a [`Step::WaitParent`] or a
//!    [`Step::Sync`] joins a user namespace only after the first of them (the parent
//!    sets up cgroups, id maps and network first).
//! 3. **Every path inside the sandbox.** Before `pivot_root`, every path a step
//!    creates, mounts on, re-owns or masks lies beneath one of the sandbox's own
//!    directories (`/` itself only to change its propagation). After it, paths are
//!    the sandbox's by construction.
//!
//! The descriptors that reach exec are not a property of the steps: `warren_sys::spawn`
//! marks every one past `pass_fds` close-on-exec in every child.

use std::ffi::CStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use warren_sys::libc;
use warren_sys::spawn::{SpawnPlan, Step};

/// A broken invariant: which step and what it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spawn plan step {index}: {what}")]
pub struct Violation {
    pub index: usize,
    pub what: String,
}

/// The step inside `Optional` / `Tolerate` wrappers.
fn inner(step: &Step) -> &Step {
    match step {
        Step::Optional(s) | Step::Tolerate(_, s) => inner(s),
        s => s,
    }
}

/// Steps allowed after a seccomp filter is loaded.
fn allowed_under_filter(step: &Step) -> bool {
    matches!(
        inner(step),
        Step::DropBounding(_)
            | Step::Umask(_)
            | Step::Chdir(_)
            | Step::SetIds { .. }
            | Step::SetCaps(_)
            | Step::Ctty(_)
            | Step::Setsid
            | Step::Ready
            | Step::OpenAndWrite { .. }
            | Step::NoNewPrivs
            | Step::Seccomp(_)
    )
}

/// The host paths a step creates, mounts on, re-owns or masks (its sources are not
/// listed: a bind's source is a host path by design).
fn targets(step: &Step) -> Vec<&CStr> {
    match inner(step) {
        Step::Mount { target, .. } => vec![target],
        Step::Mkdir { path, .. }
        | Step::Mknod { path, .. }
        | Step::CreateFile { path, .. }
        | Step::Chown { path, .. }
        | Step::Mask { path, .. } => vec![path],
        Step::Symlink { link, .. } => vec![link],
        Step::MoveMount { target, .. } => vec![target],
        _ => Vec::new(),
    }
}

/// Check `plan`; `inside` are the sandbox's own directories (its root, and for a zone
/// the zone directory that holds it).
pub fn check(plan: &SpawnPlan, inside: &[&Path]) -> Result<(), Violation> {
    let fail = |index: usize, what: String| Err(Violation { index, what });
    let mut filtered = false;
    let mut pivoted = false;
    let waits = plan
        .steps
        .iter()
        .any(|s| matches!(s, Step::WaitParent | Step::Sync(_)));
    let mut went = false;
    for (index, step) in plan.steps.iter().enumerate() {
        if filtered && !allowed_under_filter(step) {
            return fail(index, format!("{step:?} after the seccomp filter"));
        }
        match inner(step) {
            Step::Seccomp(_) => filtered = true,
            Step::WaitParent | Step::Sync(_) => went = true,
            Step::PivotRoot { .. } | Step::MoveRoot { .. } => pivoted = true,
            Step::Setns { nstype, .. } if *nstype == libc::CLONE_NEWUSER && waits && !went => {
                return fail(
                    index,
                    "joins a user namespace before the parent's go".into(),
                );
            }
            _ => {}
        }
        if pivoted {
            continue;
        }
        for t in targets(step) {
            let path = Path::new(std::ffi::OsStr::from_bytes(t.to_bytes()));
            let is_root_propagation = path == Path::new("/")
                && matches!(inner(step), Step::Mount { source: None, flags, .. }
                    if flags & (libc::MS_PRIVATE | libc::MS_SLAVE | libc::MS_SHARED | libc::MS_UNBINDABLE) != 0);
            let dotdot = path
                .components()
                .any(|c| c == std::path::Component::ParentDir);
            if is_root_propagation {
                continue;
            }
            if dotdot || !inside.iter().any(|d| path.starts_with(d)) {
                return fail(
                    index,
                    format!(
                        "{} is outside the sandbox's directories {inside:?}",
                        path.display()
                    ),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use warren_sys::spawn::ExecTarget;

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    fn plan(steps: Vec<Step>) -> SpawnPlan {
        SpawnPlan {
            clone_flags: 0,
            steps,
            exec: ExecTarget::Path(c("/bin/true")),
            argv: vec![c("true")],
            envp: Vec::new(),
            pass_fds: 0,
            into_cgroup: None,
        }
    }

    fn mount(target: &str) -> Step {
        Step::Mount {
            source: Some(c("proc")),
            target: c(target),
            fstype: Some(c("proc")),
            flags: 0,
            data: None,
        }
    }

    #[test]
    fn a_well_formed_plan_passes() {
        let p = plan(vec![
            Step::Mount {
                source: None,
                target: c("/"),
                fstype: None,
                flags: libc::MS_REC | libc::MS_PRIVATE,
                data: None,
            },
            mount("/r/proc"),
            Step::Optional(Box::new(Step::Mkdir {
                path: c("/r/dev/x"),
                mode: 0o755,
            })),
            Step::PivotRoot { new_root: c("/r") },
            mount("/proc"),
            Step::WaitParent,
            Step::Setns {
                fd: 5,
                nstype: libc::CLONE_NEWUSER,
            },
            Step::DropBounding(0),
            Step::NoNewPrivs,
            Step::Seccomp(Vec::new()),
        ]);
        check(&p, &[Path::new("/r")]).unwrap();
    }

    #[test]
    fn each_broken_invariant_is_named() {
        let after = plan(vec![Step::Seccomp(Vec::new()), mount("/r/proc")]);
        let e = check(&after, &[Path::new("/r")]).unwrap_err();
        assert_eq!(e.index, 1);
        assert!(e.what.contains("after the seccomp filter"), "{e}");

        let early = plan(vec![
            Step::Setns {
                fd: 5,
                nstype: libc::CLONE_NEWUSER,
            },
            Step::WaitParent,
        ]);
        assert!(check(&early, &[Path::new("/r")])
            .unwrap_err()
            .what
            .contains("before the parent's go"));
        // A sync point the child announces is a go too (a zone's, after its root).
        let early_sync = plan(vec![
            Step::Setns {
                fd: 5,
                nstype: libc::CLONE_NEWUSER,
            },
            Step::Sync(0),
        ]);
        assert!(check(&early_sync, &[Path::new("/r")])
            .unwrap_err()
            .what
            .contains("before the parent's go"));

        for bad in ["/etc/x", "/r/../etc", "/rr/x"] {
            let outside = plan(vec![mount(bad)]);
            let e = check(&outside, &[Path::new("/r")]).unwrap_err();
            assert!(e.what.contains("outside"), "{bad}: {e}");
        }
        // Inside a wrapper too.
        let wrapped = plan(vec![Step::Optional(Box::new(Step::Mknod {
            path: c("/dev/sda9"),
            mode: 0,
            dev: 0,
        }))]);
        assert!(check(&wrapped, &[Path::new("/r")]).is_err());
    }
}
