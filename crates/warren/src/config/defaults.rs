//! The limits a zone gets when its config sets none, and the host's override of them.
//!
//! A zone with no limits could take the host: fork until pid_max, allocate until the
//! kernel's OOM killer picks a victim anywhere. So, as podman caps pids (2048) and
//! systemd-nspawn caps TasksMax, every zone boots with a process cap and a memory cap
//! unless its config names its own. The host may change the built-in values in
//! `<state root>/defaults.toml` (same key names and value forms as a zone's config):
//!
//! ```toml
//! max-processes = 4096
//! memory.max = "2G"
//! ```
//!
//! The defaults are applied at boot to the limits the config leaves unset; they are
//! not written into the zone's config, so a changed host default reaches every zone
//! at its next boot. That file is also the `default` profile (`warren profile set
//! default KEY=VALUE`, see `crate::profile`): one file, one mechanism. Any zone key may
//! be in it; the others are copied into each new zone's config at create, the
//! [`DEFAULT_KEYS`] are not (applied at boot). Two host settings of /proc views
//! (docs/proc-views.md) live here too: `proc-views = false` turns them off for every
//! zone that does not set the key itself, and `lxcfs-dir` (host-only, [`HOST_KEYS`],
//! default `/var/lib/lxcfs`) is where lxcfs is mounted.
//!
//! There is no default disk cap: the only mechanism warren has
//! (`disk.max`, a loop-mounted ext4 image per zone) costs a loop device and a journal
//! thread per zone, too much to impose on thousands of zones (docs/isolation.md).

use std::path::{Path, PathBuf};

use super::{duplicate_key, find_key, flatten, Limits, ZoneConfig};
use crate::error::{Error, Result};

/// `max-processes` of a zone that sets neither it nor `max-threads`.
pub const DEFAULT_MAX_PROCESSES: u64 = 1024;
/// `memory.max` of a zone that sets none.
pub const DEFAULT_MEMORY_MAX: u64 = 512 << 20;
/// Where Debian's lxcfs unit (and contrib/warren-lxcfs.service) mounts lxcfs.
pub const DEFAULT_LXCFS_DIR: &str = "/var/lib/lxcfs";
/// The keys of `defaults.toml` (the `default` profile) that are applied at boot
/// rather than copied at create.
pub const DEFAULT_KEYS: [&str; 3] = ["max-processes", "memory.max", "proc-views"];
/// The host-only key of `defaults.toml`: where lxcfs is mounted.
pub const LXCFS_DIR_KEY: &str = "lxcfs-dir";
/// Keys of `defaults.toml` that are host settings, not zone keys.
pub const HOST_KEYS: [&str; 1] = [LXCFS_DIR_KEY];

/// `table` without its [`HOST_KEYS`] (what a zone may take from it), and the host
/// keys' values.
pub fn split_host_keys(table: &toml::Table) -> (toml::Table, Vec<(String, toml::Value)>) {
    let mut zone = table.clone();
    let host = HOST_KEYS
        .iter()
        .filter_map(|k| zone.remove(*k).map(|v| (k.to_string(), v)))
        .collect();
    (zone, host)
}

/// The host's defaults for unset limits, and its /proc views settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    pub max_processes: u64,
    pub memory_max: u64,
    /// The `proc-views` of a zone that does not set it (default true: when lxcfs is
    /// mounted).
    pub proc_views: bool,
    /// Where lxcfs is mounted (an absolute path).
    pub lxcfs_dir: PathBuf,
}

impl Default for Defaults {
    fn default() -> Defaults {
        Defaults {
            max_processes: DEFAULT_MAX_PROCESSES,
            memory_max: DEFAULT_MEMORY_MAX,
            proc_views: true,
            lxcfs_dir: PathBuf::from(DEFAULT_LXCFS_DIR),
        }
    }
}

impl Defaults {
    /// Parse `defaults.toml`'s text (`file` names it in errors).
    pub fn parse(file: &Path, text: &str) -> Result<Defaults> {
        let bad = |m: String| {
            Error::Invalid(format!(
                "{}: {m}; fix the file, or remove it to use the built-in defaults",
                file.display()
            ))
        };
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| bad(format!("not valid TOML: {}", e.message().trim())))?;
        if let Some(m) = duplicate_key(&table) {
            return Err(bad(m));
        }
        let (zone_keys, host_keys) = split_host_keys(&table);
        let mut lxcfs_dir = None;
        for (name, value) in &host_keys {
            let dir = value
                .as_str()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .ok_or_else(|| {
                    bad(format!(
                        "{name} {value}: expected the absolute path lxcfs is mounted at, such as \"{DEFAULT_LXCFS_DIR}\""
                    ))
                })?;
            lxcfs_dir = Some(dir);
        }
        let scratch = check_partial(&zone_keys).map_err(bad)?;
        let builtin = Defaults::default();
        Ok(Defaults {
            max_processes: scratch
                .limits
                .max_processes
                .unwrap_or(builtin.max_processes),
            memory_max: scratch.limits.memory_max.unwrap_or(builtin.memory_max),
            proc_views: scratch.proc_views.unwrap_or(builtin.proc_views),
            lxcfs_dir: lxcfs_dir.unwrap_or(builtin.lxcfs_dir),
        })
    }

    /// The host's defaults: `<root>/defaults.toml` if present, else the built-in ones.
    pub fn load(root: &Path) -> Result<Defaults> {
        let file = root.join("defaults.toml");
        match crate::fsutil::read_text_bounded(&file, crate::fsutil::MAX_SMALL_FILE) {
            Ok(text) => Defaults::parse(&file, &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Defaults::default()),
            Err(e) => Err(Error::Io {
                context: format!("reading {}", file.display()),
                source: e,
            }),
        }
    }
}

/// Check a partial config table (a profile, `defaults.toml`): every key known and
/// every value valid, without the rules that involve several keys (the zone's own
/// config may complete them). The result is a scratch config holding the values.
pub fn check_partial(table: &toml::Table) -> std::result::Result<ZoneConfig, String> {
    if let Some(m) = duplicate_key(table) {
        return Err(m);
    }
    let mut entries = Vec::new();
    flatten("", table, &mut entries);
    let mut scratch = ZoneConfig::new("host");
    for (name, value) in &entries {
        let key = find_key(name).ok_or_else(|| super::unknown_key(name))?;
        (key.apply)(&mut scratch, value).map_err(|m| format!("{name} {m}"))?;
    }
    Ok(scratch)
}

impl Limits {
    /// These limits with the host's defaults filled in where the config sets none.
    pub fn with_defaults(&self, d: &Defaults) -> Limits {
        let mut l = self.clone();
        if l.pids_max().is_none() {
            l.max_processes = Some(d.max_processes);
        }
        if l.memory_max.is_none() {
            l.memory_max = Some(d.memory_max);
        }
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_limits_get_the_defaults_and_set_ones_win() {
        let d = Defaults::default();
        let l = Limits::default().with_defaults(&d);
        assert_eq!(l.pids_max(), Some(1024));
        assert_eq!(l.memory_max, Some(512 << 20));
        let own = Limits {
            max_threads: Some(50),
            memory_max: Some(64 << 20),
            ..Limits::default()
        }
        .with_defaults(&d);
        assert_eq!(own.pids_max(), Some(50));
        assert_eq!(own.max_processes, None);
        assert_eq!(own.memory_max, Some(64 << 20));
    }

    #[test]
    fn the_host_file_overrides_and_names_its_errors() {
        let f = Path::new("/r/defaults.toml");
        let d = Defaults::parse(f, "max-processes = 4096\nmemory.max = \"2G\"\n").unwrap();
        assert_eq!(d.max_processes, 4096);
        assert_eq!(d.memory_max, 2 << 30);
        assert_eq!(Defaults::parse(f, "").unwrap(), Defaults::default());
        // The default profile may hold any zone key; only the two limits are defaults
        // at boot.
        let d = Defaults::parse(f, "cpu.max = 1\nmax-processes = 7").unwrap();
        assert_eq!(d.max_processes, 7);
        let e = Defaults::parse(f, "mem.max = 1").unwrap_err().to_string();
        assert!(
            e.contains("/r/defaults.toml") && e.contains("memory.max"),
            "{e}"
        );
        let d = Defaults::parse(f, "proc-views = false\nlxcfs-dir = \"/run/lx\"\n").unwrap();
        assert!(!d.proc_views);
        assert_eq!(d.lxcfs_dir, Path::new("/run/lx"));
        assert!(Defaults::default().proc_views);
        let e = Defaults::parse(f, "lxcfs-dir = \"run/lx\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lxcfs-dir") && e.contains("absolute"), "{e}");
        let e = Defaults::parse(f, "memory.max = \"12X\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory.max"), "{e}");
    }
}
