//! `warren bench scale`: aggregate throughput of a real workload against the number of
//! zones, as in the consolidation studies (VMs at 1, 2, 4, 8 per host running a
//! database, with and without memory oversubscription).
//!
//! For each step N: clone N zones from one installed zone of the `host` template (each
//! capped at `--memory-per-zone`, and at `--cpu-per-zone` if given), boot them, start
//! the workload in every zone ([`pgbench`]: PostgreSQL + pgbench inside each zone;
//! [`http`]: a web server in each bridged zone, loaded open-loop from this process by
//! [`openloop`]), run it in all zones at once for `--duration`, and record aggregate
//! throughput, latency, the zones' CPU, memory and swap, and the agent's evictions.
//! Then halt and delete.
//!
//! # The http study (the KVM consolidation study)
//!
//! Every zone gets the same fixed request rate (`--rate`, 5/s by default) with a page
//! mix, scheduled by the clock; response time is from the scheduled time, so it is the
//! measure and throughput is only checked against the offered rate. Zones are spread
//! over bridges of `--zones-per-bridge` ([`spread`]), pinned to CPUs round-robin with
//! `--pin`, and the network sysctls the doctor names for the largest step are raised
//! for the run with `--tune` ([`tune`], restored afterwards). A one-zone calibration
//! step runs before the first step and after the last (the machine's noise).
//!
//! # Oversubscription, precisely
//!
//! With `--oversubscribe PCT` the zones get a memory budget: B = N × memory-per-zone ÷
//! (1 + PCT/100), written as the memory limit of this state root's zone group cgroup
//! (the cgroup every zone of the root sits in, which warren created; its old limit is
//! restored afterwards). The zones' own caps then add up to (1 + PCT/100) × B: PCT %
//! more than the memory they may use together. B must fit in the host's MemAvailable.
//! Without a budget, the figure reported is against the host's MemAvailable at the
//! start (negative: the caps fit with room to spare). With PCT > 0 and no swap on
//! the host, warren's swap (`warren swap enable`, a file in the state root) of
//! N × memory-per-zone − B is enabled for the step and disabled after it. `--agent`
//! runs `warren agent` (watching the zone group) during the step; its evictions are
//! counted.
//!
//! # Evict or suspend
//!
//! `--agent-policy` says what that agent does under the same pressure: `evict`
//! (`suspend-first = false`: it halts the least important zone), `suspend`
//! (`suspend-first = true`: it suspends it; when the step's time is up the bench stops
//! the agent and resumes every suspended zone, so their workload finishes and is
//! counted), or `both`: each step twice, evict then suspend, one row each. Every row
//! counts the agent's evictions and suspensions, the zones' OOM kills and the zones
//! lost (neither running nor suspended when the time is up) — issue 19, item 4. The
//! agent's `wake-on-connect` is off: the http load would wake a suspended zone at its
//! next request and undo what is measured. PostgreSQL's own memory is mostly page
//! cache, which the agent counts as available, so `--working-set SIZE` gives each zone
//! SIZE of anonymous memory beside its workload (a python3 process touching every page
//! once a second) for the budget to bite on.
//!
//! Everything the bench makes (zones, template, swap, budget, agent, scratch files,
//! the bridge) is undone when a step ends, also on failure and on SIGINT, SIGTERM or
//! SIGHUP: the bench catches them ([`guards::Signals`]), stops at its next check
//! (at most about a second later) and unwinds its guards.
pub mod http;
pub mod openloop;
pub mod pgbench;
pub mod report;
pub mod spread;
pub mod tune;

mod guards;
mod login;
mod step;
mod timed;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::{cleanup, ensure_template, machine, now_rfc3339, Machine, Scratch, Templates, PREFIX};
use crate::demo;
use crate::error::{Error, IoContext, Result};
use crate::measure::{Progress, Summary};
use crate::storage::template::{self, Source};
use crate::zone::{self, Context};
use step::run_step;

/// Version of the scale `results.json` layout.
pub const SCHEMA_VERSION: u32 = 1;
/// busybox httpd's port inside each zone.
pub(super) const HTTP_PORT: u16 = 80;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Pgbench,
    Http,
}

/// What the bench's agent does under pressure (`--agent-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AgentPolicy {
    /// Halt zones (`suspend-first = false`).
    Evict,
    /// Suspend zones (`suspend-first = true`).
    Suspend,
    /// Each step twice: evict, then suspend.
    Both,
}

impl AgentPolicy {
    /// The runs of one step, in order.
    fn runs(self) -> &'static [AgentPolicy] {
        match self {
            AgentPolicy::Evict => &[AgentPolicy::Evict],
            AgentPolicy::Suspend => &[AgentPolicy::Suspend],
            AgentPolicy::Both => &[AgentPolicy::Evict, AgentPolicy::Suspend],
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub workload: Workload,
    pub steps: Vec<usize>,
    pub memory_per_zone: u64,
    /// CPUs per zone (cpu.max); `None`: uncapped.
    pub cpu_per_zone: Option<f64>,
    /// `None`: no budget (see the module doc).
    pub oversubscribe_pct: Option<f64>,
    /// `--agent` / `--agent-policy`; `None`: no agent.
    pub agent: Option<AgentPolicy>,
    /// `--working-set`: bytes of anonymous memory each zone holds and touches.
    pub working_set: Option<u64>,
    pub duration: Duration,
    /// pgbench connections per zone (http: unused, the load is `http.rate`).
    pub clients: usize,
    /// pgbench scale factor (about 15 MiB of tables per unit).
    pub pgbench_scale: u32,
    /// http: the bridge and subnet of the zones.
    pub bridge: String,
    pub subnet: String,
    pub http: HttpOptions,
}

/// The http study's knobs (see the module doc).
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub server: http::Server,
    /// Requests per second per zone.
    pub rate: f64,
    /// Raise the doctor's network fixes for the run.
    pub tune: bool,
    /// Pin zone i to CPU i mod #CPUs (cpuset).
    pub pin: bool,
    pub zones_per_bridge: usize,
    /// The one-zone calibration step at the start and the end.
    pub calibrate: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            server: http::Server::Busybox,
            rate: 5.0,
            tune: false,
            pin: false,
            zones_per_bridge: 1000,
            calibrate: true,
        }
    }
}

/// The http figures of a step (`--workload http`).
#[derive(Debug, Clone, Serialize)]
pub struct HttpStep {
    pub server: http::Server,
    pub rate_per_zone: f64,
    /// zones × rate.
    pub offered_rps: f64,
    /// Requests answered as expected per second of the run.
    pub achieved_rps: f64,
    pub scheduled: u64,
    pub completed: u64,
    /// Response time from each request's scheduled time to its last byte, ms.
    pub latency_ms: openloop::Latency,
    pub errors_by_kind: std::collections::BTreeMap<String, u64>,
    /// The load generator's thread, % of one CPU.
    pub generator_cpu_pct: f64,
    /// The host's CPUs busy during the run (/proc/stat), % of all CPUs.
    pub host_cpu_pct: f64,
    /// How late the generator dispatched a request at worst, ms.
    pub dispatch_lag_max_ms: f64,
    pub bridges: Vec<String>,
    pub pinned: bool,
}

/// One step.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleStep {
    pub zones: usize,
    /// N × cpu-per-zone; `None`: no cap (the host's CPUs are shared).
    pub cpu_cap_total: Option<f64>,
    /// N × memory-per-zone, MiB.
    pub memory_total_mib: f64,
    /// The zone group's memory limit, MiB (`--oversubscribe`), or `None`.
    pub budget_mib: Option<f64>,
    /// (memory_total / budget − 1) × 100; the budget is the host's MemAvailable at the
    /// start when there is none.
    pub oversubscription_pct: f64,
    pub swap_total_mib: f64,
    pub boot_ms: Summary,
    /// Starting the workload in every zone (initdb, server start, pgbench -i; httpd).
    pub setup_s: f64,
    /// Aggregate: transactions/s (pgbench) or requests/s (http).
    pub throughput: f64,
    /// Transactions per minute (pgbench).
    pub tpm: Option<f64>,
    /// Throughput of each zone, in zone order.
    pub per_zone: Vec<f64>,
    /// Mean of the zones' average latencies (pgbench), or over all requests (http), ms.
    pub latency_avg_ms: f64,
    /// http only: p99 over all requests, ms.
    pub latency_p99_ms: Option<f64>,
    /// throughput / (N × throughput of the 1-zone step), when there is one.
    pub scaling_efficiency: Option<f64>,
    /// Failed transactions (pgbench) or failed requests (http).
    pub errors: u64,
    /// Zones whose workload did not finish (e.g. evicted), with the reason.
    pub failed_zones: Vec<String>,
    /// CPU of all zones during the run, % of one CPU.
    pub zones_cpu_pct: f64,
    /// Peak of the zones' memory cgroups' usage during the run, summed, MiB.
    pub zones_memory_peak_mib: f64,
    /// Peak drop of the host's MemAvailable from before boot, MiB.
    pub host_memory_used_peak_mib: f64,
    /// Peak swap in use on the host during the run, MiB.
    pub swap_used_peak_mib: f64,
    /// What the agent did under pressure in this row (`evict` or `suspend`), if one ran.
    pub agent_policy: Option<AgentPolicy>,
    /// Evictions by the agent during the step.
    pub evictions: u64,
    /// Suspensions by the agent during the step.
    pub suspensions: u64,
    /// OOM kills in the zones during the step (memory.oom_control / memory.events).
    pub oom_kills: u64,
    /// Zones neither running nor suspended when the step's time was up (evicted, or
    /// dead), by name.
    pub zones_lost: Vec<String>,
    pub total_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpStep>,
}

/// `results.json` of `bench scale`.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleResults {
    pub schema_version: u32,
    pub date: String,
    pub machine: Machine,
    pub workload: Workload,
    /// "ok", or "skipped" with the reason in `note`.
    pub status: String,
    pub note: String,
    pub steps: Vec<usize>,
    pub memory_per_zone_mib: f64,
    pub cpu_per_zone: Option<f64>,
    pub oversubscribe_pct: Option<f64>,
    pub agent: bool,
    pub agent_policy: Option<AgentPolicy>,
    pub working_set_mib: Option<f64>,
    pub duration_s: f64,
    pub clients_per_zone: usize,
    pub pgbench_scale: Option<u32>,
    pub results: Vec<ScaleStep>,
    /// http: the one-zone calibration step, at the start and at the end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calibration: Vec<ScaleStep>,
    /// http: the doctor's network findings for the largest step, and what `--tune` did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tune: Option<tune::TuneReport>,
}

/// What the zones run, resolved on the host before anything is made.
pub(super) enum Plan {
    Pgbench {
        bin: PathBuf,
    },
    Http {
        server: http::Server,
        bin: PathBuf,
        busybox: PathBuf,
    },
}

pub(super) const MIB: f64 = (1u64 << 20) as f64;

/// Run the bench. Writes nothing; see [`write`].
pub fn run(ctx: &Context, opts: &Options, progress: &mut dyn Progress) -> Result<ScaleResults> {
    ctx.require_root()?;
    // First, so it is dropped last: a signal during the cleanup below does not cut it short.
    let _signals = guards::Signals::new()?;
    let machine = machine(ctx)?;
    let mut results = ScaleResults {
        schema_version: SCHEMA_VERSION,
        date: now_rfc3339(),
        machine,
        workload: opts.workload,
        status: "ok".into(),
        note: String::new(),
        steps: opts.steps.clone(),
        memory_per_zone_mib: opts.memory_per_zone as f64 / MIB,
        cpu_per_zone: opts.cpu_per_zone,
        oversubscribe_pct: opts.oversubscribe_pct,
        agent: opts.agent.is_some(),
        agent_policy: opts.agent,
        working_set_mib: opts.working_set.map(|w| w as f64 / MIB),
        duration_s: opts.duration.as_secs_f64(),
        clients_per_zone: opts.clients,
        pgbench_scale: (opts.workload == Workload::Pgbench).then_some(opts.pgbench_scale),
        results: Vec::new(),
        calibration: Vec::new(),
        tune: None,
    };
    let plan = match opts.workload {
        Workload::Pgbench => Plan::Pgbench {
            bin: pgbench::find_bin(Path::new("/"))?,
        },
        Workload::Http => {
            if !ctx.host.sys.join("module/bridge").exists() {
                results.status = "skipped".into();
                results.note = "bridge networking is unavailable: the kernel's bridge module is not loaded (modprobe bridge), and --workload http needs net = bridge".into();
                return Ok(results);
            }
            Plan::Http {
                server: opts.http.server,
                bin: http::find(opts.http.server)?,
                busybox: template::find_static_busybox()?,
            }
        }
    };
    results.note = match &plan {
        Plan::Pgbench { bin } => format!(
            "PostgreSQL from {} (host /usr through the sparse root), one server and one pgbench per zone over the zone's Unix socket, run as uid {} via setpriv; shared_buffers {} MiB; TPC-B-like default script, {} client(s) per zone, fsync on",
            bin.display(), pgbench::UID, pgbench::shared_buffers_mib(opts.memory_per_zone), opts.clients
        ),
        Plan::Http { server, bin, .. } => format!(
            "{} ({}) on port {HTTP_PORT} in each zone (net = bridge, {} {}, at most {} zones per bridge{}); open-loop load from the host, in process: {} requests/s per zone scheduled by the clock, page mix 60 % 2 KiB html, 25 % 30 KiB asset, 10 % 200 KiB image, 5 % 404; one connection per request (HTTP/1.0); response time is from the scheduled time to the last byte; network sysctls {}",
            match server { http::Server::Busybox => "busybox httpd", http::Server::Nginx => "nginx" },
            bin.display(), opts.bridge, opts.subnet, opts.http.zones_per_bridge,
            if opts.http.pin { ", each zone pinned to one CPU (cpuset)" } else { "" },
            opts.http.rate,
            if opts.http.tune { "tuned for the largest step (--tune)" } else { "as the host has them (untuned)" }
        ),
    };
    if opts.oversubscribe_pct.is_some() || opts.agent.is_some() {
        let others: Vec<String> = zone::names_in(&ctx.layout)?
            .into_iter()
            .filter(|n| !n.starts_with(PREFIX))
            .filter(|n| {
                zone::load(ctx, n).is_ok_and(|z| z.state(ctx) == crate::state::ZoneState::Running)
            })
            .collect();
        if !others.is_empty() {
            return Err(Error::Refused(format!(
                "--oversubscribe and --agent act on this state root's zone group (its memory budget, its zones), and zone(s) {} run in it; use a state root of its own (--root DIR)",
                others.join(", ")
            )));
        }
    }
    cleanup(ctx)?;
    let tname = format!("{PREFIX}host");
    let mut templates = Templates {
        ctx,
        made: Vec::new(),
    };
    if ensure_template(ctx, &tname, &Source::Host)? {
        templates.made.push(tname.clone());
    }
    let scratch = Scratch(
        ctx.layout
            .root()
            .join(format!(".bench-scale-{}", std::process::id())),
    );
    std::fs::create_dir_all(&scratch.0).ctx(|| format!("creating {}", scratch.0.display()))?;

    let http = opts.workload == Workload::Http;
    let mut sysctls = None;
    if http {
        tune::recover(ctx)?;
        let largest = opts.steps.iter().copied().max().unwrap_or(1);
        let findings = tune::plan_findings(ctx, largest, opts.http.rate);
        let mut report = tune::TuneReport {
            findings: tune::describe(&findings),
            requested: opts.http.tune,
            ..Default::default()
        };
        if opts.http.tune {
            let g = tune::apply(ctx, &findings)?;
            report.applied = g.applied().to_vec();
            sysctls = Some(g);
        }
        results.tune = Some(report);
    }
    // (calibration?, N): the calibration step first and last around the steps.
    let calibrate = http && opts.http.calibrate;
    let mut order: Vec<(bool, usize)> = Vec::new();
    if calibrate {
        order.push((true, 1));
    }
    order.extend(opts.steps.iter().map(|&n| (false, n)));
    if calibrate {
        order.push((true, 1));
    }
    let mut out = Vec::new();
    let mut failure = None;
    let mut runs: Vec<(bool, usize, Option<AgentPolicy>)> = Vec::new();
    for (cal, n) in order {
        match opts.agent {
            // The calibration step measures the machine's noise: no agent.
            Some(p) if !cal => runs.extend(p.runs().iter().map(|r| (cal, n, Some(*r)))),
            _ => runs.push((cal, n, None)),
        }
    }
    for (cal, n, policy) in runs {
        let r = guards::check_signals("starting a step")
            .and_then(|()| run_step(ctx, opts, policy, &plan, &tname, n, &scratch.0, progress));
        let cleaned = cleanup(ctx);
        let net = if http { demo::cleanup_net(ctx) } else { Ok(()) };
        match (r, cleaned, net) {
            (Ok(s), Ok(_), Ok(())) if cal => results.calibration.push(s),
            (Ok(s), Ok(_), Ok(())) => out.push(s),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                failure = Some(e);
                break;
            }
        }
    }
    progress.done();
    if let (Some(mut g), Some(t)) = (sysctls, results.tune.as_mut()) {
        t.restored = g.restore();
    }
    drop(templates);
    if let Some(e) = failure {
        return Err(e);
    }
    let base = out
        .iter()
        .find(|s| s.zones == 1 && s.agent_policy != Some(AgentPolicy::Suspend))
        .map(|s| s.throughput);
    for s in &mut out {
        s.scaling_efficiency = base
            .filter(|b| *b > 0.0)
            .map(|b| s.throughput / (b * s.zones as f64));
    }
    results.results = out;
    Ok(results)
}

/// Write `results.json`, `report.md`, `throughput.svg` and `latency.svg` (http: and
/// `response_time.svg`) into `dir`.
pub fn write(dir: &Path, r: &ScaleResults) -> Result<()> {
    super::write_files(
        dir,
        r,
        [
            ("report.md", report::markdown(r)),
            ("throughput.svg", report::throughput_svg(r)),
            ("latency.svg", report::latency_svg(r)),
        ],
    )?;
    if r.workload == Workload::Http {
        let p = dir.join("response_time.svg");
        std::fs::write(&p, report::response_time_svg(r))
            .ctx(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
