//! Gathering a [`Snapshot`]: one pass over the zones (and OCI containers) with the
//! `stat` readers, the host's memstat rows, the agent's signals and journal, the
//! doctor's verdicts. Reads only; takes no lock.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use super::{AgentRow, DoctorRow, Scraper, Snapshot, ZoneRow, DOCTOR_REFRESH};
use crate::agent::{self, decide};
use crate::cgroups::CgroupSet;
use crate::error::Result;
use crate::stat::{self, readers};
use crate::state::ZoneState;
use crate::zone::{self, Context, Kind};
use crate::{doctor, stats};

/// Collect one scrape, reusing what `s` kept from the last one.
pub fn collect(ctx: &Context, s: &mut Scraper) -> Result<Snapshot> {
    let started = Instant::now();
    let mut zones = Vec::new();
    for (mut row, dir) in zone_rows(ctx, &zone::names_in(&ctx.layout)?) {
        row.disk_bytes = dir.and_then(|d| disk_bytes(s, d));
        zones.push(row);
    }
    if let Some(root) = &s.opts.oci_root {
        zones.extend(
            crate::oci::view::all(root, &ctx.host.proc)
                .into_iter()
                .map(oci_row),
        );
    }
    let meminfo = stats::meminfo(&ctx.host.proc);
    let g = |k: &str| meminfo.get(k).copied();
    let agent = agent_row(ctx, s);
    let doctor = if s.opts.doctor {
        cached_doctor_row(ctx, s);
        s.doctor.as_ref()
    } else {
        s.doctor.as_ref()
    };
    let doctor_age_seconds = doctor.map(|(at, _)| at.elapsed().as_secs_f64());
    let doctor = doctor.map(|(_, row)| row.clone());
    Ok(Snapshot {
        zones,
        host: stat::memstat::host_memory(&meminfo),
        host_available: g("MemAvailable"),
        swap: g("SwapTotal").zip(g("SwapFree")),
        host_pressure: readers::host_pressure(&ctx.host.proc),
        agent,
        doctor,
        doctor_age_seconds,
        collect_seconds: started.elapsed().as_secs_f64(),
    })
}

/// Zones per thread below which one thread reads them all.
const ZONES_PER_THREAD: usize = 64;

/// Every zone's row (its disk figure left to the caller, which keeps the cache) and
/// the directory its disk figure measures, in name order. The zones are split among
/// up to one thread per CPU (each with its own [`Context`], which is not shared
/// between threads): the pass is mostly waiting on small kernel reads, and on a busy
/// host each thread gets its own share of a CPU. A zone whose files cannot be read is
/// left out (`warren list` says why).
fn zone_rows(ctx: &Context, names: &[String]) -> Vec<(ZoneRow, Option<PathBuf>)> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cpus.min(names.len().div_ceil(ZONES_PER_THREAD)).max(1);
    let read = |ctx: &Context, names: &[String]| -> Vec<(ZoneRow, Option<PathBuf>)> {
        names
            .iter()
            .filter_map(|n| zone::load(ctx, n).ok())
            .map(|z| (zone_row(ctx, &z), stat::private_dir(&z)))
            .collect()
    };
    if threads == 1 {
        return read(ctx, names);
    }
    let chunk = names.len().div_ceil(threads);
    std::thread::scope(|sc| {
        let handles: Vec<_> = names
            .chunks(chunk)
            .map(|part| {
                let (layout, host) = (ctx.layout.clone(), ctx.host.clone());
                sc.spawn(move || read(&Context::new(layout, host), part))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// One zone: its config and state from its files, its figures from its cgroups while
/// booted.
fn zone_row(ctx: &Context, z: &zone::Zone) -> ZoneRow {
    let state = z.state(ctx);
    let rt = z.runtime.as_ref().filter(|_| state >= ZoneState::Ready);
    let set = rt.map(|r| &r.cgroups);
    let mut row = usage_row(&z.name, Kind::Zone, state, set);
    row.template = Some(z.config.template.clone());
    row.net = Some(z.config.net);
    row.priority = Some(z.config.priority);
    row.boot_time_s = rt.map(|r| r.booted_at_ms as f64 / 1000.0);
    row.memory_request = z.config.limits.memory_request;
    row.disk_limit = z.config.disk_max;
    row.net_bytes = rt
        .and_then(|r| r.net.as_ref())
        .and_then(|n| readers::zone_net_bytes(&ctx.host.sys, &n.veth));
    row
}

/// The figures every row reads from its cgroups (none when `set` is `None`).
fn usage_row(name: &str, kind: Kind, state: ZoneState, set: Option<&CgroupSet>) -> ZoneRow {
    let (processes, tasks, tasks_limit) = set.map(readers::zone_pids).unwrap_or_default();
    ZoneRow {
        name: name.to_string(),
        kind,
        template: None,
        state,
        net: None,
        priority: None,
        boot_time_s: None,
        cpu_seconds: set.and_then(readers::zone_cpu_ns).map(|ns| ns as f64 / 1e9),
        memory: set.map(readers::zone_memory).unwrap_or_default(),
        memory_limit: set.and_then(readers::zone_memory_limit),
        memory_request: None,
        processes,
        tasks,
        tasks_limit,
        oom_kills: set.and_then(CgroupSet::oom_kills),
        disk_bytes: None,
        disk_limit: None,
        net_bytes: None,
        memory_pressure: set.and_then(readers::zone_pressure),
    }
}

/// An OCI container: its cgroups while its init lives; no config, template or disk.
fn oci_row(seen: crate::oci::view::Seen) -> ZoneRow {
    let state = crate::oci::view::zone_state(seen.status);
    let set = seen
        .record
        .cgroups
        .as_ref()
        .filter(|_| state >= ZoneState::Ready);
    let mut row = usage_row(&seen.record.id, Kind::Oci, state, set);
    row.boot_time_s = seen
        .uptime_s
        .map(|u| (agent::act::now_ms() / 1000).saturating_sub(u) as f64);
    row
}

/// A private layer's allocated bytes, walked again at most every
/// [`stat::DISK_REFRESH`].
fn disk_bytes(s: &mut Scraper, dir: PathBuf) -> Option<u64> {
    if let Some((at, bytes)) = s.disk.get(&dir) {
        if at.elapsed() < stat::DISK_REFRESH {
            return Some(*bytes);
        }
    }
    let bytes = crate::fsutil::disk_usage(&dir).ok()?;
    s.disk.insert(dir, (Instant::now(), bytes));
    Some(bytes)
}

/// The agent's signals as it computes them (host, or its watched cgroup's budget) and
/// its actions counted from the journal.
fn agent_row(ctx: &Context, s: &mut Scraper) -> AgentRow {
    let now = agent::act::now_ms();
    let host = agent::sample::host(&ctx.host.proc);
    s.rates.push(now, host.pswpin, host.pswpout);
    let budget = agent::watched_dir(ctx, &s.opts.agent)
        .ok()
        .flatten()
        .and_then(|d| agent::sample::budget(&d));
    let sample = agent::sample::signals(now, &host, budget.as_ref(), &s.rates);
    let th = s.opts.agent.thresholds();
    let signals = decide::SIGNALS
        .iter()
        .enumerate()
        .map(|(i, sig)| {
            let name = serde_json::to_value(sig)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            (name, sample.values[i], th.0[i].trigger)
        })
        .collect();
    let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    // An unreadable journal shows no actions; the signals still do.
    for e in agent::act::read(&ctx.layout).unwrap_or_default() {
        let outcome = if e.error.is_some() { "failed" } else { "done" };
        *counts
            .entry((e.action.clone(), outcome.into()))
            .or_default() += 1;
        let t = last.entry(e.action).or_default();
        *t = (*t).max(e.time_ms);
    }
    AgentRow {
        signals,
        swap_pages: (host.pswpin, host.pswpout),
        actions: counts.into_iter().map(|((a, o), n)| (a, o, n)).collect(),
        last_action_s: last
            .into_iter()
            .map(|(a, ms)| (a, ms as f64 / 1000.0))
            .collect(),
    }
}

/// The doctor's verdicts kept in `s`, run again when older than [`DOCTOR_REFRESH`].
fn cached_doctor_row(ctx: &Context, s: &mut Scraper) {
    if s.doctor
        .as_ref()
        .is_some_and(|(at, _)| at.elapsed() < DOCTOR_REFRESH)
    {
        return;
    }
    let row = doctor_row(ctx, s.opts.doctor_zones);
    s.doctor = Some((Instant::now(), row));
}

/// The doctor's verdicts for a planned density of `zones` (at least 1) zones of one
/// process each, as `warren doctor --zones N` judges them, the cgroup delegation
/// check read-only (a scrape prepares nothing). One check forks a throwaway user
/// namespace: call it from a single-threaded process (a daemon runs `warren metrics
/// --doctor-row` in a child).
pub fn doctor_row(ctx: &Context, zones: u64) -> DoctorRow {
    let plan = doctor::Plan::new(zones.max(1), 1, None, 0, doctor::NetPlan::None)
        .expect("a plan of at least one zone with one process each is valid");
    let mut findings = doctor::assess(&doctor::read_snapshot(ctx), &plan);
    findings.extend(doctor::host_findings(ctx, false));
    DoctorRow {
        plan_zones: plan.zones,
        findings,
    }
}
