//! The first limit that would stop the next step, as the seed's density study named
//! the wall ahead of each step: after a step of N zones, ask the doctor's model
//! ([`crate::doctor::assess()`]) about the next step's zone count (the next larger
//! step, or ten times the last) for zones like the ones just measured, and name the
//! limit that fails at the fewest zones, with its numbers.
//!
//! The plan ([`plan_like`]) is the step's zones as measured: their processes, threads,
//! inotify instances and watches per zone (rounded up), and the memory they pinned
//! beyond the doctor's per-zone model ([`crate::doctor::zone_memory`], which holds the
//! shrinker term growing with N) carried to the next step as `mem_per_zone`. The host
//! is read after the step's zones are gone, as the next step would find it.
//!
//! Pure: a [`LimitSnapshot`] and a [`Plan`] in, a [`NextStep`] out. Every need in the
//! model grows with N, so the zone count from which a limit fails is found by
//! bisection over N ([`fails_from`]).

use serde::Serialize;

use super::Step;
use crate::doctor::{self, Current, Finding, LimitSnapshot, NetPlan, Plan, Unit, Verdict};
use crate::error::Result;

/// The largest zone count the search looks at: a limit that holds there is "none".
pub const SEARCH_CAP: u64 = 100_000_000;

/// A limit, its figures at the zone count asked about, and from how many zones it
/// does not fit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stop {
    /// The sysctl key, or a name such as "memory" or "memory cgroup ids".
    pub limit: String,
    pub current: Current,
    pub needed: u64,
    pub unit: Unit,
    /// The fewest zones (of this plan) at which the need exceeds the limit.
    pub fails_from: u64,
    /// How the doctor counted the need.
    pub note: String,
    /// The doctor's fix, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// What the doctor says about the next step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NextStep {
    /// The zone count asked about.
    pub zones: u64,
    /// What the doctor was asked: zones like the step's, measured.
    pub plan: Plan,
    /// The limit that fails at the fewest zones of this plan (`None`: every limit holds
    /// up to [`SEARCH_CAP`]), with its figures at `zones`.
    pub first: Option<Stop>,
    /// `first` fails at or below `zones`: it would stop the next step.
    pub stops_next: bool,
    /// Every limit that does not fit at `zones`, the first to fail first.
    pub will_fail: Vec<Stop>,
    /// The first limit with the doctor's default allowances instead of the measured
    /// inotify use (`warren doctor --zones N`: one instance and 32 watches per zone,
    /// for a service manager).
    pub first_by_default_plan: Option<Stop>,
}

/// The next step's zone count after a step of `n`: the next larger of `steps`, or ten
/// times `n` after the last.
pub fn next_zones(steps: &[usize], n: usize) -> u64 {
    steps
        .iter()
        .copied()
        .filter(|&s| s > n)
        .min()
        .unwrap_or(n.saturating_mul(10)) as u64
}

/// A plan of `zones` zones like the `step`'s, as measured.
pub fn plan_like(step: &Step, zones: u64, net: NetPlan) -> Result<Plan> {
    let n = step.zones.max(1) as u64;
    let per = |v: u64| v.div_ceil(n);
    let c = &step.census;
    let procs = per(c.zone_processes).max(1);
    let threads = per(c.zone_threads).max(procs);
    let pinned = (step.mem_per_zone.pinned_kib * 1024.0).max(0.0) as u64;
    let beyond_model = pinned.saturating_sub(doctor::zone_memory(n));
    Ok(
        Plan::new(zones.max(1), procs - 1, Some(threads), beyond_model, net)?
            .with_inotify(per(c.zone_inotify_instances), per(c.zone_inotify_watches)),
    )
}

fn at(plan: &Plan, zones: u64) -> Plan {
    Plan {
        zones,
        ..plan.clone()
    }
}

fn fails(s: &LimitSnapshot, plan: &Plan, zones: u64, limit: &str) -> bool {
    doctor::assess(s, &at(plan, zones))
        .iter()
        .any(|f| f.limit == limit && f.verdict == Verdict::WillFail)
}

/// The fewest zones of `plan` at which `limit` fails, if it does by `cap`.
pub fn fails_from(s: &LimitSnapshot, plan: &Plan, limit: &str, cap: u64) -> Option<u64> {
    if !fails(s, plan, cap, limit) {
        return None;
    }
    let (mut lo, mut hi) = (1, cap);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fails(s, plan, mid, limit) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

fn stop(f: &Finding, fails_from: u64) -> Stop {
    Stop {
        limit: f.limit.clone(),
        current: f.current.clone(),
        needed: f.needed,
        unit: f.unit,
        fails_from,
        note: f.note.clone(),
        fix: f.fix.as_ref().map(ToString::to_string),
    }
}

/// Every limit that fails by [`SEARCH_CAP`], with its figures at `plan.zones`, the
/// first to fail first.
fn walls(s: &LimitSnapshot, plan: &Plan) -> Vec<Stop> {
    let now = doctor::assess(s, plan);
    let mut out: Vec<Stop> = doctor::assess(s, &at(plan, SEARCH_CAP))
        .iter()
        .filter(|f| f.verdict == Verdict::WillFail)
        .filter_map(|f| {
            let from = fails_from(s, plan, &f.limit, SEARCH_CAP)?;
            let here = now.iter().find(|g| g.limit == f.limit)?;
            Some(stop(here, from))
        })
        .collect();
    out.sort_by(|a, b| a.fails_from.cmp(&b.fails_from).then(a.limit.cmp(&b.limit)));
    out
}

/// Ask the doctor's model about `plan.zones` zones on the host `s`.
pub fn next_step(s: &LimitSnapshot, plan: &Plan) -> NextStep {
    let all = walls(s, plan);
    let first = all.first().cloned();
    let will_fail: Vec<Stop> = all
        .into_iter()
        .filter(|w| w.fails_from <= plan.zones)
        .collect();
    let default_plan = plan.clone().with_inotify(
        doctor::INOTIFY_INSTANCES_PER_ZONE,
        doctor::INOTIFY_WATCHES_PER_ZONE,
    );
    NextStep {
        zones: plan.zones,
        plan: plan.clone(),
        stops_next: !will_fail.is_empty(),
        first,
        will_fail,
        first_by_default_plan: walls(s, &default_plan).into_iter().next(),
    }
}

/// "kernel.pid_max: 100,092 needed, 32,768 now; fails from 32,677 zones".
pub fn describe(w: &Stop) -> String {
    let fmt = |v: u64| match w.unit {
        Unit::Bytes => bytes(v),
        Unit::Count => thousands(v),
    };
    let now = match &w.current {
        Current::Value(v) => fmt(*v),
        Current::Unlimited => "unlimited".into(),
        Current::Unknown(e) => format!("unknown ({e})"),
    };
    format!(
        "{}: {} needed, {now} now; fails from {} zones",
        w.limit,
        fmt(w.needed),
        thousands(w.fails_from)
    )
}

/// Bytes as MiB below 10 GiB, else GiB: "374.5 MiB", "23.1 GiB".
pub fn bytes(v: u64) -> String {
    let mib = v as f64 / f64::from(1 << 20);
    if mib < 10.0 * 1024.0 {
        format!("{mib:.1} MiB")
    } else {
        format!("{:.1} GiB", mib / 1024.0)
    }
}

/// 18048 → "18,048".
pub fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::assess::tests::dev_vm;

    fn idle_zones(zones: u64) -> Plan {
        // warren-init alone: one process, one thread, no inotify.
        Plan::new(zones, 0, Some(1), 0, NetPlan::None)
            .unwrap()
            .with_inotify(0, 0)
    }

    #[test]
    fn next_zones_is_the_next_larger_step_or_ten_times_the_last() {
        assert_eq!(next_zones(&[100, 1000, 10000], 100), 1000);
        assert_eq!(next_zones(&[10000, 100, 1000], 1000), 10000);
        assert_eq!(next_zones(&[100, 1000, 10000], 10000), 100_000);
    }

    #[test]
    fn the_first_limit_is_the_one_that_fails_at_the_fewest_zones() {
        let s = dev_vm(); // pid_max 32,768 with 92 tasks; 23 GiB available, no swap
        let next = next_step(&s, &idle_zones(100_000));
        let first = next.first.as_ref().unwrap();
        assert!(next.stops_next);
        // Memory first: 480 KiB flat plus shrinker state growing with N (4 superblocks
        // a zone, 1 KiB per 64) outgrows 23 GiB near 16,000 zones, before pid_max.
        assert_eq!(first.limit, "memory", "{next:#?}");
        let n = first.fails_from;
        assert!(doctor::zone_memory(n) * n > 23 << 30);
        assert!(doctor::zone_memory(n - 1) * (n - 1) <= 23 << 30);
        // Its figures are the need at the zone count asked about.
        assert_eq!(first.needed, 100_000 * doctor::zone_memory(100_000));
        let pid = next
            .will_fail
            .iter()
            .find(|w| w.limit == "kernel.pid_max")
            .unwrap();
        assert_eq!(pid.fails_from, 32_768 - 92 + 1);
        assert_eq!(pid.needed, 92 + 100_000);
        // Ordered by where they fail.
        let from: Vec<u64> = next.will_fail.iter().map(|w| w.fails_from).collect();
        assert!(from.windows(2).all(|w| w[0] <= w[1]), "{from:?}");
        assert!(next.will_fail.iter().all(|w| w.fails_from <= 100_000));
        assert_eq!(
            describe(pid),
            "kernel.pid_max: 100,092 needed, 32,768 now; fails from 32,677 zones"
        );
        // With the doctor's allowance of one inotify instance per zone, root's 128
        // instances come first.
        let d = next.first_by_default_plan.unwrap();
        assert_eq!(
            (d.limit.as_str(), d.fails_from),
            ("fs.inotify.max_user_instances", 129)
        );
    }

    #[test]
    fn a_step_that_fits_still_names_the_wall_ahead() {
        let next = next_step(&dev_vm(), &idle_zones(1000));
        assert!(!next.stops_next && next.will_fail.is_empty());
        let first = next.first.unwrap();
        assert_eq!(first.limit, "memory");
        assert!(first.fails_from > 1000);
    }

    #[test]
    fn the_plan_is_the_zones_as_measured() {
        use crate::bench::census::Census;
        use crate::measure::{summarize, MemPerZone};
        let step = Step {
            zones: 4,
            clone_ms: summarize(&[]),
            boot_ms: summarize(&[]),
            total_s: 1.0,
            mem_per_zone: MemPerZone {
                pinned_kib: 1000.0,
                ..MemPerZone::default()
            },
            memory: Default::default(),
            disk_per_zone_kib: 28.0,
            idle_cpu_pct: 0.1,
            host_cpu_pct: 1.0,
            cpu_use: Default::default(),
            census: Census {
                zone_processes: 5,
                zone_threads: 9,
                zone_inotify_instances: 0,
                zone_inotify_watches: 1,
                ..Census::default()
            },
            next_step: None,
            halt_ms: summarize(&[]),
            delete_ms: summarize(&[]),
        };
        let p = plan_like(&step, 40, NetPlan::None).unwrap();
        // 5 processes over 4 zones: 2 a zone (init + 1); 9 threads: 3 a zone.
        assert_eq!((p.zones, p.procs(), p.threads_per_zone), (40, 2, 3));
        assert_eq!(
            (p.inotify_instances_per_zone, p.inotify_watches_per_zone),
            (0, 1)
        );
        assert_eq!(p.mem_per_zone, 1000 * 1024 - doctor::zone_memory(4));
        assert_eq!(thousands(18048), "18,048");
        assert_eq!(thousands(999), "999");
        assert_eq!(bytes(3 << 19), "1.5 MiB");
        assert_eq!(bytes(23 << 30), "23.0 GiB");
    }
}
