//! The trustworthy-numbers layer of `warren bench scale` (the OpenShift + wasp study,
//! issue 21): the order of the runs (repetitions interleaved A B A B ..., a one-zone
//! calibration of each workload first and last), the agent's swap triggers set from a
//! measured step, and the summary: medians with min–max per workload and step, the
//! noise, and whether the oversubscribed step's loss is larger than the noise. Pure:
//! options or results in, plain data out; unit-tested without a kernel.
//!
//! # What the agent keys on, and how the study sets it
//!
//! `warren agent` acts when a signal stays past its trigger for its grace time:
//! available memory (% of the watched group's limit; page cache counts as available),
//! swap used (%), swap-in and swap-out (pages/s on the host, /proc/vmstat, averaged
//! over `window-s`, 5 s) and memory PSI. Under the study's budget the signal that
//! separates "consolidated" from "thrashing" is swap I/O: at the reference step (the
//! largest whose caps fit in the budget, 8 zones at the study's ratios) the zones run
//! without memory pressure, so the swap I/O seen there is the run's normal level. The
//! larger steps of the same workload and repetition get swap-in/out triggers of
//! [`TRIGGER_FACTOR`] (1.5) times the rate the reference step averaged over its
//! measured window, at least [`FLOOR_PAGES_S`] (1 MiB/s of 4 KiB pages: a step that did
//! not swap at all must not make every page a trigger), cleared at half; the agent acts
//! when a 5-s rate stays above its trigger for 10 s. The first run of the study
//! (2026-12-04, docs/studies.md) set twice the highest 5-s rate instead: PostgreSQL's
//! 12-zone steps averaged 2.1–2.4 times the 8-zone average but never stayed above that
//! trigger for 10 s, so the agent never acted and the study could not show what it
//! does. The agent starts once the workload is set up (loading the databases is not
//! the workload), so it watches the warm-up and the measured window only.
//!
//! # What the agent cost and saved
//!
//! With `--counterfactual` (on with `--study wasp`) every step past the reference runs
//! twice in each repetition, with the agent and then without it, one row each: the
//! difference is what the agent's actions cost (the TPM of the zones it stopped) and
//! saved (the swap I/O and latency of the zones left running).
//!
//! # The noise and the verdict
//!
//! Per workload, the noise is the larger of (a) how far the one-zone calibration's TPM
//! moved between the start and the end of the run and (b) the spread (max − min over
//! the median) of the per-zone TPM over the repetitions at the reference step and at
//! the oversubscribed step. The loss at an oversubscribed step N is 1 − per-zone TPM(N)
//! ÷ per-zone TPM(reference) (medians). Part of it is CPU: a zone gets min(cap, CPUs ÷ N)
//! of CPU, so going from 8 to 12 zones at the study's caps costs each zone 11 % of its
//! CPU; the loss beyond that share is what memory oversubscription (and the agent) cost.
//! It is called a result only when it is larger than the noise.

use std::fmt::Write;

use serde::Serialize;

use super::{AgentPolicy, AgentThresholds, Options, ScaleResults, ScaleStep, Workload};
use crate::bench::svg::{chart_marked, Series};

/// The lowest swap trigger the study sets, pages/s (1 MiB/s of 4 KiB pages).
pub const FLOOR_PAGES_S: f64 = 256.0;
/// A larger step's swap trigger, as a multiple of the reference step's average rate.
pub const TRIGGER_FACTOR: f64 = 1.5;

/// One step to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    pub calibration: bool,
    pub workload: Workload,
    pub zones: usize,
    /// 1-based; 0 for calibration.
    pub repetition: usize,
    pub policy: Option<AgentPolicy>,
}

/// The runs in order: each workload's calibration (1 zone, no agent) first, then
/// `repeat` times every workload's steps (A's steps, B's steps, A's, B's ...), then the
/// calibrations again.
pub fn order(opts: &Options) -> Vec<Run> {
    let cal = |w| Run {
        calibration: true,
        workload: w,
        zones: 1,
        repetition: 0,
        policy: None,
    };
    let mut runs = Vec::new();
    if opts.calibrate {
        runs.extend(opts.workloads.iter().map(|&w| cal(w)));
    }
    for rep in 1..=opts.repeat.max(1) {
        for &w in &opts.workloads {
            for &n in &opts.steps {
                let policies: &[Option<AgentPolicy>] = match opts.agent {
                    None => &[None],
                    Some(AgentPolicy::Both) => {
                        &[Some(AgentPolicy::Evict), Some(AgentPolicy::Suspend)]
                    }
                    Some(AgentPolicy::Evict) => &[Some(AgentPolicy::Evict)],
                    Some(AgentPolicy::Suspend) => &[Some(AgentPolicy::Suspend)],
                };
                // The counterfactual: past the reference, the same step without an agent.
                let without = opts.counterfactual
                    && opts.agent.is_some()
                    && opts.thresholds_from.is_none_or(|from| n > from);
                let without: &[Option<AgentPolicy>] = if without { &[None] } else { &[] };
                runs.extend(policies.iter().chain(without).map(|&policy| Run {
                    calibration: false,
                    workload: w,
                    zones: n,
                    repetition: rep,
                    policy,
                }));
            }
        }
    }
    if opts.calibrate {
        runs.extend(opts.workloads.iter().map(|&w| cal(w)));
    }
    runs
}

/// The agent's swap triggers from the average rates measured at `zones` over its
/// measured window (module doc).
pub fn thresholds_from_swap(zones: usize, mean_in: f64, mean_out: f64) -> AgentThresholds {
    AgentThresholds {
        from_zones: zones,
        measured_in_pages_s: mean_in,
        measured_out_pages_s: mean_out,
        swap_in_trigger: (TRIGGER_FACTOR * mean_in).max(FLOOR_PAGES_S),
        swap_out_trigger: (TRIGGER_FACTOR * mean_out).max(FLOOR_PAGES_S),
    }
}

/// The agent config's swap sections for `t` (cleared at half the trigger).
pub fn thresholds_toml(t: &AgentThresholds) -> String {
    format!(
        "[swap-in]\ntrigger = {:.1}\nclear = {:.1}\ngrace-s = 10.0\n[swap-out]\ntrigger = {:.1}\nclear = {:.1}\ngrace-s = 10.0\n",
        t.swap_in_trigger,
        t.swap_in_trigger / 2.0,
        t.swap_out_trigger,
        t.swap_out_trigger / 2.0
    )
}

/// Median, min and max of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Range {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Range {
    pub fn of(v: &[f64]) -> Range {
        let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return Range {
                median: 0.0,
                min: 0.0,
                max: 0.0,
                n,
            };
        }
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Range {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        }
    }

    /// (max − min) ÷ median, %.
    pub fn spread_pct(&self) -> f64 {
        if self.median > 0.0 {
            (self.max - self.min) / self.median * 100.0
        } else {
            0.0
        }
    }
}

/// One workload and step over its repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub workload: Workload,
    pub zones: usize,
    pub agent_policy: Option<AgentPolicy>,
    pub oversubscription_pct: f64,
    pub cpu_oversubscription_pct: Option<f64>,
    pub tpm: Range,
    pub tpm_per_zone: Range,
    pub latency_avg_ms: Range,
    pub swap_in_pages_s: Range,
    pub swap_out_pages_s: Range,
    pub swap_used_peak_mib: Range,
    /// Over all repetitions.
    pub evictions: u64,
    pub suspensions: u64,
    pub oom_kills: u64,
    pub zones_lost: u64,
    pub failed_zones: u64,
    /// The triggers the agent had at this step, if set from a measured step (the last
    /// repetition's).
    pub agent_thresholds: Option<AgentThresholds>,
}

/// The calibration's drift for one workload.
#[derive(Debug, Clone, Serialize)]
pub struct Noise {
    pub workload: Workload,
    pub start_tpm: f64,
    pub end_tpm: f64,
    pub drift_pct: f64,
}

/// Whether an oversubscribed step lost more than the noise.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub workload: Workload,
    /// The oversubscribed row's agent (`None`: the counterfactual without one).
    pub agent_policy: Option<AgentPolicy>,
    pub reference_zones: usize,
    pub oversubscribed_zones: usize,
    pub oversubscription_pct: f64,
    pub per_zone_tpm_reference: Range,
    pub per_zone_tpm_oversubscribed: Range,
    /// 1 − per-zone TPM(N) ÷ per-zone TPM(reference), medians, %.
    pub loss_pct: f64,
    /// What the smaller CPU share per zone alone explains, %.
    pub cpu_share_loss_pct: f64,
    /// The loss beyond the CPU share, %.
    pub beyond_cpu_pct: f64,
    pub noise_pct: f64,
    pub larger_than_noise: bool,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub rows: Vec<Row>,
    pub noise: Vec<Noise>,
    pub verdicts: Vec<Verdict>,
}

fn tpm(s: &ScaleStep) -> f64 {
    s.tpm.unwrap_or(s.throughput * 60.0)
}

/// CPU one zone gets at N zones: its cap, or its share of the host's CPUs if smaller.
fn cpu_share(cap: Option<f64>, cpus: f64, n: usize) -> f64 {
    let share = cpus / n.max(1) as f64;
    cap.map_or(share, |c| c.min(share))
}

/// Medians with min–max, the noise and the verdicts of a run.
pub fn summarize(r: &ScaleResults) -> Summary {
    let mut keys: Vec<(Workload, usize, Option<AgentPolicy>)> = Vec::new();
    for s in &r.results {
        let k = (s.workload, s.zones, s.agent_policy);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let cpus = r.machine.cpus as f64;
    let rows: Vec<Row> = keys
        .iter()
        .map(|&(w, n, p)| {
            let of: Vec<&ScaleStep> = r
                .results
                .iter()
                .filter(|s| s.workload == w && s.zones == n && s.agent_policy == p)
                .collect();
            let range = |f: &dyn Fn(&ScaleStep) -> f64| {
                Range::of(&of.iter().map(|s| f(s)).collect::<Vec<_>>())
            };
            let sum = |f: &dyn Fn(&ScaleStep) -> u64| -> u64 { of.iter().map(|s| f(s)).sum() };
            Row {
                workload: w,
                zones: n,
                agent_policy: p,
                oversubscription_pct: of[0].oversubscription_pct,
                cpu_oversubscription_pct: of[0].cpu_cap_total.map(|c| (c / cpus - 1.0) * 100.0),
                tpm: range(&tpm),
                tpm_per_zone: range(&|s| tpm(s) / s.zones as f64),
                latency_avg_ms: range(&|s| s.latency_avg_ms),
                swap_in_pages_s: range(&|s| s.swap_in_pages_s),
                swap_out_pages_s: range(&|s| s.swap_out_pages_s),
                swap_used_peak_mib: range(&|s| s.swap_used_peak_mib),
                evictions: sum(&|s| s.evictions),
                suspensions: sum(&|s| s.suspensions),
                oom_kills: sum(&|s| s.oom_kills),
                zones_lost: sum(&|s| s.zones_lost.len() as u64),
                failed_zones: sum(&|s| s.failed_zones.len() as u64),
                agent_thresholds: of.iter().rev().find_map(|s| s.agent_thresholds),
            }
        })
        .collect();
    let mut noise = Vec::new();
    for &w in &r.workloads {
        let cal: Vec<&ScaleStep> = r.calibration.iter().filter(|s| s.workload == w).collect();
        if let [a, .., b] = cal.as_slice() {
            let (x, y) = (tpm(a), tpm(b));
            noise.push(Noise {
                workload: w,
                start_tpm: x,
                end_tpm: y,
                drift_pct: if x > 0.0 {
                    (y - x).abs() / x * 100.0
                } else {
                    0.0
                },
            });
        }
    }
    let mut verdicts = Vec::new();
    for &w in &r.workloads {
        let of_w: Vec<&Row> = rows
            .iter()
            .filter(|x| x.workload == w && x.agent_policy != Some(AgentPolicy::Suspend))
            .collect();
        // The reference: the largest step whose caps fit in the budget.
        let Some(reference) = of_w
            .iter()
            .filter(|x| x.oversubscription_pct <= 1e-9)
            .max_by_key(|x| x.zones)
        else {
            continue;
        };
        let budgeted = r.budget_mib.is_some() || r.oversubscribe_pct.is_some();
        for over in of_w
            .iter()
            .filter(|x| budgeted && x.oversubscription_pct > 1e-9 && x.zones > reference.zones)
        {
            let (a, b) = (reference.tpm_per_zone, over.tpm_per_zone);
            let loss = if a.median > 0.0 {
                (1.0 - b.median / a.median) * 100.0
            } else {
                0.0
            };
            let cpu_ratio = cpu_share(r.cpu_per_zone, cpus, over.zones)
                / cpu_share(r.cpu_per_zone, cpus, reference.zones);
            let cpu_loss = (1.0 - cpu_ratio) * 100.0;
            let beyond = if a.median > 0.0 && cpu_ratio > 0.0 {
                (1.0 - b.median / (a.median * cpu_ratio)) * 100.0
            } else {
                0.0
            };
            let drift = noise
                .iter()
                .find(|x| x.workload == w)
                .map_or(0.0, |x| x.drift_pct);
            let noise_pct = drift.max(a.spread_pct()).max(b.spread_pct());
            let larger = beyond.abs() > noise_pct && a.n > 0 && b.n > 0;
            let text = format!(
                "{}: per-zone TPM {:.0} at {} zones (memory {:+.1} %, agent {}) vs {:.0} at {} zones (no memory oversubscription): {} {:.1} %, of which the smaller CPU share explains {:.1} %; beyond it {} {:.1} %, noise {:.1} % (calibration drift {:.1} %, spread over {} and {} repetitions {:.1} % and {:.1} %): {}",
                w.name(),
                b.median,
                over.zones,
                over.oversubscription_pct,
                policy_name(over.agent_policy),
                a.median,
                reference.zones,
                if loss >= 0.0 { "a loss of" } else { "a gain of" },
                loss.abs(),
                cpu_loss,
                if beyond >= 0.0 { "a loss of" } else { "a gain of" },
                beyond.abs(),
                noise_pct,
                drift,
                a.n,
                b.n,
                a.spread_pct(),
                b.spread_pct(),
                if larger {
                    "larger than the noise, a result"
                } else {
                    "not larger than the noise, not a result"
                }
            );
            verdicts.push(Verdict {
                workload: w,
                agent_policy: over.agent_policy,
                reference_zones: reference.zones,
                oversubscribed_zones: over.zones,
                oversubscription_pct: over.oversubscription_pct,
                per_zone_tpm_reference: a,
                per_zone_tpm_oversubscribed: b,
                loss_pct: loss,
                cpu_share_loss_pct: cpu_loss,
                beyond_cpu_pct: beyond,
                noise_pct,
                larger_than_noise: larger,
                text,
            });
        }
    }
    Summary {
        rows,
        noise,
        verdicts,
    }
}

/// The summary's sections of report.md.
pub fn markdown(o: &mut String, r: &ScaleResults, s: &Summary) {
    let _ = writeln!(
        o,
        "\n## Over the repetitions: median (min–max)\n\n{} repetition(s), interleaved: every workload's steps in turn (A B A B ...); warm-up of {:.0} s excluded from every figure; the CPU caps applied after each zone's setup. TPM of pgbench (TPC-B-like) and of sysbench (oltp_read_write) count different transactions: compare each database with itself.\n",
        r.repeat, r.warmup_s
    );
    let _ = writeln!(
        o,
        "| workload | zones | memory oversubscription % | CPU oversubscription % | agent | TPM | TPM per zone | latency avg ms | swap in pages/s | swap out pages/s | swap used peak MiB | evictions | suspensions | OOM kills | zones lost | failed zones | agent swap triggers in / out pages/s |"
    );
    let _ = writeln!(
        o,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let f = |x: &Range, d: usize| format!("{:.d$} ({:.d$}–{:.d$})", x.median, x.min, x.max, d = d);
    for row in &s.rows {
        let _ = writeln!(
            o,
            "| {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.workload.name(),
            row.zones,
            row.oversubscription_pct,
            row.cpu_oversubscription_pct
                .map_or("-".into(), |c| format!("{c:.1}")),
            policy_name(row.agent_policy),
            f(&row.tpm, 0),
            f(&row.tpm_per_zone, 0),
            f(&row.latency_avg_ms, 2),
            f(&row.swap_in_pages_s, 0),
            f(&row.swap_out_pages_s, 0),
            f(&row.swap_used_peak_mib, 0),
            row.evictions,
            row.suspensions,
            row.oom_kills,
            row.zones_lost,
            row.failed_zones,
            row.agent_thresholds.map_or("defaults".into(), |t| format!(
                "{:.0} / {:.0} (from {} zones)",
                t.swap_in_trigger, t.swap_out_trigger, t.from_zones
            )),
        );
    }
    let _ = writeln!(o, "\n## Noise\n");
    if s.noise.is_empty() {
        let _ = writeln!(o, "No calibration step ran (--calibrate).");
    }
    for n in &s.noise {
        let _ = writeln!(
            o,
            "- {}: the one-zone calibration gave {:.0} TPM at the start and {:.0} at the end: it moved {:.1} %.",
            n.workload.name(),
            n.start_tpm,
            n.end_tpm,
            n.drift_pct
        );
    }
    let _ = writeln!(
        o,
        "\n## Is the oversubscribed step's loss larger than the noise?\n"
    );
    if s.verdicts.is_empty() {
        let _ = writeln!(
            o,
            "No step was oversubscribed against a budget with a non-oversubscribed step below it: no verdict."
        );
    }
    for v in &s.verdicts {
        let _ = writeln!(o, "- {}", v.text);
    }
    // The two databases against each other, at the same step with the same agent.
    for (i, a) in s.verdicts.iter().enumerate() {
        let Some(b) = s.verdicts[i + 1..].iter().find(|b| {
            b.workload != a.workload
                && b.oversubscribed_zones == a.oversubscribed_zones
                && b.agent_policy == a.agent_policy
        }) else {
            continue;
        };
        let diff = a.beyond_cpu_pct - b.beyond_cpu_pct;
        let noise = a.noise_pct.max(b.noise_pct);
        let _ = writeln!(
            o,
            "- {} vs {} at {} zones, agent {}: beyond the CPU share, {} lost {:.1} points {} than {}; the larger noise of the two is {:.1} %: {}.",
            a.workload.name(),
            b.workload.name(),
            a.oversubscribed_zones,
            policy_name(a.agent_policy),
            a.workload.name(),
            diff.abs(),
            if diff >= 0.0 { "more" } else { "less" },
            b.workload.name(),
            noise,
            if diff.abs() > noise {
                "larger than the noise, a result"
            } else {
                "not larger than the noise, not a result"
            }
        );
    }
    agent_section(o, r, s);
}

/// The report's name for a row's agent.
pub(super) fn policy_name(p: Option<AgentPolicy>) -> &'static str {
    match p {
        None => "off",
        Some(AgentPolicy::Evict) => "evict",
        Some(AgentPolicy::Suspend) => "suspend",
        Some(AgentPolicy::Both) => "both",
    }
}

/// What the agent did in each step that had it act, what the zones it stopped would
/// have given, and, with the counterfactual rows, the same steps without the agent.
fn agent_section(o: &mut String, r: &ScaleResults, sum: &Summary) {
    let acted: Vec<&ScaleStep> = r
        .results
        .iter()
        .filter(|s| !s.agent_actions.is_empty())
        .collect();
    let _ = writeln!(o, "\n## What the agent did\n");
    if r.agent_policy.is_none() {
        let _ = writeln!(o, "The agent was off.");
        return;
    }
    if acted.is_empty() {
        let _ = writeln!(
            o,
            "Nothing: in no step did a signal stay past its trigger for its grace time (the triggers per step are in the table above; the swap I/O measured is beside them)."
        );
    }
    for s in acted {
        let alive: Vec<f64> = s.per_zone.iter().copied().filter(|t| *t > 0.0).collect();
        let typical = Range::of(&alive).median * 60.0;
        let _ = writeln!(
            o,
            "- {} at {} zones, repetition {}: {} action(s); the step's TPM {:.0}, the zones it left running gave {:.0} TPM each (median), so each zone it stopped cost about that much; OOM kills {}.",
            s.workload.name(),
            s.zones,
            s.repetition,
            s.agent_actions.len(),
            tpm(s),
            typical,
            s.oom_kills
        );
        for a in &s.agent_actions {
            let _ = writeln!(o, "  - {a}");
        }
        let without = r.results.iter().find(|x| {
            x.agent_policy.is_none()
                && x.workload == s.workload
                && x.zones == s.zones
                && x.repetition == s.repetition
        });
        if let Some(w) = without {
            let _ = writeln!(
                o,
                "  - without the agent, the same step of the same repetition: TPM {:.0} ({:+.0} with it), swap out {:.0} pages/s ({:.0} with it), swap in {:.0} ({:.0}), latency {:.2} ms ({:.2}), OOM kills {} ({}), zones lost {} ({}).",
                tpm(w),
                tpm(s) - tpm(w),
                w.swap_out_pages_s,
                s.swap_out_pages_s,
                w.swap_in_pages_s,
                s.swap_in_pages_s,
                w.latency_avg_ms,
                s.latency_avg_ms,
                w.oom_kills,
                s.oom_kills,
                w.zones_lost.len(),
                s.zones_lost.len()
            );
        }
    }
    // Over the repetitions: each step that ran both ways, its agent rows (evict, and
    // suspend with `both`) then the row without the agent.
    let groups: Vec<Vec<&Row>> = sum
        .rows
        .iter()
        .filter(|y| y.agent_policy.is_none())
        .map(|y| {
            let mut g: Vec<&Row> = sum
                .rows
                .iter()
                .filter(|x| {
                    x.agent_policy.is_some() && x.workload == y.workload && x.zones == y.zones
                })
                .collect();
            g.push(y);
            g
        })
        .filter(|g| g.len() > 1)
        .collect();
    if groups.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\n### With and without the agent (the counterfactual), median (min–max)\n\nThe difference is what the agent's actions cost and saved: TPM of all zones (a stopped zone's transactions are lost), the swap I/O and the latency of the zones left running.\n\n| workload | zones | agent | actions | TPM | swap out pages/s | swap in pages/s | latency avg ms | OOM kills | zones lost |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    let f = |x: &Range, d: usize| format!("{:.d$} ({:.d$}–{:.d$})", x.median, x.min, x.max, d = d);
    for group in groups {
        for row in group {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                row.workload.name(),
                row.zones,
                policy_name(row.agent_policy),
                row.evictions + row.suspensions,
                f(&row.tpm, 0),
                f(&row.swap_out_pages_s, 0),
                f(&row.swap_in_pages_s, 0),
                f(&row.latency_avg_ms, 2),
                row.oom_kills,
                row.zones_lost
            );
        }
    }
}

/// `tpm-<workload>.svg`: TPM median, min and max against N, with the linear ideal from
/// the 1-zone median, and the oversubscribed steps marked.
pub fn tpm_svg(r: &ScaleResults, s: &Summary, w: Workload) -> String {
    let rows: Vec<&Row> = s
        .rows
        .iter()
        .filter(|x| x.workload == w && x.agent_policy != Some(AgentPolicy::Suspend))
        .collect();
    // The counterfactual rows (no agent in a run that has one) are a series of their own.
    let (rows, without): (Vec<&Row>, Vec<&Row>) = rows
        .into_iter()
        .partition(|x| r.agent_policy.is_none() || x.agent_policy.is_some());
    let pts = |f: &dyn Fn(&Row) -> f64| -> Vec<(f64, f64)> {
        rows.iter().map(|x| (x.zones as f64, f(x))).collect()
    };
    let mut series = vec![
        Series {
            name: "TPM median".into(),
            points: pts(&|x| x.tpm.median),
        },
        Series {
            name: "TPM min".into(),
            points: pts(&|x| x.tpm.min),
        },
        Series {
            name: "TPM max".into(),
            points: pts(&|x| x.tpm.max),
        },
    ];
    if let Some(one) = rows.iter().find(|x| x.zones == 1) {
        series.push(Series {
            name: "linear from N=1".into(),
            points: pts(&|x| one.tpm.median * x.zones as f64),
        });
    }
    if !without.is_empty() {
        series.push(Series {
            name: "TPM median, agent off".into(),
            points: without
                .iter()
                .map(|x| (x.zones as f64, x.tpm.median))
                .collect(),
        });
    }
    let marks: Vec<(f64, String)> = rows
        .iter()
        .filter(|x| {
            x.oversubscription_pct > 1e-9
                && (r.budget_mib.is_some() || r.oversubscribe_pct.is_some())
        })
        .map(|x| {
            (
                x.zones as f64,
                format!(
                    "memory {:+.1} %{}",
                    x.oversubscription_pct,
                    x.cpu_oversubscription_pct
                        .map_or(String::new(), |c| format!(", CPU {c:+.1} %"))
                ),
            )
        })
        .collect();
    chart_marked(
        &format!("{} TPM vs zones ({} repetitions)", w.name(), r.repeat),
        "zones (N, log scale)",
        "transactions per minute",
        &series,
        &marks,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(workloads: Vec<Workload>, steps: Vec<usize>, repeat: usize) -> Options {
        Options {
            workloads,
            steps,
            memory_per_zone: 200 << 20,
            cpu_per_zone: None,
            oversubscribe_pct: None,
            budget: None,
            buffer_pct: None,
            sysbench_rows: 1000,
            warmup: std::time::Duration::ZERO,
            repeat,
            calibrate: true,
            thresholds_from: None,
            study: None,
            agent: None,
            counterfactual: false,
            working_set: None,
            duration: std::time::Duration::from_secs(1),
            clients: 1,
            pgbench_scale: 1,
            bridge: String::new(),
            subnet: String::new(),
            http: Default::default(),
        }
    }

    #[test]
    fn repetitions_interleave_workloads_between_calibrations() {
        let o = opts(vec![Workload::Pgbench, Workload::Mariadb], vec![1, 2], 2);
        let got: Vec<(bool, &str, usize, usize)> = order(&o)
            .iter()
            .map(|r| (r.calibration, r.workload.name(), r.zones, r.repetition))
            .collect();
        let (p, m) = ("pgbench", "mariadb");
        assert_eq!(
            got,
            [
                (true, p, 1, 0),
                (true, m, 1, 0),
                (false, p, 1, 1),
                (false, p, 2, 1),
                (false, m, 1, 1),
                (false, m, 2, 1),
                (false, p, 1, 2),
                (false, p, 2, 2),
                (false, m, 1, 2),
                (false, m, 2, 2),
                (true, p, 1, 0),
                (true, m, 1, 0),
            ]
        );
        let mut o = opts(vec![Workload::Pgbench], vec![4], 1);
        o.calibrate = false;
        o.agent = Some(AgentPolicy::Both);
        let pol: Vec<_> = order(&o).iter().map(|r| r.policy).collect();
        assert_eq!(pol, [Some(AgentPolicy::Evict), Some(AgentPolicy::Suspend)]);
    }

    /// `--counterfactual`: past the reference step, each agent row is followed by the
    /// same step without the agent; at and below it, and without the flag, nothing more.
    #[test]
    fn the_counterfactual_runs_the_steps_past_the_reference_again_without_the_agent() {
        let mut o = opts(
            vec![Workload::Pgbench, Workload::Mariadb],
            vec![4, 8, 12],
            2,
        );
        o.calibrate = false;
        o.agent = Some(AgentPolicy::Evict);
        o.thresholds_from = Some(8);
        let plain = order(&o);
        assert_eq!(plain.len(), 12);
        assert!(plain.iter().all(|r| r.policy == Some(AgentPolicy::Evict)));
        o.counterfactual = true;
        let got: Vec<(&str, usize, usize, Option<AgentPolicy>)> = order(&o)
            .iter()
            .map(|r| (r.workload.name(), r.zones, r.repetition, r.policy))
            .collect();
        let e = Some(AgentPolicy::Evict);
        let mut want = Vec::new();
        for rep in 1..=2 {
            for w in ["pgbench", "mariadb"] {
                want.extend([
                    (w, 4, rep, e),
                    (w, 8, rep, e),
                    (w, 12, rep, e),
                    (w, 12, rep, None),
                ]);
            }
        }
        assert_eq!(got, want);
        // Without a reference, every step; without an agent, none.
        o.thresholds_from = None;
        assert_eq!(order(&o).iter().filter(|r| r.policy.is_none()).count(), 12);
        o.agent = None;
        assert_eq!(order(&o).len(), 12);
    }

    #[test]
    fn swap_triggers_are_half_again_the_reference_average_with_a_floor() {
        let t = thresholds_from_swap(8, 1000.0, 10.0);
        assert_eq!(
            (t.swap_in_trigger, t.swap_out_trigger),
            (1500.0, FLOOR_PAGES_S)
        );
        assert_eq!((t.measured_in_pages_s, t.from_zones), (1000.0, 8));
        // The first study's PostgreSQL: 225 pages/s out at 8 zones, 531 at 12.
        let t = thresholds_from_swap(8, 15.0, 225.0);
        assert!(
            t.swap_out_trigger < 531.0 && t.swap_out_trigger > 225.0,
            "{t:?}"
        );
        let toml = thresholds_toml(&t);
        let c = crate::agent::config::parse(&toml).expect("valid agent config");
        assert_eq!(c.swap_out.trigger, 337.5);
        assert!((c.swap_out.clear - 168.75).abs() < 0.1, "{toml}");
        assert_eq!(c.swap_in.trigger, FLOOR_PAGES_S);
    }

    #[test]
    fn ranges_and_spread() {
        let r = Range::of(&[3.0, 1.0, 2.0]);
        assert_eq!((r.median, r.min, r.max, r.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Range::of(&[1.0, 3.0]).median, 2.0);
        assert_eq!(r.spread_pct(), 100.0);
        assert_eq!(Range::of(&[]).n, 0);
    }

    fn step(w: Workload, rep: usize, n: usize, tps: f64, over: f64) -> ScaleStep {
        ScaleStep {
            workload: w,
            repetition: rep,
            zones: n,
            cpu_cap_total: Some(0.1875 * n as f64),
            memory_total_mib: 200.0 * n as f64,
            budget_mib: Some(1920.0),
            oversubscription_pct: over,
            swap_total_mib: 512.0,
            boot_ms: crate::measure::summarize(&[1.0]),
            setup_s: 1.0,
            throughput: tps,
            tpm: Some(tps * 60.0),
            per_zone: vec![tps / n as f64; n],
            latency_avg_ms: 1.0,
            latency_p99_ms: None,
            latency_p95_ms: None,
            scaling_efficiency: None,
            errors: 0,
            failed_zones: Vec::new(),
            zones_cpu_pct: 10.0,
            zones_memory_peak_mib: 1.0,
            host_memory_used_peak_mib: 1.0,
            swap_used_peak_mib: 0.0,
            swap_in_pages_s: 0.0,
            swap_out_pages_s: 0.0,
            swap_in_peak_pages_s: 0.0,
            swap_out_peak_pages_s: 0.0,
            agent_thresholds: None,
            agent_actions: Vec::new(),
            agent_policy: Some(AgentPolicy::Evict),
            evictions: 0,
            suspensions: 0,
            oom_kills: 0,
            zones_lost: Vec::new(),
            total_s: 1.0,
            http: None,
        }
    }

    /// One-zone calibration steps of pgbench and mariadb at the start and the end, with
    /// these throughputs (start, end).
    fn calibration(pgbench: [f64; 2], mariadb: [f64; 2]) -> Vec<ScaleStep> {
        let one = |w, tps| step(w, 0, 1, tps, -90.0);
        vec![
            one(Workload::Pgbench, pgbench[0]),
            one(Workload::Mariadb, mariadb[0]),
            one(Workload::Pgbench, pgbench[1]),
            one(Workload::Mariadb, mariadb[1]),
        ]
    }

    fn results(steps: Vec<ScaleStep>, cal: Vec<ScaleStep>) -> ScaleResults {
        ScaleResults {
            schema_version: 1,
            date: String::new(),
            machine: crate::bench::Machine {
                hostname: "t".into(),
                kernel: "6".into(),
                cpus: 2,
                mem_total_mib: 1.0,
                cgroup_version: "v1".into(),
                storage_backend: "overlay".into(),
                loadavg_at_start: String::new(),
            },
            workload: Workload::Pgbench,
            workloads: vec![Workload::Pgbench, Workload::Mariadb],
            study: Some("wasp".into()),
            repeat: 3,
            warmup_s: 10.0,
            budget_mib: Some(1920.0),
            buffer_pct: Some(50),
            sysbench_rows: Some(1000),
            status: "ok".into(),
            note: String::new(),
            steps: vec![8, 12],
            memory_per_zone_mib: 200.0,
            cpu_per_zone: Some(0.1875),
            oversubscribe_pct: None,
            agent: true,
            agent_policy: Some(AgentPolicy::Evict),
            working_set_mib: None,
            duration_s: 30.0,
            clients_per_zone: 2,
            pgbench_scale: Some(8),
            results: steps,
            calibration: cal,
            summary: None,
            tune: None,
        }
    }

    /// pgbench loses 40 % per zone from 8 to 12 zones (11 % of it the CPU share), with
    /// little spread: a result. mariadb loses what the CPU share explains: no result.
    #[test]
    fn the_verdict_separates_a_loss_beyond_the_cpu_share_from_the_noise() {
        let (p, m) = (Workload::Pgbench, Workload::Mariadb);
        let mut steps = Vec::new();
        for rep in 1..=3 {
            let j = rep as f64; // a little spread
            steps.push(step(p, rep, 8, 800.0 + j, -16.7));
            steps.push(step(p, rep, 12, 720.0 + j, 25.0));
            steps.push(step(m, rep, 8, 400.0 + j, -16.7));
            steps.push(step(
                m,
                rep,
                12,
                400.0 * 1.5 * (2.0 / 12.0) / 0.1875 + j,
                25.0,
            ));
        }
        let r = results(steps, calibration([100.0, 102.0], [50.0, 51.0]));
        let s = summarize(&r);
        assert_eq!(s.rows.len(), 4);
        let row = &s.rows[1];
        assert_eq!((row.workload, row.zones, row.tpm.n), (p, 12, 3));
        assert!((row.cpu_oversubscription_pct.unwrap() - 12.5).abs() < 1e-9);
        assert_eq!(s.noise.len(), 2);
        assert!((s.noise[0].drift_pct - 2.0).abs() < 1e-9);
        let (vp, vm) = (&s.verdicts[0], &s.verdicts[1]);
        assert_eq!((vp.reference_zones, vp.oversubscribed_zones), (8, 12));
        assert!((vp.loss_pct - 40.0).abs() < 0.5, "{vp:?}");
        assert!((vp.cpu_share_loss_pct - 100.0 / 9.0).abs() < 1e-6, "{vp:?}");
        assert!(vp.larger_than_noise, "{vp:?}");
        assert!(vm.beyond_cpu_pct.abs() < 1.0, "{vm:?}");
        assert!(!vm.larger_than_noise, "{vm:?}");
        let mut md = String::new();
        markdown(&mut md, &r, &s);
        assert!(md.contains("larger than the noise, a result"), "{md}");
        assert!(
            md.contains("not larger than the noise, not a result"),
            "{md}"
        );
        assert!(md.contains("pgbench vs mariadb"), "{md}");
        let svg = tpm_svg(&r, &s, p);
        assert!(svg.contains("memory +25.0 %, CPU +12.5 %"), "{svg}");
    }

    /// With the counterfactual rows: one verdict per agent setting, the databases
    /// compared at the same setting, and the report puts what the agent did beside the
    /// same step without it (per repetition and over the repetitions).
    #[test]
    fn the_report_sets_the_agents_steps_beside_the_same_steps_without_it() {
        let (p, m) = (Workload::Pgbench, Workload::Mariadb);
        let mut steps = Vec::new();
        for rep in 1..=2 {
            for w in [p, m] {
                steps.push(step(w, rep, 8, 800.0, -16.7));
                let mut with = step(w, rep, 12, 700.0, 25.0);
                let mut without = step(w, rep, 12, 720.0, 25.0);
                without.agent_policy = None;
                if w == p {
                    with.per_zone[0] = 0.0;
                    with.evictions = 1;
                    with.zones_lost = vec!["wbench-s0001".into()];
                    with.agent_actions =
                        vec!["12.0 s: evict wbench-s0001 (swap-out 400 > 337)".into()];
                    with.swap_out_pages_s = 300.0;
                    without.swap_out_pages_s = 600.0;
                }
                steps.extend([with, without]);
            }
        }
        let r = results(steps, calibration([100.0, 101.0], [50.0, 50.0]));
        let s = summarize(&r);
        assert_eq!(s.rows.len(), 6);
        let policies: Vec<_> = s
            .verdicts
            .iter()
            .map(|v| (v.workload, v.agent_policy))
            .collect();
        let e = Some(AgentPolicy::Evict);
        assert_eq!(policies, [(p, e), (p, None), (m, e), (m, None)]);
        assert!(
            s.verdicts[1].text.contains("agent off"),
            "{}",
            s.verdicts[1].text
        );
        let mut md = String::new();
        markdown(&mut md, &r, &s);
        for want in [
            "pgbench vs mariadb at 12 zones, agent evict",
            "pgbench vs mariadb at 12 zones, agent off",
            "- pgbench at 12 zones, repetition 2: 1 action(s)",
            "  - 12.0 s: evict wbench-s0001",
            "  - without the agent, the same step of the same repetition: TPM 43200 (-1200 with it), swap out 600 pages/s (300 with it)",
            "### With and without the agent",
            "| pgbench | 12 | evict | 2 | 42000 (42000–42000) | 300 (300–300) |",
            "| pgbench | 12 | off | 0 | 43200 (43200–43200) | 600 (600–600) |",
        ] {
            assert!(md.contains(want), "{want:?} not in:\n{md}");
        }
        let svg = tpm_svg(&r, &s, p);
        assert!(svg.contains("TPM median, agent off"), "{svg}");
    }

    /// `--agent-policy both` with the counterfactual: the step's row without the agent
    /// comes once, after its evicting and its suspending rows.
    #[test]
    fn with_both_policies_the_row_without_the_agent_is_listed_once() {
        let p = Workload::Pgbench;
        let mut steps = vec![step(p, 1, 8, 800.0, -16.7)];
        for policy in [Some(AgentPolicy::Evict), Some(AgentPolicy::Suspend), None] {
            let mut s = step(p, 1, 12, 700.0, 25.0);
            s.agent_policy = policy;
            steps.push(s);
        }
        let mut r = results(steps, calibration([100.0, 100.0], [50.0, 50.0]));
        r.workloads = vec![p];
        r.agent_policy = Some(AgentPolicy::Both);
        let s = summarize(&r);
        let mut md = String::new();
        markdown(&mut md, &r, &s);
        let table = &md[md
            .find("### With and without the agent")
            .expect("the table")..];
        let agents: Vec<&str> = table
            .lines()
            .filter(|l| l.starts_with("| pgbench | 12 |"))
            .map(|l| l.split('|').nth(3).unwrap().trim())
            .collect();
        assert_eq!(agents, ["evict", "suspend", "off"], "{table}");
    }

    #[test]
    fn cpu_share_is_the_cap_until_the_cpus_run_out() {
        // The study's caps on 2 CPUs: 2 × 1.125 ÷ 12 = 0.1875 per zone.
        let cap = Some(0.1875);
        assert_eq!(cpu_share(cap, 2.0, 8), 0.1875);
        assert!((cpu_share(cap, 2.0, 12) - 2.0 / 12.0).abs() < 1e-12);
        assert_eq!(cpu_share(None, 2.0, 4), 0.5);
    }
}
