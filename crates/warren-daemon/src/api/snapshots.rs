//! `/1.0/zones/{zone}/snapshots[/{snap}]`, `/1.0/zones/{zone}/export` and
//! `/1.0/import`: the verbs of docs/snapshots.md. Listing reads the library on a
//! blocking thread; create, restore and delete run in the helper like every changing
//! verb; export and import can take minutes, so they are operations ([`super::operations::one`])
//! that write and read archives at host paths the caller names (root only, as every
//! changing request).

use std::path::PathBuf;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;
use warren::zone;

use super::zones::checked;
use super::{Body, MaybeBody};
use crate::error::{ApiError, ApiResult};
use crate::helper::Verb;
use crate::state::Shared;

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/1.0/zones/{zone}/snapshots", get(list).post(create))
        .route(
            "/1.0/zones/{zone}/snapshots/{snap}",
            get(show).delete(delete),
        )
        .route("/1.0/zones/{zone}/snapshots/{snap}/restore", post(restore))
        .route("/1.0/zones/{zone}/export", post(export))
        .route("/1.0/import", post(import))
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

/// A host path in a body: absolute, so it does not depend on the daemon's cwd.
fn absolute(zone: Option<&str>, field: &str, p: &std::path::Path) -> ApiResult<()> {
    if p.is_absolute() {
        return Ok(());
    }
    let mut e = ApiError::invalid(
        field,
        format!(
            "\"{field}\" {:?} is relative; give an absolute path on the daemon's host",
            p.display().to_string()
        ),
    );
    e.zone = zone.map(str::to_string);
    Err(e)
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportBody {
    /// Where to write the archive on the daemon's host (absolute; replaced if it exists).
    path: PathBuf,
    /// Put the template's root in the archive too (`--with-template`).
    #[serde(default)]
    with_template: bool,
    /// Export this snapshot instead of the zone's current layer (`--snapshot`).
    snapshot: Option<String>,
}

/// `warren export`: an operation (202) whose result is the export report.
async fn export(
    State(app): State<Shared>,
    Path(z): Path<String>,
    Body(b): Body<ExportBody>,
) -> ApiResult<Response> {
    checked(&z)?;
    absolute(Some(&z), "path", &b.path)?;
    if let Some(s) = &b.snapshot {
        checked_snapshot(&z, s)?;
    }
    let verb = Verb::Export {
        zone: z.clone(),
        file: b.path,
        with_template: b.with_template,
        snapshot: b.snapshot,
    };
    Ok(super::operations::one(&app, "export", &z, verb))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportBody {
    /// The archive 'warren export' wrote, on the daemon's host (absolute).
    path: PathBuf,
    /// The new zone's name; none: the name in the archive.
    name: Option<String>,
    /// Make the template from the archive when this host lacks it (`--with-template`).
    #[serde(default)]
    with_template: bool,
}

/// `warren import`: an operation (202) whose result is the import report.
async fn import(State(app): State<Shared>, Body(b): Body<ImportBody>) -> ApiResult<Response> {
    if let Some(n) = &b.name {
        checked(n)?;
    }
    absolute(b.name.as_deref(), "path", &b.path)?;
    if !b.path.is_file() {
        let mut e = ApiError::new(
            404,
            "not_found",
            format!(
                "import {}: no such archive; give the path of a file 'warren export' wrote",
                b.path.display()
            ),
        );
        e.field = Some("path".into());
        e.zone = b.name.clone();
        return Err(e);
    }
    let subject = b
        .name
        .clone()
        .unwrap_or_else(|| b.path.display().to_string());
    let verb = Verb::Import {
        file: b.path,
        zone: b.name,
        with_template: b.with_template,
    };
    Ok(super::operations::one(&app, "import", &subject, verb))
}
