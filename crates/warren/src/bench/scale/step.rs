//! One step of `warren bench scale`: N zones cloned and booted under the step's
//! guards (budget, swap, agent; see the module doc of [`super`]), the workload set up
//! in every zone, run for the duration ([`super::timed`]), then everything undone.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use super::super::PREFIX;
use super::guards::{check_signals, set_budget, start_agent, SwapOn, ZonesGone};
use super::login::in_all_zones;
use super::spread::{self, Placement};
use super::study::Run;
use super::timed::{run_db, run_http, DbClient, DbOutcome};
use super::{
    http, mariadb, pgbench, AgentPolicy, AgentThresholds, Options, Plan, ScaleStep, Workload,
    HTTP_PORT, MIB,
};
use crate::agent::act;
use crate::cgroups::CgroupSet;
use crate::error::{Error, IoContext, Result};
use crate::measure::{ms, summarize, Progress};
use crate::state::ZoneState;
use crate::stats;
use crate::swap::{self, EnableOptions};
use crate::zone::{self, Context};

/// Host memory figures, bytes: (MemAvailable, swap total, swap used).
pub(super) fn host_mem(proc_root: &Path) -> (u64, u64, u64) {
    let m = stats::meminfo(proc_root);
    let g = |k: &str| m.get(k).copied().unwrap_or(0);
    (
        g("MemAvailable"),
        g("SwapTotal"),
        g("SwapTotal").saturating_sub(g("SwapFree")),
    )
}

/// A python3 process that holds `bytes` of anonymous memory (one random page repeated:
/// no page is zero, none compresses) and touches every page once a second, in the
/// background.
fn working_set_script(bytes: u64) -> String {
    format!(
        "nohup python3 -c '\nimport os, time\nb = bytearray(os.urandom(4096) * ({bytes} // 4096))\nwhile True:\n    for i in range(0, len(b), 4096): b[i] = (b[i] + 1) & 255\n    time.sleep(1)\n' </dev/null >/dev/null 2>&1 &\necho started\n"
    )
}

/// The zones of `names` that are neither running nor suspended (evicted, or dead).
fn zones_lost(ctx: &Context, names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter(|z| {
            !zone::load(ctx, z)
                .is_ok_and(|z| matches!(z.state(ctx), ZoneState::Running | ZoneState::Suspended))
        })
        .cloned()
        .collect()
}

/// When the step's time is up: note the zones lost, then under the suspend policy stop
/// the agent (so it suspends nothing more) and resume every suspended zone, so that a
/// frozen workload finishes and is counted.
fn at_time_up(
    ctx: &Context,
    names: &[String],
    policy: Option<AgentPolicy>,
    agent: &mut Option<super::guards::AgentChild>,
) -> Vec<String> {
    let lost = zones_lost(ctx, names);
    if policy == Some(AgentPolicy::Suspend) {
        drop(agent.take());
        for z in names {
            if zone::load(ctx, z).is_ok_and(|z| z.state(ctx) == ZoneState::Suspended) {
                let _ = zone::resume(ctx, z);
            }
        }
    }
    lost
}

/// The CPU cap on every zone, live, once the workload is set up (setting up a database
/// under a cap of a fraction of a CPU would take most of the step; the study measures
/// the capped run).
fn cap_cpu(ctx: &Context, opts: &Options, names: &[String]) -> Result<()> {
    if let Some(c) = opts.cpu_per_zone {
        for z in names {
            zone::config_set(ctx, z, &[format!("cpu.max={c}")], zone::ApplyTo::LiveOnly)?;
        }
    }
    Ok(())
}

/// The agent's events of this step (since `since_ms`, the bench's zones), one line each.
fn agent_actions(ctx: &Context, since_ms: u64) -> Vec<String> {
    act::read(&ctx.layout)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.zone.starts_with(PREFIX) && e.time_ms >= since_ms)
        .map(|e| {
            format!(
                "{:.1} s: {} {} ({}){}",
                e.time_ms.saturating_sub(since_ms) as f64 / 1000.0,
                e.action,
                e.zone,
                e.reason,
                e.usage_bytes.map_or(String::new(), |u| format!(
                    ", the zone's memory {:.0} MiB",
                    u as f64 / MIB
                ))
            )
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run_step(
    ctx: &Context,
    opts: &Options,
    run: &Run,
    thresholds: Option<AgentThresholds>,
    plan: &Plan,
    tname: &str,
    scratch: &Path,
    progress: &mut dyn Progress,
) -> Result<ScaleStep> {
    let (n, policy, workload, repetition) = (run.zones, run.policy, run.workload, run.repetition);
    let started = Instant::now();
    let step_ms = act::now_ms();
    // The counterfactual run of a step (no agent in a run that has one) keeps its own logs.
    let logs = scratch.join(format!(
        "step-{}-{}{}-{n}{}",
        workload.name(),
        if run.calibration { "cal" } else { "rep" },
        run.repetition,
        if policy.is_none() && opts.agent.is_some() && !run.calibration {
            "-without-agent"
        } else {
            ""
        }
    ));
    std::fs::create_dir_all(&logs).ctx(|| format!("creating {}", logs.display()))?;
    let mut sets = vec![format!("memory.max={}", opts.memory_per_zone)];
    let placement: Vec<Placement> = if workload == Workload::Http {
        let subnet = opts
            .subnet
            .parse()
            .map_err(|e| Error::Invalid(format!("--subnet: {e}")))?;
        let cpus = opts.http.pin.then(|| stats::online_cpus(&ctx.host.sys));
        let p = spread::place(
            n,
            &opts.bridge,
            &subnet,
            opts.http.zones_per_bridge,
            cpus.as_deref(),
        )
        .map_err(Error::Invalid)?;
        sets.push("net=bridge".into());
        sets.push(format!("net-bridge={}", p[0].bridge));
        sets.push(format!("net-subnet={}", p[0].subnet));
        p
    } else {
        Vec::new()
    };
    let total = opts.memory_per_zone * n as u64;
    let (available_start, swap_total_start, _) = host_mem(&ctx.host.proc);
    let budget = opts.budget.or_else(|| {
        opts.oversubscribe_pct
            .map(|p| (total as f64 / (1.0 + p / 100.0)) as u64)
    });
    if let Some(b) = budget {
        if b > available_start {
            return Err(Error::Refused(format!(
                "{}: the zones' budget for {n} zones is {:.0} MiB but the host has {:.0} MiB available; {}",
                if opts.budget.is_some() { "--budget" } else { "--oversubscribe" },
                b as f64 / MIB,
                available_start as f64 / MIB,
                if opts.budget.is_some() { "lower --budget" } else { "lower --memory-per-zone" }
            )));
        }
    }
    // A fixed budget: the same swap at every step, as large as the largest step needs
    // (the study's host had its swap whatever ran); a budget per step: its own.
    let largest = opts.memory_per_zone * opts.steps.iter().copied().max().unwrap_or(n) as u64;
    let swap_need = match (budget, opts.budget) {
        (Some(b), Some(_)) if swap_total_start == 0 => Some(largest.saturating_sub(b)),
        (Some(b), None) if total > b && swap_total_start == 0 => Some(total - b),
        _ => None,
    };
    let _swap = match swap_need {
        Some(need) => {
            let size = need.max(64 << 20);
            let (_, already) = swap::enable(
                &ctx.layout,
                &ctx.host.proc,
                &ctx.host.sys,
                &EnableOptions {
                    size,
                    file: None,
                    zram: false,
                    zram_algorithm: None,
                    swappiness: 60,
                },
            )?;
            // Swap this root had already enabled (recorded but not active) is not ours to turn off.
            (!already).then_some(SwapOn(ctx))
        }
        None => None,
    };
    // Declared after the swap guard, so the zones are gone before swap is turned off.
    let _zones_gone = ZonesGone(ctx);
    let swap_total = host_mem(&ctx.host.proc).1;

    let base = format!("{PREFIX}base");
    zone::create(ctx, &base, Some(tname), None, &sets)?;
    zone::install(ctx, &base)?;
    let names: Vec<String> = (1..=n).map(|i| format!("{PREFIX}s{i:04}")).collect();
    progress.phase(&format!("N={n} clone"), n as u64);
    for (i, z) in names.iter().enumerate() {
        check_signals("cloning the zones")?;
        zone::clone(ctx, &base, z)?;
        if let Some(p) = placement.get(i) {
            // The base has the first bridge; a zone elsewhere, or pinned, gets its own.
            let mut own = Vec::new();
            if p.bridge != placement[0].bridge {
                own.push(format!("net-bridge={}", p.bridge));
                own.push(format!("net-subnet={}", p.subnet));
            }
            if let Some(cpu) = p.cpu {
                own.push(format!("cpuset={cpu}"));
            }
            if !own.is_empty() {
                zone::config_set(ctx, z, &own, zone::ApplyTo::NextBoot)?;
            }
        }
        progress.step();
    }
    let (available_before, ..) = host_mem(&ctx.host.proc);
    progress.phase(&format!("N={n} boot"), n as u64);
    let mut boot_ms = Vec::new();
    for z in &names {
        check_signals("booting the zones")?;
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
    // The agent starts once the workload is set up (loading the databases is not the
    // workload: study.rs), so it watches the warm-up and the measured window.
    let mut agent: Option<super::guards::AgentChild>;
    let start = || {
        policy
            .map(|p| start_agent(ctx, scratch, p, thresholds.as_ref()))
            .transpose()
    };
    let mut lost = Vec::new();

    progress.phase(&format!("N={n} setup"), 1);
    let t_setup = Instant::now();
    if let Some(ws) = opts.working_set {
        in_all_zones(ctx, &names, &logs, "working-set", &|_| {
            working_set_script(ws)
        })?;
    }
    let run = match plan {
        Plan::Pgbench { bin } => {
            let pct = opts.buffer_pct.unwrap_or(25);
            in_all_zones(ctx, &names, &logs, "setup", &|_| {
                pgbench::setup_script(
                    bin,
                    opts.memory_per_zone,
                    pct,
                    opts.clients,
                    opts.pgbench_scale,
                )
            })?;
            let setup_s = t_setup.elapsed().as_secs_f64();
            progress.step();
            cap_cpu(ctx, opts, &names)?;
            agent = start()?;
            let client = DbClient {
                name: "pgbench",
                script: &|threads, warmup, secs| {
                    pgbench::run_script(bin, opts.clients, threads, warmup, secs)
                },
                parse: &|out| {
                    pgbench::parse(out).map(|o| DbOutcome {
                        tps: o.tps,
                        latency_ms: o.latency_ms,
                        latency_p95_ms: None,
                        errors: o.failed,
                    })
                },
            };
            let r = run_db(
                ctx,
                opts,
                &client,
                &names,
                &logs,
                &cgroups,
                available_before,
                progress,
                &mut || lost = at_time_up(ctx, &names, policy, &mut agent),
            );
            // Stop the servers cleanly before halt (errors here do not void the run).
            let _ = in_all_zones(ctx, &names, &logs, "stop", &|_| pgbench::stop_script(bin));
            r.map(|r| (setup_s, r))
        }
        Plan::Mariadb { bins } => {
            let pct = opts.buffer_pct.unwrap_or(50);
            in_all_zones(ctx, &names, &logs, "setup", &|_| {
                mariadb::setup_script(
                    bins,
                    opts.memory_per_zone,
                    pct,
                    opts.clients,
                    opts.sysbench_rows,
                )
            })?;
            let setup_s = t_setup.elapsed().as_secs_f64();
            progress.step();
            cap_cpu(ctx, opts, &names)?;
            agent = start()?;
            let client = DbClient {
                name: "sysbench",
                script: &|threads, warmup, secs| {
                    mariadb::run_script(bins, opts.sysbench_rows, threads, warmup, secs)
                },
                parse: &|out| {
                    mariadb::parse(out).map(|o| DbOutcome {
                        tps: o.tps,
                        latency_ms: o.latency_ms,
                        latency_p95_ms: Some(o.latency_p95_ms),
                        errors: o.errors,
                    })
                },
            };
            let r = run_db(
                ctx,
                opts,
                &client,
                &names,
                &logs,
                &cgroups,
                available_before,
                progress,
                &mut || lost = at_time_up(ctx, &names, policy, &mut agent),
            );
            let _ = in_all_zones(ctx, &names, &logs, "stop", &|_| mariadb::stop_script(bins));
            r.map(|r| (setup_s, r))
        }
        Plan::Http {
            server,
            bin,
            busybox,
        } => {
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
                http::setup_script(*server, bin, busybox, HTTP_PORT)
            })?;
            // 10 s, and 100 ms more per zone: a busy host starts hundreds of servers slowly.
            let patience = Duration::from_secs(10) + Duration::from_millis(100) * n as u32;
            http::wait_ready(&addrs, patience).map_err(|a| {
                Error::Refused(format!(
                    "{a}: the web server does not answer from the host after {} s; is forwarding to the bridge blocked by a firewall, or the host too busy?",
                    patience.as_secs()
                ))
            })?;
            let setup_s = t_setup.elapsed().as_secs_f64();
            progress.step();
            cap_cpu(ctx, opts, &names)?;
            agent = start()?;
            let bridges = spread::bridges(&placement);
            run_http(
                ctx,
                opts,
                &addrs,
                &cgroups,
                available_before,
                progress,
                &mut || lost = at_time_up(ctx, &names, policy, &mut agent),
            )
            .map(|mut r| {
                if let Some(h) = r.http.as_mut() {
                    h.bridges = bridges;
                    h.pinned = opts.http.pin;
                }
                (setup_s, r)
            })
        }
    };
    let (setup_s, r) = run?;
    let actions = act::read(&ctx.layout).unwrap_or_default();
    let count = |action: &str| {
        actions
            .iter()
            .filter(|e| e.action == action && e.zone.starts_with(PREFIX) && e.time_ms >= step_ms)
            .count() as u64
    };
    let memory_total_mib = total as f64 / MIB;
    let budget_bytes = budget.unwrap_or(available_start);
    let (_, _, swap_in, swap_out) = r.peaks.window().unwrap_or_default();
    Ok(ScaleStep {
        workload,
        repetition,
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
        latency_p95_ms: r.latency_p95_ms,
        scaling_efficiency: None,
        errors: r.errors,
        failed_zones: r.failed_zones,
        zones_cpu_pct: r.zones_cpu_pct,
        zones_memory_peak_mib: r.peaks.zones_mem as f64 / MIB,
        host_memory_used_peak_mib: r.peaks.host_used as f64 / MIB,
        swap_used_peak_mib: r.peaks.swap_used as f64 / MIB,
        swap_in_pages_s: swap_in,
        swap_out_pages_s: swap_out,
        swap_in_peak_pages_s: r.peaks.swap_in_peak,
        swap_out_peak_pages_s: r.peaks.swap_out_peak,
        agent_thresholds: thresholds.filter(|_| policy.is_some()),
        agent_actions: if policy.is_some() {
            agent_actions(ctx, step_ms)
        } else {
            Vec::new()
        },
        agent_policy: policy,
        evictions: count("evict"),
        suspensions: count("suspend"),
        oom_kills: r.peaks.oom_kills.iter().sum(),
        zones_lost: lost,
        total_s: started.elapsed().as_secs_f64(),
        http: r.http,
    })
}
