//! Asynchronous operations: a verb over many zones (boot, halt, reboot, suspend,
//! resume of many or all, clone of one zone into many) or one long verb (export,
//! import, bench) runs as a background task; its `POST` answers 202 with its URL,
//! `GET /1.0/operations/{id}` shows its progress and results, `DELETE` cancels it
//! between zones (the zone being worked on finishes: a verb is never torn). The bench
//! is the exception: a cancel kills it and removes what it made (`api::bench`).
//!
//! Operations live in the daemon's memory only: after a restart they are gone, but
//! everything they did is in the zones' own state (and the journal).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ApiError;

/// How many finished operations are kept for `GET`.
const KEEP_FINISHED: usize = 200;

/// Where an operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Running,
    Success,
    /// Done, and at least one zone failed (see `errors`).
    Failure,
    Cancelled,
}

/// An operation as `GET /1.0/operations/{id}` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Operation {
    pub id: String,
    pub verb: String,
    pub status: Status,
    pub created_ms: u64,
    pub updated_ms: u64,
    /// Zones to act on, and how many are done (failed ones included).
    pub total: usize,
    pub done: usize,
    /// The zone being worked on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// One result object per zone that succeeded (the verb's API object).
    pub results: Vec<Value>,
    /// One error per zone that failed.
    pub errors: Vec<ApiError>,
    /// Whether a cancel was asked for.
    pub cancel_requested: bool,
    /// Within the zone being worked on, where a long verb is (bench: its phase, and
    /// the steps of the phase done of `len`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
}

/// The operations of this daemon.
#[derive(Default)]
pub struct Operations {
    next: AtomicU64,
    map: Mutex<BTreeMap<u64, Operation>>,
}

fn now_ms() -> u64 {
    warren::journal::now_ms()
}

impl Operations {
    /// Register a new running operation over `total` zones; its id.
    pub fn start(&self, verb: &str, total: usize) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("op-{n}");
        let t = now_ms();
        let mut map = self.map.lock().expect("operations lock");
        map.insert(
            n,
            Operation {
                id: id.clone(),
                verb: verb.into(),
                status: Status::Running,
                created_ms: t,
                updated_ms: t,
                total,
                done: 0,
                current: None,
                results: Vec::new(),
                errors: Vec::new(),
                cancel_requested: false,
                progress: None,
            },
        );
        let finished: Vec<u64> = map
            .iter()
            .filter(|(_, o)| o.status != Status::Running)
            .map(|(k, _)| *k)
            .collect();
        for k in finished
            .iter()
            .take(finished.len().saturating_sub(KEEP_FINISHED))
        {
            map.remove(k);
        }
        id
    }

    fn key(id: &str) -> Option<u64> {
        id.strip_prefix("op-")?.parse().ok()
    }

    fn with<T>(&self, id: &str, f: impl FnOnce(&mut Operation) -> T) -> Option<T> {
        let mut map = self.map.lock().expect("operations lock");
        map.get_mut(&Self::key(id)?).map(|o| {
            let r = f(o);
            o.updated_ms = now_ms();
            r
        })
    }

    pub fn get(&self, id: &str) -> Option<Operation> {
        let map = self.map.lock().expect("operations lock");
        map.get(&Self::key(id)?).cloned()
    }

    pub fn list(&self) -> Vec<Operation> {
        self.map
            .lock()
            .expect("operations lock")
            .values()
            .cloned()
            .collect()
    }

    /// About to act on `zone`: false if a cancel was asked (the operation ends).
    pub fn begin_zone(&self, id: &str, zone: &str) -> bool {
        self.with(id, |o| {
            if o.cancel_requested {
                o.status = Status::Cancelled;
                o.current = None;
                false
            } else {
                o.current = Some(zone.into());
                true
            }
        })
        .unwrap_or(false)
    }

    pub fn finish_zone(&self, id: &str, r: Result<Value, ApiError>) {
        self.with(id, |o| {
            o.done += 1;
            o.current = None;
            match r {
                Ok(v) => o.results.push(v),
                Err(e) => o.errors.push(e),
            }
        });
    }

    /// Where a long verb is (shown as `progress`).
    pub fn progress(&self, id: &str, p: Value) {
        self.with(id, |o| o.progress = Some(p));
    }

    /// Whether a cancel of `id` was asked for (a long verb polls it to stop itself).
    pub fn cancelling(&self, id: &str) -> bool {
        self.get(id).is_some_and(|o| o.cancel_requested)
    }

    /// A verb that was stopped in the middle (killed on cancel): the operation ends
    /// cancelled, with what the cleanup did (or why it failed) among its results.
    pub fn stopped(&self, id: &str, cleanup: Result<Value, ApiError>) {
        self.with(id, |o| {
            o.status = Status::Cancelled;
            o.current = None;
            match cleanup {
                Ok(v) => o.results.push(v),
                Err(e) => o.errors.push(e),
            }
        });
    }

    /// Every zone done (unless cancelled on the way).
    pub fn finish(&self, id: &str) {
        self.with(id, |o| {
            if o.status == Status::Running {
                o.status = if o.errors.is_empty() {
                    Status::Success
                } else {
                    Status::Failure
                };
            }
        });
    }

    /// Ask a running operation to stop before its next zone. None: no such operation;
    /// Some(false): it had already ended.
    pub fn cancel(&self, id: &str) -> Option<bool> {
        self.with(id, |o| {
            if o.status == Status::Running {
                o.cancel_requested = true;
                true
            } else {
                false
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_stops_before_the_next_zone() {
        let ops = Operations::default();
        let id = ops.start("boot", 3);
        assert!(ops.begin_zone(&id, "a"));
        ops.finish_zone(&id, Ok(serde_json::json!({"zone": "a"})));
        assert_eq!(ops.cancel(&id), Some(true));
        assert!(!ops.begin_zone(&id, "b"));
        ops.finish(&id);
        let o = ops.get(&id).expect("kept");
        assert_eq!((o.status, o.done, o.total), (Status::Cancelled, 1, 3));
        assert_eq!(ops.cancel(&id), Some(false));
        assert_eq!(ops.cancel("op-99"), None);
    }

    #[test]
    fn a_long_verb_shows_progress_and_a_stopped_one_ends_cancelled() {
        let ops = Operations::default();
        let id = ops.start("bench", 1);
        assert!(ops.begin_zone(&id, "bench"));
        ops.progress(
            &id,
            serde_json::json!({"phase": "warren N=10 boot", "pos": 3, "len": 10}),
        );
        assert_eq!(
            ops.get(&id)
                .and_then(|o| o.progress)
                .map(|p| p["pos"].clone()),
            Some(3.into())
        );
        assert!(!ops.cancelling(&id));
        assert_eq!(ops.cancel(&id), Some(true));
        assert!(ops.cancelling(&id));
        ops.stopped(&id, Ok(serde_json::json!({"zones_removed": 4})));
        ops.finish(&id);
        let o = ops.get(&id).expect("kept");
        assert_eq!(
            (o.status, o.done, o.results.len()),
            (Status::Cancelled, 0, 1)
        );
        assert_eq!(
            ops.cancel(&id),
            Some(false),
            "an ended operation is not cancelled again"
        );
    }

    #[test]
    fn a_failed_zone_makes_a_failed_operation() {
        let ops = Operations::default();
        let id = ops.start("halt", 1);
        assert!(ops.begin_zone(&id, "a"));
        ops.finish_zone(
            &id,
            Err(ApiError::new(
                409,
                "wrong_state",
                "zone 'a' is installed; boot it",
            )),
        );
        ops.finish(&id);
        assert_eq!(ops.get(&id).map(|o| o.status), Some(Status::Failure));
    }
}
