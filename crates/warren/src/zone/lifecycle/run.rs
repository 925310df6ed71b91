//! The verbs of a running zone: boot, halt, evict, reboot, login, autoboot.

use super::*;

/// Timings of one boot, for the demo and benchmarks.
#[derive(Debug, Clone, Copy, Default)]
pub struct BootReport {
    pub cgroups: Duration,
    pub spawn: Duration,
    pub total: Duration,
    pub init_pid: Option<i32>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What `doctor::admit` checks for zone `z`. Host root is exempt from RLIMIT_NPROC; a
/// user-namespaced zone's host id is not, and its own `rlimit.nproc` replaces warren's.
fn admission(
    ctx: &Context,
    z: &Zone,
    version: crate::cgroups::CgroupVersion,
) -> doctor::AdmitSnapshot {
    let mut kinds = vec!["mnt", "pid", "uts", "ipc", "cgroup"];
    if z.config.net != NetMode::Host {
        kinds.push("net");
    }
    if z.config.userns {
        kinds.push("user");
    }
    let mut s = doctor::admit::read(&ctx.host.proc, Some(version), z.config.userns, &kinds);
    if let Some(l) = z.config.rlimits.get("nproc") {
        s.nproc = z.config.userns.then_some(l.soft).filter(|n| *n != u64::MAX);
    }
    s
}

/// How a run that ended during boot ended, recorded in the zone's lifecycle and
/// journal ("exited").
fn record_exit(
    ctx: &Context,
    (name, dir): (&str, &Path),
    lifecycle: &mut Lifecycle,
    e: &Error,
    oom_kills: u64,
) {
    if let Error::InitExited { code, signal, .. } = e {
        lifecycle.last_run = Some(state::LastRun {
            at_ms: now_ms(),
            exited: true,
            status: *code,
            signal: *signal,
            oom_kills,
        });
        let _ = state::save_lifecycle(dir, lifecycle);
        crate::journal::note(
            &ctx.layout,
            crate::journal::EventType::Lifecycle,
            "exited",
            name,
            serde_json::json!({ "status": code, "signal": signal, "oom_kills": oom_kills, "during": "boot" }),
        );
    }
}

/// Boot a loaded, locked, reconciled zone; then watch its init for `watch` (see
/// [`runtime::BOOT_WATCH`]).
fn boot_locked(ctx: &Context, z: &mut Zone, watch: Duration) -> Result<BootReport> {
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
    // The zones' shared /dev, checked (and repaired) before anything is made.
    let dev = runtime::devdir::ensure(ctx.layout.root())?;
    // Admission: refuse before any cgroup exists when a host limit leaves no room for
    // the zone's init and services (a few small reads; see doctor::admit).
    let zone_tasks = 1 + z.config.services.len() as u64;
    let (driver, hierarchy) = ctx.cgroups()?;
    doctor::admit(&z.name, &admission(ctx, z, hierarchy.version), zone_tasks)?;
    let defaults = crate::config::Defaults::load(ctx.layout.root())?;
    let limits = ctx.effective_limits(&z.config)?;
    // Before any cgroup exists: a zone requiring /proc views without lxcfs is refused.
    let views = crate::procviews::for_boot(&z.name, &z.config, &defaults, &ctx.host.proc)?;
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
        suspension: None,
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
        dev: &dev,
        init_exe: &init_exe,
        proc_root: &ctx.host.proc,
        net: rt.net.as_ref(),
        idmap,
        disk: disk.as_ref(),
        views: views.as_ref(),
        image: manifest.image.as_ref(),
    };
    // Host-wide: no running zone of any state root holds this range (idmap::running).
    if let Some(r) = idmap {
        if let Err(e) = idmap::running::claim(&ctx.host, &ctx.layout, &z.name, r) {
            return Err(undo(&rt, e));
        }
    }
    let release_claim = || {
        if let Some(r) = idmap {
            let _ = idmap::running::release(&ctx.host, &ctx.layout, &z.name, r);
        }
    };
    let t1 = Instant::now();
    let booted = match runtime::boot(&spec) {
        Ok(b) => b,
        Err(e) => {
            release_claim();
            let oom = rt.cgroups.oom_kills().unwrap_or(0);
            record_exit(ctx, (&z.name, &z.dir), &mut z.lifecycle, &e, oom);
            // A process limit hit after admission (the host filled up meanwhile): name
            // the limit, if admission now sees which, rather than the candidates.
            let e = match &e {
                Error::Io { source, .. }
                    if source.raw_os_error() == Some(warren_sys::libc::EAGAIN) =>
                {
                    let again = admission(ctx, z, hierarchy.version);
                    doctor::admit(&z.name, &again, zone_tasks)
                        .err()
                        .unwrap_or(e)
                }
                _ => e,
            };
            return Err(undo(&rt, e));
        }
    };
    let t_spawn = t1.elapsed();
    fault::point("boot.after-spawn");
    rt.state = ZoneState::Running;
    rt.init = Some(booted.init);
    rt.booted_at_ms = now_ms();
    if let Err(e) = state::save_runtime(&z.dir, &rt) {
        release_claim();
        return Err(undo(&rt, e));
    }
    let total = t0.elapsed();
    if !watch.is_zero() {
        // The boot's work is done: in a pipeline (`boot --all`) the next zone starts
        // while this one's init is watched.
        crate::zone::pipeline::release_slot();
        if let Some(status) = runtime::watch(booted.init.pid, watch) {
            release_claim();
            let e =
                runtime::init_exited(&z.name, Some(status), booted.console.as_ref(), spec.console);
            let oom = rt.cgroups.oom_kills().unwrap_or(0);
            record_exit(ctx, (&z.name, &z.dir), &mut z.lifecycle, &e, oom);
            return Err(undo(&rt, e));
        }
    }
    z.runtime = Some(rt);
    // Booted again: the eviction and the last run's end are history (they stay in
    // events.jsonl).
    if z.lifecycle.evicted.take().is_some() | z.lifecycle.last_run.take().is_some() {
        state::save_lifecycle(&z.dir, &z.lifecycle)?;
    }
    crate::journal::note(
        &ctx.layout,
        crate::journal::EventType::Lifecycle,
        "booted",
        &z.name,
        serde_json::json!({ "boot_ms": total.as_secs_f64() * 1000.0, "init_pid": booted.init.pid }),
    );
    Ok(BootReport {
        cgroups: t_cg,
        spawn: t_spawn,
        total,
        init_pid: Some(booted.init.pid),
    })
}

/// Boot without watching init (benchmarks, the demo, the agent); see [`boot_watched`].
pub fn boot(ctx: &Context, name: &str) -> Result<(Outcome, BootReport)> {
    boot_watched(ctx, name, Duration::ZERO)
}

/// `warren boot`: installed → running. Booting a running zone succeeds and says so.
/// With `watch` (the CLI: [`runtime::BOOT_WATCH`]) an init that ends within it makes
/// the boot fail with its exit status and the console's last lines
/// ([`Error::InitExited`]), recorded in the zone's lifecycle.
pub fn boot_watched(ctx: &Context, name: &str, watch: Duration) -> Result<(Outcome, BootReport)> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, name)?;
    let mut z = load_locked(ctx, name)?;
    if let Decision::AlreadyDone(m) = state::check(name, Verb::Boot, z.state(ctx))? {
        return Ok((Outcome::AlreadyDone(m), BootReport::default()));
    }
    let report = boot_locked(ctx, &mut z, watch)?;
    Ok((Outcome::Done, report))
}

/// What a halt did: whether init stopped gracefully, and what the verb should say
/// beside its result (the halt is done all the same).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Halted {
    pub graceful: bool,
    pub warnings: Vec<String>,
    /// What the halt left for its caller when asked to ([`halt_keeping_cgroups`]);
    /// the caller finishes it ([`remove_kept_cgroups`]).
    pub kept: Option<Kept>,
}

/// What [`halt_keeping_cgroups`] leaves for its caller, who halts many zones and
/// finishes each once all are stopped ([`remove_kept_cgroups`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Kept {
    /// The zone's emptied cgroups.
    pub cgroups: crate::cgroups::CgroupSet,
    /// Its claim in the host's id-range registry (`idmap::running`), stale from the
    /// halt on: released one halt after another without contention, instead of by
    /// every halt under the registry's host-wide lock. At 10,000 zones, 16 halts in
    /// flight waited for that lock more than 30 ms in 1,364 of 10,000 halts (up to
    /// 324 ms: a holder preempted on the busy CPUs; docs/scaling.md, "Tenth pass").
    pub claim: Option<IdRange>,
}

/// Halt zone `z` (locked); `done` says what the verb did, for its warnings ("halted",
/// "halted for its reboot", …).
pub(in crate::zone) fn halt_locked(
    ctx: &Context,
    z: &mut Zone,
    timeout: Option<Duration>,
    done: &str,
) -> Result<Halted> {
    halt_locked_as(ctx, z, timeout, done, true)
}

/// [`halt_locked`], removing the zone's cgroups or (`remove_cgroups` false) returning
/// them in [`Halted::kept`].
fn halt_locked_as(
    ctx: &Context,
    z: &mut Zone,
    timeout: Option<Duration>,
    done: &str,
    remove_cgroups: bool,
) -> Result<Halted> {
    let Some(mut rt) = z.runtime.take() else {
        return Ok(Halted {
            graceful: true,
            warnings: Vec::new(),
            kept: None,
        });
    };
    let mut warnings = Vec::new();
    // Suspended when the halt began: only then can an agent hold its sockets.
    let suspended = rt.state == ZoneState::Suspended || rt.cgroups.is_frozen();
    // Stopping never depends on writing first (a full state filesystem must not keep
    // anyone from stopping zones to make room): `shutting_down` is recorded if it can
    // be; if not, the record still says running, and once init is gone the next
    // command sees it stale and cleans up after it.
    rt.state = ZoneState::ShuttingDown;
    let recorded = state::save_runtime(&z.dir, &rt);
    fault::point("halt.after-shutting-down");
    let timeout = timeout
        .or(z.config.stop_timeout.map(Duration::from_secs))
        .unwrap_or(DEFAULT_STOP_TIMEOUT);
    let oom_kills = rt.cgroups.oom_kills().unwrap_or(0);
    if suspended {
        // Suspended: a frozen init cannot act on SIGTERM. Its memory comes back as the
        // shutdown touches it.
        if let Err(e) = rt
            .cgroups
            .set_frozen(false, crate::cgroups::freeze::FREEZE_TIMEOUT)
        {
            warn(
                &z.name,
                "thawing it for its halt (it is killed instead)",
                &e.into(),
            );
        }
    }
    let outcome = runtime::stop(
        rt.init,
        &rt.cgroups,
        timeout,
        &ctx.host.proc,
        &z.dir.join("console.log"),
        remove_cgroups,
    )?;
    fault::point("halt.after-stop");
    // The zone's processes are gone; an agent holding its sockets (a suspended zone's
    // listeners; no other zone's) lets go now, so a boot right after this finds its
    // ports free (bounded: a stuck agent delays the halt by at most 2 s, said in the
    // verb's warnings). The init names this suspension to the agent.
    if let (true, Some(init)) = (suspended, rt.init) {
        warnings.extend(crate::agent::control::release_for_halt(
            &ctx.layout,
            &z.name,
            init.pid,
            done,
        ));
    }
    if let Err(e) = recorded {
        warn(&z.name, "recording shutting_down before the stop", &e);
    }
    if let Some(net) = &rt.net {
        // Writes the lease file: on a full disk the lease stays, and gc frees it (a
        // lease whose zone is not running is stale).
        if let Err(e) = crate::net::release(&ctx.layout, &z.name, net) {
            warn(&z.name, "releasing its network lease", &e);
        }
    }
    if let Some(r) = z.lifecycle.idmap.filter(|_| remove_cgroups) {
        if let Err(e) = idmap::running::release(&ctx.host, &ctx.layout, &z.name, r) {
            warn(
                &z.name,
                "releasing its claim in the host's id-range registry",
                &e,
            );
        }
    }
    state::remove_runtime(&z.dir)?;
    if oom_kills > 0 {
        crate::journal::note(
            &ctx.layout,
            crate::journal::EventType::Lifecycle,
            "oom",
            &z.name,
            serde_json::json!({ "oom_kills": oom_kills }),
        );
        z.lifecycle.last_run = Some(state::LastRun {
            at_ms: now_ms(),
            exited: false,
            status: None,
            signal: None,
            oom_kills,
        });
        state::save_lifecycle(&z.dir, &z.lifecycle)?;
    }
    crate::journal::note(
        &ctx.layout,
        crate::journal::EventType::Lifecycle,
        "halted",
        &z.name,
        serde_json::json!({ "graceful": outcome.graceful, "oom_kills": oom_kills }),
    );
    Ok(Halted {
        graceful: outcome.graceful,
        warnings,
        kept: (!remove_cgroups).then_some(Kept {
            cgroups: rt.cgroups,
            claim: z.lifecycle.idmap,
        }),
    })
}

/// A step after a zone was stopped that could not be recorded: the zone is stopped
/// all the same, and the next command (or `warren gc`) repairs the record.
pub(in crate::zone) fn warn(zone: &str, what: &str, e: &Error) {
    eprintln!(
        "warren: zone '{zone}': {what} failed ({e}); the zone is stopped; 'warren gc' repairs the record once the state filesystem has room"
    );
}

/// `warren halt`: running → installed. Returns whether init stopped gracefully, and
/// the halt's warnings.
pub fn halt(ctx: &Context, name: &str, timeout: Option<Duration>) -> Result<(Outcome, Halted)> {
    halt_as(ctx, name, timeout, true)
}

/// [`halt`], leaving the zone's emptied cgroups in place and returning them in
/// [`Halted::kept`] for [`remove_kept_cgroups`]: `halt --all` removes every zone's
/// cgroups once all the zones are stopped. Removing a memory cgroup makes the kernel
/// walk every memcg-aware LRU list on the host (two per superblock, and every running
/// zone has four superblocks) to reparent its entries, under one host-wide mutex: at
/// 10,000 zones that walk, once per halted zone, took 61 % of the CPU of `halt --all`
/// (docs/scaling.md, "Sixth pass"). Once the zones are stopped their superblocks are
/// gone and each walk is short.
pub fn halt_keeping_cgroups(
    ctx: &Context,
    name: &str,
    timeout: Option<Duration>,
) -> Result<(Outcome, Halted)> {
    halt_as(ctx, name, timeout, false)
}

fn halt_as(
    ctx: &Context,
    name: &str,
    timeout: Option<Duration>,
    remove_cgroups: bool,
) -> Result<(Outcome, Halted)> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, name)?;
    let mut z = load_locked(ctx, name)?;
    if let Decision::AlreadyDone(m) = state::check(name, Verb::Halt, z.state(ctx))? {
        return Ok((
            Outcome::AlreadyDone(m),
            Halted {
                graceful: true,
                warnings: Vec::new(),
                kept: None,
            },
        ));
    }
    let halted = halt_locked_as(ctx, &mut z, timeout, "halted", remove_cgroups)?;
    Ok((Outcome::Done, halted))
}

/// Whether a zone's cgroup directories are free to remove, decided under the zone's
/// lock (tried, never waited for) from its records as they are. One answer for `halt
/// --all`'s late removal ([`remove_kept_cgroups`]) and `warren gc`'s sweep; neither
/// repairs the zone here (`reconcile` would find its cgroups by name and remove them
/// again): gc has reconciled every zone before its sweep, and the late removal comes
/// right after the zone's own halt.
pub(in crate::zone) enum CgroupClaim {
    /// Halted, or deleted: nothing runs in its cgroups. Remove them while holding the lock.
    Free(Lock),
    /// It runs (booted again since, or never stopped) in `dirs`; any other directory of
    /// its name is free while the lock is held.
    Running {
        lock: Lock,
        dirs: Vec<std::path::PathBuf>,
    },
    /// Another command holds its lock, or its files cannot be read: keep them.
    Unknown(String),
}

pub(in crate::zone) fn cgroup_claim(ctx: &Context, name: &str) -> CgroupClaim {
    let path = ctx.layout.lock_file("zone", name);
    match crate::lock::try_exclusive_path(&path) {
        Ok(Some(lock)) => match load(ctx, name) {
            Ok(Zone {
                runtime: Some(rt), ..
            }) => CgroupClaim::Running {
                lock,
                dirs: rt.cgroups.dirs.into_iter().map(|(_, d)| d).collect(),
            },
            // Halted, deleted, or a torn runtime record (stale: `Zone::torn_runtime`).
            Ok(_) | Err(Error::NoSuchZone(_)) => CgroupClaim::Free(lock),
            Err(e) => CgroupClaim::Unknown(e.to_string()),
        },
        Ok(None) => CgroupClaim::Unknown("another command holds its lock".to_string()),
        Err(e) => CgroupClaim::Unknown(e.to_string()),
    }
}

/// Finish what [`halt_keeping_cgroups`] left, zone by zone, under the zone's lock:
/// its cgroups are removed and its id-range claim released, but only what the zone
/// does not use ([`cgroup_claim`]: a zone booted since reuses its directories and
/// holds its claim again, and keeps both). A zone whose lock another command holds
/// is skipped (never waited for): `warren gc` removes cgroups no running zone claims
/// and sweeps stale claims. Returns a warning per zone whose cgroups stay.
pub fn remove_kept_cgroups(ctx: &Context, kept: Vec<(String, Kept)>) -> Vec<String> {
    let mut warnings = Vec::new();
    for (name, Kept { mut cgroups, claim }) in kept {
        let left = match cgroup_claim(ctx, &name) {
            CgroupClaim::Free(_lock) => {
                if let Some(r) = claim {
                    if let Err(e) = idmap::running::release(&ctx.host, &ctx.layout, &name, r) {
                        warnings.push(format!(
                            "zone '{name}': halted, but releasing its claim in the host's id-range registry failed ({e}); 'warren gc' sweeps it"
                        ));
                    }
                }
                cgroups
                    .remove(Duration::from_secs(5))
                    .map_err(|e| e.to_string())
            }
            CgroupClaim::Running { lock: _lock, dirs } => {
                cgroups.dirs.retain(|(_, d)| !dirs.contains(d));
                cgroups
                    .remove(Duration::from_secs(5))
                    .map_err(|e| e.to_string())
            }
            CgroupClaim::Unknown(why) => Err(why),
        };
        if let Err(e) = left {
            warnings.push(format!(
                "zone '{name}': halted, but its cgroups stay for now ({e}); 'warren gc' removes them"
            ));
        }
    }
    warnings
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
    // The agent evicts: it lets go of the zone itself (never a warning here).
    let graceful = halt_locked(ctx, &mut z, Some(timeout), "evicted")?.graceful;
    z.lifecycle.evicted = Some(reason.to_string());
    // The eviction is done; its reason is recorded if there is room (events.jsonl, the
    // agent's log, has it too).
    if let Err(e) = state::save_lifecycle(&z.dir, &z.lifecycle) {
        warn(name, "recording the eviction's reason", &e);
    }
    crate::journal::note(
        &ctx.layout,
        crate::journal::EventType::Lifecycle,
        "evicted",
        name,
        serde_json::json!({ "reason": reason, "graceful": graceful }),
    );
    Ok(Some(graceful))
}

/// `warren reboot`: halt then boot, under one lock. Returns the halt's warnings.
pub fn reboot(ctx: &Context, name: &str, timeout: Option<Duration>) -> Result<Vec<String>> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, name)?;
    let mut z = load_locked(ctx, name)?;
    state::check(name, Verb::Reboot, z.state(ctx))?;
    let halted = halt_locked(ctx, &mut z, timeout, "halted for its reboot")?;
    boot_locked(ctx, &mut z, runtime::BOOT_WATCH)?;
    Ok(halted.warnings)
}

/// `warren login`: run `req` (or a login shell) inside the running zone.
pub fn login(ctx: &Context, name: &str, req: &runtime::login::Request<'_>) -> Result<i32> {
    ctx.require_root()?;
    let mut z = load(ctx, name)?;
    if state::check(name, Verb::Login, z.state(ctx))? == Decision::Proceed
        && z.state(ctx) == ZoneState::Suspended
    {
        super::suspend::wake(ctx, name)?;
        z = load(ctx, name)?;
        state::check(name, Verb::Login, z.state(ctx))?;
    }
    let rt = z
        .runtime
        .as_ref()
        .expect("a running zone has a runtime record");
    let init = rt.init.expect("a running zone has an init");
    let confinement = crate::isolation::Confinement::for_zone(&z.config);
    let zone = runtime::login::ZoneRef {
        zone: name,
        init,
        cgroups: &rt.cgroups,
        confinement: &confinement,
        rlimits: &z.config.rlimits,
        env: &z.config.env,
        proc_root: &ctx.host.proc,
    };
    runtime::login::login(&zone, req)
}

/// The zones `warren boot --autoboot` starts: installed zones with `autoboot = true`.
/// Zones that were running before a host reboot are recorded with the old boot id and
/// so show as installed; this boots those that asked for it.
pub fn boot_autoboot(ctx: &Context) -> Result<Vec<String>> {
    Ok(crate::zone::list(ctx)?
        .into_iter()
        .filter(|i| i.state == Some(ZoneState::Installed))
        .filter(|i| i.config.as_ref().is_some_and(|c| c.autoboot))
        .map(|i| i.name)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::{CgroupSet, CgroupVersion};
    use crate::layout::{HostPaths, Layout};

    /// `halt --all`'s late removal: the cgroups of a zone that no longer exists go and
    /// its id-range claim is released; a zone another command holds keeps both, with a
    /// warning that names it and gc. (Empty directories stand in for the cgroups:
    /// without memory.stat there is nothing to reclaim, and a removal is an rmdir.)
    #[test]
    fn kept_cgroups_and_claims_go_unless_another_command_holds_the_zone() {
        let d = tempfile::tempdir().unwrap();
        let host = HostPaths {
            run: d.path().join("run"),
            ..HostPaths::default()
        };
        let ctx = Context::new(Layout::new(d.path().join("root")), host);
        std::fs::create_dir_all(ctx.layout.locks()).unwrap();
        let kept = |name: &str, base: u32| {
            let dir = d.path().join("cg").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            let r = IdRange::new(base);
            idmap::running::claim(&ctx.host, &ctx.layout, name, r).unwrap();
            Kept {
                cgroups: CgroupSet {
                    version: CgroupVersion::V1,
                    dirs: vec![("pids".into(), dir)],
                },
                claim: Some(r),
            }
        };
        let (gone, busy) = (kept("gone", 1 << 20), kept("busy", 2 << 20));
        let held = crate::lock::try_exclusive_path(&ctx.layout.lock_file("zone", "busy"))
            .unwrap()
            .unwrap();
        let warnings = remove_kept_cgroups(
            &ctx,
            vec![("gone".into(), gone.clone()), ("busy".into(), busy.clone())],
        );
        assert!(
            !gone.cgroups.dirs[0].1.exists(),
            "a deleted zone's cgroups stayed"
        );
        assert!(
            !idmap::running::is_claimed(&ctx.host, 1 << 20),
            "a deleted zone's claim stayed"
        );
        assert!(
            busy.cgroups.dirs[0].1.exists(),
            "a busy zone's cgroups were removed"
        );
        assert!(
            idmap::running::is_claimed(&ctx.host, 2 << 20),
            "a busy zone's claim was released"
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("zone 'busy'") && warnings[0].contains("warren gc"),
            "{warnings:?}"
        );
        drop(held);
    }
}
