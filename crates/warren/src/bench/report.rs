//! `report.md`: the machine, a table per step (one column per system, ratios to warren),
//! a summary table over the steps, and the Solaris density study's table
//! ([`super::solaris`]). Pure: results in, text out.

use std::fmt::Write;

use super::{Results, Step, SystemRun};

fn cell(sys: &SystemRun, n: usize, f: &dyn Fn(&Step) -> f64, warren: Option<f64>) -> String {
    if sys.status != "ok" {
        return sys.status.clone();
    }
    match sys.steps.iter().find(|s| s.zones == n) {
        None => "-".into(),
        Some(s) => {
            let v = f(s);
            match warren {
                Some(w) if w.abs() > 1e-9 => format!("{v:.2} ({:.2}×)", v / w),
                _ => format!("{v:.2}"),
            }
        }
    }
}

type Row = (&'static str, &'static dyn Fn(&Step) -> f64);

const ROWS: &[Row] = &[
    ("clone median, ms", &|s| s.clone_ms.median),
    ("clone p99, ms", &|s| s.clone_ms.p99),
    ("boot median, ms", &|s| s.boot_ms.median),
    ("boot p99, ms", &|s| s.boot_ms.p99),
    ("memory per zone (pinned), KiB", &|s| {
        s.mem_per_zone.pinned_kib
    }),
    ("memory per zone (MemAvailable drop), KiB", &|s| {
        s.mem_per_zone.available_kib
    }),
    ("  kernel, KiB", &|s| s.mem_per_zone.kernel_kib),
    ("  anon, KiB", &|s| s.mem_per_zone.anon_kib),
    ("  page tables, KiB", &|s| s.mem_per_zone.page_tables_kib),
    ("  slab, KiB", &|s| s.mem_per_zone.slab_kib),
    ("disk per zone, KiB", &|s| s.disk_per_zone_kib),
    ("idle CPU, all zones, %", &|s| s.idle_cpu_pct),
    ("host CPU busy while idle, % of all CPUs", &|s| {
        s.host_cpu_pct
    }),
    ("processes, the zones' own", &|s| {
        s.census.zone_processes as f64
    }),
    ("threads, the zones' own", &|s| s.census.zone_threads as f64),
    ("halt median, ms", &|s| s.halt_ms.median),
    ("delete median, ms", &|s| s.delete_ms.median),
    ("step total, s", &|s| s.total_s),
];

/// A step's memstat-style table: each kind per zone (KiB) and for the whole set (MiB),
/// one pair of columns per system that ran the step; then what the zones' own memory
/// cgroups were charged, for the systems whose cgroups the bench reads.
fn breakdown_table(o: &mut String, r: &Results, n: usize) {
    use super::breakdown::{CgroupKinds, ROWS as KINDS};
    let ran: Vec<(&SystemRun, &Step)> = r
        .systems
        .iter()
        .filter(|s| s.status == "ok")
        .filter_map(|s| s.steps.iter().find(|st| st.zones == n).map(|st| (s, st)))
        .collect();
    if ran.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\nMemory by kind (/proc/meminfo rise from before the first start to after the idle window; docs/bench.md):\n"
    );
    let _ = write!(o, "| kind |");
    for (s, _) in &ran {
        let _ = write!(o, " {0} per zone, KiB | {0} all {n}, MiB |", s.name);
    }
    let _ = write!(o, "\n|---|");
    for _ in &ran {
        let _ = write!(o, "---|---|");
    }
    o.push('\n');
    for (name, f) in KINDS {
        let _ = write!(o, "| {name} |");
        for (_, st) in &ran {
            let m = &st.memory;
            let _ = write!(o, " {:.1} | {:.2} |", f(&m.per_zone), f(&m.all) / 1024.0);
        }
        o.push('\n');
    }
    type CgRow = (&'static str, fn(&CgroupKinds) -> Option<f64>);
    const CG: &[CgRow] = &[
        ("cgroups: kernel", |c| c.kernel_kib),
        ("cgroups: anon", |c| c.anon_kib),
        ("cgroups: page cache", |c| c.page_cache_kib),
        ("cgroups: shmem", |c| c.shmem_kib),
    ];
    if ran
        .iter()
        .any(|(_, st)| st.memory.cgroups_per_zone.is_some())
    {
        for (name, f) in CG {
            let _ = write!(o, "| {name} |");
            for (_, st) in &ran {
                let m = &st.memory;
                let fmt = |v: Option<f64>, scale: f64, prec: usize| {
                    v.map_or("-".to_string(), |v| format!("{:.prec$}", v / scale))
                };
                let per = m.cgroups_per_zone.as_ref().and_then(f);
                let all = m.cgroups_all.as_ref().and_then(f);
                let _ = write!(o, " {} | {} |", fmt(per, 1.0, 1), fmt(all, 1024.0, 2));
            }
            o.push('\n');
        }
    }
}

/// The Markdown report.
pub fn markdown(r: &Results) -> String {
    let m = &r.machine;
    let mut o = String::new();
    let _ = writeln!(o, "# warren bench density, {}\n", r.date);
    let _ = writeln!(
        o,
        "Machine: {}, Linux {}, {} CPUs, {:.0} MiB RAM, cgroup {}, {} storage; load average at start {}.\n",
        m.hostname, m.kernel, m.cpus, m.mem_total_mib, m.cgroup_version, m.storage_backend, m.loadavg_at_start
    );
    let _ = writeln!(
        o,
        "Template {:?}, net {}, idle window {} s. Memory and disk are per zone; ratios are to warren.\n",
        r.template, r.net, r.idle_s
    );
    for s in &r.systems {
        let runtime = match &s.runtime {
            Some(r) => format!(", runtime {r}"),
            None => String::new(),
        };
        let _ = writeln!(o, "- **{}** ({}{runtime}): {}", s.name, s.status, s.note);
    }
    let head = |o: &mut String, first: &str| {
        let _ = write!(o, "\n| {first} |");
        for s in &r.systems {
            let _ = write!(o, " {} |", s.name);
        }
        let _ = write!(o, "\n|---|");
        for _ in &r.systems {
            let _ = write!(o, "---|");
        }
        o.push('\n');
    };
    let warren = &r.systems[0];
    for &n in &r.steps {
        let _ = writeln!(o, "\n## {n} zone{}", if n == 1 { "" } else { "s" });
        head(&mut o, "measure");
        for (name, f) in ROWS {
            let w = warren.steps.iter().find(|s| s.zones == n).map(f);
            let _ = write!(o, "| {name} |");
            for (i, s) in r.systems.iter().enumerate() {
                let _ = write!(o, " {} |", cell(s, n, *f, if i == 0 { None } else { w }));
            }
            o.push('\n');
        }
        breakdown_table(&mut o, r, n);
    }
    let _ = writeln!(o, "\n## Summary\n");
    let _ = writeln!(
        o,
        "| system | N | clone median ms | boot median ms | boot p99 ms | memory per zone KiB | disk per zone KiB | idle CPU % | halt median ms | step s |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|");
    for sys in &r.systems {
        if sys.steps.is_empty() {
            let _ = writeln!(o, "| {} | - | {} | | | | | | | |", sys.name, sys.status);
        }
        for s in &sys.steps {
            let _ = writeln!(
                o,
                "| {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {:.1} | {:.2} | {:.2} | {:.1} |",
                sys.name,
                s.zones,
                s.clone_ms.median,
                s.boot_ms.median,
                s.boot_ms.p99,
                s.mem_per_zone.pinned_kib,
                s.disk_per_zone_kib,
                s.idle_cpu_pct,
                s.halt_ms.median,
                s.total_s
            );
        }
    }
    super::solaris::section(&mut o, r);
    o
}
