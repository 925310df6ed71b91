//! Text for people: the `warren stat` table (prstat -Z style) and the `warren memstat`
//! breakdown. Pure functions from reports to strings; the CLI prints them.

use super::memstat::Memstat;
use super::{Scope, StatReport, ZoneStat};

/// Bytes in a short human form: 820K, 64.2M, 1.2G (binary units).
pub fn size(b: u64) -> String {
    const K: f64 = 1024.0;
    let f = b as f64;
    if f < K * K {
        format!("{:.0}K", f / K)
    } else if f < K * K * K {
        format!("{:.1}M", f / (K * K))
    } else {
        format!("{:.1}G", f / (K * K * K))
    }
}

fn opt_size(b: Option<u64>) -> String {
    b.map(size).unwrap_or_else(|| "-".into())
}

fn opt_num(n: Option<u64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_else(|| "-".into())
}

fn opt_pct(p: Option<f64>) -> String {
    p.map(|p| format!("{p:.1}")).unwrap_or_else(|| "-".into())
}

fn uptime(s: u64) -> String {
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// Lay rows out in columns: the first left-aligned, the rest right-aligned.
pub fn columns(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let w = widths[i];
            if i == 0 {
                s.push_str(&format!("{c:<w$}"));
            } else {
                s.push_str(&format!("  {c:>w$}"));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

fn tasks_cell(z: &ZoneStat) -> String {
    match (z.tasks, z.pids_max) {
        (Some(t), Some(m)) => format!("{t}/{m}"),
        (t, _) => opt_num(t),
    }
}

fn psi_cell(z: &ZoneStat) -> String {
    match z.memory_pressure {
        None => "-".into(),
        Some(p) => {
            let mark = if p.scope == Scope::Host { "*" } else { "" };
            format!("{:.2}/{:.2}{mark}", p.some_avg10, p.full_avg10)
        }
    }
}

/// The `warren stat` table with its host summary.
pub fn stat(r: &StatReport) -> String {
    let h = &r.host;
    let mut out = format!(
        "host: {} CPUs, CPU {}% (100 = one CPU, over {:.1} s), memory {} total, {} available, swap {} of {} used",
        h.cpus,
        opt_pct(h.cpu_pct),
        r.cpu_window_s,
        opt_size(h.mem_total_bytes),
        opt_size(h.mem_available_bytes),
        opt_size(
            h.swap_total_bytes
                .zip(h.swap_free_bytes)
                .map(|(t, f)| t.saturating_sub(f))
        ),
        opt_size(h.swap_total_bytes),
    );
    if let Some(p) = h.memory_pressure {
        out.push_str(&format!(
            ", memory pressure {:.2}/{:.2}",
            p.some_avg10, p.full_avg10
        ));
    }
    out.push_str(&format!("; {} zone(s)\n", r.zones.len()));
    let mut header = vec![
        "ZONE", "STATE", "UPTIME", "CPU%", "MEM", "ANON", "CACHE", "KERNEL", "SWAP",
    ];
    if r.pss {
        header.extend(["RSS", "PSS", "USS"]);
    }
    header.extend(["PROCS", "TASKS", "PSI", "DISK"]);
    let mut rows: Vec<Vec<String>> = r
        .zones
        .iter()
        .map(|z| {
            let m = &z.memory;
            let name = match z.kind {
                crate::zone::Kind::Zone => z.name.clone(),
                crate::zone::Kind::Oci => format!("{} [oci]", z.name),
            };
            let mut row = vec![
                name,
                z.state.to_string(),
                z.uptime_s.map(uptime).unwrap_or_else(|| "-".into()),
                opt_pct(z.cpu_pct),
                opt_size(m.charged_bytes),
                opt_size(m.anon_bytes),
                opt_size(m.file_bytes),
                opt_size(m.kernel_bytes),
                opt_size(m.swap_bytes),
            ];
            if r.pss {
                row.push(opt_size(z.pss.map(|p| p.rss_bytes)));
                row.push(opt_size(z.pss.map(|p| p.pss_bytes)));
                row.push(opt_size(z.pss.map(|p| p.uss_bytes)));
            }
            row.extend([
                opt_num(z.processes),
                tasks_cell(z),
                psi_cell(z),
                opt_size(z.disk_bytes),
            ]);
            row
        })
        .collect();
    let mut system = vec![
        "[system]".to_string(),
        "-".into(),
        "-".into(),
        opt_pct(r.system.cpu_pct),
        opt_size(r.system.memory_bytes),
    ];
    system.resize(header.len(), "-".into());
    rows.push(system);
    out.push_str(&columns(&header, &rows));
    let host_psi = r
        .zones
        .iter()
        .any(|z| z.memory_pressure.is_some_and(|p| p.scope == Scope::Host));
    if host_psi {
        out.push_str("* host-wide memory pressure: cgroup v1 has no per-zone PSI\n");
    }
    for z in &r.zones {
        if let Some(k) = &z.ksm {
            out.push_str(&format!(
                "KSM {}: {} pages merged, profit {}\n",
                z.name,
                k.merging_pages,
                if k.profit_bytes < 0 {
                    format!("-{}", size(k.profit_bytes.unsigned_abs()))
                } else {
                    size(k.profit_bytes as u64)
                }
            ));
        }
    }
    out
}

/// The `warren memstat` breakdown.
pub fn memstat(m: &Memstat) -> String {
    let h = &m.host;
    let z = &m.zones;
    let total = h.total_bytes.max(1) as f64;
    let pct = |b: u64| format!("{:.1}%", b as f64 / total * 100.0);
    let row = |name: &str, host: u64, zones: Option<u64>, per: Option<u64>| {
        vec![
            name.to_string(),
            size(host),
            pct(host),
            opt_size(zones),
            opt_size(per),
        ]
    };
    let k = &h.kernel;
    let mut rows = vec![
        row(
            "kernel",
            k.total_bytes,
            z.total.kernel_bytes,
            z.per_zone.kernel_bytes,
        ),
        row("  slab (reclaimable)", k.slab_reclaimable_bytes, None, None),
        row(
            "  slab (unreclaimable)",
            k.slab_unreclaimable_bytes,
            None,
            None,
        ),
        row("  kernel stacks", k.kernel_stack_bytes, None, None),
        row("  page tables", k.page_tables_bytes, None, None),
        row("  other", k.other_bytes, None, None),
        row(
            "anon",
            h.anon_bytes,
            z.total.anon_bytes,
            z.per_zone.anon_bytes,
        ),
        row(
            "page cache",
            h.page_cache_bytes,
            z.total.page_cache_bytes,
            z.per_zone.page_cache_bytes,
        ),
    ];
    if let Some(mf) = &m.mapped_files {
        rows.push(vec![
            "  mapped by zones (PSS)".into(),
            size(mf.pss_file_bytes),
            pct(mf.pss_file_bytes),
            "-".into(),
            "-".into(),
        ]);
    }
    rows.extend([
        row("buffers", h.buffers_bytes, None, None),
        row(
            "shmem",
            h.shmem_bytes,
            z.total.shmem_bytes,
            z.per_zone.shmem_bytes,
        ),
        row("swap cache", h.swap_cached_bytes, None, None),
        row("huge pages", h.hugetlb_bytes, None, None),
        row("free", h.free_bytes, None, None),
        row("total", h.total_bytes, None, None),
    ]);
    let mut out = columns(&["KIND", "HOST", "%", "ZONES", "PER ZONE"], &rows);
    out.push_str(&format!(
        "ZONES and PER ZONE: charged to the {} booted zone(s)' cgroups\n",
        z.booted
    ));
    if let Some(mf) = &m.mapped_files {
        out.push_str(&format!(
            "mapped by zones: file pages (template and host text, libraries) mapped by {} zone process(es), each page divided among all its mappers; with private copies they would take {}\n",
            mf.processes,
            size(mf.shared_sum_bytes)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_columns() {
        assert_eq!(size(0), "0K");
        assert_eq!(size(820 * 1024), "820K");
        assert_eq!(size(64 << 20), "64.0M");
        assert_eq!(size(3 << 29), "1.5G");
        let t = columns(
            &["ZONE", "CPU%"],
            &[
                vec!["web1".into(), "99.5".into()],
                vec!["b".into(), "-".into()],
            ],
        );
        assert_eq!(t, "ZONE  CPU%\nweb1  99.5\nb        -\n");
        assert_eq!(uptime(90_000), "1d01h");
    }
}
