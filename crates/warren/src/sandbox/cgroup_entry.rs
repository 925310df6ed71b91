//! How a new sandbox process (a zone's init, an OCI container's init, an `oci exec`)
//! gets into its cgroups: the cheapest way the host allows, one rule for every front
//! end.
//!
//! - **cgroup v1**: the child writes `0` into each hierarchy's `tasks` file as its
//!   first step ([`Step::WriteFd`] on descriptors the parent opened). It moves itself,
//!   one thread, which before exec is the whole process. A migration by pid through
//!   `cgroup.procs` (what the parent did before) takes the global
//!   `cgroup_threadgroup_rwsem` for writing, and that waits for an RCU grace period
//!   whenever no other migration happened within the last one (14.8 ms seen in a pod
//!   sandbox's create on a 2-vCPU VM; a single `warren boot` 19.4 → 9.7 ms, SPEC.md).
//!   Moving the current thread
//!   skips that lock (the kernel's `cgroup_procs_write_start`: no threadgroup to keep
//!   stable). The kernel checks the rights of whoever opened the file (the parent), so
//!   a child already in a new user namespace may write it.
//! - **cgroup v2**: the child is cloned straight into its directory
//!   (`clone3(CLONE_INTO_CGROUP)`); where the kernel cannot, the parent migrates it by
//!   pid through `cgroup.procs` in its after-clone handler ([`CgroupEntry::after_clone`]).
//!   A v2 domain cgroup has no per-thread file to use instead.
//!
//! `WARREN_CGROUP_SELF_JOIN=off` makes the parent migrate a v1 child by pid as before
//! (to measure the gain, as `WARREN_CLONE_INTO_CGROUP=off` does for v2).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use warren_sys::spawn::{IntoCgroup, Step};

use crate::cgroups::{CgroupSet, CgroupVersion};
use crate::error::{IoContext, Result};

use super::Plan;

/// The open files and directory a new process enters its cgroups through; built before
/// the spawn, kept until it returns.
pub struct CgroupEntry {
    /// Who, for messages: "zone 'web1'", "container 'c1'".
    who: String,
    /// v1: the `tasks` files the child writes itself into. v2 (or v1 with the self
    /// join off): the `cgroup.procs` files the parent writes the child's pid into
    /// where the clone could not place it.
    files: Vec<(PathBuf, File)>,
    /// The child writes itself into `files` (v1).
    self_join: bool,
    /// v2: the directory to clone into.
    clone_dir: Option<OwnedFd>,
}

impl CgroupEntry {
    /// Open what a sandbox's first process needs to enter `set` (`who` names the
    /// sandbox in errors).
    pub fn open(who: &str, set: &CgroupSet) -> Result<CgroupEntry> {
        let mut entry = CgroupEntry::open_for_join(who, set)?;
        entry.clone_dir = set.clone_target()?;
        Ok(entry)
    }

    /// [`CgroupEntry::open`] for a process spawned by a parent that has already joined
    /// the sandbox's namespaces (`oci exec`): never cloned into the v2 directory, since
    /// `CLONE_INTO_CGROUP` checks both cgroups against the parent's cgroup namespace,
    /// which is now the container's and does not hold the parent's own cgroup (the
    /// migration by pid checks against the namespace the file was opened in).
    pub fn open_for_join(who: &str, set: &CgroupSet) -> Result<CgroupEntry> {
        let off = std::env::var_os("WARREN_CGROUP_SELF_JOIN").is_some_and(|v| v == "off");
        CgroupEntry::open_with(who, set, !off)
    }

    /// [`CgroupEntry::open_for_join`], the child writing itself into v1's `tasks`
    /// files only when `self_join_v1`.
    fn open_with(who: &str, set: &CgroupSet, self_join_v1: bool) -> Result<CgroupEntry> {
        let self_join = set.version == CgroupVersion::V1 && self_join_v1;
        let files = if self_join {
            set.tasks_files()
        } else {
            set.procs_files()
        };
        let files = files
            .into_iter()
            .map(|f| {
                OpenOptions::new()
                    .write(true)
                    .open(&f)
                    .map(|h| (f.clone(), h))
                    .ctx(|| format!("{who}: opening {}", f.display()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(CgroupEntry {
            who: who.to_string(),
            files,
            self_join,
            clone_dir: None,
        })
    }

    /// Make `plan`'s child enter the cgroups: on v1 its first steps write it into each
    /// `tasks` file (before any namespace is joined or unshared, so a new cgroup
    /// namespace is rooted at its own cgroup); on v2 the clone targets the directory.
    pub fn prepare(&self, plan: &mut Plan) {
        if self.self_join {
            let steps = self.files.iter().map(|(path, f)| {
                (
                    Step::WriteFd {
                        fd: f.as_raw_fd(),
                        data: b"0".to_vec(),
                    },
                    format!("join cgroup {}", path.parent().unwrap_or(path).display()),
                )
            });
            let (steps, what): (Vec<_>, Vec<_>) = steps.unzip();
            plan.spawn.steps.splice(0..0, steps);
            plan.what.splice(0..0, what);
        }
        plan.spawn.into_cgroup = self
            .clone_dir
            .as_ref()
            .map(|d| IntoCgroup::new(d.as_raw_fd()));
    }

    /// In the parent's after-clone handler: move the child (host pid) where neither its
    /// own steps nor the clone did (v2 on a kernel without `CLONE_INTO_CGROUP`; v1 with
    /// the self join off).
    /// `what` names the process in the error ("its init", "the process").
    pub fn after_clone(&self, plan: &Plan, pid: i32, what: &str) -> Result<()> {
        if self.self_join || plan.spawn.placed_in_cgroup() {
            return Ok(());
        }
        let text = pid.to_string();
        for (path, mut f) in self.files.iter().map(|(p, f)| (p, f)) {
            f.write_all(text.as_bytes())
                .ctx(|| format!("{}: moving {what} into {}", self.who, path.display()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_with(steps: Vec<(Step, &str)>) -> Plan {
        let mut plan = Plan::new(0, 0);
        for (step, what) in steps {
            plan.push(step, what);
        }
        plan
    }

    /// A set of `n` directories holding the files `name`, beneath `root`.
    fn set_in(root: &std::path::Path, version: CgroupVersion, name: &str, n: usize) -> CgroupSet {
        let dirs = (0..n)
            .map(|i| {
                let d = root.join(format!("h{i}/zone"));
                std::fs::create_dir_all(&d).unwrap();
                std::fs::write(d.join(name), "").unwrap();
                (format!("c{i}"), d)
            })
            .collect();
        CgroupSet { version, dirs }
    }

    #[test]
    fn on_v1_the_child_writes_itself_into_every_tasks_file_first() {
        let t = tempfile::tempdir().unwrap();
        let set = set_in(t.path(), CgroupVersion::V1, "tasks", 3);
        let entry = CgroupEntry::open("zone 'z'", &set).unwrap();
        let mut plan = plan_with(vec![(Step::WaitParent, "wait"), (Step::Setsid, "setsid")]);
        entry.prepare(&mut plan);
        assert_eq!(plan.spawn.steps.len(), 5);
        assert_eq!(plan.what.len(), 5);
        for (i, (_, d)) in set.dirs.iter().enumerate() {
            match &plan.spawn.steps[i] {
                Step::WriteFd { fd, data } => {
                    assert_eq!(data, b"0");
                    let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
                    assert_eq!(target, d.join("tasks"));
                }
                s => panic!("step {i} is {s:?}, not the join"),
            }
            assert_eq!(plan.describe(i), format!("join cgroup {}", d.display()));
        }
        assert!(matches!(plan.spawn.steps[3], Step::WaitParent));
        assert_eq!(plan.describe(4), "setsid");
        assert!(plan.spawn.into_cgroup.is_none());
        // Nothing left for the parent: a v1 child is never migrated by pid.
        entry.after_clone(&plan, 1, "its init").unwrap();
        for (_, d) in &set.dirs {
            assert_eq!(std::fs::read_to_string(d.join("tasks")).unwrap(), "");
        }
    }

    #[test]
    fn on_v2_the_child_is_cloned_in_or_moved_by_its_parent() {
        let t = tempfile::tempdir().unwrap();
        let set = set_in(t.path(), CgroupVersion::V2, "cgroup.procs", 1);
        let entry = CgroupEntry::open("container 'c'", &set).unwrap();
        let mut plan = plan_with(vec![(Step::Setsid, "setsid")]);
        entry.prepare(&mut plan);
        assert_eq!(plan.spawn.steps.len(), 1, "no step of its own on v2");
        assert!(
            plan.spawn.into_cgroup.is_some(),
            "cloned into its directory"
        );
        // Not placed (nothing was cloned): the parent writes the pid.
        entry.after_clone(&plan, 4242, "its init").unwrap();
        let procs = set.dirs[0].1.join("cgroup.procs");
        assert_eq!(std::fs::read_to_string(&procs).unwrap(), "4242");

        // Behind an exec's joined namespaces: never cloned in, always moved.
        let exec = CgroupEntry::open_for_join("container 'c'", &set).unwrap();
        let mut plan = plan_with(Vec::new());
        exec.prepare(&mut plan);
        assert!(plan.spawn.into_cgroup.is_none());
    }

    #[test]
    fn with_the_self_join_off_a_v1_child_is_moved_by_pid() {
        let t = tempfile::tempdir().unwrap();
        let set = set_in(t.path(), CgroupVersion::V1, "cgroup.procs", 2);
        let entry = CgroupEntry::open_with("zone 'z'", &set, false).unwrap();
        let mut plan = plan_with(vec![(Step::Setsid, "setsid")]);
        entry.prepare(&mut plan);
        assert_eq!(plan.spawn.steps.len(), 1, "no step of its own");
        assert!(plan.spawn.into_cgroup.is_none());
        entry.after_clone(&plan, 77, "its init").unwrap();
        for (_, d) in &set.dirs {
            assert_eq!(
                std::fs::read_to_string(d.join("cgroup.procs")).unwrap(),
                "77"
            );
        }
    }

    #[test]
    fn a_missing_cgroup_names_the_sandbox_and_the_file() {
        let t = tempfile::tempdir().unwrap();
        let set = CgroupSet {
            version: CgroupVersion::V1,
            dirs: vec![("memory".into(), t.path().join("gone"))],
        };
        let err = CgroupEntry::open("zone 'web1'", &set)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("zone 'web1'"), "{err}");
        assert!(err.contains("gone/tasks"), "{err}");
    }
}
