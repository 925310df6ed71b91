//! `/1.0/operations`: start a verb over many zones in the background, watch it,
//! cancel it ([`crate::ops`]); [`one`] makes the same kind of operation of a single
//! long verb (export, import).

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use warren::state::ZoneState;

use super::Body;
use crate::error::{ApiError, ApiResult};
use crate::helper::Verb;
use crate::state::Shared;

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum OpVerb {
    Boot,
    Halt,
    Reboot,
    Clone,
    Suspend,
    Resume,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    verb: OpVerb,
    /// The zones to act on (for `clone`: the new zones' names).
    #[serde(default)]
    zones: Vec<String>,
    /// boot: every installed zone; halt, reboot: every zone that is up.
    #[serde(default)]
    all: bool,
    /// clone: the zone to clone.
    source: Option<String>,
    /// clone: clone the source's snapshot of this name (`clone --snapshot`).
    snapshot: Option<String>,
    /// How many zones are worked on at once (`--jobs`; default 1, at most 64).
    jobs: Option<usize>,
    /// halt, reboot: seconds between SIGTERM and the kill.
    timeout_s: Option<u64>,
    /// boot: how long to watch each new init (ms).
    watch_ms: Option<u64>,
}

pub async fn start(State(app): State<Shared>, Body(b): Body<StartBody>) -> ApiResult<Response> {
    if b.all != b.zones.is_empty() {
        return Err(ApiError::invalid(
            "zones",
            "give \"zones\" (names) or \"all\": true, one of them",
        ));
    }
    if b.all && b.verb == OpVerb::Clone {
        return Err(ApiError::invalid(
            "all",
            "clone takes the new zones' names in \"zones\", not \"all\"",
        ));
    }
    if b.timeout_s.is_some_and(|t| t > 3600) || b.watch_ms.is_some_and(|w| w > 60_000) {
        return Err(ApiError::invalid(
            "timeout_s",
            "timeout_s is at most 3600 and watch_ms at most 60000",
        ));
    }
    if b.jobs.is_some_and(|j| !(1..=64).contains(&j)) {
        return Err(ApiError::invalid(
            "jobs",
            "jobs: give 1 to 64 zones at once",
        ));
    }
    if b.snapshot.is_some() && b.verb != OpVerb::Clone {
        return Err(ApiError::invalid(
            "snapshot",
            "\"snapshot\" is for clone only (the source's snapshot to clone)",
        ));
    }
    let source = match (b.verb, &b.source) {
        (OpVerb::Clone, None) => {
            return Err(ApiError::invalid(
                "source",
                "clone needs \"source\": the zone to clone",
            ))
        }
        (OpVerb::Clone, Some(s)) => Some(s.clone()),
        _ => None,
    };
    for z in b.zones.iter().chain(source.iter()) {
        warren::names::zone(z).map_err(|e| ApiError::from_warren(&e).about(z))?;
    }
    if let (Some(src), Some(snap)) = (&source, &b.snapshot) {
        super::snapshots::checked_snapshot(src, snap)?;
    }
    let zones = if b.all {
        let want: fn(ZoneState) -> bool = match b.verb {
            OpVerb::Boot => |s| s == ZoneState::Installed,
            OpVerb::Suspend => |s| s == ZoneState::Running,
            OpVerb::Resume => |s| s == ZoneState::Suspended,
            OpVerb::Halt | OpVerb::Reboot | OpVerb::Clone => |s| s >= ZoneState::Ready,
        };
        app.read(warren::zone::list)
            .await?
            .into_iter()
            .filter(|i| i.state.is_some_and(want))
            .map(|i| i.name)
            .collect()
    } else {
        b.zones
    };
    let name = match b.verb {
        OpVerb::Boot => "boot",
        OpVerb::Halt => "halt",
        OpVerb::Reboot => "reboot",
        OpVerb::Clone => "clone",
        OpVerb::Suspend => "suspend",
        OpVerb::Resume => "resume",
    };
    let id = app.ops.start(name, zones.len());
    let task_app = app.clone();
    let task_id = id.clone();
    let jobs = b.jobs.unwrap_or(1);
    tokio::spawn(async move {
        // Up to `jobs` helpers at once, each one verb on one zone under its locks.
        let mut running = tokio::task::JoinSet::new();
        for z in zones {
            while running.len() >= jobs {
                running.join_next().await;
            }
            if !task_app.ops.begin_zone(&task_id, &z) {
                break;
            }
            let verb = match b.verb {
                OpVerb::Boot => Verb::Boot {
                    zone: z,
                    watch_ms: b.watch_ms.unwrap_or(200),
                },
                OpVerb::Halt => Verb::Halt {
                    zone: z,
                    timeout_s: b.timeout_s,
                },
                OpVerb::Reboot => Verb::Reboot {
                    zone: z,
                    timeout_s: b.timeout_s,
                },
                OpVerb::Clone => Verb::Clone {
                    source: source.clone().unwrap_or_default(),
                    zone: z,
                    snapshot: b.snapshot.clone(),
                },
                OpVerb::Suspend => Verb::Suspend { zone: z },
                OpVerb::Resume => Verb::Resume { zone: z },
            };
            let (app, id) = (task_app.clone(), task_id.clone());
            running.spawn(async move {
                let r = app.verb(verb).await;
                app.ops.finish_zone(&id, r);
            });
        }
        while running.join_next().await.is_some() {}
        task_app.ops.finish(&task_id);
    });
    Ok(accepted(&id))
}

/// 202 with the operation's id and URL (also in `Location`).
pub(super) fn accepted(id: &str) -> Response {
    let url = format!("/1.0/operations/{id}");
    (
        StatusCode::ACCEPTED,
        [(header::LOCATION, url.clone())],
        Json(json!({ "id": id, "operation": url })),
    )
        .into_response()
}

/// One long verb (`name`: export, import) on `subject` as an operation of one zone;
/// its result object is the operation's only result.
pub(super) fn one(app: &Shared, name: &str, subject: &str, verb: Verb) -> Response {
    one_then(app, name, subject, verb, || ())
}

/// [`one`], then `after` once the verb has ended (an uploaded archive is removed).
pub(super) fn one_then(
    app: &Shared,
    name: &str,
    subject: &str,
    verb: Verb,
    after: impl FnOnce() + Send + 'static,
) -> Response {
    let id = app.ops.start(name, 1);
    let (task_app, task_id, subject) = (app.clone(), id.clone(), subject.to_string());
    tokio::spawn(async move {
        if task_app.ops.begin_zone(&task_id, &subject) {
            let r = task_app.verb(verb).await;
            task_app.ops.finish_zone(&task_id, r);
        }
        task_app.ops.finish(&task_id);
        after();
    });
    accepted(&id)
}

pub async fn list(State(app): State<Shared>) -> Json<Value> {
    Json(serde_json::to_value(app.ops.list()).expect("operations serialise"))
}

fn no_such(id: &str) -> ApiError {
    let mut e = ApiError::new(
        404,
        "not_found",
        format!("operation '{id}' does not exist; operations live in the daemon's memory, so a restart forgets them; see GET /1.0/operations"),
    );
    e.field = Some("id".into());
    e
}

pub async fn get(State(app): State<Shared>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let op = app.ops.get(&id).ok_or_else(|| no_such(&id))?;
    Ok(Json(
        serde_json::to_value(op).expect("operations serialise"),
    ))
}

pub async fn cancel(State(app): State<Shared>, Path(id): Path<String>) -> ApiResult<Response> {
    match app.ops.cancel(&id) {
        None => Err(no_such(&id)),
        Some(true) => Ok((
            StatusCode::ACCEPTED,
            Json(json!({ "id": id, "cancel_requested": true })),
        )
            .into_response()),
        Some(false) => {
            let mut e = ApiError::new(
                409,
                "conflict",
                format!("operation '{id}' has already ended; nothing to cancel"),
            );
            e.field = Some("id".into());
            Err(e)
        }
    }
}
