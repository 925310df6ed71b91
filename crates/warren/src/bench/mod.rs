//! `warren bench density`: for each step N, clone and boot N fresh zones, measure what
//! they cost (clone/boot latency, memory per zone with the memstat breakdown, disk, idle
//! CPU of the zones and of the host, processes and threads ([`census`]), halt and
//! delete), remove them, ask the doctor's model for the first limit that would stop the
//! next step ([`headroom`]), and write `results.json`, `report.md` (with the Solaris
//! density study's table, [`solaris`]) and four SVG charts. `--compare crun,lxc,podman`
//! runs the same steps with crun, LXC and podman on the same machine, in the same run.
//!
//! Every measured system, warren's zones included, is a [`system::System`] driven by
//! one measured step loop ([`system::step`]) that times each step the same way:
//! [`zones`] (warren), [`runc_cli`] (one runc-style CLI stepper: [`crun`] and
//! `--via oci` in [`oci`]), [`lxc`] and [`podman`]; their commands all run through
//! [`command`], and the cgroup rule for the compared systems is [`cgroups`].
//!
//! Everything the bench makes (zones, its templates, crun, LXC and podman containers, its temp dir) is
//! removed when a step ends, also when it fails.

pub mod breakdown;
pub mod census;
pub mod cgroups;
pub mod command;
pub mod cri;
pub mod crun;
pub mod headroom;
pub mod interrupt;
pub mod lxc;
pub mod metrics;
pub mod metrics_daemon;
pub mod oci;
pub mod podman;
pub mod report;
pub mod runc_cli;
pub mod scale;
pub mod snapshot;
pub mod solaris;
pub mod svg;
pub mod system;
pub mod zones;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::error::{Error, IoContext, Result};
use crate::measure::{MemPerZone, Progress, Summary};
use crate::storage::template::{self, Source};
use crate::zone::{self, Context};
use crate::{demo, doctor, stats, storage};

/// Zone names the bench owns.
pub const PREFIX: &str = "warren-bench-";
/// `--net bridge`: the bench's own bridge and subnet (never the operator's warren0).
pub const BRIDGE: &str = "wbench0";
pub const SUBNET: &str = "10.238.0.0/16";
/// Version of `results.json`'s layout (see docs/bench.md).
pub const SCHEMA_VERSION: u32 = 1;

/// The template zones are made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TemplateKind {
    Host,
    Busybox,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub steps: Vec<usize>,
    pub template: TemplateKind,
    pub bridge: bool,
    pub idle: Duration,
    /// Other systems to run the same steps with ("crun", "crun-nocgroups", "lxc", "podman").
    pub compare: Vec<String>,
    /// `--via oci`: warren's steps go through `warren oci create/start` on bundles
    /// ([`oci`]) instead of zones.
    pub via_oci: bool,
}

/// The machine a run came from.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub hostname: String,
    pub kernel: String,
    pub cpus: usize,
    pub mem_total_mib: f64,
    pub cgroup_version: String,
    pub storage_backend: String,
    /// /proc/loadavg at the start: other work on the host makes numbers noisy.
    pub loadavg_at_start: String,
}

/// One step of one system.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub zones: usize,
    /// warren: `clone` of an installed zone; crun: writing the container's bundle.
    pub clone_ms: Summary,
    /// warren: `boot`; crun: `create` + `start`.
    pub boot_ms: Summary,
    /// Wall time of the whole step, setup and teardown included.
    pub total_s: f64,
    pub mem_per_zone: MemPerZone,
    /// The memstat-style breakdown (kernel by part, anon, mapped files, page cache,
    /// shmem, total), whole set and per zone; the zones' cgroups where known.
    pub memory: breakdown::Breakdown,
    pub disk_per_zone_kib: f64,
    /// CPU of all zones together over the idle window, % of one CPU.
    pub idle_cpu_pct: f64,
    /// How busy the host's CPUs were over the idle window, % of all CPUs.
    pub host_cpu_pct: f64,
    /// That busy time taken apart: by kind (/proc/stat) and by the tasks that used it.
    pub cpu_use: census::CpuUse,
    /// Processes and threads at the sample, host-wide and the zones' own, and the
    /// inotify instances and watches the zones hold.
    pub census: census::Census,
    /// The first limit that would stop the next step, from the doctor's model (warren's
    /// steps; `None` for compared systems).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step: Option<headroom::NextStep>,
    /// warren: `halt`; crun: `kill`.
    pub halt_ms: Summary,
    /// warren: `delete`; crun: `delete`.
    pub delete_ms: Summary,
}

/// One system's run.
#[derive(Debug, Clone, Serialize)]
pub struct SystemRun {
    pub name: String,
    /// "ok", "not installed" or "failed".
    pub status: String,
    /// How it was run, or why it was not (with the install command).
    pub note: String,
    /// The OCI runtime a container engine used (podman: "runc" or "crun").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    pub steps: Vec<Step>,
}

/// How a compared system is made: under the scratch dir, from the busybox root, with
/// this /proc.
type Opener = fn(
    &Path,
    &Path,
    &Path,
    &mut dyn Progress,
) -> std::result::Result<Box<dyn system::System>, system::Failure>;

/// `results.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub schema_version: u32,
    /// UTC, RFC 3339.
    pub date: String,
    pub machine: Machine,
    pub template: TemplateKind,
    pub net: String,
    pub idle_s: f64,
    pub steps: Vec<usize>,
    /// warren first, then the `--compare` systems in the order given.
    pub systems: Vec<SystemRun>,
}

/// Parse `--zones 1,10,100`: positive, ascending not required, no duplicates.
pub fn parse_steps(s: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let n: usize = part.trim().parse().map_err(|_| {
            Error::Invalid(format!(
                "--zones {s:?}: {part:?} is not a number; give counts such as 1,10,100"
            ))
        })?;
        if n == 0 || out.contains(&n) {
            return Err(Error::Invalid(format!(
                "--zones {s:?}: each count must be at least 1 and appear once"
            )));
        }
        out.push(n);
    }
    Ok(out)
}

/// Now, UTC, RFC 3339 (seconds).
pub fn now_rfc3339() -> String {
    let (y, mo, d, h, mi, s) = crate::clock::civil(now_secs());
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The host's name, for the default results directory.
pub fn hostname(ctx: &Context) -> String {
    std::fs::read_to_string(ctx.host.proc.join("sys/kernel/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// `bench/results/<date>-<hostname>`.
pub fn default_out(ctx: &Context) -> PathBuf {
    let (y, m, d, ..) = crate::clock::civil(now_secs());
    PathBuf::from(format!(
        "bench/results/{y:04}-{m:02}-{d:02}-{}",
        hostname(ctx)
    ))
}

pub(crate) fn machine(ctx: &Context) -> Result<Machine> {
    let (_, hier) = ctx.cgroups()?;
    let (backend, _) = storage::choose(ctx.layout.root(), &ctx.host.proc)?;
    let mem = stats::meminfo(&ctx.host.proc);
    Ok(Machine {
        hostname: hostname(ctx),
        kernel: warren_sys::kernel_release(),
        cpus: stats::online_cpus(&ctx.host.sys).len(),
        mem_total_mib: mem.get("MemTotal").copied().unwrap_or(0) as f64 / (1 << 20) as f64,
        cgroup_version: hier.version.to_string(),
        storage_backend: backend.to_string(),
        loadavg_at_start: std::fs::read_to_string(ctx.host.proc.join("loadavg"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    })
}

/// Remove every zone the bench owns (leftovers of an interrupted run, or this run's).
pub fn cleanup(ctx: &Context) -> Result<usize> {
    let mut n = 0;
    for name in zone::names_in(&ctx.layout)? {
        if name.starts_with(PREFIX) {
            zone::delete(ctx, &name, true)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Make the bench's template unless it exists; true if this call made it.
pub(crate) fn ensure_template(ctx: &Context, name: &str, source: &Source) -> Result<bool> {
    match template::load(&ctx.layout, name) {
        Ok(_) => Ok(false),
        Err(Error::NoSuchTemplate(_)) => {
            let (kind, _) = storage::choose(ctx.layout.root(), &ctx.host.proc)?;
            template::create(&ctx.layout, name, source, kind)?;
            Ok(true)
        }
        Err(e) => Err(e),
    }
}

/// Templates the bench made, deleted on drop (after the zones using them).
pub(crate) struct Templates<'a> {
    pub(crate) ctx: &'a Context,
    pub(crate) made: Vec<String>,
}

impl Drop for Templates<'_> {
    fn drop(&mut self) {
        let _ = cleanup(self.ctx);
        for t in &self.made {
            let _ = template::delete(&self.ctx.layout, t);
        }
    }
}

/// A scratch directory (crun's state root and bundles), removed on drop.
pub struct Scratch(pub PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Run the bench. Writes nothing; see [`write`].
pub fn run(ctx: &Context, opts: &Options, progress: &mut dyn Progress) -> Result<Results> {
    ctx.require_root()?;
    cleanup(ctx)?;
    let date = now_rfc3339();
    let machine = machine(ctx)?;
    let (tname, source) = match opts.template {
        TemplateKind::Host => (format!("{PREFIX}host"), Source::Host),
        TemplateKind::Busybox => (format!("{PREFIX}busybox"), Source::Busybox),
    };
    let mut templates = Templates {
        ctx,
        made: Vec::new(),
    };
    if ensure_template(ctx, &tname, &source)? {
        templates.made.push(tname.clone());
    }
    let scratch = Scratch(
        ctx.layout
            .root()
            .join(format!(".bench-{}", std::process::id())),
    );
    std::fs::create_dir_all(&scratch.0).ctx(|| format!("creating {}", scratch.0.display()))?;

    let warren_steps = match opts.via_oci {
        true => Ok(Vec::new()),
        false => run_warren(ctx, opts, &tname, progress),
    };
    let net_cleaned = if opts.bridge {
        demo::cleanup_net(ctx)
    } else {
        Ok(())
    };
    let warren_steps = warren_steps?;
    net_cleaned?;
    let mut systems = vec![SystemRun {
        runtime: None,
        name: "warren".into(),
        status: "ok".into(),
        note: format!(
            "template '{}' ({} backend), net {}, warren-init as PID 1, in process",
            match opts.template {
                TemplateKind::Host => "host",
                TemplateKind::Busybox => "busybox",
            },
            machine.storage_backend,
            if opts.bridge { "bridge" } else { "none" }
        ),
        steps: warren_steps,
    }];
    let proc_root = &ctx.host.proc;
    if opts.via_oci {
        let rootfs = template::root_of(&ctx.layout, &tname);
        let open = |p: &mut dyn Progress| oci::open(&scratch.0, &rootfs, proc_root, p);
        systems[0] = system::compare("warren-oci", None, open, opts, proc_root, progress);
    }
    for other in &opts.compare {
        let (needs, open): (_, Opener) = match other.as_str() {
            "crun" => (crun::NEEDS, crun::open),
            "crun-nocgroups" => (crun::NEEDS, crun::open_nocgroups),
            "lxc" => (lxc::NEEDS, lxc::open),
            "podman" => (podman::NEEDS, podman::open),
            _ => unreachable!("clap limits --compare to crun, crun-nocgroups, lxc and podman"),
        };
        let bb = format!("{PREFIX}busybox");
        if ensure_template(ctx, &bb, &Source::Busybox)? {
            templates.made.push(bb.clone());
        }
        let rootfs = template::root_of(&ctx.layout, &bb);
        let open = |p: &mut dyn Progress| open(&scratch.0, &rootfs, proc_root, p);
        systems.push(system::compare(
            other,
            Some(needs),
            open,
            opts,
            proc_root,
            progress,
        ));
    }
    progress.done();
    drop(templates);
    Ok(Results {
        schema_version: SCHEMA_VERSION,
        date,
        machine,
        template: opts.template,
        net: if opts.bridge { "bridge" } else { "none" }.into(),
        idle_s: opts.idle.as_secs_f64(),
        steps: opts.steps.clone(),
        systems,
    })
}

fn run_warren(
    ctx: &Context,
    opts: &Options,
    tname: &str,
    progress: &mut dyn Progress,
) -> Result<Vec<Step>> {
    let sets: Vec<String> = if opts.bridge {
        vec![
            "net=bridge".into(),
            format!("net-bridge={BRIDGE}"),
            format!("net-subnet={SUBNET}"),
        ]
    } else {
        Vec::new()
    };
    let base = zones::Base {
        template: tname.into(),
        sets,
    };
    let mut zones = zones::Zones::new(ctx, &format!("{PREFIX}base"), Some(base), PREFIX, 5);
    let at = system::Pass {
        proc_root: &ctx.host.proc,
        idle: opts.idle,
    };
    let net = match opts.bridge {
        true => doctor::NetPlan::Bridge,
        false => doctor::NetPlan::None,
    };
    let mut steps = Vec::new();
    for &n in &opts.steps {
        let mut step = system::step(&mut zones, n, &at, progress)?;
        // The host as the step left it (its zones gone), asked about the next step.
        let plan = headroom::plan_like(&step, headroom::next_zones(&opts.steps, n), net)?;
        step.next_step = Some(headroom::next_step(&doctor::read_snapshot(ctx), &plan));
        steps.push(step);
    }
    Ok(steps)
}

/// Write `results.json`, `report.md`, `latency.svg`, `memory.svg`, `breakdown.svg`
/// and `kinds.svg` into `dir`.
pub fn write(dir: &Path, r: &Results) -> Result<()> {
    write_files(
        dir,
        r,
        [
            ("report.md", report::markdown(r)),
            ("latency.svg", svg::latency(r)),
            ("memory.svg", svg::memory(r)),
            ("breakdown.svg", svg::breakdown(r)),
            ("kinds.svg", svg::kinds(r)),
        ],
    )
}

/// Make `dir` and write `results.json` (pretty, newline-terminated) and `files` into it.
pub(crate) fn write_files<const N: usize>(
    dir: &Path,
    results: &impl Serialize,
    files: [(&str, String); N],
) -> Result<()> {
    std::fs::create_dir_all(dir).ctx(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_string_pretty(results).expect("results serialize");
    for (name, text) in std::iter::once(("results.json", json + "\n")).chain(files) {
        let p = dir.join(name);
        std::fs::write(&p, text).ctx(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_parse() {
        assert_eq!(parse_steps("1,10, 100").unwrap(), vec![1, 10, 100]);
        assert!(parse_steps("1,0").is_err());
        assert!(parse_steps("1,1").is_err());
        assert!(parse_steps("a").is_err());
        assert!(parse_steps("").is_err());
    }
}
