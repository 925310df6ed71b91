//! Changing a running zone's limits, and reading the limits in force.
//!
//! The files to write come from the same pure functions as at creation
//! ([`super::v1::writes`], [`super::v2::writes`]), plus a reset to the kernel's default
//! for every zone-controlled file the new limits leave unset ([`target`], pure). They
//! are applied by [`CgroupSet::apply`], which first reads each file's value and, if any
//! write fails, writes the old values back in reverse order: a change is all or
//! nothing. A limit whose controller the zone was booted without (cpu, cpuset) needs it
//! joined first: [`super::CgroupDriver::join_controllers`].
//!
//! [`in_force`] reads the same files back, so `list -v` / `config show` can show the
//! limit the kernel enforces and where it differs from the configured one.

use std::path::PathBuf;

use serde::Serialize;

use super::{io_err, write_file, CgroupError, CgroupSet, CgroupVersion};
use crate::config::Limits;

/// One control file write: (controller, file, value).
pub type Write = (&'static str, &'static str, String);

/// What a zone-controlled file holds when no limit is set (v1, v2).
fn reset_value(version: CgroupVersion, file: &str) -> Option<&'static str> {
    Some(match (version, file) {
        (_, "pids.max") => "max",
        (CgroupVersion::V1, "memory.limit_in_bytes" | "memory.memsw.limit_in_bytes") => "-1",
        (CgroupVersion::V1, "memory.soft_limit_in_bytes") => "-1",
        (CgroupVersion::V1, "cpu.shares") => "1024",
        (CgroupVersion::V1, "cpu.cfs_quota_us") => "-1",
        (CgroupVersion::V2, "memory.max" | "memory.swap.max") => "max",
        (CgroupVersion::V2, "memory.low") => "0",
        (CgroupVersion::V2, "cpu.weight") => "100",
        (CgroupVersion::V2, "cpu.max") => "max 100000",
        _ => return None,
    })
}

/// The files a zone's config keys control, with their controller, in write order.
const V1_FILES: [(&str, &str); 6] = [
    ("pids", "pids.max"),
    ("memory", "memory.limit_in_bytes"),
    ("memory", "memory.memsw.limit_in_bytes"),
    ("memory", "memory.soft_limit_in_bytes"),
    ("cpu", "cpu.shares"),
    ("cpu", "cpu.cfs_quota_us"),
];
const V2_FILES: [(&str, &str); 7] = [
    ("pids", "pids.max"),
    ("memory", "memory.max"),
    ("memory", "memory.swap.max"),
    ("memory", "memory.low"),
    ("cpu", "cpu.weight"),
    ("cpu", "cpu.max"),
    ("cpuset", "cpuset.cpus"),
];

/// The writes that make a zone's files hold `limits` (the effective limits, defaults
/// and swap allowance applied): the creation writes, then a reset of every other
/// zone-controlled file to its default. `memsw`: v1 swap accounting is on. On v1,
/// cpuset is the caller's (it needs the parent's list, see [`CgroupSet::apply_limits`]).
pub fn target(
    version: CgroupVersion,
    limits: &Limits,
    memsw: bool,
) -> Result<Vec<Write>, CgroupError> {
    let mut w: Vec<Write> = match version {
        CgroupVersion::V1 => super::v1::writes(limits, memsw)?,
        CgroupVersion::V2 => super::v2::writes(limits)
            .into_iter()
            .map(|(file, v)| (controller_of(file), file, v))
            .collect(),
    };
    let files: &[(&str, &str)] = match version {
        CgroupVersion::V1 => &V1_FILES,
        CgroupVersion::V2 => &V2_FILES,
    };
    for (ctrl, file) in files {
        if *file == "memory.memsw.limit_in_bytes" && !memsw {
            continue;
        }
        if w.iter().any(|(_, f, _)| f == file) {
            continue;
        }
        // A v1 CFS quota without a cap is reset; the period stays as it is.
        if let Some(v) = reset_value(version, file) {
            w.push((ctrl, file, v.to_string()));
        }
    }
    Ok(w)
}

fn controller_of(file: &str) -> &'static str {
    match file.split('.').next() {
        Some("pids") => "pids",
        Some("memory") => "memory",
        Some("cpuset") => "cpuset",
        _ => "cpu",
    }
}

/// A value as the kernel would print it back, for comparison: v1's "-1" and its
/// page-rounded maximum (2^63 - 4096) are both "max"; "max 100000" is "max".
fn normal(v: &str) -> String {
    let v = v.trim();
    match v.parse::<i64>() {
        Ok(n) if !(0..(1 << 62)).contains(&n) => "max".into(),
        _ if v.starts_with("max") => "max".into(),
        _ => v.to_string(),
    }
}

/// One zone-controlled file: what the config asks for and what the kernel holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InForce {
    pub file: String,
    pub in_force: String,
    /// The configured value, present only where it differs from `in_force`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured: Option<String>,
}

/// Compare `want` (from [`target`]) with what `read` returns for each file; files that
/// cannot be read (controller not joined) are reported as "-". Pure.
pub fn compare(want: &[Write], read: impl Fn(&str, &str) -> Option<String>) -> Vec<InForce> {
    want.iter()
        .map(|(ctrl, file, value)| {
            let now = read(ctrl, file).unwrap_or_else(|| "-".into());
            let differs = normal(&now) != normal(value);
            InForce {
                file: file.to_string(),
                configured: differs.then(|| value.clone()),
                in_force: now,
            }
        })
        .collect()
}

/// The limits in force in `set` against `limits` (see [`compare`]).
pub fn in_force(set: &CgroupSet, limits: &Limits) -> Vec<InForce> {
    let memsw = set.has_memsw();
    match target(set.version, limits, memsw) {
        Ok(want) => compare(&want, |c, f| set.read(c, f)),
        Err(_) => Vec::new(),
    }
}

impl CgroupSet {
    /// v1: whether the memory cgroup accounts swap (memory.memsw.* exist).
    pub fn has_memsw(&self) -> bool {
        self.version == CgroupVersion::V1
            && self
                .dir_with("memory")
                .is_some_and(|d| d.join("memory.memsw.limit_in_bytes").exists())
    }

    /// Write `limits` into the zone's files live (see [`target`]). All or nothing: on a
    /// failure the files already written get their old values back and the error names
    /// the file. Returns the files whose value changed.
    pub fn apply_limits(&self, limits: &Limits) -> Result<Vec<String>, CgroupError> {
        let mut want = target(self.version, limits, self.has_memsw())?;
        if self.version == CgroupVersion::V1 {
            if let Some(dir) = self.dir_with("cpuset") {
                let value = match &limits.cpuset {
                    Some(cs) => cs.to_string(),
                    None => match dir.parent().map(|p| p.join("cpuset.cpus")) {
                        Some(p) => std::fs::read_to_string(&p)
                            .map_err(io_err("reading", &p))?
                            .trim()
                            .to_string(),
                        None => String::new(),
                    },
                };
                want.push(("cpuset", "cpuset.cpus", value));
            }
        }
        // Only files of controllers the zone has; a limit whose controller is missing
        // was joined by the caller first, so what is skipped here is a reset.
        let want: Vec<(PathBuf, String)> = want
            .into_iter()
            .filter_map(|(c, f, v)| {
                let d = self.dir_with(c)?;
                let p = d.join(f);
                p.exists().then_some((p, v))
            })
            .collect();
        let mut done: Vec<(PathBuf, String)> = Vec::new();
        let mut changed = Vec::new();
        let result = write_all(&want, |path, old| {
            done.push((path.to_path_buf(), old.to_string()));
        });
        match result {
            Ok(()) => {
                for (p, old) in &done {
                    let new = want.iter().find(|(w, _)| w == p).map(|(_, v)| v.as_str());
                    if new.is_some_and(|n| normal(n) != normal(old)) {
                        if let Some(f) = p.file_name() {
                            changed.push(f.to_string_lossy().into_owned());
                        }
                    }
                }
                Ok(changed)
            }
            Err(e) => {
                done.reverse();
                let _ = write_all(&done, |_, _| {});
                Err(e)
            }
        }
    }
}

/// Write each (file, value), reading the old value first (`saved` is told it); a write
/// the kernel refuses with EINVAL or EBUSY is tried again after the others, because
/// an order can matter (v1: memory.limit_in_bytes must stay below memsw's limit, so a
/// raise writes memsw first, a cut writes it last).
fn write_all(
    writes: &[(PathBuf, String)],
    mut saved: impl FnMut(&std::path::Path, &str),
) -> Result<(), CgroupError> {
    let mut pending: Vec<&(PathBuf, String)> = writes.iter().collect();
    for round in 0..3 {
        let mut again = Vec::new();
        for w in pending {
            let (path, value) = w;
            let old = std::fs::read_to_string(path).map_err(io_err("reading", path))?;
            let dir = path.parent().unwrap_or(path);
            let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
            match write_file(dir, file, value) {
                Ok(()) => saved(path, old.trim()),
                Err(CgroupError::Io { source, .. })
                    if round < 2
                        && matches!(
                            source.raw_os_error(),
                            Some(warren_sys::libc::EINVAL) | Some(warren_sys::libc::EBUSY)
                        ) =>
                {
                    again.push(w)
                }
                Err(e) => return Err(e),
            }
        }
        if again.is_empty() {
            return Ok(());
        }
        pending = again;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CpuSet;

    #[test]
    fn target_sets_what_is_asked_and_resets_the_rest_v2() {
        let l = Limits {
            memory_max: Some(128 << 20),
            cpu_max: Some(0.25),
            ..Limits::default()
        };
        let w = target(CgroupVersion::V2, &l, false).unwrap();
        let get = |f: &str| {
            w.iter()
                .find(|(_, x, _)| *x == f)
                .map(|(_, _, v)| v.as_str())
        };
        assert_eq!(get("memory.max"), Some("134217728"));
        assert_eq!(get("cpu.max"), Some("25000 100000"));
        assert_eq!(get("pids.max"), Some("max"));
        assert_eq!(get("memory.low"), Some("0"));
        assert_eq!(get("cpu.weight"), Some("100"));
        // An unset cpuset is left alone (empty means the parent's CPUs), never reset.
        assert_eq!(get("cpuset.cpus"), None);
        let l = Limits {
            cpuset: Some(CpuSet(vec![0])),
            ..Limits::default()
        };
        let w = target(CgroupVersion::V2, &l, false).unwrap();
        assert!(w.contains(&("cpuset", "cpuset.cpus", "0".into())));
    }

    #[test]
    fn target_v1_resets_memsw_only_where_it_is_accounted() {
        let l = Limits {
            max_processes: Some(20),
            ..Limits::default()
        };
        let w = target(CgroupVersion::V1, &l, false).unwrap();
        assert!(w.contains(&("pids", "pids.max", "20".into())));
        assert!(w.contains(&("memory", "memory.limit_in_bytes", "-1".into())));
        assert!(w.contains(&("cpu", "cpu.cfs_quota_us", "-1".into())));
        assert!(!w
            .iter()
            .any(|(_, f, _)| *f == "memory.memsw.limit_in_bytes"));
        let w = target(CgroupVersion::V1, &l, true).unwrap();
        assert!(w.contains(&("memory", "memory.memsw.limit_in_bytes", "-1".into())));
    }

    #[test]
    fn compare_reports_only_differences_with_the_configured_value() {
        let want: Vec<Write> = vec![
            ("memory", "memory.limit_in_bytes", "-1".into()),
            ("pids", "pids.max", "20".into()),
            ("cpu", "cpu.cfs_quota_us", "25000".into()),
        ];
        let got = compare(&want, |_, f| match f {
            "memory.limit_in_bytes" => Some("9223372036854771712".into()),
            "pids.max" => Some("30".into()),
            _ => None,
        });
        assert_eq!(
            got[0].configured, None,
            "v1's page-rounded maximum is 'max'"
        );
        assert_eq!(got[1].configured.as_deref(), Some("20"));
        assert_eq!(got[1].in_force, "30");
        assert_eq!(got[2].in_force, "-");
        assert_eq!(got[2].configured.as_deref(), Some("25000"));
    }

    #[test]
    fn apply_limits_rolls_back_what_it_wrote_when_a_write_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        std::fs::write(dir.join("pids.max"), "max\n").unwrap();
        std::fs::write(dir.join("memory.max"), "max\n").unwrap();
        // A directory where a file is expected: writing it fails with EISDIR.
        std::fs::create_dir_all(dir.join("memory.low")).unwrap();
        let set = CgroupSet {
            version: CgroupVersion::V2,
            dirs: vec![("memory,pids".into(), dir.clone())],
        };
        let l = Limits {
            max_processes: Some(7),
            memory_max: Some(1 << 20),
            memory_request: Some(1 << 19),
            ..Limits::default()
        };
        assert!(set.apply_limits(&l).is_err());
        assert_eq!(
            std::fs::read_to_string(dir.join("pids.max")).unwrap(),
            "max"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.max")).unwrap(),
            "max"
        );
        std::fs::remove_dir(dir.join("memory.low")).unwrap();
        std::fs::write(dir.join("memory.low"), "0\n").unwrap();
        let changed = set.apply_limits(&l).unwrap();
        assert_eq!(changed, ["pids.max", "memory.max", "memory.low"]);
        assert_eq!(std::fs::read_to_string(dir.join("pids.max")).unwrap(), "7");
    }

    /// v2 in a fake unified hierarchy: a zone booted with memory and pids only moves
    /// to the bucket with cpu, its processes with it, then takes its new limits;
    /// unset limits are reset.
    #[test]
    fn v2_zone_joins_cpu_live_and_takes_its_new_limits() {
        use std::fs;
        let tmp = tempfile::tempdir().unwrap();
        let cg = tmp.path().join("cgroup");
        let own = cg.join("user.slice/warren.scope");
        fs::create_dir_all(&own).unwrap();
        fs::write(
            own.join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        fs::write(own.join("cgroup.subtree_control"), "memory pids cpu\n").unwrap();
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
        let (driver, _) = super::super::discover(&tmp.path().join("proc"), "warren-t").unwrap();
        let booted = Limits {
            max_processes: Some(20),
            ..Limits::default()
        };
        let set = driver.create("web2", &booted).unwrap();
        let group = own.join("warren-t");
        let old = group.join("@memory-pids/web2");
        assert_eq!(set.dirs[0].1, old);
        // What the kernel shows: the zone's controllers, and one process in it.
        fs::write(old.join("cgroup.controllers"), "memory pids\n").unwrap();
        fs::write(old.join("cgroup.procs"), "4242\n").unwrap();
        let new = Limits {
            memory_max: Some(128 << 20),
            cpu_max: Some(0.25),
            ..Limits::default()
        };
        let joined = driver.join_controllers("web2", &set, &new).unwrap();
        let dir = group.join("@cpu-memory-pids/web2");
        assert_eq!(joined.dirs, vec![("unified".to_string(), dir.clone())]);
        assert_eq!(
            fs::read_to_string(group.join("@cpu-memory-pids/cgroup.subtree_control")).unwrap(),
            "+cpu +memory +pids"
        );
        assert_eq!(
            fs::read_to_string(dir.join("cgroup.procs")).unwrap(),
            "4242"
        );
        // Already in a bucket with cpu: nothing moves.
        fs::write(dir.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        assert_eq!(
            driver.join_controllers("web2", &joined, &new).unwrap(),
            joined
        );
        // The files the kernel shows once the controllers are on.
        for (f, v) in [
            ("pids.max", "20"),
            ("memory.swap.max", "max"),
            ("memory.low", "0"),
            ("cpu.weight", "100"),
        ] {
            fs::write(dir.join(f), v).unwrap();
        }
        let changed = joined.apply_limits(&new).unwrap();
        let read = |f: &str| fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("pids.max"), "max", "an unset limit is reset");
        assert_eq!(read("memory.max"), "134217728");
        assert_eq!(read("cpu.max"), "25000 100000");
        assert_eq!(changed, ["pids.max"], "create_at wrote the others already");
        let seen = in_force(&joined, &new);
        assert!(seen.iter().all(|f| f.configured.is_none()), "{seen:?}");
        fs::write(dir.join("memory.max"), "67108864").unwrap();
        let seen = in_force(&joined, &new);
        let drift: Vec<_> = seen.iter().filter(|f| f.configured.is_some()).collect();
        assert_eq!(drift.len(), 1);
        assert_eq!(drift[0].file, "memory.max");
    }
}
