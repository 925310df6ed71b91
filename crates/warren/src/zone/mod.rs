//! Zones: the lifecycle verbs and the state machine's effects.
//!
//! Every verb that changes a zone takes the zone's exclusive lock, loads its files,
//! repairs what an interrupted command left ([`reconcile`]), asks [`crate::state::decide`]
//! whether the verb applies, and then acts. Reading verbs (`list`) take no lock and
//! report the state derived from the files and the kernel.

pub mod archive;
mod archive_disk;
mod archive_tree;
mod cp;
mod cp_offline;
mod cp_tar;
mod freeze;
mod gc;
mod lifecycle;
pub mod pipeline;
mod prepare;
pub mod publish;
mod records;
mod rename;
pub mod snapshot;

use std::cell::OnceCell;
use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use cp::{cp, helper_main as cp_helper, CpOptions, CpReport};
pub use gc::{gc, owner_pid, GcReport};
pub use lifecycle::{
    boot, boot_autoboot, boot_watched, clone, clone_from, config_bytes, config_replace, config_set,
    config_unset, create, create_with_profiles, delete, evict, halt, halt_keeping_cgroups, install,
    login, reboot, remove_kept_cgroups, resume, resume_with, suspend, uninstall, wake, ApplyTo,
    BootReport, ConfigChange, Halted, Outcome, ResumeReport, SuspendReport,
};
pub use lifecycle::{proc_views, ViewState, ZoneViews};
pub use rename::rename;

use crate::cgroups::{discover, CgroupDriver, Hierarchy};
use crate::config::{self, ZoneConfig};
use crate::error::{Error, IoContext, Result};
use crate::layout::{HostPaths, Layout};
use crate::names;
use crate::state::{self, InitFact, Lifecycle, Runtime, ZoneState};
use crate::stats;
use crate::storage::BackendKind;

/// What every command works with: the state root and the host's interfaces.
pub struct Context {
    pub layout: Layout,
    pub host: HostPaths,
    driver: OnceCell<(Box<dyn CgroupDriver>, Hierarchy)>,
    boot_id: OnceCell<String>,
    /// (MemTotal, SwapTotal, defaults.toml): what a zone's effective limits depend on
    /// besides its config, read once per command (`list` of many zones).
    limit_inputs: OnceCell<(u64, u64, config::Defaults)>,
}

impl Context {
    pub fn new(layout: Layout, host: HostPaths) -> Context {
        Context {
            layout,
            host,
            driver: OnceCell::new(),
            boot_id: OnceCell::new(),
            limit_inputs: OnceCell::new(),
        }
    }

    /// The cgroup driver for this host (probed once).
    pub fn cgroups(&self) -> Result<&(Box<dyn CgroupDriver>, Hierarchy)> {
        if let Some(d) = self.driver.get() {
            return Ok(d);
        }
        let d = discover(&self.host.proc, &self.layout.cgroup_group())?;
        Ok(self.driver.get_or_init(|| d))
    }

    pub fn boot_id(&self) -> &str {
        self.boot_id.get_or_init(|| stats::boot_id(&self.host.proc))
    }

    /// The limits zone config `cfg` gives its cgroups: with the host's swap allowance
    /// and the state root's `defaults.toml` applied, read now. Boot and live changes.
    pub fn effective_limits(&self, cfg: &ZoneConfig) -> Result<config::Limits> {
        let (mem, swap, defaults) = self.read_limit_inputs()?;
        Ok(cfg
            .limits
            .with_swap_allowance(mem, swap)
            .with_defaults(&defaults))
    }

    /// [`Context::effective_limits`] with its host inputs read once per command, for
    /// reading verbs over many zones (`list`). Not for boots: swap may be enabled
    /// between two boots of one process (`bench scale`).
    pub fn effective_limits_cached(&self, cfg: &ZoneConfig) -> Result<config::Limits> {
        let (mem, swap, defaults) = match self.limit_inputs.get() {
            Some(i) => i.clone(),
            None => {
                let i = self.read_limit_inputs()?;
                self.limit_inputs.get_or_init(|| i).clone()
            }
        };
        Ok(cfg
            .limits
            .with_swap_allowance(mem, swap)
            .with_defaults(&defaults))
    }

    fn read_limit_inputs(&self) -> Result<(u64, u64, config::Defaults)> {
        let m = stats::meminfo(&self.host.proc);
        let get = |k: &str| m.get(k).copied().unwrap_or(0);
        let d = config::Defaults::load(self.layout.root())?;
        Ok((get("MemTotal"), get("SwapTotal"), d))
    }

    /// Refuse to go on unless running as root.
    pub fn require_root(&self) -> Result<()> {
        if warren_sys::geteuid() != 0 {
            return Err(Error::NotRoot);
        }
        Ok(())
    }

    /// Whether zone `name` still holds the address `addr`: it is booting or halting
    /// (someone holds its lock; never waited for, so callers holding other locks cannot
    /// deadlock), or its runtime record names that address and its init is alive.
    pub fn lease_is_live(&self, name: &str, addr: Ipv4Addr) -> bool {
        if names::problem(name).is_some() || !self.layout.zone_dir(name).is_dir() {
            return false;
        }
        match crate::lock::try_exclusive_path(&self.layout.lock_file("zone", name)) {
            Ok(Some(_held)) => state::load_runtime(&self.layout.zone_dir(name))
                .ok()
                .flatten()
                .is_some_and(|rt| {
                    rt.net.as_ref().map(|n| n.address) == Some(addr)
                        && rt.boot_id == self.boot_id()
                        && self.init_fact(&rt) == Some(InitFact::Alive)
                }),
            // Busy, or the lock cannot be checked: keep the lease.
            Ok(None) | Err(_) => true,
        }
    }

    /// Whether the recorded init is still the same live process.
    pub fn init_fact(&self, rt: &Runtime) -> Option<InitFact> {
        rt.init.map(|i| self.fact_of(i))
    }

    /// Whether the process `init` names is still that process.
    pub fn fact_of(&self, init: state::InitId) -> InitFact {
        if stats::proc_start_time(&self.host.proc, init.pid) == Some(init.start_time) {
            InitFact::Alive
        } else {
            InitFact::Gone
        }
    }
}

/// A zone's files, loaded.
#[derive(Debug, Clone)]
pub struct Zone {
    pub name: String,
    pub dir: PathBuf,
    pub config: ZoneConfig,
    pub lifecycle: Lifecycle,
    pub runtime: Option<Runtime>,
    /// `runtime.json` exists but cannot be parsed (empty or torn): why. Stale; the
    /// next locked command cleans up by the zone's name ([`reconcile`]).
    pub torn_runtime: Option<String>,
}

impl Zone {
    /// The state users see now.
    pub fn state(&self, ctx: &Context) -> ZoneState {
        self.state_given(ctx, self.runtime.as_ref().and_then(|rt| ctx.init_fact(rt)))
    }

    /// The state, given what the kernel says about its init (`fact`, looked at once
    /// by a caller that keeps it: the agent's record cache).
    pub fn state_given(&self, ctx: &Context, fact: Option<InitFact>) -> ZoneState {
        state::observe(&self.lifecycle, self.runtime.as_ref(), ctx.boot_id(), fact)
    }
}

pub(crate) fn config_path(dir: &Path) -> PathBuf {
    dir.join("config.toml")
}

/// A zone's `config.toml` as it is on disk, whatever its state.
pub(crate) struct StoredConfig {
    pub path: PathBuf,
    /// The file's bytes; `None` when it is missing or too large to read.
    pub bytes: Option<Vec<u8>>,
    /// There is no file.
    pub missing: bool,
    /// Its table, or why there is none ([`Error::BadConfigFile`], naming the file).
    pub table: Result<toml::Table>,
}

/// Read zone `name`'s config file, bounded ([`crate::fsutil::MAX_SMALL_FILE`]).
/// Only an I/O error other than a missing, oversized or non-UTF-8 file is an `Err`
/// here; a damaged file is reported in [`StoredConfig::table`].
pub(crate) fn read_stored_config(name: &str, dir: &Path) -> Result<StoredConfig> {
    let path = config_path(dir);
    let bad = |message: String| Error::BadConfigFile {
        zone: name.into(),
        path: path.clone(),
        message,
    };
    let bytes = match crate::fsutil::read_bounded(&path, crate::fsutil::MAX_SMALL_FILE) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(StoredConfig {
                table: Err(bad("the file is missing".into())),
                path,
                bytes: None,
                missing: true,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Ok(StoredConfig {
                table: Err(bad(e.to_string())),
                path,
                bytes: None,
                missing: false,
            })
        }
        Err(e) => return Err(e).ctx(|| format!("zone '{name}': reading {}", path.display())),
    };
    let table = match std::str::from_utf8(&bytes) {
        Err(e) => Err(bad(format!(
            "it is not UTF-8 text (byte {} is invalid)",
            e.valid_up_to()
        ))),
        Ok(text) => text.parse::<toml::Table>().map_err(|e| {
            let line = e
                .span()
                .map(|s| format!(" (line {})", text[..s.start].matches('\n').count() + 1))
                .unwrap_or_default();
            bad(format!("not valid TOML{line}: {}", e.message().trim()))
        }),
    };
    Ok(StoredConfig {
        path,
        bytes: Some(bytes),
        missing: false,
        table,
    })
}

/// Read a zone's config table from its file.
pub(crate) fn read_config_table(name: &str, dir: &Path) -> Result<toml::Table> {
    read_stored_config(name, dir)?.table
}

/// A stored config table → the config; a value this warren refuses names the file.
pub(crate) fn config_from_stored(
    name: &str,
    path: &Path,
    table: &toml::Table,
) -> Result<ZoneConfig> {
    config::from_table(name, table).map_err(|e| match e {
        Error::Config { message, .. } => Error::BadConfigFile {
            zone: name.into(),
            path: path.to_path_buf(),
            message,
        },
        e => e,
    })
}

/// Load zone `name`.
pub fn load(ctx: &Context, name: &str) -> Result<Zone> {
    names::zone(name)?;
    let dir = ctx.layout.zone_dir(name);
    if !dir.is_dir() {
        return Err(Error::NoSuchZone(name.into()));
    }
    let table = read_config_table(name, &dir)?;
    let config = config_from_stored(name, &config_path(&dir), &table)?;
    let lifecycle = state::load_lifecycle(&dir)?.ok_or_else(|| Error::Corrupt {
        path: state::state_path(&dir),
        message: "the file is missing".into(),
    })?;
    let (runtime, torn_runtime) = load_runtime(ctx, name, &dir)?;
    Ok(Zone {
        name: name.to_string(),
        dir,
        config,
        lifecycle,
        runtime,
        torn_runtime,
    })
}

/// The zone's runtime record, or why it is stale: torn (empty, garbled) or naming
/// another zone's cgroups or init (a copied zone directory: acting on it would stop
/// the other zone).
pub(crate) fn load_runtime(
    ctx: &Context,
    name: &str,
    dir: &Path,
) -> Result<(Option<state::Runtime>, Option<String>)> {
    Ok(match state::load_runtime_or_torn(dir)? {
        state::RuntimeRecord::Absent => (None, None),
        state::RuntimeRecord::Present(rt) => match records::foreign_record(ctx, name, &rt) {
            Some(why) => (None, Some(why)),
            None => (Some(rt), None),
        },
        state::RuntimeRecord::Torn(why) => (None, Some(why)),
    })
}

/// Repair what an interrupted or crashed command left, under the zone's lock: a stale
/// runtime record (init gone, host rebooted, or a boot that never finished) has its
/// cgroups killed and removed and is deleted. A torn or foreign record is stale, and
/// so is a missing one whose zone still has cgroups (removed by hand, or lost between
/// a boot's cgroups and its first record): the cgroups named after the zone are
/// cleaned ([`records::clean_by_name`]).
pub fn reconcile(ctx: &Context, zone: &mut Zone) -> Result<()> {
    if zone.torn_runtime.is_some() {
        records::clean_by_name(ctx, &zone.name)?;
        state::remove_runtime(&zone.dir)?;
        zone.torn_runtime = None;
        return Ok(());
    }
    let Some(rt) = &zone.runtime else {
        // Where cgroups cannot be discovered (a verb that needs none), nothing to do.
        if let Ok(set) = records::cgroups_by_name(ctx, &zone.name) {
            if !set.dirs.is_empty() {
                records::clean_by_name(ctx, &zone.name)?;
            }
        }
        return Ok(());
    };
    let fact = ctx.init_fact(rt);
    if fact == Some(InitFact::Alive) && rt.boot_id == ctx.boot_id() {
        lifecycle::repair_suspension(ctx, zone)?;
    }
    let Some(rt) = &zone.runtime else {
        return Ok(());
    };
    let interrupted_boot = rt.state == ZoneState::Ready;
    if interrupted_boot || state::is_stale(&zone.lifecycle, rt, ctx.boot_id(), fact) {
        if let Some(run) = exited_run(ctx, rt) {
            // Its init ended by itself after boot: warren was not its parent, so only
            // that it ended (and the OOM kills) can be known.
            crate::journal::note(
                &ctx.layout,
                crate::journal::EventType::Lifecycle,
                "exited",
                &zone.name,
                serde_json::json!({ "status": null, "oom_kills": run.oom_kills }),
            );
            zone.lifecycle.last_run = Some(run);
            state::save_lifecycle(&zone.dir, &zone.lifecycle)?;
        }
        if rt.boot_id == ctx.boot_id() {
            rt.cgroups.kill_all(std::time::Duration::from_secs(10))?;
            rt.cgroups.remove(std::time::Duration::from_secs(5))?;
        }
        if let Some(net) = &rt.net {
            crate::net::release(&ctx.layout, &zone.name, net)?;
        }
        state::remove_runtime(&zone.dir)?;
        zone.runtime = None;
    }
    Ok(())
}

/// A running zone's record whose init is gone on this host boot: the run ended by
/// itself. Its OOM kills are read from the cgroups, which are still there.
fn exited_run(ctx: &Context, rt: &Runtime) -> Option<state::LastRun> {
    (rt.state == ZoneState::Running
        && rt.boot_id == ctx.boot_id()
        && ctx.init_fact(rt) == Some(InitFact::Gone))
    .then(|| state::LastRun {
        at_ms: now_ms(),
        exited: true,
        status: None,
        signal: None,
        oom_kills: rt.cgroups.oom_kills().unwrap_or(0),
    })
}

/// Names of all zones (valid names only; temporary directories start with '.').
pub fn names_in(layout: &Layout) -> Result<Vec<String>> {
    let dir = layout.zones();
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).ctx(|| format!("reading {}", dir.display())),
    };
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| names::problem(n).is_none())
        .collect();
    out.sort();
    Ok(out)
}

/// Zones whose config names `template`.
pub fn zones_using_template(layout: &Layout, template: &str) -> Result<Vec<String>> {
    let mut users = Vec::new();
    for name in names_in(layout)? {
        let dir = layout.zone_dir(&name);
        let uses = read_config_table(&name, &dir)
            .map(|t| t.get("template").and_then(|v| v.as_str()) == Some(template))
            // An unreadable config might name it: keep the template to be safe.
            .unwrap_or(true);
        if uses {
            users.push(name);
        }
    }
    Ok(users)
}

/// What a row of `warren list` / `warren stat` is: a zone of this state root, or a
/// container of the OCI runtime's state root (`--oci-root`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Zone,
    Oci,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Zone => "zone",
            Kind::Oci => "oci",
        })
    }
}

/// One row of `warren list`; its JSON form is the API object.
#[derive(Debug, Clone, Serialize)]
pub struct ZoneInfo {
    pub name: String,
    pub kind: Kind,
    /// For an OCI container: the zone state its status corresponds to
    /// ([`crate::oci::view::zone_state`]); `oci.status` is the exact one.
    pub state: Option<ZoneState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net: Option<config::NetMode>,
    /// `net = "bridge"`: the zone's IPv4 address while it is up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uptime_s: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evicted: Option<String>,
    /// How the last run ended (by itself, or with OOM kills), until the next boot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run: Option<state::LastRun>,
    /// A suspended zone: when, and what it holds (docs/suspend.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspended: Option<crate::suspend::SuspendedView>,
    /// A running zone: OOM kills inside it so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom_kills: Option<u64>,
    /// A running zone: each limit file as the kernel holds it, with the configured
    /// value where they differ (`cgroups::live`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_force: Option<Vec<crate::cgroups::live::InForce>>,
    /// The host ids of its user namespace (`base`, `count`), once allocated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idmap: Option<crate::idmap::IdRange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<ZoneConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
    /// Why the zone could not be read, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Kind `oci`: the runtime-spec status, bundle and creation time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oci: Option<crate::oci::view::OciInfo>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Describe one zone.
pub fn info(ctx: &Context, name: &str) -> ZoneInfo {
    match load(ctx, name) {
        Err(e) => ZoneInfo {
            name: name.into(),
            kind: Kind::Zone,
            state: None,
            template: None,
            backend: None,
            net: None,
            address: None,
            init_pid: None,
            uptime_s: None,
            evicted: None,
            last_run: None,
            suspended: None,
            oom_kills: None,
            in_force: None,
            idmap: None,
            config: None,
            root: None,
            error: Some(e.to_string()),
            oci: None,
        },
        Ok(z) => {
            let mut st = z.state(ctx);
            if st == ZoneState::Ready && !boot_in_progress(ctx, name) {
                // A boot that died before its init ran: nobody holds the lock, so the
                // record is stale and the zone is, in effect, installed.
                st = ZoneState::Installed;
            }
            let up = st >= ZoneState::Ready;
            let rt = z.runtime.as_ref().filter(|_| up);
            // Not yet reconciled: a run that ended by itself shows as such now.
            let last_run = z
                .runtime
                .as_ref()
                .and_then(|r| exited_run(ctx, r))
                .or(z.lifecycle.last_run.clone());
            let in_force = rt.and_then(|r| {
                let limits = ctx.effective_limits_cached(&z.config).ok()?;
                Some(crate::cgroups::live::in_force(&r.cgroups, &limits))
            });
            ZoneInfo {
                name: z.name.clone(),
                kind: Kind::Zone,
                state: Some(st),
                template: Some(z.config.template.clone()),
                backend: z.lifecycle.backend,
                net: Some(z.config.net),
                address: rt.and_then(|r| r.net.as_ref().map(|n| n.address)),
                init_pid: rt.and_then(|r| r.init.map(|i| i.pid)),
                uptime_s: rt.map(|r| now_ms().saturating_sub(r.booted_at_ms) / 1000),
                evicted: z.lifecycle.evicted.clone(),
                last_run,
                suspended: rt.and_then(|r| {
                    let s = r.suspension.as_ref().filter(|s| s.done)?;
                    Some(crate::suspend::view(s, &r.cgroups, &ctx.host.proc))
                }),
                oom_kills: rt.and_then(|r| r.cgroups.oom_kills()),
                in_force,
                idmap: z.lifecycle.idmap,
                root: z
                    .lifecycle
                    .backend
                    .map(|b| crate::storage::backend(b).private_dir(&z.dir)),
                config: Some(z.config),
                error: None,
                oci: None,
            }
        }
    }
}

/// Whether another command holds the zone's lock (cheap: one flock attempt).
fn boot_in_progress(ctx: &Context, name: &str) -> bool {
    !matches!(
        crate::lock::try_exclusive_path(&ctx.layout.lock_file("zone", name)),
        Ok(Some(_))
    )
}

/// Describe all zones.
pub fn list(ctx: &Context) -> Result<Vec<ZoneInfo>> {
    Ok(names_in(&ctx.layout)?
        .iter()
        .map(|n| info(ctx, n))
        .collect())
}

/// `warren list`: all zones, then the containers under the OCI state root
/// `oci_root` (kind `oci`).
pub fn list_with_oci(ctx: &Context, oci_root: &Path) -> Result<Vec<ZoneInfo>> {
    let mut out = list(ctx)?;
    out.extend(
        crate::oci::view::all(oci_root, &ctx.host.proc)
            .into_iter()
            .map(oci_info),
    );
    Ok(out)
}

fn oci_info(s: crate::oci::view::Seen) -> ZoneInfo {
    let live = s.uptime_s.is_some();
    ZoneInfo {
        name: s.record.id,
        kind: Kind::Oci,
        state: Some(crate::oci::view::zone_state(s.status)),
        template: None,
        backend: None,
        net: None,
        address: None,
        init_pid: s.record.pid.filter(|_| live),
        uptime_s: s.uptime_s,
        evicted: None,
        last_run: None,
        suspended: None,
        oom_kills: None,
        in_force: None,
        config: None,
        idmap: None,
        root: Some(s.record.rootfs),
        error: None,
        oci: Some(crate::oci::view::OciInfo {
            status: s.status,
            bundle: s.record.bundle,
            created: s.record.created,
        }),
    }
}
