//! Measurements shared by `warren demo` and `warren bench density`: latency summaries,
//! progress callbacks, host memory samples (the pinned sum, MemAvailable and the
//! memstat breakdown). The measured pass itself is the bench's one step loop
//! ([`crate::bench::system`]), which `warren demo` uses through
//! [`crate::bench::zones::run_pass`].

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::stat::memstat::{host_memory, HostMemory};
use crate::stats;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub median: f64,
    pub p99: f64,
    pub max: f64,
}

/// Median, p99 and max of a sample.
pub fn summarize(values: &[f64]) -> Summary {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let pick = |q: f64| -> f64 {
        if v.is_empty() {
            return 0.0;
        }
        let idx = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
        v[idx]
    };
    let median = if v.is_empty() {
        0.0
    } else if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    Summary {
        median,
        p99: pick(0.99),
        max: v.last().copied().unwrap_or(0.0),
    }
}

/// Progress callbacks (the CLI draws bars; tests pass a no-op).
pub trait Progress {
    fn phase(&mut self, name: &str, len: u64);
    fn step(&mut self);
    fn done(&mut self);
    /// The signal that asked the work to stop, if one came (checked after each step;
    /// the bench then ends with an error and its guards remove what it made).
    fn interrupted(&mut self) -> Option<i32> {
        None
    }
}

pub struct NoProgress;
impl Progress for NoProgress {
    fn phase(&mut self, _: &str, _: u64) {}
    fn step(&mut self) {}
    fn done(&mut self) {}
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One reading of /proc/meminfo.
#[derive(Debug, Clone)]
pub struct MemSample {
    /// AnonPages + Shmem + SUnreclaim + KernelStack + PageTables + Percpu, bytes.
    pub pinned: u64,
    pub available: u64,
    pub host: Option<HostMemory>,
    /// The whole reading, bytes per key (for `bench::breakdown`).
    pub meminfo: std::collections::BTreeMap<String, u64>,
}

/// Read /proc/meminfo.
///
/// "Pinned" is AnonPages + Shmem + SUnreclaim + KernelStack + PageTables + Percpu: the
/// memory the kernel cannot reclaim, summed from the counters that zones add to (their
/// processes' pages, namespaces, cgroups, mounts). MemFree and MemAvailable also move
/// with page cache and per-CPU free lists that have nothing to do with the zones, which
/// makes them noisy at a few hundred KiB per zone; both are reported.
pub fn mem_sample(proc_root: &Path) -> MemSample {
    let m = stats::meminfo(proc_root);
    let g = |k: &str| m.get(k).copied().unwrap_or(0);
    let pinned = [
        "AnonPages",
        "Shmem",
        "SUnreclaim",
        "KernelStack",
        "PageTables",
        "Percpu",
    ]
    .iter()
    .map(|k| g(k))
    .sum();
    MemSample {
        pinned,
        available: g("MemAvailable"),
        host: host_memory(&m),
        meminfo: m,
    }
}

/// Memory per zone from two samples, in KiB (a delta may be negative: noise).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MemPerZone {
    /// The rise of the pinned sum (see [`mem_sample`]).
    pub pinned_kib: f64,
    /// The drop of MemAvailable.
    pub available_kib: f64,
    /// memstat's kernel row (slab, stacks, page tables and the unnamed rest).
    pub kernel_kib: f64,
    pub anon_kib: f64,
    pub page_tables_kib: f64,
    /// Slab, reclaimable and not.
    pub slab_kib: f64,
}

/// Per-zone deltas between `before` and `after` for `n` zones.
pub fn mem_per_zone(before: &MemSample, after: &MemSample, n: usize) -> MemPerZone {
    let per = |d: i128| d as f64 / n.max(1) as f64 / 1024.0;
    let d = |a: u64, b: u64| b as i128 - a as i128;
    let mut r = MemPerZone {
        pinned_kib: per(d(before.pinned, after.pinned)),
        available_kib: per(d(after.available, before.available)),
        ..MemPerZone::default()
    };
    if let (Some(b), Some(a)) = (&before.host, &after.host) {
        r.kernel_kib = per(d(b.kernel.total_bytes, a.kernel.total_bytes));
        r.anon_kib = per(d(b.anon_bytes, a.anon_bytes));
        r.page_tables_kib = per(d(b.kernel.page_tables_bytes, a.kernel.page_tables_bytes));
        let slab =
            |h: &HostMemory| h.kernel.slab_reclaimable_bytes + h.kernel.slab_unreclaimable_bytes;
        r.slab_kib = per(d(slab(b), slab(a)));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        let s = summarize(&[5.0, 1.0, 3.0]);
        assert_eq!((s.median, s.max), (3.0, 5.0));
        let s = summarize(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(s.median, 2.5);
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(summarize(&v).p99, 99.0);
        assert_eq!(summarize(&[]).median, 0.0);
    }

    #[test]
    fn per_zone_deltas() {
        let m = |anon: u64| {
            stats::parse_meminfo(&format!(
                "MemTotal: 100000 kB\nMemFree: 50000 kB\nMemAvailable: {} kB\nAnonPages: {anon} kB\n\
                 SUnreclaim: 100 kB\nSReclaimable: 10 kB\nPageTables: 20 kB\n",
                60000 - anon
            ))
        };
        let s = |anon| {
            let m = m(anon);
            MemSample {
                pinned: m["AnonPages"] + m["SUnreclaim"] + m["PageTables"],
                available: m["MemAvailable"],
                host: host_memory(&m),
                meminfo: m,
            }
        };
        let r = mem_per_zone(&s(1000), &s(3000), 4);
        assert_eq!(r.pinned_kib, 500.0);
        assert_eq!(r.available_kib, 500.0);
        assert_eq!(r.anon_kib, 500.0);
        assert_eq!((r.slab_kib, r.page_tables_kib), (0.0, 0.0));
    }
}
