//! `/1.0/agent`: the agent's default policy and the decisions it recorded (GET), and
//! `warren agent` run as an operation (POST) until cancelled.
//!
//! The agent runs as the CLI beside the daemon (`warren --json agent`, the same
//! binary and code path as an operator's), so it is the CLI's agent in every way: it
//! takes the root's agent lock (`warren::agent::lock_path`), so one agent runs per
//! root, whether started here or from a shell — a POST while one runs is 409, naming
//! the holder. Each line it writes (started, a threshold crossed, an eviction or what
//! a dry run would do) becomes the operation's `progress` (`{"lines", "last"}`); the
//! decisions it acts on are also in the journal, readable here and at `/1.0/events`.
//! A cancel (`DELETE /1.0/operations/{id}`) sends it SIGTERM: it stops between ticks,
//! after the action in hand (a halt is never torn), and exits; one that has not ended
//! within [`GRACE`] is killed. The agent asks for SIGTERM when the daemon dies
//! (`warren::agent::PARENT_ENV`), so a daemon killed outright leaves no agent behind.
//! Its config, when given, is TOML text, checked here and
//! passed through a 0600 file in the root-only state root, removed when the
//! operation ends.

use std::time::Duration;

use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use super::{files::Spool, MaybeBody};
use crate::error::{ApiError, ApiResult};
use crate::ops::Status;
use crate::state::{cli_error, Shared};

/// How long a cancelled agent has to end its tick and exit before it is killed.
const GRACE: Duration = Duration::from_secs(30);

pub fn routes() -> Router<Shared> {
    Router::new().route("/1.0/agent", get(agent).post(start))
}

/// The agent: its default policy and the decisions it recorded in the journal.
async fn agent(State(app): State<Shared>) -> ApiResult<Json<Value>> {
    let events = app
        .read(|ctx| {
            warren::journal::read(
                &ctx.layout,
                &warren::journal::Filter {
                    kind: Some(warren::journal::EventType::Agent),
                    since_ms: None,
                },
            )
        })
        .await?;
    let recent: Vec<_> = events.iter().rev().take(100).rev().collect();
    Ok(Json(json!({
        "defaults": warren::agent::AgentConfig::defaults(),
        "events": recent,
    })))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AgentBody {
    /// The agent's config as TOML text (`--config`'s file's content).
    config: Option<String>,
    /// The budget to watch: host, group or a cgroup directory (`--watch`).
    watch: Option<String>,
    /// Log what would be done; change nothing (`--dry-run`).
    #[serde(default)]
    dry_run: bool,
}

fn conflict(message: String) -> ApiError {
    ApiError::new(409, "conflict", message)
}

async fn start(
    State(app): State<Shared>,
    MaybeBody(b): MaybeBody<AgentBody>,
) -> ApiResult<Response> {
    if let Some(text) = &b.config {
        warren::agent::config::parse(text).map_err(|e| {
            let mut a = ApiError::from_warren(&e);
            a.field = Some("config".into());
            a
        })?;
    }
    if let Some(w) = b.watch.as_deref() {
        if !matches!(w, "host" | "group") && !w.starts_with('/') {
            return Err(ApiError::invalid(
                "watch",
                format!("watch {w:?}: give host, group or an absolute cgroup directory"),
            ));
        }
    }
    if app
        .ops
        .list()
        .iter()
        .any(|o| o.verb == "agent" && o.status == Status::Running)
    {
        return Err(conflict(
            "an agent is already running as an operation of this daemon (one agent runs per root); cancel it first (GET /1.0/operations)".into(),
        ));
    }
    // An agent started from a shell holds the root's agent lock: refuse now, naming it
    // (the agent checks again itself, so a race ends its operation with the same 409).
    let held = app
        .read(|ctx| {
            let path = warren::agent::lock_path(ctx);
            Ok(match warren::lock::try_exclusive_path(&path)? {
                Some(_free) => None,
                None => Some(warren::lock::describe(&warren::lock::holders(
                    &ctx.host.proc,
                    &path,
                ))),
            })
        })
        .await?;
    if let Some(who) = held {
        return Err(conflict(format!(
            "another agent is running on this root ({who}); one agent runs per root: stop that one first"
        )));
    }
    let spool = match &b.config {
        Some(text) => {
            let spool = Spool::new(&app.root);
            let path = spool.0.clone();
            let text = text.clone();
            tokio::task::spawn_blocking(move || {
                super::files::write_private(&path, text.as_bytes())
            })
            .await
            .map_err(|e| ApiError::new(500, "system", format!("the config's writer failed: {e}")))?
            .map_err(|e| {
                ApiError::new(500, "system", format!("spooling the agent's config: {e}"))
            })?;
            Some(spool)
        }
        None => None,
    };
    let mut args = vec!["--json".to_string(), "agent".into()];
    if let Some(s) = &spool {
        args.extend(["--config".into(), s.0.display().to_string()]);
    }
    if let Some(w) = b.watch {
        args.extend(["--watch".into(), w]);
    }
    if b.dry_run {
        args.push("--dry-run".into());
    }
    let id = app.ops.start("agent", 1);
    let task_id = id.clone();
    tokio::spawn(async move {
        if app.ops.begin_zone(&task_id, "agent") {
            run(&app, &task_id, &args).await;
        }
        drop(spool);
        app.ops.finish(&task_id);
    });
    Ok(super::operations::accepted(&id))
}

/// Run the agent for operation `id` until it ends or is cancelled.
async fn run(app: &Shared, id: &str, args: &[String]) {
    // The agent stops (SIGTERM) when this daemon dies, however it dies.
    let mut child = match super::bench_cli::spawn_cli(app, args, "the agent", true) {
        Ok(c) => c,
        Err(e) => return app.ops.finish_zone(id, Err(e)),
    };
    let pid = child.id().unwrap_or(0);
    let mut stderr = child.stderr.take().expect("piped");
    let err_task = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = (&mut stderr).take(64 << 10).read_to_end(&mut buf).await;
        buf
    });
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut n = 0u64;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut cancelled = false;
    loop {
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(l)) => {
                    n += 1;
                    let last = serde_json::from_str::<Value>(&l).unwrap_or(Value::String(l));
                    app.ops.progress(id, json!({ "lines": n, "last": last }));
                }
                Ok(None) | Err(_) => break,
            },
            _ = tick.tick(), if !cancelled => {
                if app.ops.cancelling(id) {
                    cancelled = true;
                    if let Ok(p) = i32::try_from(pid) {
                        let _ = warren_sys::proc::kill(p, warren_sys::libc::SIGTERM);
                    }
                }
            }
        }
    }
    let status = match tokio::time::timeout(GRACE, child.wait()).await {
        Ok(s) => s.ok(),
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            None
        }
    };
    let stderr = err_task.await.unwrap_or_default();
    let code = status.and_then(|s| s.code());
    if cancelled {
        let r = match code {
            Some(0) => Ok(json!({ "agent": "stopped", "pid": pid, "lines": n })),
            _ => Err(ApiError::new(
                500,
                "system",
                format!(
                    "the agent (pid {pid}) did not stop within {} s of SIGTERM and was killed; see the daemon's log",
                    GRACE.as_secs()
                ),
            )),
        };
        return app.ops.stopped(id, r);
    }
    let r = match code {
        Some(0) => Ok(json!({ "agent": "ended", "pid": pid, "lines": n })),
        Some(c) => Err(cli_error(c, &stderr, None)),
        None => Err(ApiError::new(
            500,
            "system",
            format!("the agent (pid {pid}) was killed by a signal; see the daemon's log"),
        )),
    };
    app.ops.finish_zone(id, r);
}
