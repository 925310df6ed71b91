//! `/1.0/zones/...`: the zone verbs. Reading ones call the library on a blocking
//! thread; changing ones run in a helper process ([`crate::helper`]); `exec` and `logs`
//! run the CLI, whose process is what joins a zone or follows its console.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use warren::zone;

use super::{Body, MaybeBody};
use crate::error::{ApiError, ApiResult};
use crate::helper::{Apply, Verb};
use crate::state::{cli_error, Shared};

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/1.0/zones", get(list).post(create))
        .route("/1.0/zones/{zone}", get(info).delete(delete))
        .route("/1.0/zones/{zone}/install", post(install))
        .route("/1.0/zones/{zone}/clone", post(clone))
        .route("/1.0/zones/{zone}/boot", post(boot))
        .route("/1.0/zones/{zone}/halt", post(halt))
        .route("/1.0/zones/{zone}/reboot", post(reboot))
        .route("/1.0/zones/{zone}/suspend", post(suspend))
        .route("/1.0/zones/{zone}/resume", post(resume))
        .route("/1.0/zones/{zone}/uninstall", post(uninstall))
        .route("/1.0/zones/{zone}/rename", post(rename))
        .route(
            "/1.0/zones/{zone}/config",
            get(config_show).patch(config_patch),
        )
        .route(
            "/1.0/zones/{zone}/config/{key}",
            get(config_get).delete(config_unset),
        )
        .route("/1.0/zones/{zone}/logs", get(logs))
        .route("/1.0/zones/{zone}/exec", post(exec))
}

/// A name the library would refuse anyway, refused before a process is started.
pub(super) fn checked(zone: &str) -> ApiResult<()> {
    warren::names::zone(zone).map_err(|e| ApiError::from_warren(&e).about(zone))
}

#[derive(Deserialize)]
struct ListQuery {
    /// Only zones in this state (`running`, `installed`, ...).
    state: Option<String>,
}

async fn list(State(app): State<Shared>, Query(q): Query<ListQuery>) -> ApiResult<Json<Value>> {
    let oci = app.oci_root.clone();
    let all = app.read(move |ctx| zone::list_with_oci(ctx, &oci)).await?;
    let v = serde_json::to_value(all).expect("API objects serialise");
    let Some(want) = q.state else {
        return Ok(Json(v));
    };
    let rows = v
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["state"] == want.as_str())
        .cloned()
        .collect();
    Ok(Json(Value::Array(rows)))
}

async fn info(State(app): State<Shared>, Path(z): Path<String>) -> ApiResult<Json<Value>> {
    checked(&z)?;
    let i = app
        .read(move |ctx| {
            if !ctx.layout.zone_dir(&z).is_dir() {
                return Err(warren::Error::NoSuchZone(z));
            }
            Ok(zone::info(ctx, &z))
        })
        .await?;
    Ok(Json(
        serde_json::to_value(i).expect("API objects serialise"),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    name: String,
    template: Option<String>,
    /// `KEY=VALUE` assignments, as `warren create --set`.
    #[serde(default)]
    set: Vec<String>,
    #[serde(default)]
    profiles: Vec<String>,
    /// Install it too (`warren create` then `warren install`).
    #[serde(default)]
    install: bool,
}

async fn create(State(app): State<Shared>, Body(b): Body<CreateBody>) -> ApiResult<Response> {
    checked(&b.name)?;
    let cfg = app
        .verb(Verb::Create {
            zone: b.name.clone(),
            template: b.template,
            set: b.set,
            profiles: b.profiles,
        })
        .await?;
    let installed = if b.install {
        Some(app.verb(Verb::Install { zone: b.name }).await?)
    } else {
        None
    };
    Ok((
        StatusCode::CREATED,
        Json(json!({ "config": cfg, "install": installed })),
    )
        .into_response())
}

#[derive(Deserialize)]
struct DeleteQuery {
    #[serde(default)]
    force: bool,
}

async fn delete(
    State(app): State<Shared>,
    Path(z): Path<String>,
    Query(q): Query<DeleteQuery>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    Ok(Json(
        app.verb(Verb::Delete {
            zone: z,
            force: q.force,
        })
        .await?,
    ))
}

async fn install(State(app): State<Shared>, Path(z): Path<String>) -> ApiResult<Json<Value>> {
    checked(&z)?;
    Ok(Json(app.verb(Verb::Install { zone: z }).await?))
}

async fn uninstall(State(app): State<Shared>, Path(z): Path<String>) -> ApiResult<Json<Value>> {
    checked(&z)?;
    Ok(Json(app.verb(Verb::Uninstall { zone: z }).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameBody {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CloneBody {
    name: String,
    /// Clone this snapshot of the source instead of its current layer.
    snapshot: Option<String>,
}

async fn clone(
    State(app): State<Shared>,
    Path(z): Path<String>,
    Body(b): Body<CloneBody>,
) -> ApiResult<Response> {
    checked(&z)?;
    checked(&b.name)?;
    if let Some(s) = &b.snapshot {
        super::snapshots::checked_snapshot(&z, s)?;
    }
    let v = app
        .verb(Verb::Clone {
            source: z,
            zone: b.name,
            snapshot: b.snapshot,
        })
        .await?;
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

async fn rename(
    State(app): State<Shared>,
    Path(z): Path<String>,
    Body(b): Body<NameBody>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    checked(&b.name)?;
    Ok(Json(
        app.verb(Verb::Rename {
            zone: z,
            new: b.name,
        })
        .await?,
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BootBody {
    /// How long to watch the new init (ms), as `warren boot --watch`.
    #[serde(default = "default_watch")]
    watch_ms: u64,
}

fn default_watch() -> u64 {
    200
}

impl Default for BootBody {
    fn default() -> Self {
        BootBody {
            watch_ms: default_watch(),
        }
    }
}

async fn boot(
    State(app): State<Shared>,
    Path(z): Path<String>,
    MaybeBody(b): MaybeBody<BootBody>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    if b.watch_ms > 60_000 {
        return Err(ApiError::invalid(
            "watch_ms",
            format!("watch_ms {}: at most 60000 (one minute)", b.watch_ms),
        )
        .about(&z));
    }
    Ok(Json(
        app.verb(Verb::Boot {
            zone: z,
            watch_ms: b.watch_ms,
        })
        .await?,
    ))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StopBody {
    /// Seconds between SIGTERM and the kill (`--timeout`).
    timeout_s: Option<u64>,
}

fn stop_timeout(z: &str, b: &StopBody) -> ApiResult<()> {
    match b.timeout_s {
        Some(t) if t > 3600 => Err(ApiError::invalid(
            "timeout_s",
            format!("timeout_s {t}: at most 3600 (one hour)"),
        )
        .about(z)),
        _ => Ok(()),
    }
}

async fn halt(
    State(app): State<Shared>,
    Path(z): Path<String>,
    MaybeBody(b): MaybeBody<StopBody>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    stop_timeout(&z, &b)?;
    Ok(Json(
        app.verb(Verb::Halt {
            zone: z,
            timeout_s: b.timeout_s,
        })
        .await?,
    ))
}

async fn reboot(
    State(app): State<Shared>,
    Path(z): Path<String>,
    MaybeBody(b): MaybeBody<StopBody>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    stop_timeout(&z, &b)?;
    Ok(Json(
        app.verb(Verb::Reboot {
            zone: z,
            timeout_s: b.timeout_s,
        })
        .await?,
    ))
}

/// `warren suspend ZONE`: freeze it and page its memory out (docs/suspend.md).
async fn suspend(State(app): State<Shared>, Path(z): Path<String>) -> ApiResult<Json<Value>> {
    checked(&z)?;
    Ok(Json(app.verb(Verb::Suspend { zone: z }).await?))
}

/// `warren resume ZONE`: thaw a suspended zone.
async fn resume(State(app): State<Shared>, Path(z): Path<String>) -> ApiResult<Json<Value>> {
    checked(&z)?;
    Ok(Json(app.verb(Verb::Resume { zone: z }).await?))
}

async fn config_show(State(app): State<Shared>, Path(z): Path<String>) -> ApiResult<Json<Value>> {
    checked(&z)?;
    let cfg = app
        .read(move |ctx| zone::load(ctx, &z).map(|zn| zn.config))
        .await?;
    Ok(Json(
        serde_json::to_value(cfg).expect("API objects serialise"),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigBody {
    /// `KEY=VALUE` assignments, as `warren config set`.
    #[serde(default)]
    set: Vec<String>,
    /// Keys to unset, as `warren config unset`.
    #[serde(default)]
    unset: Vec<String>,
    #[serde(default)]
    apply: Apply,
}

async fn config_patch(
    State(app): State<Shared>,
    Path(z): Path<String>,
    Body(b): Body<ConfigBody>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    if b.set.is_empty() == b.unset.is_empty() {
        return Err(ApiError::invalid("set", "give either \"set\" (KEY=VALUE assignments) or \"unset\" (keys), one of them; see 'warren config keys'").about(&z));
    }
    let verb = if b.unset.is_empty() {
        Verb::ConfigSet {
            zone: z,
            set: b.set,
            apply: b.apply,
        }
    } else {
        Verb::ConfigUnset {
            zone: z,
            keys: b.unset,
            apply: b.apply,
        }
    };
    Ok(Json(app.verb(verb).await?))
}

async fn config_get(
    State(app): State<Shared>,
    Path((z, key)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    let v = app
        .read(move |ctx| {
            let k = warren::config::key(&key)
                .ok_or_else(|| warren::Error::config(&z, warren::config::unknown_key(&key)))?;
            let zn = zone::load(ctx, &z)?;
            let mut entries = Vec::new();
            warren::config::flatten_table(&warren::config::to_table(&zn.config), &mut entries);
            let value = entries.into_iter().find(|(n, _)| *n == key).map(|(_, v)| v);
            Ok(json!({
                "zone": z,
                "key": key,
                "set": value.is_some(),
                "value": value,
                "default": k.default,
            }))
        })
        .await?;
    Ok(Json(v))
}

#[derive(Deserialize, Default)]
struct ApplyQuery {
    #[serde(default)]
    apply: Apply,
}

async fn config_unset(
    State(app): State<Shared>,
    Path((z, key)): Path<(String, String)>,
    Query(q): Query<ApplyQuery>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    Ok(Json(
        app.verb(Verb::ConfigUnset {
            zone: z,
            keys: vec![key],
            apply: q.apply,
        })
        .await?,
    ))
}

#[derive(Deserialize)]
struct LogsQuery {
    /// Only the last N lines.
    tail: Option<usize>,
}

async fn logs(
    State(app): State<Shared>,
    Path(z): Path<String>,
    Query(q): Query<LogsQuery>,
) -> ApiResult<Response> {
    checked(&z)?;
    let mut args = vec!["logs".to_string(), z.clone()];
    if let Some(n) = q.tail {
        args.extend(["--tail".into(), n.to_string()]);
    }
    let out = app.cli(&args, Duration::from_secs(30)).await?;
    if out.code != 0 {
        return Err(cli_error(out.code, &out.stderr, Some(&z)));
    }
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; charset=utf-8",
        )],
        out.stdout,
    )
        .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecBody {
    /// The command and its arguments.
    command: Vec<String>,
    /// `NAME=VALUE` environment entries.
    #[serde(default)]
    env: Vec<String>,
    user: Option<String>,
    cwd: Option<String>,
    /// Seconds before the command is killed (default 60, at most 3600).
    timeout_s: Option<u64>,
}

async fn exec(
    State(app): State<Shared>,
    Path(z): Path<String>,
    Body(b): Body<ExecBody>,
) -> ApiResult<Json<Value>> {
    checked(&z)?;
    if b.command.is_empty() {
        return Err(ApiError::invalid(
            "command",
            "\"command\" is empty: give the program and its arguments, e.g. [\"uname\", \"-a\"]",
        )
        .about(&z));
    }
    // The usual refusals typed, before the CLI (whose own failures all exit 125).
    let name = z.clone();
    app.read(move |ctx| {
        let st = zone::load(ctx, &name)?.state(ctx);
        if st != warren::state::ZoneState::Running {
            return Err(warren::Error::WrongState {
                zone: name.clone(),
                state: st,
                remedy: format!(
                    "exec needs a running zone; boot it first (POST /1.0/zones/{name}/boot)"
                ),
            });
        }
        Ok(())
    })
    .await?;
    let limit = b.timeout_s.unwrap_or(60);
    if !(1..=3600).contains(&limit) {
        return Err(ApiError::invalid(
            "timeout_s",
            format!("timeout_s {limit}: give 1 to 3600 seconds"),
        )
        .about(&z));
    }
    let mut args = vec!["exec".to_string(), "--no-tty".into()];
    for e in &b.env {
        args.extend(["--env".into(), e.clone()]);
    }
    if let Some(u) = b.user {
        args.extend(["--user".into(), u]);
    }
    if let Some(c) = b.cwd {
        args.extend(["--cwd".into(), c]);
    }
    args.push(z.clone());
    args.push("--".into());
    args.extend(b.command);
    let out = app.cli(&args, Duration::from_secs(limit)).await?;
    // 125: warren itself failed (the command never ran); 126/127: it could not start.
    if out.code == 125 {
        return Err(cli_error(125, &out.stderr, Some(&z)));
    }
    Ok(Json(json!({
        "zone": z,
        "exit_code": out.code,
        "stdout": String::from_utf8_lossy(&out.stdout),
        "stderr": String::from_utf8_lossy(&out.stderr),
    })))
}
