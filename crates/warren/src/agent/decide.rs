//! The agent's decisions, pure: thresholds with grace and hysteresis over samples, and
//! which zone (if any) to suspend or evict. No clock, no files: time is a number passed
//! in.
//!
//! Suspend first, halt last (issue 19, docs/suspend.md): with `suspend-first`, pressure
//! suspends a running zone that is not critical — the lowest class, then the one most
//! above its request, then the idlest (least CPU per second since boot) — and halts a
//! zone only when no such zone is left running. A critical zone is never suspended.

use serde::{Deserialize, Serialize};

use crate::config::Priority;

/// The pressure signals the agent watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Signal {
    /// Memory still available, % of the budget (host MemTotal or the watched cgroup's
    /// limit). Low is bad.
    Available,
    /// Swap in use, % of the swap there is. High is bad.
    SwapUsed,
    /// Pages swapped in per second, averaged over the window.
    SwapIn,
    /// Pages swapped out per second, averaged over the window.
    SwapOut,
    /// PSI memory "full" avg10: % of time every task waited for memory.
    PsiFull,
}

pub const SIGNALS: [Signal; 5] = [
    Signal::Available,
    Signal::SwapUsed,
    Signal::SwapIn,
    Signal::SwapOut,
    Signal::PsiFull,
];

impl Signal {
    /// Whether low values are the bad ones.
    fn low_is_bad(self) -> bool {
        self == Signal::Available
    }

    fn describe(self) -> (&'static str, &'static str) {
        match self {
            Signal::Available => ("available memory", "%"),
            Signal::SwapUsed => ("swap used", "%"),
            Signal::SwapIn => ("swap-in", " pages/s"),
            Signal::SwapOut => ("swap-out", " pages/s"),
            Signal::PsiFull => ("memory PSI full avg10", "%"),
        }
    }
}

/// One threshold: crossing `trigger` for `grace_ms` makes it active; it stays active
/// until the value is back past `clear` (hysteresis), so a signal hovering at the
/// threshold does not flap.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Threshold {
    pub trigger: f64,
    pub clear: f64,
    pub grace_ms: u64,
}

/// The thresholds of every signal, in [`SIGNALS`] order.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thresholds(pub [Threshold; 5]);

/// One sample of the signals (`None`: not measurable here, e.g. no swap, no PSI).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Sample {
    pub now_ms: u64,
    /// In [`SIGNALS`] order.
    pub values: [Option<f64>; 5],
}

/// A threshold's state between samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Track {
    /// When the value first crossed the trigger (and has not cleared since).
    pub since_ms: Option<u64>,
    /// Past the grace period and not cleared yet.
    pub active: bool,
}

/// An active threshold and the numbers that made it so.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Breach {
    pub signal: Signal,
    pub value: f64,
    pub trigger: f64,
    pub since_ms: u64,
    /// When the grace period ended (the threshold became active).
    pub active_since_ms: u64,
}

impl Breach {
    pub fn describe(&self, now_ms: u64) -> String {
        let (name, unit) = self.signal.describe();
        let cmp = if self.signal.low_is_bad() { "<" } else { ">" };
        format!(
            "{name} {:.1}{unit} {cmp} {}{unit} for {:.1} s",
            self.value,
            self.trigger,
            now_ms.saturating_sub(self.since_ms) as f64 / 1000.0
        )
    }
}

/// Advance every threshold by one sample; the breaches are the active ones.
pub fn track(th: &Thresholds, tracks: &[Track; 5], s: &Sample) -> ([Track; 5], Vec<Breach>) {
    let mut out = *tracks;
    let mut breaches = Vec::new();
    for (i, sig) in SIGNALS.iter().enumerate() {
        let t = th.0[i];
        let tr = &mut out[i];
        let Some(v) = s.values[i] else {
            *tr = Track::default();
            continue;
        };
        let (bad, cleared) = if sig.low_is_bad() {
            (v < t.trigger, v >= t.clear)
        } else {
            (v > t.trigger, v <= t.clear)
        };
        if bad {
            let since = *tr.since_ms.get_or_insert(s.now_ms);
            if s.now_ms.saturating_sub(since) >= t.grace_ms {
                tr.active = true;
            }
        } else if cleared || !tr.active {
            // A spike that ended inside its grace period, or pressure that is over.
            *tr = Track::default();
        }
        if tr.active {
            let since = tr.since_ms.unwrap_or(s.now_ms);
            breaches.push(Breach {
                signal: *sig,
                value: v,
                trigger: t.trigger,
                since_ms: since,
                active_since_ms: since + t.grace_ms,
            });
        }
    }
    (out, breaches)
}

/// Whether any threshold is crossed, active or still in its grace period.
pub fn any_pending(tracks: &[Track; 5]) -> bool {
    tracks.iter().any(|t| t.since_ms.is_some())
}

/// What the agent knows of one running zone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ZoneView {
    pub name: String,
    pub priority: Priority,
    /// Anonymous memory plus swap charged to the zone.
    pub usage_bytes: u64,
    /// `memory.request` (0 when not set).
    pub request_bytes: u64,
    pub booted_at_ms: u64,
    /// The zone's own memory PSI "full" avg10 (cgroup v2 only): reported in the
    /// event, not used to rank (a zone stalls because others crowd it out as often as
    /// because of itself).
    pub psi_full_avg10: Option<f64>,
    /// Suspended already (`warren suspend`): not suspended again; evicted last.
    pub suspended: bool,
    /// CPU seconds per second since boot: the lower, the idler.
    pub cpu_rate: f64,
}

impl ZoneView {
    /// Usage above the request (negative below it).
    pub fn excess(&self) -> i128 {
        self.usage_bytes as i128 - self.request_bytes as i128
    }
}

/// Policy knobs of the choice.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Policy {
    /// After an eviction, wait this long (to observe its effect) before the next.
    pub cooldown_ms: u64,
    /// Whether a critical zone may be evicted once no lower class runs.
    pub evict_critical: bool,
    /// Suspend a zone (never a critical one) before halting any.
    pub suspend_first: bool,
}

/// What the agent does to the zone it chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Suspend,
    Evict,
}

/// The zone to suspend or evict, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Eviction {
    pub zone: String,
    pub action: Action,
    pub reason: String,
}

/// Rank running zones for eviction: lowest class first (best-effort, normal, then
/// critical), within a class the most usage above request first, then the youngest.
pub fn rank(zones: &[ZoneView]) -> Vec<&ZoneView> {
    let mut z: Vec<&ZoneView> = zones.iter().collect();
    z.sort_by(|a, b| {
        a.priority
            .cmp(&b.priority)
            .then(b.excess().cmp(&a.excess()))
            .then(b.booted_at_ms.cmp(&a.booted_at_ms))
            .then(a.name.cmp(&b.name))
    });
    z
}

/// Rank zones for suspension: running (not suspended) and not critical only; lowest
/// class first, then the most usage above request, then the idlest.
pub fn suspend_rank(zones: &[ZoneView]) -> Vec<&ZoneView> {
    let mut z: Vec<&ZoneView> = zones
        .iter()
        .filter(|z| !z.suspended && z.priority != Priority::Critical)
        .collect();
    z.sort_by(|a, b| {
        a.priority
            .cmp(&b.priority)
            .then(b.excess().cmp(&a.excess()))
            .then(a.cpu_rate.total_cmp(&b.cpu_rate))
            .then(a.name.cmp(&b.name))
    });
    z
}

fn mib(b: i128) -> String {
    format!("{} MiB", b >> 20)
}

fn class(p: Priority) -> &'static str {
    match p {
        Priority::BestEffort => "best-effort",
        Priority::Normal => "normal",
        Priority::Critical => "critical",
    }
}

/// Which zone to evict now, if any: only while a threshold is active, at most one per
/// cool-down, never a critical zone while a lower class runs (and only with
/// `evict_critical` at all).
pub fn choose(
    zones: &[ZoneView],
    breaches: &[Breach],
    last_eviction_ms: Option<u64>,
    now_ms: u64,
    policy: &Policy,
) -> Option<Eviction> {
    if breaches.is_empty() {
        return None;
    }
    if last_eviction_ms.is_some_and(|t| now_ms.saturating_sub(t) < policy.cooldown_ms) {
        return None;
    }
    let why: Vec<String> = breaches.iter().map(|b| b.describe(now_ms)).collect();
    let why = why.join("; ");
    if policy.suspend_first {
        if let Some(z) = suspend_rank(zones).first() {
            return Some(Eviction {
                zone: z.name.clone(),
                action: Action::Suspend,
                reason: format!(
                    "{why}; suspended before halting any zone ({}, {} above request, CPU {:.1} % since boot)",
                    class(z.priority),
                    mib(z.excess()),
                    z.cpu_rate * 100.0
                ),
            });
        }
    }
    let first = *rank(zones).first()?;
    if first.priority == Priority::Critical && !policy.evict_critical {
        return None;
    }
    Some(Eviction {
        zone: first.name.clone(),
        action: Action::Evict,
        reason: if policy.suspend_first {
            format!("{why}; no zone is left to suspend")
        } else {
            why
        },
    })
}

/// Everything the agent decides in one step, from plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub tracks: [Track; 5],
    pub breaches: Vec<Breach>,
    pub eviction: Option<Eviction>,
}

/// One step: advance the thresholds with `sample`, then choose among `zones`.
pub fn decide(
    th: &Thresholds,
    tracks: &[Track; 5],
    sample: &Sample,
    zones: &[ZoneView],
    last_eviction_ms: Option<u64>,
    policy: &Policy,
) -> Decision {
    let (tracks, breaches) = track(th, tracks, sample);
    let eviction = choose(zones, &breaches, last_eviction_ms, sample.now_ms, policy);
    Decision {
        tracks,
        breaches,
        eviction,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T: Threshold = Threshold {
        trigger: 10.0,
        clear: 20.0,
        grace_ms: 2000,
    };
    const HIGH: Threshold = Threshold {
        trigger: 80.0,
        clear: 70.0,
        grace_ms: 2000,
    };

    fn th() -> Thresholds {
        Thresholds([T, HIGH, HIGH, HIGH, HIGH])
    }

    fn avail(now_ms: u64, v: f64) -> Sample {
        Sample {
            now_ms,
            values: [Some(v), None, None, None, None],
        }
    }

    const POLICY: Policy = Policy {
        cooldown_ms: 5000,
        evict_critical: false,
        suspend_first: false,
    };

    fn zone(name: &str, priority: Priority, usage: u64, request: u64, booted: u64) -> ZoneView {
        ZoneView {
            name: name.into(),
            priority,
            usage_bytes: usage,
            request_bytes: request,
            booted_at_ms: booted,
            psi_full_avg10: None,
            suspended: false,
            cpu_rate: 0.0,
        }
    }

    #[test]
    fn pressure_suspends_the_least_important_idlest_zone_before_halting_any() {
        let policy = Policy {
            suspend_first: true,
            ..POLICY
        };
        let mut busy = zone("busy", Priority::BestEffort, 300 << 20, 100 << 20, 1);
        busy.cpu_rate = 0.5;
        let mut idle = zone("idle", Priority::BestEffort, 300 << 20, 100 << 20, 2);
        idle.cpu_rate = 0.01;
        let big = zone("big", Priority::Normal, 900 << 20, 0, 3);
        let crit = zone("crit", Priority::Critical, 2000 << 20, 0, 4);
        let mut zones = vec![busy, idle, big, crit];
        let mut tr = [Track::default(); 5];
        let mut pick = |zones: &[ZoneView]| {
            let d = decide(&th(), &tr, &avail(0, 1.0), zones, None, &policy);
            tr = d.tracks;
            let d = decide(&th(), &tr, &avail(3000, 1.0), zones, None, &policy);
            d.eviction
        };
        // The class first, then above request (a tie here), then the idlest.
        let e = pick(&zones).unwrap();
        assert_eq!((e.zone.as_str(), e.action), ("idle", Action::Suspend));
        assert!(
            e.reason.contains("suspended before halting any zone"),
            "{}",
            e.reason
        );
        zones[1].suspended = true;
        assert_eq!(pick(&zones).unwrap().zone, "busy");
        zones[0].suspended = true;
        assert_eq!(pick(&zones).unwrap().zone, "big");
        zones[2].suspended = true;
        // Only the critical zone runs: never suspended; a zone is evicted by the
        // eviction rank (the youngest suspended best-effort one), saying why.
        let e = pick(&zones).unwrap();
        assert_eq!(e.action, Action::Evict);
        assert_eq!(e.zone, "idle");
        assert!(
            e.reason.contains("no zone is left to suspend"),
            "{}",
            e.reason
        );
        // Only critical zones at all: nothing.
        assert_eq!(pick(&zones[3..]), None);
    }

    #[test]
    fn grace_and_hysteresis() {
        let mut tr = [Track::default(); 5];
        // Crossed at 0, still in grace at 1999.
        for (t, v) in [(0, 5.0), (1000, 5.0), (1999, 5.0)] {
            let (n, b) = track(&th(), &tr, &avail(t, v));
            assert!(b.is_empty(), "in grace at {t}");
            tr = n;
        }
        let (n, b) = track(&th(), &tr, &avail(2000, 5.0));
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].active_since_ms, 2000);
        assert!(b[0]
            .describe(2000)
            .contains("available memory 5.0% < 10% for 2.0 s"));
        tr = n;
        // Back above the trigger but inside the hysteresis band: still active.
        let (n, b) = track(&th(), &tr, &avail(2500, 15.0));
        assert_eq!(b.len(), 1);
        tr = n;
        // Past clear: over.
        let (n, b) = track(&th(), &tr, &avail(3000, 25.0));
        assert!(b.is_empty());
        assert_eq!(n[0], Track::default());
    }

    #[test]
    fn a_spike_shorter_than_grace_evicts_nothing() {
        let zones = vec![zone("a", Priority::BestEffort, 100, 0, 1)];
        let mut tr = [Track::default(); 5];
        for (t, v) in [(0, 1.0), (500, 1.0), (1500, 15.0), (2500, 1.0), (4000, 1.0)] {
            let d = decide(&th(), &tr, &avail(t, v), &zones, None, &POLICY);
            assert_eq!(d.eviction, None, "at {t}");
            tr = d.tracks;
        }
        // The second crossing started at 2500: active at 4500.
        let d = decide(&th(), &tr, &avail(4500, 1.0), &zones, None, &POLICY);
        assert_eq!(d.eviction.unwrap().zone, "a");
    }

    #[test]
    fn ranks_class_then_excess_then_youngest() {
        let zones = vec![
            zone("crit", Priority::Critical, 900, 0, 1),
            zone("n-big", Priority::Normal, 800, 0, 1),
            zone("be-old", Priority::BestEffort, 300, 100, 1),
            zone("be-young", Priority::BestEffort, 300, 100, 9),
            zone("be-small", Priority::BestEffort, 150, 100, 20),
        ];
        let order: Vec<&str> = rank(&zones).iter().map(|z| z.name.as_str()).collect();
        assert_eq!(order, ["be-young", "be-old", "be-small", "n-big", "crit"]);
    }

    #[test]
    fn critical_only_with_evict_critical() {
        let b = vec![Breach {
            signal: Signal::PsiFull,
            value: 50.0,
            trigger: 20.0,
            since_ms: 0,
            active_since_ms: 100,
        }];
        let zones = vec![zone("crit", Priority::Critical, 900, 0, 1)];
        assert_eq!(choose(&zones, &b, None, 1000, &POLICY), None);
        let p = Policy {
            evict_critical: true,
            ..POLICY
        };
        let e = choose(&zones, &b, None, 1000, &p).unwrap();
        assert_eq!(e.zone, "crit");
        assert!(
            e.reason.contains("memory PSI full avg10 50.0% > 20%"),
            "{}",
            e.reason
        );
    }

    fn priority() -> impl Strategy<Value = Priority> {
        prop_oneof![
            Just(Priority::BestEffort),
            Just(Priority::Normal),
            Just(Priority::Critical)
        ]
    }

    fn zones() -> impl Strategy<Value = Vec<ZoneView>> {
        prop::collection::vec(
            (priority(), 0u64..1 << 32, 0u64..1 << 31, 0u64..1_000_000),
            0..12,
        )
        .prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (p, u, r, b))| zone(&format!("z{i}"), p, u, r, b))
                .collect()
        })
    }

    fn value() -> impl Strategy<Value = Option<f64>> {
        prop_oneof![Just(None), (0.0f64..100_000.0).prop_map(Some)]
    }

    fn samples() -> impl Strategy<Value = Vec<[Option<f64>; 5]>> {
        prop::collection::vec(
            (value(), value(), value(), value(), value())
                .prop_map(|(a, b, c, d, e)| [a, b, c, d, e]),
            1..40,
        )
    }

    proptest! {
        #[test]
        fn never_critical_while_a_lower_class_runs(zs in zones(), crit in any::<bool>()) {
            let b = vec![Breach { signal: Signal::SwapUsed, value: 99.0, trigger: 80.0, since_ms: 0, active_since_ms: 0 }];
            let p = Policy { evict_critical: crit, ..POLICY };
            if let Some(e) = choose(&zs, &b, None, 10, &p) {
                let chosen = zs.iter().find(|z| z.name == e.zone).unwrap();
                // The lowest class present, and the most excess within it.
                let lowest = zs.iter().map(|z| z.priority).min().unwrap();
                prop_assert_eq!(chosen.priority, lowest);
                if chosen.priority == Priority::Critical {
                    prop_assert!(crit);
                }
                for z in zs.iter().filter(|z| z.priority == lowest) {
                    prop_assert!(z.excess() <= chosen.excess());
                    if z.excess() == chosen.excess() {
                        prop_assert!(z.booted_at_ms <= chosen.booted_at_ms);
                    }
                }
            } else {
                let lowest = zs.iter().map(|z| z.priority).min();
                prop_assert!(lowest.is_none() || (lowest == Some(Priority::Critical) && !crit));
            }
        }

        #[test]
        fn at_most_one_eviction_per_cooldown(zs in zones(), seq in samples(), step in 100u64..3000) {
            let thr = Thresholds([T, HIGH, HIGH, HIGH, HIGH]);
            let mut tr = [Track::default(); 5];
            let mut last: Option<u64> = None;
            for (i, values) in seq.iter().enumerate() {
                let now = i as u64 * step;
                let d = decide(&thr, &tr, &Sample { now_ms: now, values: *values }, &zs, last, &POLICY);
                tr = d.tracks;
                if d.eviction.is_some() {
                    prop_assert!(!d.breaches.is_empty());
                    if let Some(l) = last {
                        prop_assert!(now - l >= POLICY.cooldown_ms);
                    }
                    last = Some(now);
                }
            }
        }

        #[test]
        fn nothing_is_active_before_its_grace(seq in samples(), step in 10u64..500) {
            // Every breach was crossed at least grace_ms before it is reported.
            let thr = th();
            let mut tr = [Track::default(); 5];
            for (i, values) in seq.iter().enumerate() {
                let now = i as u64 * step;
                let (n, b) = track(&thr, &tr, &Sample { now_ms: now, values: *values });
                for br in &b {
                    prop_assert!(now - br.since_ms >= 2000);
                }
                tr = n;
            }
        }
    }
}
