//! The Solaris density study (the seed's third study): its published figures, and the
//! section of `report.md` that sets each measured step beside them — processes,
//! threads (LWPs), memory by kind (kernel, anon, text, page cache, free) for all zones
//! and per zone, CPU with the zones idle, and the first limit the doctor names for the
//! next step. Pure: results in, text out.

use std::fmt::Write;

use super::headroom::{describe, thousands};
use super::{Results, Step};

/// The seed's figures, as published: Solaris zones on one host, idle.
pub struct Seed {
    pub zones: u64,
    pub processes: u64,
    pub lwps: u64,
    /// Memory of the whole host in use with the zones running, GB as published.
    pub memory_gb: f64,
    /// Host CPU with the zones idle, %.
    pub cpu_pct: f64,
    pub anon_mb_per_zone: f64,
    pub kernel_mb_per_zone: f64,
}

/// The seed: 1,000 zones, 18,048 processes, 84,798 LWPs, 38 GB, 2 % CPU; 25 MB anon and
/// 11 MB kernel per zone.
pub const SEED: Seed = Seed {
    zones: 1000,
    processes: 18_048,
    lwps: 84_798,
    memory_gb: 38.0,
    cpu_pct: 2.0,
    anon_mb_per_zone: 25.0,
    kernel_mb_per_zone: 11.0,
};

type Cell = fn(&Step) -> String;

fn mib(kib: f64) -> String {
    format!("{:.2}", kib / 1024.0)
}

/// The table's rows: label, the seed's figure (labelled where derived), warren's.
fn rows() -> Vec<(&'static str, String, Cell)> {
    let s = &SEED;
    let none = || "–".to_string();
    vec![
        (
            "processes, host (kernel threads included)",
            thousands(s.processes),
            |st| thousands(st.census.host_processes),
        ),
        ("processes, the zones' own", none(), |st| {
            thousands(st.census.zone_processes)
        }),
        ("threads (LWPs), host", thousands(s.lwps), |st| {
            thousands(st.census.host_threads)
        }),
        ("threads, the zones' own", none(), |st| {
            thousands(st.census.zone_threads)
        }),
        (
            "memory, all zones, MiB (seed: GB in use)",
            format!("{} GB", s.memory_gb),
            |st| mib(st.memory.all.total_kib),
        ),
        (
            "memory per zone, MiB",
            format!(
                "{:.0} MB ({} GB / {})",
                s.memory_gb * 1000.0 / s.zones as f64,
                s.memory_gb,
                thousands(s.zones)
            ),
            |st| mib(st.memory.per_zone.total_kib),
        ),
        ("kernel, all zones, MiB", none(), |st| {
            mib(st.memory.all.kernel_kib)
        }),
        (
            "kernel per zone, MiB",
            format!("{} MB", s.kernel_mb_per_zone),
            |st| mib(st.memory.per_zone.kernel_kib),
        ),
        ("anon, all zones, MiB", none(), |st| {
            mib(st.memory.all.anon_kib)
        }),
        (
            "anon per zone, MiB",
            format!("{} MB", s.anon_mb_per_zone),
            |st| mib(st.memory.per_zone.anon_kib),
        ),
        ("text (mapped files), all zones, MiB", none(), |st| {
            mib(st.memory.all.mapped_file_kib)
        }),
        ("text per zone, MiB", none(), |st| {
            mib(st.memory.per_zone.mapped_file_kib)
        }),
        ("page cache (unmapped), all zones, MiB", none(), |st| {
            mib(st.memory.all.page_cache_kib)
        }),
        ("page cache per zone, MiB", none(), |st| {
            mib(st.memory.per_zone.page_cache_kib)
        }),
        ("free, host at the sample, MiB", none(), |st| {
            mib(st.memory.host_free_kib)
        }),
        ("free fell by, per zone, MiB", none(), |st| {
            mib(st.memory.free_drop_kib / st.zones.max(1) as f64)
        }),
        (
            "CPU busy, host, % of all CPUs (zones idle)",
            format!("{} %", s.cpu_pct),
            |st| format!("{:.2}", st.host_cpu_pct),
        ),
        ("CPU, the zones' own, % of one CPU", none(), |st| {
            format!("{:.3}", st.idle_cpu_pct)
        }),
        ("first limit ahead (doctor)", none(), |st| {
            match &st.next_step {
                None => "–".into(),
                Some(n) => match &n.first {
                    None => format!(
                        "none up to {} zones",
                        thousands(super::headroom::SEARCH_CAP)
                    ),
                    Some(f) if n.stops_next => {
                        format!("**stops {} zones**: {}", thousands(n.zones), describe(f))
                    }
                    Some(f) => format!("{} zones fit; {}", thousands(n.zones), describe(f)),
                },
            }
        }),
    ]
}

/// The report's section: the seed's table with warren's steps beside the seed's
/// figures, then what the doctor says about each next step.
pub fn section(o: &mut String, r: &Results) {
    let Some(w) = r.systems.first().filter(|w| !w.steps.is_empty()) else {
        return;
    };
    let _ = writeln!(o, "\n## The Solaris density study\n");
    let _ = writeln!(
        o,
        "The seed's column is the seed's published result (Solaris zones, {} zones on one host, idle), \
         not measured here; warren's columns are this run's steps on the machine above. Memory rows \
         are /proc/meminfo rises from before the first boot to after the idle window (docs/bench.md); \
         a zone's memory includes its memory cgroup's shrinker state, which the kernel sizes for the \
         most superblocks the host has had since boot (docs/scaling.md). The seed's MB and GB are as \
         published; warren's figures are MiB.\n",
        thousands(SEED.zones)
    );
    let _ = write!(o, "| | seed: Solaris, {} zones |", thousands(SEED.zones));
    for st in &w.steps {
        let _ = write!(o, " {}, {} zones |", w.name, thousands(st.zones as u64));
    }
    let _ = write!(o, "\n|---|---|");
    for _ in &w.steps {
        o.push_str("---|");
    }
    o.push('\n');
    for (label, seed, cell) in rows() {
        let _ = write!(o, "| {label} | {seed} |");
        for st in &w.steps {
            let _ = write!(o, " {} |", cell(st));
        }
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "\nWho used the host's CPUs over the idle window (/proc/stat's kinds, % of all CPUs; then \
         the tasks that used the most, grouped by name, % of one CPU — kernel threads marked, with \
         the workqueue a kworker ran last):\n"
    );
    for st in &w.steps {
        let u = &st.cpu_use;
        let kinds: Vec<String> = u
            .kinds_pct
            .iter()
            .filter(|(_, p)| *p >= 0.05)
            .map(|(k, p)| format!("{k} {p:.1}"))
            .collect();
        let top: Vec<String> = u
            .top
            .iter()
            .map(|g| {
                format!(
                    "{}{} ×{}: {:.1}",
                    g.name,
                    if g.kernel { " [kernel]" } else { "" },
                    thousands(g.tasks),
                    g.cpu_pct
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "- {} zones: host {:.1} % busy ({}); tasks {:.1} % of one CPU in all: {}",
            thousands(st.zones as u64),
            st.host_cpu_pct,
            if kinds.is_empty() {
                "–".into()
            } else {
                kinds.join(", ")
            },
            u.tasks_pct,
            if top.is_empty() {
                "–".into()
            } else {
                top.join("; ")
            }
        );
    }
    let _ = writeln!(
        o,
        "\nThe next step, by the doctor's model (`warren doctor`) for zones like the ones measured, \
         on the host as the step left it:\n"
    );
    for st in &w.steps {
        let Some(n) = &st.next_step else { continue };
        let p = &n.plan;
        let _ = writeln!(
            o,
            "- after {} zones, asking about {} zones (per zone: {} processes, {} threads, {} inotify \
             instances, {} watches, {} of memory beyond the doctor's model):",
            thousands(st.zones as u64),
            thousands(n.zones),
            p.procs(),
            p.threads_per_zone,
            p.inotify_instances_per_zone,
            p.inotify_watches_per_zone,
            super::headroom::bytes(p.mem_per_zone),
        );
        if n.will_fail.is_empty() {
            let _ = writeln!(o, "  - every limit fits at {} zones", thousands(n.zones));
        }
        for s in &n.will_fail {
            let _ = writeln!(o, "  - does not fit: {} ({})", describe(s), s.note);
        }
        if let Some(f) = n.first.as_ref().filter(|_| !n.stops_next) {
            let _ = writeln!(o, "  - the first wall beyond: {} ({})", describe(f), f.note);
        }
        if let Some(d) = &n.first_by_default_plan {
            let _ = writeln!(
                o,
                "  - with the doctor's default allowance instead ({} inotify instance and {} watches \
                 per zone, for a service manager), the first is {}",
                crate::doctor::INOTIFY_INSTANCES_PER_ZONE,
                crate::doctor::INOTIFY_WATCHES_PER_ZONE,
                describe(d)
            );
        }
    }
}
