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
        calibrate: !a.no_calibration,
    })
}

/// Check and resolve `bench scale`'s flags.
#[allow(clippy::too_many_arguments)]
pub(super) fn scale_options(
    workload: &str,
    zones: &str,
    memory_per_zone: &str,
    cpu_per_zone: Option<f64>,
    oversubscribe: Option<f64>,
    agent: Option<bench::scale::AgentPolicy>,
    working_set: Option<&str>,
    duration: u64,
    clients: usize,
    pgbench_scale: u32,
    bridge: String,
    subnet: String,
) -> Result<bench::scale::Options> {
    let steps = bench::parse_steps(zones)?;
    let memory = config::parse_size(memory_per_zone)
        .filter(|m| *m >= 64 << 20)
        .ok_or_else(|| {
            Error::Invalid(format!(
                "--memory-per-zone {memory_per_zone:?}: expected a size of at least 64M, such as 512M or 1G"
            ))
        })?;
    if let Some(c) = cpu_per_zone.filter(|c| !(*c > 0.0 && *c <= 1024.0)) {
        return Err(Error::Invalid(format!(
            "--cpu-per-zone {c}: give CPUs above 0, e.g. 0.5 or 1"
        )));
    }
    if let Some(p) = oversubscribe.filter(|p| !(*p >= 0.0 && *p <= 400.0)) {
        return Err(Error::Invalid(format!(
            "--oversubscribe {p}: give a percentage from 0 to 400, e.g. 25"
        )));
    }
    let working_set = working_set
        .map(|w| {
            config::parse_size(w).filter(|b| *b >= 1 << 20 && *b < memory).ok_or_else(|| {
                Error::Invalid(format!(
                    "--working-set {w:?}: expected a size from 1M to below --memory-per-zone, such as 96M"
                ))
            })
        })
        .transpose()?;
    if !(1..=3600).contains(&duration) {
        return Err(Error::Invalid(format!(
            "--duration {duration}: give seconds from 1 to 3600, e.g. --duration 30"
        )));
    }
    if !(1..=64).contains(&clients) {
        return Err(Error::Invalid(format!(
            "--clients {clients}: give 1 to 64 per zone"
        )));
    }
    if !(1..=1000).contains(&pgbench_scale) {
        return Err(Error::Invalid(format!(
            "--pgbench-scale {pgbench_scale}: give 1 to 1000"
        )));
    }
    Ok(bench::scale::Options {
        workload: if workload == "http" {
            bench::scale::Workload::Http
        } else {
            bench::scale::Workload::Pgbench
        },
        steps,
        memory_per_zone: memory,
        cpu_per_zone,
        oversubscribe_pct: oversubscribe,
        agent,
        working_set,
        duration: Duration::from_secs(duration),
        clients,
        pgbench_scale,
        bridge,
        subnet,
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
