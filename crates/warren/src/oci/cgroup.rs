//! Where an OCI container's cgroups go and what goes into them.
//!
//! `linux.cgroupsPath` is read as the runtime spec and runc read it ([`place`]): an
//! absolute path names a cgroup from the root of each hierarchy (v1: per controller;
//! v2: the unified one), a relative one a cgroup beneath the runtime's own, and no
//! path means `<own cgroup>/<id>`. The path is kept as given (cleaned as runc cleans
//! it: `.` and `..` resolved lexically, never above its anchor), and its missing
//! directories are made on the way down. The systemd form `slice:prefix:name`
//! (`--systemd-cgroup`) becomes the cgroupfs path systemd would use, without asking
//! systemd for a unit: the slice expanded (`a-b.slice` is `/a.slice/a-b.slice`, an
//! empty slice is `system.slice`) and `prefix-name.scope` in it.
//!
//! **Nesting** ([`NEST_FLAG`], [`NEST_ENV`]) is for sandboxed hosts where a process
//! may only make cgroups beneath its own (such as the one warren is developed on):
//! every container's cgroup then goes to `<own cgroup>/warren-oci/<cgroupsPath>`,
//! the path still kept as given below that group.
//!
//! What a create made is recorded with the container ([`Created`]: the set and the
//! directories made), so later commands, run from other cgroups, find the cgroups and
//! `delete` removes exactly the directories made (in nesting, the whole `warren-oci`
//! subtree is warren's, so every directory of it on the way is taken when empty).

use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_spec::runtime::{LinuxDeviceCgroup, LinuxDeviceType, LinuxResources};

use crate::cgroups::{self, CgroupSet, CgroupVersion, CreateOptions, Created, Place};
use crate::config::{CpuSet, Limits};
use crate::error::{Error, IoContext, Result};
use crate::sandbox::PlanError;

mod path;

pub use path::{place, GROUP, NEST_ENV, NEST_FLAG};

/// The runtime's own cgroup path (the memory hierarchy's on v1, else the v2 one).
pub fn own_path(proc_root: &Path) -> String {
    let text = std::fs::read_to_string(proc_root.join("self/cgroup")).unwrap_or_default();
    let lines = cgroups::parse_proc_cgroup(&text);
    lines
        .iter()
        .find(|(c, _)| c.iter().any(|x| x == "memory"))
        .or_else(|| lines.iter().find(|(c, _)| c.is_empty()))
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| "/".into())
}

/// Limits from `linux.resources` (pure). Swap in OCI is memory+swap; warren's
/// `memory_swap` is the swap on top. `memsw` says whether the host accounts swap.
pub fn limits(
    r: &LinuxResources,
    memsw: bool,
) -> std::result::Result<(Limits, Vec<String>), PlanError> {
    let mut l = Limits::default();
    let mut notes = Vec::new();
    // -1 is "unlimited" in the runtime spec; below it is no value at all (runc
    // refuses it too).
    let below_minus_one = |field: &str, v: Option<i64>| match v {
        Some(v) if v < -1 => Err(PlanError::field(
            format!("linux.resources.{field}"),
            format!("{v} is negative; give a limit in its unit, or -1 (or leave it out) for none"),
        )),
        _ => Ok(()),
    };
    if let Some(m) = r.memory() {
        below_minus_one("memory.limit", m.limit())?;
        below_minus_one("memory.reservation", m.reservation())?;
        below_minus_one("memory.swap", m.swap())?;
    }
    if let Some(p) = r.pids() {
        below_minus_one("pids.limit", Some(p.limit()))?;
    }
    if let Some(c) = r.cpu() {
        below_minus_one("cpu.quota", c.quota())?;
    }
    if let Some(m) = r.memory() {
        if let Some(limit) = m.limit().filter(|v| *v > 0) {
            l.memory_max = Some(limit as u64);
            match m.swap() {
                Some(swap) if swap > 0 && swap >= limit => {
                    if memsw {
                        l.memory_swap = Some((swap - limit) as u64);
                    } else {
                        notes.push("linux.resources.memory.swap ignored: this kernel does not account swap per cgroup (boot with swapaccount=1)".into());
                    }
                }
                Some(swap) if swap > 0 => {
                    return Err(PlanError::field(
                        "linux.resources.memory.swap",
                        format!("{swap} is below memory.limit {limit}; it is memory+swap and must be at least the limit (or -1)"),
                    ))
                }
                _ => {}
            }
        }
        if let Some(res) = m.reservation().filter(|v| *v > 0) {
            l.memory_request = Some(res as u64);
        }
        if let Some(sw) = m.swappiness() {
            if sw > 100 {
                return Err(PlanError::field(
                    "linux.resources.memory.swappiness",
                    format!("{sw}: expected 0-100"),
                ));
            }
            l.memory_swappiness = Some(sw);
        }
        l.oom_kill_disable = m.disable_oom_killer().unwrap_or(false);
        if m.kernel().is_some_and(|k| k > 0) || m.kernel_tcp().is_some_and(|k| k > 0) {
            return Err(PlanError::field("linux.resources.memory.kernel / kernelTCP", "kernel memory limits are deprecated and not supported by warren (as runc); remove them"));
        }
    }
    let non_empty = |v: &Option<Vec<_>>| v.as_ref().is_some_and(|v: &Vec<_>| !v.is_empty());
    if r.block_io().as_ref().is_some_and(|b| {
        b.weight().is_some()
            || b.leaf_weight().is_some()
            || non_empty(
                &b.weight_device()
                    .clone()
                    .map(|v| v.into_iter().map(|_| ()).collect()),
            )
            || non_empty(
                &b.throttle_read_bps_device()
                    .clone()
                    .map(|v| v.into_iter().map(|_| ()).collect()),
            )
            || non_empty(
                &b.throttle_write_bps_device()
                    .clone()
                    .map(|v| v.into_iter().map(|_| ()).collect()),
            )
            || non_empty(
                &b.throttle_read_iops_device()
                    .clone()
                    .map(|v| v.into_iter().map(|_| ()).collect()),
            )
            || non_empty(
                &b.throttle_write_iops_device()
                    .clone()
                    .map(|v| v.into_iter().map(|_| ()).collect()),
            )
    }) {
        return Err(PlanError::field(
            "linux.resources.blockIO",
            "not supported by warren yet (no io/blkio controller support); remove it",
        ));
    }
    if r.network().as_ref().is_some_and(|n| {
        n.class_id().is_some() || n.priorities().as_ref().is_some_and(|p| !p.is_empty())
    }) {
        return Err(PlanError::field(
            "linux.resources.network (classID, priorities)",
            "not supported by warren (no net_cls/net_prio support); remove it",
        ));
    }
    if let Some(h) = r.hugepage_limits().as_ref().filter(|h| !h.is_empty()) {
        // Zero limits only forbid huge pages; a host that has none configured keeps
        // that promise without the hugetlb controller (as kubelet sends them).
        let none_configured = ["nr_hugepages", "nr_overcommit_hugepages"].iter().all(|f| {
            std::fs::read_to_string(Path::new("/proc/sys/vm").join(f))
                .is_ok_and(|v| v.trim() == "0")
        });
        if h.iter().any(|x| x.limit() > 0) || !none_configured {
            return Err(PlanError::field("linux.resources.hugepageLimits", "warren does not manage the hugetlb controller; remove them (limits of 0 are accepted on hosts without huge pages)"));
        }
        notes.push("linux.resources.hugepageLimits of 0 kept: this host has no huge pages".into());
    }
    if let Some(p) = r.pids() {
        if let Some(n) = Some(p.limit()).filter(|n| *n > 0) {
            l.max_processes = Some(n as u64);
        }
    }
    if let Some(c) = r.cpu() {
        if let Some(s) = c.shares().filter(|s| *s > 0) {
            l.cpu_shares = Some(s);
        }
        if let Some(q) = c.quota().filter(|q| *q > 0) {
            // The period as given (runc writes it as is), the quota over it.
            let period = c
                .period()
                .filter(|p| *p > 0)
                .unwrap_or(crate::cgroups::CPU_PERIOD_US);
            l.cpu_max = Some(q as f64 / period as f64);
            l.cpu_period_us = Some(period);
        }
        if let Some(cpus) = c.cpus().as_deref().filter(|s| !s.is_empty()) {
            let list = crate::config::parse_cpu_list(cpus).ok_or_else(|| {
                PlanError::field(
                    "linux.resources.cpu.cpus",
                    format!("{cpus:?}: expected a CPU list such as \"0-1\""),
                )
            })?;
            l.cpuset = Some(CpuSet(list));
        }
    }
    Ok((l, notes))
}

/// v1 `devices` cgroup writes from `linux.resources.devices`, in order, then what
/// every container gets as runc grants it: mknod of any node (the mknod still needs
/// CAP_MKNOD) and use of the runtime-spec's default devices and the ptys (pure).
pub fn device_writes(rules: &[LinuxDeviceCgroup]) -> Vec<(&'static str, String)> {
    let defaults = ["c *:* m".to_string(), "b *:* m".to_string()]
        .into_iter()
        .chain(crate::isolation::devices::v1_lines())
        .map(|l| ("devices.allow", l));
    // No rules at all: deny what the defaults do not allow, as runc does.
    let deny_all = rules.is_empty().then(|| ("devices.deny", "a".to_string()));
    deny_all
        .into_iter()
        .chain(rules.iter().map(|d| {
            let kind = match d.typ() {
                Some(LinuxDeviceType::C) | Some(LinuxDeviceType::U) => "c",
                Some(LinuxDeviceType::B) => "b",
                Some(LinuxDeviceType::P) => "p",
                Some(LinuxDeviceType::A) | None => "a",
            };
            let num = |n: Option<i64>| n.map_or("*".to_string(), |n| n.to_string());
            let access = d.access().clone().unwrap_or_else(|| "rwm".into());
            let line = if kind == "a" {
                "a".to_string()
            } else {
                format!("{kind} {}:{} {access}", num(d.major()), num(d.minor()))
            };
            (
                if d.allow() {
                    "devices.allow"
                } else {
                    "devices.deny"
                },
                line,
            )
        }))
        .chain(defaults)
        .collect()
}

/// Create the container's cgroups at `place` (see [`place`]). With `nest`, every
/// directory of the nesting group on the way to the container's is recorded as made,
/// so that the last container to leave takes the group with it.
pub fn create(
    place: &Place,
    nest: bool,
    limits: &Limits,
    devices: Option<Vec<(&'static str, String)>>,
    proc_root: &Path,
) -> Result<Created> {
    let (driver, _) = cgroups::discover(proc_root, GROUP)?;
    if driver.version() == CgroupVersion::V2 {
        if limits.memory_swappiness.is_some() {
            return Err(Error::Unsupported("linux.resources.memory.swappiness: cgroup v2 has no per-cgroup swappiness; remove it".into()));
        }
        if limits.oom_kill_disable {
            return Err(Error::Unsupported("linux.resources.memory.disableOOMKiller: cgroup v2 cannot disable the OOM killer per cgroup; remove it".into()));
        }
    }
    let options = CreateOptions {
        extra: vec!["freezer".into()],
        devices,
    };
    let mut created = driver.create_at(place, limits, &options)?;
    if nest {
        let depth = place.path().map_or(0, |p| p.components().count());
        let mut shared: Vec<PathBuf> = created
            .set
            .dirs
            .iter()
            .flat_map(|(_, d)| d.ancestors().take(depth).map(Path::to_path_buf))
            .collect();
        shared.retain(|d| !created.made.contains(d));
        shared.sort();
        shared.dedup();
        created.made.extend(shared);
    }
    Ok(created)
}

/// Kill what is left in a container's cgroups and remove what its create made
/// (`made`; `None` for a record written before it was kept: the set and its parent
/// when empty, as then).
pub fn destroy(set: &CgroupSet, made: Option<&[PathBuf]>) -> Result<()> {
    set.kill_all(Duration::from_secs(10))?;
    match made {
        Some(made) => cgroups::place::remove_made(set, made, Duration::from_secs(5))?,
        None => set.remove(Duration::from_secs(5))?,
    }
    Ok(())
}

/// Whether the host accounts swap per cgroup (v1 memsw files, or v2).
pub fn host_has_memsw() -> bool {
    Path::new("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists()
        || Path::new("/sys/fs/cgroup/memory.swap.max").exists()
        || !Path::new("/sys/fs/cgroup/memory").exists()
}

/// Whether the container's cgroup is frozen (`CgroupSet::is_frozen`, shared with
/// `warren suspend`).
pub fn is_frozen(set: &CgroupSet) -> bool {
    set.is_frozen()
}

/// Freeze (`true`) or thaw the container's processes and wait until the kernel did
/// (`CgroupSet::set_frozen`, shared with `warren suspend`).
pub fn freeze(id: &str, set: &CgroupSet, on: bool) -> Result<()> {
    if !set.has_freezer() {
        return Err(Error::Unsupported(format!(
            "container '{id}': it has no freezer cgroup (mount the v1 freezer hierarchy to pause containers)"
        )));
    }
    set.set_frozen(on, Duration::from_secs(10))
        .map_err(|e| Error::Refused(format!("container '{id}': {}", e)))
}

/// Apply new limits to an existing set (`update --resources`).
pub fn apply(id: &str, set: &CgroupSet, limits: &Limits) -> Result<()> {
    let write = |ctrl: &str, file: &str, value: &str| -> Result<()> {
        let dir = set
            .dirs
            .iter()
            .find(|(c, _)| set.version == CgroupVersion::V2 || c.split(',').any(|x| x == ctrl))
            .map(|(_, d)| d)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "container '{id}': it has no {ctrl} cgroup; create it with a {ctrl} limit to update that limit"
                ))
            })?;
        let path = dir.join(file);
        std::fs::write(&path, value)
            .ctx(|| format!("container '{id}': writing {value} to {}", path.display()))
    };
    match set.version {
        CgroupVersion::V1 => {
            let memsw = set.dirs.iter().any(|(c, d)| {
                c.contains("memory") && d.join("memory.memsw.limit_in_bytes").exists()
            });
            // Raising memory+swap must come before raising memory, lowering after;
            // writing memsw first when it grows keeps memsw >= memory throughout.
            let w = crate::cgroups::v1::writes(limits, memsw)?;
            let (sw, rest): (Vec<_>, Vec<_>) =
                w.into_iter().partition(|(_, f, _)| f.contains("memsw"));
            for (c, f, v) in sw.iter() {
                let _ = write(c, f, v);
            }
            for (c, f, v) in &rest {
                write(c, f, v)?;
            }
            for (c, f, v) in &sw {
                write(c, f, v)?;
            }
        }
        CgroupVersion::V2 => {
            for (f, v) in crate::cgroups::v2::writes(limits) {
                write("", f, &v)?;
            }
        }
    }
    if let Some(cs) = &limits.cpuset {
        write("cpuset", "cpuset.cpus", &cs.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_become_limits() {
        let r: LinuxResources = serde_json::from_str(
            r#"{"memory":{"limit":67108864,"swap":134217728,"reservation":1048576},
                "pids":{"limit":20},"cpu":{"shares":512,"quota":50000,"period":100000,"cpus":"0"}}"#,
        )
        .unwrap();
        let (l, notes) = limits(&r, true).unwrap();
        assert_eq!(l.memory_max, Some(64 << 20));
        assert_eq!(l.memory_swap, Some(64 << 20));
        assert_eq!(l.memory_request, Some(1 << 20));
        assert_eq!(l.max_processes, Some(20));
        assert_eq!(l.cpu_shares, Some(512));
        assert_eq!(l.cpu_max, Some(0.5));
        assert_eq!(l.cpuset, Some(CpuSet(vec![0])));
        assert!(notes.is_empty());
        let (l, notes) = limits(&r, false).unwrap();
        assert_eq!(l.memory_swap, None);
        assert!(notes[0].contains("swapaccount=1"), "{notes:?}");
        let bad: LinuxResources =
            serde_json::from_str(r#"{"memory":{"limit":100,"swap":50}}"#).unwrap();
        assert!(limits(&bad, true)
            .unwrap_err()
            .to_string()
            .contains("memory.swap"));
        let unlimited: LinuxResources =
            serde_json::from_str(r#"{"memory":{"limit":100,"swap":-1},"pids":{"limit":0}}"#)
                .unwrap();
        let (l, _) = limits(&unlimited, true).unwrap();
        assert_eq!((l.memory_swap, l.max_processes), (None, None));
        for bad in [
            r#"{"memory":{"limit":-5}}"#,
            r#"{"memory":{"limit":-2}}"#,
            r#"{"pids":{"limit":-7}}"#,
            r#"{"cpu":{"quota":-100}}"#,
        ] {
            let r: LinuxResources = serde_json::from_str(bad).unwrap();
            let e = limits(&r, true).unwrap_err().to_string();
            assert!(e.contains("is negative") && e.contains("-1"), "{bad}: {e}");
        }
        let minus_one: LinuxResources =
            serde_json::from_str(r#"{"memory":{"limit":-1},"cpu":{"quota":-1}}"#).unwrap();
        let (l, _) = limits(&minus_one, true).unwrap();
        assert_eq!((l.memory_max, l.cpu_max), (None, None));
    }

    #[test]
    fn device_rules_become_v1_lines() {
        let rules: Vec<LinuxDeviceCgroup> = serde_json::from_str(
            r#"[{"allow":false,"access":"rwm"},
                {"allow":true,"type":"c","major":1,"minor":3,"access":"rwm"},
                {"allow":true,"type":"c","major":136,"access":"rwm"}]"#,
        )
        .unwrap();
        let w = device_writes(&rules);
        assert_eq!(
            w[..4],
            [
                ("devices.deny", "a".to_string()),
                ("devices.allow", "c 1:3 rwm".to_string()),
                ("devices.allow", "c 136:* rwm".to_string()),
                ("devices.allow", "c *:* m".to_string()),
            ]
        );
        assert!(w.contains(&("devices.allow", "c 5:1 rwm".to_string())));
    }
}
