//! The routes of API 1.0 and what they share: the JSON body extractor (size-limited,
//! its failures as structured errors), the fallbacks, the route table that the OpenAPI
//! document is checked against ([`ROUTES`]), and [`read_whole_body`], which reads every
//! request's body before it is routed.

mod agent;
mod archives;
mod bench;
mod bench_cli;
mod files;
mod files_tree;
mod host;
mod operations;
mod profiles;
mod snapshots;
mod swap;
mod zones;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::state::Shared;

/// The largest request body taken (bytes); larger is 413.
pub const MAX_BODY: usize = 1 << 20;

/// The OpenAPI document, kept in the repository (docs/api/openapi.json).
pub const OPENAPI: &str = include_str!("../../../../docs/api/openapi.json");

/// Every (method, path) the router serves, in OpenAPI's path syntax; a test checks the
/// document against it both ways.
pub const ROUTES: &[(&str, &str)] = &[
    ("get", "/1.0"),
    ("get", "/1.0/openapi.json"),
    ("get", "/1.0/zones"),
    ("post", "/1.0/zones"),
    ("get", "/1.0/zones/{zone}"),
    ("delete", "/1.0/zones/{zone}"),
    ("post", "/1.0/zones/{zone}/install"),
    ("post", "/1.0/zones/{zone}/clone"),
    ("post", "/1.0/zones/{zone}/boot"),
    ("post", "/1.0/zones/{zone}/halt"),
    ("post", "/1.0/zones/{zone}/reboot"),
    ("post", "/1.0/zones/{zone}/suspend"),
    ("post", "/1.0/zones/{zone}/resume"),
    ("get", "/1.0/snapshots"),
    ("get", "/1.0/zones/{zone}/snapshots"),
    ("post", "/1.0/zones/{zone}/snapshots"),
    ("get", "/1.0/zones/{zone}/snapshots/{snap}"),
    ("delete", "/1.0/zones/{zone}/snapshots/{snap}"),
    ("post", "/1.0/zones/{zone}/snapshots/{snap}/restore"),
    ("post", "/1.0/zones/{zone}/export"),
    ("post", "/1.0/import"),
    ("post", "/1.0/import/upload"),
    ("post", "/1.0/zones/{zone}/uninstall"),
    ("post", "/1.0/zones/{zone}/rename"),
    ("get", "/1.0/zones/{zone}/config"),
    ("patch", "/1.0/zones/{zone}/config"),
    ("get", "/1.0/zones/{zone}/config/{key}"),
    ("delete", "/1.0/zones/{zone}/config/{key}"),
    ("get", "/1.0/zones/{zone}/logs"),
    ("get", "/1.0/zones/{zone}/files"),
    ("put", "/1.0/zones/{zone}/files"),
    ("post", "/1.0/zones/{zone}/exec"),
    ("get", "/1.0/templates"),
    ("post", "/1.0/templates"),
    ("get", "/1.0/templates/{name}"),
    ("delete", "/1.0/templates/{name}"),
    ("post", "/1.0/bench"),
    ("get", "/1.0/profiles"),
    ("post", "/1.0/profiles"),
    ("get", "/1.0/profiles/{name}"),
    ("patch", "/1.0/profiles/{name}"),
    ("delete", "/1.0/profiles/{name}"),
    ("post", "/1.0/gc"),
    ("get", "/1.0/proc-views"),
    ("post", "/1.0/proc-views"),
    ("get", "/1.0/info"),
    ("get", "/1.0/stat"),
    ("get", "/1.0/memstat"),
    ("get", "/1.0/doctor"),
    ("get", "/1.0/agent"),
    ("post", "/1.0/agent"),
    ("get", "/1.0/swap"),
    ("post", "/1.0/swap"),
    ("delete", "/1.0/swap"),
    ("get", "/1.0/events"),
    ("get", "/1.0/operations"),
    ("post", "/1.0/operations"),
    ("get", "/1.0/operations/{id}"),
    ("delete", "/1.0/operations/{id}"),
    ("get", "/metrics"),
];

/// A JSON body whose rejection is a structured error (413 past [`MAX_BODY`]).
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Body(v)),
            Err(r) => Err(rejection(r)),
        }
    }
}

/// A JSON body that may be absent (an empty body is `T::default()`).
pub struct MaybeBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for MaybeBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|r| {
                if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    too_large()
                } else {
                    ApiError::invalid("body", r.body_text())
                }
            })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(MaybeBody(T::default()));
        }
        serde_json::from_slice(&bytes).map(MaybeBody).map_err(|e| {
            ApiError::invalid(
                "body",
                format!("the body is not the JSON object expected: {e}; see /1.0/openapi.json"),
            )
        })
    }
}

fn too_large() -> ApiError {
    ApiError::new(
        413,
        "payload_too_large",
        format!("the request body is larger than {MAX_BODY} bytes; send less (zones and keys are small)"),
    )
}

fn rejection(r: JsonRejection) -> ApiError {
    let status = r.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return too_large();
    }
    let mut e = ApiError::invalid(
        "body",
        format!(
            "{}; send the JSON object the OpenAPI document describes (/1.0/openapi.json)",
            r.body_text()
        ),
    );
    e.status = status.as_u16();
    if status == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        e.code = "unsupported_media_type".into();
    }
    e
}

async fn not_found() -> Response {
    ApiError::new(404, "not_found", "no such API path; see /1.0/openapi.json").into_response()
}

async fn not_allowed() -> Response {
    ApiError::new(
        405,
        "method_not_allowed",
        "this path does not take that method; see /1.0/openapi.json",
    )
    .into_response()
}

async fn openapi() -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        OPENAPI,
    )
        .into_response()
}

async fn root(axum::extract::State(app): axum::extract::State<Shared>) -> Response {
    axum::Json(serde_json::json!({
        "api_version": "1.0",
        "server": "warren-daemon",
        "version": env!("CARGO_PKG_VERSION"),
        "root": app.root,
        "openapi": "/1.0/openapi.json",
        "metrics": app.metrics.is_some(),
    }))
    .into_response()
}

/// Read the request's whole body (up to [`MAX_BODY`]) before routing, so every
/// answer — a 405 for a method a path does not take, a 404, an access refusal, a
/// handler's error that came before its body — is sent on a connection whose request
/// was read to its end.
///
/// Without it, hyper closes the connection after answering a request whose body the
/// handler never read, unless that body had already arrived: a client that sends the
/// headers and then the body (Python's http.client does) races the close. Over a unix
/// socket the close comes with unread bytes, so the peer's next write fails; through
/// a TCP bridge (socat) that failure ends the bridged connection, and the client sees
/// it closed without a response (`daemon_unread_body`'s test shows both). A body
/// larger than the limit is answered 413 without being read, as before. The archive
/// upload (`archives::UPLOAD_PATH`) is left to its handler, which streams it.
async fn read_whole_body(req: Request, next: axum::middleware::Next) -> Response {
    if req.method() == axum::http::Method::POST && req.uri().path() == archives::UPLOAD_PATH {
        // An archive, streamed to a file by its handler, which reads it to its end.
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Err(e) => {
            // to_bytes fails on the limit or on a connection that broke mid-body.
            if std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
            {
                too_large().into_response()
            } else {
                ApiError::invalid(
                    "body",
                    format!("reading the request body: {e}; send it whole"),
                )
                .into_response()
            }
        }
    }
}

/// Remove the spools (`.files-PID-N[.d]`, `.upload-PID-N`) that daemons no longer
/// running left in the state root `root` (killed mid-request); a live daemon's are kept.
pub fn sweep_spools(root: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = spool_owner(&name) {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let p = e.path();
                let _ = if e.file_type().is_ok_and(|t| t.is_dir()) {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
        }
    }
}

/// The pid in a spool's name (`.files-PID-N`, `.files-PID-N.d`, `.upload-PID-N`).
fn spool_owner(name: &str) -> Option<u32> {
    let rest = name
        .strip_prefix(".files-")
        .or_else(|| name.strip_prefix(".upload-"))?;
    let rest = rest.strip_suffix(".d").unwrap_or(rest);
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// The whole API over `app`, with the access layer (every request is judged by its
/// connection's peer) and the body limit.
pub fn router(app: Shared) -> Router {
    Router::new()
        .route("/1.0", get(root))
        .route("/1.0/openapi.json", get(openapi))
        .merge(zones::routes())
        .merge(host::routes())
        .merge(snapshots::routes())
        .merge(archives::routes())
        .merge(bench::routes())
        .merge(profiles::routes())
        .merge(files::routes())
        .merge(swap::routes())
        .merge(agent::routes())
        .route(
            "/1.0/operations",
            get(operations::list).post(operations::start),
        )
        .route(
            "/1.0/operations/{id}",
            get(operations::get).delete(operations::cancel),
        )
        .route("/metrics", get(host::metrics))
        .route("/1.0/events", get(crate::events::stream))
        .merge(crate::ui::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(crate::access::layer))
        .layer(axum::middleware::from_fn(read_whole_body))
        .with_state(app)
}

#[cfg(test)]
mod spool_tests {
    use super::*;

    #[test]
    fn spools_of_dead_daemons_are_swept_and_nothing_else() {
        assert_eq!(spool_owner(".files-12-3"), Some(12));
        assert_eq!(spool_owner(".files-12-3.d"), Some(12));
        assert_eq!(spool_owner(".upload-7-0"), Some(7));
        assert_eq!(spool_owner(".files-x-3"), None);
        assert_eq!(spool_owner("zones"), None);
        assert_eq!(spool_owner(".files-12"), None);
        let dir = tempfile::tempdir().unwrap();
        // pid_max is below 2^22: no process has this pid.
        let dead = 4_194_304 + 1;
        let live = std::process::id();
        for n in [
            format!(".files-{dead}-0"),
            format!(".upload-{dead}-1"),
            format!(".files-{live}-0"),
            "zones".into(),
        ] {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        std::fs::create_dir(dir.path().join(format!(".files-{dead}-2.d"))).unwrap();
        std::fs::write(dir.path().join(format!(".files-{dead}-2.d/file")), b"x").unwrap();
        sweep_spools(dir.path());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, vec![format!(".files-{live}-0"), "zones".to_string()]);
    }
}
