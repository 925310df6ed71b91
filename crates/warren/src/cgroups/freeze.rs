//! Freezing a zone's cgroups (`warren suspend`, docs/suspend.md): v1's `freezer`
//! hierarchy (`freezer.state`: `THAWED` → `FREEZING` → `FROZEN`), v2's `cgroup.freeze`
//! (done when `cgroup.events` says `frozen 1`).
//!
//! A v1 zone gets no freezer group at boot (a directory per zone that most never use);
//! [`join_freezer`] makes it the first time the zone is suspended, as a live limit
//! joins a late hierarchy ([`super::CgroupDriver::join_controllers`]), and the set that
//! includes it is recorded so halt removes it. A frozen v1 task does not die of
//! SIGKILL until thawed, so [`CgroupSet::kill_all`] thaws first.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{write_file, CgroupError, CgroupSet, CgroupVersion};

/// How long a freeze or thaw may take before it is reported stuck.
pub const FREEZE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a set is frozen: its freezer directory (v1) or its one directory (v2).
struct Freezer {
    dir: PathBuf,
    version: CgroupVersion,
}

impl Freezer {
    fn of(set: &CgroupSet) -> Option<Freezer> {
        let dir = match set.version {
            CgroupVersion::V1 => set
                .dirs
                .iter()
                .find(|(c, _)| c.split(',').any(|x| x == "freezer"))
                .map(|(_, d)| d.clone()),
            CgroupVersion::V2 => set.dirs.first().map(|(_, d)| d.clone()),
        }?;
        Some(Freezer {
            dir,
            version: set.version,
        })
    }

    fn request(&self, on: bool) -> Result<(), CgroupError> {
        match self.version {
            CgroupVersion::V1 => write_file(
                &self.dir,
                "freezer.state",
                if on { "FROZEN" } else { "THAWED" },
            ),
            CgroupVersion::V2 => write_file(&self.dir, "cgroup.freeze", if on { "1" } else { "0" }),
        }
    }

    /// What the kernel says now: `Some(true)` frozen, `Some(false)` thawed, `None` in
    /// between (v1 `FREEZING`) or unreadable.
    fn observed(&self) -> Option<bool> {
        match self.version {
            CgroupVersion::V1 => {
                let s = std::fs::read_to_string(self.dir.join("freezer.state")).ok()?;
                match s.trim() {
                    "FROZEN" => Some(true),
                    "THAWED" => Some(false),
                    _ => None,
                }
            }
            CgroupVersion::V2 => {
                let s = std::fs::read_to_string(self.dir.join("cgroup.events")).ok()?;
                frozen_in_events(&s)
            }
        }
    }

    fn state_file(&self) -> PathBuf {
        self.dir.join(match self.version {
            CgroupVersion::V1 => "freezer.state",
            CgroupVersion::V2 => "cgroup.events",
        })
    }
}

/// `frozen 0|1` of a v2 `cgroup.events` (pure).
pub fn frozen_in_events(events: &str) -> Option<bool> {
    events.lines().find_map(|l| match l.split_once(' ') {
        Some(("frozen", v)) => Some(v.trim() == "1"),
        _ => None,
    })
}

impl CgroupSet {
    /// Whether the set can be frozen as it is (v1: it has a freezer directory).
    pub fn has_freezer(&self) -> bool {
        Freezer::of(self).is_some()
    }

    /// Whether the kernel holds the set frozen now.
    pub fn is_frozen(&self) -> bool {
        Freezer::of(self).is_some_and(|f| f.observed() == Some(true))
    }

    /// Freeze (`true`) or thaw the set's processes and wait until the kernel did, at
    /// most `timeout`. Idempotent.
    pub fn set_frozen(&self, on: bool, timeout: Duration) -> Result<(), CgroupError> {
        let Some(f) = Freezer::of(self) else {
            return Err(CgroupError::MissingController {
                controller: "freezer".into(),
                hint: "the zone's cgroups have no freezer group; suspend joins it (mount the v1 freezer hierarchy under /sys/fs/cgroup)".into(),
            });
        };
        let deadline = Instant::now() + timeout;
        loop {
            // v1 re-checks a FREEZING group on each write of FROZEN.
            f.request(on)?;
            if f.observed() == Some(on) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(CgroupError::Stuck {
                    path: f.state_file(),
                    want: if on { "frozen" } else { "thawed" },
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Thaw a v1 set before killing it (frozen v1 tasks do not die until thawed; v2's
    /// SIGKILL reaches frozen tasks). Best effort: the kill reports what stays.
    pub(crate) fn thaw_for_kill(&self) {
        if self.version == CgroupVersion::V1 {
            if let Some(f) = Freezer::of(self) {
                if f.observed() != Some(false) {
                    let _ = self.set_frozen(false, Duration::from_secs(1));
                }
            }
        }
    }
}

/// v1: the zone's directory in the freezer hierarchy, made beneath `parent` (the
/// zones' group there) if missing, and every process of the zone moved into it
/// (repeated: a fork during the move leaves its child behind). An existing directory
/// (left by a suspend that crashed before recording it) is reused.
pub(crate) fn join_v1(
    zone: &str,
    set: &CgroupSet,
    controllers: &str,
    parent: &Path,
) -> Result<CgroupSet, CgroupError> {
    let mut out = set.clone();
    if out.has_freezer() {
        return Ok(out);
    }
    let dir = parent.join(zone);
    super::make_group_and_zone(parent, &dir, || Ok(()))?;
    out.dirs.push((controllers.to_string(), dir.clone()));
    super::move_all(set, &dir)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_is_read_from_cgroup_events() {
        assert_eq!(frozen_in_events("populated 1\nfrozen 1\n"), Some(true));
        assert_eq!(frozen_in_events("populated 1\nfrozen 0\n"), Some(false));
        assert_eq!(frozen_in_events("populated 0\n"), None);
    }

    #[test]
    fn a_v1_set_without_a_freezer_directory_cannot_be_frozen() {
        let set = CgroupSet {
            version: CgroupVersion::V1,
            dirs: vec![("memory".into(), "/nonexistent/memory/z".into())],
        };
        assert!(!set.has_freezer());
        assert!(!set.is_frozen());
        let e = set.set_frozen(true, Duration::ZERO).unwrap_err();
        assert!(e.to_string().contains("freezer"), "{e}");
    }

    #[test]
    fn a_v1_freezer_directory_is_found_by_its_controller() {
        let set = CgroupSet {
            version: CgroupVersion::V1,
            dirs: vec![
                ("memory".into(), "/m/z".into()),
                ("freezer".into(), "/f/z".into()),
            ],
        };
        assert_eq!(Freezer::of(&set).unwrap().dir, PathBuf::from("/f/z"));
    }
}
