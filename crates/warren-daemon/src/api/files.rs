//! `/1.0/zones/{zone}/files?path=...`: `warren cp` of one file out of a zone (GET, the
//! file as the body) or into it (PUT, the body as the file, at most the API's 1 MiB
//! body limit). The copy joins the zone's mount namespace (or, for a halted zone, a
//! private one), which needs a single-threaded process, so the `warren` CLI beside the
//! daemon does it, as for `exec` and `logs`; the file passes through a 0600 spool in
//! the root-only state root, removed when the request ends.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;

use super::zones::checked;
use crate::error::{ApiError, ApiResult};
use crate::state::{cli_error, Shared};

/// The largest file a GET returns (bytes); larger ones are copied with `warren cp`.
pub const MAX_FILE: u64 = 64 << 20;

pub fn routes() -> Router<Shared> {
    Router::new().route("/1.0/zones/{zone}/files", get(read).put(write))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileQuery {
    /// The absolute path inside the zone.
    path: String,
    /// PUT: owner and group as the zone sees them (default 0), mode (octal, e.g. 0640).
    uid: Option<u32>,
    gid: Option<u32>,
    mode: Option<String>,
    /// A tree as a tar stream (`warren cp -r`): [`super::files_tree`].
    #[serde(default)]
    recursive: bool,
}

/// A spool file in the state root, removed when dropped.
pub(super) struct Spool(pub(super) PathBuf);

impl Spool {
    pub(super) fn new(root: &std::path::Path) -> Spool {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Spool(root.join(format!(
            ".files-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )))
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn in_zone(z: &str, q: &FileQuery) -> ApiResult<String> {
    if q.path.contains('\0') {
        let mut e = ApiError::invalid("path", "path contains a NUL byte; give a path without one");
        e.zone = Some(z.into());
        return Err(e);
    }
    if !q.path.starts_with('/') {
        let mut e = ApiError::invalid(
            "path",
            format!(
                "path {:?} is relative; give the absolute path inside zone '{z}', e.g. /etc/hostname",
                q.path
            ),
        );
        e.zone = Some(z.into());
        return Err(e);
    }
    Ok(format!("{z}:{}", q.path))
}

/// Run `warren cp ARGS`; a failure is the CLI's error, naming the zone.
pub(super) async fn cp(app: &Shared, z: &str, args: Vec<String>) -> ApiResult<Value> {
    let mut all = vec!["--json".to_string(), "cp".into()];
    all.extend(args);
    let out = app.cli(&all, Duration::from_secs(300)).await?;
    if out.code != 0 {
        let mut e = cli_error(out.code, &out.stderr, Some(z));
        // warren cp relays the zone side's I/O error as text (exit 9, `system`); a
        // path that does not exist in the zone is the caller's miss, not the host's.
        if e.code == "system" && e.message.ends_with("(os error 2)") {
            e.status = 404;
            e.code = "not_found".into();
            e.field = Some("path".into());
        }
        return Err(e);
    }
    Ok(serde_json::from_slice(&out.stdout).unwrap_or(Value::Null))
}

/// Write a new 0600 file (a spool): never an existing one.
pub(super) fn write_private(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(data)
}

async fn read(
    State(app): State<Shared>,
    Path(z): Path<String>,
    Query(q): Query<FileQuery>,
) -> ApiResult<Response> {
    checked(&z)?;
    let src = in_zone(&z, &q)?;
    if q.recursive {
        return super::files_tree::read(&app, &z, &q.path, src).await;
    }
    // The copy lands in a 0700 directory of its own (the state root may be readable by
    // other host users), removed with everything `warren cp` left in it.
    let dir = super::files_tree::spool_dir(&app)?;
    let path = dir.0.join("file");
    cp(&app, &z, vec![src, path.display().to_string()]).await?;
    let data = tokio::task::spawn_blocking(move || -> std::io::Result<Option<Vec<u8>>> {
        let meta = std::fs::symlink_metadata(&path)?;
        if !meta.is_file() {
            return Err(std::io::Error::other("the copy is not a regular file"));
        }
        if meta.len() > MAX_FILE {
            return Ok(None);
        }
        std::fs::read(&path).map(Some)
    })
    .await
    .map_err(|e| ApiError::new(500, "system", format!("the file's reader failed: {e}")))?
    .map_err(|e| {
        ApiError::new(
            500,
            "system",
            format!("reading the copy of {}: {e}", q.path),
        )
    })?;
    let Some(data) = data else {
        let mut e = ApiError::new(
            413,
            "payload_too_large",
            format!(
                "{} in zone '{z}' is larger than {MAX_FILE} bytes; copy it with 'warren cp {z}:{} FILE'",
                q.path, q.path
            ),
        );
        e.zone = Some(z);
        e.field = Some("path".into());
        return Err(e);
    };
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], data).into_response())
}

async fn write(
    State(app): State<Shared>,
    Path(z): Path<String>,
    Query(q): Query<FileQuery>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    let dst = in_zone(&z, &q)?;
    if let Some(m) = &q.mode {
        if u32::from_str_radix(m.trim_start_matches("0o"), 8).map_or(true, |m| m > 0o7777) {
            let mut e = ApiError::invalid(
                "mode",
                format!("mode {m:?}: give octal permission bits, e.g. 0644"),
            );
            e.zone = Some(z);
            return Err(e);
        }
    }
    let mut stamp = Vec::new();
    for (flag, v) in [("--uid", q.uid), ("--gid", q.gid)] {
        if let Some(v) = v {
            stamp.extend([flag.to_string(), v.to_string()]);
        }
    }
    if let Some(m) = q.mode {
        stamp.extend(["--mode".to_string(), m]);
    }
    if q.recursive {
        return Ok(Json(
            super::files_tree::write(&app, &z, dst, stamp, body).await?,
        ));
    }
    let spool = Spool::new(&app.root);
    let path = spool.0.clone();
    tokio::task::spawn_blocking(move || write_private(&path, &body))
        .await
        .map_err(|e| ApiError::new(500, "system", format!("the file's writer failed: {e}")))?
        .map_err(|e| ApiError::new(500, "system", format!("spooling the file: {e}")))?;
    let mut args = vec![spool.0.display().to_string(), dst];
    args.extend(stamp);
    Ok(Json(cp(&app, &z, args).await?))
}
