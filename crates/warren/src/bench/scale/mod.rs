//! `warren bench scale`: aggregate throughput of a real workload against the number of
//! zones, as in the consolidation studies (VMs at 1, 2, 4, 8 per host running a
//! database, with and without memory oversubscription).
//!
//! For each step N: clone N zones from one installed zone of the `host` template (each
//! capped at `--memory-per-zone`, and at `--cpu-per-zone` if given), boot them, start
//! the workload in every zone ([`pgbench`]: PostgreSQL + pgbench inside each zone;
//! [`http`]: busybox httpd in each bridged zone, load from this process), run it in
//! all zones at once for `--duration`, and record aggregate throughput, latency,
//! the zones' CPU, memory and swap, and the agent's evictions. Then halt and delete.
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
//! Everything the bench makes (zones, template, swap, budget, agent, scratch files,
//! the bridge) is undone when a step ends, also on failure.

pub mod http;
pub mod pgbench;
pub mod report;

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{cleanup, ensure_template, machine, now_rfc3339, Machine, Scratch, Templates, PREFIX};
use crate::agent::act;
use crate::cgroups::CgroupSet;
use crate::error::{Error, IoContext, Result};
use crate::measure::{ms, summarize, Progress, Summary};
use crate::storage::template::{self, Source};
use crate::swap::{self, EnableOptions};
use crate::zone::{self, Context};
use crate::{demo, stats};

/// Version of the scale `results.json` layout.
pub const SCHEMA_VERSION: u32 = 1;
/// busybox httpd's port inside each zone.
const HTTP_PORT: u16 = 80;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Pgbench,
    Http,
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
    pub agent: bool,
    pub duration: Duration,
    /// pgbench connections, or load-generator threads, per zone.
    pub clients: usize,
    /// pgbench scale factor (about 15 MiB of tables per unit).
    pub pgbench_scale: u32,
    /// http: the bridge and subnet of the zones.
    pub bridge: String,
    pub subnet: String,
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
    /// Evictions by the agent during the step.
    pub evictions: u64,
    pub total_s: f64,
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
    pub duration_s: f64,
    pub clients_per_zone: usize,
    pub pgbench_scale: Option<u32>,
    pub results: Vec<ScaleStep>,
}

/// What the zones run, resolved on the host before anything is made.
enum Plan {
    Pgbench { bin: PathBuf },
    Http { busybox: PathBuf },
}

/// `warren login ZONE -- /bin/sh -c SCRIPT` as a child, stdout and stderr to `log`
/// (a file, never a pipe: a daemon the script starts could hold a pipe open).
fn login(ctx: &Context, zone: &str, script: &str, log: &Path) -> Result<Child> {
    let exe = std::env::current_exe().ctx(|| "finding the warren binary".to_string())?;
    let f = File::create(log).ctx(|| format!("creating {}", log.display()))?;
    let f2 = f
        .try_clone()
        .ctx(|| format!("duplicating {}", log.display()))?;
    Command::new(exe)
        .env("WARREN_ROOT", ctx.layout.root())
        .args(["login", zone, "--", "/bin/sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(f)
        .stderr(f2)
        .spawn()
        .ctx(|| format!("zone '{zone}': starting warren login"))
}

/// Children of one phase; killed and reaped on drop if still running.
struct Logins(Vec<(String, PathBuf, Child)>);

impl Drop for Logins {
    fn drop(&mut self) {
        for (_, _, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Logins {
    fn all_done(&mut self) -> bool {
        self.0
            .iter_mut()
            .all(|(_, _, c)| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Wait for all; (zone, success, output) each.
    fn wait(mut self) -> Vec<(String, bool, String)> {
        std::mem::take(&mut self.0)
            .into_iter()
            .map(|(zone, log, mut c)| {
                let ok = c.wait().map(|s| s.success()).unwrap_or(false);
                let out = std::fs::read_to_string(&log).unwrap_or_default();
                (zone, ok, out)
            })
            .collect()
    }
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.trim().lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" / ")
}

/// Run `script(zone index)` in every zone at once; an error names the first zone that failed.
fn in_all_zones(
    ctx: &Context,
    names: &[String],
    logs: &Path,
    what: &str,
    script: &dyn Fn(usize) -> String,
) -> Result<()> {
    let mut l = Logins(Vec::new());
    for (i, z) in names.iter().enumerate() {
        let log = logs.join(format!("{z}-{what}.log"));
        l.0.push((z.clone(), log.clone(), login(ctx, z, &script(i), &log)?));
    }
    for (zone, ok, out) in l.wait() {
        if !ok {
            return Err(Error::Refused(format!(
                "zone '{zone}': {what} failed: {}",
                tail(&out)
            )));
        }
    }
    Ok(())
}

/// The memory budget on the zone group; the old limit is written back on drop.
struct Budget {
    file: PathBuf,
    old: String,
}

impl Drop for Budget {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.file, &self.old);
    }
}

fn set_budget(ctx: &Context, bytes: u64) -> Result<Budget> {
    let (driver, _) = ctx.cgroups()?;
    let dir = driver
        .parents()
        .into_iter()
        .find(|(c, _)| c.split(',').any(|x| x == "memory") || c.is_empty())
        .map(|(_, d)| d)
        .ok_or_else(|| {
            Error::Unsupported("--oversubscribe: no memory cgroup for the zones' group".into())
        })?;
    let file = ["memory.limit_in_bytes", "memory.max"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.exists())
        .ok_or_else(|| {
            Error::Unsupported(format!(
                "--oversubscribe: {} has no memory limit file",
                dir.display()
            ))
        })?;
    let old = std::fs::read_to_string(&file).ctx(|| format!("reading {}", file.display()))?;
    std::fs::write(&file, bytes.to_string()).ctx(|| {
        format!(
            "--oversubscribe: writing the budget to {} (lower it, or raise --memory-per-zone)",
            file.display()
        )
    })?;
    Ok(Budget {
        file,
        old: old.trim().to_string(),
    })
}

/// warren swap this step enabled; disabled on drop.
struct SwapOn<'a>(&'a Context);

impl Drop for SwapOn<'_> {
    fn drop(&mut self) {
        let _ = swap::disable(&self.0.layout, &self.0.host.proc, &self.0.host.sys);
    }
}

/// Deletes the bench's zones on drop (before the swap guard turns swap off).
struct ZonesGone<'a>(&'a Context);

impl Drop for ZonesGone<'_> {
    fn drop(&mut self) {
        let _ = cleanup(self.0);
    }
}

/// `warren agent` for the step; killed on drop.
struct AgentChild(Child);

impl Drop for AgentChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_agent(ctx: &Context, scratch: &Path) -> Result<AgentChild> {
    let cfg = scratch.join("agent.toml");
    std::fs::write(&cfg, "watch = \"group\"\ninterval-ms = 250\n")
        .ctx(|| format!("writing {}", cfg.display()))?;
    let log = scratch.join("agent.log");
    let f = File::create(&log).ctx(|| format!("creating {}", log.display()))?;
    let exe = std::env::current_exe().ctx(|| "finding the warren binary".to_string())?;
    let child = Command::new(exe)
        .env("WARREN_ROOT", ctx.layout.root())
        .arg("agent")
        .arg("--config")
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(f)
        .stderr(Stdio::null())
        .spawn()
        .ctx(|| "--agent: starting warren agent".to_string())?;
    Ok(AgentChild(child))
}

/// Host memory figures, bytes: (MemAvailable, swap total, swap used).
fn host_mem(proc_root: &Path) -> (u64, u64, u64) {
    let m = stats::meminfo(proc_root);
    let g = |k: &str| m.get(k).copied().unwrap_or(0);
    (
        g("MemAvailable"),
        g("SwapTotal"),
        g("SwapTotal").saturating_sub(g("SwapFree")),
    )
}

/// Peaks sampled while the workload runs.
#[derive(Default)]
struct Peaks {
    zones_mem: u64,
    host_used: u64,
    swap_used: u64,
}

impl Peaks {
    fn sample(&mut self, proc_root: &Path, cgroups: &[CgroupSet], available_before: u64) {
        let zones: u64 = cgroups.iter().filter_map(|c| c.memory_bytes()).sum();
        let (avail, _, swap) = host_mem(proc_root);
        self.zones_mem = self.zones_mem.max(zones);
        self.host_used = self.host_used.max(available_before.saturating_sub(avail));
        self.swap_used = self.swap_used.max(swap);
    }
}

const MIB: f64 = (1u64 << 20) as f64;

/// Run the bench. Writes nothing; see [`write`].
pub fn run(ctx: &Context, opts: &Options, progress: &mut dyn Progress) -> Result<ScaleResults> {
    ctx.require_root()?;
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
        agent: opts.agent,
        duration_s: opts.duration.as_secs_f64(),
        clients_per_zone: opts.clients,
        pgbench_scale: (opts.workload == Workload::Pgbench).then_some(opts.pgbench_scale),
        results: Vec::new(),
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
                busybox: template::find_static_busybox()?,
            }
        }
    };
    results.note = match &plan {
        Plan::Pgbench { bin } => format!(
            "PostgreSQL from {} (host /usr through the sparse root), one server and one pgbench per zone over the zone's Unix socket, run as uid {} via setpriv; shared_buffers {} MiB; TPC-B-like default script, {} client(s) per zone, fsync on",
            bin.display(), pgbench::UID, pgbench::shared_buffers_mib(opts.memory_per_zone), opts.clients
        ),
        Plan::Http { busybox } => format!(
            "busybox httpd ({}) on port {HTTP_PORT} in each zone (net = bridge, {} {}), 1 KiB page; load from the host, in process: {} thread(s) per zone, one connection per request (HTTP/1.0, no keep-alive); response time is connect to last byte",
            busybox.display(), opts.bridge, opts.subnet, opts.clients
        ),
    };
    if opts.oversubscribe_pct.is_some() || opts.agent {
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

    let mut out = Vec::new();
    let mut failure = None;
    for &n in &opts.steps {
        let r = run_step(ctx, opts, &plan, &tname, n, &scratch.0, progress);
        let cleaned = cleanup(ctx);
        let net = if opts.workload == Workload::Http {
            demo::cleanup_net(ctx)
        } else {
            Ok(())
        };
        match (r, cleaned, net) {
            (Ok(s), Ok(_), Ok(())) => out.push(s),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                failure = Some(e);
                break;
            }
        }
    }
    progress.done();
    drop(templates);
    if let Some(e) = failure {
        return Err(e);
    }
    let base = out.iter().find(|s| s.zones == 1).map(|s| s.throughput);
    for s in &mut out {
        s.scaling_efficiency = base
            .filter(|b| *b > 0.0)
            .map(|b| s.throughput / (b * s.zones as f64));
    }
    results.results = out;
    Ok(results)
}

fn run_step(
    ctx: &Context,
    opts: &Options,
    plan: &Plan,
    tname: &str,
    n: usize,
    scratch: &Path,
    progress: &mut dyn Progress,
) -> Result<ScaleStep> {
    let started = Instant::now();
    let step_ms = act::now_ms();
    let logs = scratch.join(format!("step-{n}"));
    std::fs::create_dir_all(&logs).ctx(|| format!("creating {}", logs.display()))?;
    let mut sets = vec![format!("memory.max={}", opts.memory_per_zone)];
    if let Some(c) = opts.cpu_per_zone {
        sets.push(format!("cpu.max={c}"));
    }
    if opts.workload == Workload::Http {
        sets.push("net=bridge".into());
        sets.push(format!("net-bridge={}", opts.bridge));
        sets.push(format!("net-subnet={}", opts.subnet));
    }
    let total = opts.memory_per_zone * n as u64;
    let (available_start, swap_total_start, _) = host_mem(&ctx.host.proc);
    let budget = opts
        .oversubscribe_pct
        .map(|p| (total as f64 / (1.0 + p / 100.0)) as u64);
    if let Some(b) = budget {
        if b > available_start {
            return Err(Error::Refused(format!(
                "--oversubscribe: the zones' budget for {n} zones is {:.0} MiB but the host has {:.0} MiB available; lower --memory-per-zone",
                b as f64 / MIB,
                available_start as f64 / MIB
            )));
        }
    }
    let _swap = match budget {
        Some(b) if total > b && swap_total_start == 0 => {
            let size = (total - b).max(64 << 20);
            let (_, already) = swap::enable(
                &ctx.layout,
                &ctx.host.proc,
                &ctx.host.sys,
                &EnableOptions {
                    size,
                    file: None,
                    zram: false,
                    swappiness: 60,
                },
            )?;
            // Swap this root had already enabled (recorded but not active) is not ours to turn off.
            (!already).then_some(SwapOn(ctx))
        }
        _ => None,
    };
    // Declared after the swap guard, so the zones are gone before swap is turned off.
    let _zones_gone = ZonesGone(ctx);
    let swap_total = host_mem(&ctx.host.proc).1;

    let base = format!("{PREFIX}base");
    zone::create(ctx, &base, Some(tname), None, &sets)?;
    zone::install(ctx, &base)?;
    let names: Vec<String> = (1..=n).map(|i| format!("{PREFIX}s{i:04}")).collect();
    progress.phase(&format!("N={n} clone"), n as u64);
    for z in &names {
        zone::clone(ctx, &base, z)?;
        progress.step();
    }
    let (available_before, ..) = host_mem(&ctx.host.proc);
    progress.phase(&format!("N={n} boot"), n as u64);
    let mut boot_ms = Vec::new();
    for z in &names {
        let t = Instant::now();
        zone::boot(ctx, z)?;
        boot_ms.push(ms(t.elapsed()));
        progress.step();
    }
    let zones: Vec<zone::Zone> = names
        .iter()
        .map(|z| zone::load(ctx, z))
        .collect::<Result<_>>()?;
    let cgroups: Vec<CgroupSet> = zones
        .iter()
        .filter_map(|z| z.runtime.as_ref().map(|r| r.cgroups.clone()))
        .collect();
    let _budget = budget.map(|b| set_budget(ctx, b)).transpose()?;
    let _agent = if opts.agent {
        Some(start_agent(ctx, scratch)?)
    } else {
        None
    };

    progress.phase(&format!("N={n} setup"), 1);
    let t_setup = Instant::now();
    let run = match plan {
        Plan::Pgbench { bin } => {
            in_all_zones(ctx, &names, &logs, "setup", &|_| {
                pgbench::setup_script(bin, opts.memory_per_zone, opts.clients, opts.pgbench_scale)
            })?;
            let setup_s = t_setup.elapsed().as_secs_f64();
            progress.step();
            let r = run_pgbench(
                ctx,
                opts,
                bin,
                &names,
                &logs,
                &cgroups,
                available_before,
                progress,
            );
            // Stop the servers cleanly before halt (errors here do not void the run).
            let _ = in_all_zones(ctx, &names, &logs, "stop", &|_| pgbench::stop_script(bin));
            r.map(|r| (setup_s, r))
        }
        Plan::Http { busybox } => {
            let addrs: Vec<SocketAddr> = zones
                .iter()
                .map(|z| {
                    z.runtime
                        .as_ref()
                        .and_then(|r| r.net.as_ref())
                        .map(|net| SocketAddr::from((net.address, HTTP_PORT)))
                        .ok_or_else(|| {
                            Error::Refused(format!("zone '{}': booted without an address", z.name))
                        })
                })
                .collect::<Result<_>>()?;
            in_all_zones(ctx, &names, &logs, "httpd", &|_| {
                http::setup_script(busybox, HTTP_PORT)
            })?;
            http::wait_ready(&addrs, Duration::from_secs(10)).map_err(|a| {
                Error::Refused(format!(
                    "{a}: httpd does not answer from the host; is forwarding to the bridge blocked by a firewall?"
                ))
            })?;
            let setup_s = t_setup.elapsed().as_secs_f64();
            progress.step();
            Ok((
                setup_s,
                run_http(ctx, opts, &addrs, &cgroups, available_before, progress),
            ))
        }
    };
    let (setup_s, r) = run?;
    let evictions = act::read(&ctx.layout)
        .unwrap_or_default()
        .iter()
        .filter(|e| e.action == "evict" && e.zone.starts_with(PREFIX) && e.time_ms >= step_ms)
        .count() as u64;
    let memory_total_mib = total as f64 / MIB;
    let budget_bytes = budget.unwrap_or(available_start);
    Ok(ScaleStep {
        zones: n,
        cpu_cap_total: opts.cpu_per_zone.map(|c| c * n as f64),
        memory_total_mib,
        budget_mib: budget.map(|b| b as f64 / MIB),
        oversubscription_pct: (total as f64 / budget_bytes.max(1) as f64 - 1.0) * 100.0,
        swap_total_mib: swap_total as f64 / MIB,
        boot_ms: summarize(&boot_ms),
        setup_s,
        throughput: r.throughput,
        tpm: r.tpm,
        per_zone: r.per_zone,
        latency_avg_ms: r.latency_avg_ms,
        latency_p99_ms: r.latency_p99_ms,
        scaling_efficiency: None,
        errors: r.errors,
        failed_zones: r.failed_zones,
        zones_cpu_pct: r.zones_cpu_pct,
        zones_memory_peak_mib: r.peaks.zones_mem as f64 / MIB,
        host_memory_used_peak_mib: r.peaks.host_used as f64 / MIB,
        swap_used_peak_mib: r.peaks.swap_used as f64 / MIB,
        evictions,
        total_s: started.elapsed().as_secs_f64(),
    })
}

/// What one timed run measured.
struct RunResult {
    throughput: f64,
    tpm: Option<f64>,
    per_zone: Vec<f64>,
    latency_avg_ms: f64,
    latency_p99_ms: Option<f64>,
    errors: u64,
    failed_zones: Vec<String>,
    zones_cpu_pct: f64,
    peaks: Peaks,
}

fn cpu_ns(cgroups: &[CgroupSet]) -> u64 {
    cgroups.iter().filter_map(|c| c.cpu_ns()).sum()
}

#[allow(clippy::too_many_arguments)]
fn run_pgbench(
    ctx: &Context,
    opts: &Options,
    bin: &Path,
    names: &[String],
    logs: &Path,
    cgroups: &[CgroupSet],
    available_before: u64,
    progress: &mut dyn Progress,
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
    let mut peaks = Peaks::default();
    let mut ticked = 0;
    while !l.all_done() {
        peaks.sample(&ctx.host.proc, cgroups, available_before);
        std::thread::sleep(Duration::from_millis(250));
        let s = t0.elapsed().as_secs().min(secs);
        while ticked < s {
            progress.step();
            ticked += 1;
        }
    }
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
    })
}

fn run_http(
    ctx: &Context,
    opts: &Options,
    addrs: &[SocketAddr],
    cgroups: &[CgroupSet],
    available_before: u64,
    progress: &mut dyn Progress,
) -> RunResult {
    let secs = opts.duration.as_secs().max(1);
    progress.phase(&format!("N={} http load {secs} s", addrs.len()), secs);
    let cpu0 = cpu_ns(cgroups);
    let t0 = Instant::now();
    let (a, c, d) = (addrs.to_vec(), opts.clients, Duration::from_secs(secs));
    let handle = std::thread::spawn(move || http::load(&a, c, d));
    let mut peaks = Peaks::default();
    let mut ticked = 0;
    while !handle.is_finished() {
        peaks.sample(&ctx.host.proc, cgroups, available_before);
        std::thread::sleep(Duration::from_millis(250));
        let s = t0.elapsed().as_secs().min(secs);
        while ticked < s {
            progress.step();
            ticked += 1;
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let zones_cpu_pct = cpu_ns(cgroups).saturating_sub(cpu0) as f64 / (elapsed * 1e9) * 100.0;
    let loads = handle.join().unwrap_or_default();
    let window = secs as f64;
    let per_zone: Vec<f64> = loads
        .iter()
        .map(|z| z.latencies_ms.len() as f64 / window)
        .collect();
    let all: Vec<f64> = loads
        .iter()
        .flat_map(|z| z.latencies_ms.iter().copied())
        .collect();
    let failed_zones = loads
        .iter()
        .zip(addrs)
        .filter(|(z, _)| z.latencies_ms.is_empty())
        .map(|(z, a)| format!("{a}: {} requests, all failed", z.requests))
        .collect();
    RunResult {
        throughput: per_zone.iter().sum(),
        tpm: None,
        per_zone,
        latency_avg_ms: if all.is_empty() {
            0.0
        } else {
            all.iter().sum::<f64>() / all.len() as f64
        },
        latency_p99_ms: Some(summarize(&all).p99),
        errors: loads.iter().map(|z| z.errors).sum(),
        failed_zones,
        zones_cpu_pct,
        peaks,
    }
}

/// Write `results.json`, `report.md` and `throughput.svg` (and `latency.svg`) into `dir`.
pub fn write(dir: &Path, r: &ScaleResults) -> Result<()> {
    std::fs::create_dir_all(dir).ctx(|| format!("creating {}", dir.display()))?;
    let put = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).ctx(|| format!("writing {}", p.display()))
    };
    let json = serde_json::to_string_pretty(r).expect("results serialize");
    put("results.json", json + "\n")?;
    put("report.md", report::markdown(r))?;
    put("throughput.svg", report::throughput_svg(r))?;
    put("latency.svg", report::latency_svg(r))?;
    Ok(())
}
