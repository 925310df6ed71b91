//! `/1.0/zones/{zone}/snapshots[/{snap}]`: the snapshot verbs of docs/snapshots.md.
//! Listing reads the library on a blocking thread; create, restore and delete run in
//! the helper like every changing verb. Export and import are in [`super::archives`].

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;
use warren::zone;

use super::zones::checked;
use super::MaybeBody;
use crate::error::{ApiError, ApiResult};
use crate::helper::Verb;
use crate::state::Shared;

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/1.0/snapshots", get(list_all))
        .route("/1.0/zones/{zone}/snapshots", get(list).post(create))
        .route(
            "/1.0/zones/{zone}/snapshots/{snap}",
            get(show).delete(delete),
        )
        .route("/1.0/zones/{zone}/snapshots/{snap}/restore", post(restore))
}

/// A snapshot name the library would refuse, refused before a process is started
/// (the library's own message, with the zone and the field).
pub(super) fn checked_snapshot(zone: &str, name: &str) -> ApiResult<()> {
    match warren::names::problem(name) {
        None => Ok(()),
        Some(reason) => {
            let mut e = ApiError::invalid(
                "snapshot",
                format!("zone '{zone}': snapshot name {name:?} is invalid: {reason}; use 1 to 63 characters of a-z, 0-9 and '-', starting with a letter or digit"),
            );
            e.zone = Some(zone.into());
            Err(e)
        }
    }
}

/// `warren snapshot list --json`: every zone's snapshots.
async fn list_all(State(app): State<Shared>) -> ApiResult<Json<Value>> {
    let v = app.read(|ctx| zone::snapshot::list(ctx, None)).await?;
    Ok(Json(
        serde_json::to_value(v).expect("API objects serialise"),
    ))
}

async fn list(State(app): State<Shared>, Path(z): Path<String>) -> ApiResult<Json<Value>> {
    checked(&z)?;
    let v = app
        .read(move |ctx| {
            zone::load(ctx, &z)?;
            zone::snapshot::list(ctx, Some(&z))
        })
        .await?;
    Ok(Json(
        serde_json::to_value(v).expect("API objects serialise"),
    ))
}

async fn show(
    State(app): State<Shared>,
    Path((z, snap)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    checked_snapshot(&z, &snap)?;
    let v = app
        .read(move |ctx| {
            zone::load(ctx, &z)?;
            zone::snapshot::list(ctx, Some(&z))?
                .into_iter()
                .find(|s| s.meta.name == snap)
                .ok_or(warren::Error::NoSuchSnapshot {
                    zone: z,
                    name: snap,
                })
        })
        .await?;
    Ok(Json(
        serde_json::to_value(v).expect("API objects serialise"),
    ))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    /// The snapshot's name; none: the UTC time, `YYYYMMDD-HHMMSS`.
    name: Option<String>,
}

async fn create(
    State(app): State<Shared>,
    Path(z): Path<String>,
    MaybeBody(b): MaybeBody<CreateBody>,
) -> ApiResult<Response> {
    checked(&z)?;
    if let Some(n) = &b.name {
        checked_snapshot(&z, n)?;
    }
    let v = app
        .verb(Verb::SnapshotCreate {
            zone: z,
            name: b.name,
        })
        .await?;
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

async fn restore(
    State(app): State<Shared>,
    Path((z, snap)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    checked_snapshot(&z, &snap)?;
    Ok(Json(
        app.verb(Verb::SnapshotRestore {
            zone: z,
            name: snap,
        })
        .await?,
    ))
}

async fn delete(
    State(app): State<Shared>,
    Path((z, snap)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    checked_snapshot(&z, &snap)?;
    Ok(Json(
        app.verb(Verb::SnapshotDelete {
            zone: z,
            name: snap,
        })
        .await?,
    ))
}
