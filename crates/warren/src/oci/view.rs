//! OCI containers as the rest of warren sees them: `warren list` and `warren stat`
//! read the OCI state root (`--oci-root`, default [`super::DEFAULT_ROOT`]) and show
//! its containers beside the zones, marked kind `oci`.
//!
//! The runtime-spec status maps onto the zone states ([`zone_state`], pure) so that
//! scripts filtering on `state` treat both kinds alike; the exact status is kept
//! beside it (`oci.status`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::state::{self, Record, Status};
use crate::state::ZoneState;

/// One container under an OCI state root, observed now.
#[derive(Debug, Clone)]
pub struct Seen {
    pub record: Record,
    pub status: Status,
    /// Seconds since its init started (while it lives).
    pub uptime_s: Option<u64>,
}

/// What `warren list --json` adds for an OCI container (`oci` field).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OciInfo {
    /// The runtime-spec status: creating, created, running, paused, stopped.
    pub status: Status,
    pub bundle: PathBuf,
    /// RFC 3339, when `create` ran.
    pub created: String,
}

/// The zone state an OCI status corresponds to (pure): a created container's init
/// waits like a ready zone's; a paused one is booted (running, frozen); a stopped one
/// keeps its root and record like an installed zone; creating is an unfinished
/// create, as `incomplete`.
pub fn zone_state(status: Status) -> ZoneState {
    match status {
        Status::Creating => ZoneState::Incomplete,
        Status::Created => ZoneState::Ready,
        Status::Running | Status::Paused => ZoneState::Running,
        Status::Stopped => ZoneState::Installed,
    }
}

/// Seconds between a process start (`start_ticks`, clock ticks after boot, as in
/// /proc/<pid>/stat; USER_HZ is 100) and `uptime_s` of the host (pure).
pub fn process_uptime(host_uptime_s: f64, start_ticks: u64) -> u64 {
    (host_uptime_s - start_ticks as f64 / 100.0).max(0.0) as u64
}

/// Every container under `root` (none if the root does not exist), sorted by id.
/// Records that cannot be read are left out.
pub fn all(root: &Path, proc_root: &Path) -> Vec<Seen> {
    let host_uptime = std::fs::read_to_string(proc_root.join("uptime"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok());
    state::list(root)
        .iter()
        .filter_map(|id| state::load(root, id).ok())
        .map(|record| {
            let status = state::observe_host(&record, proc_root);
            let alive = matches!(status, Status::Created | Status::Running | Status::Paused);
            let uptime_s = match (alive, host_uptime, record.start_time) {
                (true, Some(up), Some(start)) => Some(process_uptime(up, start)),
                _ => None,
            };
            Seen {
                record,
                status,
                uptime_s,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_onto_zone_states() {
        assert_eq!(zone_state(Status::Creating), ZoneState::Incomplete);
        assert_eq!(zone_state(Status::Created), ZoneState::Ready);
        assert_eq!(zone_state(Status::Running), ZoneState::Running);
        assert_eq!(zone_state(Status::Paused), ZoneState::Running);
        assert_eq!(zone_state(Status::Stopped), ZoneState::Installed);
        // Booted in zone terms exactly when the init lives.
        for s in [
            Status::Creating,
            Status::Created,
            Status::Running,
            Status::Paused,
            Status::Stopped,
        ] {
            let live = matches!(s, Status::Created | Status::Running | Status::Paused);
            assert_eq!(zone_state(s) >= ZoneState::Ready, live, "{s}");
        }
    }

    #[test]
    fn uptime_from_start_ticks() {
        assert_eq!(process_uptime(100.5, 5000), 50);
        assert_eq!(process_uptime(10.0, 5000), 0);
    }

    #[test]
    fn a_missing_root_has_no_containers() {
        let dir = tempfile::tempdir().unwrap();
        assert!(all(&dir.path().join("absent"), Path::new("/proc")).is_empty());
    }
}
