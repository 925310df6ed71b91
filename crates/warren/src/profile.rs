//! Profiles: named sets of config keys that new zones start from (zonecfg templates,
//! Incus profiles).
//!
//! A profile holds any of a zone's config keys, in the zone config's TOML form. At
//! `create`, the `default` profile (if it exists), then each `--profile` in order, are
//! merged; the zone's `--config` file and `--set` flags then override them; the result
//! is validated and written as the zone's own `config.toml`. The zone records the
//! profiles it was made from (`state.json`, `profiles`).
//!
//! Profiles are *copied* at create, as zonecfg's `create -t` copies a template: a later
//! change to a profile does not reach zones made before it (Incus instead re-applies
//! profiles to running instances). Why: a zone's config file stays the whole truth
//! about it (what `config show` prints is what boots), a profile edit can never make
//! hundreds of existing zones invalid or reboot-pending at once, and a deleted
//! profile leaves its zones intact. To change existing zones, use `config set`.
//!
//! Where they live: `<root>/profiles/<name>.toml`, except `default`, which is the
//! host's `<root>/defaults.toml` (`config::defaults`): one file for both, not two
//! mechanisms. Its keys are copied like any profile's, except the host's two caps,
//! `max-processes` and `memory.max`: those stay what `defaults.toml` always was, the
//! caps applied *at boot* to every zone whose config sets none, so raising them
//! reaches every such zone at its next boot and a zone that sets `max-threads` is not
//! also given a `max-processes` it did not ask for. In a named profile they are copied
//! like any key. Changes take the profile's lock and are written atomically.

use std::path::PathBuf;

use serde::Serialize;

use crate::config;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{atomic_write, mkdir_mode, read_text_bounded, MAX_SMALL_FILE};
use crate::layout::Layout;
use crate::lock;

/// The profile every new zone starts from, when it exists.
pub const DEFAULT: &str = "default";

/// A profile as `profile show --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    pub name: String,
    pub path: PathBuf,
    /// Its keys, in the config's TOML form.
    pub config: toml::Table,
}

/// The directory of named profiles.
pub fn dir(layout: &Layout) -> PathBuf {
    layout.root().join("profiles")
}

/// The file holding profile `name` (`default` is `<root>/defaults.toml`).
pub fn path(layout: &Layout, name: &str) -> PathBuf {
    if name == DEFAULT {
        layout.root().join("defaults.toml")
    } else {
        dir(layout).join(format!("{name}.toml"))
    }
}

fn check_name(name: &str) -> Result<()> {
    match crate::names::problem(name) {
        None => Ok(()),
        Some(reason) => Err(Error::InvalidName {
            kind: "profile",
            name: name.into(),
            reason,
        }),
    }
}

/// Profile `name`'s keys; `None` if it does not exist.
pub fn read(layout: &Layout, name: &str) -> Result<Option<toml::Table>> {
    check_name(name)?;
    let file = path(layout, name);
    let text = match read_text_bounded(&file, MAX_SMALL_FILE) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx(|| format!("profile '{name}': reading {}", file.display())),
    };
    let bad = |m: String| {
        Error::Invalid(format!(
            "profile '{name}': {}: {m}; fix it with 'warren profile set {name} KEY=VALUE' or 'warren profile unset {name} KEY', or by editing the file",
            file.display()
        ))
    };
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| bad(format!("not valid TOML: {}", e.message().trim())))?;
    // The default profile is defaults.toml, which may also hold host settings.
    let zone_keys = if name == DEFAULT {
        config::split_host_keys(&table).0
    } else {
        table.clone()
    };
    config::check_partial(&zone_keys).map_err(bad)?;
    Ok(Some(table))
}

/// Profile `name`'s keys; an error naming the fix if it does not exist.
pub fn load(layout: &Layout, name: &str) -> Result<Profile> {
    let config = read(layout, name)?.ok_or_else(|| Error::NoSuchProfile(name.into()))?;
    Ok(Profile {
        name: name.into(),
        path: path(layout, name),
        config,
    })
}

/// Every profile's name, `default` first when it exists.
pub fn list(layout: &Layout) -> Result<Vec<String>> {
    let mut out = Vec::new();
    if path(layout, DEFAULT).is_file() {
        out.push(DEFAULT.to_string());
    }
    let d = dir(layout);
    let entries = match std::fs::read_dir(&d) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).ctx(|| format!("reading {}", d.display())),
    };
    let mut named: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let stem = n.strip_suffix(".toml")?.to_string();
            (crate::names::problem(&stem).is_none() && stem != DEFAULT).then_some(stem)
        })
        .collect();
    named.sort();
    out.extend(named);
    Ok(out)
}

/// Under the profile's lock: build its new table from the current one (`None` when it
/// does not exist) with `edit`, validate it and write it atomically.
fn edit(
    layout: &Layout,
    name: &str,
    edit: impl FnOnce(Option<toml::Table>) -> Result<toml::Table>,
) -> Result<toml::Table> {
    check_name(name)?;
    let _lock = lock::exclusive(layout, "profile", name)?;
    let table = edit(read(layout, name)?)?;
    let zone_keys = if name == DEFAULT {
        config::split_host_keys(&table).0
    } else {
        table.clone()
    };
    config::check_partial(&zone_keys)
        .map_err(|m| Error::Invalid(format!("profile '{name}': {m}")))?;
    if name == DEFAULT {
        // Its host settings (lxcfs-dir) are checked as defaults.toml's.
        let text = toml::to_string(&table).unwrap_or_default();
        config::Defaults::parse(&path(layout, name), &text)?;
    }
    if name != DEFAULT {
        match mkdir_mode(&dir(layout), 0o700) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            other => other.ctx(|| format!("creating {}", dir(layout).display()))?,
        }
    }
    let file = path(layout, name);
    let text = toml::to_string(&table).expect("a table always serialises");
    atomic_write(&file, text.as_bytes(), true)
        .ctx(|| format!("profile '{name}': writing {}", file.display()))?;
    Ok(table)
}

fn assign(name: &str, table: &mut toml::Table, assignments: &[String]) -> Result<()> {
    for a in assignments {
        let (k, v) = config::parse_assignment(name, a).map_err(|e| profile_err(name, e))?;
        config::set_in_table(name, table, &k, v).map_err(|e| profile_err(name, e))?;
    }
    Ok(())
}

/// A config error raised while editing a profile names the profile, not a zone.
fn profile_err(name: &str, e: Error) -> Error {
    match e {
        Error::Config { message, .. } => Error::Invalid(format!("profile '{name}': {message}")),
        e => e,
    }
}

/// `warren profile create NAME [KEY=VALUE...]`.
pub fn create(layout: &Layout, name: &str, assignments: &[String]) -> Result<toml::Table> {
    edit(layout, name, |old| {
        if old.is_some() {
            return Err(Error::ProfileExists(name.into()));
        }
        let mut t = toml::Table::new();
        assign(name, &mut t, assignments)?;
        Ok(t)
    })
}

/// `warren profile set NAME KEY=VALUE...`.
pub fn set(layout: &Layout, name: &str, assignments: &[String]) -> Result<toml::Table> {
    edit(layout, name, |old| {
        let mut t = old.ok_or_else(|| Error::NoSuchProfile(name.into()))?;
        assign(name, &mut t, assignments)?;
        Ok(t)
    })
}

/// `warren profile unset NAME KEY...`.
pub fn unset(layout: &Layout, name: &str, keys: &[String]) -> Result<toml::Table> {
    edit(layout, name, |old| {
        let mut t = old.ok_or_else(|| Error::NoSuchProfile(name.into()))?;
        for k in keys {
            if k == "template" {
                // A profile need not name a template: unlike a zone's, it may drop it.
                t.remove(k);
                continue;
            }
            config::unset_in_table(name, &mut t, k).map_err(|e| profile_err(name, e))?;
        }
        prune_empty(&mut t);
        Ok(t)
    })
}

/// Drop the tables an unset left empty (`[cpu]` once `cpu.max` is gone).
fn prune_empty(t: &mut toml::Table) {
    for (_, v) in t.iter_mut() {
        if let toml::Value::Table(inner) = v {
            prune_empty(inner);
        }
    }
    t.retain(|_, v| !matches!(v, toml::Value::Table(inner) if inner.is_empty()));
}

/// `warren profile delete NAME`. Zones made with it keep their config.
pub fn delete(layout: &Layout, name: &str) -> Result<()> {
    check_name(name)?;
    let _lock = lock::exclusive(layout, "profile", name)?;
    let file = path(layout, name);
    match std::fs::remove_file(&file) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::NoSuchProfile(name.into()))
        }
        Err(e) => Err(e).ctx(|| format!("profile '{name}': removing {}", file.display())),
    }
}

/// The keys a new zone starts from: `default` (if it exists), then `names` in order,
/// each overriding the ones before. Returns the table and the profiles applied.
pub fn merged(layout: &Layout, names: &[String]) -> Result<(toml::Table, Vec<String>)> {
    let mut table = toml::Table::new();
    let mut applied = Vec::new();
    let mut wanted: Vec<&str> = vec![DEFAULT];
    wanted.extend(names.iter().map(String::as_str).filter(|n| *n != DEFAULT));
    for name in wanted {
        let _lock = lock::shared(layout, "profile", name)?;
        let Some(t) = read(layout, name)? else {
            if name == DEFAULT {
                continue;
            }
            return Err(Error::NoSuchProfile(name.into()));
        };
        let mut t = t;
        if name == DEFAULT {
            // The host's caps stay live defaults, applied at boot (see the module doc).
            // Host settings (lxcfs-dir) are no zone's.
            t = config::split_host_keys(&t).0;
            for k in config::DEFAULT_KEYS {
                config::unset_in_table(name, &mut t, k)?;
            }
        }
        overlay(name, &mut table, &t)?;
        applied.push(name.to_string());
    }
    Ok((table, applied))
}

/// Set every key of `top` in `base` (dotted keys, either TOML spelling). A key given
/// twice in `top`, in two spellings, is refused naming both (as `config::from_table`).
pub fn overlay(what: &str, base: &mut toml::Table, top: &toml::Table) -> Result<()> {
    if let Some(m) = config::duplicate_key(top) {
        return Err(Error::config(what, m));
    }
    let mut entries = Vec::new();
    config::flatten_table(top, &mut entries);
    for (k, v) in entries {
        config::set_in_table(what, base, &k, v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_merge_in_order_after_default_and_are_validated() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        std::fs::create_dir_all(layout.locks()).unwrap();
        create(
            &layout,
            DEFAULT,
            &["memory.max=64M".into(), "net=host".into()],
        )
        .unwrap();
        create(
            &layout,
            "web",
            &["memory.max=128M".into(), "cpu.max=0.5".into()],
        )
        .unwrap();
        let (t, applied) = merged(&layout, &["web".into()]).unwrap();
        assert_eq!(applied, ["default", "web"]);
        let cfg = config::check_partial(&t).unwrap();
        assert_eq!(cfg.limits.memory_max, Some(128 << 20));
        assert_eq!(cfg.limits.cpu_max, Some(0.5));
        assert_eq!(cfg.net, config::NetMode::Host);
        // The default profile's caps are boot-time defaults, not copied.
        let (t, _) = merged(&layout, &[]).unwrap();
        assert_eq!(config::check_partial(&t).unwrap().limits.memory_max, None);
        assert_eq!(list(&layout).unwrap(), ["default", "web"]);
        assert!(layout.root().join("defaults.toml").is_file());
        let e = set(&layout, "web", &["mem.max=1G".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("profile 'web'") && e.contains("memory.max"),
            "{e}"
        );
        let e = merged(&layout, &["nope".into()]).unwrap_err();
        assert!(matches!(e, Error::NoSuchProfile(_)), "{e}");
        delete(&layout, "web").unwrap();
        assert_eq!(list(&layout).unwrap(), ["default"]);
    }
}
