//! Printing: aligned tables, JSON, errors with their cause chain, progress bars.

use serde::Serialize;

use crate::config::{format_size, ZoneConfig};
use crate::demo::Report;
use crate::doctor;
use crate::error::Error;
use crate::host::HostInfo;
use crate::measure::Progress;
use crate::zone::ZoneInfo;

/// Print the error and its numbered chain of causes, once.
pub fn print_error(e: &Error) {
    eprintln!("warren: error: {e}");
    let mut source = std::error::Error::source(e);
    let mut n = 1;
    while let Some(s) = source {
        eprintln!("  {n}: {s}");
        source = s.source();
        n += 1;
    }
    if let Some(h) = super::assist::hint(e) {
        eprintln!("warren: {h}");
    }
}

pub fn json<T: Serialize + ?Sized>(v: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("API objects serialise")
    );
}

/// A size as `list` shows it: "512M", or "max" for no limit.
pub(super) fn size_or_max(n: u64) -> String {
    if n == crate::config::UNLIMITED {
        "max".into()
    } else {
        format_size(n)
    }
}

/// Print rows as columns aligned to their widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        println!("{}", s.trim_end());
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

pub(super) fn limits_summary(c: &ZoneConfig) -> String {
    let l = &c.limits;
    let mut parts = Vec::new();
    if let Some(n) = l.max_processes {
        parts.push(format!("procs={}", crate::config::limit_text(n)));
    }
    if let Some(n) = l.max_threads {
        parts.push(format!("threads={}", crate::config::limit_text(n)));
    }
    if let Some(n) = l.memory_max {
        parts.push(format!("mem={}", size_or_max(n)));
    }
    if let Some(n) = l.memory_request {
        parts.push(format!("req={}", format_size(n)));
    }
    if let Some(n) = l.memory_swap {
        parts.push(format!("swap={}", size_or_max(n)));
    }
    if let Some(f) = l.cpu_max {
        parts.push(format!("cpu={f}"));
    }
    if let Some(n) = l.cpu_shares {
        parts.push(format!("shares={n}"));
    }
    if let Some(n) = l.cpu_weight {
        parts.push(format!("weight={n}"));
    }
    if let Some(c) = &l.cpuset {
        parts.push(format!("cpuset={c}"));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(",")
    }
}

pub(super) fn uptime(s: u64) -> String {
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The STATE cell of a `list` row.
pub(super) fn state_cell(i: &ZoneInfo) -> String {
    match (&i.state, &i.error, &i.oci) {
        // An OCI container: its runtime-spec status, as `warren oci list` says.
        (_, _, Some(o)) => o.status.to_string(),
        (Some(s), _, _) => {
            let mut st = s.to_string();
            if let Some(ev) = &i.evicted {
                st.push_str(&format!(" (evicted: {ev})"));
            }
            if let Some(n) = i.oom_kills.filter(|n| *n > 0) {
                st.push_str(&format!(", oom-killed ({n})"));
            } else if let Some(run) = &i.last_run {
                st.push_str(&format!(", {run}"));
            }
            st
        }
        (None, Some(_), _) => "unreadable".into(),
        _ => "-".into(),
    }
}

pub fn zone_table(infos: &[ZoneInfo], verbose: bool) {
    let dash = || "-".to_string();
    let rows: Vec<Vec<String>> = infos
        .iter()
        .map(|i| {
            let state = state_cell(i);
            let mut row = vec![
                i.name.clone(),
                state,
                i.template.clone().unwrap_or_else(dash),
                i.backend.map(|b| b.to_string()).unwrap_or_else(dash),
                i.kind.to_string(),
            ];
            if verbose {
                row.push(i.init_pid.map(|p| p.to_string()).unwrap_or_else(dash));
                row.push(i.uptime_s.map(uptime).unwrap_or_else(dash));
                row.push(i.net.map(|n| n.as_str().to_string()).unwrap_or_else(dash));
                row.push(i.address.map(|a| a.to_string()).unwrap_or_else(dash));
                let mut limits = i.config.as_ref().map(limits_summary).unwrap_or_else(dash);
                // The limits the kernel enforces where they differ from the config.
                for f in i.in_force.iter().flatten() {
                    if let Some(c) = &f.configured {
                        limits.push_str(&format!(
                            " [in force {}={} (configured {c})]",
                            f.file, f.in_force
                        ));
                    }
                }
                row.push(limits);
                row.push(match (&i.root, &i.error) {
                    (_, Some(e)) => e.clone(),
                    (Some(r), _) => r.display().to_string(),
                    _ => dash(),
                });
            }
            row
        })
        .collect();
    if verbose {
        table(
            &[
                "NAME", "STATE", "TEMPLATE", "BACKEND", "KIND", "PID", "UPTIME", "NET", "ADDRESS",
                "LIMITS", "ROOT",
            ],
            &rows,
        );
    } else {
        table(&["NAME", "STATE", "TEMPLATE", "BACKEND", "KIND"], &rows);
    }
}

/// A template's source for the table: an OCI image as `ref@digest` (12 digits).
pub fn source_cell(m: &crate::storage::template::Manifest) -> String {
    match &m.image {
        Some(i) => {
            let d = i.shown_digest();
            let short = d.get(..19).unwrap_or(d);
            format!("{}@{short}", i.reference.as_deref().unwrap_or("-"))
        }
        None => m.source.clone().unwrap_or_else(|| "-".into()),
    }
}

/// `warren template info NAME`.
pub fn template_info(m: &crate::storage::template::Manifest) {
    println!("template:   {}", m.name);
    println!("kind:       {}", format!("{:?}", m.kind).to_lowercase());
    println!("backend:    {}", m.backend);
    println!("source:     {}", m.source.as_deref().unwrap_or("-"));
    if let Some(i) = &m.image {
        image_lines(i);
    }
}

/// An OCI template's image and the zone defaults its config gives.
pub fn image_lines(i: &crate::storage::image_config::ImageMeta) {
    let or_dash = |o: Option<&str>| o.unwrap_or("-").to_string();
    println!(
        "image:      {} ({}, {} layers)",
        or_dash(i.reference.as_deref()),
        i.format,
        i.layers
    );
    println!("digest:     {}", or_dash(i.digest.as_deref()));
    println!("config:     {}", or_dash(i.config_digest.as_deref()));
    let init = if i.init.is_empty() {
        "warren's init".to_string()
    } else {
        format!("{:?}", i.init)
    };
    println!("init:       {init}");
    println!(
        "env:        {}",
        if i.env.is_empty() {
            "-".into()
        } else {
            i.env.join(" ")
        }
    );
    println!("workdir:    {}", or_dash(i.workdir.as_deref()));
    println!(
        "user:       {} (uid {}, gid {})",
        or_dash(i.user.as_deref()),
        i.uid,
        i.gid
    );
}

/// `warren config keys`: (name, example, default, live, meaning) rows.
pub fn key_table(rows: &[Vec<String>]) {
    table(&["KEY", "EXAMPLE", "DEFAULT", "LIVE", "MEANING"], rows);
}

pub fn host_info(i: &HostInfo) {
    let mib = |b: u64| format!("{:.0} MiB", b as f64 / (1 << 20) as f64);
    println!("warren {}", i.warren_version);
    println!("kernel:          Linux {}", i.kernel);
    println!("state root:      {}", i.state_root.display());
    println!("cgroups:         {} ({})", i.cgroup_version, i.cgroup_why);
    println!("controllers:     {}", i.cgroup_controllers.join(" "));
    for (c, d) in &i.cgroup_parents {
        println!("  zones under:   {} ({c})", d.display());
    }
    let d = &i.cgroup_delegation;
    println!(
        "delegation:      {} ({})",
        if d.ok { "ok" } else { "missing" },
        d.summary
    );
    if let Some(fix) = &d.fix {
        println!("  fix:           {fix}");
    }
    println!("storage backend: {} ({})", i.storage_backend, i.storage_why);
    println!("disk quota:      {}", i.disk_quota);
    println!("user namespaces: {}", i.user_namespaces);
    let u = &i.userns_support;
    println!(
        "  userns zones:  {} ({})",
        if u.ok { "ok" } else { "cannot boot" },
        u.summary
    );
    if let Some(fix) = &u.fix {
        println!("  fix:           {fix}");
    }
    println!("proc views:      {}", i.proc_views);
    println!("cpus:            {}", i.online_cpus);
    println!(
        "memory:          {} (swap {})",
        mib(i.mem_total_bytes),
        mib(i.swap_total_bytes)
    );
    println!(
        "open files:      {} soft / {} hard (warren keeps no descriptor per zone)",
        i.nofile_soft, i.nofile_hard
    );
    println!(
        "zone init:       {}",
        i.init_exe
            .as_ref()
            .map_or("not found".into(), |p| p.display().to_string())
    );
    println!(
        "static busybox:  {}",
        i.static_busybox.as_ref().map_or(
            "not installed (apt-get install busybox-static)".into(),
            |p| p.display().to_string()
        )
    );
    if !i.is_root {
        println!("note:            not running as root; most verbs need root");
    }
}

pub fn demo_report(r: &Report) {
    println!(
        "warren demo: {} zones ({} at a time), net {}, template 'host' ({} backend, cgroup {}), Linux {}, {} CPUs, {:.0} MiB RAM",
        r.zones, r.jobs, r.net, r.backend, r.cgroup_version, r.kernel, r.cpus, r.mem_total_mib
    );
    let f = |v: f64, unit: &str| format!("{v:.2} {unit}");
    let rows = vec![
        vec![
            "clone".into(),
            f(r.clone_ms.median, "ms"),
            f(r.clone_ms.p99, "ms"),
            "≤ 4 ms median".into(),
        ],
        vec![
            "boot".into(),
            f(r.boot_ms.median, "ms"),
            f(r.boot_ms.p99, "ms"),
            "≤ 5 ms median".into(),
        ],
        vec![
            "host memory per zone".into(),
            f(r.mem_per_zone_mib, "MiB"),
            "-".into(),
            "≤ 0.4 MiB".into(),
        ],
        vec![
            "  (MemAvailable drop)".into(),
            f(r.mem_available_per_zone_mib, "MiB"),
            "-".into(),
            "-".into(),
        ],
        vec![
            "disk per zone".into(),
            f(r.disk_per_zone_kib, "KiB"),
            "-".into(),
            "≤ 32 KiB".into(),
        ],
        vec![
            "idle CPU, all zones".into(),
            f(r.idle_cpu_pct, "%"),
            "-".into(),
            "-".into(),
        ],
        vec![
            "halt".into(),
            f(r.halt_ms.median, "ms"),
            f(r.halt_ms.p99, "ms"),
            "-".into(),
        ],
        vec![
            "delete".into(),
            f(r.delete_ms.median, "ms"),
            f(r.delete_ms.p99, "ms"),
            "-".into(),
        ],
    ];
    table(&["MEASURE", "MEDIAN", "P99", "TARGET"], &rows);
    println!(
        "total {:.1} s; all demo zones halted and removed",
        r.total_s
    );
}

/// Progress bars on stderr (hidden when it is not a terminal or with --json).
pub struct Bars {
    bar: Option<indicatif::ProgressBar>,
    hidden: bool,
}

impl Bars {
    pub fn new(hidden: bool) -> Bars {
        Bars { bar: None, hidden }
    }
}

impl Progress for Bars {
    fn phase(&mut self, name: &str, len: u64) {
        if let Some(b) = self.bar.take() {
            b.finish();
        }
        let bar = if self.hidden {
            indicatif::ProgressBar::hidden()
        } else {
            indicatif::ProgressBar::new(len)
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg:>20} [{bar:40}] {pos}/{len} {elapsed}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_message(name.to_string());
        self.bar = Some(bar);
    }
    fn step(&mut self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }
    fn done(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish();
        }
    }
}

/// Bytes for people: "9.8 GiB", "28.0 KiB".
fn human_bytes(b: u64) -> String {
    let mut v = b as f64;
    for unit in ["B", "KiB", "MiB", "GiB", "TiB"] {
        if v < 1024.0 || unit == "TiB" {
            return if unit == "B" {
                format!("{b} B")
            } else {
                format!("{v:.1} {unit}")
            };
        }
        v /= 1024.0;
    }
    unreachable!("the loop returns at TiB")
}

fn doctor_value(v: u64, unit: doctor::Unit) -> String {
    match unit {
        doctor::Unit::Count => v.to_string(),
        doctor::Unit::Bytes => human_bytes(v),
    }
}

/// `warren proc-views`: ZONE, WANT, VIEWS (and AFTER with --refresh).
pub fn proc_views(v: &[crate::zone::ZoneViews]) {
    let name = |s: crate::zone::ViewState| {
        match s {
            crate::zone::ViewState::None => "none (the host's files)",
            crate::zone::ViewState::Live => "live",
            crate::zone::ViewState::Dead => "dead (ENOTCONN: lxcfs went away)",
        }
        .to_string()
    };
    let refreshed = v.iter().any(|z| z.after.is_some());
    let rows: Vec<Vec<String>> = v
        .iter()
        .map(|z| {
            let mut row = vec![z.zone.clone(), z.want.to_string(), name(z.before)];
            if refreshed {
                row.push(z.after.map_or("-".into(), name));
            }
            row
        })
        .collect();
    if refreshed {
        table(&["ZONE", "WANT", "VIEWS", "AFTER REFRESH"], &rows);
    } else {
        table(&["ZONE", "WANT", "VIEWS"], &rows);
    }
}

/// The doctor's table (LIMIT, CURRENT, NEEDED, VERDICT, FIX), notes, and a summary line.
pub fn doctor_report(r: &doctor::Report, verbose: bool) {
    let rows: Vec<Vec<String>> = r
        .findings
        .iter()
        .map(|f| {
            vec![
                f.limit.clone(),
                match &f.current {
                    doctor::Current::Value(v) => doctor_value(*v, f.unit),
                    doctor::Current::Unlimited => "unlimited".into(),
                    doctor::Current::Unknown(_) => "unknown".into(),
                },
                doctor_value(f.needed, f.unit),
                f.verdict.to_string(),
                f.fix.as_ref().map_or("-".into(), |x| x.to_string()),
            ]
        })
        .collect();
    table(&["LIMIT", "CURRENT", "NEEDED", "VERDICT", "FIX"], &rows);
    let notes: Vec<String> = r
        .findings
        .iter()
        .filter(|f| verbose || f.verdict != doctor::Verdict::Ok)
        .flat_map(|f| {
            let mut lines = Vec::new();
            if let doctor::Current::Unknown(why) = &f.current {
                lines.push(format!("  {}: unknown: {why}", f.limit));
            }
            if !f.note.is_empty() {
                lines.push(format!("  {}: {}", f.limit, f.note));
            }
            lines
        })
        .collect();
    if !notes.is_empty() {
        println!("\nnotes:");
        for n in notes {
            println!("{n}");
        }
    }
    let p = &r.plan;
    let s = &r.summary;
    println!(
        "\nplan: {} zones × (init + {} processes, {} tasks), net {}, {} each for programs",
        p.zones,
        p.procs_per_zone,
        p.threads_per_zone,
        format!("{:?}", p.net).to_lowercase(),
        human_bytes(p.mem_per_zone)
    );
    let advice = if s.will_fail > 0 || s.tight > 0 {
        "; 'warren doctor --fix' raises the sysctls (FIX column), the rest needs the advice"
    } else {
        ""
    };
    let weakens = if s.weakens > 0 {
        format!(", {} weaken isolation (see notes)", s.weakens)
    } else {
        String::new()
    };
    let warnings = if s.warnings > 0 {
        format!(", {} warning(s) (see notes)", s.warnings)
    } else {
        String::new()
    };
    println!(
        "{} ok, {} tight, {} will fail, {} unknown{weakens}{warnings}{advice}",
        s.ok, s.tight, s.will_fail, s.unknown
    );
}

/// What `--fix` changed (or would change).
pub fn fix_report(r: &doctor::fix::FixReport) {
    let (verb, file_verb) = if r.dry_run {
        ("would set", "would write")
    } else {
        ("set", "wrote")
    };
    if r.applied.is_empty() && r.failed.is_empty() {
        println!("no sysctl needs raising for this plan");
    }
    for c in &r.applied {
        println!("{verb} {c}");
    }
    for (c, e) in &r.failed {
        println!("refused {c}: {e}");
    }
    if let Some(f) = &r.file {
        println!("{file_verb} {}", f.display());
    }
    for (limit, text) in &r.advice {
        println!("not fixed by warren: {limit}: {text}");
    }
}

/// What `--probe` found.
pub fn probe_report(r: &doctor::probe::ProbeReport) {
    let kind = format!("{:?}", r.kind).to_lowercase();
    if let Some(sig) = r.interrupted_by {
        println!(
            "probe {kind}: interrupted by signal {sig}; everything it made was killed and {} removed",
            r.cgroup.display()
        );
        return;
    }
    println!(
        "probe {kind}: created {} of {} in {:.2} s (probe cgroup pids.max {})",
        r.created,
        r.max,
        r.elapsed_ms as f64 / 1000.0,
        r.cap
    );
    match &r.error {
        Some(e) => println!("stopped by: {} ({e})", r.stopped_by),
        None => println!("stopped by: {}", r.stopped_by),
    }
    println!(
        "cleaned up: every probe task killed, {} removed",
        r.cgroup.display()
    );
}
