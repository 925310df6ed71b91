//! `/1.0/swap`: `warren swap status` (GET), `swap enable` (POST: a swap file or zram0,
//! its size and vm.swappiness) and `swap disable` (DELETE). Enable and disable change
//! the host, so they run in the one-shot helper ([`crate::helper`]) through the same
//! library functions as the CLI (`warren::swap`); what warren enabled is recorded in
//! the root (`swap/state.json`), so the CLI and the API see and undo the same swap.

use std::path::PathBuf;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;

use super::Body;
use crate::error::{ApiError, ApiResult};
use crate::helper::Verb;
use crate::state::Shared;

pub fn routes() -> Router<Shared> {
    Router::new().route("/1.0/swap", get(status).post(enable).delete(disable))
}

async fn status(State(app): State<Shared>) -> ApiResult<Json<Value>> {
    let s = app
        .read(|ctx| warren::swap::status(&ctx.layout, &ctx.host.proc))
        .await?;
    Ok(Json(
        serde_json::to_value(s).expect("API objects serialise"),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnableBody {
    /// The size of the area, as `--size`: "512M", "4G".
    size: String,
    /// The swap file (absolute, on the daemon's host) [default: <root>/swap/swapfile].
    file: Option<PathBuf>,
    /// Use /dev/zram0 instead of a file (`--zram`).
    #[serde(default)]
    zram: bool,
    /// zram's compressor (`--zram-algorithm`; one of /sys/block/zram0/comp_algorithm)
    /// [default: the kernel's]; only with `zram`.
    zram_algorithm: Option<String>,
    /// vm.swappiness while warren's swap is on (0-200, `--swappiness`).
    #[serde(default = "default_swappiness")]
    swappiness: u64,
}

fn default_swappiness() -> u64 {
    60
}

async fn enable(State(app): State<Shared>, Body(b): Body<EnableBody>) -> ApiResult<Json<Value>> {
    let size = warren::config::parse_size(&b.size).ok_or_else(|| {
        ApiError::invalid(
            "size",
            format!("size {:?}: give a size such as 512M or 4G", b.size),
        )
    })?;
    if b.swappiness > 200 {
        return Err(ApiError::invalid(
            "swappiness",
            format!(
                "swappiness {}: give 0 to 200 (60 is the kernel's default)",
                b.swappiness
            ),
        ));
    }
    if b.zram && b.file.is_some() {
        return Err(ApiError::invalid(
            "file",
            "\"file\" and \"zram\": true exclude each other; give one (a swap file, or zram0)",
        ));
    }
    if b.zram_algorithm.is_some() && !b.zram {
        return Err(ApiError::invalid(
            "zram_algorithm",
            "\"zram_algorithm\" picks zram's compressor: give it with \"zram\": true, or leave it out",
        ));
    }
    if let Some(f) = b.file.as_ref().filter(|f| !f.is_absolute()) {
        return Err(ApiError::invalid(
            "file",
            format!(
                "file {:?} is relative; give an absolute path on the daemon's host, or none for <root>/swap/swapfile",
                f.display().to_string()
            ),
        ));
    }
    Ok(Json(
        app.verb(Verb::SwapEnable {
            size,
            file: b.file,
            zram: b.zram,
            zram_algorithm: b.zram_algorithm,
            swappiness: b.swappiness,
        })
        .await?,
    ))
}

async fn disable(State(app): State<Shared>) -> ApiResult<Json<Value>> {
    Ok(Json(app.verb(Verb::SwapDisable).await?))
}
