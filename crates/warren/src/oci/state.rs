//! A container's record under `--root` (`<root>/<id>/state.json`) and the status
//! the runtime-spec defines, observed from it.
//!
//! Persisted: what `create` decided (pid + start time, bundle, cgroups, whether a
//! `start` is still awaited). Observed, never stored: whether that process still
//! lives and whether its cgroup is frozen. [`observe`] combines the two and is pure.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cgroups::CgroupSet;
use crate::error::{Error, IoContext, Result};

/// The runtime-spec's container statuses (plus `paused`, as runc reports it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Creating,
    Created,
    Running,
    Paused,
    Stopped,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Creating => "creating",
            Status::Created => "created",
            Status::Running => "running",
            Status::Paused => "paused",
            Status::Stopped => "stopped",
        })
    }
}

/// What `create` wrote.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    pub id: String,
    pub bundle: PathBuf,
    /// The container's init (host pid) and its start time in clock ticks, so a reused
    /// pid is not mistaken for it. `None` while creating.
    pub pid: Option<i32>,
    pub start_time: Option<u64>,
    /// RFC 3339, UTC.
    pub created: String,
    pub cgroups: Option<CgroupSet>,
    /// The cgroup directories `create` made, which `delete` removes (deepest first,
    /// each once empty) and no other. `None` in records from before they were kept: the set and
    /// its parent when empty are removed then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroups_made: Option<Vec<PathBuf>>,
    pub annotations: std::collections::BTreeMap<String, String>,
    /// `start` has not run yet (the init waits on `exec.fifo`).
    pub awaiting_start: bool,
    /// The rootfs the container was made from (for `warren list`).
    pub rootfs: PathBuf,
}

/// Observed facts about a record's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// The recorded pid exists with the recorded start time (and is not a zombie).
    pub alive: bool,
    /// Its freezer cgroup is frozen.
    pub frozen: bool,
}

/// The status of a container: pure.
pub fn observe(r: &Record, o: Observed) -> Status {
    match (r.pid, o.alive, r.awaiting_start, o.frozen) {
        (None, _, _, _) => Status::Creating,
        (Some(_), false, _, _) => Status::Stopped,
        (Some(_), true, _, true) => Status::Paused,
        (Some(_), true, true, false) => Status::Created,
        (Some(_), true, false, false) => Status::Running,
    }
}

/// What a verb may do in a status (runc's rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Start,
    Kill,
    Delete { force: bool },
    Exec,
    Pause,
    Resume,
}

/// A verb refused in a status, with runc's message as its Display.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", refusal_text(.id, *.status, *.verb))]
pub struct Refusal {
    pub id: String,
    pub status: Status,
    pub verb: Verb,
}

fn refusal_text(id: &str, status: Status, verb: Verb) -> String {
    match verb {
        Verb::Start if status == Status::Stopped => format!(
            "container '{id}': cannot start a container that has stopped; delete it and create it again"
        ),
        Verb::Start => format!(
            "container '{id}': cannot start a container that is {status}; only a created container can be started"
        ),
        Verb::Kill => format!("container '{id}': container not running (it is {status})"),
        Verb::Delete { .. } => format!(
            "container '{id}': cannot delete container that is not stopped: {status}; stop it with 'kill' first or use 'delete --force'"
        ),
        Verb::Exec => format!(
            "container '{id}': cannot exec in a {status} container; it must be created or running"
        ),
        Verb::Pause => format!("container '{id}': container not running (it is {status}); only a running container can be paused"),
        Verb::Resume => format!("container '{id}': container not paused (it is {status})"),
    }
}

/// `Ok` if `verb` is allowed on a container in `status` (runc's rules).
pub fn allowed(id: &str, status: Status, verb: Verb) -> std::result::Result<(), Refusal> {
    use Status::*;
    let ok = match verb {
        Verb::Start => status == Created,
        Verb::Kill => matches!(status, Created | Running | Paused),
        Verb::Delete { force } => force || matches!(status, Stopped | Created | Creating),
        Verb::Exec => matches!(status, Created | Running),
        Verb::Pause => status == Running,
        Verb::Resume => status == Paused,
    };
    if ok {
        return Ok(());
    }
    Err(Refusal {
        id: id.to_string(),
        status,
        verb,
    })
}

/// The directory of container `id` under the state root.
pub fn dir(root: &Path, id: &str) -> PathBuf {
    root.join(id)
}

/// Container ids become directory and cgroup names: refuse anything else.
pub fn check_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 1024
        && id != "."
        && id != ".."
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'));
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "container id {id:?} is invalid; use letters, digits, '-', '_', '.' and '+'"
        )))
    }
}

pub fn load(root: &Path, id: &str) -> Result<Record> {
    check_id(id)?;
    let path = dir(root, id).join("state.json");
    let text = match crate::fsutil::read_text_bounded(&path, crate::fsutil::MAX_SMALL_FILE) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Invalid(format!(
                "container '{id}' does not exist (no {}); list them with 'warren oci list' or check --root",
                path.display()
            )))
        }
        Err(e) => return Err(e).ctx(|| format!("reading {}", path.display())),
    };
    serde_json::from_str(&text).map_err(|e| Error::Corrupt {
        path,
        message: e.to_string(),
    })
}

/// Write the record atomically (temp file, fsync, rename, fsync dir).
pub fn save(root: &Path, r: &Record) -> Result<()> {
    let path = dir(root, &r.id).join("state.json");
    let data = serde_json::to_vec_pretty(r).expect("records serialize");
    crate::fsutil::atomic_write(&path, &data, true).ctx(|| format!("writing {}", path.display()))
}

/// Every container id under the state root, sorted.
pub fn list(root: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("state.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    ids
}

/// Observe a record on this host.
pub fn observe_host(r: &Record, proc_root: &Path) -> Status {
    let alive = match (r.pid, r.start_time) {
        (Some(pid), Some(st)) => {
            crate::stats::proc_start_time(proc_root, pid) == Some(st) && !is_zombie(proc_root, pid)
        }
        _ => false,
    };
    let frozen = alive && r.cgroups.as_ref().is_some_and(super::cgroup::is_frozen);
    observe(r, Observed { alive, frozen })
}

fn is_zombie(proc_root: &Path, pid: i32) -> bool {
    std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat"))
        .ok()
        .and_then(|s| crate::stats::parse_stat(&s).map(|(state, _)| state == 'Z'))
        .unwrap_or(true)
}

/// Seconds since the epoch as RFC 3339 UTC, nanoseconds given.
pub fn rfc3339(secs: u64, nanos: u32) -> String {
    let (y, m, d, h, mi, s) = crate::clock::civil(secs);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{nanos:09}Z")
}

pub fn now_rfc3339() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d.as_secs(), d.subsec_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(pid: Option<i32>, awaiting: bool) -> Record {
        Record {
            id: "c1".into(),
            bundle: "/b".into(),
            pid,
            start_time: pid.map(|_| 1),
            created: String::new(),
            cgroups: None,
            cgroups_made: None,
            annotations: Default::default(),
            awaiting_start: awaiting,
            rootfs: "/b/rootfs".into(),
        }
    }

    #[test]
    fn status_follows_the_runtime_spec() {
        let live = Observed {
            alive: true,
            frozen: false,
        };
        let dead = Observed {
            alive: false,
            frozen: false,
        };
        let frozen = Observed {
            alive: true,
            frozen: true,
        };
        assert_eq!(observe(&rec(None, true), dead), Status::Creating);
        assert_eq!(observe(&rec(Some(5), true), live), Status::Created);
        assert_eq!(observe(&rec(Some(5), false), live), Status::Running);
        assert_eq!(observe(&rec(Some(5), false), frozen), Status::Paused);
        assert_eq!(observe(&rec(Some(5), false), dead), Status::Stopped);
        assert_eq!(observe(&rec(Some(5), true), dead), Status::Stopped);
    }

    #[test]
    fn verbs_follow_runc() {
        use Status::*;
        assert!(allowed("c", Created, Verb::Start).is_ok());
        let e = allowed("c", Running, Verb::Start).unwrap_err().to_string();
        assert!(e.contains("'c'") && e.contains("running"), "{e}");
        assert!(allowed("c", Stopped, Verb::Start)
            .unwrap_err()
            .to_string()
            .contains("has stopped"));
        let e = allowed("c", Running, Verb::Delete { force: false })
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not stopped: running") && e.contains("--force"),
            "{e}"
        );
        assert!(allowed("c", Running, Verb::Delete { force: true }).is_ok());
        assert!(allowed("c", Stopped, Verb::Delete { force: false }).is_ok());
        assert!(allowed("c", Created, Verb::Delete { force: false }).is_ok());
        assert!(allowed("c", Stopped, Verb::Kill).is_err());
        assert!(allowed("c", Running, Verb::Pause).is_ok());
        assert!(allowed("c", Running, Verb::Resume).is_err());
        assert!(allowed("c", Paused, Verb::Resume).is_ok());
        assert!(allowed("c", Stopped, Verb::Exec).is_err());
    }

    #[test]
    fn ids_and_times() {
        assert!(check_id("abc-1_2.3").is_ok());
        for bad in ["", "..", "a/b", "a b", "é"] {
            assert!(check_id(bad).is_err(), "{bad}");
        }
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(rfc3339(1_700_000_000, 5), "2023-11-14T22:13:20.000000005Z");
        assert_eq!(rfc3339(951_782_400, 0), "2000-02-29T00:00:00.000000000Z");
    }
}
