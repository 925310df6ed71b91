//! A config change on a running zone: which keys the kernel takes live, applying them
//! to the zone's cgroups, and undoing that when the config cannot be written.
//!
//! `config set` / `unset` / `edit` (see `edit`) apply to the running zone every
//! changed key the registry marks live ([`config::live_keys`]) (through `cgroups::live`: the zone's files
//! read first, written back if any write fails) before the config is written; if the
//! write fails, the old limits are applied again. Other keys take effect at the next
//! boot, and the answer says which. `--live-only` changes the running zone only
//! (zonecfg -r); `--next-boot` the config only.

use serde::Serialize;

use super::*;

/// Where a config change goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApplyTo {
    /// The config, and the running zone for the keys it can take live.
    #[default]
    Both,
    /// The running zone only; the config is unchanged (refused for other keys).
    LiveOnly,
    /// The config only: everything takes effect at the next boot.
    NextBoot,
}

/// What a config change did; its JSON form is the API object.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigChange {
    pub zone: String,
    pub state: ZoneState,
    /// The keys whose value changed.
    pub changed: Vec<String>,
    /// Applied to the running zone now.
    pub live: Vec<String>,
    /// Taking effect at the next boot.
    pub next_boot: Vec<String>,
    /// Whether config.toml was written (not with `--live-only`).
    pub saved: bool,
    /// Why a key that limits the zone still waits for a reboot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub config: ZoneConfig,
}

/// Split the `changed` keys of a zone in state `st` into (live, next boot).
pub fn split(st: ZoneState, changed: &[String], to: ApplyTo) -> (Vec<String>, Vec<String>) {
    if st != ZoneState::Running || to == ApplyTo::NextBoot {
        return (Vec::new(), changed.to_vec());
    }
    changed.iter().cloned().partition(|k| config::is_live(k))
}

/// Why `key`, a limit, does not change now for a zone in state `st` (shown with the
/// answer).
pub fn reboot_reason(key: &str, st: ZoneState) -> Option<&'static str> {
    match key {
        "disk.max" if st >= ZoneState::Installed => Some(
            "disk.max: the zone's disk is a loop-backed ext4 image made at install; warren does not resize it, live or at boot (the next boot refuses a size that differs from the image's): uninstall and install the zone to change it (this discards its changes)",
        ),
        k if k.starts_with("rlimit.") && st == ZoneState::Running => Some(
            "rlimit.*: resource limits are set on init at boot and inherited; running processes keep theirs",
        ),
        _ => None,
    }
}

/// Apply `cfg`'s limits to running zone `z` (its controllers joined first, the
/// runtime record updated if they were).
pub(super) fn apply(ctx: &Context, z: &mut Zone, cfg: &ZoneConfig) -> Result<()> {
    let limits = ctx.effective_limits(cfg)?;
    let (driver, _) = ctx.cgroups()?;
    let Some(rt) = z.runtime.as_mut() else {
        return Ok(());
    };
    let unsupported = |e: CgroupError| {
        match e {
        e @ (CgroupError::Io { .. } | CgroupError::Busy { .. }) => Error::Io {
            context: format!(
                "zone '{}': the kernel refused the new limits (none was changed; a memory limit below what the zone uses now may be refused until it frees memory): {e}",
                z.name
            ),
            source: std::io::Error::other("cgroup write"),
        },
        e => Error::Unsupported(format!("zone '{}': {e}", z.name)),
    }
    };
    let joined = driver
        .join_controllers(&z.name, &rt.cgroups, &limits)
        .map_err(unsupported)?;
    if joined != rt.cgroups {
        rt.cgroups = joined;
        state::save_runtime(&z.dir, rt)?;
    }
    rt.cgroups.apply_limits(&limits).map_err(unsupported)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_running_zone_takes_live_keys_and_next_boot_keeps_them_all() {
        let changed: Vec<String> = ["cpu.max", "hostname", "memory.max", "disk.max"]
            .map(String::from)
            .to_vec();
        let (live, later) = split(ZoneState::Running, &changed, ApplyTo::Both);
        assert_eq!(live, ["cpu.max", "memory.max"]);
        assert_eq!(later, ["hostname", "disk.max"]);
        let (live, later) = split(ZoneState::Running, &changed, ApplyTo::NextBoot);
        assert!(live.is_empty());
        assert_eq!(later, changed);
        let (live, later) = split(ZoneState::Installed, &changed, ApplyTo::Both);
        assert!(live.is_empty());
        assert_eq!(later, changed);
        assert_eq!(
            config::live_keys(),
            [
                "max-processes",
                "max-threads",
                "memory.max",
                "memory.swap",
                "memory.request",
                "cpu.shares",
                "cpu.weight",
                "cpu.max",
                "cpuset"
            ]
        );
        assert!(reboot_reason("disk.max", ZoneState::Installed).is_some());
        assert!(reboot_reason("disk.max", ZoneState::Configured).is_none());
        assert!(reboot_reason("rlimit.nofile", ZoneState::Running).is_some());
        assert!(reboot_reason("hostname", ZoneState::Running).is_none());
    }

    #[test]
    fn changed_keys_names_each_dotted_key_that_differs() {
        let t = |s: &str| config::from_table("z", &s.parse::<toml::Table>().unwrap()).unwrap();
        let old = t("template = \"host\"\nmemory.max = \"256M\"\nhostname = \"a\"\n");
        let new =
            t("template = \"host\"\nmemory.max = \"128M\"\ncpu.max = 0.5\nhostname = \"a\"\n");
        assert_eq!(
            config::changed_keys(Some(&old), &new),
            ["cpu.max", "memory.max"]
        );
        assert!(config::changed_keys(Some(&new), &new).is_empty());
        assert!(config::changed_keys(None, &new).contains(&"template".to_string()));
    }
}
