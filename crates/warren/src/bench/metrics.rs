//! `warren bench metrics`: what one Prometheus scrape ([`crate::metrics`]) costs with N
//! running zones. For each N: clone and boot N zones of the bench's busybox template
//! (through [`super::zones::Zones`], the same steps `bench density` takes), then time
//! a cold scrape (a fresh [`Scraper`]: the doctor's checks and every disk walk, as
//! `warren metrics` pays) and `--scrapes` warm ones (one [`Scraper`] kept, as a daemon
//! keeps it), remove the zones, and write `results.json` and `report.md`.
//!
//! The zones are removed when a step ends, also when it fails; the bench's template
//! after the last step.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::metrics_daemon::{self, DaemonStep};
use super::system::System;
use super::zones::{Base, Zones};
use super::{Machine, Templates, PREFIX};
use crate::error::{Error, Result};
use crate::measure::{self, Progress, Summary};
use crate::metrics::{Format, Options as ScrapeOptions, Scraper};
use crate::storage::template::Source;
use crate::zone::Context;

/// The cost SPEC.md sets for one scrape of 1,000 running zones.
pub const BUDGET_MS_AT_1000: f64 = 200.0;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub steps: Vec<usize>,
    /// Warm scrapes per step (at least 1).
    pub scrapes: usize,
    /// Also time this `warren-daemon`'s `/metrics` and read its memory in each step
    /// ([`super::metrics_daemon`]).
    pub daemon: Option<std::path::PathBuf>,
}

/// One step.
#[derive(Debug, Clone, Serialize)]
pub struct MetricsStep {
    pub zones: usize,
    /// A fresh scraper's scrape: doctor checks and disk walks included.
    pub cold_ms: f64,
    /// A kept scraper's scrapes (doctor verdicts and disk figures reused).
    pub warm_ms: Summary,
    /// The warm median per running zone, in microseconds.
    pub warm_per_zone_us: f64,
    /// CPU time (user + system, every thread, /proc/self/stat) of a warm scrape, the
    /// mean over the step's scrapes: what a scrape costs without the wait for a CPU
    /// that a busy host adds (10 ms resolution over the sum).
    pub warm_cpu_ms: Option<f64>,
    /// Size of the text.
    pub bytes: usize,
    /// Samples (non-comment lines) in the text.
    pub samples: usize,
    /// /proc/loadavg when the step's scrapes ran (the host is shared: numbers are noisy).
    pub loadavg: String,
    /// The daemon's own `/metrics` and memory over the same zones (`--daemon`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon: Option<DaemonStep>,
}

/// `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct MetricsResults {
    pub schema_version: u32,
    pub date: String,
    pub machine: Machine,
    pub scrapes: usize,
    pub steps: Vec<MetricsStep>,
    /// The warm median at 1,000 zones extrapolated linearly from the largest step
    /// (per-zone cost × 1,000, plus the fixed part from the smallest), in ms.
    pub extrapolated_warm_ms_at_1000: Option<f64>,
    /// The same for the warm scrape's CPU time.
    pub extrapolated_cpu_ms_at_1000: Option<f64>,
}

/// Run the bench. Writes nothing; see [`write`].
pub fn run(ctx: &Context, opts: &Options, progress: &mut dyn Progress) -> Result<MetricsResults> {
    ctx.require_root()?;
    if opts.scrapes == 0 {
        return Err(Error::Invalid(
            "--scrapes must be at least 1, e.g. --scrapes 20".into(),
        ));
    }
    if let Some(exe) = opts.daemon.as_ref().filter(|e| !e.is_file()) {
        return Err(Error::Invalid(format!(
            "--daemon {}: no such file; give the warren-daemon built with this warren (e.g. target/release/warren-daemon)",
            exe.display()
        )));
    }
    super::cleanup(ctx)?;
    let date = super::now_rfc3339();
    let machine = super::machine(ctx)?;
    let tname = format!("{PREFIX}busybox");
    let mut templates = Templates {
        ctx,
        made: Vec::new(),
    };
    if super::ensure_template(ctx, &tname, &Source::Busybox)? {
        templates.made.push(tname.clone());
    }
    let mut steps = Vec::new();
    for &n in &opts.steps {
        steps.push(step(ctx, &tname, n, opts, progress)?);
    }
    progress.done();
    drop(templates);
    Ok(MetricsResults {
        schema_version: super::SCHEMA_VERSION,
        date,
        machine,
        scrapes: opts.scrapes,
        extrapolated_warm_ms_at_1000: extrapolate(&steps, |s| Some(s.warm_ms.median)),
        extrapolated_cpu_ms_at_1000: extrapolate(&steps, |s| s.warm_cpu_ms),
        steps,
    })
}

/// A stop signal taken by the progress (`bench::interrupt`) ends the step with an
/// error: the step's zones and the bench's template are removed by their guards.
fn stop_if_asked(progress: &mut dyn Progress) -> Result<()> {
    match progress.interrupted() {
        Some(sig) => Err(super::interrupt::stopped(sig)),
        None => Ok(()),
    }
}

fn step(
    ctx: &Context,
    template: &str,
    n: usize,
    o: &Options,
    progress: &mut dyn Progress,
) -> Result<MetricsStep> {
    let scrapes = o.scrapes;
    let base = Base {
        template: template.into(),
        sets: Vec::new(),
    };
    // Its Drop removes every zone of the bench, also when this step fails.
    let mut zones = Zones::new(ctx, &format!("{PREFIX}base"), Some(base), PREFIX, 5);
    zones.prepare(n)?;
    progress.phase(&format!("N={n} boot"), n as u64);
    for i in 0..n {
        zones.create(i)?;
        zones.start(i)?;
        progress.step();
        stop_if_asked(progress)?;
    }
    progress.phase(&format!("N={n} scrape"), scrapes as u64 + 1);
    let opts = ScrapeOptions {
        oci_root: None,
        ..ScrapeOptions::default()
    };
    let t = Instant::now();
    let text = Scraper::new(opts.clone()).render(ctx, Format::OpenMetrics)?;
    let cold_ms = measure::ms(t.elapsed());
    progress.step();
    let mut kept = Scraper::new(opts);
    kept.render(ctx, Format::OpenMetrics)?;
    let mut warm = Vec::with_capacity(scrapes);
    let cpu0 = on_cpu_ns(ctx);
    for _ in 0..scrapes {
        let t = Instant::now();
        kept.render(ctx, Format::OpenMetrics)?;
        warm.push(measure::ms(t.elapsed()));
        progress.step();
        stop_if_asked(progress)?;
    }
    let loadavg = std::fs::read_to_string(ctx.host.proc.join("loadavg"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let warm_cpu_ms = on_cpu_ns(ctx)
        .zip(cpu0)
        .map(|(b, a)| b.saturating_sub(a) as f64 / 1e6 / scrapes as f64);
    let warm_ms = measure::summarize(&warm);
    let daemon = match &o.daemon {
        Some(exe) => {
            progress.phase(&format!("N={n} daemon"), 1);
            let d = metrics_daemon::measure(ctx, exe, scrapes)?;
            progress.step();
            Some(d)
        }
        None => None,
    };
    zones.cleanup()?;
    Ok(MetricsStep {
        zones: n,
        cold_ms,
        warm_per_zone_us: warm_ms.median * 1000.0 / n as f64,
        warm_ms,
        warm_cpu_ms,
        bytes: text.len(),
        samples: text.lines().filter(|l| !l.starts_with('#')).count(),
        loadavg,
        daemon,
    })
}

/// USER_HZ: the unit of the CPU times in /proc/<pid>/stat (100 on every Linux
/// architecture warren builds for).
const USER_HZ: f64 = 100.0;

/// CPU time (user + system) of this process so far, threads that ended included
/// (/proc/self/stat utime and stime), in nanoseconds; 10 ms resolution.
fn on_cpu_ns(ctx: &Context) -> Option<u64> {
    let text = std::fs::read_to_string(ctx.host.proc.join("self/stat")).ok()?;
    // Fields after the command's closing parenthesis; utime and stime are 14 and 15.
    let rest = text.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((ticks as f64 / USER_HZ * 1e9) as u64)
}

/// Linear in N from the smallest and largest steps (fixed part + per-zone slope),
/// evaluated at 1,000; `None` with fewer than two steps.
pub fn extrapolate(steps: &[MetricsStep], of: fn(&MetricsStep) -> Option<f64>) -> Option<f64> {
    let lo = steps.iter().min_by_key(|s| s.zones)?;
    let hi = steps.iter().max_by_key(|s| s.zones)?;
    if hi.zones == lo.zones {
        return None;
    }
    let (a, b) = (of(lo)?, of(hi)?);
    let slope = (b - a) / (hi.zones - lo.zones) as f64;
    let fixed = a - slope * lo.zones as f64;
    Some(fixed.max(0.0) + slope.max(0.0) * 1000.0)
}

/// The results as Markdown (pure).
pub fn markdown(r: &MetricsResults) -> String {
    let mut s = format!(
        "# warren bench metrics ({})\n\n{} ({} CPUs, {:.0} MiB, cgroup {}), load at start {}; the host is shared with other work: the numbers are noisy.\n\n",
        r.date, r.machine.kernel, r.machine.cpus, r.machine.mem_total_mib, r.machine.cgroup_version, r.machine.loadavg_at_start
    );
    s.push_str("| zones | cold scrape ms | warm median ms | warm p99 ms | µs per zone | warm CPU ms | samples | bytes | load |\n");
    s.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for st in &r.steps {
        s.push_str(&format!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.0} | {} | {} | {} | {} |\n",
            st.zones,
            st.cold_ms,
            st.warm_ms.median,
            st.warm_ms.p99,
            st.warm_per_zone_us,
            st.warm_cpu_ms.map_or("-".into(), |c| format!("{c:.1}")),
            st.samples,
            st.bytes,
            st.loadavg
        ));
    }
    if r.steps.iter().any(|st| st.daemon.is_some()) {
        s.push_str("\nThe daemon's own `/metrics` over the same zones (unix socket, request to last byte) and its memory after the scrapes:\n\n");
        s.push_str("| zones | first scrape ms | warm median ms | warm p99 ms | RSS MiB | peak RSS MiB | bytes |\n");
        s.push_str("|---:|---:|---:|---:|---:|---:|---:|\n");
        let mib = |k: Option<u64>| k.map_or("-".into(), |k| format!("{:.1}", k as f64 / 1024.0));
        for st in &r.steps {
            if let Some(d) = &st.daemon {
                s.push_str(&format!(
                    "| {} | {:.1} | {:.1} | {:.1} | {} | {} | {} |\n",
                    st.zones,
                    d.first_ms,
                    d.warm_ms.median,
                    d.warm_ms.p99,
                    mib(d.rss_kib),
                    mib(d.peak_rss_kib),
                    d.bytes
                ));
            }
        }
    }
    if let Some(x) = r.extrapolated_warm_ms_at_1000 {
        s.push_str(&format!(
            "\nExtrapolated warm scrape at 1,000 zones: {x:.0} ms (budget {BUDGET_MS_AT_1000:.0} ms), linear from the smallest and largest steps.\n"
        ));
    }
    if let Some(x) = r.extrapolated_cpu_ms_at_1000 {
        s.push_str(&format!(
            "Extrapolated CPU time of a warm scrape at 1,000 zones: {x:.0} ms.\n"
        ));
    }
    s
}

/// Write `results.json` and `report.md` into `dir`.
pub fn write(dir: &Path, r: &MetricsResults) -> Result<()> {
    super::write_files(dir, r, [("report.md", markdown(r))])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(zones: usize, median: f64) -> MetricsStep {
        MetricsStep {
            zones,
            cold_ms: 0.0,
            warm_ms: Summary {
                median,
                p99: median,
                max: median,
            },
            warm_per_zone_us: 0.0,
            warm_cpu_ms: None,
            bytes: 0,
            samples: 0,
            loadavg: String::new(),
            daemon: None,
        }
    }

    #[test]
    fn extrapolates_fixed_plus_slope_to_1000() {
        // 2 ms fixed, 0.1 ms per zone.
        let steps = [st(10, 3.0), st(100, 12.0), st(300, 32.0)];
        let x = extrapolate(&steps, |s| Some(s.warm_ms.median)).unwrap();
        assert!((x - 102.0).abs() < 1e-9, "{x}");
        assert_eq!(extrapolate(&steps[..1], |s| Some(s.warm_ms.median)), None);
        assert_eq!(extrapolate(&steps, |s| s.warm_cpu_ms), None);
    }
}
