//! The idle policy: a zone with `suspend-after = "10m"` is suspended by the agent once
//! it has used no CPU and moved no network traffic for that long (docs/suspend.md,
//! "Idle zones").
//!
//! Every `idle-scan-s` the agent reads each running zone's CPU time (its cgroup) and,
//! for a bridged zone, the bytes through the host end of its veth. [`step`] (pure)
//! keeps, per zone, the last reading and since when it has not moved: CPU time growing
//! by less than [`IDLE_CPU`] of the elapsed time counts as idle (a sleeping init's
//! wake-ups), any traffic does not. [`due`] says when the zone has been idle long
//! enough.

use std::collections::HashMap;
use std::path::Path;

/// CPU use below this share of one CPU counts as idle (0.1 %).
pub const IDLE_CPU: f64 = 0.001;

/// What is read of a zone at each scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Activity {
    pub cpu_ns: u64,
    /// rx + tx bytes of its veth (0 without a bridge).
    pub net_bytes: u64,
}

/// One zone's idle state between scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Idle {
    pub last: Activity,
    pub last_ms: u64,
    /// Idle since (the last activity seen).
    pub since_ms: u64,
}

/// Advance a zone's idle state with a new reading at `now_ms` (pure).
pub fn step(prev: Option<Idle>, now: Activity, now_ms: u64) -> Idle {
    let Some(p) = prev else {
        return Idle {
            last: now,
            last_ms: now_ms,
            since_ms: now_ms,
        };
    };
    let elapsed_ns = now_ms.saturating_sub(p.last_ms) as f64 * 1e6;
    let cpu = now.cpu_ns.saturating_sub(p.last.cpu_ns) as f64;
    // A counter that went down: a new boot (the caller also drops the state then).
    let restarted = now.cpu_ns < p.last.cpu_ns || now.net_bytes < p.last.net_bytes;
    let active = restarted || cpu > elapsed_ns * IDLE_CPU || now.net_bytes != p.last.net_bytes;
    Idle {
        last: now,
        last_ms: now_ms,
        since_ms: if active { now_ms } else { p.since_ms },
    }
}

/// Whether a zone idle as `i` is due for suspension after `after_s` seconds (pure).
pub fn due(i: &Idle, after_s: u64, now_ms: u64) -> bool {
    now_ms.saturating_sub(i.since_ms) >= after_s.saturating_mul(1000)
}

/// The bytes through a host-side veth (`/sys/class/net/<veth>/statistics`).
pub fn veth_bytes(sys_root: &Path, veth: &str) -> u64 {
    ["rx_bytes", "tx_bytes"]
        .iter()
        .filter_map(|f| {
            std::fs::read_to_string(
                sys_root
                    .join("class/net")
                    .join(veth)
                    .join("statistics")
                    .join(f),
            )
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
        })
        .sum()
}

/// The idle state of every watched zone, by (name, boot time).
pub type Tracks = HashMap<(String, u64), Idle>;

#[cfg(test)]
mod tests {
    use super::*;

    fn a(cpu_ms: u64, net: u64) -> Activity {
        Activity {
            cpu_ns: cpu_ms * 1_000_000,
            net_bytes: net,
        }
    }

    #[test]
    fn a_zone_is_idle_after_the_time_without_cpu_or_network() {
        let mut i = step(None, a(500, 100), 0);
        assert!(!due(&i, 600, 0));
        // 10 minutes, a sleeping init's few microseconds of CPU: idle all along.
        for t in 1..=20 {
            i = step(Some(i), a(500 + t, 100), t * 30_000);
        }
        assert_eq!(i.since_ms, 0);
        assert!(due(&i, 600, 600_000));
        // CPU: active again.
        i = step(Some(i), a(2_000, 100), 630_000);
        assert_eq!(i.since_ms, 630_000);
        assert!(!due(&i, 600, 640_000));
        // A single packet: active.
        i = step(Some(i), a(2_000, 101), 660_000);
        assert_eq!(i.since_ms, 660_000);
        // A counter that went backwards (a reboot): starts over.
        i = step(Some(i), a(1, 0), 690_000);
        assert_eq!(i.since_ms, 690_000);
    }
}
