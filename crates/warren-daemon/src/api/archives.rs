//! `/1.0/zones/{zone}/export`, `/1.0/import` and `/1.0/import/upload`: export and
//! import (docs/snapshots.md) as operations ([`super::operations::one`]): they can take
//! minutes, so the request answers 202 and the operation carries the CLI's report.
//! Export writes the archive to a path on the daemon's host that the caller names;
//! import reads one from such a path, or from the request body (`/1.0/import/upload`,
//! streamed to a file in the state root, at most [`MAX_UPLOAD`] bytes, removed when the
//! import ends). Root only, as every changing request.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use futures_util::StreamExt;
use serde::Deserialize;

use super::snapshots::checked_snapshot;
use super::zones::checked;
use super::Body;
use crate::error::{ApiError, ApiResult};
use crate::helper::Verb;
use crate::state::Shared;

/// The largest archive taken as a request body (bytes): 16 GiB. Larger ones are
/// copied to the host and imported by path.
pub const MAX_UPLOAD: u64 = 16 << 30;

/// The upload path, which [`super::read_whole_body`] leaves to its handler.
pub const UPLOAD_PATH: &str = "/1.0/import/upload";

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/1.0/zones/{zone}/export", post(export))
        .route("/1.0/import", post(import))
        .route("/1.0/import/upload", post(upload))
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

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct UploadQuery {
    /// The new zone's name; none: the name in the archive.
    name: Option<String>,
    /// Make the template from the archive when this host lacks it.
    #[serde(default)]
    with_template: bool,
}

/// A file the upload wrote, removed when dropped (the import is done with it, or the
/// upload failed).
struct Spool(PathBuf);

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `e`, once the body is read (up to [`super::MAX_BODY`]): an answer that comes before
/// the archive is read must not leave it unread (see [`super::read_whole_body`]).
async fn drained(body: axum::body::Body, e: ApiError) -> ApiError {
    let _ = axum::body::to_bytes(body, super::MAX_BODY).await;
    e
}

fn too_big() -> ApiError {
    ApiError::new(
        413,
        "payload_too_large",
        format!("the archive is larger than {MAX_UPLOAD} bytes; copy it to the daemon's host and import it by path (POST /1.0/import {{\"path\"}})"),
    )
}

/// `warren import` of an archive sent as the body (`application/octet-stream`): the
/// body is streamed to `<root>/.upload-N` (0600, in the root-only state root), then
/// imported by an operation that removes the file when it ends.
async fn upload(
    State(app): State<Shared>,
    q: Result<Query<UploadQuery>, QueryRejection>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> ApiResult<Response> {
    let q = match q {
        Ok(Query(q)) => q,
        Err(r) => return Err(drained(body, ApiError::invalid("query", r.body_text())).await),
    };
    if let Some(Err(e)) = q.name.as_deref().map(checked) {
        return Err(drained(body, e).await);
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_UPLOAD) {
        return Err(too_big());
    }
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let spool = Spool(app.root.join(format!(
        ".upload-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )));
    // A blocking writer fed chunk by chunk (the daemon's tokio has no fs feature).
    let (tx, mut rx) = tokio::sync::mpsc::channel::<axum::body::Bytes>(16);
    let path = spool.0.clone();
    let writer = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        while let Some(chunk) = rx.blocking_recv() {
            f.write_all(&chunk)?;
        }
        f.sync_all()
    });
    let mut stream = body.into_data_stream();
    let mut total = 0u64;
    let mut failed = None;
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                failed = Some(ApiError::invalid(
                    "body",
                    format!("reading the uploaded archive: {e}; send it again"),
                ));
                break;
            }
        };
        total += chunk.len() as u64;
        if total > MAX_UPLOAD {
            failed = Some(too_big());
            break;
        }
        if tx.send(chunk).await.is_err() {
            break;
        }
    }
    drop(tx);
    let written = writer.await;
    if let Some(e) = failed {
        return Err(e);
    }
    match written {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            return Err(ApiError::new(
                500,
                "system",
                format!("writing the uploaded archive to {}: {e}; free space in the state root or import by path", spool.0.display()),
            ))
        }
        Err(e) => return Err(ApiError::new(500, "system", format!("the upload's writer failed: {e}"))),
    }
    if total == 0 {
        return Err(ApiError::invalid(
            "body",
            "the body is empty; send the archive 'warren export' wrote (content-type application/octet-stream)",
        ));
    }
    let subject = q.name.clone().unwrap_or_else(|| "upload".into());
    let verb = Verb::Import {
        file: spool.0.clone(),
        zone: q.name,
        with_template: q.with_template,
    };
    Ok(super::operations::one_then(
        &app,
        "import",
        &subject,
        verb,
        move || drop(spool),
    ))
}
