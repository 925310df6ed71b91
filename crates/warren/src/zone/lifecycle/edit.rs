//! `config set` / `config unset` / `config edit`: edit a zone's config atomically.
//!
//! They work on the stored table, not on the validated config, so they also repair a
//! zone whose `config.toml` holds a value this warren refuses (an edit that makes the
//! whole config valid is accepted) or is missing (set builds it from nothing; edit
//! also takes a file that is not UTF-8 or not TOML). A template change is checked and
//! written under the template's shared lock, so `template delete` cannot remove it
//! in between.

use super::live::{self, ApplyTo, ConfigChange};
use super::*;
use crate::zone::{config_path, read_stored_config, StoredConfig};

/// Under the zone's lock: build the new table from the stored file with `edit`,
/// validate it, and write it durably.
fn edit_config(
    ctx: &Context,
    name: &str,
    to: ApplyTo,
    edit: impl FnOnce(StoredConfig) -> Result<toml::Table>,
) -> Result<ConfigChange> {
    let _lock = zone_lock(ctx, name)?;
    let dir = ctx.layout.zone_dir(name);
    if !dir.is_dir() {
        return Err(Error::NoSuchZone(name.into()));
    }
    let stored = read_stored_config(name, &dir)?;
    let old_cfg = stored
        .table
        .as_ref()
        .ok()
        .and_then(|t| config::from_table(name, t).ok());
    let old_template = stored
        .table
        .as_ref()
        .ok()
        .and_then(|t| t.get("template")?.as_str().map(str::to_string));
    let table = edit(stored)?;
    let cfg = config::from_table(name, &table)?;
    validate_for_host(ctx, name, &cfg)?;
    let lifecycle = state::load_lifecycle(&dir)?.ok_or_else(|| Error::Corrupt {
        path: state::state_path(&dir),
        message: "the file is missing".into(),
    })?;
    let (runtime, torn_runtime) = crate::zone::load_runtime(ctx, name, &dir)?;
    let mut z = Zone {
        name: name.into(),
        runtime,
        torn_runtime,
        dir,
        config: cfg,
        lifecycle,
    };
    let st = z.state(ctx);
    // Held until the config is written: `template delete` takes it exclusively.
    let mut _tlock = None;
    if old_template.as_deref() != Some(z.config.template.as_str()) {
        // With no readable template (a lost config.toml) any existing one may be
        // named: the operator is telling warren which it was.
        if old_template.is_some() && z.lifecycle.state != ZoneState::Configured {
            return Err(Error::WrongState {
                zone: name.into(),
                state: st,
                remedy: "its template can change only while it is configured; uninstall it first"
                    .into(),
            });
        }
        _tlock = Some(lock::shared(&ctx.layout, "template", &z.config.template)?);
        let manifest = template::load(&ctx.layout, &z.config.template)?;
        if let Some(installed) = z.lifecycle.backend.filter(|b| *b != manifest.backend) {
            return Err(Error::config(
                name,
                format!(
                    "template '{}' uses the {} backend but the zone was installed from a {installed} template; name the template it was made from (see 'warren template list')",
                    z.config.template, manifest.backend
                ),
            ));
        }
        fault::pause("config.after-template-check");
    }
    let changed = config::changed_keys(old_cfg.as_ref(), &z.config);
    let (live, next_boot) = live::split(st, &changed, to);
    if to == ApplyTo::LiveOnly {
        if st != ZoneState::Running {
            return Err(Error::WrongState {
                zone: name.into(),
                state: st,
                remedy: "--live-only changes a running zone; drop it to change the config".into(),
            });
        }
        if !next_boot.is_empty() {
            return Err(Error::config(
                name,
                format!(
                    "{} cannot change while the zone runs (live keys: {}); drop --live-only, or use --next-boot",
                    next_boot.join(", "),
                    config::live_keys().join(", ")
                ),
            ));
        }
    }
    // --live-only always writes the running zone's files, even when the config already
    // holds the values: that brings an earlier --live-only change back to the config.
    if !live.is_empty() || to == ApplyTo::LiveOnly {
        let new = z.config.clone();
        live::apply(ctx, &mut z, &new)?;
    }
    let saved = to != ApplyTo::LiveOnly;
    if saved {
        if let Err(e) = write_config(&z.dir, &z.config) {
            // Put the running zone back as it was: the change is all or nothing.
            let undo = match (&old_cfg, live.is_empty()) {
                (Some(old), false) => live::apply(ctx, &mut z, old).err(),
                _ => None,
            };
            return Err(e.with_cleanup(undo));
        }
    }
    if !changed.is_empty() {
        crate::journal::note(
            &ctx.layout,
            crate::journal::EventType::Config,
            "config-changed",
            name,
            serde_json::json!({ "keys": changed, "live": live, "next_boot": next_boot, "saved": saved }),
        );
    }
    Ok(ConfigChange {
        zone: name.into(),
        state: st,
        changed,
        live,
        notes: next_boot
            .iter()
            .filter_map(|k| live::reboot_reason(k, st))
            .map(str::to_string)
            .collect(),
        next_boot,
        saved,
        config: z.config,
    })
}

/// The stored table to edit with `config set`/`unset`: a missing file is an empty
/// table; a file that cannot be parsed is refused (its message says to use `edit`).
fn stored_table(stored: StoredConfig) -> Result<toml::Table> {
    match stored.table {
        Ok(t) => Ok(t),
        Err(_) if stored.missing => Ok(toml::Table::new()),
        Err(Error::BadConfigFile {
            zone,
            path,
            message,
        }) => Err(Error::BadConfigFile {
            message: format!(
                "{message}; 'config set' and 'config unset' need a readable file: use 'warren config edit {zone}'"
            ),
            zone,
            path,
        }),
        Err(e) => Err(e),
    }
}

/// `warren config set ZONE key=value...`: live keys apply to a running zone now
/// (see `live`), the others at its next boot.
pub fn config_set(
    ctx: &Context,
    name: &str,
    assignments: &[String],
    to: ApplyTo,
) -> Result<ConfigChange> {
    edit_config(ctx, name, to, |stored| {
        let mut t = stored_table(stored)?;
        for a in assignments {
            let (k, v) = config::parse_assignment(name, a)?;
            config::set_in_table(name, &mut t, &k, v)?;
        }
        Ok(t)
    })
}

/// `warren config unset ZONE key...`.
pub fn config_unset(
    ctx: &Context,
    name: &str,
    keys: &[String],
    to: ApplyTo,
) -> Result<ConfigChange> {
    edit_config(ctx, name, to, |stored| {
        let mut t = stored_table(stored)?;
        for k in keys {
            config::unset_in_table(name, &mut t, k)?;
        }
        Ok(t)
    })
}

/// The bytes of zone `name`'s `config.toml` as they are (`None` if it is missing),
/// for `config edit` and `config show` of a damaged file.
pub fn config_bytes(ctx: &Context, name: &str) -> Result<Option<Vec<u8>>> {
    names::zone(name)?;
    let dir = ctx.layout.zone_dir(name);
    if !dir.is_dir() {
        return Err(Error::NoSuchZone(name.into()));
    }
    match crate::fsutil::read_bounded(&config_path(&dir), MAX_SMALL_FILE) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::BadConfigFile {
            zone: name.into(),
            path: config_path(&dir),
            message: e.to_string(),
        }),
    }
}

/// `warren config edit`'s write: replace the config with `text` if the file still
/// holds `original` (what the editor was given; `None` = it was missing).
pub fn config_replace(
    ctx: &Context,
    name: &str,
    original: Option<&[u8]>,
    text: &str,
) -> Result<ConfigChange> {
    edit_config(ctx, name, ApplyTo::Both, |stored| {
        if stored.bytes.as_deref() != original {
            return Err(Error::Invalid(format!(
                "zone '{name}': {} changed while it was being edited; edit it again",
                stored.path.display()
            )));
        }
        text.parse::<toml::Table>().map_err(|e| {
            Error::config(
                name,
                format!(
                    "the edited config is not valid TOML: {}; fix it and run 'warren config edit {name}' again",
                    e.message().trim()
                ),
            )
        })
    })
}
