//! cgroup v2: one directory per zone in the unified hierarchy, beneath the delegated
//! base warren runs in (its own cgroup, or the parent of its leaf: see [`super::delegate`]).
//!
//! # Controllers per zone
//!
//! On v2 a cgroup has the controllers its parent enables in `cgroup.subtree_control`,
//! for all its children alike: a zone placed beside one with a CPU limit would join
//! the cpu controller too (systemd has the same rule for the units of one slice; runc
//! and crun enable every controller). So zones are grouped by the controllers their
//! limits need, one *bucket* per set, and a bucket enables exactly its set:
//!
//! ```text
//! <base>/<group>/                      enables the union (cpu cpuset memory pids as used)
//!   @memory-pids/<zone>                 zones with no CPU limit: memory pids only
//!   @cpu-memory-pids/<zone>             zones with cpu.max / cpu.weight
//!   @cpu-cpuset-memory-pids/<zone>      ... and a cpuset
//! ```
//!
//! A bucket costs one cgroup per set in use (at most four), not one per zone; the
//! group keeps one directory for the agent's and the bench's group budget; a bucket
//! is removed with its last zone. Names start with `@`, which zone names cannot.

use std::path::PathBuf;

use super::{
    needed, shares_to_weight, write_file, CgroupDriver, CgroupError, CgroupSet, CgroupVersion,
    Created, Place,
};
use crate::config::Limits;

pub struct V2Driver {
    /// The unified hierarchy's root directory (its mount point).
    root: PathBuf,
    /// The delegated base: warren's own cgroup, or the parent of its leaf.
    base: PathBuf,
    group: String,
}

impl V2Driver {
    /// `root` is the hierarchy's mount point, `own` the directory of warren's cgroup.
    pub fn new(root: PathBuf, own: PathBuf, group: &str) -> V2Driver {
        V2Driver {
            root,
            base: super::delegate::base_of(&own),
            group: group.to_string(),
        }
    }

    fn read_words(&self, file: &str) -> Vec<String> {
        std::fs::read_to_string(self.base.join(file))
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }
}

/// (file, value) writes that apply `limits`, in order.
pub fn writes(limits: &Limits) -> Vec<(&'static str, String)> {
    let mut w = Vec::new();
    if let Some(n) = limits.pids_max() {
        w.push(("pids.max", crate::config::limit_text(n)));
    }
    if let Some(max) = limits.memory_max {
        w.push(("memory.max", crate::config::limit_text(max)));
    }
    if let Some(swap) = limits.memory_swap.or(limits.swap_allowance) {
        w.push(("memory.swap.max", crate::config::limit_text(swap)));
    }
    if let Some(request) = limits.memory_request {
        w.push(("memory.low", request.to_string()));
    }
    let weight = limits
        .cpu_weight
        .or(limits.cpu_shares.map(shares_to_weight));
    if let Some(wt) = weight {
        w.push(("cpu.weight", wt.to_string()));
    }
    if let Some((period, quota)) = super::cfs(limits) {
        w.push(("cpu.max", format!("{quota} {period}")));
    }
    if let Some(cs) = &limits.cpuset {
        w.push(("cpuset.cpus", cs.to_string()));
    }
    w
}

/// Enable in `dir`'s `cgroup.subtree_control` those of `wanted` it does not yet.
fn enable_missing(dir: &std::path::Path, wanted: &[&str]) -> Result<(), CgroupError> {
    let on = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
    let missing: Vec<String> = wanted
        .iter()
        .filter(|c| !on.split_whitespace().any(|x| x == **c))
        .map(|c| format!("+{c}"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    write_file(dir, "cgroup.subtree_control", &missing.join(" "))
}

/// The bucket of zones needing `controllers`: `@` and their sorted names, e.g.
/// `@cpu-memory-pids`.
pub fn bucket_name(controllers: &[&str]) -> String {
    let mut c = controllers.to_vec();
    c.sort_unstable();
    format!("@{}", c.join("-"))
}

/// Whether a directory name in a group is a bucket ([`bucket_name`]), not a zone.
pub fn is_bucket(name: &str) -> bool {
    name.strip_prefix('@').is_some_and(|rest| {
        rest.split('-')
            .all(|c| ["cpu", "cpuset", "memory", "pids"].contains(&c))
    })
}

impl CgroupDriver for V2Driver {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V2
    }

    /// What the base has to give (its `cgroup.controllers`).
    fn controllers(&self) -> Vec<String> {
        self.read_words("cgroup.controllers")
    }

    fn delegation(&self, try_it: bool) -> super::Delegation {
        super::delegate::check(&self.base, try_it)
    }

    fn parents(&self) -> Vec<(String, PathBuf)> {
        vec![(
            self.read_words("cgroup.controllers").join(","),
            self.base.join(&self.group),
        )]
    }

    fn join_controllers(
        &self,
        zone: &str,
        set: &CgroupSet,
        limits: &Limits,
    ) -> Result<CgroupSet, CgroupError> {
        let wanted = needed(limits);
        let Some((_, dir)) = set.dirs.first() else {
            return Ok(set.clone());
        };
        let have = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        if wanted
            .iter()
            .all(|c| have.split_whitespace().any(|h| h == *c))
        {
            return Ok(set.clone());
        }
        // A zone sits in the bucket of exactly its controllers (module doc): one that now
        // needs another moves to that set's bucket. The new directory is made as at
        // boot (device program included), every process of the zone is moved into it
        // (repeated: a fork during the move leaves its child behind), and the old one
        // is removed (best effort: gc collects an empty one left over).
        let created = self.create_at(
            &Place::Zone(zone.into()),
            limits,
            &super::CreateOptions::default(),
        )?;
        let Some((_, new_dir)) = created.set.dirs.first() else {
            return Ok(set.clone());
        };
        if new_dir == dir {
            return Ok(created.set);
        }
        for _ in 0..100 {
            let left = super::read_pids(&dir.join("cgroup.procs"))
                .map_err(super::io_err("reading", dir))?;
            if left.is_empty() {
                break;
            }
            for pid in left {
                match write_file(new_dir, "cgroup.procs", &pid.to_string()) {
                    Err(CgroupError::Io { source, .. })
                        if source.raw_os_error() == Some(warren_sys::libc::ESRCH) => {}
                    r => r?,
                }
            }
        }
        let old = CgroupSet {
            version: CgroupVersion::V2,
            dirs: vec![("unified".into(), dir.clone())],
        };
        let _ = old.remove(std::time::Duration::from_millis(500));
        Ok(created.set)
    }

    fn create_at(
        &self,
        place: &Place,
        limits: &Limits,
        options: &super::CreateOptions,
    ) -> Result<Created, CgroupError> {
        // Enable only what this set's limits need (memory and pids always; cpu, cpuset
        // when set), adding to what earlier sets enabled: a zone without a CPU limit in
        // a group where none has one does not join cpu, and no zone joins io, which
        // warren neither limits nor reads.
        let wanted = needed(limits);
        let mut made = Vec::new();
        let dir = match place {
            Place::Zone(zone) => {
                super::delegate::ensure(&self.base, &wanted)?;
                let group = self.base.join(&self.group);
                // The group adds this zone's controllers to what earlier zones
                // enabled; the bucket enables exactly them (see the module doc).
                let enable: Vec<String> = ["cpu", "cpuset", "memory", "pids"]
                    .iter()
                    .filter(|c| wanted.contains(c))
                    .map(|c| format!("+{c}"))
                    .collect();
                let enable = enable.join(" ");
                let bucket = group.join(bucket_name(&wanted));
                let dir = bucket.join(zone);
                // A halt of the last other zone may remove the bucket (or the group)
                // between two mkdirs: then all are made again.
                let mut attempts = 0;
                loop {
                    let made = super::make_group_and_zone(&group, &bucket, || {
                        write_file(&group, "cgroup.subtree_control", &enable)
                    })
                    .and_then(|()| {
                        super::make_group_and_zone(&bucket, &dir, || {
                            write_file(&bucket, "cgroup.subtree_control", &enable)
                        })
                    });
                    match made {
                        Err(CgroupError::Io { source, .. })
                            if source.kind() == std::io::ErrorKind::NotFound && attempts < 10 =>
                        {
                            attempts += 1
                        }
                        other => break other?,
                    }
                }
                dir
            }
            Place::FromRoot(rel) | Place::FromOwn(rel) => {
                let anchor = if matches!(place, Place::FromRoot(_)) {
                    &self.root
                } else {
                    super::delegate::ensure(&self.base, &wanted)?;
                    &self.base
                };
                let dir = super::place::make_path(anchor, rel, &mut made, |_| Ok(()))?;
                // As runc: every directory above the new one, from the anchor down,
                // enables the controllers it needs (writing only what is missing).
                let mut at = anchor.clone();
                let enabled = rel.components().try_for_each(|c| {
                    enable_missing(&at, &wanted)?;
                    at.push(c);
                    Ok(())
                });
                if let Err(e) = enabled {
                    let set = CgroupSet {
                        version: CgroupVersion::V2,
                        dirs: vec![("unified".into(), dir)],
                    };
                    let _ = super::place::remove_made(
                        &set,
                        &made,
                        std::time::Duration::from_millis(200),
                    );
                    return Err(e);
                }
                dir
            }
        };
        let set = CgroupSet {
            version: CgroupVersion::V2,
            dirs: vec![("unified".into(), dir.clone())],
        };
        let devices = options
            .devices
            .clone()
            .unwrap_or_else(super::v1::device_writes);
        let applied = writes(limits)
            .into_iter()
            .try_for_each(|(file, value)| write_file(&dir, file, &value))
            // The same device list as v1's devices cgroup, as a BPF program.
            .and_then(|()| super::devices::attach(&dir, &devices));
        if let Err(e) = applied {
            let wait = std::time::Duration::from_millis(200);
            let _ = match place {
                Place::Zone(_) => set.remove(wait),
                _ => super::place::remove_made(&set, &made, wait),
            };
            return Err(e);
        }
        Ok(Created { set, made })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::discover;
    use crate::config::CpuSet;
    use std::fs;

    /// A fake cgroupfs in a temp dir, laid out and named as the kernel does.
    #[test]
    fn creates_zone_cgroups_in_a_fake_unified_hierarchy() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("cgroup");
        let own = cg.join("user.slice/warren.scope");
        fs::create_dir_all(&own).unwrap();
        fs::write(
            own.join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        fs::write(
            own.join("cgroup.subtree_control"),
            "cpu memory pids cpuset\n",
        )
        .unwrap();
        let proc_ = tmp.path().join("proc/self");
        fs::create_dir_all(&proc_).unwrap();
        fs::write(
            proc_.join("mountinfo"),
            format!(
                "30 24 0:26 / {} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
                cg.display()
            ),
        )
        .unwrap();
        fs::write(proc_.join("cgroup"), "0::/user.slice/warren.scope\n").unwrap();

        let (driver, h) = discover::discover(&tmp.path().join("proc"), "warren-t").unwrap();
        assert_eq!(h.version, CgroupVersion::V2);
        let limits = Limits {
            max_processes: Some(20),
            memory_max: Some(64 << 20),
            memory_swap: Some(0),
            cpu_shares: Some(1024),
            cpu_max: Some(0.5),
            cpuset: Some(CpuSet(vec![0, 1])),
            ..Limits::default()
        };
        let set = driver.create("web1", &limits).unwrap();
        let dir = own.join("warren-t/@cpu-cpuset-memory-pids/web1");
        assert_eq!(set.dirs, vec![("unified".to_string(), dir.clone())]);
        let read = |f: &str| fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("pids.max"), "20");
        assert_eq!(read("memory.max"), "67108864");
        assert_eq!(read("memory.swap.max"), "0");
        assert_eq!(read("cpu.weight"), "39");
        assert_eq!(read("cpu.max"), "50000 100000");
        assert_eq!(read("cpuset.cpus"), "0-1");
        for d in ["warren-t", "warren-t/@cpu-cpuset-memory-pids"] {
            assert_eq!(
                fs::read_to_string(own.join(d).join("cgroup.subtree_control")).unwrap(),
                "+cpu +cpuset +memory +pids",
                "{d}"
            );
        }
        assert_eq!(set.procs_files(), vec![dir.join("cgroup.procs")]);

        // Readers use the v2 file names.
        fs::write(dir.join("memory.current"), "1048576\n").unwrap();
        fs::write(dir.join("cpu.stat"), "usage_usec 1500\nuser_usec 1000\n").unwrap();
        fs::write(dir.join("pids.current"), "3\n").unwrap();
        fs::write(
            dir.join("memory.events"),
            "low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\n",
        )
        .unwrap();
        assert_eq!(set.memory_bytes(), Some(1 << 20));
        assert_eq!(set.cpu_ns(), Some(1_500_000));
        assert_eq!(set.tasks(), Some(3));
        assert_eq!(set.oom_kills(), Some(1));
    }

    /// An OCI `cgroupsPath` from the root: the missing parents are made (and only
    /// they recorded), and each directory above the container enables what it needs.
    #[test]
    fn a_path_from_the_root_makes_its_parents_and_enables_controllers() {
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("cgroup");
        let own = cg.join("user.slice/warren.scope");
        fs::create_dir_all(&own).unwrap();
        fs::create_dir_all(cg.join("kubepods")).unwrap();
        fs::write(cg.join("cgroup.subtree_control"), "memory pids\n").unwrap();
        fs::write(cg.join("kubepods/cgroup.subtree_control"), "memory\n").unwrap();
        let d = V2Driver::new(cg.clone(), own, "warren-oci");
        let limits = Limits {
            max_processes: Some(5),
            ..Limits::default()
        };
        let place = Place::FromRoot("kubepods/pod1/c1".into());
        let c = d
            .create_at(&place, &limits, &super::super::CreateOptions::default())
            .unwrap();
        let leaf = cg.join("kubepods/pod1/c1");
        assert_eq!(c.set.dirs, vec![("unified".to_string(), leaf.clone())]);
        assert_eq!(c.made, vec![cg.join("kubepods/pod1"), leaf.clone()]);
        let control =
            |d: &std::path::Path| fs::read_to_string(d.join("cgroup.subtree_control")).unwrap();
        // The root had both: left as it was; the others get only what they lacked.
        assert_eq!(control(&cg), "memory pids\n");
        assert_eq!(control(&cg.join("kubepods")), "+pids");
        assert_eq!(control(&cg.join("kubepods/pod1")), "+memory +pids");
        assert_eq!(fs::read_to_string(leaf.join("pids.max")).unwrap(), "5");
    }

    /// Controllers per zone: a zone without a CPU limit lands in a bucket that
    /// enables memory and pids only, beside one with cpu.max in its own bucket.
    #[test]
    fn zones_get_only_the_controllers_their_limits_need() {
        let tmp = tempfile::tempdir().unwrap();
        let own = tmp.path().join("svc");
        fs::create_dir_all(&own).unwrap();
        fs::write(
            own.join("cgroup.controllers"),
            "cpuset cpu io memory pids
",
        )
        .unwrap();
        fs::write(
            own.join("cgroup.subtree_control"),
            "cpu memory pids
",
        )
        .unwrap();
        let d = V2Driver::new(tmp.path().to_path_buf(), own.clone(), "warren");
        let capped = Limits {
            cpu_max: Some(0.5),
            ..Limits::default()
        };
        let a = d.create("a", &capped).unwrap();
        let b = d.create("b", &Limits::default()).unwrap();
        assert_eq!(a.dirs[0].1, own.join("warren/@cpu-memory-pids/a"));
        assert_eq!(b.dirs[0].1, own.join("warren/@memory-pids/b"));
        let enabled =
            |rel: &str| fs::read_to_string(own.join(rel).join("cgroup.subtree_control")).unwrap();
        assert_eq!(enabled("warren/@cpu-memory-pids"), "+cpu +memory +pids");
        assert_eq!(enabled("warren/@memory-pids"), "+memory +pids");
        assert_eq!(
            fs::read_to_string(a.dirs[0].1.join("cpu.max")).unwrap(),
            "50000 100000"
        );
        assert!(!b.dirs[0].1.join("cpu.max").exists());
        assert!(is_bucket("@memory-pids") && is_bucket("@cpu-cpuset-memory-pids"));
        for name in ["a", "@", "@io-memory", "memory-pids", "@memory-pids-x"] {
            assert!(!is_bucket(name), "{name}");
        }
        assert_eq!(bucket_name(&["pids", "memory", "cpu"]), "@cpu-memory-pids");
    }

    #[test]
    fn refuses_undelegated_controllers() {
        let tmp = tempfile::tempdir().unwrap();
        let own = tmp.path().join("own");
        fs::create_dir_all(&own).unwrap();
        fs::write(own.join("cgroup.subtree_control"), "memory\n").unwrap();
        fs::write(own.join("cgroup.controllers"), "memory\n").unwrap();
        let d = V2Driver::new(tmp.path().to_path_buf(), own.clone(), "warren");
        let e = d.create("z", &Limits::default()).unwrap_err().to_string();
        assert!(e.contains("pids") && e.contains("Delegate=yes"), "{e}");
        assert!(!own.join("warren").exists(), "nothing created");
    }

    #[test]
    fn v2_file_values() {
        let limits = Limits {
            max_threads: Some(100),
            cpu_weight: Some(50),
            ..Limits::default()
        };
        assert_eq!(
            writes(&limits),
            vec![
                ("pids.max", "100".to_string()),
                ("cpu.weight", "50".to_string())
            ]
        );
        let limits = Limits {
            memory_max: Some(64 << 20),
            memory_request: Some(16 << 20),
            swap_allowance: Some(8 << 20),
            ..Limits::default()
        };
        assert_eq!(
            writes(&limits),
            vec![
                ("memory.max", "67108864".to_string()),
                ("memory.swap.max", "8388608".to_string()),
                ("memory.low", "16777216".to_string()),
            ]
        );
        let explicit = Limits {
            memory_swap: Some(0),
            ..limits
        };
        assert_eq!(writes(&explicit)[1], ("memory.swap.max", "0".to_string()));
    }
}
