//! Boot admission: before `warren boot` makes a cgroup, check every host limit the
//! doctor knows that one more zone could hit, and refuse naming the one that stops it,
//! with its value and the fix (rather than a late `fork: Resource temporarily
//! unavailable` that leaves the operator to guess among candidates).
//!
//! The limits: `kernel.pid_max` and `kernel.threads-max` against the host's task
//! count; warren's own cgroup (pids.max against its tasks, and on v2
//! cgroup.max.descendants); RLIMIT_NPROC, which counts the processes of the zone's
//! host uid (a user-namespaced zone runs as an unprivileged id, which the kernel does
//! not exempt); `user.max_*_namespaces` of each kind the zone gets its own of (0
//! disables it); the kernel's 65,535 memory cgroup ids; and memory (MemAvailable +
//! SwapFree against what an idle zone costs).
//! [`read`] is the reader (a handful of small files); [`admit`] the pure decision.

use std::path::{Path, PathBuf};

use super::assess::{suggest, PID_MAX_LIMIT, THREADS_MAX_LIMIT};
use super::snapshot::{read_cgroup, read_sysctl, read_tasks, CgroupLimits};
use super::{MEM_CGROUP_IDS, ZONE_BASE_MEMORY};
use crate::cgroups::CgroupVersion;
use crate::config::format_size;
use crate::error::{Error, Result};

/// A count limited by a cgroup file: `max` in `file`, `current` used now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupCount {
    pub dir: PathBuf,
    pub max: u64,
    pub current: u64,
}

/// What `warren boot` reads before admitting a zone. `None` is "no limit" or "could
/// not be read" alike: admission checks what it knows (`warren doctor` reports the rest).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdmitSnapshot {
    pub pid_max: Option<u64>,
    pub threads_max: Option<u64>,
    /// Tasks on the host now.
    pub tasks: Option<u64>,
    /// pids.max of warren's own cgroup and the tasks in it.
    pub cgroup_pids: Option<CgroupCount>,
    /// v2: cgroup.max.descendants of warren's delegated base and its nr_descendants.
    pub cgroup_descendants: Option<CgroupCount>,
    /// The soft RLIMIT_NPROC the zone's processes get, when the kernel applies it to
    /// them (`None`: unlimited, or the zone runs as host root, which is exempt).
    pub nproc: Option<u64>,
    /// MemAvailable + SwapFree, in bytes.
    pub memory_free: Option<u64>,
    /// `user.max_<kind>_namespaces` of each kind of namespace the zone gets its own of.
    pub namespaces: Vec<(String, u64)>,
    /// Memory cgroups on the host now (/proc/cgroups, dying ones included).
    pub memory_cgroups: Option<u64>,
}

/// Tasks left free for the host when admitting a zone (a shell to run `warren doctor --fix`).
pub const ADMIT_HEADROOM: u64 = 64;

/// Tasks a boot adds besides the zone's own: the throwaway that creates its user
/// namespace lives while the zone's init is cloned.
pub const BOOT_HELPER_TASKS: u64 = 1;

/// Cgroups a boot may create beneath warren's base: the zone's, and the group's.
const NEW_CGROUPS: u64 = 2;

/// Refuse to boot `zone` (which starts `zone_tasks` tasks) when a host limit leaves no
/// room for it; the error names the limit, its value and the fix.
pub fn admit(zone: &str, s: &AdmitSnapshot, zone_tasks: u64) -> Result<()> {
    let refuse = |limit: String, current: String, detail: String, remedy: String| {
        Err(Error::HostLimit {
            zone: zone.to_string(),
            limit,
            current,
            detail,
            remedy,
        })
    };
    if let Some(tasks) = s.tasks {
        let need = tasks + zone_tasks + BOOT_HELPER_TASKS + ADMIT_HEADROOM;
        for (limit, value, cap) in [
            ("kernel.pid_max", s.pid_max, PID_MAX_LIMIT),
            ("kernel.threads-max", s.threads_max, THREADS_MAX_LIMIT),
        ] {
            if let Some(current) = value.filter(|v| need > *v) {
                return refuse(
                    limit.into(),
                    current.to_string(),
                    format!(
                        "and {tasks} tasks exist (the zone needs {} more, and {ADMIT_HEADROOM} are kept for the host)",
                        zone_tasks + BOOT_HELPER_TASKS
                    ),
                    format!(
                        "raise it with 'warren doctor --fix' or sysctl -w {limit}={}",
                        suggest(need, cap)
                    ),
                );
            }
        }
    }
    let above_warren = |dir: &Path| {
        format!(
            "raise it in the cgroup above warren (warren does not write to {}), or run warren in a cgroup without the limit",
            dir.display()
        )
    };
    if let Some(c) = &s.cgroup_pids {
        let need = zone_tasks + BOOT_HELPER_TASKS;
        if c.current + need > c.max {
            return refuse(
                format!("pids.max of warren's own cgroup {}", c.dir.display()),
                c.max.to_string(),
                format!(
                    "and {} tasks are in it (the zone needs {need} more)",
                    c.current
                ),
                above_warren(&c.dir),
            );
        }
    }
    if let Some(c) = &s.cgroup_descendants {
        if c.current + NEW_CGROUPS > c.max {
            return refuse(
                format!("cgroup.max.descendants of {}", c.dir.display()),
                c.max.to_string(),
                format!(
                    "and {} cgroups are below it (a boot makes up to {NEW_CGROUPS})",
                    c.current
                ),
                above_warren(&c.dir),
            );
        }
    }
    for (key, value) in &s.namespaces {
        if *value == 0 {
            return refuse(
                key.clone(),
                "0".into(),
                "(the zone needs one namespace of this kind; 0 disables them)".into(),
                format!("raise it with 'warren doctor --fix' or sysctl -w {key}=15000"),
            );
        }
    }
    if let Some(now) = s.memory_cgroups {
        if now + NEW_CGROUPS > MEM_CGROUP_IDS {
            return refuse(
                "memory cgroup ids".into(),
                MEM_CGROUP_IDS.to_string(),
                format!("and {now} memory cgroups exist, dying ones included (a boot makes up to {NEW_CGROUPS})"),
                "the number is compiled into the kernel: delete unused zones or containers, and wait for dying cgroups to be freed as their memory is reclaimed".into(),
            );
        }
    }
    if let Some(n) = s.nproc {
        let need = zone_tasks + BOOT_HELPER_TASKS;
        if need > n {
            return refuse(
                "RLIMIT_NPROC".into(),
                n.to_string(),
                format!("(the zone's user needs {need} processes to boot, and the kernel does not exempt a user-namespaced zone's id)"),
                "raise warren's limit (ulimit -u, LimitNPROC= in its unit, /etc/security/limits.conf), or give the zone its own with 'warren config set ZONE rlimit.nproc=N'".into(),
            );
        }
    }
    if let Some(free) = s.memory_free {
        if free < ZONE_BASE_MEMORY {
            return refuse(
                "memory (MemAvailable + SwapFree)".into(),
                format_size(free),
                format!(
                    "(an idle zone needs about {})",
                    format_size(ZONE_BASE_MEMORY)
                ),
                "halt or evict zones, add swap ('warren swap enable'), or add memory".into(),
            );
        }
    }
    Ok(())
}

/// Read what [`admit`] checks: sysctls, the task count, warren's own cgroup (per
/// `version`), this process's RLIMIT_NPROC (`nproc_applies`: the zone runs as a
/// non-root host id), the namespace limits of the `namespaces` kinds the zone gets
/// (`"pid"`, `"net"`, ...), /proc/cgroups and /proc/meminfo.
pub fn read(
    proc_root: &Path,
    version: Option<CgroupVersion>,
    nproc_applies: bool,
    namespaces: &[&str],
) -> AdmitSnapshot {
    let get = |key| read_sysctl(proc_root, key).and_then(Result::ok);
    let count = |dir: &Path, max: Option<u64>, current: Option<u64>| {
        Some(CgroupCount {
            dir: dir.to_path_buf(),
            max: max?,
            current: current?,
        })
    };
    let (mut cgroup_pids, mut cgroup_descendants) = (None, None);
    match version.map(|v| read_cgroup(proc_root, Ok(v))) {
        Some(CgroupLimits::V1 {
            pids_dir,
            pids_max,
            pids_current,
        }) => {
            cgroup_pids = count(&pids_dir, pids_max.ok().flatten(), pids_current.ok());
        }
        Some(CgroupLimits::V2 {
            dir,
            max_descendants,
            nr_descendants,
            ..
        }) => {
            cgroup_descendants = count(&dir, max_descendants.ok().flatten(), nr_descendants.ok());
            // pids.max exists where the parent enabled the pids controller.
            let file = |name: &str| {
                crate::fsutil::read_text_bounded(&dir.join(name), 64)
                    .ok()
                    .and_then(|t| t.trim().parse::<u64>().ok())
            };
            cgroup_pids = count(&dir, file("pids.max"), file("pids.current"));
        }
        Some(CgroupLimits::Unknown(_)) | None => {}
    }
    let nproc = nproc_applies
        .then(|| {
            let text =
                crate::fsutil::read_text_bounded(&proc_root.join("self/limits"), 1 << 16).ok()?;
            super::snapshot::parse_limits(&text, "Max processes").map(|(soft, _)| soft)
        })
        .flatten()
        .filter(|n| *n != u64::MAX);
    let mem = crate::stats::meminfo(proc_root);
    let memory_free = match (mem.get("MemAvailable"), mem.get("SwapFree")) {
        (Some(a), Some(s)) => Some(a + s),
        (Some(a), None) => Some(*a),
        _ => None,
    };
    let namespaces = namespaces
        .iter()
        .filter_map(|kind| {
            let key = format!("user.max_{kind}_namespaces");
            let v = read_sysctl(proc_root, &key).and_then(Result::ok)?;
            Some((key, v))
        })
        .collect();
    let memory_cgroups = crate::fsutil::read_text_bounded(&proc_root.join("cgroups"), 1 << 16)
        .ok()
        .and_then(|t| super::snapshot::parse_proc_cgroups(&t, "memory"));
    AdmitSnapshot {
        namespaces,
        memory_cgroups,
        pid_max: get("kernel.pid_max"),
        threads_max: get("kernel.threads-max"),
        tasks: read_tasks(proc_root).ok(),
        cgroup_pids,
        cgroup_descendants,
        nproc,
        memory_free,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ExitCode;

    fn roomy() -> AdmitSnapshot {
        AdmitSnapshot {
            pid_max: Some(4_194_304),
            threads_max: Some(192_724),
            tasks: Some(92),
            cgroup_pids: None,
            cgroup_descendants: None,
            nproc: None,
            memory_free: Some(8 << 30),
            namespaces: vec![("user.max_pid_namespaces".into(), 15000)],
            memory_cgroups: Some(120),
        }
    }

    #[test]
    fn admission_names_the_sysctl_its_value_and_the_fix() {
        let full = AdmitSnapshot {
            pid_max: Some(32768),
            tasks: Some(32760),
            ..roomy()
        };
        let e = admit("web9", &full, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "zone 'web9': kernel.pid_max is 32768 and 32760 tasks exist (the zone needs 2 more, and 64 are kept for the host); raise it with 'warren doctor --fix' or sysctl -w kernel.pid_max=65536"
        );
        assert_eq!(e.exit_code(), ExitCode::Unsupported);
        let threads = AdmitSnapshot {
            threads_max: Some(1000),
            tasks: Some(990),
            ..roomy()
        };
        let e = admit("a", &threads, 2).unwrap_err().to_string();
        assert!(
            e.contains("kernel.threads-max is 1000 and 990 tasks exist"),
            "{e}"
        );
        // Room enough, or nothing known: admitted.
        admit("a", &roomy(), 1).unwrap();
        admit("a", &AdmitSnapshot::default(), 1).unwrap();
        // The headroom: exactly at the edge is admitted, one more task is not.
        let edge = AdmitSnapshot {
            pid_max: Some(1000),
            threads_max: None,
            tasks: Some(1000 - ADMIT_HEADROOM - 1 - BOOT_HELPER_TASKS),
            ..roomy()
        };
        admit("a", &edge, 1).unwrap();
        assert!(admit("a", &edge, 2).is_err());
    }

    #[test]
    fn admission_names_warrens_own_cgroup_pids_max() {
        let s = AdmitSnapshot {
            cgroup_pids: Some(CgroupCount {
                dir: "/sys/fs/cgroup/pids/box".into(),
                max: 3,
                current: 1,
            }),
            ..roomy()
        };
        // Init + the user-namespace helper: 1 + 2 = 3 fits; one service more does not.
        admit("a", &s, 1).unwrap();
        let e = admit("a", &s, 2).unwrap_err();
        assert_eq!(e.exit_code(), ExitCode::Unsupported);
        assert_eq!(
            e.to_string(),
            "zone 'a': pids.max of warren's own cgroup /sys/fs/cgroup/pids/box is 3 and 1 tasks are in it (the zone needs 3 more); raise it in the cgroup above warren (warren does not write to /sys/fs/cgroup/pids/box), or run warren in a cgroup without the limit"
        );
    }

    #[test]
    fn admission_names_cgroup_descendants_rlimit_nproc_and_memory() {
        let desc = AdmitSnapshot {
            cgroup_descendants: Some(CgroupCount {
                dir: "/sys/fs/cgroup/box".into(),
                max: 10,
                current: 9,
            }),
            ..roomy()
        };
        let e = admit("a", &desc, 1).unwrap_err().to_string();
        assert!(
            e.contains("cgroup.max.descendants of /sys/fs/cgroup/box is 10 and 9 cgroups"),
            "{e}"
        );
        let nproc = AdmitSnapshot {
            nproc: Some(1),
            ..roomy()
        };
        let e = admit("a", &nproc, 1).unwrap_err().to_string();
        assert!(e.contains("RLIMIT_NPROC is 1"), "{e}");
        assert!(e.contains("rlimit.nproc"), "{e}");
        let mem = AdmitSnapshot {
            memory_free: Some(100 << 10),
            ..roomy()
        };
        let e = admit("a", &mem, 1).unwrap_err().to_string();
        assert!(e.contains("memory (MemAvailable + SwapFree) is"), "{e}");
        let ns = AdmitSnapshot {
            namespaces: vec![
                ("user.max_pid_namespaces".into(), 15000),
                ("user.max_user_namespaces".into(), 0),
            ],
            ..roomy()
        };
        let e = admit("a", &ns, 1).unwrap_err().to_string();
        assert_eq!(
            e,
            "zone 'a': user.max_user_namespaces is 0 (the zone needs one namespace of this kind; 0 disables them); raise it with 'warren doctor --fix' or sysctl -w user.max_user_namespaces=15000"
        );
        let ids = AdmitSnapshot {
            memory_cgroups: Some(MEM_CGROUP_IDS - 1),
            ..roomy()
        };
        let e = admit("a", &ids, 1).unwrap_err().to_string();
        assert!(
            e.contains("memory cgroup ids is 65535 and 65534 memory cgroups exist"),
            "{e}"
        );
    }
}
