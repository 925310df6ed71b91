//! What zones cost: `warren stat` (prstat -Z / zonestat) and `warren memstat` (mdb's
//! ::memstat).
//!
//! # Where each figure comes from
//!
//! A zone is its cgroups, so almost everything is read from the files of the zone's
//! [`CgroupSet`] recorded at boot; nothing is derived by walking /proc unless asked.
//!
//! - **CPU %** is the growth of the zone's CPU time (v1 `cpuacct.usage`, v2 `cpu.stat
//!   usage_usec`) over a wall-clock window, in percent of *one* CPU: a zone spinning on
//!   both CPUs of a 2-CPU host shows 200 %. Without `--interval` the window is
//!   [`SNAPSHOT_WINDOW`] (0.5 s): two samples, with every other file read in between so
//!   the wait costs nothing extra. With `--interval S` each report covers the S seconds
//!   since the previous one (the first waits S). CPU % "since boot" was rejected as the
//!   default: a zone busy an hour ago and idle now would look busy.
//! - **Memory** is what the zone's memory cgroup is charged: anon (v1 `total_rss`, v2
//!   `anon`), page cache (`total_cache` / `file`, shmem included), kernel (v1
//!   `memory.kmem.usage_in_bytes`, v2 `kernel` or its parts on kernels before 5.18) and
//!   swap (v1 `total_swap`, present only with swap accounting; v2 `memory.swap.current`).
//!   Page cache is charged to the cgroup that first touched the page, so cache of the
//!   shared template (/usr) lands on whichever zone read it first.
//! - **PSS / USS** (`--pss`) is summed from `/proc/<pid>/smaps_rollup` over the zone's
//!   processes: PSS divides each shared page among the processes mapping it (so two zones
//!   running the same host binary each carry half of its text); USS is Private_Clean +
//!   Private_Dirty, what would be freed if the zone went away. It is opt-in because the
//!   kernel walks every page table of every process to answer.
//! - **Processes** are the lines of `cgroup.procs`; **tasks** are `pids.current`
//!   (processes and threads), capped by `pids.max` (warren writes `max-processes` or
//!   `max-threads` there).
//! - **Memory pressure** is PSI "avg10" (percent of the last 10 s stalled on memory):
//!   per zone from v2 `memory.pressure`; cgroup v1 has no per-cgroup PSI, so v1 zones
//!   carry the host's /proc/pressure/memory marked `"scope": "host"`.
//! - **Disk** is the allocated size of the zone's private layer (the overlay upper dir,
//!   or the btrfs / copy root), a tree walk. It is cheap for overlay and btrfs clones
//!   (a few inodes) and costly only for the copy backend; the live view re-walks a tree
//!   at most every [`DISK_REFRESH`].
//! - **`[system]`** is what no zone accounts for: host memory in use (MemTotal −
//!   MemFree, page cache included, as the zones' charge includes theirs) minus the sum
//!   of the zones' charge, and host CPU minus the zones' CPU.
//!
//! A figure the kernel does not provide here is absent (`null` in JSON, `-` in tables),
//! never a zero. The JSON schema is documented, with its version, in docs/stat-schema.md.

mod collect;
pub mod ksm;
pub mod memstat;
pub mod readers;
pub mod render;

use std::time::Duration;

use serde::Serialize;

pub(crate) use collect::private_dir;
pub use collect::Sampler;
pub use readers::{Pressure, Smaps, ZoneMemory};

use crate::cgroups::CgroupVersion;
use crate::state::ZoneState;

/// Version of the `warren stat --json` and `warren memstat --json` objects. Adding a
/// field keeps it; renaming, removing or retyping one bumps it.
pub const SCHEMA_VERSION: u32 = 1;

/// The CPU sampling window of a one-shot `warren stat`.
pub const SNAPSHOT_WINDOW: Duration = Duration::from_millis(500);

/// How long the live view reuses a zone's disk figure before walking its tree again.
pub const DISK_REFRESH: Duration = Duration::from_secs(30);

/// How to order the zones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    /// CPU %, highest first.
    #[default]
    Cpu,
    /// Memory charged to the zone, highest first.
    Mem,
    /// Processes, most first.
    Procs,
}

impl SortKey {
    /// The names `--sort` takes.
    pub const NAMES: [&'static str; 3] = ["cpu", "mem", "procs"];
}

impl std::str::FromStr for SortKey {
    type Err = String;
    fn from_str(s: &str) -> Result<SortKey, String> {
        match s {
            "cpu" => Ok(SortKey::Cpu),
            "mem" => Ok(SortKey::Mem),
            "procs" => Ok(SortKey::Procs),
            _ => Err(format!("sort key {s:?}: expected cpu, mem or procs")),
        }
    }
}

/// What `warren stat` was asked for.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Zones to show; empty: every booted zone.
    pub zones: Vec<String>,
    pub sort: SortKey,
    /// Read smaps_rollup of every zone process (slow).
    pub pss: bool,
    /// Also show the live containers under this OCI state root (kind `oci`).
    pub oci_root: Option<std::path::PathBuf>,
}

/// One `warren stat` report: the API object of `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct StatReport {
    pub schema_version: u32,
    /// Unix time of the report, in milliseconds.
    pub time_ms: u64,
    /// The host's cgroup version as warren uses it (`null` if none is usable).
    pub cgroup_version: Option<CgroupVersion>,
    /// The window CPU % was measured over, in seconds.
    pub cpu_window_s: f64,
    /// Whether PSS/USS were read (`--pss`).
    pub pss: bool,
    pub host: HostStat,
    pub zones: Vec<ZoneStat>,
    pub system: SystemStat,
}

/// The host's totals.
#[derive(Debug, Clone, Serialize)]
pub struct HostStat {
    pub cpus: usize,
    /// Busy CPU over the window, in percent of one CPU (at most 100 × cpus).
    pub cpu_pct: Option<f64>,
    pub mem_total_bytes: Option<u64>,
    pub mem_free_bytes: Option<u64>,
    pub mem_available_bytes: Option<u64>,
    pub swap_total_bytes: Option<u64>,
    pub swap_free_bytes: Option<u64>,
    /// /proc/pressure/memory.
    pub memory_pressure: Option<Pressure>,
}

/// Where a pressure figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The zone's own cgroup.
    Zone,
    /// The whole host (cgroup v1 has no per-cgroup PSI).
    Host,
}

/// A pressure figure and its scope.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ScopedPressure {
    pub scope: Scope,
    pub some_avg10: f64,
    pub full_avg10: f64,
}

/// One zone's row.
#[derive(Debug, Clone, Serialize)]
pub struct ZoneStat {
    pub name: String,
    /// `zone`, or `oci` for a container of the OCI runtime (its state is the zone
    /// state its status corresponds to, [`crate::oci::view::zone_state`]).
    pub kind: crate::zone::Kind,
    pub state: ZoneState,
    pub uptime_s: Option<u64>,
    /// CPU over the window, in percent of one CPU.
    pub cpu_pct: Option<f64>,
    /// CPU time since boot, in seconds.
    pub cpu_total_s: Option<f64>,
    pub memory: ZoneMemory,
    /// smaps_rollup totals (only with `--pss`).
    pub pss: Option<Smaps>,
    pub processes: Option<u64>,
    pub tasks: Option<u64>,
    /// pids.max (`null`: no cap).
    pub pids_max: Option<u64>,
    /// The zone's config `max-processes` / `max-threads`.
    pub max_processes: Option<u64>,
    pub max_threads: Option<u64>,
    pub memory_pressure: Option<ScopedPressure>,
    /// Allocated bytes of the zone's private layer.
    pub disk_bytes: Option<u64>,
    /// A zone with `memory.merge = true`: what KSM saves it (`null` otherwise).
    pub ksm: Option<ksm::Ksm>,
}

/// What no zone accounts for.
#[derive(Debug, Clone, Serialize)]
pub struct SystemStat {
    /// Host CPU % minus the zones' (at least 0).
    pub cpu_pct: Option<f64>,
    /// Host memory in use (MemTotal − MemFree) minus the zones' charge (at least 0).
    pub memory_bytes: Option<u64>,
}

/// Order `zones` by `key`, highest first, absent figures last, then by name.
pub fn sort(zones: &mut [ZoneStat], key: SortKey) {
    zones.sort_by(|a, b| {
        let by = match key {
            SortKey::Cpu => {
                let v = |z: &ZoneStat| z.cpu_pct.unwrap_or(-1.0);
                v(b).total_cmp(&v(a))
            }
            SortKey::Mem => b.memory.charged_bytes.cmp(&a.memory.charged_bytes),
            SortKey::Procs => b.processes.cmp(&a.processes),
        };
        by.then_with(|| a.name.cmp(&b.name))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(name: &str, cpu: Option<f64>, mem: Option<u64>, procs: Option<u64>) -> ZoneStat {
        ZoneStat {
            name: name.into(),
            kind: crate::zone::Kind::Zone,
            state: ZoneState::Running,
            uptime_s: None,
            cpu_pct: cpu,
            cpu_total_s: None,
            memory: ZoneMemory {
                charged_bytes: mem,
                ..Default::default()
            },
            pss: None,
            processes: procs,
            tasks: None,
            pids_max: None,
            max_processes: None,
            max_threads: None,
            memory_pressure: None,
            disk_bytes: None,
            ksm: None,
        }
    }

    fn names(z: &[ZoneStat]) -> Vec<&str> {
        z.iter().map(|z| z.name.as_str()).collect()
    }

    #[test]
    fn sorts_highest_first_absent_last_ties_by_name() {
        let mut z = vec![
            zone("a", Some(1.0), Some(10), Some(2)),
            zone("b", None, None, None),
            zone("c", Some(50.0), Some(5), Some(9)),
            zone("d", Some(1.0), Some(99), Some(2)),
        ];
        sort(&mut z, SortKey::Cpu);
        assert_eq!(names(&z), ["c", "a", "d", "b"]);
        sort(&mut z, SortKey::Mem);
        assert_eq!(names(&z), ["d", "a", "c", "b"]);
        sort(&mut z, SortKey::Procs);
        assert_eq!(names(&z), ["c", "a", "d", "b"]);
    }
}
