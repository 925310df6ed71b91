//! `warren demo`: the main job in one command. Creates the `host` template, clones N
//! zones from one installed zone, boots them all, measures what each cost (clone and
//! boot latency, host memory from /proc/meminfo deltas, disk, idle CPU), then halts and
//! removes everything it made.
//!
//! Zones are booted from this single thread (spawning requires it; see warren_sys::spawn).

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::Result;
use crate::fsutil::disk_usage;
use crate::storage::template::{self, Source};
use crate::zone::{self, Context};
use crate::{stats, storage};

/// Zone names the demo owns.
pub const PREFIX: &str = "warren-demo-";
const TEMPLATE: &str = "host";
/// `--net bridge`: the demo's own bridge and subnet (never the operator's warren0).
pub const BRIDGE: &str = "wdemo0";
pub const SUBNET: &str = "10.239.0.0/16";

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

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub zones: usize,
    /// "none" or "bridge".
    pub net: String,
    pub kernel: String,
    pub cpus: usize,
    pub mem_total_mib: f64,
    pub backend: String,
    pub cgroup_version: String,
    pub clone_ms: Summary,
    pub boot_ms: Summary,
    /// Host memory per running idle zone: the rise of unreclaimable kernel and
    /// process memory (see `mem_sample`) divided by N.
    pub mem_per_zone_mib: f64,
    /// The same from the MemAvailable drop (moves with unrelated page cache).
    pub mem_available_per_zone_mib: f64,
    /// Disk per untouched, booted clone (zone directory, all files).
    pub disk_per_zone_kib: f64,
    /// CPU used by all zones together while idle, in % of one CPU.
    pub idle_cpu_pct: f64,
    pub halt_ms: Summary,
    pub delete_ms: Summary,
    pub total_s: f64,
}

/// Progress callbacks (the CLI draws bars; tests pass a no-op).
pub trait Progress {
    fn phase(&mut self, name: &str, len: u64);
    fn step(&mut self);
    fn done(&mut self);
}

pub struct NoProgress;
impl Progress for NoProgress {
    fn phase(&mut self, _: &str, _: u64) {}
    fn step(&mut self) {}
    fn done(&mut self) {}
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// (memory zones pin, MemAvailable), in bytes.
///
/// "Pinned" is AnonPages + Shmem + SUnreclaim + KernelStack + PageTables + Percpu: the
/// memory the kernel cannot reclaim, summed from the counters that zones add to (their
/// processes' pages, namespaces, cgroups, mounts). MemFree and MemAvailable also move
/// with page cache and per-CPU free lists that have nothing to do with the zones, which
/// makes them noisy at a few hundred KiB per zone; both are reported.
fn mem_sample(ctx: &Context) -> (u64, u64) {
    let m = stats::meminfo(&ctx.host.proc);
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
    (pinned, g("MemAvailable"))
}

/// Remove every zone the demo owns (leftovers of an interrupted run, or this run's).
pub fn cleanup(ctx: &Context) -> Result<usize> {
    let mut n = 0;
    for name in zone::names_in(&ctx.layout)? {
        if name.starts_with(PREFIX) {
            zone::delete(ctx, &name, true)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Remove the demo's bridge if no zone uses it any more (with every other unused
/// lease and bridge of this state root, as `warren gc` would).
fn cleanup_net(ctx: &Context) -> Result<()> {
    let live = |name: &str, addr| ctx.lease_is_live(name, addr);
    crate::net::gc(&ctx.layout, &ctx.host, ctx.boot_id(), &live).map(drop)
}

/// Run the demo with `n` zones; `bridge`: bridged networking instead of none.
pub fn run(ctx: &Context, n: usize, bridge: bool, progress: &mut dyn Progress) -> Result<Report> {
    ctx.require_root()?;
    let started = Instant::now();
    cleanup(ctx)?;
    let made_template = match template::load(&ctx.layout, TEMPLATE) {
        Ok(_) => false,
        Err(crate::Error::NoSuchTemplate(_)) => {
            let (kind, _) = storage::choose(ctx.layout.root(), &ctx.host.proc)?;
            template::create(&ctx.layout, TEMPLATE, &Source::Host, kind)?;
            true
        }
        Err(e) => return Err(e),
    };
    let result = measure(ctx, n, bridge, progress);
    progress.done();
    let cleaned = cleanup(ctx).and_then(|_| if bridge { cleanup_net(ctx) } else { Ok(()) });
    if made_template {
        let _ = template::delete(&ctx.layout, TEMPLATE);
    }
    let mut report = result?;
    cleaned?;
    report.total_s = started.elapsed().as_secs_f64();
    Ok(report)
}

fn measure(ctx: &Context, n: usize, bridge: bool, progress: &mut dyn Progress) -> Result<Report> {
    let base = format!("{PREFIX}base");
    let sets: Vec<String> = if bridge {
        vec![
            "net=bridge".into(),
            format!("net-bridge={BRIDGE}"),
            format!("net-subnet={SUBNET}"),
        ]
    } else {
        Vec::new()
    };
    zone::create(ctx, &base, Some(TEMPLATE), None, &sets)?;
    zone::install(ctx, &base)?;
    let names: Vec<String> = (1..=n).map(|i| format!("{PREFIX}{i:04}")).collect();

    progress.phase("clone", n as u64);
    let mut clone_ms = Vec::with_capacity(n);
    for name in &names {
        let t = Instant::now();
        zone::clone(ctx, &base, name)?;
        clone_ms.push(ms(t.elapsed()));
        progress.step();
    }

    // Let the page cache and slab settle before the baseline.
    std::thread::sleep(Duration::from_millis(500));
    let (used_before, avail_before) = mem_sample(ctx);
    progress.phase("boot", n as u64);
    let mut boot_ms = Vec::with_capacity(n);
    for name in &names {
        let t = Instant::now();
        zone::boot(ctx, name)?;
        boot_ms.push(ms(t.elapsed()));
        progress.step();
    }
    progress.phase("measure (idle 3 s)", 3);
    let cgroups: Vec<_> = names
        .iter()
        .filter_map(|name| zone::load(ctx, name).ok()?.runtime.map(|r| r.cgroups))
        .collect();
    let cpu_before: u64 = cgroups.iter().filter_map(|c| c.cpu_ns()).sum();
    let t_idle = Instant::now();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_secs(1));
        progress.step();
    }
    let cpu_after: u64 = cgroups.iter().filter_map(|c| c.cpu_ns()).sum();
    let idle_cpu_pct =
        (cpu_after.saturating_sub(cpu_before)) as f64 / t_idle.elapsed().as_nanos() as f64 * 100.0;
    let (used_after, avail_after) = mem_sample(ctx);
    let per_zone = |d: i64| d as f64 / n.max(1) as f64 / (1 << 20) as f64;
    let mem_per_zone_mib = per_zone(used_after as i64 - used_before as i64);
    let mem_available_per_zone_mib = per_zone(avail_before as i64 - avail_after as i64);
    let disk: u64 = names
        .iter()
        .map(|name| disk_usage(&ctx.layout.zone_dir(name)).unwrap_or(0))
        .sum();

    progress.phase("halt", n as u64);
    let mut halt_ms = Vec::with_capacity(n);
    for name in &names {
        let t = Instant::now();
        zone::halt(ctx, name, Some(Duration::from_secs(5)))?;
        halt_ms.push(ms(t.elapsed()));
        progress.step();
    }
    progress.phase("delete", n as u64);
    let mut delete_ms = Vec::with_capacity(n);
    for name in &names {
        let t = Instant::now();
        zone::delete(ctx, name, true)?;
        delete_ms.push(ms(t.elapsed()));
        progress.step();
    }
    let (_, hier) = ctx.cgroups()?;
    let mem = stats::meminfo(&ctx.host.proc);
    let base_zone = zone::load(ctx, &base)?;
    Ok(Report {
        zones: n,
        net: if bridge { "bridge" } else { "none" }.into(),
        kernel: warren_sys::kernel_release(),
        cpus: stats::online_cpus(&ctx.host.sys).len(),
        mem_total_mib: mem.get("MemTotal").copied().unwrap_or(0) as f64 / (1 << 20) as f64,
        backend: base_zone
            .lifecycle
            .backend
            .map(|b| b.to_string())
            .unwrap_or_default(),
        cgroup_version: hier.version.to_string(),
        clone_ms: summarize(&clone_ms),
        boot_ms: summarize(&boot_ms),
        mem_per_zone_mib,
        mem_available_per_zone_mib,
        disk_per_zone_kib: disk as f64 / n.max(1) as f64 / 1024.0,
        idle_cpu_pct,
        halt_ms: summarize(&halt_ms),
        delete_ms: summarize(&delete_ms),
        total_s: 0.0,
    })
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
}
