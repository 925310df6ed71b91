//! cgroup v1: one directory per hierarchy (memory, pids, cpu, cpuacct, cpuset).

use std::path::PathBuf;

use super::{
    io_err, weight_to_shares, write_file, CgroupDriver, CgroupError, CgroupSet, CgroupVersion,
    CreateOptions, Created, Place,
};
use crate::config::Limits;

/// Controllers every zone gets (limits and accounting of memory, tasks and CPU time;
/// `devices` for the device allowlist where the hierarchy is mounted).
/// `cpu` and `cpuset` cost a cgroup each and are added only when a limit needs them.
const ALWAYS: [&str; 4] = ["memory", "pids", "cpuacct", "devices"];

pub struct V1Driver {
    /// (controllers of the hierarchy, warren's own cgroup directory in it).
    hierarchies: Vec<(Vec<String>, PathBuf)>,
    /// The root directory (mount point) of each of `hierarchies`, in the same order.
    roots: Vec<PathBuf>,
    group: String,
}

impl V1Driver {
    /// `hierarchies`: (controllers, root directory, warren's own directory) of each.
    pub fn new(hierarchies: Vec<(Vec<String>, PathBuf, PathBuf)>, group: &str) -> V1Driver {
        let roots = hierarchies.iter().map(|(_, r, _)| r.clone()).collect();
        V1Driver {
            hierarchies: hierarchies.into_iter().map(|(c, _, o)| (c, o)).collect(),
            roots,
            group: group.to_string(),
        }
    }

    fn has(&self, controller: &str) -> bool {
        self.hierarchies
            .iter()
            .any(|(c, _)| c.iter().any(|x| x == controller))
    }
}

/// (controller, file, value) writes that apply `limits`, in order. cpuset is handled by
/// the driver because its files must be filled before anything else works.
pub fn writes(
    limits: &Limits,
    has_memsw: bool,
) -> Result<Vec<(&'static str, &'static str, String)>, CgroupError> {
    // `max` / `unlimited` (config::UNLIMITED): "max" for pids, -1 for memory files.
    let mem = |n: u64| {
        if n == crate::config::UNLIMITED {
            "-1".to_string()
        } else {
            n.to_string()
        }
    };
    let memsw = |max: u64, swap: u64| mem(max.saturating_add(swap));
    let mut w = Vec::new();
    if let Some(n) = limits.pids_max() {
        w.push(("pids", "pids.max", crate::config::limit_text(n)));
    }
    if let Some(max) = limits.memory_max {
        w.push(("memory", "memory.limit_in_bytes", mem(max)));
        if let Some(swap) = limits.memory_swap {
            if !has_memsw {
                return Err(CgroupError::MissingController {
                    controller: "memory swap accounting (memory.memsw.*)".into(),
                    hint: "boot the kernel with swapaccount=1, or unset memory.swap".into(),
                });
            }
            w.push(("memory", "memory.memsw.limit_in_bytes", memsw(max, swap)));
        } else if let (Some(swap), true) = (limits.swap_allowance, has_memsw) {
            // Derived from memory.request: applied where the kernel accounts swap,
            // silently skipped where it does not (the zone did not ask for it).
            w.push(("memory", "memory.memsw.limit_in_bytes", memsw(max, swap)));
        }
    }
    if let Some(request) = limits.memory_request {
        w.push(("memory", "memory.soft_limit_in_bytes", request.to_string()));
    }
    let shares = limits
        .cpu_shares
        .or(limits.cpu_weight.map(weight_to_shares));
    if let Some(s) = shares {
        w.push(("cpu", "cpu.shares", s.to_string()));
    }
    if let Some((period, quota)) = super::cfs(limits) {
        w.push(("cpu", "cpu.cfs_period_us", period.to_string()));
        w.push(("cpu", "cpu.cfs_quota_us", quota.to_string()));
    }
    if let Some(s) = limits.memory_swappiness {
        w.push(("memory", "memory.swappiness", s.to_string()));
    }
    if limits.oom_kill_disable {
        w.push(("memory", "memory.oom_control", "1".to_string()));
    }
    Ok(w)
}

impl CgroupDriver for V1Driver {
    fn version(&self) -> CgroupVersion {
        CgroupVersion::V1
    }

    fn controllers(&self) -> Vec<String> {
        self.hierarchies
            .iter()
            .flat_map(|(c, _)| c.clone())
            .collect()
    }

    fn delegation(&self, try_it: bool) -> super::Delegation {
        // v1 has no "no internal processes" rule: groups are made beneath warren's own
        // cgroup in each hierarchy; what matters is that they may be made there.
        let base = self
            .hierarchies
            .iter()
            .find(|(c, _)| c.iter().any(|x| x == "memory"))
            .or(self.hierarchies.first())
            .map(|(_, d)| d.clone())
            .unwrap_or_default();
        let writable = std::fs::metadata(&base).is_ok_and(|m| m.is_dir())
            && (!try_it || {
                let probe = base.join(format!("warren-delegation-{}", warren_sys::getpid()));
                let made = std::fs::create_dir(&probe).is_ok();
                let _ = std::fs::remove_dir(&probe);
                made
            });
        super::Delegation {
            ok: writable,
            granted: if writable {
                super::delegate::REQUIRED.len()
            } else {
                0
            },
            summary: if writable {
                format!(
                    "v1: zone groups are made beneath warren's own cgroup in each hierarchy ({}{})",
                    base.display(),
                    if try_it { ", tried" } else { "" }
                )
            } else {
                format!("v1: cannot create cgroups beneath {}", base.display())
            },
            fix: (!writable).then(|| "run warren as root".to_string()),
            base,
        }
    }

    fn parents(&self) -> Vec<(String, PathBuf)> {
        self.hierarchies
            .iter()
            .map(|(c, d)| (c.join(","), d.join(&self.group)))
            .collect()
    }

    fn create_at(
        &self,
        place: &Place,
        limits: &Limits,
        options: &CreateOptions,
    ) -> Result<Created, CgroupError> {
        for c in ["memory", "pids"] {
            if !self.has(c) {
                return Err(CgroupError::MissingController {
                    controller: c.into(),
                    hint: format!("mount the v1 {c} hierarchy under /sys/fs/cgroup"),
                });
            }
        }
        let needs = super::needed(limits);
        if needs.contains(&"cpu") && !self.has("cpu") {
            return Err(CgroupError::MissingController {
                controller: "cpu".into(),
                hint: "unset cpu.shares / cpu.weight / cpu.max or mount the v1 cpu hierarchy"
                    .into(),
            });
        }
        if needs.contains(&"cpuset") && !self.has("cpuset") {
            return Err(CgroupError::MissingController {
                controller: "cpuset".into(),
                hint: "unset cpuset or mount the v1 cpuset hierarchy".into(),
            });
        }
        let mut set = CgroupSet {
            version: CgroupVersion::V1,
            dirs: Vec::new(),
        };
        let mut made = Vec::new();
        let result = (|| {
            for ((ctrls, own), root) in self.hierarchies.iter().zip(&self.roots) {
                let is_cpuset = ctrls.iter().any(|c| c == "cpuset");
                let wanted = ctrls.iter().any(|c| ALWAYS.contains(&c.as_str()))
                    || ctrls.iter().any(|c| options.extra.contains(c))
                    || (is_cpuset && needs.contains(&"cpuset"))
                    || (needs.contains(&"cpu") && ctrls.iter().any(|c| c == "cpu"));
                if !wanted {
                    continue;
                }
                let dir = match place {
                    Place::Zone(zone) => {
                        let parent = own.join(&self.group);
                        let dir = parent.join(zone);
                        super::make_group_and_zone(&parent, &dir, || {
                            if is_cpuset {
                                inherit_cpuset(own, &parent)?;
                            }
                            Ok(())
                        })?;
                        dir
                    }
                    Place::FromRoot(rel) | Place::FromOwn(rel) => {
                        let anchor = if matches!(place, Place::FromRoot(_)) {
                            root
                        } else {
                            own
                        };
                        // Each new cpuset directory gets its parent's CPUs and nodes.
                        super::place::make_path(anchor, rel, &mut made, |d| match d.parent() {
                            Some(p) if is_cpuset => inherit_cpuset(p, d),
                            _ => Ok(()),
                        })?
                    }
                };
                set.dirs.push((ctrls.join(","), dir.clone()));
                if is_cpuset {
                    if let Some(parent) = dir.parent() {
                        inherit_cpuset(parent, &dir)?;
                    }
                    if let Some(cs) = &limits.cpuset {
                        write_file(&dir, "cpuset.cpus", &cs.to_string())?;
                    }
                }
            }
            let memsw = set.dirs.iter().any(|(c, d)| {
                c.contains("memory") && d.join("memory.memsw.limit_in_bytes").exists()
            });
            if let Some((_, dir)) = set
                .dirs
                .iter()
                .find(|(c, _)| c.split(',').any(|x| x == "devices"))
            {
                let list = options.devices.clone().unwrap_or_else(device_writes);
                for (file, value) in list {
                    write_file(dir, file, &value)?;
                }
            }
            for (ctrl, file, value) in writes(limits, memsw)? {
                let (_, dir) = set
                    .dirs
                    .iter()
                    .find(|(c, _)| c.split(',').any(|x| x == ctrl))
                    .expect("checked above that the controller is mounted");
                write_file(dir, file, &value)?;
            }
            Ok(())
        })();
        match result {
            Ok(()) => Ok(Created { set, made }),
            Err(e) => {
                let wait = std::time::Duration::from_millis(200);
                let _ = match place {
                    Place::Zone(_) => set.remove(wait),
                    _ => super::place::remove_made(&set, &made, wait),
                };
                Err(e)
            }
        }
    }

    fn join_controllers(
        &self,
        zone: &str,
        set: &CgroupSet,
        limits: &Limits,
    ) -> Result<CgroupSet, CgroupError> {
        let mut out = set.clone();
        // memory and pids are joined at creation: found in `out`, skipped.
        for c in super::needed(limits) {
            if out.dir_with(c).is_some() {
                continue;
            }
            let Some((ctrls, own)) = self
                .hierarchies
                .iter()
                .find(|(cs, _)| cs.iter().any(|x| x == c))
            else {
                return Err(CgroupError::MissingController {
                    controller: c.into(),
                    hint: format!("unset the {c} limit or mount the v1 {c} hierarchy"),
                });
            };
            let parent = own.join(&self.group);
            let dir = parent.join(zone);
            let is_cpuset = c == "cpuset";
            super::make_group_and_zone(&parent, &dir, || {
                if is_cpuset {
                    inherit_cpuset(own, &parent)?;
                }
                Ok(())
            })?;
            if is_cpuset {
                inherit_cpuset(&parent, &dir)?;
            }
            out.dirs.push((ctrls.join(","), dir.clone()));
            super::move_all(set, &dir)?;
        }
        Ok(out)
    }

    fn join_freezer(&self, zone: &str, set: &CgroupSet) -> Result<CgroupSet, CgroupError> {
        let Some((ctrls, own)) = self
            .hierarchies
            .iter()
            .find(|(cs, _)| cs.iter().any(|x| x == "freezer"))
        else {
            return Err(CgroupError::MissingController {
                controller: "freezer".into(),
                hint: "mount the v1 freezer hierarchy under /sys/fs/cgroup to suspend zones".into(),
            });
        };
        super::freeze::join_v1(zone, set, &ctrls.join(","), &own.join(&self.group))
    }
}

/// (file, value) writes of the zone's `devices` cgroup, in order: deny everything,
/// then allow only the nodes warren creates in the zone's /dev (and its ptys).
pub fn device_writes() -> Vec<(&'static str, String)> {
    std::iter::once(("devices.deny", "a".to_string()))
        .chain(
            crate::isolation::devices::v1_lines()
                .into_iter()
                .map(|a| ("devices.allow", a)),
        )
        .collect()
}

/// A new v1 cpuset cgroup starts with no CPUs and no memory nodes; copy the parent's.
fn inherit_cpuset(from: &std::path::Path, to: &std::path::Path) -> Result<(), CgroupError> {
    for file in ["cpuset.mems", "cpuset.cpus"] {
        let current = std::fs::read_to_string(to.join(file)).unwrap_or_default();
        if current.trim().is_empty() {
            let p = from.join(file);
            let v = std::fs::read_to_string(&p).map_err(io_err("reading", &p))?;
            write_file(to, file, v.trim())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CpuSet;

    #[test]
    fn devices_deny_all_then_allow_warrens_nodes() {
        let w = device_writes();
        assert_eq!(w[0], ("devices.deny", "a".to_string()));
        let allowed: Vec<&str> = w[1..]
            .iter()
            .inspect(|(f, _)| assert_eq!(*f, "devices.allow"))
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(
            allowed,
            [
                "c 1:3 rwm",
                "c 1:5 rwm",
                "c 1:7 rwm",
                "c 1:8 rwm",
                "c 1:9 rwm",
                "c 5:0 rwm",
                "c 5:1 rwm",
                "c 5:2 rwm",
                "c 136:* rwm"
            ]
        );
        // No block device, no wildcard major.
        assert!(allowed
            .iter()
            .all(|a| a.starts_with("c ") && !a.contains("*:")));
    }

    /// An OCI `cgroupsPath` beneath warren's own cgroup: made in each hierarchy the
    /// container joins, each new cpuset directory filled from its parent, and only
    /// the directories made recorded.
    #[test]
    fn a_path_beneath_our_own_is_made_in_every_hierarchy() {
        let tmp = tempfile::tempdir().unwrap();
        let h = |c: &str| {
            let root = tmp.path().join(c);
            let own = root.join("me");
            std::fs::create_dir_all(own.join("pods")).unwrap();
            for f in ["cpuset.cpus", "cpuset.mems"] {
                std::fs::write(own.join(f), "0-1\n").unwrap();
                std::fs::write(own.join("pods").join(f), "0-1\n").unwrap();
            }
            (vec![c.to_string()], root, own)
        };
        let d = V1Driver::new(vec![h("memory"), h("pids"), h("cpuset"), h("net_cls")], "g");
        let limits = Limits {
            cpuset: Some(CpuSet(vec![1])),
            ..Limits::default()
        };
        let c = d
            .create_at(
                &Place::FromOwn("pods/p1/c1".into()),
                &limits,
                &CreateOptions::default(),
            )
            .unwrap();
        let dirs: Vec<_> = c
            .set
            .dirs
            .iter()
            .map(|(c, d)| (c.as_str(), d.clone()))
            .collect();
        let at = |c: &str, p: &str| tmp.path().join(c).join("me").join(p);
        assert_eq!(
            dirs,
            [
                ("memory", at("memory", "pods/p1/c1")),
                ("pids", at("pids", "pods/p1/c1")),
                ("cpuset", at("cpuset", "pods/p1/c1")),
            ]
        );
        assert_eq!(
            c.made.len(),
            6,
            "p1 and c1 in three hierarchies: {:?}",
            c.made
        );
        assert!(!c.made.contains(&at("memory", "pods")));
        let read = |p: &str, f: &str| std::fs::read_to_string(at("cpuset", p).join(f)).unwrap();
        assert_eq!(read("pods/p1", "cpuset.mems").trim(), "0-1");
        assert_eq!(read("pods/p1/c1", "cpuset.cpus"), "1");
        assert!(!tmp.path().join("net_cls/me/pods/p1").exists());
    }

    #[test]
    fn v1_file_values() {
        let limits = Limits {
            max_processes: Some(20),
            memory_max: Some(64 << 20),
            memory_swap: Some(32 << 20),
            cpu_weight: Some(100),
            cpu_max: Some(0.5),
            cpuset: Some(CpuSet(vec![0])),
            ..Limits::default()
        };
        let w = writes(&limits, true).unwrap();
        assert_eq!(
            w,
            vec![
                ("pids", "pids.max", "20".to_string()),
                ("memory", "memory.limit_in_bytes", "67108864".to_string()),
                (
                    "memory",
                    "memory.memsw.limit_in_bytes",
                    "100663296".to_string()
                ),
                ("cpu", "cpu.shares", "2597".to_string()),
                ("cpu", "cpu.cfs_period_us", "100000".to_string()),
                ("cpu", "cpu.cfs_quota_us", "50000".to_string()),
            ]
        );
        let e = writes(&limits, false).unwrap_err().to_string();
        assert!(e.contains("swapaccount=1"), "{e}");
        assert!(writes(&Limits::default(), false).unwrap().is_empty());
        // memory.request: the soft limit, and its swap allowance where memsw exists.
        let limits = Limits {
            memory_max: Some(64 << 20),
            memory_request: Some(16 << 20),
            swap_allowance: Some(8 << 20),
            ..Limits::default()
        };
        assert_eq!(
            writes(&limits, true).unwrap(),
            vec![
                ("memory", "memory.limit_in_bytes", "67108864".to_string()),
                (
                    "memory",
                    "memory.memsw.limit_in_bytes",
                    "75497472".to_string()
                ),
                (
                    "memory",
                    "memory.soft_limit_in_bytes",
                    "16777216".to_string()
                ),
            ]
        );
        assert_eq!(
            writes(&limits, false).unwrap(),
            vec![
                ("memory", "memory.limit_in_bytes", "67108864".to_string()),
                (
                    "memory",
                    "memory.soft_limit_in_bytes",
                    "16777216".to_string()
                ),
            ]
        );
    }
}
