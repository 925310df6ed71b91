//! The timed run of a scale step: the workload in every zone at once for the
//! warm-up and the duration (a database client through `warren login`, [`run_db`], or
//! the in-process open-loop http load, [`super::openloop`]), while the zones' cgroups,
//! /proc/meminfo and /proc/vmstat are sampled every 250 ms for peaks (and their OOM kill
//! counters, read while the zones are there: an evicted zone's cgroup is gone) and, past
//! the warm-up, for the measured window's CPU and swap I/O (mean, and the peak over the
//! agent's 5 s window). When the time is up, the step's `at_end` runs once (see
//! [`super::step`]).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use super::guards::check_signals;
use super::login::{login, tail, Logins};
use super::openloop::{self, Latency};
use super::step::host_mem;
use super::{HttpStep, Options};
use crate::cgroups::CgroupSet;
use crate::error::{Error, Result};
use crate::measure::Progress;
use crate::stats;
use crate::zone::Context;

/// The agent's window for swap rates (`window-s`, 5 s by default).
const RATE_WINDOW: Duration = Duration::from_secs(5);

/// A point of the measured window: when, the zones' CPU ns, pswpin, pswpout.
type Mark = (Instant, u64, u64, u64);

/// Peaks sampled while the workload runs, and the measured window (warm-up excluded).
#[derive(Default)]
pub(super) struct Peaks {
    pub(super) zones_mem: u64,
    pub(super) host_used: u64,
    pub(super) swap_used: u64,
    /// The highest OOM kill count seen, per zone (in zone order).
    pub(super) oom_kills: Vec<u64>,
    /// The first and the last sample of the measured window.
    first: Option<Mark>,
    last: Option<Mark>,
    recent: VecDeque<Mark>,
    /// The highest swap-in / swap-out rate over any RATE_WINDOW of the measured window.
    pub(super) swap_in_peak: f64,
    pub(super) swap_out_peak: f64,
}

impl Peaks {
    fn sample(
        &mut self,
        proc_root: &Path,
        cgroups: &[CgroupSet],
        available_before: u64,
        measuring: bool,
    ) {
        self.oom_kills.resize(cgroups.len(), 0);
        for (seen, c) in self.oom_kills.iter_mut().zip(cgroups) {
            *seen = (*seen).max(c.oom_kills().unwrap_or(0));
        }
        let zones: u64 = cgroups.iter().filter_map(|c| c.memory_bytes()).sum();
        let (avail, _, swap) = host_mem(proc_root);
        self.zones_mem = self.zones_mem.max(zones);
        self.host_used = self.host_used.max(available_before.saturating_sub(avail));
        self.swap_used = self.swap_used.max(swap);
        if !measuring {
            return;
        }
        let (sin, sout) = crate::agent::sample::parse_vmstat_swap(
            &std::fs::read_to_string(proc_root.join("vmstat")).unwrap_or_default(),
        );
        let now: Mark = (Instant::now(), cpu_ns(cgroups), sin, sout);
        self.first.get_or_insert(now);
        self.last = Some(now);
        self.recent.push_back(now);
        while let Some(old) = self.recent.front().copied() {
            if now.0.duration_since(old.0) < RATE_WINDOW {
                break;
            }
            let dt = now.0.duration_since(old.0).as_secs_f64();
            self.swap_in_peak = self
                .swap_in_peak
                .max(now.2.saturating_sub(old.2) as f64 / dt);
            self.swap_out_peak = self
                .swap_out_peak
                .max(now.3.saturating_sub(old.3) as f64 / dt);
            self.recent.pop_front();
        }
    }

    /// Over the measured window: (seconds, the zones' CPU %, swap-in pages/s, swap-out
    /// pages/s), if it had two samples.
    pub(super) fn window(&self) -> Option<(f64, f64, f64, f64)> {
        let (a, b) = (self.first?, self.last?);
        let dt = b.0.duration_since(a.0).as_secs_f64();
        (dt > 0.0).then(|| {
            (
                dt,
                b.1.saturating_sub(a.1) as f64 / (dt * 1e9) * 100.0,
                b.2.saturating_sub(a.2) as f64 / dt,
                b.3.saturating_sub(a.3) as f64 / dt,
            )
        })
    }
}

/// What one timed run measured.
pub(super) struct RunResult {
    pub(super) throughput: f64,
    pub(super) tpm: Option<f64>,
    pub(super) per_zone: Vec<f64>,
    pub(super) latency_avg_ms: f64,
    pub(super) latency_p99_ms: Option<f64>,
    pub(super) latency_p95_ms: Option<f64>,
    pub(super) errors: u64,
    pub(super) failed_zones: Vec<String>,
    pub(super) zones_cpu_pct: f64,
    pub(super) peaks: Peaks,
    pub(super) http: Option<HttpStep>,
}

/// While `running()`, sample peaks every 250 ms and tick the progress bar once a second
/// (up to `secs`) since `t0`; call `at_end` once, when `secs` (and a second more) are up
/// or the run is over. Samples from `warmup` to `secs` are the measured window. Stops
/// with an error when a caught signal came.
fn watch(
    warmup: u64,
    secs: u64,
    t0: Instant,
    progress: &mut dyn Progress,
    running: &mut dyn FnMut() -> bool,
    at_end: &mut dyn FnMut(),
    sample: impl Fn(&mut Peaks, bool),
) -> Result<Peaks> {
    let mut peaks = Peaks::default();
    let mut ticked = 0;
    let mut ended = false;
    while running() {
        check_signals("running the workload")?;
        let e = t0.elapsed();
        sample(
            &mut peaks,
            e >= Duration::from_secs(warmup) && e <= Duration::from_secs(secs),
        );
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

/// One zone's client summary, whatever the database.
pub(super) struct DbOutcome {
    pub(super) tps: f64,
    pub(super) latency_ms: f64,
    pub(super) latency_p95_ms: Option<f64>,
    pub(super) errors: u64,
}

/// A database client to run in every zone: its name, its script (given the threads,
/// the warm-up and the measured seconds) and its output's parser.
pub(super) struct DbClient<'a> {
    pub(super) name: &'static str,
    pub(super) script: &'a dyn Fn(usize, u64, u64) -> String,
    pub(super) parse: &'a dyn Fn(&str) -> Option<DbOutcome>,
}

/// The database client in every zone at once: `--warmup` seconds unmeasured, then
/// `--duration` seconds whose summaries are the result (each zone's client prints
/// only the measured run's).
#[allow(clippy::too_many_arguments)]
pub(super) fn run_db(
    ctx: &Context,
    opts: &Options,
    client: &DbClient,
    names: &[String],
    logs: &Path,
    cgroups: &[CgroupSet],
    available_before: u64,
    progress: &mut dyn Progress,
    at_end: &mut dyn FnMut(),
) -> Result<RunResult> {
    let secs = opts.duration.as_secs().max(1);
    let warmup = opts.warmup.as_secs();
    let threads = opts
        .clients
        .min(stats::online_cpus(&ctx.host.sys).len().max(1));
    progress.phase(
        &format!(
            "N={} {} {warmup} s warm-up + {secs} s",
            names.len(),
            client.name
        ),
        warmup + secs,
    );
    let mut l = Logins(Vec::new());
    let cpu0 = cpu_ns(cgroups);
    let t0 = Instant::now();
    for z in names {
        let log = logs.join(format!("{z}-{}.log", client.name));
        let script = (client.script)(threads, warmup, secs);
        l.0.push((z.clone(), log.clone(), login(ctx, z, &script, &log)?));
    }
    let sample = |p: &mut Peaks, measuring: bool| {
        p.sample(&ctx.host.proc, cgroups, available_before, measuring)
    };
    let peaks = watch(
        warmup,
        warmup + secs,
        t0,
        progress,
        &mut || !l.all_done(),
        at_end,
        sample,
    )?;
    let whole =
        cpu_ns(cgroups).saturating_sub(cpu0) as f64 / t0.elapsed().as_nanos() as f64 * 100.0;
    let zones_cpu_pct = peaks.window().map_or(whole, |w| w.1);
    let mut per_zone = Vec::new();
    let (mut lat, mut p95, mut errors, mut failed) = (Vec::new(), Vec::new(), 0, Vec::new());
    for (zone, ok, out) in l.wait() {
        match (client.parse)(&out).filter(|_| ok) {
            Some(o) => {
                per_zone.push(o.tps);
                lat.push(o.latency_ms);
                p95.extend(o.latency_p95_ms);
                errors += o.errors;
            }
            None => {
                per_zone.push(0.0);
                failed.push(format!("{zone}: {}", tail(&out)));
            }
        }
    }
    if lat.is_empty() {
        return Err(Error::Refused(format!(
            "{} failed in every zone: {}",
            client.name,
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
        latency_p95_ms: (!p95.is_empty()).then(|| p95.iter().sum::<f64>() / p95.len() as f64),
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
    let sample = |p: &mut Peaks, measuring: bool| {
        p.sample(&ctx.host.proc, cgroups, available_before, measuring)
    };
    let running = &mut || !handle.is_finished();
    let peaks = watch(0, secs, t0, progress, running, at_end, sample)?;
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
        latency_p95_ms: None,
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
