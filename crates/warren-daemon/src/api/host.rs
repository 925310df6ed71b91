//! `/1.0/templates`, `/1.0/info`, `/1.0/stat`, `/1.0/memstat`, `/1.0/doctor`
//! and `/metrics`: the host-wide reading verbs (and the
//! template verbs, which change state through the helper).

use std::path::PathBuf;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;

use super::Body;
use crate::error::{ApiError, ApiResult};
use crate::helper::{TemplateFrom, Verb};
use crate::state::{cli_error, Shared};

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/1.0/templates", get(templates).post(template_create))
        .route(
            "/1.0/templates/{name}",
            get(template_info).delete(template_delete),
        )
        .route("/1.0/info", get(info))
        .route("/1.0/stat", get(stat))
        .route("/1.0/memstat", get(memstat))
        .route("/1.0/doctor", get(doctor))
}

fn value<T: serde::Serialize>(v: T) -> Json<Value> {
    Json(serde_json::to_value(v).expect("API objects serialise"))
}

async fn templates(State(app): State<Shared>) -> ApiResult<Json<Value>> {
    Ok(value(
        app.read(|ctx| warren::storage::template::list(&ctx.layout))
            .await?,
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateBody {
    name: String,
    from: TemplateFrom,
    /// `dir`, `tar` and `oci`: the host path to copy from.
    path: Option<PathBuf>,
    /// `zone`: the installed zone whose root becomes the template (`--from-zone`).
    zone: Option<String>,
    /// `oci`: the image to take from an archive of several (`--image`).
    image: Option<String>,
}

async fn template_create(
    State(app): State<Shared>,
    Body(b): Body<TemplateBody>,
) -> ApiResult<Response> {
    warren::names::template(&b.name).map_err(ApiError::from)?;
    if b.zone.is_some() != (b.from == TemplateFrom::Zone) {
        return Err(ApiError::invalid(
            "zone",
            "\"zone\" goes with \"from\": \"zone\" and only with it: give both to make a template from a zone's root",
        ));
    }
    if b.image.is_some() && b.from != TemplateFrom::Oci {
        return Err(ApiError::invalid(
            "image",
            "\"image\" picks an image of an OCI archive: give it with \"from\": \"oci\"",
        ));
    }
    let verb = match (b.from, b.zone) {
        (TemplateFrom::Zone, Some(z)) => {
            warren::names::zone(&z).map_err(|e| ApiError::from_warren(&e).about(&z))?;
            Verb::TemplatePublish {
                name: b.name,
                zone: z,
            }
        }
        (TemplateFrom::Oci, _) => Verb::TemplateOci {
            name: b.name,
            archive: b.path.ok_or_else(|| {
                ApiError::invalid(
                    "path",
                    "a template from an OCI archive needs \"path\": the archive on the daemon's host",
                )
            })?,
            image: b.image,
        },
        (from, _) => Verb::TemplateCreate {
            name: b.name,
            from,
            path: b.path,
        },
    };
    let v = app.verb(verb).await?;
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

/// `warren template info NAME`: the template's manifest.
async fn template_info(
    State(app): State<Shared>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    warren::names::template(&name).map_err(ApiError::from)?;
    Ok(value(
        app.read(move |ctx| warren::storage::template::load(&ctx.layout, &name))
            .await?,
    ))
}

async fn template_delete(
    State(app): State<Shared>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    warren::names::template(&name).map_err(ApiError::from)?;
    Ok(Json(app.verb(Verb::TemplateDelete { name }).await?))
}

async fn info(State(app): State<Shared>) -> ApiResult<Json<Value>> {
    Ok(value(app.read(warren::host::info).await?))
}

#[derive(Deserialize)]
struct StatQuery {
    /// Comma-separated zone names; none: every booted zone.
    zones: Option<String>,
    /// Read PSS/USS too (slow).
    #[serde(default)]
    pss: bool,
}

async fn stat(State(app): State<Shared>, Query(q): Query<StatQuery>) -> ApiResult<Json<Value>> {
    let zones: Vec<String> = q
        .zones
        .iter()
        .flat_map(|z| z.split(','))
        .filter(|z| !z.is_empty())
        .map(str::to_string)
        .collect();
    for z in &zones {
        warren::names::zone(z).map_err(|e| ApiError::from_warren(&e).about(z))?;
    }
    let oci = app.oci_root.clone();
    let r = app
        .read(move |ctx| {
            let mut s = warren::stat::Sampler::new(warren::stat::Options {
                zones,
                pss: q.pss,
                oci_root: Some(oci),
                ..Default::default()
            });
            s.snapshot(ctx, warren::stat::SNAPSHOT_WINDOW)
        })
        .await?;
    Ok(value(r))
}

async fn memstat(State(app): State<Shared>) -> ApiResult<Json<Value>> {
    Ok(value(app.read(warren::stat::memstat::memstat).await?))
}

#[derive(Deserialize)]
struct DoctorQuery {
    /// The density to check the host for (`warren doctor --zones`).
    zones: Option<u32>,
}

/// `warren doctor --json`: the report is assembled by the CLI's handler, so the CLI
/// runs it (exit 1 still carries a report: some check would fail).
async fn doctor(State(app): State<Shared>, Query(q): Query<DoctorQuery>) -> ApiResult<Json<Value>> {
    let mut args = vec!["--json".to_string(), "doctor".into()];
    if let Some(n) = q.zones {
        args.extend(["--zones".into(), n.to_string()]);
    }
    let out = app.cli(&args, Duration::from_secs(60)).await?;
    match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(v) if out.code == 0 || out.code == 1 => Ok(Json(v)),
        _ => Err(cli_error(out.code, &out.stderr, None)),
    }
}

/// Prometheus exposition, from the renderer plugged into the router; 501 without one.
/// OpenMetrics when the scraper accepts it (Prometheus asks for it first), else the
/// 0.0.4 text format.
pub async fn metrics(
    State(app): State<Shared>,
    headers: axum::http::HeaderMap,
) -> ApiResult<Response> {
    let Some(render) = app.metrics.clone() else {
        return Err(ApiError::new(
            501,
            "not_implemented",
            "this daemon was built without a metrics renderer; build one with warren's metrics module plugged into warren_daemon::api::router",
        ));
    };
    let openmetrics = headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let (format, content_type) = if openmetrics {
        (
            warren::metrics::Format::OpenMetrics,
            warren::metrics::CONTENT_TYPE,
        )
    } else {
        (
            warren::metrics::Format::Prometheus,
            warren::metrics::encode::PROMETHEUS_CONTENT_TYPE,
        )
    };
    let text = app.read(move |ctx| render(ctx, format)).await?;
    Ok(([(axum::http::header::CONTENT_TYPE, content_type)], text).into_response())
}
