//! `warren bench`: checking and resolving its flags; `bench metrics`, `bench cri`.

use super::*;

/// `bench scale`'s http options, checked.
pub(super) fn scale_http_options(a: &args::ScaleHttpArgs) -> Result<bench::scale::HttpOptions> {
    if !(a.rate > 0.0 && a.rate <= 1000.0) {
        return Err(Error::Invalid(format!(
            "--rate {}: give requests per second per zone above 0 and at most 1000, e.g. 5",
            a.rate
        )));
    }
    if !(1..=crate::net::BRIDGE_MAX_PORTS).contains(&a.zones_per_bridge) {
        return Err(Error::Invalid(format!(
            "--zones-per-bridge {}: give 1 to {} (a bridge's port limit)",
            a.zones_per_bridge,
            crate::net::BRIDGE_MAX_PORTS
        )));
    }
    Ok(bench::scale::HttpOptions {
        server: a.server,
        rate: a.rate,
        tune: a.tune,
        pin: a.pin,
        zones_per_bridge: a.zones_per_bridge,
    })
}

/// `bench scale`'s flags as given (before the study preset and the checks).
pub(super) struct ScaleFlags<'a> {
    pub workload: Option<&'a str>,
    pub study: Option<&'a str>,
    pub budget: Option<&'a str>,
    pub zones: Option<&'a str>,
    pub memory_per_zone: Option<&'a str>,
    pub cpu_per_zone: Option<f64>,
    pub oversubscribe: Option<f64>,
    pub agent: Option<bench::scale::AgentPolicy>,
    pub working_set: Option<&'a str>,
    pub duration: u64,
    pub warmup: Option<u64>,
    pub repeat: Option<usize>,
    pub calibrate: bool,
    pub thresholds_from: Option<usize>,
    pub counterfactual: bool,
    pub buffer_pct: Option<u32>,
    pub sysbench_rows: u32,
    pub clients: usize,
    pub pgbench_scale: u32,
    pub bridge: String,
    pub subnet: String,
    /// http's `--no-calibration`.
    pub no_calibration: bool,
}

/// `--workload`: one name, or several databases separated by commas.
fn parse_workloads(s: &str) -> Result<Vec<bench::scale::Workload>> {
    use bench::scale::Workload;
    let mut out = Vec::new();
    for part in s.split(',') {
        let w = match part.trim() {
            "pgbench" => Workload::Pgbench,
            "mariadb" => Workload::Mariadb,
            "http" => Workload::Http,
            other => {
                return Err(Error::Invalid(format!(
                    "--workload {s:?}: {other:?} is not a workload; give pgbench, mariadb or http, or databases separated by commas (pgbench,mariadb)"
                )))
            }
        };
        if out.contains(&w) {
            return Err(Error::Invalid(format!(
                "--workload {s:?}: {} appears twice",
                w.name()
            )));
        }
        out.push(w);
    }
    if out.len() > 1 && out.contains(&Workload::Http) {
        return Err(Error::Invalid(format!(
            "--workload {s:?}: http runs alone (its study has its own knobs); several workloads must all be databases (pgbench,mariadb)"
        )));
    }
    Ok(out)
}

/// Check and resolve `bench scale`'s flags; `cpus` is the host's online CPUs (the
/// study preset's CPU cap is a share of them).
pub(super) fn scale_options(f: ScaleFlags, cpus: usize) -> Result<bench::scale::Options> {
    let wasp = f.study == Some("wasp");
    let workloads = parse_workloads(f.workload.unwrap_or("pgbench,mariadb"))?;
    let budget = f
        .budget
        .map(|b| {
            config::parse_size(b)
                .filter(|m| *m >= 64 << 20)
                .ok_or_else(|| {
                    Error::Invalid(format!(
                        "--budget {b:?}: expected a size of at least 64M, such as 2G"
                    ))
                })
        })
        .transpose()?;
    let steps = bench::parse_steps(
        f.zones
            .unwrap_or(if wasp { "1,2,4,8,12" } else { "1,2,4,8" }),
    )?;
    let memory = match (f.memory_per_zone, budget) {
        (Some(m), _) => config::parse_size(m),
        // The study: 20 GiB VMs on a 192 GiB host, 12 of them = 125 %: B / 9.6 each.
        (None, Some(b)) if wasp => Some((b as f64 / 9.6) as u64 & !0xfff),
        _ => Some(512 << 20),
    }
    .filter(|m| *m >= 64 << 20)
    .ok_or_else(|| {
        Error::Invalid(format!(
            "--memory-per-zone {:?}: expected a size of at least 64M, such as 512M or 1G{}",
            f.memory_per_zone.unwrap_or(""),
            if wasp {
                " (with --study wasp it is --budget / 9.6: give --budget 640M or more)"
            } else {
                ""
            }
        ))
    })?;
    // The study: 12 VMs of 6 vCPUs on 64 CPUs = 112.5 %.
    let cpu_per_zone = f.cpu_per_zone.or_else(|| {
        wasp.then(|| ((cpus.max(1) as f64 * 1.125 / 12.0) * 10_000.0).round() / 10_000.0)
    });
    if let Some(c) = cpu_per_zone.filter(|c| !(*c > 0.0 && *c <= 1024.0)) {
        return Err(Error::Invalid(format!(
            "--cpu-per-zone {c}: give CPUs above 0, e.g. 0.5 or 1"
        )));
    }
    if let Some(p) = f.oversubscribe.filter(|p| !(*p >= 0.0 && *p <= 400.0)) {
        return Err(Error::Invalid(format!(
            "--oversubscribe {p}: give a percentage from 0 to 400, e.g. 25"
        )));
    }
    let working_set = f
        .working_set
        .map(|w| {
            config::parse_size(w).filter(|b| *b >= 1 << 20 && *b < memory).ok_or_else(|| {
                Error::Invalid(format!(
                    "--working-set {w:?}: expected a size from 1M to below --memory-per-zone, such as 96M"
                ))
            })
        })
        .transpose()?;
    let duration = f.duration;
    if !(1..=3600).contains(&duration) {
        return Err(Error::Invalid(format!(
            "--duration {duration}: give seconds from 1 to 3600, e.g. --duration 30"
        )));
    }
    let warmup = f.warmup.unwrap_or(if wasp { 10 } else { 0 });
    if warmup > 3600 {
        return Err(Error::Invalid(format!(
            "--warmup {warmup}: give seconds from 0 to 3600, e.g. --warmup 10"
        )));
    }
    let repeat = f.repeat.unwrap_or(if wasp { 3 } else { 1 });
    if !(1..=20).contains(&repeat) {
        return Err(Error::Invalid(format!(
            "--repeat {repeat}: give 1 to 20 repetitions, e.g. --repeat 3"
        )));
    }
    if !(1..=64).contains(&f.clients) {
        return Err(Error::Invalid(format!(
            "--clients {}: give 1 to 64 per zone",
            f.clients
        )));
    }
    if !(1..=1000).contains(&f.pgbench_scale) {
        return Err(Error::Invalid(format!(
            "--pgbench-scale {}: give 1 to 1000",
            f.pgbench_scale
        )));
    }
    if let Some(p) = f.buffer_pct.filter(|p| !(5..=90).contains(p)) {
        return Err(Error::Invalid(format!(
            "--buffer-pct {p}: give 5 to 90 (% of the zone's memory), e.g. 50"
        )));
    }
    if !(100..=10_000_000).contains(&f.sysbench_rows) {
        return Err(Error::Invalid(format!(
            "--sysbench-rows {}: give 100 to 10000000 rows per table",
            f.sysbench_rows
        )));
    }
    let agent = f
        .agent
        .or_else(|| wasp.then_some(bench::scale::AgentPolicy::Evict));
    // The study's reference: the largest step whose caps fit in the budget.
    let thresholds_from = f.thresholds_from.or_else(|| {
        let b = budget.filter(|_| wasp)?;
        steps
            .iter()
            .copied()
            .filter(|n| *n as u64 * memory <= b)
            .max()
    });
    if let Some(n) = thresholds_from {
        if !steps.contains(&n) {
            return Err(Error::Invalid(format!(
                "--agent-thresholds-from {n}: not one of the steps ({}); give one of them",
                steps
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )));
        }
        if agent.is_none() {
            return Err(Error::Invalid(format!(
                "--agent-thresholds-from {n}: sets the agent's triggers, but no agent runs; add --agent"
            )));
        }
    }
    if f.counterfactual && agent.is_none() {
        return Err(Error::Invalid(
            "--counterfactual: runs steps again without the agent, but no agent runs; add --agent"
                .into(),
        ));
    }
    let http = workloads.contains(&bench::scale::Workload::Http);
    Ok(bench::scale::Options {
        workloads,
        steps,
        memory_per_zone: memory,
        cpu_per_zone,
        oversubscribe_pct: f.oversubscribe,
        budget,
        buffer_pct: f.buffer_pct.or(wasp.then_some(50)),
        sysbench_rows: f.sysbench_rows,
        warmup: Duration::from_secs(warmup),
        repeat,
        calibrate: if http {
            !f.no_calibration
        } else {
            f.calibrate || wasp || repeat > 1
        },
        thresholds_from,
        study: f.study.map(str::to_string),
        agent,
        counterfactual: f.counterfactual || wasp,
        working_set,
        duration: Duration::from_secs(duration),
        clients: f.clients,
        pgbench_scale: f.pgbench_scale,
        bridge: f.bridge,
        subnet: f.subnet,
        http: Default::default(),
    })
}

/// `warren bench metrics`: run, write the results, print the report (or the JSON).
pub(super) fn metrics_bench(
    ctx: &Context,
    json: bool,
    zones: &str,
    scrapes: usize,
    out: Option<PathBuf>,
    daemon: Option<PathBuf>,
) -> Result<()> {
    let opts = bench::metrics::Options {
        steps: bench::parse_steps(zones)?,
        scrapes,
        daemon,
    };
    let dir = out.unwrap_or_else(|| {
        let mut d = bench::default_out(ctx).into_os_string();
        d.push("-metrics");
        PathBuf::from(d)
    });
    let mut bars = output::Bars::new(json);
    // SIGINT/SIGTERM/SIGHUP stop it between zones and scrapes, its guards cleaning up.
    let mut progress = bench::interrupt::Interruptible::new(&mut bars)?;
    let results = bench::metrics::run(ctx, &opts, &mut progress);
    if let Some(sig) = progress.signal() {
        return Err(bench::interrupt::stopped(sig));
    }
    drop(progress);
    let results = results?;
    bench::metrics::write(&dir, &results)?;
    if json {
        output::json(&results);
    } else {
        print!("{}", bench::metrics::markdown(&results));
        println!("\nwritten to {}", dir.display());
    }
    Ok(())
}

/// `warren bench cri`: run, write the results, print the report (or the JSON).
pub(super) fn cri_bench(
    ctx: &Context,
    json: bool,
    pods: &str,
    (handlers, pod_network, max_pods, setup): (Vec<String>, bool, usize, bench::cri::Setup),
    out: Option<PathBuf>,
) -> Result<()> {
    let steps = bench::parse_steps(pods)?;
    if let Some(n) = steps.iter().find(|n| **n > max_pods) {
        return Err(Error::Invalid(format!(
            "--pods {n}: at most {max_pods} pods a step (kernel.pid_max is shared), e.g. \
             --pods 10,50; --max-pods raises it when nothing else on the host runs hundreds"
        )));
    }
    let warren = std::env::current_exe()
        .map_err(|e| Error::Invalid(format!("bench cri: cannot find warren's own binary: {e}")))?;
    let dir = out.unwrap_or_else(|| {
        let mut d = bench::default_out(ctx).into_os_string();
        d.push("-cri");
        PathBuf::from(d)
    });
    let opts = bench::cri::run::Options {
        steps,
        handlers,
        pod_network,
        warren,
        log_dir: setup.debug.then(|| dir.clone()),
        setup,
    };
    let mut bars = output::Bars::new(json);
    let mut progress = bench::interrupt::Interruptible::new(&mut bars)?;
    let results = bench::cri::run::run(ctx, &opts, &mut progress)?;
    drop(progress);
    bench::cri::report::write(&dir, &results)?;
    if json {
        output::json(&results);
    } else {
        print!("{}", bench::cri::report::markdown(&results));
        println!("\nwritten to {}", dir.display());
    }
    Ok(())
}
