//! A [`Snapshot`] as OpenMetrics text, pure. Each family is described once (`# HELP`,
//! `# TYPE`, `# UNIT`) by the `prometheus-client` encoder, which also adds the unit and
//! `_total` suffixes, escapes label values and ends the text with `# EOF`. A family
//! with no sample (no zone booted, no agent action yet) is left out.

use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use super::{verdict_label, Snapshot, ZoneRow, STATES, VERDICTS};

/// A sample's value.
#[derive(Debug, Clone, Copy)]
enum V {
    U(u64),
    F(f64),
}

type Labels = Vec<(&'static str, String)>;

/// One family's samples, built before it is written.
struct Family {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
    counter: bool,
    samples: Vec<(Labels, V)>,
}

impl Family {
    fn gauge(name: &'static str, unit: Option<Unit>, help: &'static str) -> Family {
        Family {
            name,
            help,
            unit,
            counter: false,
            samples: Vec::new(),
        }
    }

    fn counter(name: &'static str, unit: Option<Unit>, help: &'static str) -> Family {
        Family {
            counter: true,
            ..Family::gauge(name, unit, help)
        }
    }

    fn push(&mut self, labels: Labels, v: Option<V>) {
        if let Some(v) = v {
            self.samples.push((labels, v));
        }
    }

    fn write(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        if self.samples.is_empty() {
            return Ok(());
        }
        let ty = if self.counter {
            MetricType::Counter
        } else {
            MetricType::Gauge
        };
        let mut m = enc.encode_descriptor(self.name, self.help, self.unit.as_ref(), ty)?;
        for (labels, v) in &self.samples {
            let mut e = m.encode_family(labels)?;
            value(&mut e, self.counter, *v)?;
        }
        Ok(())
    }
}

fn value(e: &mut MetricEncoder, counter: bool, v: V) -> std::fmt::Result {
    match (counter, v) {
        (true, V::U(n)) => e.encode_counter::<NoLabelSet, _, u64>(&n, None),
        (true, V::F(x)) => e.encode_counter::<NoLabelSet, _, f64>(&x, None),
        (false, V::U(n)) => e.encode_gauge(&n),
        (false, V::F(x)) => e.encode_gauge(&x),
    }
}

fn zone(z: &ZoneRow) -> Labels {
    vec![("zone", z.name.clone())]
}

fn with(z: &ZoneRow, key: &'static str, value: &str) -> Labels {
    vec![("zone", z.name.clone()), (key, value.to_string())]
}

fn u(v: Option<u64>) -> Option<V> {
    v.map(V::U)
}

fn f(v: Option<f64>) -> Option<V> {
    v.map(V::F)
}

fn name_of<T: serde::Serialize>(t: &T) -> String {
    serde_json::to_value(t)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The zone families.
fn zone_families(zones: &[ZoneRow]) -> Vec<Family> {
    use Unit::{Bytes, Seconds};
    let mut info = Family::gauge(
        "zone_info",
        None,
        "A zone (or OCI container) and its settings; always 1.",
    );
    let mut state = Family::gauge(
        "zone_state",
        None,
        "1 for the zone's state now, 0 for the others.",
    );
    let mut boot = Family::gauge(
        "zone_boot_time",
        Some(Seconds),
        "When the zone booted (Unix time).",
    );
    let mut cpu = Family::counter(
        "zone_cpu",
        Some(Seconds),
        "CPU time the zone used since boot.",
    );
    let mut mem = Family::gauge("zone_memory", Some(Bytes), "Memory charged to the zone by kind: anon, file (page cache, shmem included), kernel, swap.");
    let mut charged = Family::gauge(
        "zone_memory_charged",
        Some(Bytes),
        "Everything charged to the zone's memory cgroup (v1 usage_in_bytes, v2 memory.current).",
    );
    let mut limit = Family::gauge(
        "zone_memory_limit",
        Some(Bytes),
        "The memory limit in force in the zone's cgroup (absent: unlimited).",
    );
    let mut request = Family::gauge(
        "zone_memory_request",
        Some(Bytes),
        "memory.request of the zone's config: its guarantee.",
    );
    let mut procs = Family::gauge(
        "zone_processes",
        None,
        "Processes in the zone (cgroup.procs).",
    );
    let mut pids = Family::gauge(
        "zone_pids",
        None,
        "Tasks (processes and threads) in the zone (pids.current).",
    );
    let mut pids_limit = Family::gauge(
        "zone_pids_limit",
        None,
        "The zone's cap on tasks (pids.max; absent: no cap).",
    );
    let mut oom = Family::counter(
        "zone_oom_kills",
        None,
        "Processes the kernel's OOM killer killed in the zone since boot.",
    );
    let mut disk = Family::gauge(
        "zone_disk",
        Some(Bytes),
        "Disk allocated to the zone's private layer (or its disk.max image).",
    );
    let mut disk_limit = Family::gauge(
        "zone_disk_limit",
        Some(Bytes),
        "disk.max of the zone's config.",
    );
    let mut rx = Family::counter(
        "zone_network_receive",
        Some(Bytes),
        "Bytes a bridged zone received on its veth since boot.",
    );
    let mut tx = Family::counter(
        "zone_network_transmit",
        Some(Bytes),
        "Bytes a bridged zone sent on its veth since boot.",
    );
    let mut psi = Family::gauge(
        "zone_memory_pressure_avg10_ratio",
        None,
        "Share of the last 10 s some (or all) of the zone's tasks stalled on memory (cgroup v2 memory.pressure).",
    );
    for z in zones {
        let mut l = vec![("zone", z.name.clone()), ("kind", z.kind.to_string())];
        l.extend(z.template.clone().map(|t| ("template", t)));
        l.extend(z.net.map(|n| ("net", n.as_str().to_string())));
        l.extend(z.priority.map(|p| ("priority", name_of(&p))));
        info.push(l, Some(V::U(1)));
        for s in STATES {
            let on = u64::from(s == z.state);
            state.push(with(z, "state", &s.to_string()), Some(V::U(on)));
        }
        boot.push(zone(z), f(z.boot_time_s));
        cpu.push(zone(z), f(z.cpu_seconds));
        let m = &z.memory;
        for (kind, v) in [
            ("anon", m.anon_bytes),
            ("file", m.file_bytes),
            ("kernel", m.kernel_bytes),
            ("swap", m.swap_bytes),
        ] {
            mem.push(with(z, "kind", kind), u(v));
        }
        charged.push(zone(z), u(m.charged_bytes));
        limit.push(zone(z), u(z.memory_limit));
        request.push(zone(z), u(z.memory_request));
        procs.push(zone(z), u(z.processes));
        pids.push(zone(z), u(z.tasks));
        pids_limit.push(zone(z), u(z.tasks_limit));
        oom.push(zone(z), u(z.oom_kills));
        disk.push(zone(z), u(z.disk_bytes));
        disk_limit.push(zone(z), u(z.disk_limit));
        rx.push(zone(z), u(z.net_bytes.map(|b| b.0)));
        tx.push(zone(z), u(z.net_bytes.map(|b| b.1)));
        if let Some(p) = z.memory_pressure {
            psi.push(with(z, "kind", "some"), Some(V::F(p.some_avg10 / 100.0)));
            psi.push(with(z, "kind", "full"), Some(V::F(p.full_avg10 / 100.0)));
        }
    }
    vec![
        info, state, boot, cpu, mem, charged, limit, request, procs, pids, pids_limit, oom, disk,
        disk_limit, rx, tx, psi,
    ]
}

/// The host, agent and doctor families.
fn host_families(s: &Snapshot) -> Vec<Family> {
    use Unit::{Bytes, Seconds};
    let mut total = Family::gauge(
        "host_memory_total",
        Some(Bytes),
        "The host's memory (MemTotal).",
    );
    let mut mem = Family::gauge(
        "host_memory",
        Some(Bytes),
        "The host's memory by kind, as warren memstat shows it; the kinds add up to the total.",
    );
    let mut kernel = Family::gauge(
        "host_memory_kernel",
        Some(Bytes),
        "The kernel row of warren memstat by part; the parts add up to host memory of kind kernel.",
    );
    let mut avail = Family::gauge(
        "host_memory_available",
        Some(Bytes),
        "MemAvailable: what can be had without swapping.",
    );
    let mut swap_total = Family::gauge("host_swap_total", Some(Bytes), "Swap the host has.");
    let mut swap_free = Family::gauge("host_swap_free", Some(Bytes), "Swap not in use.");
    let mut psi = Family::gauge(
        "host_memory_pressure_avg10_ratio",
        None,
        "Share of the last 10 s some (or all) tasks stalled on memory (/proc/pressure/memory).",
    );
    let mut pages = Family::counter(
        "host_swap_pages",
        None,
        "Pages swapped in or out since boot (/proc/vmstat pswpin, pswpout).",
    );
    if let Some(h) = &s.host {
        total.push(vec![], Some(V::U(h.total_bytes)));
        for (kind, v) in [
            ("kernel", h.kernel.total_bytes),
            ("anon", h.anon_bytes),
            ("page_cache", h.page_cache_bytes),
            ("buffers", h.buffers_bytes),
            ("shmem", h.shmem_bytes),
            ("swap_cached", h.swap_cached_bytes),
            ("hugetlb", h.hugetlb_bytes),
            ("free", h.free_bytes),
        ] {
            mem.push(vec![("kind", kind.into())], Some(V::U(v)));
        }
        let k = &h.kernel;
        for (part, v) in [
            ("slab_reclaimable", k.slab_reclaimable_bytes),
            ("slab_unreclaimable", k.slab_unreclaimable_bytes),
            ("kernel_stack", k.kernel_stack_bytes),
            ("page_tables", k.page_tables_bytes),
            ("other", k.other_bytes),
        ] {
            kernel.push(vec![("kind", part.into())], Some(V::U(v)));
        }
    }
    avail.push(vec![], u(s.host_available));
    swap_total.push(vec![], u(s.swap.map(|w| w.0)));
    swap_free.push(vec![], u(s.swap.map(|w| w.1)));
    if let Some(p) = s.host_pressure {
        psi.push(
            vec![("kind", "some".into())],
            Some(V::F(p.some_avg10 / 100.0)),
        );
        psi.push(
            vec![("kind", "full".into())],
            Some(V::F(p.full_avg10 / 100.0)),
        );
    }
    let a = &s.agent;
    pages.push(vec![("direction", "in".into())], Some(V::U(a.swap_pages.0)));
    pages.push(
        vec![("direction", "out".into())],
        Some(V::U(a.swap_pages.1)),
    );
    let mut signal = Family::gauge("agent_signal", None, "The overcommit agent's pressure signals now, in its own units (available and swap-used in %, swap-in and swap-out in pages/s, psi-full in %).");
    let mut trigger = Family::gauge(
        "agent_signal_trigger",
        None,
        "The level past which a signal makes the agent act (after its grace period).",
    );
    let mut actions = Family::counter(
        "agent_actions",
        None,
        "The agent's evictions and restarts in the journal, by outcome (done or failed).",
    );
    let mut last = Family::gauge(
        "agent_last_action_time",
        Some(Seconds),
        "When the agent last took each action (Unix time).",
    );
    for (name, v, t) in &a.signals {
        signal.push(vec![("signal", name.clone())], f(*v));
        trigger.push(vec![("signal", name.clone())], Some(V::F(*t)));
    }
    for (action, outcome, n) in &a.actions {
        let l = vec![("action", action.clone()), ("outcome", outcome.clone())];
        actions.push(l, Some(V::U(*n)));
    }
    for (action, t) in &a.last_action_s {
        last.push(vec![("action", action.clone())], Some(V::F(*t)));
    }
    let mut check = Family::gauge("doctor_check", None, "1 for each doctor check's verdict now, 0 for the others (checks judged against warren_doctor_plan_zones).");
    let mut plan = Family::gauge(
        "doctor_plan_zones",
        None,
        "The density the doctor's verdicts are judged against.",
    );
    if let Some(d) = &s.doctor {
        plan.push(vec![], Some(V::U(d.plan_zones)));
        let mut seen = std::collections::HashSet::new();
        // One series per check: a name given twice would be a duplicate series, which
        // Prometheus refuses along with the whole scrape (the first one is kept).
        for finding in d.findings.iter().filter(|f| seen.insert(f.limit.as_str())) {
            for v in VERDICTS {
                let l = vec![
                    ("check", finding.limit.clone()),
                    ("verdict", verdict_label(v).into()),
                ];
                check.push(l, Some(V::U(u64::from(v == finding.verdict))));
            }
        }
    }
    let mut age = Family::gauge(
        "doctor_age",
        Some(Seconds),
        "How old the doctor's verdicts shown are (the daemon runs the doctor in a child every minute; an age far past that means its runs fail: see the daemon's log).",
    );
    age.push(vec![], f(s.doctor_age_seconds));
    let mut took = Family::gauge(
        "metrics_collect_duration",
        Some(Seconds),
        "How long collecting this scrape took.",
    );
    took.push(vec![], Some(V::F(s.collect_seconds)));
    vec![
        total, mem, kernel, avail, swap_total, swap_free, psi, pages, signal, trigger, actions,
        last, check, plan, age, took,
    ]
}

/// Every family of a snapshot, as the crate's collector interface wants them.
#[derive(Debug)]
struct Collected(Snapshot);

impl prometheus_client::collector::Collector for Collected {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        for fam in zone_families(&self.0.zones)
            .iter()
            .chain(host_families(&self.0).iter())
        {
            fam.write(&mut enc)?;
        }
        Ok(())
    }
}

/// `s` as OpenMetrics text ([`super::CONTENT_TYPE`]), ending in `# EOF`.
pub fn encode(s: &Snapshot) -> String {
    let mut registry = Registry::with_prefix("warren");
    registry.register_collector(Box::new(Collected(s.clone())));
    let mut out = String::with_capacity(512 + s.zones.len() * 2048);
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String does not fail");
    out
}

/// The two text formats Prometheus reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// OpenMetrics 1.0 ([`super::CONTENT_TYPE`]): what Prometheus asks for first.
    #[default]
    OpenMetrics,
    /// The older Prometheus text format 0.0.4 ([`PROMETHEUS_CONTENT_TYPE`]), which
    /// node_exporter's textfile collector reads.
    Prometheus,
}

/// The HTTP `Content-Type` of [`Format::Prometheus`].
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => super::CONTENT_TYPE,
            Format::Prometheus => PROMETHEUS_CONTENT_TYPE,
        }
    }
}

/// `s` in `format`.
pub fn encode_as(s: &Snapshot, format: Format) -> String {
    let text = encode(s);
    match format {
        Format::OpenMetrics => text,
        Format::Prometheus => to_prometheus(&text),
    }
}

/// OpenMetrics text as the Prometheus 0.0.4 text format: the same samples; a counter's
/// family is named as its samples are (`_total`), as that format wants; no `# UNIT`
/// and no `# EOF` lines.
pub fn to_prometheus(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| Some((p, line.strip_prefix(p)?)));
        match meta {
            Some((p, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(p);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
