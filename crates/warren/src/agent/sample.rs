//! The agent's readers: host memory, swap, swap I/O and PSI from an injectable /proc
//! root; a memory budget from a watched cgroup; per-zone usage from zone cgroups.
//! Readers only read; the numbers become a [`Sample`] for the pure decision.

use std::collections::VecDeque;
use std::path::Path;

use serde::Serialize;

use super::decide::{Sample, ZoneView};
use crate::cgroups::CgroupSet;
use crate::config::Priority;
use crate::stat::readers::{self, parse_keyed, Pressure};
use crate::stats;

/// What /proc says about the host's memory, in bytes and pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct HostMemory {
    pub mem_total: u64,
    pub mem_available: u64,
    pub swap_total: u64,
    pub swap_free: u64,
    /// Pages swapped in / out since boot (/proc/vmstat pswpin, pswpout).
    pub pswpin: u64,
    pub pswpout: u64,
    pub psi: Option<Pressure>,
}

/// Parse /proc/vmstat's pswpin and pswpout.
pub fn parse_vmstat_swap(text: &str) -> (u64, u64) {
    let m = parse_keyed(text);
    (
        m.get("pswpin").copied().unwrap_or(0),
        m.get("pswpout").copied().unwrap_or(0),
    )
}

/// Read the host's memory from `proc_root`.
pub fn host(proc_root: &Path) -> HostMemory {
    let mem = stats::meminfo(proc_root);
    let get = |k: &str| mem.get(k).copied().unwrap_or(0);
    let (pswpin, pswpout) =
        parse_vmstat_swap(&std::fs::read_to_string(proc_root.join("vmstat")).unwrap_or_default());
    HostMemory {
        mem_total: get("MemTotal"),
        mem_available: get("MemAvailable"),
        swap_total: get("SwapTotal"),
        swap_free: get("SwapFree"),
        pswpin,
        pswpout,
        psi: readers::host_pressure(proc_root),
    }
}

/// A memory budget read from a cgroup (v1 or v2) the operator gave warren.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Budget {
    /// The cgroup's memory limit.
    pub limit: u64,
    /// Its working set: charged memory less inactive page cache (what cannot be
    /// dropped cheaply), as the kubelet counts it.
    pub working_set: u64,
    pub swap_used: u64,
    /// Swap it may use: v1 memsw limit − limit, v2 memory.swap.max; `None`: unlimited.
    pub swap_limit: Option<u64>,
    pub psi: Option<Pressure>,
}

fn read_num(dir: &Path, file: &str) -> Option<u64> {
    let s = std::fs::read_to_string(dir.join(file)).ok()?;
    let s = s.trim();
    if s == "max" {
        return Some(u64::MAX);
    }
    s.parse().ok()
}

/// Unlimited in cgroup terms (v1 reports a page-rounded i64::MAX).
fn finite(n: u64) -> Option<u64> {
    (n < 1 << 60).then_some(n)
}

/// Read the budget of the cgroup directory `dir`; `None` when it has no memory limit.
pub fn budget(dir: &Path) -> Option<Budget> {
    let stat_text = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let stat = parse_keyed(&stat_text);
    if dir.join("memory.limit_in_bytes").exists() {
        let limit = finite(read_num(dir, "memory.limit_in_bytes")?)?;
        let usage = read_num(dir, "memory.usage_in_bytes")?;
        let inactive = stat.get("total_inactive_file").copied().unwrap_or(0);
        let memsw_usage = read_num(dir, "memory.memsw.usage_in_bytes");
        let swap_used = match memsw_usage {
            Some(m) => m.saturating_sub(usage),
            None => stat.get("total_swap").copied().unwrap_or(0),
        };
        let swap_limit = read_num(dir, "memory.memsw.limit_in_bytes")
            .and_then(finite)
            .map(|m| m.saturating_sub(limit));
        Some(Budget {
            limit,
            working_set: usage.saturating_sub(inactive),
            swap_used,
            swap_limit,
            psi: None,
        })
    } else {
        let limit = finite(read_num(dir, "memory.max")?)?;
        let usage = read_num(dir, "memory.current")?;
        let inactive = stat.get("inactive_file").copied().unwrap_or(0);
        Some(Budget {
            limit,
            working_set: usage.saturating_sub(inactive),
            swap_used: read_num(dir, "memory.swap.current").unwrap_or(0),
            swap_limit: read_num(dir, "memory.swap.max").and_then(finite),
            psi: std::fs::read_to_string(dir.join("memory.pressure"))
                .ok()
                .and_then(|t| readers::parse_pressure(&t)),
        })
    }
}

/// Swap I/O counters over a sliding window, for rates that one burst does not swing.
#[derive(Debug, Clone, Default)]
pub struct Rates {
    window_ms: u64,
    points: VecDeque<(u64, u64, u64)>,
}

impl Rates {
    pub fn new(window_ms: u64) -> Rates {
        Rates {
            window_ms,
            points: VecDeque::new(),
        }
    }

    /// Add counters read at `now_ms`; drop points older than the window.
    pub fn push(&mut self, now_ms: u64, pswpin: u64, pswpout: u64) {
        self.points.push_back((now_ms, pswpin, pswpout));
        while self.points.len() > 2 && now_ms.saturating_sub(self.points[1].0) >= self.window_ms {
            self.points.pop_front();
        }
    }

    /// (swap-in, swap-out) pages per second over the window; `None` before two points.
    pub fn per_second(&self) -> Option<(f64, f64)> {
        let (t0, i0, o0) = *self.points.front()?;
        let (t1, i1, o1) = *self.points.back()?;
        if t1 <= t0 {
            return None;
        }
        let s = (t1 - t0) as f64 / 1000.0;
        Some((
            i1.saturating_sub(i0) as f64 / s,
            o1.saturating_sub(o0) as f64 / s,
        ))
    }
}

/// The signals, from the host (or the watched budget, which wins where it says
/// something) and the swap rates.
pub fn signals(now_ms: u64, h: &HostMemory, b: Option<&Budget>, rates: &Rates) -> Sample {
    let pct = |part: u64, whole: u64| (whole > 0).then(|| part as f64 * 100.0 / whole as f64);
    let host_swap_used = h.swap_total.saturating_sub(h.swap_free);
    let (available, swap_used, psi) = match b {
        Some(b) => {
            let swap_room = b.swap_limit.map_or(h.swap_total, |l| l.min(h.swap_total));
            (
                pct(b.limit.saturating_sub(b.working_set), b.limit),
                pct(b.swap_used, swap_room),
                b.psi.or(h.psi),
            )
        }
        None => (
            pct(h.mem_available, h.mem_total),
            pct(host_swap_used, h.swap_total),
            h.psi,
        ),
    };
    let (rin, rout) = match rates.per_second() {
        Some((i, o)) => (Some(i), Some(o)),
        None => (None, None),
    };
    Sample {
        now_ms,
        values: [available, swap_used, rin, rout, psi.map(|p| p.full_avg10)],
    }
}

/// A running zone's view for the decision: its anonymous memory and swap from its
/// cgroup, its class and request from its config.
pub fn zone_view(
    name: &str,
    set: &CgroupSet,
    priority: Priority,
    request: Option<u64>,
    booted_at_ms: u64,
    suspended: bool,
) -> ZoneView {
    let m = readers::zone_memory(set);
    let up_s = (crate::agent::act::now_ms().saturating_sub(booted_at_ms) as f64 / 1000.0).max(1.0);
    ZoneView {
        name: name.to_string(),
        priority,
        usage_bytes: m.anon_bytes.unwrap_or(0) + m.swap_bytes.unwrap_or(0),
        request_bytes: request.unwrap_or(0),
        booted_at_ms,
        psi_full_avg10: readers::zone_pressure(set).map(|p| p.full_avg10),
        suspended,
        cpu_rate: set.cpu_ns().map_or(0.0, |ns| ns as f64 / 1e9 / up_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn host_from_a_fake_proc() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path();
        fs::write(
            p.join("meminfo"),
            "MemTotal:       1000 kB\nMemAvailable:    250 kB\nSwapTotal:       400 kB\nSwapFree:        100 kB\n",
        )
        .unwrap();
        fs::write(p.join("vmstat"), "nr_free_pages 5\npswpin 10\npswpout 30\n").unwrap();
        fs::create_dir(p.join("pressure")).unwrap();
        fs::write(
            p.join("pressure/memory"),
            "some avg10=3.00 avg60=0 avg300=0 total=1\nfull avg10=1.50 avg60=0 avg300=0 total=1\n",
        )
        .unwrap();
        let h = host(p);
        assert_eq!(h.mem_total, 1000 * 1024);
        assert_eq!((h.pswpin, h.pswpout), (10, 30));
        assert_eq!(h.psi.unwrap().full_avg10, 1.5);
        let mut r = Rates::new(5000);
        r.push(0, 10, 30);
        assert_eq!(
            signals(0, &h, None, &r).values[2],
            None,
            "one point: no rate"
        );
        r.push(2000, 110, 430);
        let s = signals(2000, &h, None, &r);
        assert_eq!(
            s.values,
            [Some(25.0), Some(75.0), Some(50.0), Some(200.0), Some(1.5)]
        );
    }

    #[test]
    fn rates_average_over_the_window() {
        let mut r = Rates::new(2000);
        for t in 0..10u64 {
            r.push(t * 1000, t * 100, 0);
        }
        // A burst at the end moves a windowed average by a fraction of itself.
        r.push(10_000, 900 + 1000, 0);
        let (i, _) = r.per_second().unwrap();
        assert!((i - 550.0).abs() < 1e-9, "{i}");
    }

    #[test]
    fn v1_and_v2_budgets() {
        let tmp = tempfile::tempdir().unwrap();
        let v1 = tmp.path().join("v1");
        fs::create_dir(&v1).unwrap();
        fs::write(v1.join("memory.limit_in_bytes"), "1000\n").unwrap();
        fs::write(v1.join("memory.usage_in_bytes"), "900\n").unwrap();
        fs::write(v1.join("memory.memsw.usage_in_bytes"), "1200\n").unwrap();
        fs::write(v1.join("memory.memsw.limit_in_bytes"), "1500\n").unwrap();
        fs::write(v1.join("memory.stat"), "total_inactive_file 100\n").unwrap();
        let b = budget(&v1).unwrap();
        assert_eq!(
            (b.limit, b.working_set, b.swap_used, b.swap_limit),
            (1000, 800, 300, Some(500))
        );
        fs::write(v1.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(budget(&v1), None, "no limit, no budget");

        let v2 = tmp.path().join("v2");
        fs::create_dir(&v2).unwrap();
        fs::write(v2.join("memory.max"), "1000\n").unwrap();
        fs::write(v2.join("memory.current"), "500\n").unwrap();
        fs::write(v2.join("memory.swap.current"), "50\n").unwrap();
        fs::write(v2.join("memory.swap.max"), "max\n").unwrap();
        fs::write(v2.join("memory.stat"), "anon 400\ninactive_file 100\n").unwrap();
        fs::write(
            v2.join("memory.pressure"),
            "some avg10=9.00 avg60=0 avg300=0 total=1\nfull avg10=4.00 avg60=0 avg300=0 total=1\n",
        )
        .unwrap();
        let b = budget(&v2).unwrap();
        assert_eq!(
            (b.limit, b.working_set, b.swap_used, b.swap_limit),
            (1000, 400, 50, None)
        );
        let h = HostMemory {
            swap_total: 200,
            ..HostMemory::default()
        };
        let s = signals(0, &h, Some(&b), &Rates::new(1000));
        assert_eq!(s.values[0], Some(60.0));
        assert_eq!(
            s.values[1],
            Some(25.0),
            "unlimited swap: the host's is the room"
        );
        assert_eq!(s.values[4], Some(4.0), "the cgroup's own PSI");
    }
}
