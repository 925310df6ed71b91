//! The bench's charts as hand-written SVG: axes, a log-scale x axis for N, one
//! polyline per series with a legend. Pure: data in, text out.

use std::fmt::Write;

use super::Results;

/// One line of a chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const W: f64 = 640.0;
const H: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A line chart with a log10 x axis (x > 0) and a linear y axis from 0.
pub fn chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    chart_marked(title, x_label, y_label, series, &[])
}

/// [`chart`] with dashed vertical marks at the given x values, each labelled.
pub fn chart_marked(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    marks: &[(f64, String)],
) -> String {
    let pts = || series.iter().flat_map(|s| s.points.iter());
    // Only finite, positive x values can sit on a log axis; with none (an empty
    // chart) the axis spans 1..10 so the tick loop below always ends.
    let xs = || pts().map(|p| p.0).filter(|x| x.is_finite() && *x >= 1.0);
    let xmin = xs().fold(f64::INFINITY, f64::min);
    let xmin = if xmin.is_finite() { xmin } else { 1.0 };
    let xmax = xs().fold(xmin, f64::max);
    let (lx0, lx1) = (
        xmin.log10().floor(),
        xmax.log10().ceil().max(xmin.log10().floor() + 1.0),
    );
    let ymax = pts()
        .map(|p| p.1)
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.1 } else { 1.0 };
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let sx = |x: f64| LEFT + (x.max(1e-9).log10() - lx0) / (lx1 - lx0) * pw;
    let sy = |y: f64| TOP + ph - y.max(0.0) / ymax * ph;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        LEFT + pw / 2.0,
        esc(title)
    );
    // Axes.
    let _ = writeln!(
        o,
        r#"<line x1="{LEFT}" y1="{y}" x2="{x}" y2="{y}" stroke="black"/>"#,
        y = TOP + ph,
        x = LEFT + pw
    );
    let _ = writeln!(
        o,
        r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{}" stroke="black"/>"#,
        TOP + ph
    );
    // x ticks: powers of ten.
    let mut e = lx0;
    while e <= lx1 + 1e-9 {
        let v = 10f64.powf(e);
        let x = sx(v);
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{v}</text>"##,
            TOP + ph,
            TOP + ph + 16.0
        );
        e += 1.0;
    }
    // y ticks: five.
    for i in 0..=5 {
        let v = ymax * f64::from(i) / 5.0;
        let y = sy(v);
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            y + 4.0,
            if ymax < 10.0 {
                format!("{v:.2}")
            } else {
                format!("{v:.0}")
            }
        );
    }
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        H - 12.0,
        esc(x_label)
    );
    let _ = writeln!(
        o,
        r#"<text x="16" y="{y}" text-anchor="middle" transform="rotate(-90 16 {y})">{}</text>"#,
        esc(y_label),
        y = TOP + ph / 2.0
    );
    for (x, label) in marks.iter().filter(|(x, _)| x.is_finite() && *x >= 1.0) {
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#d62728" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#d62728">{}</text>"##,
            TOP + ph,
            sx(*x) - 4.0,
            TOP + 14.0,
            esc(label),
            x = sx(*x),
        );
    }
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut p: Vec<(f64, f64)> = s.points.clone();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        let coords: Vec<String> = p
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let _ = writeln!(
            o,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            coords.join(" ")
        );
        for &(x, y) in &p {
            let _ = writeln!(
                o,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                sx(x),
                sy(y)
            );
        }
        let ly = TOP + 10.0 + i as f64 * 18.0;
        let lx = W - RIGHT + 12.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            esc(&s.name)
        );
    }
    o.push_str("</svg>\n");
    o
}

fn series(r: &Results, name: &str, f: &dyn Fn(&super::Step) -> f64) -> Vec<Series> {
    r.systems
        .iter()
        .filter(|s| !s.steps.is_empty())
        .map(|s| Series {
            name: format!("{} {name}", s.name),
            points: s.steps.iter().map(|st| (st.zones as f64, f(st))).collect(),
        })
        .collect()
}

/// `latency.svg`: clone and boot, median and p99, against N.
pub fn latency(r: &Results) -> String {
    let mut s = series(r, "clone median", &|s| s.clone_ms.median);
    s.extend(series(r, "clone p99", &|s| s.clone_ms.p99));
    s.extend(series(r, "boot median", &|s| s.boot_ms.median));
    s.extend(series(r, "boot p99", &|s| s.boot_ms.p99));
    chart("Clone and boot latency", "zones (N, log scale)", "ms", &s)
}

/// `memory.svg`: memory per zone against N.
pub fn memory(r: &Results) -> String {
    let mut s = series(r, "pinned", &|s| s.mem_per_zone.pinned_kib);
    s.extend(series(r, "MemAvailable", &|s| s.mem_per_zone.available_kib));
    chart(
        "Host memory per zone",
        "zones (N, log scale)",
        "KiB per zone",
        &s,
    )
}

/// `breakdown.svg`: warren's memory per zone by kind against N (the memstat rows), and
/// each compared system's total beside it.
pub fn breakdown(r: &Results) -> String {
    let mut s = Vec::new();
    if let Some(w) = r.systems.first().filter(|w| !w.steps.is_empty()) {
        for (name, f) in super::breakdown::ROWS
            .iter()
            .filter(|(name, _)| !name.starts_with("  "))
        {
            s.push(Series {
                name: format!("{} {name}", w.name),
                points: w
                    .steps
                    .iter()
                    .map(|st| (st.zones as f64, f(&st.memory.per_zone)))
                    .collect(),
            });
        }
    }
    for other in r.systems.iter().skip(1).filter(|o| !o.steps.is_empty()) {
        s.push(Series {
            name: format!("{} total", other.name),
            points: other
                .steps
                .iter()
                .map(|st| (st.zones as f64, st.memory.per_zone.total_kib))
                .collect(),
        });
    }
    let title = format!(
        "Memory per zone by kind ({}, {} CPUs, {})",
        r.machine.hostname,
        r.machine.cpus,
        r.date.get(..10).unwrap_or(&r.date)
    );
    chart(&title, "zones (N, log scale)", "KiB per zone", &s)
}

/// `kinds.svg`: warren's memory by kind for all zones of a step (MiB) against N, the
/// memstat rows, with the host's free memory at each sample.
pub fn kinds(r: &Results) -> String {
    let mut s = Vec::new();
    if let Some(w) = r.systems.first().filter(|w| !w.steps.is_empty()) {
        let mib = |kib: f64| kib / 1024.0;
        for (name, f) in super::breakdown::ROWS
            .iter()
            .filter(|(name, _)| !name.starts_with("  "))
        {
            s.push(Series {
                name: name.to_string(),
                points: w
                    .steps
                    .iter()
                    .map(|st| (st.zones as f64, mib(f(&st.memory.all))))
                    .collect(),
            });
        }
        s.push(Series {
            name: "free (host)".into(),
            points: w
                .steps
                .iter()
                .map(|st| (st.zones as f64, mib(st.memory.host_free_kib)))
                .collect(),
        });
    }
    let title = format!(
        "warren: memory by kind, all zones ({}, {})",
        r.machine.hostname,
        r.date.get(..10).unwrap_or(&r.date)
    );
    chart(&title, "zones (N, log scale)", "MiB", &s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_is_balanced_and_has_lines() {
        let s = vec![
            Series {
                name: "a <b>".into(),
                points: vec![(1.0, 2.0), (100.0, 3.0), (10.0, 1.0)],
            },
            Series {
                name: "flat".into(),
                points: vec![(1.0, 0.0)],
            },
        ];
        let svg = chart("t & t", "x", "y", &s);
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt;b&gt;") && svg.contains("t &amp; t"));
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        assert!(svg.trim_end().ends_with("</svg>"));
        // The empty chart still renders.
        assert!(chart("e", "x", "y", &[]).contains("</svg>"));
    }
}
