//! Gathering a [`StatReport`]: which zones, two CPU samples around a window, and every
//! other figure read once. The [`Sampler`] keeps what the live view reuses between
//! reports (the last CPU sample and the disk figures).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::readers::{self, Smaps};
use super::{
    HostStat, Options, Scope, ScopedPressure, StatReport, SystemStat, ZoneStat, DISK_REFRESH,
    SCHEMA_VERSION,
};
use crate::cgroups::CgroupSet;
use crate::config::Limits;
use crate::error::Result;
use crate::fsutil::disk_usage;
use crate::state::ZoneState;
use crate::zone::{self, Context, Kind};
use crate::{stats, storage};

/// A zone as `stat` needs it: loaded files plus its state now.
pub(crate) struct Target {
    pub name: String,
    pub kind: Kind,
    pub state: ZoneState,
    /// The zone config's limits (none for an OCI container).
    pub limits: Limits,
    /// The zone's cgroups while booted.
    pub cgroups: Option<CgroupSet>,
    pub booted_at_ms: Option<u64>,
    pub private_dir: Option<PathBuf>,
    /// `memory.merge`: its KSM figures are read.
    pub merge: bool,
}

impl Target {
    /// Identifies one boot of the zone: CPU counters restart at every boot.
    fn boot_key(&self) -> Option<(String, u64)> {
        Some((self.name.clone(), self.booted_at_ms?))
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn target(ctx: &Context, name: &str) -> Result<Target> {
    let z = zone::load(ctx, name)?;
    let state = z.state(ctx);
    let private_dir = private_dir(&z);
    let rt = z.runtime.filter(|_| state >= ZoneState::Ready);
    Ok(Target {
        name: z.name,
        kind: Kind::Zone,
        state,
        cgroups: rt.as_ref().map(|r| r.cgroups.clone()),
        booted_at_ms: rt.as_ref().map(|r| r.booted_at_ms),
        private_dir,
        limits: z.config.limits,
        merge: z.config.memory_merge,
    })
}

/// What a zone's disk figure measures: its private layer, or for a disk.max zone its
/// image (allocated blocks only: sparse). `None` before it is installed.
pub(crate) fn private_dir(z: &zone::Zone) -> Option<PathBuf> {
    crate::quota::image(&z.dir).or_else(|| {
        z.lifecycle
            .backend
            .map(|b| storage::backend(b).private_dir(&z.dir))
    })
}

/// The zones named (each must exist), or every booted zone. Zones whose files cannot be
/// read are left out of the "every" case (`warren list` says why).
pub(crate) fn targets(ctx: &Context, names: &[String]) -> Result<Vec<Target>> {
    if !names.is_empty() {
        return names.iter().map(|n| target(ctx, n)).collect();
    }
    Ok(zone::names_in(&ctx.layout)?
        .iter()
        .filter_map(|n| target(ctx, n).ok())
        .filter(|t| t.state >= ZoneState::Ready)
        .collect())
}

/// An OCI container as a target: its cgroups while its init lives, no disk figure
/// (its root belongs to whoever made the bundle) and no zone config.
fn oci_target(s: crate::oci::view::Seen) -> Target {
    let state = crate::oci::view::zone_state(s.status);
    let live = state >= ZoneState::Ready;
    Target {
        name: s.record.id,
        kind: Kind::Oci,
        state,
        limits: Limits::default(),
        cgroups: s.record.cgroups.filter(|_| live),
        booted_at_ms: s.uptime_s.map(|u| now_ms().saturating_sub(u * 1000)),
        private_dir: None,
        merge: false,
    }
}

/// [`targets`], then the OCI containers of `opts.oci_root`: every live one, or those
/// named that are not zones.
fn targets_with_oci(ctx: &Context, opts: &Options) -> Result<Vec<Target>> {
    let Some(root) = &opts.oci_root else {
        return targets(ctx, &opts.zones);
    };
    let mut oci: Vec<Target> = crate::oci::view::all(root, &ctx.host.proc)
        .into_iter()
        .map(oci_target)
        .collect();
    if opts.zones.is_empty() {
        let mut all = targets(ctx, &[])?;
        all.extend(oci.into_iter().filter(|t| t.state >= ZoneState::Ready));
        return Ok(all);
    }
    opts.zones
        .iter()
        .map(|n| match target(ctx, n) {
            Err(e) => match oci.iter().position(|t| &t.name == n) {
                Some(i) => Ok(oci.swap_remove(i)),
                None => Err(e),
            },
            ok => ok,
        })
        .collect()
}

/// CPU counters at one instant.
struct CpuSample {
    at: Instant,
    /// (busy, total) ticks from /proc/stat.
    host: Option<(u64, u64)>,
    zones: HashMap<(String, u64), u64>,
}

fn cpu_sample(ctx: &Context, targets: &[Target]) -> CpuSample {
    let zones = targets
        .iter()
        .filter_map(|t| Some((t.boot_key()?, readers::zone_cpu_ns(t.cgroups.as_ref()?)?)))
        .collect();
    CpuSample {
        at: Instant::now(),
        host: readers::host_cpu_ticks(&ctx.host.proc),
        zones,
    }
}

/// Collects reports; keeps the previous CPU sample and disk figures between them.
pub struct Sampler {
    opts: Options,
    prev: Option<CpuSample>,
    disk: HashMap<PathBuf, (Instant, u64)>,
}

impl Sampler {
    pub fn new(opts: Options) -> Sampler {
        Sampler {
            opts,
            prev: None,
            disk: HashMap::new(),
        }
    }

    /// One report with CPU % over `window`; every other file is read while the window
    /// runs, so the report takes about `window` (plus the reading, if that is longer).
    pub fn snapshot(&mut self, ctx: &Context, window: Duration) -> Result<StatReport> {
        let targets = targets_with_oci(ctx, &self.opts)?;
        let a = cpu_sample(ctx, &targets);
        let rows: Vec<ZoneStat> = targets.iter().map(|t| self.row(ctx, t)).collect();
        let host_mem = stats::meminfo(&ctx.host.proc);
        std::thread::sleep(window.saturating_sub(a.at.elapsed()));
        let b = cpu_sample(ctx, &targets);
        Ok(self.finish(ctx, &targets, rows, host_mem, &a, &b))
    }

    /// The next report of the live view: CPU % over the `interval` since the previous
    /// report (the first one waits `interval` too); other figures read at its end.
    pub fn tick(&mut self, ctx: &Context, interval: Duration) -> Result<StatReport> {
        let a = match self.prev.take() {
            Some(a) => a,
            None => cpu_sample(ctx, &targets_with_oci(ctx, &self.opts)?),
        };
        std::thread::sleep(interval.saturating_sub(a.at.elapsed()));
        let targets = targets_with_oci(ctx, &self.opts)?;
        let b = cpu_sample(ctx, &targets);
        let rows: Vec<ZoneStat> = targets.iter().map(|t| self.row(ctx, t)).collect();
        let host_mem = stats::meminfo(&ctx.host.proc);
        let report = self.finish(ctx, &targets, rows, host_mem, &a, &b);
        self.prev = Some(b);
        Ok(report)
    }

    fn disk_bytes(&mut self, dir: &PathBuf) -> Option<u64> {
        if let Some((at, bytes)) = self.disk.get(dir) {
            if at.elapsed() < DISK_REFRESH {
                return Some(*bytes);
            }
        }
        let bytes = disk_usage(dir).ok()?;
        self.disk.insert(dir.clone(), (Instant::now(), bytes));
        Some(bytes)
    }

    /// Everything but CPU % for one zone.
    fn row(&mut self, ctx: &Context, t: &Target) -> ZoneStat {
        let set = t.cgroups.as_ref();
        let (processes, tasks, pids_max) = set.map(readers::zone_pids).unwrap_or_default();
        let pss = match (self.opts.pss, set) {
            (true, Some(set)) => pss_of(ctx, set),
            _ => None,
        };
        let memory_pressure = set.and_then(|s| {
            let (scope, p) = match readers::zone_pressure(s) {
                Some(p) => (Scope::Zone, p),
                None => (Scope::Host, readers::host_pressure(&ctx.host.proc)?),
            };
            Some(ScopedPressure {
                scope,
                some_avg10: p.some_avg10,
                full_avg10: p.full_avg10,
            })
        });
        ZoneStat {
            name: t.name.clone(),
            kind: t.kind,
            state: t.state,
            uptime_s: t.booted_at_ms.map(|b| now_ms().saturating_sub(b) / 1000),
            cpu_pct: None,
            cpu_total_s: set.and_then(readers::zone_cpu_ns).map(|ns| ns as f64 / 1e9),
            memory: set.map(readers::zone_memory).unwrap_or_default(),
            pss,
            processes,
            tasks,
            pids_max,
            max_processes: t.limits.max_processes,
            max_threads: t.limits.max_threads,
            memory_pressure,
            disk_bytes: t.private_dir.as_ref().and_then(|d| self.disk_bytes(d)),
            ksm: match (t.merge, set) {
                (true, Some(set)) => set
                    .pids()
                    .ok()
                    .and_then(|p| super::ksm::of_pids(&ctx.host.proc, &p)),
                _ => None,
            },
        }
    }

    fn finish(
        &self,
        ctx: &Context,
        targets: &[Target],
        mut rows: Vec<ZoneStat>,
        mem: std::collections::BTreeMap<String, u64>,
        a: &CpuSample,
        b: &CpuSample,
    ) -> StatReport {
        let window = b.at.duration_since(a.at).as_secs_f64();
        for (row, t) in rows.iter_mut().zip(targets) {
            let Some(key) = t.boot_key() else { continue };
            if let (Some(x), Some(y)) = (a.zones.get(&key), b.zones.get(&key)) {
                row.cpu_pct = Some(pct(y.saturating_sub(*x) as f64 / 1e9, window));
            }
        }
        let cpus = stats::online_cpus(&ctx.host.sys).len();
        let host_cpu = match (a.host, b.host) {
            (Some((busy0, total0)), Some((busy1, total1))) if total1 > total0 => Some(
                (busy1.saturating_sub(busy0)) as f64 / (total1 - total0) as f64
                    * cpus as f64
                    * 100.0,
            ),
            _ => None,
        };
        let g = |k: &str| mem.get(k).copied();
        let zones_cpu: f64 = rows.iter().filter_map(|r| r.cpu_pct).sum();
        let zones_mem: u64 = rows.iter().filter_map(|r| r.memory.charged_bytes).sum();
        let used = g("MemTotal")
            .zip(g("MemFree"))
            .map(|(t, f)| t.saturating_sub(f));
        let version = ctx.cgroups().ok().map(|(_, h)| h.version);
        let host = HostStat {
            cpus,
            cpu_pct: host_cpu,
            mem_total_bytes: g("MemTotal"),
            mem_free_bytes: g("MemFree"),
            mem_available_bytes: g("MemAvailable"),
            swap_total_bytes: g("SwapTotal"),
            swap_free_bytes: g("SwapFree"),
            memory_pressure: readers::host_pressure(&ctx.host.proc),
        };
        super::sort(&mut rows, self.opts.sort);
        StatReport {
            schema_version: SCHEMA_VERSION,
            time_ms: now_ms(),
            cgroup_version: version,
            cpu_window_s: window,
            pss: self.opts.pss,
            host,
            zones: rows,
            system: SystemStat {
                cpu_pct: host_cpu.map(|h| (h - zones_cpu).max(0.0)),
                memory_bytes: used.map(|u| u.saturating_sub(zones_mem)),
            },
        }
    }
}

fn pct(cpu_s: f64, window_s: f64) -> f64 {
    if window_s <= 0.0 {
        return 0.0;
    }
    cpu_s / window_s * 100.0
}

/// smaps_rollup over the zone's processes; `None` if it has processes but none could be
/// read (not root), rather than a misleading zero.
pub(crate) fn pss_of(ctx: &Context, set: &CgroupSet) -> Option<Smaps> {
    let pids = set.pids().ok()?;
    let total = readers::smaps_total(&ctx.host.proc, &pids);
    (pids.is_empty() || total.processes > 0).then_some(total)
}
