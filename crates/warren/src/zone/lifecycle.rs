//! The verbs: create, install, clone, boot, halt, reboot, login, uninstall, delete,
//! config set/unset. Each is atomic on disk: a new zone is built in a temporary
//! directory and renamed into place; a state change is a durable rename of state.json;
//! an interrupted install or uninstall leaves `incomplete`, which the next install or
//! uninstall finishes.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{load, read_config_table, reconcile, Context, Zone};
use crate::cgroups::CgroupError;
use crate::config::{self, NetMode, ZoneConfig};
use crate::doctor;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{atomic_write, mkdir_mode, remove_tree, sync_dir, unique_suffix};
use crate::idmap::{self, IdRange};
use crate::lock::{self, Lock};
use crate::runtime::{self, BootSpec};
use crate::state::{self, Decision, Lifecycle, Runtime, Verb, ZoneState};
use crate::stats;
use crate::storage::{backend, template, RootMount};
use crate::{fault, names};

use super::prepare::{disk_for_boot, host_privileges, own_upper, prepare_idmap, upper_owner};

/// What a verb did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// Nothing to do: the zone was already there (idempotent verbs).
    AlreadyDone(&'static str),
}

const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(10);

fn zone_lock(ctx: &Context, name: &str) -> Result<Lock> {
    names::zone(name)?;
    lock::exclusive(&ctx.layout, "zone", name)
}

/// Load under lock and repair leftovers.
fn load_locked(ctx: &Context, name: &str) -> Result<Zone> {
    let mut z = load(ctx, name)?;
    reconcile(ctx, &mut z)?;
    Ok(z)
}

fn write_config(dir: &Path, cfg: &ZoneConfig) -> Result<()> {
    let path = super::config_path(dir);
    atomic_write(&path, config::to_toml(cfg).as_bytes(), true)
        .ctx(|| format!("writing {}", path.display()))
}

fn validate_for_host(ctx: &Context, name: &str, cfg: &ZoneConfig) -> Result<()> {
    config::check_host(name, cfg, &stats::online_cpus(&ctx.host.sys))?;
    config::check_privileges(name, cfg, &host_privileges(ctx, cfg))?;
    if let (true, Some(base)) = (cfg.userns, cfg.userns_base) {
        idmap::check_pin(&ctx.layout, name, base)?;
    }
    Ok(())
}

/// `warren create`: a new zone in state configured.
pub fn create(
    ctx: &Context,
    name: &str,
    template_name: Option<&str>,
    config_file: Option<&Path>,
    sets: &[String],
) -> Result<ZoneConfig> {
    names::zone(name)?;
    let mut table = match config_file {
        Some(path) => {
            let text = fs::read_to_string(path).map_err(|e| {
                Error::Invalid(format!("zone '{name}': --config {}: {e}", path.display()))
            })?;
            text.parse::<toml::Table>().map_err(|e| {
                Error::config(
                    name,
                    format!(
                        "{} is not valid TOML: {}",
                        path.display(),
                        e.message().trim()
                    ),
                )
            })?
        }
        None => config::to_table(&ZoneConfig::new("host")),
    };
    if let Some(t) = template_name {
        names::template(t)?;
        table.insert("template".into(), t.into());
    }
    for s in sets {
        let (k, v) = config::parse_assignment(name, s)?;
        config::set_in_table(name, &mut table, &k, v)?;
    }
    let cfg = config::from_table(name, &table)?;
    validate_for_host(ctx, name, &cfg)?;
    let _tlock = lock::shared(&ctx.layout, "template", &cfg.template)?;
    template::load(&ctx.layout, &cfg.template)?;
    let _lock = zone_lock(ctx, name)?;
    let zones = ctx.layout.zones();
    fs::create_dir_all(&zones).ctx(|| format!("creating {}", zones.display()))?;
    let dir = ctx.layout.zone_dir(name);
    if dir.exists() {
        return Err(Error::ZoneExists(name.into()));
    }
    let tmp = zones.join(format!(".new-{name}-{}", unique_suffix()));
    let result = (|| {
        mkdir_mode(&tmp, 0o700).ctx(|| format!("creating {}", tmp.display()))?;
        fault::point("create.after-mkdir");
        write_config(&tmp, &cfg)?;
        fault::point("create.after-config");
        state::save_lifecycle(&tmp, &Lifecycle::configured())?;
        fs::rename(&tmp, &dir)
            .ctx(|| format!("renaming {} to {}", tmp.display(), dir.display()))?;
        sync_dir(&zones).ctx(|| format!("syncing {}", zones.display()))
    })();
    if result.is_err() {
        let _ = remove_tree(&tmp);
    }
    result.map(|_| cfg)
}

/// `warren install`: configured → installed.
pub fn install(ctx: &Context, name: &str) -> Result<Outcome> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, name)?;
    let mut z = load_locked(ctx, name)?;
    if let Decision::AlreadyDone(m) = state::check(name, Verb::Install, z.state(ctx))? {
        return Ok(Outcome::AlreadyDone(m));
    }
    let _tlock = lock::shared(&ctx.layout, "template", &z.config.template)?;
    let manifest = template::load(&ctx.layout, &z.config.template)?;
    let be = backend(manifest.backend);
    if z.config.disk_max.is_some() && manifest.backend != crate::storage::BackendKind::Overlay {
        return Err(Error::config(
            name,
            format!(
                "disk.max needs the overlay backend, but template '{}' uses {}; unset disk.max or use a template on the overlay backend",
                z.config.template, manifest.backend
            ),
        ));
    }
    z.lifecycle.state = ZoneState::Incomplete;
    z.lifecycle.incomplete_op = Some("install".into());
    z.lifecycle.backend = Some(manifest.backend);
    state::save_lifecycle(&z.dir, &z.lifecycle)?;
    fault::point("install.after-incomplete");
    let troot = template::root_of(&ctx.layout, &z.config.template);
    if let Err(e) = be.install(&troot, &z.dir) {
        // Roll back to configured; if that fails too, incomplete tells the next command.
        let cleanup = be.uninstall(&z.dir).and_then(|_| {
            crate::quota::remove_image(&z.dir)?;
            z.lifecycle = Lifecycle::configured();
            state::save_lifecycle(&z.dir, &z.lifecycle)
        });
        return Err(e.with_cleanup(cleanup.err()));
    }
    fault::point("install.after-backend");
    let mut owner = 0;
    if z.config.userns {
        let r = idmap::allocate(&ctx.layout, name, z.config.userns_base)?;
        z.lifecycle.idmap = Some(r);
        owner = r.base;
        let root = be.root_mount(&troot, &z.dir);
        if let RootMount::Overlay { upper, .. } = &root {
            own_upper(name, upper, r)?;
        }
    }
    if let Some(max) = z.config.disk_max {
        if crate::quota::image(&z.dir).is_none() {
            crate::quota::create_image(name, &z.dir, max, owner)?;
        }
    }
    z.lifecycle.state = ZoneState::Installed;
    z.lifecycle.incomplete_op = None;
    state::save_lifecycle(&z.dir, &z.lifecycle)?;
    Ok(Outcome::Done)
}

/// `warren clone SRC NEW`: NEW is installed with a copy-on-write copy of SRC's root.
pub fn clone(ctx: &Context, src: &str, dst: &str) -> Result<()> {
    ctx.require_root()?;
    names::zone(src)?;
    names::zone(dst)?;
    if src == dst {
        return Err(Error::Invalid(format!(
            "zone '{src}': cannot clone a zone onto itself"
        )));
    }
    // Lock in name order so two opposite clones cannot deadlock.
    let (_l1, _l2) = if src < dst {
        let a = lock::shared(&ctx.layout, "zone", src)?;
        (a, lock::exclusive(&ctx.layout, "zone", dst)?)
    } else {
        let b = lock::exclusive(&ctx.layout, "zone", dst)?;
        (lock::shared(&ctx.layout, "zone", src)?, b)
    };
    let source = load(ctx, src)?;
    state::check(src, Verb::CloneFrom, source.state(ctx))?;
    let kind = source.lifecycle.backend.ok_or_else(|| Error::Corrupt {
        path: state::state_path(&source.dir),
        message: "an installed zone without a storage backend".into(),
    })?;
    let _tlock = lock::shared(&ctx.layout, "template", &source.config.template)?;
    template::load(&ctx.layout, &source.config.template)?;
    let zones = ctx.layout.zones();
    let dir = ctx.layout.zone_dir(dst);
    if dir.exists() {
        return Err(Error::ZoneExists(dst.into()));
    }
    let mut cfg = source.config.clone();
    cfg.hostname = None;
    // A pinned range is the source's own; the clone gets one allocated.
    cfg.userns_base = None;
    let be = backend(kind);
    let tmp = zones.join(format!(".new-{dst}-{}", unique_suffix()));
    let troot = template::root_of(&ctx.layout, &source.config.template);
    let result = (|| {
        let range = match cfg.userns {
            true => Some(idmap::allocate(&ctx.layout, dst, None)?),
            false => None,
        };
        mkdir_mode(&tmp, 0o700).ctx(|| format!("creating {}", tmp.display()))?;
        fault::point("clone.after-mkdir");
        write_config(&tmp, &cfg)?;
        // The clone's layer moves from the source's id range to the clone's in the
        // copy itself (a tenant's chown of its `/` does not hide which range it is).
        let to = range.unwrap_or(IdRange::new(0));
        let shift = match be.root_mount(&troot, &source.dir) {
            RootMount::Overlay { upper, .. } if crate::quota::image(&source.dir).is_none() => {
                let from = upper_owner(src, &upper, source.lifecycle.idmap)?;
                (from != to).then_some(crate::treeops::Shift { from, to })
            }
            _ => None,
        };
        be.clone_zone(&source.dir, &tmp, shift)?;
        if crate::quota::image(&source.dir).is_some() {
            crate::quota::copy_image(&source.dir, &tmp)?;
            crate::quota::shift_image(dst, &tmp, to)?;
        }
        fault::point("clone.after-copy");
        let lc = Lifecycle {
            state: ZoneState::Installed,
            backend: Some(kind),
            idmap: range,
            ..Lifecycle::configured()
        };
        state::save_lifecycle(&tmp, &lc)?;
        fault::point("clone.after-state");
        fs::rename(&tmp, &dir)
            .ctx(|| format!("renaming {} to {}", tmp.display(), dir.display()))?;
        sync_dir(&zones).ctx(|| format!("syncing {}", zones.display()))
    })();
    if let Err(e) = result {
        let cleanup = if tmp.exists() {
            be.uninstall(&tmp)
                .and_then(|_| remove_tree(&tmp).ctx(|| format!("removing {}", tmp.display())))
        } else {
            Ok(())
        }
        .and_then(|_| idmap::release(&ctx.layout, dst, None));
        return Err(e.with_cleanup(cleanup.err()));
    }
    Ok(())
}

/// Timings of one boot, for the demo and benchmarks.
#[derive(Debug, Clone, Copy, Default)]
pub struct BootReport {
    pub cgroups: Duration,
    pub spawn: Duration,
    pub total: Duration,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Boot a loaded, locked, reconciled zone.
fn boot_locked(ctx: &Context, z: &mut Zone) -> Result<BootReport> {
    let t0 = Instant::now();
    validate_for_host(ctx, &z.name, &z.config)?;
    let manifest = template::load(&ctx.layout, &z.config.template)?;
    let kind = z.lifecycle.backend.ok_or_else(|| Error::Corrupt {
        path: state::state_path(&z.dir),
        message: "an installed zone without a storage backend".into(),
    })?;
    let troot = template::root_of(&ctx.layout, &z.config.template);
    let mut root = backend(kind).root_mount(&troot, &z.dir);
    let disk = disk_for_boot(z)?;
    if let (Some(d), RootMount::Overlay { upper, work, .. }) = (&disk, &mut root) {
        *upper = d.upper();
        *work = d.work();
    }
    let idmap = prepare_idmap(ctx, z, &root)?;
    let init_exe = runtime::init_exe()?;
    // Admission: refuse before any cgroup exists when the host has no tasks left for
    // the zone's init and services (three small reads; see doctor::admit).
    let zone_tasks = 1 + z.config.services.len() as u64;
    doctor::admit(
        &z.name,
        &doctor::snapshot::read_admit(&ctx.host.proc),
        zone_tasks,
    )?;
    let (driver, _) = ctx.cgroups()?;
    let mem = stats::meminfo(&ctx.host.proc);
    let get = |k: &str| mem.get(k).copied().unwrap_or(0);
    let limits = z
        .config
        .limits
        .with_swap_allowance(get("MemTotal"), get("SwapTotal"))
        .with_defaults(&crate::config::Defaults::load(ctx.layout.root())?);
    let cgroups = driver.create(&z.name, &limits).map_err(|e| match e {
        CgroupError::Io { .. } | CgroupError::Busy { .. } | CgroupError::NoHierarchy { .. } => {
            Error::Cgroup(e)
        }
        e => Error::Unsupported(format!("zone '{}': {e}", z.name)),
    })?;
    let t_cg = t0.elapsed();
    fault::point("boot.after-cgroups");
    let mut rt = Runtime {
        state: ZoneState::Ready,
        boot_id: ctx.boot_id().to_string(),
        init: None,
        cgroups,
        booted_at_ms: 0,
        net: None,
    };
    let undo = |rt: &Runtime, e: Error| {
        let cleanup = rt
            .cgroups
            .kill_all(Duration::from_secs(5))
            .and_then(|_| rt.cgroups.remove(Duration::from_secs(5)))
            .map_err(Error::from)
            .and_then(|_| match &rt.net {
                Some(net) => crate::net::release(&ctx.layout, &z.name, net),
                None => Ok(()),
            })
            .and_then(|_| state::remove_runtime(&z.dir));
        e.with_cleanup(cleanup.err())
    };
    if z.config.net == NetMode::Bridge {
        let live = |name: &str, addr| ctx.lease_is_live(name, addr);
        match crate::net::lease(
            &ctx.layout,
            &ctx.host,
            ctx.boot_id(),
            &z.name,
            &z.config,
            &live,
        ) {
            Ok(net) => rt.net = Some(net),
            Err(e) => return Err(undo(&rt, e)),
        }
    }
    fault::point("boot.after-lease");
    if let Err(e) = state::save_runtime(&z.dir, &rt) {
        return Err(undo(&rt, e));
    }
    fault::point("boot.after-runtime");
    let spec = BootSpec {
        zone: &z.name,
        config: &z.config,
        root: &root,
        binds: &manifest.binds,
        cgroups: &rt.cgroups,
        console: &z.dir.join("console.log"),
        init_exe: &init_exe,
        proc_root: &ctx.host.proc,
        net: rt.net.as_ref(),
        idmap,
        disk: disk.as_ref(),
    };
    let t1 = Instant::now();
    let init = match runtime::boot(&spec) {
        Ok(i) => i,
        Err(e) => return Err(undo(&rt, e)),
    };
    let t_spawn = t1.elapsed();
    fault::point("boot.after-spawn");
    rt.state = ZoneState::Running;
    rt.init = Some(init);
    rt.booted_at_ms = now_ms();
    if let Err(e) = state::save_runtime(&z.dir, &rt) {
        return Err(undo(&rt, e));
    }
    z.runtime = Some(rt);
    if z.lifecycle.evicted.take().is_some() {
        // Booted again: the eviction is history (it stays in events.jsonl).
        state::save_lifecycle(&z.dir, &z.lifecycle)?;
    }
    Ok(BootReport {
        cgroups: t_cg,
        spawn: t_spawn,
        total: t0.elapsed(),
    })
}

/// `warren boot`: installed → running. Booting a running zone succeeds and says so.
pub fn boot(ctx: &Context, name: &str) -> Result<(Outcome, BootReport)> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, name)?;
    let mut z = load_locked(ctx, name)?;
    if let Decision::AlreadyDone(m) = state::check(name, Verb::Boot, z.state(ctx))? {
        return Ok((Outcome::AlreadyDone(m), BootReport::default()));
    }
    let report = boot_locked(ctx, &mut z)?;
    Ok((Outcome::Done, report))
}

pub(super) fn halt_locked(ctx: &Context, z: &mut Zone, timeout: Option<Duration>) -> Result<bool> {
    let Some(mut rt) = z.runtime.take() else {
        return Ok(true);
    };
    rt.state = ZoneState::ShuttingDown;
    state::save_runtime(&z.dir, &rt)?;
    fault::point("halt.after-shutting-down");
    let timeout = timeout
        .or(z.config.stop_timeout.map(Duration::from_secs))
        .unwrap_or(DEFAULT_STOP_TIMEOUT);
    let outcome = runtime::stop(
        rt.init,
        &rt.cgroups,
        timeout,
        &ctx.host.proc,
        &z.dir.join("console.log"),
    )?;
    fault::point("halt.after-stop");
    if let Some(net) = &rt.net {
        crate::net::release(&ctx.layout, &z.name, net)?;
    }
    state::remove_runtime(&z.dir)?;
    Ok(outcome.graceful)
}

/// `warren halt`: running → installed. Returns whether init stopped gracefully.
pub fn halt(ctx: &Context, name: &str, timeout: Option<Duration>) -> Result<(Outcome, bool)> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, name)?;
    let mut z = load_locked(ctx, name)?;
    if let Decision::AlreadyDone(m) = state::check(name, Verb::Halt, z.state(ctx))? {
        return Ok((Outcome::AlreadyDone(m), true));
    }
    let graceful = halt_locked(ctx, &mut z, timeout)?;
    Ok((Outcome::Done, graceful))
}

/// Evict a running zone: halt it as `warren halt` does (SIGTERM, `timeout`, kill) and
/// record `reason` in its lifecycle, shown by `warren list` until its next boot.
/// Returns `None` when the zone was not running (nothing done), else whether it
/// stopped gracefully.
pub fn evict(ctx: &Context, name: &str, reason: &str, timeout: Duration) -> Result<Option<bool>> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, name)?;
    let mut z = load_locked(ctx, name)?;
    if let Decision::AlreadyDone(_) = state::check(name, Verb::Halt, z.state(ctx))? {
        return Ok(None);
    }
    let timeout = z
        .config
        .stop_timeout
        .map(Duration::from_secs)
        .map_or(timeout, |t| t.min(timeout));
    let graceful = halt_locked(ctx, &mut z, Some(timeout))?;
    z.lifecycle.evicted = Some(reason.to_string());
    state::save_lifecycle(&z.dir, &z.lifecycle)?;
    Ok(Some(graceful))
}

/// `warren reboot`: halt then boot, under one lock.
pub fn reboot(ctx: &Context, name: &str, timeout: Option<Duration>) -> Result<()> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, name)?;
    let mut z = load_locked(ctx, name)?;
    state::check(name, Verb::Reboot, z.state(ctx))?;
    halt_locked(ctx, &mut z, timeout)?;
    boot_locked(ctx, &mut z).map(drop)
}

/// `warren login`: run `argv` (or a login shell) inside the running zone.
pub fn login(ctx: &Context, name: &str, argv: &[String]) -> Result<i32> {
    ctx.require_root()?;
    let z = load(ctx, name)?;
    state::check(name, Verb::Login, z.state(ctx))?;
    let rt = z
        .runtime
        .as_ref()
        .expect("a running zone has a runtime record");
    let init = rt.init.expect("a running zone has an init");
    let confinement = crate::isolation::Confinement::for_zone(&z.config);
    runtime::login::login(
        name,
        init,
        &rt.cgroups,
        &confinement,
        &z.config.rlimits,
        argv,
        &ctx.host.proc,
    )
}

fn uninstall_locked(z: &mut Zone) -> Result<()> {
    if let Some(kind) = z.lifecycle.backend {
        z.lifecycle.state = ZoneState::Incomplete;
        z.lifecycle.incomplete_op = Some("uninstall".into());
        state::save_lifecycle(&z.dir, &z.lifecycle)?;
        fault::point("uninstall.after-incomplete");
        backend(kind).uninstall(&z.dir)?;
        crate::quota::remove_image(&z.dir)?;
        fault::point("uninstall.after-backend");
    }
    for log in ["console.log", "console.log.1"] {
        let console = z.dir.join(log);
        remove_tree(&console).ctx(|| format!("removing {}", console.display()))?;
    }
    // The id range stays the zone's until it is deleted.
    let idmap = z.lifecycle.idmap;
    z.lifecycle = Lifecycle::configured();
    z.lifecycle.idmap = idmap;
    state::save_lifecycle(&z.dir, &z.lifecycle)
}

/// `warren uninstall`: installed (or incomplete) → configured.
pub fn uninstall(ctx: &Context, name: &str) -> Result<Outcome> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, name)?;
    let mut z = load_locked(ctx, name)?;
    if let Decision::AlreadyDone(m) = state::check(name, Verb::Uninstall, z.state(ctx))? {
        return Ok(Outcome::AlreadyDone(m));
    }
    uninstall_locked(&mut z)?;
    Ok(Outcome::Done)
}

/// `warren delete`: remove a configured zone; with `force`, halt and uninstall first.
pub fn delete(ctx: &Context, name: &str, force: bool) -> Result<()> {
    let _lock = zone_lock(ctx, name)?;
    let dir = ctx.layout.zone_dir(name);
    let mut range = None;
    match load_locked(ctx, name) {
        Ok(mut z) => {
            range = z.lifecycle.idmap;
            if force {
                if z.state(ctx) >= ZoneState::Ready {
                    ctx.require_root()?;
                    halt_locked(ctx, &mut z, Some(Duration::from_secs(5)))?;
                }
                if z.lifecycle.state != ZoneState::Configured {
                    ctx.require_root()?;
                    uninstall_locked(&mut z)?;
                }
            }
            state::check(name, Verb::Delete, z.state(ctx))?;
        }
        // A zone whose files are unreadable can still be removed by force.
        Err(Error::Corrupt { .. } | Error::Config { .. }) if force => {
            ctx.require_root()?;
            if let Ok(Some(rt)) = state::load_runtime(&dir) {
                rt.cgroups.kill_all(Duration::from_secs(5))?;
                rt.cgroups.remove(Duration::from_secs(5))?;
                if let Some(net) = &rt.net {
                    crate::net::release(&ctx.layout, name, net)?;
                }
            }
            // A btrfs zone's root is a subvolume, which a plain tree removal cannot delete.
            let root = dir.join("root");
            if warren_sys::fs::is_btrfs_subvol(&root) {
                warren_sys::fs::btrfs_subvol_delete(&root)
                    .ctx(|| format!("deleting {}", root.display()))?;
            }
        }
        Err(e) => return Err(e),
    }
    let zones = ctx.layout.zones();
    let trash = zones.join(format!(".del-{name}-{}", unique_suffix()));
    fs::rename(&dir, &trash).ctx(|| format!("renaming {}", dir.display()))?;
    sync_dir(&zones).ctx(|| format!("syncing {}", zones.display()))?;
    fault::point("delete.after-rename");
    remove_tree(&trash).ctx(|| format!("removing {}", trash.display()))?;
    idmap::release(&ctx.layout, name, range)
}

/// Apply `edit` to the zone's config table, validate, and write it durably.
fn edit_config(
    ctx: &Context,
    name: &str,
    edit: impl FnOnce(&mut toml::Table) -> Result<()>,
) -> Result<(ZoneConfig, ZoneState)> {
    let _lock = zone_lock(ctx, name)?;
    let z = load(ctx, name)?;
    let mut table = read_config_table(name, &z.dir)?;
    edit(&mut table)?;
    let cfg = config::from_table(name, &table)?;
    validate_for_host(ctx, name, &cfg)?;
    let st = z.state(ctx);
    if cfg.template != z.config.template {
        if z.lifecycle.state != ZoneState::Configured {
            return Err(Error::WrongState {
                zone: name.into(),
                state: st,
                remedy: "its template can change only while it is configured; uninstall it first"
                    .into(),
            });
        }
        template::load(&ctx.layout, &cfg.template)?;
    }
    write_config(&z.dir, &cfg)?;
    Ok((cfg, st))
}

/// `warren config set ZONE key=value...`. Changes apply at the next boot.
pub fn config_set(
    ctx: &Context,
    name: &str,
    assignments: &[String],
) -> Result<(ZoneConfig, ZoneState)> {
    edit_config(ctx, name, |t| {
        for a in assignments {
            let (k, v) = config::parse_assignment(name, a)?;
            config::set_in_table(name, t, &k, v)?;
        }
        Ok(())
    })
}

/// `warren config unset ZONE key...`.
pub fn config_unset(ctx: &Context, name: &str, keys: &[String]) -> Result<(ZoneConfig, ZoneState)> {
    edit_config(ctx, name, |t| {
        for k in keys {
            config::unset_in_table(name, t, k)?;
        }
        Ok(())
    })
}

/// The zones `warren boot --autoboot` starts: installed zones with `autoboot = true`.
/// Zones that were running before a host reboot are recorded with the old boot id and
/// so show as installed; this boots those that asked for it.
pub fn boot_autoboot(ctx: &Context) -> Result<Vec<String>> {
    Ok(super::list(ctx)?
        .into_iter()
        .filter(|i| i.state == Some(ZoneState::Installed))
        .filter(|i| i.config.as_ref().is_some_and(|c| c.autoboot))
        .map(|i| i.name)
        .collect())
}
