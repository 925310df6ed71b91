//! `report.md` and the charts of `warren bench scale`. Pure: results in, text out.

use std::fmt::Write;

use super::{AgentPolicy, ScaleResults, ScaleStep, Workload};
use crate::bench::svg::{chart, Series};

fn unit(r: &ScaleResults) -> (&'static str, &'static str) {
    match r.workload {
        Workload::Pgbench | Workload::Mariadb => ("TPS", "transactions/s"),
        Workload::Http => ("req/s", "requests/s"),
    }
}

/// The Markdown report.
pub fn markdown(r: &ScaleResults) -> String {
    let m = &r.machine;
    let (short, _) = unit(r);
    let mut o = String::new();
    let names: Vec<&str> = r.workloads.iter().map(|w| w.name()).collect();
    let _ = writeln!(
        o,
        "# warren bench scale --workload {}{}, {}\n",
        names.join(","),
        r.study
            .as_ref()
            .map_or(String::new(), |s| format!(" --study {s}")),
        r.date
    );
    let _ = writeln!(
        o,
        "Machine: {}, Linux {}, {} CPUs, {:.0} MiB RAM, cgroup {}, {} storage; load average at start {}.\n",
        m.hostname, m.kernel, m.cpus, m.mem_total_mib, m.cgroup_version, m.storage_backend, m.loadavg_at_start
    );
    let _ = writeln!(o, "Status: **{}**. {}\n", r.status, r.note);
    let load = match r.workload {
        Workload::Pgbench | Workload::Mariadb => format!(
            "{} client(s) per zone after a warm-up of {:.0} s (excluded)",
            r.clients_per_zone, r.warmup_s
        ),
        Workload::Http => "open-loop load (below)".to_string(),
    };
    let _ = writeln!(
        o,
        "Per zone: memory.max {:.0} MiB{}, CPU cap {}; {} s per step, {load}{}; agent {}.\n",
        r.memory_per_zone_mib,
        r.working_set_mib.map_or(String::new(), |w| format!(
            ", a working set of {w:.0} MiB (anonymous, every page touched once a second) beside the workload"
        )),
        r.cpu_per_zone
            .map_or("none".to_string(), |c| format!("{c} CPUs")),
        r.duration_s,
        r.pgbench_scale
            .map_or(String::new(), |s| format!(", pgbench scale {s}")),
        match r.agent_policy {
            None => "off",
            Some(AgentPolicy::Evict) => "on, evicting (suspend-first = false)",
            Some(AgentPolicy::Suspend) => "on, suspending (suspend-first = true)",
            Some(AgentPolicy::Both) =>
                "on, each step twice: evicting (suspend-first = false), then suspending (suspend-first = true)",
        }
    );
    let _ = writeln!(
        o,
        "Oversubscription % = (zones × memory-per-zone ÷ budget − 1) × 100, where the budget is the memory limit put on the zones' group cgroup with `--oversubscribe` or `--budget` ({}), else the host's MemAvailable at the start (negative: room to spare). Scaling efficiency = {short}(N) ÷ (N × {short}(1)) of the same workload and repetition.\n",
        match (r.budget_mib, r.oversubscribe_pct) {
            (Some(b), _) => format!("here a fixed {b:.0} MiB at every step"),
            (None, Some(p)) => format!("{p} % here"),
            (None, None) => "not used in this run".to_string(),
        },
    );
    if r.results.is_empty() {
        let _ = writeln!(o, "No steps ran.");
        return o;
    }
    let mut groups: Vec<(Workload, usize)> = Vec::new();
    for s in &r.results {
        if !groups.contains(&(s.workload, s.repetition)) {
            groups.push((s.workload, s.repetition));
        }
    }
    for &(w, rep) in &groups {
        if groups.len() > 1 {
            let _ = writeln!(o, "\n### {}, repetition {rep}\n", w.name());
        }
        let of: Vec<&ScaleStep> = r
            .results
            .iter()
            .filter(|s| s.workload == w && s.repetition == rep)
            .collect();
        step_table(&mut o, r, &of);
    }
    side_by_side(&mut o, r);
    if r.workload == Workload::Http {
        http_sections(&mut o, r);
    }
    if let Some(sum) = &r.summary {
        super::study::markdown(&mut o, r, sum);
    }
    let _ = writeln!(o, "\n## Per zone\n");
    for s in &r.results {
        let per: Vec<String> = s.per_zone.iter().map(|v| format!("{v:.1}")).collect();
        let _ = writeln!(
            o,
            "- {} N={} (repetition {}): {short} per zone {}; boot median {:.1} ms; setup {:.1} s; step {:.1} s",
            s.workload.name(),
            s.zones,
            s.repetition,
            per.join(", "),
            s.boot_ms.median,
            s.setup_s,
            s.total_s
        );
        for f in &s.failed_zones {
            let _ = writeln!(o, "  - failed: {f}");
        }
        for z in &s.zones_lost {
            let _ = writeln!(
                o,
                "  - lost: {z} (neither running nor suspended when the time was up)"
            );
        }
    }
    o
}

/// The step table of one workload and repetition.
fn step_table(o: &mut String, r: &ScaleResults, steps: &[&ScaleStep]) {
    let m = &r.machine;
    let (short, _) = unit(r);
    let _ = writeln!(
        o,
        "| zones | total CPU cap | total memory MiB | budget MiB | oversubscription % | {short} | {} | latency avg ms | scaling efficiency | zones' CPU % | zones' memory peak MiB | host memory used peak MiB | swap used peak MiB | agent | evictions | suspensions | OOM kills | zones lost | errors | failed zones |",
        if r.workload.is_database() { "TPM" } else { "latency p99 ms" }
    );
    let _ = writeln!(
        o,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for s in steps {
        let _ = writeln!(
            o,
            "| {} | {} | {:.0} | {} | {:.1} | {:.1} | {} | {:.2} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
            s.zones,
            s.cpu_cap_total
                .map_or(format!("none ({} CPUs)", m.cpus), |c| format!("{c:.2}")),
            s.memory_total_mib,
            s.budget_mib.map_or("-".into(), |b| format!("{b:.0}")),
            s.oversubscription_pct,
            s.throughput,
            match (s.tpm, s.latency_p99_ms) {
                (Some(t), _) => format!("{t:.0}"),
                (None, Some(p)) => format!("{p:.2}"),
                _ => "-".into(),
            },
            s.latency_avg_ms,
            s.scaling_efficiency
                .map_or("-".into(), |e| format!("{:.0} %", e * 100.0)),
            s.zones_cpu_pct,
            s.zones_memory_peak_mib,
            s.host_memory_used_peak_mib,
            s.swap_used_peak_mib,
            super::study::policy_name(s.agent_policy),
            s.evictions,
            s.suspensions,
            s.oom_kills,
            s.zones_lost.len(),
            s.errors,
            s.failed_zones.len(),
        );
    }
}

/// With `--agent-policy both`: per zone count, the evicting and the suspending run of
/// the same pressure side by side (issue 19, item 4).
fn side_by_side(o: &mut String, r: &ScaleResults) {
    let (short, _) = unit(r);
    let pairs: Vec<(&ScaleStep, &ScaleStep)> = r
        .results
        .iter()
        .filter(|s| s.agent_policy == Some(AgentPolicy::Evict))
        .filter_map(|e| {
            r.results
                .iter()
                .find(|s| s.zones == e.zones && s.agent_policy == Some(AgentPolicy::Suspend))
                .map(|s| (e, s))
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\n## Evict vs suspend, same pressure\n\n| zones | oversubscription % | evict: evictions | suspend: suspensions | evict: zones lost | suspend: zones lost | evict: OOM kills | suspend: OOM kills | evict: {short} | suspend: {short} |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for (e, s) in pairs {
        let _ = writeln!(
            o,
            "| {} | {:.1} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} |",
            e.zones,
            e.oversubscription_pct,
            e.evictions,
            s.suspensions,
            e.zones_lost.len(),
            s.zones_lost.len(),
            e.oom_kills,
            s.oom_kills,
            e.throughput,
            s.throughput
        );
    }
}

/// The first repetition's steps of each workload, with a label prefix when there
/// are several workloads.
fn first_pass(r: &ScaleResults) -> Vec<(String, Vec<&ScaleStep>)> {
    r.workloads
        .iter()
        .map(|&w| {
            let first = r
                .results
                .iter()
                .filter(|s| s.workload == w)
                .map(|s| s.repetition)
                .min()
                .unwrap_or(1);
            let label = if r.workloads.len() > 1 {
                format!("{} ", w.name())
            } else {
                String::new()
            };
            let steps = r
                .results
                .iter()
                // Not the counterfactual rows (the agent off in a run that has one).
                .filter(|s| s.workload == w && s.repetition == first)
                .filter(|s| r.agent_policy.is_none() || s.agent_policy.is_some())
                .collect();
            (label, steps)
        })
        .collect()
}

/// `throughput.svg`: aggregate throughput against N, with the linear ideal from N = 1
/// (the first repetition of each workload; `tpm-*.svg` has all of them).
pub fn throughput_svg(r: &ScaleResults) -> String {
    let (short, long) = unit(r);
    let mut s = Vec::new();
    for (label, steps) in first_pass(r) {
        s.push(Series {
            name: format!("{label}aggregate {short}"),
            points: steps
                .iter()
                .map(|s| (s.zones as f64, s.throughput))
                .collect(),
        });
        if let Some(b) = steps.iter().find(|s| s.zones == 1) {
            s.push(Series {
                name: format!("{label}linear from N=1"),
                points: steps
                    .iter()
                    .map(|s| (s.zones as f64, b.throughput * s.zones as f64))
                    .collect(),
            });
        }
    }
    chart(
        &format!("Aggregate throughput vs zones ({long})"),
        "zones (N, log scale)",
        long,
        &s,
    )
}

/// `latency.svg`: average latency against N (the first repetition of each workload).
pub fn latency_svg(r: &ScaleResults) -> String {
    let s: Vec<Series> = first_pass(r)
        .into_iter()
        .map(|(label, steps)| Series {
            name: format!("{label}latency avg"),
            points: steps
                .iter()
                .map(|s| (s.zones as f64, s.latency_avg_ms))
                .collect(),
        })
        .collect();
    chart("Average latency vs zones", "zones (N, log scale)", "ms", &s)
}

fn http_row(o: &mut String, label: &str, s: &ScaleStep) {
    let Some(h) = &s.http else { return };
    let errs: Vec<String> = h
        .errors_by_kind
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(
        o,
        "| {label} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
        h.bridges.len(),
        h.offered_rps,
        h.achieved_rps,
        h.latency_ms.mean,
        h.latency_ms.p50,
        h.latency_ms.p99,
        h.latency_ms.max,
        if errs.is_empty() { "0".to_string() } else { errs.join(", ") },
        h.host_cpu_pct,
        s.zones_cpu_pct,
        h.generator_cpu_pct,
        h.dispatch_lag_max_ms,
    );
}

/// The response-time table, the calibration (noise) and the doctor's findings.
fn http_sections(o: &mut String, r: &ScaleResults) {
    let _ = writeln!(o, "\n## Response time (open loop)\n");
    let _ = writeln!(
        o,
        "Response time runs from each request's scheduled time to its last byte (a late answer delays nothing and is counted whole). Host CPU is % of all {} CPUs (/proc/stat); zones' and the generator's CPU are % of one CPU.\n",
        r.machine.cpus
    );
    let _ = writeln!(
        o,
        "| zones | bridges | offered req/s | achieved req/s | mean ms | p50 ms | p99 ms | max ms | errors | host CPU % | zones' CPU % | generator CPU % | dispatch lag max ms |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    if let Some(s) = r.calibration.first() {
        http_row(o, "calibration (start)", s);
    }
    for s in &r.results {
        http_row(o, &s.zones.to_string(), s);
    }
    if let Some(s) = r.calibration.get(1) {
        http_row(o, "calibration (end)", s);
    }
    if let Some(n) = noise_pct(r) {
        let _ = writeln!(
            o,
            "\nNoise: the one-zone calibration's mean response time moved {n:.1} % between the start and the end of the run; differences between steps smaller than that are not a result."
        );
    }
    if let Some(t) = &r.tune {
        let _ = writeln!(
            o,
            "\n## Network limits (warren doctor, for the largest step)\n"
        );
        for f in &t.findings {
            let _ = writeln!(o, "- {f}");
        }
        if !t.requested {
            let _ = writeln!(
                o,
                "\nUntuned: the host's values as they were (--tune applies the fixes for the run)."
            );
        } else if t.applied.is_empty() {
            let _ = writeln!(o, "\n--tune: nothing needed raising for this run.");
        } else {
            let _ = writeln!(
                o,
                "\nTuned for the run (--tune), {} afterwards:\n",
                if t.restored {
                    "all restored"
                } else {
                    "NOT all restored"
                }
            );
            for a in &t.applied {
                let _ = writeln!(o, "- {}: {} -> {}", a.key, a.old, a.new);
            }
        }
    }
}

/// How far the calibration's mean response time moved from start to end, %.
pub fn noise_pct(r: &ScaleResults) -> Option<f64> {
    let m = |s: &ScaleStep| s.http.as_ref().map(|h| h.latency_ms.mean);
    let cal: Vec<&ScaleStep> = r
        .calibration
        .iter()
        .filter(|s| s.workload == Workload::Http)
        .collect();
    let (a, b) = (m(cal.first()?)?, m(cal.get(1)?)?);
    (a > 0.0).then(|| (b - a).abs() / a * 100.0)
}

/// `response_time.svg`: mean, p50 and p99 response time against N, and the
/// calibration's mean (start and end) as a flat reference.
pub fn response_time_svg(r: &ScaleResults) -> String {
    let pick = |f: fn(&super::openloop::Latency) -> f64| -> Vec<(f64, f64)> {
        r.results
            .iter()
            .filter_map(|s| s.http.as_ref().map(|h| (s.zones as f64, f(&h.latency_ms))))
            .collect()
    };
    let mut series = vec![
        Series {
            name: "mean".into(),
            points: pick(|l| l.mean),
        },
        Series {
            name: "p50".into(),
            points: pick(|l| l.p50),
        },
        Series {
            name: "p99".into(),
            points: pick(|l| l.p99),
        },
    ];
    let xs: Vec<f64> = r.results.iter().map(|s| s.zones as f64).collect();
    for (name, s) in [
        ("calibration start", r.calibration.first()),
        ("calibration end", r.calibration.get(1)),
    ] {
        if let Some(h) = s.and_then(|s| s.http.as_ref()) {
            series.push(Series {
                name: format!("{name} (1 zone, mean)"),
                points: xs.iter().map(|x| (*x, h.latency_ms.mean)).collect(),
            });
        }
    }
    chart(
        "Response time vs zones (open loop)",
        "zones (N, log scale)",
        "ms",
        &series,
    )
}
