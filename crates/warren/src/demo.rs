//! `warren demo`: the main job in one command. Creates the `host` template, clones N
//! zones from one installed zone, boots them all (clone, boot and halt through the
//! pipeline of `zone::pipeline`, `--jobs` zones at a time), measures what each cost (clone and
//! boot latency, host memory from /proc/meminfo deltas, disk, idle CPU), then halts and
//! removes everything it made. The measuring itself is [`crate::bench::zones::run_pass`],
//! shared with `warren bench density`.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::bench::zones::{run_pass, ZonePass};
use crate::error::Result;
pub use crate::measure::{summarize, NoProgress, Progress, Summary};
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
pub struct Report {
    pub zones: usize,
    /// Zones cloned, booted and halted at once (`--jobs`).
    pub jobs: usize,
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

/// The error of a demo stopped by `sig` after it removed what it made.
pub fn stopped(sig: i32) -> crate::Error {
    crate::Error::Relayed {
        message: format!("demo: interrupted by signal {sig}; what it had made was removed"),
        exit: crate::ExitCode::Failure,
    }
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
pub fn cleanup_net(ctx: &Context) -> Result<()> {
    let live = |name: &str, addr| ctx.lease_is_live(name, addr);
    crate::net::gc(&ctx.layout, &ctx.host, ctx.boot_id(), &live).map(drop)
}

/// Run the demo with `n` zones, `jobs` at a time; `bridge`: bridged networking
/// instead of none.
pub fn run(
    ctx: &Context,
    n: usize,
    jobs: usize,
    bridge: bool,
    progress: &mut dyn Progress,
) -> Result<Report> {
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
    let result = measure(ctx, n, jobs, bridge, progress);
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

fn measure(
    ctx: &Context,
    n: usize,
    jobs: usize,
    bridge: bool,
    progress: &mut dyn Progress,
) -> Result<Report> {
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
    let pass = ZonePass {
        base: &base,
        prefix: PREFIX,
        n,
        idle: Duration::from_secs(3),
        label: "",
        jobs,
    };
    let r = run_pass(ctx, &pass, progress)?;
    let (_, hier) = ctx.cgroups()?;
    let mem = stats::meminfo(&ctx.host.proc);
    let base_zone = zone::load(ctx, &base)?;
    Ok(Report {
        zones: n,
        jobs,
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
        clone_ms: summarize(&r.clone_ms),
        boot_ms: summarize(&r.boot_ms),
        mem_per_zone_mib: r.mem.pinned_kib / 1024.0,
        mem_available_per_zone_mib: r.mem.available_kib / 1024.0,
        disk_per_zone_kib: r.disk_bytes as f64 / n.max(1) as f64 / 1024.0,
        idle_cpu_pct: r.idle_cpu_pct,
        halt_ms: summarize(&r.halt_ms),
        delete_ms: summarize(&r.delete_ms),
        total_s: 0.0,
    })
}
