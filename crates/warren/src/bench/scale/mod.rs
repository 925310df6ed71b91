//! `warren bench scale`: aggregate throughput of a real workload against the number of
//! zones, as in the consolidation studies (VMs at 1, 2, 4, 8 per host running a
//! database, with and without memory oversubscription).
//!
//! For each step N: clone N zones from one installed zone of the `host` template (each
//! capped at `--memory-per-zone`), boot them, start the workload in every zone
//! ([`pgbench`]: PostgreSQL + pgbench inside each zone; [`mariadb`]: MariaDB (InnoDB
//! O_DIRECT) + sysbench OLTP inside each zone; [`http`]: a web server in each bridged
//! zone, loaded open-loop from this process by [`openloop`]), cap each zone's CPU at
//! `--cpu-per-zone` (live, once set up), run it in all zones at once for `--warmup`
//! (unmeasured) and `--duration`, and record aggregate throughput, latency, the zones'
//! CPU, memory, swap and swap I/O, and the agent's actions. Then halt and delete.
//!
//! # Trustworthy numbers (the OpenShift + wasp study)
//!
//! `--workload pgbench,mariadb` runs every step of each database in turn, `--repeat N`
//! does that N times (A B A B ...), `--calibrate` runs a one-zone step of each database
//! first and last, and [`study`] turns the rows into medians with min–max, the noise
//! and a verdict on the oversubscribed step. `--budget B` keeps one memory budget for
//! the zones' group at every step (the study's host), and `--study wasp` sets the
//! study's ratios: cap B / 9.6 (12 zones = 125 % of B), CPU 1.125 × CPUs / 12 per zone,
//! the agent on with its swap triggers set from the largest step that fits B, and
//! each step past that one run again without the agent (`--counterfactual`).
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
pub mod mariadb;
pub mod openloop;
pub mod pgbench;
pub mod report;
pub mod spread;
pub mod study;
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Pgbench,
    Mariadb,
    Http,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Pgbench => "pgbench",
            Workload::Mariadb => "mariadb",
            Workload::Http => "http",
        }
    }

    /// A database run by a client inside each zone (its figures are transactions).
    pub fn is_database(self) -> bool {
        self != Workload::Http
    }
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

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// One or more (`--workload pgbench,mariadb`): each repetition runs every step of
    /// each, in this order.
    pub workloads: Vec<Workload>,
    pub steps: Vec<usize>,
    pub memory_per_zone: u64,
    /// CPUs per zone (cpu.max, applied once the workload is set up); `None`: uncapped.
    pub cpu_per_zone: Option<f64>,
    /// `None`: no budget (see the module doc).
    pub oversubscribe_pct: Option<f64>,
    /// `--budget`: one fixed memory budget for the zone group at every step (the
    /// OpenShift + wasp study's host), instead of one per step from `oversubscribe_pct`.
    pub budget: Option<u64>,
    /// shared_buffers / innodb_buffer_pool_size as % of the zone's cap; `None`: 25 %
    /// for PostgreSQL, 50 % for MariaDB.
    pub buffer_pct: Option<u32>,
    /// Rows in each of sysbench's tables (mariadb).
    pub sysbench_rows: u32,
    /// Databases: the client runs this long first, unmeasured, in every zone.
    pub warmup: Duration,
    /// Each workload's steps this many times, interleaved (A B A B ...).
    pub repeat: usize,
    /// A one-zone calibration step per workload before the first step and after the
    /// last (the machine's noise).
    pub calibrate: bool,
    /// Set the agent's swap-in/out triggers from the swap I/O measured at this step
    /// (of the same workload and repetition), for the larger steps after it.
    pub thresholds_from: Option<usize>,
    /// The study preset that set these options (`--study wasp`), for the report.
    pub study: Option<String>,
    /// `--agent` / `--agent-policy`; `None`: no agent.
    pub agent: Option<AgentPolicy>,
    /// `--counterfactual`: every step past `thresholds_from` (every step without it)
    /// also runs without the agent, one more row ([`study`]: what the agent cost and
    /// saved).
    pub counterfactual: bool,
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
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            server: http::Server::Busybox,
            rate: 5.0,
            tune: false,
            pin: false,
            zones_per_bridge: 1000,
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

/// The agent's swap I/O triggers for a step, set from the swap I/O measured at
/// `from_zones` ([`study::thresholds_from_swap`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AgentThresholds {
    pub from_zones: usize,
    /// The swap-in / swap-out rates measured there, pages/s averaged over its measured
    /// window (warm-up excluded).
    pub measured_in_pages_s: f64,
    pub measured_out_pages_s: f64,
    pub swap_in_trigger: f64,
    pub swap_out_trigger: f64,
}

/// One step.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleStep {
    pub workload: Workload,
    /// 1-based; calibration steps: 0.
    pub repetition: usize,
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
    /// mariadb only: mean of the zones' 95th percentiles (sysbench), ms.
    pub latency_p95_ms: Option<f64>,
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
    /// Pages swapped in / out per second on the host over the measured window
    /// (/proc/vmstat pswpin, pswpout; warm-up excluded).
    pub swap_in_pages_s: f64,
    pub swap_out_pages_s: f64,
    /// The highest rate over any 5 s of the measured window (the agent's window).
    pub swap_in_peak_pages_s: f64,
    pub swap_out_peak_pages_s: f64,
    /// The agent's swap triggers when set from a measured step (`None`: its defaults).
    pub agent_thresholds: Option<AgentThresholds>,
    /// What the agent did during the step, one line per event of its log (events.jsonl):
    /// when, what, which zone, why.
    pub agent_actions: Vec<String>,
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
    /// The first of `workloads` (kept for readers of one-workload runs).
    pub workload: Workload,
    pub workloads: Vec<Workload>,
    /// `--study` (e.g. "wasp"), if a preset set the options.
    pub study: Option<String>,
    pub repeat: usize,
    pub warmup_s: f64,
    /// `--budget`: the zone group's fixed memory limit, MiB.
    pub budget_mib: Option<f64>,
    /// shared_buffers / buffer pool as % of the zone's cap, per database workload run.
    pub buffer_pct: Option<u32>,
    pub sysbench_rows: Option<u32>,
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
    /// The one-zone calibration step of each workload, at the start and at the end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calibration: Vec<ScaleStep>,
    /// With repetitions or calibration: medians with min–max per workload and step,
    /// the noise, and whether the oversubscribed step's loss is larger than it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<study::Summary>,
    /// http: the doctor's network findings for the largest step, and what `--tune` did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tune: Option<tune::TuneReport>,
}

/// What the zones run, resolved on the host before anything is made.
pub(super) enum Plan {
    Pgbench {
        bin: PathBuf,
    },
    Mariadb {
        bins: mariadb::Bins,
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
    let first = opts.workloads.first().copied().unwrap_or(Workload::Pgbench);
    let has = |w: Workload| opts.workloads.contains(&w);
    let mut results = ScaleResults {
        schema_version: SCHEMA_VERSION,
        date: now_rfc3339(),
        machine,
        workload: first,
        workloads: opts.workloads.clone(),
        study: opts.study.clone(),
        repeat: opts.repeat,
        warmup_s: opts.warmup.as_secs_f64(),
        budget_mib: opts.budget.map(|b| b as f64 / MIB),
        buffer_pct: opts.buffer_pct,
        sysbench_rows: has(Workload::Mariadb).then_some(opts.sysbench_rows),
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
        pgbench_scale: has(Workload::Pgbench).then_some(opts.pgbench_scale),
        results: Vec::new(),
        calibration: Vec::new(),
        summary: None,
        tune: None,
    };
    let mut plans: Vec<(Workload, Plan)> = Vec::new();
    for &w in &opts.workloads {
        let plan = match w {
            Workload::Pgbench => Plan::Pgbench {
                bin: pgbench::find_bin(Path::new("/"))?,
            },
            Workload::Mariadb => Plan::Mariadb {
                bins: mariadb::find_bins(Path::new("/"))?,
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
        plans.push((w, plan));
    }
    let notes: Vec<String> = plans.iter().map(|(_, p)| plan_note(opts, p)).collect();
    results.note = notes.join(" | ");
    if opts.oversubscribe_pct.is_some() || opts.budget.is_some() || opts.agent.is_some() {
        let others: Vec<String> = zone::names_in(&ctx.layout)?
            .into_iter()
            .filter(|n| !n.starts_with(PREFIX))
            .filter(|n| {
                zone::load(ctx, n).is_ok_and(|z| z.state(ctx) == crate::state::ZoneState::Running)
            })
            .collect();
        if !others.is_empty() {
            return Err(Error::Refused(format!(
                "--oversubscribe, --budget and --agent act on this state root's zone group (its memory budget, its zones), and zone(s) {} run in it; use a state root of its own (--root DIR)",
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

    let http = has(Workload::Http);
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
    let runs = study::order(opts);
    let mut out = Vec::new();
    let mut failure = None;
    // The swap I/O measured at the reference step, per (workload, repetition).
    let mut reference: Vec<(Workload, usize, AgentThresholds)> = Vec::new();
    for run in runs {
        let plan = &plans
            .iter()
            .find(|(w, _)| *w == run.workload)
            .expect("a plan for every workload")
            .1;
        let thresholds = match (run.policy, opts.thresholds_from) {
            (Some(_), Some(from)) if run.zones > from => reference
                .iter()
                .find(|(w, r, _)| *w == run.workload && *r == run.repetition)
                .map(|(.., t)| *t),
            _ => None,
        };
        let r = guards::check_signals("starting a step").and_then(|()| {
            run_step(
                ctx, opts, &run, thresholds, plan, &tname, &scratch.0, progress,
            )
        });
        let cleaned = cleanup(ctx);
        let net = if run.workload == Workload::Http {
            demo::cleanup_net(ctx)
        } else {
            Ok(())
        };
        match (r, cleaned, net) {
            (Ok(s), Ok(_), Ok(())) => {
                if !run.calibration && Some(run.zones) == opts.thresholds_from {
                    reference.push((
                        run.workload,
                        run.repetition,
                        study::thresholds_from_swap(
                            run.zones,
                            s.swap_in_pages_s,
                            s.swap_out_pages_s,
                        ),
                    ));
                }
                if run.calibration {
                    results.calibration.push(s)
                } else {
                    out.push(s)
                }
            }
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
    // Scaling efficiency against the 1-zone step of the same workload and repetition.
    let bases: Vec<(Workload, usize, f64)> = out
        .iter()
        .filter(|s| s.zones == 1 && s.agent_policy != Some(AgentPolicy::Suspend))
        .map(|s| (s.workload, s.repetition, s.throughput))
        .collect();
    for s in &mut out {
        s.scaling_efficiency = bases
            .iter()
            .find(|(w, r, _)| *w == s.workload && *r == s.repetition)
            .map(|b| b.2)
            .filter(|b| *b > 0.0)
            .map(|b| s.throughput / (b * s.zones as f64));
    }
    results.results = out;
    if opts.repeat > 1 || (opts.calibrate && first.is_database()) || opts.workloads.len() > 1 {
        results.summary = Some(study::summarize(&results));
    }
    Ok(results)
}

/// The report's note on what a workload runs.
fn plan_note(opts: &Options, plan: &Plan) -> String {
    match plan {
        Plan::Pgbench { bin } => format!(
            "pgbench: PostgreSQL from {} (host /usr through the sparse root), one server and one pgbench per zone over the zone's Unix socket, run as uid {} via setpriv; shared_buffers {} MiB ({} % of the zone's cap), page cache unrestricted (within the zone's cap); TPC-B-like default script, {} client(s) per zone, fsync on",
            bin.display(), pgbench::UID,
            pgbench::shared_buffers_mib(opts.memory_per_zone, opts.buffer_pct.unwrap_or(25)),
            opts.buffer_pct.unwrap_or(25), opts.clients
        ),
        Plan::Mariadb { bins } => format!(
            "mariadb: MariaDB from {} (host /usr through the sparse root), one server and one sysbench oltp_read_write per zone over the zone's Unix socket; InnoDB O_DIRECT, buffer pool {} MiB ({} % of the zone's cap), {} tables of {} rows, {} thread(s) per zone, innodb_flush_log_at_trx_commit 1",
            bins.server.display(),
            mariadb::buffer_pool_mib(opts.memory_per_zone, opts.buffer_pct.unwrap_or(50)),
            opts.buffer_pct.unwrap_or(50), mariadb::TABLES, opts.sysbench_rows, opts.clients
        ),
        Plan::Http { server, bin, .. } => format!(
            "{} ({}) on port {HTTP_PORT} in each zone (net = bridge, {} {}, at most {} zones per bridge{}); open-loop load from the host, in process: {} requests/s per zone scheduled by the clock, page mix 60 % 2 KiB html, 25 % 30 KiB asset, 10 % 200 KiB image, 5 % 404; one connection per request (HTTP/1.0); response time is from the scheduled time to the last byte; network sysctls {}",
            match server { http::Server::Busybox => "busybox httpd", http::Server::Nginx => "nginx" },
            bin.display(), opts.bridge, opts.subnet, opts.http.zones_per_bridge,
            if opts.http.pin { ", each zone pinned to one CPU (cpuset)" } else { "" },
            opts.http.rate,
            if opts.http.tune { "tuned for the largest step (--tune)" } else { "as the host has them (untuned)" }
        ),
    }
}

/// Write `results.json`, `report.md`, `throughput.svg` and `latency.svg` (http: and
/// `response_time.svg`; with a summary: `tpm-<database>.svg`) into `dir`.
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
    let mut more = Vec::new();
    if r.workloads.contains(&Workload::Http) {
        more.push((
            "response_time.svg".to_string(),
            report::response_time_svg(r),
        ));
    }
    // With a summary: TPM (median, min, max) against N per database, the oversubscribed
    // steps marked.
    if let Some(sum) = &r.summary {
        for &w in r.workloads.iter().filter(|w| w.is_database()) {
            more.push((format!("tpm-{}.svg", w.name()), study::tpm_svg(r, sum, w)));
        }
    }
    for (name, text) in more {
        let p = dir.join(&name);
        std::fs::write(&p, text).ctx(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
