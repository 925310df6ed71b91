//! cgroup v2 delegation: getting controllers for zones from a non-root cgroup.
//!
//! # The problem
//!
//! On cgroup v2 a controller reaches a cgroup's children only when it is enabled in
//! that cgroup's `cgroup.subtree_control`, and the kernel refuses to enable one (EBUSY)
//! in a non-root cgroup that holds processes ("no internal processes"). warren runs
//! where users start it: a systemd service (`Delegate=yes`), a login session, a
//! `systemd-run --scope`. That cgroup — the *base* — always holds warren itself, and
//! often its siblings (the shell of a session, the other processes of a service).
//!
//! # What warren does (as systemd's and runc's delegation guides describe)
//!
//! Before the first zone cgroup is made ([`ensure`]): if the base's
//! `cgroup.subtree_control` lacks a controller the zone needs, warren
//!
//! 1. checks that the base *has* it (`cgroup.controllers`, i.e. the parent enabled it:
//!    that is what `Delegate=yes` arranges); otherwise [`CgroupError::NotDelegated`]
//!    names the controllers, the base and its parent;
//! 2. creates the leaf `<base>/warren-supervisor` ([`LEAF`]) and moves itself, then every
//!    other process of the base, into it — the base is delegated to warren, so its
//!    processes are the service's own (systemd does the same with `DelegateSubgroup=`);
//!    a refused write (the subtree is not delegated to this user) is `NotDelegated` too;
//! 3. enables the controllers in the base's `cgroup.subtree_control`.
//!
//! The root cgroup is exempt from the rule, so there nothing is moved. Later warren
//! processes started from the moved shell find themselves in the leaf; discovery
//! ([`base_of`]) takes the leaf's parent as the base, so every invocation agrees on
//! where zones live: `<base>/<group>/<zone>`. Nothing is ever created above the base.
//!
//! [`check`] answers the same question for `warren info` (read-only: what a boot would
//! do, or why it cannot) and for `warren doctor` (`try_it`: it does step 1-3 for the
//! memory and pids controllers and makes and removes a probe cgroup beneath the base).

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{write_file, CgroupError};

/// The leaf beneath the base that holds warren and the base's other processes.
pub const LEAF: &str = "warren-supervisor";

/// What to do when the base is not delegated, for messages and the doctor.
pub const DELEGATE_FIX: &str = "run warren from a systemd unit with Delegate=yes (contrib/warren-autoboot.service; for a shell: systemd-run -p Delegate=yes --pty --same-dir --wait bash), or from the root cgroup";

/// The base of warren's delegated subtree, given the directory of its own cgroup: the
/// parent when warren already sits in its [`LEAF`].
pub fn base_of(own: &Path) -> PathBuf {
    match (own.file_name(), own.parent()) {
        (Some(n), Some(parent)) if n == LEAF => parent.to_path_buf(),
        _ => own.to_path_buf(),
    }
}

fn words(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The real root cgroup has no `cgroup.type`; it alone may hold processes and enable
/// controllers at once.
fn is_root(base: &Path) -> bool {
    !base.join("cgroup.type").exists()
}

fn parent_name(base: &Path) -> String {
    base.parent()
        .map_or_else(|| "its parent".into(), |p| p.display().to_string())
}

fn not_delegated(base: &Path, missing: &[&str], why: String) -> CgroupError {
    CgroupError::NotDelegated {
        missing: missing.join(" "),
        base: base.to_path_buf(),
        why,
    }
}

/// Make `controllers` available to cgroups made beneath `base` (see the module doc).
/// Idempotent: nothing is written when they are enabled already.
pub fn ensure(base: &Path, controllers: &[&str]) -> Result<(), CgroupError> {
    let enabled = words(&base.join("cgroup.subtree_control"));
    let wanted: Vec<&str> = controllers
        .iter()
        .copied()
        .filter(|c| !enabled.iter().any(|e| e == c))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let available = words(&base.join("cgroup.controllers"));
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|c| !available.iter().any(|a| a == c))
        .collect();
    if !missing.is_empty() {
        return Err(not_delegated(
            base,
            &missing,
            format!(
                "{} does not enable them in its cgroup.subtree_control",
                parent_name(base)
            ),
        ));
    }
    if !is_root(base) {
        evacuate(base, &wanted)?;
    }
    let line: Vec<String> = wanted.iter().map(|c| format!("+{c}")).collect();
    let sc = base.join("cgroup.subtree_control");
    std::fs::write(&sc, line.join(" ")).map_err(|e| match e.raw_os_error() {
        Some(warren_sys::libc::EBUSY) => not_delegated(
            base,
            &wanted,
            format!(
                "processes still in it after moving them to {LEAF}: {}",
                words(&base.join("cgroup.procs")).join(" ")
            ),
        ),
        Some(warren_sys::libc::EACCES | warren_sys::libc::EPERM | warren_sys::libc::EROFS) => {
            not_delegated(
                base,
                &wanted,
                format!("writing {} was refused ({e})", sc.display()),
            )
        }
        _ => super::io_err("writing", &sc)(e),
    })
}

/// Move warren's own process, then every other one, from `base` into `base/LEAF`.
fn evacuate(base: &Path, wanted: &[&str]) -> Result<(), CgroupError> {
    let leaf = base.join(LEAF);
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e)
            if matches!(e.kind(), io::ErrorKind::PermissionDenied)
                || e.raw_os_error() == Some(warren_sys::libc::EROFS) =>
        {
            return Err(not_delegated(
                base,
                wanted,
                format!("creating {} was refused ({e})", leaf.display()),
            ))
        }
        Err(e) => return Err(super::io_err("creating", &leaf)(e)),
    }
    let procs = base.join("cgroup.procs");
    let me = warren_sys::getpid();
    let mv = |pid: i32| -> Result<(), CgroupError> {
        match write_file(&leaf, "cgroup.procs", &pid.to_string()) {
            Ok(()) => Ok(()),
            // Exited meanwhile.
            Err(CgroupError::Io { source, .. })
                if source.raw_os_error() == Some(warren_sys::libc::ESRCH) =>
            {
                Ok(())
            }
            Err(CgroupError::Io { source, .. })
                if matches!(
                    source.raw_os_error(),
                    Some(warren_sys::libc::EACCES | warren_sys::libc::EPERM)
                ) =>
            {
                Err(not_delegated(
                    base,
                    wanted,
                    format!(
                        "moving process {pid} from {} into {} was refused ({source})",
                        procs.display(),
                        leaf.display()
                    ),
                ))
            }
            Err(e) => Err(e),
        }
    };
    if words(&procs).iter().any(|p| p == &me.to_string()) {
        mv(me)?;
    }
    // New processes may be forked by those being moved: a few rounds.
    for _ in 0..10 {
        let left: Vec<i32> = words(&procs)
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        // A process outside this one's pid namespace is listed as 0, and writing 0
        // would move the writer instead: only a process that sees them can move them.
        let hidden = left.iter().filter(|p| **p == 0).count();
        if hidden > 0 {
            return Err(not_delegated(
                base,
                wanted,
                format!(
                    "{hidden} of its processes are outside this process's pid namespace \
                     (listed as 0), so they cannot be moved to {LEAF} from here; move them \
                     to a leaf beneath it, or start warren in its host's pid namespace"
                ),
            ));
        }
        for pid in left {
            mv(pid)?;
        }
    }
    Ok(())
}

/// Whether zones can get their controllers here, for `warren info` and `warren doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delegation {
    /// Zones can be booted (as far as cgroups go).
    pub ok: bool,
    /// The delegated base: zone groups are made in it.
    pub base: PathBuf,
    /// How many of [`REQUIRED`] zones get (all of them when `ok`).
    pub granted: usize,
    /// What was found (or done, with `try_it`).
    pub summary: String,
    /// What to do when `ok` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Controllers every zone needs.
pub const REQUIRED: [&str; 2] = ["memory", "pids"];

/// Check delegation at `base`. Read-only unless `try_it`: then prepare it for real as a
/// boot would ([`ensure`] for [`REQUIRED`]) and make and remove a probe cgroup beneath.
pub fn check(base: &Path, try_it: bool) -> Delegation {
    let report = |ok: bool, granted: usize, summary: String, fix: Option<String>| Delegation {
        ok,
        base: base.to_path_buf(),
        granted,
        summary,
        fix,
    };
    // The required controllers a refusal names are the ones zones would not get.
    let fail = |e: CgroupError| {
        let denied = match &e {
            CgroupError::NotDelegated { missing, .. } => REQUIRED
                .iter()
                .filter(|c| missing.split_whitespace().any(|m| m == **c))
                .count(),
            _ => REQUIRED.len(),
        };
        report(
            false,
            REQUIRED.len() - denied,
            e.to_string(),
            Some(DELEGATE_FIX.into()),
        )
    };
    if try_it {
        if let Err(e) = ensure(base, &REQUIRED) {
            return fail(e);
        }
        let probe = base.join(format!("warren-delegation-{}", warren_sys::getpid()));
        if let Err(e) = std::fs::create_dir(&probe) {
            return fail(super::io_err("creating", &probe)(e));
        }
        let got = words(&probe.join("cgroup.controllers"));
        let _ = std::fs::remove_dir(&probe);
        let lacking: Vec<&str> = REQUIRED
            .iter()
            .copied()
            .filter(|c| !got.iter().any(|g| g == c))
            .collect();
        if !lacking.is_empty() {
            return fail(not_delegated(
                base,
                &lacking,
                format!("a probe cgroup beneath it got only: {}", got.join(" ")),
            ));
        }
        return report(
            true,
            REQUIRED.len(),
            format!(
                "tried: a probe cgroup beneath {} got {}{}",
                base.display(),
                got.join(" "),
                leaf_note(base)
            ),
            None,
        );
    }
    let enabled = words(&base.join("cgroup.subtree_control"));
    let available = words(&base.join("cgroup.controllers"));
    let missing: Vec<&str> = REQUIRED
        .iter()
        .copied()
        .filter(|c| !available.iter().any(|a| a == c))
        .collect();
    if !missing.is_empty() {
        return fail(not_delegated(
            base,
            &missing,
            format!(
                "{} does not enable them in its cgroup.subtree_control",
                parent_name(base)
            ),
        ));
    }
    if REQUIRED.iter().all(|c| enabled.iter().any(|e| e == c)) {
        return report(
            true,
            REQUIRED.len(),
            format!(
                "{} enabled in {}/cgroup.subtree_control{}",
                enabled.join(" "),
                base.display(),
                leaf_note(base)
            ),
            None,
        );
    }
    if is_root(base) {
        return report(
            true,
            REQUIRED.len(),
            "the root cgroup: controllers are enabled at the first boot".into(),
            None,
        );
    }
    for file in ["cgroup.procs", "cgroup.subtree_control"] {
        let path = base.join(file);
        if let Err(e) = std::fs::OpenOptions::new().write(true).open(&path) {
            return fail(not_delegated(
                base,
                &REQUIRED,
                format!("{} is not writable ({e})", path.display()),
            ));
        }
    }
    let n = words(&base.join("cgroup.procs")).len();
    report(
        true,
        REQUIRED.len(),
        format!(
            "delegated; the first boot moves the {n} process(es) of {} into {LEAF}/ and enables the controllers there",
            base.display()
        ),
        None,
    )
}

fn leaf_note(base: &Path) -> String {
    let leaf = base.join(LEAF);
    if leaf.is_dir() {
        format!(
            "; warren and the base's other processes ({}) run in {}",
            words(&leaf.join("cgroup.procs")).len(),
            leaf.display()
        )
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leaf_belongs_to_its_parent() {
        assert_eq!(
            base_of(Path::new("/sys/fs/cgroup/warren.service/warren-supervisor")),
            PathBuf::from("/sys/fs/cgroup/warren.service")
        );
        assert_eq!(
            base_of(Path::new("/sys/fs/cgroup/user.slice/session-2.scope")),
            PathBuf::from("/sys/fs/cgroup/user.slice/session-2.scope")
        );
    }

    /// A fake cgroupfs: the kernel's refusals cannot happen there, but the decisions
    /// (nothing to do, not available, what is written) can be seen.
    fn fake(controllers: &str, enabled: &str) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let b = t.path();
        std::fs::write(b.join("cgroup.type"), "domain\n").unwrap();
        std::fs::write(b.join("cgroup.controllers"), controllers).unwrap();
        std::fs::write(b.join("cgroup.subtree_control"), enabled).unwrap();
        std::fs::write(b.join("cgroup.procs"), "").unwrap();
        t
    }

    #[test]
    fn controllers_the_parent_withholds_are_named_with_the_fix() {
        let t = fake("cpu io\n", "");
        let e = ensure(t.path(), &["memory", "pids"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory pids"), "{e}");
        assert!(e.contains("cgroup.subtree_control"), "{e}");
        assert!(e.contains("Delegate=yes"), "{e}");
        assert!(!t.path().join(LEAF).exists(), "nothing created: {e}");
        let d = check(t.path(), false);
        assert!(!d.ok && d.fix.is_some() && d.granted == 0, "{d:?}");
        let t = fake("memory\n", "");
        let d = check(t.path(), false);
        assert_eq!((d.ok, d.granted), (false, 1), "{d:?}");
        assert!(d.summary.contains("pids"), "{d:?}");
    }

    #[test]
    fn enabled_already_is_left_alone() {
        let t = fake("cpu memory pids\n", "memory pids\n");
        ensure(t.path(), &["memory", "pids"]).unwrap();
        assert!(!t.path().join(LEAF).exists());
        assert!(check(t.path(), false).ok);
    }

    #[test]
    fn processes_of_another_pid_namespace_are_named_not_written_as_0() {
        // What a shim in containerd's pid namespace reads in a service's cgroup.
        let t = fake("cpu memory pids\n", "");
        std::fs::write(t.path().join("cgroup.procs"), "0\n0\n").unwrap();
        let e = ensure(t.path(), &["memory", "pids"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 of its processes are outside"), "{e}");
        assert!(e.contains("pid namespace"), "{e}");
        // Writing "0" would have moved the writer: nothing was written.
        assert!(!t.path().join(LEAF).join("cgroup.procs").exists(), "{e}");
        assert_eq!(
            std::fs::read_to_string(t.path().join("cgroup.subtree_control")).unwrap(),
            ""
        );
    }

    #[test]
    fn available_controllers_are_enabled_after_the_leaf_is_made() {
        let t = fake("cpu memory pids\n", "memory\n");
        ensure(t.path(), &["memory", "pids", "cpu"]).unwrap();
        assert!(t.path().join(LEAF).is_dir());
        assert_eq!(
            std::fs::read_to_string(t.path().join("cgroup.subtree_control")).unwrap(),
            "+pids +cpu"
        );
    }
}
