//! Prometheus metrics: `warren metrics` (and the daemon's `/metrics`) as the OpenMetrics
//! text exposition of what warren's readers already know.
//!
//! # Shape
//!
//! Three steps, kept apart so the encoding is tested without a kernel:
//!
//! 1. [`collect`] reads the state root and the kernel into a [`Snapshot`]: plain data,
//!    one row per zone ([`ZoneRow`]), the host's memstat rows, the agent's signals and
//!    counted actions, the doctor's verdicts. Every figure comes from an existing
//!    reader (`stat::readers`, `stat::memstat`, `agent::sample`, `agent::act`,
//!    `doctor`, `oci::view`); a figure the kernel does not give is absent, never 0.
//! 2. [`encode()`] turns a snapshot into text with the `prometheus-client` crate's
//!    OpenMetrics encoder (a `Collector` that describes each family once per scrape):
//!    escaping, `_total` and unit suffixes, `# UNIT` and `# EOF` are the crate's, not
//!    hand-written. Pure.
//! 3. [`Scraper`] keeps what one scrape can reuse from the previous one: disk figures
//!    (a tree walk, refreshed every [`stat::DISK_REFRESH`]), the doctor's verdicts
//!    (refreshed every [`DOCTOR_REFRESH`]: one of its checks makes a throwaway user
//!    namespace) and the agent's swap rates (two samples make a rate). `warren
//!    metrics` makes one and scrapes once; a daemon keeps one and scrapes it at each
//!    request ([`render`] is the one-shot form).
//!
//! # Cost
//!
//! One scrape is one pass over the zones: for each, its three small state files (no
//! lock is taken: this is a reading verb, as `warren list`) and about ten cgroup
//! files; no process is spawned per zone and nothing is walked but a zone's private
//! layer (cached); a zone's processes are counted in one `cgroup.procs` (the pids
//! controller's), never one per v1 hierarchy. SPEC.md, "Metrics scrape", has the
//! measured cost for 10 to 1,000 zones (`warren bench metrics`, `--daemon` for the
//! daemon's own `/metrics` and RSS).
//!
//! # Names
//!
//! Prometheus conventions: the `warren_` prefix, base units (seconds, bytes) in the
//! name, `_total` on counters, a gauge per state for enumerations (1 for the current
//! one, 0 for the others, as kube-state-metrics does), labels `zone`, `kind`,
//! `template`, `state`. docs/metrics.md lists every family with its type, labels and
//! source.

mod collect;
pub mod encode;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use collect::{collect, doctor_row};
pub use encode::{encode, encode_as, Format};

use crate::agent::AgentConfig;
use crate::config::{NetMode, Priority};
use crate::doctor::{Finding, Verdict};
use crate::error::Result;
use crate::stat::memstat::HostMemory;
use crate::stat::{Pressure, ZoneMemory};
use crate::state::ZoneState;
use crate::zone::{Context, Kind};

/// The HTTP `Content-Type` of [`encode()`]'s output (OpenMetrics 1.0 text, which
/// Prometheus scrapes natively; its older text format parsers read it too).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long a [`Scraper`] reuses the doctor's verdicts. Host limits change when an
/// operator changes them, not between two scrapes; one check makes a user namespace.
pub const DOCTOR_REFRESH: Duration = Duration::from_secs(60);

/// What to collect besides the zones.
#[derive(Debug, Clone)]
pub struct Options {
    /// Also the containers of this OCI state root (kind `oci`).
    pub oci_root: Option<PathBuf>,
    /// The agent's config: what it watches (host or a cgroup budget) and its triggers.
    pub agent: AgentConfig,
    /// The density the doctor's verdicts are judged against (`warren doctor --zones`).
    pub doctor_zones: u64,
    /// Run the doctor's checks in this process (they are the slowest part of a cold
    /// scrape, and one forks). Off, a scrape shows the verdicts given to
    /// [`Scraper::supply_doctor`], if any.
    pub doctor: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            oci_root: None,
            agent: AgentConfig::defaults(),
            doctor_zones: 1000,
            doctor: true,
        }
    }
}

/// One zone (or OCI container) as the metrics show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneRow {
    pub name: String,
    pub kind: Kind,
    /// The template it was made from (none for an OCI container).
    pub template: Option<String>,
    pub state: ZoneState,
    pub net: Option<NetMode>,
    pub priority: Option<Priority>,
    /// Unix time of the boot, in seconds (while booted).
    pub boot_time_s: Option<f64>,
    pub cpu_seconds: Option<f64>,
    pub memory: ZoneMemory,
    /// The memory limit in force in its cgroup (`None`: unlimited or not booted).
    pub memory_limit: Option<u64>,
    /// `memory.request` of its config (the agent's guarantee, the kernel's memory.low
    /// or soft limit).
    pub memory_request: Option<u64>,
    pub processes: Option<u64>,
    /// pids.current: processes and threads.
    pub tasks: Option<u64>,
    pub tasks_limit: Option<u64>,
    pub oom_kills: Option<u64>,
    pub disk_bytes: Option<u64>,
    /// `disk.max` of its config.
    pub disk_limit: Option<u64>,
    /// (received, sent) bytes on its veth, for bridged zones while booted.
    pub net_bytes: Option<(u64, u64)>,
    /// Its own memory PSI (cgroup v2 `memory.pressure`; v1 has none per cgroup).
    pub memory_pressure: Option<Pressure>,
}

/// The agent's view now: its signals as it would compute them, its triggers, and what
/// the journal says it did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentRow {
    /// (signal name, value, trigger) in the agent's order; the value is absent where
    /// it cannot be measured (no swap, no PSI, a rate before two scrapes).
    pub signals: Vec<(String, Option<f64>, f64)>,
    /// Pages swapped in and out since boot (/proc/vmstat).
    pub swap_pages: (u64, u64),
    /// (action, outcome) → count, from the journal's agent events.
    pub actions: Vec<(String, String, u64)>,
    /// (action, Unix time in seconds) of the last of each action.
    pub last_action_s: Vec<(String, f64)>,
}

/// The doctor's verdicts against a planned density. Its JSON form is what
/// `warren metrics --doctor-row` prints for a daemon (which must not fork the
/// doctor's user-namespace check itself) to hand to [`Scraper::supply_doctor`].
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct DoctorRow {
    pub plan_zones: u64,
    pub findings: Vec<Finding>,
}

/// Everything one scrape shows. Plain data: [`encode()`] is a pure function of it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    pub zones: Vec<ZoneRow>,
    pub host: Option<HostMemory>,
    pub host_available: Option<u64>,
    pub swap: Option<(u64, u64)>,
    pub host_pressure: Option<Pressure>,
    pub agent: AgentRow,
    pub doctor: Option<DoctorRow>,
    /// How old the doctor's verdicts are, in seconds (0 when this scrape ran it).
    pub doctor_age_seconds: Option<f64>,
    /// How long collecting took.
    pub collect_seconds: f64,
}

/// A doctor verdict's label value.
pub fn verdict_label(v: Verdict) -> &'static str {
    match v {
        Verdict::Ok => "ok",
        Verdict::Tight => "tight",
        Verdict::WillFail => "will_fail",
        Verdict::Unknown => "unknown",
        Verdict::Weakens => "weakens_isolation",
        Verdict::Warning => "warning",
    }
}

/// Every verdict, for the gauge-per-verdict families.
pub const VERDICTS: [Verdict; 6] = [
    Verdict::Ok,
    Verdict::Tight,
    Verdict::WillFail,
    Verdict::Unknown,
    Verdict::Weakens,
    Verdict::Warning,
];

/// Every zone state, for the gauge-per-state family.
pub const STATES: [ZoneState; 6] = [
    ZoneState::Configured,
    ZoneState::Incomplete,
    ZoneState::Installed,
    ZoneState::Ready,
    ZoneState::Running,
    ZoneState::ShuttingDown,
];

/// Collects scrapes, keeping what the next one can reuse (see the module doc). It is
/// `Send` (a daemon keeps one behind a mutex); the [`Context`] it is given is not, so
/// a daemon makes one where the scrape runs (a blocking thread).
pub struct Scraper {
    opts: Options,
    disk: HashMap<PathBuf, (Instant, u64)>,
    doctor: Option<(Instant, DoctorRow)>,
    rates: crate::agent::sample::Rates,
}

impl Scraper {
    pub fn new(opts: Options) -> Scraper {
        let window = opts.agent.window_ms();
        Scraper {
            opts,
            disk: HashMap::new(),
            doctor: None,
            rates: crate::agent::sample::Rates::new(window),
        }
    }

    /// Verdicts the doctor gave elsewhere, at `at` (a daemon runs the doctor in a
    /// child process: [`Options::doctor`] is off there). Scrapes show the latest
    /// supplied row and its age until another is supplied.
    pub fn supply_doctor(&mut self, row: DoctorRow, at: Instant) {
        self.doctor = Some((at, row));
    }

    /// One scrape's text in `format`.
    pub fn render(&mut self, ctx: &Context, format: Format) -> Result<String> {
        Ok(encode_as(&collect(ctx, self)?, format))
    }
}

/// One scrape with a fresh [`Scraper`]: `warren metrics`.
pub fn render(ctx: &Context, opts: Options, format: Format) -> Result<String> {
    Scraper::new(opts).render(ctx, format)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_scraper_can_be_kept_across_threads() {
        fn send<T: Send>() {}
        send::<super::Scraper>();
    }
}
