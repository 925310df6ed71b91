//! `/1.0/profiles[/{name}]`, `/1.0/gc` and `/1.0/proc-views`: `warren profile ...`
//! (named sets of config keys new zones start from, docs/cli.md), `warren gc` and
//! `warren proc-views` (docs/proc-views.md). Reading calls the library on a blocking
//! thread; changing runs in the helper, as every changing verb (and proc-views, which
//! takes the zones' locks).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;

use super::Body;
use crate::error::{ApiError, ApiResult};
use crate::helper::Verb;
use crate::state::Shared;

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/1.0/profiles", get(list).post(create))
        .route(
            "/1.0/profiles/{name}",
            get(show).patch(change).delete(delete),
        )
        .route("/1.0/gc", post(gc))
        .route("/1.0/proc-views", get(proc_views).post(proc_views_refresh))
}

/// A profile name the library would refuse (`default` is the profile every new zone
/// starts from, and is a valid name).
fn checked(name: &str) -> ApiResult<()> {
    match warren::names::problem(name) {
        None => Ok(()),
        Some(reason) => Err(ApiError::from_warren(&warren::Error::InvalidName {
            kind: "profile",
            name: name.into(),
            reason,
        })),
    }
}

fn value<T: serde::Serialize>(v: T) -> Json<Value> {
    Json(serde_json::to_value(v).expect("API objects serialise"))
}

/// `warren profile list --json`: the names.
async fn list(State(app): State<Shared>) -> ApiResult<Json<Value>> {
    Ok(value(
        app.read(|ctx| warren::profile::list(&ctx.layout)).await?,
    ))
}

/// `warren profile show NAME --json`.
async fn show(State(app): State<Shared>, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    checked(&name)?;
    Ok(value(
        app.read(move |ctx| warren::profile::load(&ctx.layout, &name))
            .await?,
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    /// `KEY=VALUE` assignments, as `warren profile create NAME KEY=VALUE...`.
    #[serde(default)]
    set: Vec<String>,
}

async fn create(State(app): State<Shared>, Body(b): Body<CreateBody>) -> ApiResult<Response> {
    checked(&b.name)?;
    let v = app
        .verb(Verb::ProfileCreate {
            name: b.name,
            set: b.set,
        })
        .await?;
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangeBody {
    /// `KEY=VALUE` assignments (`profile set`).
    #[serde(default)]
    set: Vec<String>,
    /// Keys to remove (`profile unset`).
    #[serde(default)]
    unset: Vec<String>,
}

async fn change(
    State(app): State<Shared>,
    Path(name): Path<String>,
    Body(b): Body<ChangeBody>,
) -> ApiResult<Json<Value>> {
    checked(&name)?;
    if b.set.is_empty() == b.unset.is_empty() {
        return Err(ApiError::invalid(
            "set",
            "give either \"set\" (KEY=VALUE assignments) or \"unset\" (keys), one of them; see 'warren config keys'",
        ));
    }
    let verb = if b.unset.is_empty() {
        Verb::ProfileSet { name, set: b.set }
    } else {
        Verb::ProfileUnset {
            name,
            keys: b.unset,
        }
    };
    Ok(Json(app.verb(verb).await?))
}

async fn delete(State(app): State<Shared>, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    checked(&name)?;
    Ok(Json(app.verb(Verb::ProfileDelete { name }).await?))
}

/// `warren gc --json`: incomplete zones repaired or removed, leftovers collected; busy
/// zones skipped, never waited for.
async fn gc(State(app): State<Shared>) -> ApiResult<Json<Value>> {
    Ok(Json(app.verb(Verb::Gc).await?))
}

/// `warren proc-views --json`: each running zone's /proc views, wanted and attached.
async fn proc_views(State(app): State<Shared>) -> ApiResult<Json<Value>> {
    Ok(Json(app.verb(Verb::ProcViews { refresh: false }).await?))
}

/// `warren proc-views --refresh --json`: re-attach the views of running zones.
async fn proc_views_refresh(State(app): State<Shared>) -> ApiResult<Json<Value>> {
    Ok(Json(app.verb(Verb::ProcViews { refresh: true }).await?))
}
