//! The verbs that make and remove a zone's files: create, install, clone, uninstall,
//! delete. A new zone is built in a temporary directory and renamed into place; an
//! interrupted install or uninstall leaves `incomplete`, which the next one finishes.

use super::*;

/// `warren create` without profiles (demo and bench zones): a new zone in state
/// configured.
pub fn create(
    ctx: &Context,
    name: &str,
    template_name: Option<&str>,
    config_file: Option<&Path>,
    sets: &[String],
) -> Result<ZoneConfig> {
    create_with_profiles(ctx, name, template_name, config_file, sets, None)
}

/// `warren create`: a new zone in state configured, its config made from the profiles
/// (`Some`: the `default` profile, then these; see `crate::profile`), then the config
/// file, then `--template`, then `--set`.
pub fn create_with_profiles(
    ctx: &Context,
    name: &str,
    template_name: Option<&str>,
    config_file: Option<&Path>,
    sets: &[String],
    profiles: Option<&[String]>,
) -> Result<ZoneConfig> {
    names::zone(name)?;
    let (mut table, applied) = match profiles {
        Some(p) => crate::profile::merged(&ctx.layout, p)?,
        None => (toml::Table::new(), Vec::new()),
    };
    let own = match config_file {
        Some(path) => {
            let text = read_text_bounded(path, MAX_SMALL_FILE).map_err(|e| {
                Error::Invalid(format!(
                    "zone '{name}': --config {}: {e}; give a TOML config file (keys: 'warren config keys')",
                    path.display()
                ))
            })?;
            text.parse::<toml::Table>().map_err(|e| {
                Error::config(
                    name,
                    format!(
                        "{} is not valid TOML{}: {}; fix the syntax (examples: 'warren config keys')",
                        path.display(),
                        e.span()
                            .map(|s| format!(
                                " (line {})",
                                text[..s.start].matches('\n').count() + 1
                            ))
                            .unwrap_or_default(),
                        e.message().trim()
                    ),
                )
            })?
        }
        None => {
            let mut t = config::to_table(&ZoneConfig::new("host"));
            // The built-in template and network give way to a profile's.
            t.retain(|k, _| !table.contains_key(k));
            t
        }
    };
    crate::profile::overlay(name, &mut table, &own)?;
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
        let lc = Lifecycle {
            profiles: applied,
            ..Lifecycle::configured()
        };
        state::save_lifecycle(&tmp, &lc)?;
        fs::rename(&tmp, &dir)
            .ctx(|| format!("renaming {} to {}", tmp.display(), dir.display()))?;
        sync_dir(&zones).ctx(|| format!("syncing {}", zones.display()))
    })();
    if result.is_err() {
        let _ = remove_tree(&tmp);
    }
    result.map(|_| {
        let detail = serde_json::json!({ "template": cfg.template });
        journal(ctx, "created", name, detail);
        cfg
    })
}

/// Journal a lifecycle event ([`crate::journal`], best effort).
fn journal(ctx: &Context, action: &str, name: &str, detail: serde_json::Value) {
    crate::journal::note(
        &ctx.layout,
        crate::journal::EventType::Lifecycle,
        action,
        name,
        detail,
    );
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
            z.lifecycle = Lifecycle {
                profiles: std::mem::take(&mut z.lifecycle.profiles),
                ..Lifecycle::configured()
            };
            state::save_lifecycle(&z.dir, &z.lifecycle)
        });
        return Err(e.with_cleanup(cleanup.err()));
    }
    fault::point("install.after-backend");
    let mut owner = 0;
    if z.config.userns {
        let r = idmap::allocate(&ctx.host, &ctx.layout, name, z.config.userns_base)?;
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
    journal(
        ctx,
        "installed",
        name,
        serde_json::json!({ "backend": manifest.backend }),
    );
    Ok(Outcome::Done)
}

/// `warren clone SRC NEW`: NEW is installed with a copy-on-write copy of SRC's root.
pub fn clone(ctx: &Context, src: &str, dst: &str) -> Result<()> {
    clone_from(ctx, src, dst, None)
}

/// `warren clone [--snapshot NAME] SRC NEW`: NEW is installed with a copy-on-write
/// copy of SRC's layer, or of its snapshot NAME. A running SRC is frozen while its
/// layer is copied (crash-consistent, see `zone::freeze`).
pub fn clone_from(ctx: &Context, src: &str, dst: &str, snapshot: Option<&str>) -> Result<()> {
    ctx.require_root()?;
    names::zone(src)?;
    names::zone(dst)?;
    if src == dst {
        return Err(Error::Invalid(format!(
            "zone '{src}': cannot clone a zone onto itself; give the clone another name"
        )));
    }
    // Lock in name order so two opposite clones cannot deadlock. The source's lock is
    // shared (many clones of one halted source run at once, `zone::pipeline`) unless
    // a running source must be frozen and thawed, which this command then does alone.
    let lock_pair = |src_exclusive: bool| -> Result<(lock::Lock, lock::Lock)> {
        let source_lock = || match src_exclusive {
            true => lock::exclusive(&ctx.layout, "zone", src),
            false => lock::shared(&ctx.layout, "zone", src),
        };
        Ok(if src < dst {
            let a = source_lock()?;
            (a, lock::exclusive(&ctx.layout, "zone", dst)?)
        } else {
            let b = lock::exclusive(&ctx.layout, "zone", dst)?;
            (source_lock()?, b)
        })
    };
    let mut locks = lock_pair(false)?;
    // Under a shared lock the source is only read (no repair: that needs it alone).
    let mut source = load(ctx, src)?;
    if snapshot.is_none() && source.state(ctx) == ZoneState::Running {
        drop(locks);
        locks = lock_pair(true)?;
        source = load_locked(ctx, src)?;
    }
    let _locks = locks;
    let from_snapshot = match snapshot {
        Some(name) => Some(crate::zone::snapshot::existing(&source, name)?),
        None => {
            state::check(src, Verb::CloneFrom, source.state(ctx))?;
            None
        }
    };
    let kind = match &from_snapshot {
        Some((_, meta)) => meta.backend,
        None => source.lifecycle.backend.ok_or_else(|| Error::Corrupt {
            path: state::state_path(&source.dir),
            message: "an installed zone without a storage backend".into(),
        })?,
    };
    let from_dir = from_snapshot
        .as_ref()
        .map_or(source.dir.clone(), |(d, _)| d.clone());
    let from_idmap = from_snapshot
        .as_ref()
        .map_or(source.lifecycle.idmap, |(_, m)| m.idmap);
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
    let mut range: Option<IdRange> = None;
    let result = (|| {
        if cfg.userns {
            range = Some(idmap::allocate(&ctx.host, &ctx.layout, dst, None)?);
        }
        let range = range;
        mkdir_mode(&tmp, 0o700).ctx(|| format!("creating {}", tmp.display()))?;
        fault::point("clone.after-mkdir");
        // Nothing in the new directory is synced as it is written: one pass below
        // makes all of it durable before the rename publishes it (docs/recovery.md,
        // "Clone's durability").
        let path = super::super::config_path(&tmp);
        atomic_write(&path, config::to_toml(&cfg).as_bytes(), false)
            .ctx(|| format!("writing {}", path.display()))?;
        // The clone's layer moves from the source's id range to the clone's in the
        // copy itself (a tenant's chown of its `/` does not hide which range it is).
        let to = range.unwrap_or(IdRange::new(0));
        let image = crate::quota::image(&from_dir).is_some();
        let shift = match be.root_mount(&troot, &from_dir) {
            RootMount::Overlay { upper, .. } if !image => {
                let from = upper_owner(src, &upper, from_idmap)?;
                (from != to).then_some(crate::treeops::Shift { from, to })
            }
            _ => None,
        };
        let copy = || {
            be.clone_zone(&from_dir, &tmp, shift)?;
            if image {
                crate::quota::copy_image(&from_dir, &tmp)?;
            }
            Ok(())
        };
        // A snapshot is not written by the zone: only the live layer needs a freeze.
        match from_snapshot {
            Some(_) => copy()?,
            None => crate::zone::freeze::with_frozen(ctx, &mut source, copy)?,
        }
        if image {
            crate::quota::shift_image(dst, &tmp, to)?;
        }
        fault::point("clone.after-copy");
        let lc = Lifecycle {
            state: ZoneState::Installed,
            backend: Some(kind),
            idmap: range,
            profiles: source.lifecycle.profiles.clone(),
            ..Lifecycle::configured()
        };
        let path = state::state_path(&tmp);
        let json = serde_json::to_vec_pretty(&lc).expect("state serialises");
        atomic_write(&path, &json, false).ctx(|| format!("writing {}", path.display()))?;
        fault::point("clone.after-state");
        crate::treeops::sync_tree(&tmp).ctx(|| format!("syncing {}", tmp.display()))?;
        fault::point("clone.after-sync");
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
        // The range allocated (given back to the list of free ranges); none known
        // when the allocation itself failed: then any entry of the name is removed.
        .and_then(|_| idmap::release(&ctx.layout, dst, range));
        return Err(e.with_cleanup(cleanup.err()));
    }
    journal(
        ctx,
        "cloned",
        dst,
        serde_json::json!({ "source": src, "snapshot": snapshot }),
    );
    Ok(())
}

fn uninstall_locked(z: &mut Zone) -> Result<()> {
    if let Some(kind) = z.lifecycle.backend {
        z.lifecycle.state = ZoneState::Incomplete;
        z.lifecycle.incomplete_op = Some("uninstall".into());
        state::save_lifecycle(&z.dir, &z.lifecycle)?;
        fault::point("uninstall.after-incomplete");
        crate::zone::snapshot::remove_all(kind, &z.dir)?;
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
    z.lifecycle = Lifecycle {
        profiles: std::mem::take(&mut z.lifecycle.profiles),
        ..Lifecycle::configured()
    };
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
    journal(ctx, "uninstalled", name, serde_json::json!({}));
    Ok(Outcome::Done)
}

/// `warren delete`: remove a configured zone; with `force`, whatever its state and
/// whatever state its files are in: a running zone is stopped (by its record, or by
/// its cgroups' name when the record is unreadable), then the directory is renamed
/// aside and removed whole (a btrfs root subvolume included), so nothing needs to be
/// written first and a full state filesystem does not stop it. Returns the stop's
/// warnings (the zone is deleted all the same).
pub fn delete(ctx: &Context, name: &str, force: bool) -> Result<Vec<String>> {
    names::zone(name)?;
    let _lock = zone_lock(ctx, name)?;
    let dir = ctx.layout.zone_dir(name);
    let range;
    let mut warnings = Vec::new();
    match load_locked(ctx, name) {
        Ok(mut z) => {
            range = z.lifecycle.idmap;
            if !force {
                state::check(name, Verb::Delete, z.state(ctx))?;
            } else if z.state(ctx) >= ZoneState::Ready {
                ctx.require_root()?;
                let halted = halt_locked(
                    ctx,
                    &mut z,
                    Some(Duration::from_secs(5)),
                    "halted for its deletion",
                )?;
                warnings = halted.warnings;
            } else if z.lifecycle.state != ZoneState::Configured {
                ctx.require_root()?;
            }
        }
        Err(Error::NoSuchZone(n)) => return Err(Error::NoSuchZone(n)),
        // A zone whose files are unreadable, damaged or missing (or whose lock or
        // reconcile failed on them) can still be removed by force.
        Err(e) if force && dir.symlink_metadata().is_ok() => {
            ctx.require_root()?;
            warnings =
                force_stop_unreadable(ctx, name, &dir).map_err(|c| e.with_cleanup(Some(c)))?;
            range = state::load_lifecycle(&dir)
                .ok()
                .flatten()
                .and_then(|l| l.idmap);
        }
        Err(e) => return Err(e),
    }
    let zones = ctx.layout.zones();
    let trash = zones.join(format!(".del-{name}-{}", unique_suffix()));
    fs::rename(&dir, &trash).ctx(|| format!("renaming {}", dir.display()))?;
    // Durability of the rename is best effort: a lost one leaves the zone, deleted again.
    let _ = sync_dir(&zones);
    fault::point("delete.after-rename");
    super::super::gc::remove_leftover(&trash)?;
    // The zone is gone; a range that cannot be freed now (a damaged `userns/`) is
    // freed by 'warren gc' (ranges of vanished zones).
    if let Err(e) = idmap::release(&ctx.layout, name, range) {
        eprintln!(
            "warren: zone '{name}': deleted, but freeing its id range failed ({e}); 'warren gc' frees it once {} is repaired",
            ctx.layout.root().join("userns").display()
        );
    }
    journal(ctx, "deleted", name, serde_json::json!({}));
    Ok(warnings)
}

/// Stop whatever zone `name` runs when its files cannot be loaded: by its runtime
/// record if that parses, and by its cgroups' name in any case. Returns the stop's
/// warnings.
fn force_stop_unreadable(ctx: &Context, name: &str, dir: &Path) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    if let Ok(Some(rt)) = state::load_runtime(dir) {
        let suspended = rt.state == ZoneState::Suspended || rt.cgroups.is_frozen();
        rt.cgroups.kill_all(Duration::from_secs(5))?;
        rt.cgroups.remove(Duration::from_secs(5))?;
        if let (true, Some(init)) = (suspended, rt.init) {
            warnings.extend(crate::agent::control::release_for_halt(
                &ctx.layout,
                name,
                init.pid,
                "stopped for its deletion",
            ));
        }
        if let Some(net) = &rt.net {
            if let Err(e) = crate::net::release(&ctx.layout, name, net) {
                super::run::warn(name, "releasing its network lease", &e);
            }
        }
    }
    crate::zone::records::clean_by_name(ctx, name)?;
    Ok(warnings)
}
