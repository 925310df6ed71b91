//! The verdicts: pure functions of a [`LimitSnapshot`] and a [`Plan`]. No I/O here, so
//! every rule is unit-tested with fixture numbers (this development VM's among them).

use super::snapshot::{CgroupLimits, LimitSnapshot, Reading};
use super::zone_memory;
use super::{
    Current, Finding, Fix, NetPlan, Plan, Unit, Verdict, CONNTRACK_PER_ZONE, FILES_PER_PROCESS,
    IDS_PER_ZONE, INOTIFY_INSTANCES_PER_ZONE, INOTIFY_WATCHES_PER_ZONE, KERNEL_STACK,
    MAPS_PER_PROCESS, MEM_CGROUP_IDS, MOUNTS_PER_ZONE, NEIGH_PER_ZONE, SUPERBLOCKS_PER_ZONE,
    WARREN_FDS, ZONE_DISK, ZONE_FLAT_MEMORY,
};
use crate::config::format_size;
use crate::error::Result;

/// The largest value `kernel.pid_max` accepts on 64-bit (PID_MAX_LIMIT).
pub const PID_MAX_LIMIT: u64 = 4_194_304;
/// The largest value `kernel.threads-max` accepts (FUTEX_TID_MASK).
pub const THREADS_MAX_LIMIT: u64 = 0x3fff_ffff;
/// The largest `fs.nr_open` on 64-bit (INT_MAX rounded down to a multiple of 64).
pub const NR_OPEN_LIMIT: u64 = 2_147_483_584;
/// Sysctls stored as a C int.
pub const INT_MAX: u64 = i32::MAX as u64;
/// Sysctls stored as a C long.
pub const LONG_MAX: u64 = i64::MAX as u64;

/// The verdict rule: will fail above the limit, tight above 80 % of it.
pub fn verdict(current: &Current, need: u64) -> Verdict {
    match current {
        Current::Unlimited => Verdict::Ok,
        Current::Unknown(_) => Verdict::Unknown,
        Current::Value(v) if need > *v => Verdict::WillFail,
        Current::Value(v) if need as u128 * 5 > *v as u128 * 4 => Verdict::Tight,
        Current::Value(_) => Verdict::Ok,
    }
}

/// The value to raise a limit to: the next power of two at or above 1.25 × `need`,
/// capped at the kernel's maximum `cap`.
pub fn suggest(need: u64, cap: u64) -> u64 {
    let want = need.saturating_add(need.div_ceil(4)).max(1);
    want.checked_next_power_of_two()
        .unwrap_or(u64::MAX)
        .min(cap)
}

fn current(r: &Reading) -> Current {
    match r {
        Ok(v) => Current::Value(*v),
        Err(e) => Current::Unknown(e.clone()),
    }
}

/// How a finding is fixed when it is tight or will fail.
enum Remedy {
    /// Raise the sysctl named by the finding; the kernel accepts at most this.
    Sysctl(u64),
    Advice(String),
}

fn finding(
    limit: &str,
    cur: Current,
    need: u64,
    unit: Unit,
    remedy: Remedy,
    note: String,
) -> Finding {
    let v = verdict(&cur, need);
    let fix = match (v, remedy) {
        (Verdict::Ok | Verdict::Unknown, _) => None,
        (_, Remedy::Advice(text)) => Some(Fix::Advice { text }),
        (_, Remedy::Sysctl(cap)) => {
            let value = suggest(need, cap);
            let now = match cur {
                Current::Value(n) => n,
                _ => 0,
            };
            if value > now && value >= need {
                Some(Fix::Sysctl {
                    key: limit.to_string(),
                    value,
                })
            } else {
                Some(Fix::Advice {
                    text: format!(
                        "the kernel allows at most {cap}; plan fewer zones or fewer tasks each"
                    ),
                })
            }
        }
    };
    Finding {
        limit: limit.to_string(),
        current: cur,
        needed: need,
        unit,
        verdict: v,
        fix,
        note,
    }
}

/// A sysctl limit with the usual rule and a sysctl fix. A key missing from the snapshot
/// (an optional module not loaded) yields no finding.
fn sysctl(s: &LimitSnapshot, key: &str, need: u64, cap: u64, note: String) -> Option<Finding> {
    let r = s.sysctl(key)?;
    Some(finding(
        key,
        current(r),
        need,
        Unit::Count,
        Remedy::Sysctl(cap),
        note,
    ))
}

/// A host count that feeds a need, with a remark when it could not be read.
fn base(r: &Reading, what: &str) -> (u64, String) {
    match r {
        Ok(v) => (*v, format!("{v} {what} now")),
        Err(e) => (0, format!("{what} now unknown ({e})")),
    }
}

/// Check every limit against the plan. Pure: no I/O.
pub fn assess(s: &LimitSnapshot, plan: &Plan) -> Vec<Finding> {
    let n = plan.zones;
    let t = plan.threads_per_zone;
    let tasks = plan.total_tasks();
    let mut out = Vec::new();
    let mut push = |f: Option<Finding>| out.extend(f);

    // Tasks: every thread takes a pid and counts toward threads-max.
    let (host_tasks, host_note) = base(&s.tasks, "tasks on the host");
    let task_need = host_tasks.saturating_add(tasks);
    let task_note = format!("{host_note} + {n} zones × {t} tasks");
    push(sysctl(
        s,
        "kernel.pid_max",
        task_need,
        PID_MAX_LIMIT,
        task_note.clone(),
    ));
    push(sysctl(
        s,
        "kernel.threads-max",
        task_need,
        THREADS_MAX_LIMIT,
        task_note,
    ));
    push_cgroup(&mut out, s, plan);
    let mut push = |f: Option<Finding>| out.extend(f);

    // Per-process limits of warren itself.
    push(Some(rlimit_nproc(s, plan)));
    push(Some(rlimit_nofile(s, plan)));
    push(sysctl(
        s,
        "fs.nr_open",
        n + WARREN_FDS,
        NR_OPEN_LIMIT,
        format!("caps RLIMIT_NOFILE; a supervisor holding a descriptor per zone needs {n} + {WARREN_FDS}"),
    ));
    let (files, files_note) = base(&s.open_files, "open files");
    push(sysctl(
        s,
        "fs.file-max",
        files.saturating_add(n * plan.procs() * FILES_PER_PROCESS),
        LONG_MAX,
        format!(
            "{files_note} + {n} zones × {} processes × {FILES_PER_PROCESS}",
            plan.procs()
        ),
    ));
    push(sysctl(
        s,
        "vm.max_map_count",
        MAPS_PER_PROCESS,
        INT_MAX,
        format!("per process, so the number of zones does not change it; {MAPS_PER_PROCESS} is a large service's share"),
    ));

    // Per-user limits: a zone in its own user namespace runs as its own host ids, but the
    // kernel charges each namespace's counts up to its creator (root) as well, so the
    // totals are root's either way.
    let (instances, watches) = (
        plan.inotify_instances_per_zone,
        plan.inotify_watches_per_zone,
    );
    let planned = if (instances, watches) == (INOTIFY_INSTANCES_PER_ZONE, INOTIFY_WATCHES_PER_ZONE)
    {
        "for a service manager or file watcher"
    } else {
        "as planned"
    };
    push(sysctl(
        s,
        "fs.inotify.max_user_instances",
        n * instances,
        INT_MAX,
        format!("per user, and all zones run as root: {instances} per zone {planned} (the host's own use comes on top)"),
    ));
    push(sysctl(
        s,
        "fs.inotify.max_user_watches",
        n * watches,
        INT_MAX,
        format!("per user: {watches} watches per zone {planned}"),
    ));
    for kind in ["mnt", "pid", "uts", "ipc", "cgroup"] {
        push(sysctl(
            s,
            &format!("user.max_{kind}_namespaces"),
            n,
            INT_MAX,
            format!("one {kind} namespace per zone"),
        ));
    }
    push(sysctl(
        s,
        "user.max_net_namespaces",
        n * plan.netns_per_zone(),
        INT_MAX,
        match plan.net {
            NetPlan::Host => "net = host: zones share the host's network namespace".into(),
            _ => "one network namespace per zone".into(),
        },
    ));
    push(sysctl(
        s,
        "user.max_user_namespaces",
        n,
        INT_MAX,
        "one user namespace per zone (userns = true, the default)".into(),
    ));
    let (mounts, mounts_note) = base(&s.host_mounts, "host mounts");
    push(sysctl(
        s,
        "fs.mount-max",
        mounts + MOUNTS_PER_ZONE,
        INT_MAX,
        format!("per mount namespace: a zone's starts as a copy of the host's ({mounts_note}) + {MOUNTS_PER_ZONE} of its own, whatever N is; usually fine"),
    ));

    // Networking: a bridge puts each zone's addresses in the host's neighbour tables.
    let bridged = plan.net == NetPlan::Bridge;
    let neigh = if bridged { n * NEIGH_PER_ZONE } else { 0 };
    for family in ["ipv4", "ipv6"] {
        let key = |i: u8| format!("net.{family}.neigh.default.gc_thresh{i}");
        let why = if bridged {
            format!("{NEIGH_PER_ZONE} {family} neighbour entry per bridged zone")
        } else {
            "no bridge: zones add no host neighbour entries".to_string()
        };
        if let Some(mut f) = sysctl(s, &key(1), neigh, INT_MAX, why.clone()) {
            // Above gc_thresh1 the garbage collector merely starts running.
            if f.verdict != Verdict::Unknown {
                f.verdict = Verdict::Ok;
                f.fix = None;
            }
            f.note = format!("{why}; above this the garbage collector runs (harmless)");
            out.push(f);
        }
        if let Some(mut f) = sysctl(s, &key(2), neigh, INT_MAX, why.clone()) {
            // Above gc_thresh2 entries are collected after 5 s: churn, not failure.
            if f.verdict == Verdict::WillFail {
                f.verdict = Verdict::Tight;
            }
            f.note = format!("{why}; above this entries are collected aggressively");
            out.push(f);
        }
        out.extend(sysctl(
            s,
            &key(3),
            neigh,
            INT_MAX,
            format!("{why}; a hard maximum: beyond it the table overflows and packets drop"),
        ));
    }
    if let Some(count) = s.sysctl("net.netfilter.nf_conntrack_count") {
        let (now, now_note) = base(count, "conntrack entries");
        let zones_need = if bridged { n * CONNTRACK_PER_ZONE } else { 0 };
        out.extend(sysctl(
            s,
            "net.netfilter.nf_conntrack_max",
            now + zones_need,
            INT_MAX,
            if bridged {
                format!("{now_note} + {CONNTRACK_PER_ZONE} per bridged zone")
            } else {
                format!("{now_note}; zones without a bridge add none on the host")
            },
        ));
    }

    out.extend(super::serving::findings(s, plan));

    // Memory, kernel stacks, disk, ids: warren cannot raise these.
    let (cgroups_now, cg_note) = base(&s.memory_cgroups, "memory cgroups");
    out.push(finding(
        "memory cgroup ids",
        Current::Value(MEM_CGROUP_IDS),
        cgroups_now + n,
        Unit::Count,
        Remedy::Advice(
            "compiled into the kernel (MEM_CGROUP_ID_MAX); plan fewer zones per host".into(),
        ),
        format!("{cg_note} (dying ones included) + one per zone"),
    ));
    out.push(memory(s, plan));
    let stack_need = tasks.saturating_mul(KERNEL_STACK);
    out.push(finding(
        "kernel stacks",
        current(&s.mem_available),
        stack_need,
        Unit::Bytes,
        Remedy::Advice("fewer tasks per zone, or more memory".into()),
        format!(
            "{tasks} tasks × {} of unswappable kernel stack, against MemAvailable",
            format_size(KERNEL_STACK)
        ),
    ));
    let (disk_cur, disk_note) = match &s.disk {
        Ok((path, free)) => (
            Current::Value(*free),
            format!("free space at {}", path.display()),
        ),
        Err(e) => (
            Current::Unknown(e.clone()),
            "free space of the state root".into(),
        ),
    };
    out.push(finding(
        "disk",
        disk_cur,
        n.saturating_mul(ZONE_DISK),
        Unit::Bytes,
        Remedy::Advice("free space, or put the state root (--root) on a larger filesystem".into()),
        format!(
            "{n} clones × {} (SPEC.md) against {disk_note}; writes inside zones come on top",
            format_size(ZONE_DISK)
        ),
    ));
    let id_space = crate::idmap::ALLOC_END - u64::from(crate::idmap::FIRST_BASE);
    out.push(finding(
        "subordinate ids",
        Current::Value(id_space),
        n.saturating_mul(IDS_PER_ZONE),
        Unit::Count,
        Remedy::Advice(
            "plan fewer zones with a user namespace per host (state roots share the space), or set userns = false on some".into(),
        ),
        format!(
            "each zone with a user namespace (the default) takes {IDS_PER_ZONE} host ids from 2^30 to 2^31, {} ranges host-wide (below 2^31: the devpts of Debian 12's kernels takes no tty group above it; idmap::ALLOC_END)",
            id_space / IDS_PER_ZONE
        ),
    ));
    out.extend(isolation::findings(
        &s.isolation,
        s.sysctl("user.max_user_namespaces"),
    ));
    out
}

fn push_cgroup(out: &mut Vec<Finding>, s: &LimitSnapshot, plan: &Plan) {
    let n = plan.zones;
    let advice = |dir: &std::path::Path| {
        Remedy::Advice(format!(
            "raise it in the cgroup above warren (warren does not write to {}), or run warren in a cgroup without the limit",
            dir.display()
        ))
    };
    match &s.cgroup {
        CgroupLimits::V1 {
            pids_dir,
            pids_max,
            pids_current,
        } => {
            let (now, now_note) = base(pids_current, "tasks in it");
            let cur = match pids_max {
                Ok(Some(v)) => Current::Value(*v),
                Ok(None) => Current::Unlimited,
                Err(e) => Current::Unknown(e.clone()),
            };
            out.push(finding(
                "pids.max (warren's cgroup)",
                cur,
                now.saturating_add(plan.total_tasks()),
                Unit::Count,
                advice(pids_dir),
                format!("{}: {now_note} + every zone task", pids_dir.display()),
            ));
        }
        CgroupLimits::V2 {
            dir,
            max_descendants,
            max_depth,
            nr_descendants,
        } => {
            let opt = |r: &Result<Option<u64>, String>| match r {
                Ok(Some(v)) => Current::Value(*v),
                Ok(None) => Current::Unlimited,
                Err(e) => Current::Unknown(e.clone()),
            };
            let (now, now_note) = base(nr_descendants, "descendants");
            out.push(finding(
                "cgroup.max.descendants",
                opt(max_descendants),
                now + 1 + n,
                Unit::Count,
                advice(dir),
                format!(
                    "{}: {now_note} + warren's group + one per zone",
                    dir.display()
                ),
            ));
            out.push(finding(
                "cgroup.max.depth",
                opt(max_depth),
                2,
                Unit::Count,
                advice(dir),
                format!("{}: <group>/<zone> below it", dir.display()),
            ));
        }
        CgroupLimits::Unknown(e) => out.push(finding(
            "cgroup limits",
            Current::Unknown(e.clone()),
            n,
            Unit::Count,
            Remedy::Advice("see 'warren info'".into()),
            String::new(),
        )),
    }
}

fn rlimit_nproc(s: &LimitSnapshot, plan: &Plan) -> Finding {
    let need = plan.total_tasks();
    let root = s.euid == Ok(0);
    let cur = match &s.nproc {
        Ok((soft, _)) if *soft == u64::MAX => Current::Unlimited,
        Ok((soft, _)) => Current::Value(*soft),
        Err(e) => Current::Unknown(e.clone()),
    };
    let mut f = finding(
        "RLIMIT_NPROC",
        cur,
        need,
        Unit::Count,
        Remedy::Advice(
            "run warren as root (root is exempt), or raise the limit in limits.conf".into(),
        ),
        "tasks of warren's real user; zones run as root, which the kernel exempts".into(),
    );
    if root && f.verdict != Verdict::Unknown {
        f.verdict = Verdict::Ok;
        f.fix = None;
    }
    f
}

fn rlimit_nofile(s: &LimitSnapshot, plan: &Plan) -> Finding {
    let n = plan.zones;
    let supervisor = n + WARREN_FDS;
    let cap = match &s.cap_sys_resource {
        Ok(true) => "warren has CAP_SYS_RESOURCE and could raise it",
        Ok(false) => "raising the hard limit needs CAP_SYS_RESOURCE, which warren lacks",
        Err(_) => "raising the hard limit needs CAP_SYS_RESOURCE",
    };
    let (cur, detail) = match &s.nofile {
        Ok((soft, hard)) => (
            if *hard == u64::MAX {
                Current::Unlimited
            } else {
                Current::Value(*hard)
            },
            format!("soft {soft}, hard {hard}"),
        ),
        Err(e) => (Current::Unknown(e.clone()), String::new()),
    };
    let over = matches!(cur, Current::Value(h) if supervisor > h);
    finding(
        "RLIMIT_NOFILE",
        cur,
        WARREN_FDS,
        Unit::Count,
        Remedy::Advice(format!("raise the hard limit (LimitNOFILE= or limits.conf); {cap}")),
        format!(
            "{detail}: warren keeps no descriptor per zone, so {WARREN_FDS} is enough; a supervisor holding one per zone would need {supervisor}{}; {cap}",
            if over { ", above the hard limit" } else { "" }
        ),
    )
}

fn memory(s: &LimitSnapshot, plan: &Plan) -> Finding {
    let idle = zone_memory(plan.zones);
    let per_zone = idle + plan.mem_per_zone;
    let cur = match (&s.mem_available, &s.swap_free) {
        (Ok(a), Ok(b)) => Current::Value(a + b),
        (Err(e), _) | (_, Err(e)) => Current::Unknown(e.clone()),
    };
    finding(
        "memory",
        cur,
        plan.zones.saturating_mul(per_zone),
        Unit::Bytes,
        Remedy::Advice("add memory or swap, or plan fewer zones".into()),
        format!(
            "{} zones × ({} per idle zone: {} flat + {} of shrinker state growing with the zones, {} superblocks each; + {} --mem-per-zone), against MemAvailable + SwapFree",
            plan.zones,
            format_size(idle),
            format_size(ZONE_FLAT_MEMORY),
            format_size(idle - ZONE_FLAT_MEMORY),
            SUPERBLOCKS_PER_ZONE,
            format_size(plan.mem_per_zone)
        ),
    )
}

mod isolation;

#[cfg(test)]
pub(crate) mod tests;
