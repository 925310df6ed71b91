//! The timed run of a scale step: the workload in every zone at once for the
//! duration (pgbench through `warren login`, or the in-process open-loop http load,
//! [`super::openloop`]), while the zones' cgroups and /proc/meminfo are sampled every
//! 250 ms for peaks (and their OOM kill counters, read while the zones are there: an
//! evicted zone's cgroup is gone). When the duration is up, the step's `at_end` runs
//! once (see [`super::step`]).

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use super::guards::check_signals;
use super::login::{login, tail, Logins};
use super::openloop::{self, Latency};
use super::step::host_mem;
use super::{pgbench, HttpStep, Options};
use crate::cgroups::CgroupSet;
use crate::error::{Error, Result};
use crate::measure::Progress;
use crate::stats;
use crate::zone::Context;

/// Peaks sampled while the workload runs.
#[derive(Default)]
pub(super) struct Peaks {
    pub(super) zones_mem: u64,
    pub(super) host_used: u64,
    pub(super) swap_used: u64,
    /// The highest OOM kill count seen, per zone (in zone order).
    pub(super) oom_kills: Vec<u64>,
}

impl Peaks {
    fn sample(&mut self, proc_root: &Path, cgroups: &[CgroupSet], available_before: u64) {
        self.oom_kills.resize(cgroups.len(), 0);
        for (seen, c) in self.oom_kills.iter_mut().zip(cgroups) {
            *seen = (*seen).max(c.oom_kills().unwrap_or(0));
        }
        let zones: u64 = cgroups.iter().filter_map(|c| c.memory_bytes()).sum();
        let (avail, _, swap) = host_mem(proc_root);
        self.zones_mem = self.zones_mem.max(zones);
        self.host_used = self.host_used.max(available_before.saturating_sub(avail));
        self.swap_used = self.swap_used.max(swap);
    }
}

/// What one timed run measured.
pub(super) struct RunResult {
    pub(super) throughput: f64,
    pub(super) tpm: Option<f64>,
    pub(super) per_zone: Vec<f64>,
    pub(super) latency_avg_ms: f64,
    pub(super) latency_p99_ms: Option<f64>,
    pub(super) errors: u64,
    pub(super) failed_zones: Vec<String>,
    pub(super) zones_cpu_pct: f64,
    pub(super) peaks: Peaks,
    pub(super) http: Option<HttpStep>,
}

/// While `running()`, sample peaks every 250 ms and tick the progress bar once a second
/// (up to `secs`) since `t0`; call `at_end` once, when `secs` (and a second more) are up
/// or the run is over. Stops with an error when a caught signal came.
fn watch(
    secs: u64,
    t0: Instant,
    progress: &mut dyn Progress,
    running: &mut dyn FnMut() -> bool,
    at_end: &mut dyn FnMut(),
    sample: impl Fn(&mut Peaks),
) -> Result<Peaks> {
    let mut peaks = Peaks::default();
    let mut ticked = 0;
    let mut ended = false;
    while running() {
        check_signals("running the workload")?;
        sample(&mut peaks);
        std::thread::sleep(Duration::from_millis(250));
        let s = t0.elapsed().as_secs().min(secs);
        while ticked < s {
            progress.step();
            ticked += 1;
        }
        if !ended && t0.elapsed() >= Duration::from_secs(secs + 1) {
            at_end();
            ended = true;
        }
    }
    if !ended {
        at_end();
    }
    Ok(peaks)
}

fn cpu_ns(cgroups: &[CgroupSet]) -> u64 {
    cgroups.iter().filter_map(|c| c.cpu_ns()).sum()
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run_pgbench(
    ctx: &Context,
    opts: &Options,
    bin: &Path,
    names: &[String],
    logs: &Path,
    cgroups: &[CgroupSet],
    available_before: u64,
    progress: &mut dyn Progress,
    at_end: &mut dyn FnMut(),
) -> Result<RunResult> {
    let secs = opts.duration.as_secs().max(1);
    let threads = opts
        .clients
        .min(stats::online_cpus(&ctx.host.sys).len().max(1));
    progress.phase(&format!("N={} pgbench {secs} s", names.len()), secs);
    let mut l = Logins(Vec::new());
    let cpu0 = cpu_ns(cgroups);
    let t0 = Instant::now();
    for z in names {
        let log = logs.join(format!("{z}-pgbench.log"));
        let script = pgbench::run_script(bin, opts.clients, threads, secs);
        l.0.push((z.clone(), log.clone(), login(ctx, z, &script, &log)?));
    }
    let sample = |p: &mut Peaks| p.sample(&ctx.host.proc, cgroups, available_before);
    let peaks = watch(secs, t0, progress, &mut || !l.all_done(), at_end, sample)?;
    let zones_cpu_pct =
        cpu_ns(cgroups).saturating_sub(cpu0) as f64 / t0.elapsed().as_nanos() as f64 * 100.0;
    let mut per_zone = Vec::new();
    let (mut lat, mut errors, mut failed) = (Vec::new(), 0, Vec::new());
    for (zone, ok, out) in l.wait() {
        match pgbench::parse(&out).filter(|_| ok) {
            Some(o) => {
                per_zone.push(o.tps);
                lat.push(o.latency_ms);
                errors += o.failed;
            }
            None => {
                per_zone.push(0.0);
                failed.push(format!("{zone}: {}", tail(&out)));
            }
        }
    }
    if lat.is_empty() {
        return Err(Error::Refused(format!(
            "pgbench failed in every zone: {}",
            failed.join("; ")
        )));
    }
    let throughput: f64 = per_zone.iter().sum();
    Ok(RunResult {
        throughput,
        tpm: Some(throughput * 60.0),
        per_zone,
        latency_avg_ms: lat.iter().sum::<f64>() / lat.len() as f64,
        latency_p99_ms: None,
        errors,
        failed_zones: failed,
        zones_cpu_pct,
        peaks,
        http: None,
    })
}

pub(super) fn run_http(
    ctx: &Context,
    opts: &Options,
    addrs: &[SocketAddr],
    cgroups: &[CgroupSet],
    available_before: u64,
    progress: &mut dyn Progress,
    at_end: &mut dyn FnMut(),
) -> Result<RunResult> {
    let secs = opts.duration.as_secs().max(1);
    progress.phase(&format!("N={} http load {secs} s", addrs.len()), secs);
    let cpu0 = cpu_ns(cgroups);
    let host0 = stats::cpu_ticks(&ctx.host.proc);
    let t0 = Instant::now();
    let (a, rate, d) = (addrs.to_vec(), opts.http.rate, Duration::from_secs(secs));
    let handle = std::thread::spawn(move || openloop::run(a, rate, d));
    let sample = |p: &mut Peaks| p.sample(&ctx.host.proc, cgroups, available_before);
    let running = &mut || !handle.is_finished();
    let peaks = watch(secs, t0, progress, running, at_end, sample)?;
    let elapsed = t0.elapsed().as_secs_f64();
    let zones_cpu_pct = cpu_ns(cgroups).saturating_sub(cpu0) as f64 / (elapsed * 1e9) * 100.0;
    let host_cpu_pct = match (host0, stats::cpu_ticks(&ctx.host.proc)) {
        (Some((t0, i0)), Some((t1, i1))) if t1 > t0 => {
            let busy = (t1 - t0).saturating_sub(i1.saturating_sub(i0));
            busy as f64 / (t1 - t0) as f64 * 100.0
        }
        _ => 0.0,
    };
    let load = handle
        .join()
        .map_err(|_| Error::Refused("the http load generator panicked".into()))?
        .map_err(|e| Error::Refused(format!("starting the http load generator: {e}")))?;
    // Throughput over the scheduled window (the answers to its last requests included).
    let window = secs as f64;
    let per_zone: Vec<f64> = load
        .zones
        .iter()
        .map(|z| z.latencies_ms.len() as f64 / window)
        .collect();
    let all: Vec<f64> = load
        .zones
        .iter()
        .flat_map(|z| z.latencies_ms.iter().copied())
        .collect();
    let failed_zones = load
        .zones
        .iter()
        .zip(addrs)
        .filter(|(z, _)| z.latencies_ms.is_empty())
        .map(|(z, a)| format!("{a}: {} requests, all failed", z.scheduled))
        .collect();
    let latency = Latency::of(&all);
    let errors: u64 = load.zones.iter().map(|z| z.errors).sum();
    let throughput: f64 = per_zone.iter().sum();
    Ok(RunResult {
        throughput,
        tpm: None,
        per_zone,
        latency_avg_ms: latency.mean,
        latency_p99_ms: Some(latency.p99),
        errors,
        failed_zones,
        zones_cpu_pct,
        peaks,
        http: Some(HttpStep {
            server: opts.http.server,
            rate_per_zone: rate,
            offered_rps: rate * addrs.len() as f64,
            achieved_rps: throughput,
            scheduled: load.zones.iter().map(|z| z.scheduled).sum(),
            completed: all.len() as u64,
            latency_ms: latency,
            errors_by_kind: load.errors_by_kind,
            generator_cpu_pct: load.generator_cpu_ns as f64 / (load.elapsed_s.max(1e-9) * 1e9)
                * 100.0,
            host_cpu_pct,
            dispatch_lag_max_ms: load.dispatch_lag_max_ms,
            bridges: Vec::new(),
            pinned: false,
        }),
    })
}
