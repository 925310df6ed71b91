//! `POST /1.0/bench`: `warren bench density`, `bench metrics` (`"kind"`) as an
//! operation; `bench scale` runs as the CLI beside the daemon ([`super::bench_cli`]).
//! The bench runs in a helper process (the bench boots zones, so it needs a single-threaded process, as
//! every changing verb: [`crate::helper`]); the helper writes its progress as lines
//! (`{"progress":{"phase","pos","len"}}`) that the operation shows, then the results
//! (`results.json`'s object) that become the operation's result.
//!
//! A cancel (`DELETE /1.0/operations/{id}`) sends the helper SIGTERM, by its pid: the
//! bench stops after its current step and its own guards remove what it made, as
//! `warren bench` does on Ctrl-C (`warren::bench::interrupt`). A helper that has not
//! ended within a minute is killed (SIGKILL), and in every case a second helper then
//! removes whatever is left (`warren-bench-*` zones, their cgroups with them, the
//! bench's templates, its scratch directory). One bench runs at a time: its zones'
//! names are fixed.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::Body;
use crate::error::{ApiError, ApiResult};
use crate::helper::{Reply, Request, Verb};
use crate::ops::Status;
use crate::state::Shared;

/// The largest step the API runs (the CLI takes more, under the operator's eye).
const MAX_STEP: usize = 1000;

pub fn routes() -> Router<Shared> {
    Router::new().route("/1.0/bench", post(start))
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum BenchTemplate {
    Host,
    Busybox,
}

/// Which bench (`warren bench KIND`).
#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
enum Kind {
    #[default]
    Density,
    Metrics,
    Scale,
    /// `warren demo`: `zones` is one count.
    Demo,
    /// `bench snapshot`: `repeat` and `data_mib`.
    Snapshot,
    /// `bench cri`: `zones` are the pod counts, `handlers` the RuntimeClass handlers.
    Cri,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BenchBody {
    #[serde(default)]
    kind: Kind,
    /// The steps, as `--zones`: "1,10,100".
    #[serde(default = "default_zones")]
    pub(super) zones: String,
    /// metrics: warm scrapes timed per step (`--scrapes`).
    #[serde(default = "default_scrapes")]
    scrapes: usize,
    /// scale: the workload, pgbench, mariadb or http (`--workload`).
    pub(super) workload: Option<String>,
    /// scale: seconds each step's workload runs (`--duration`).
    pub(super) duration_s: Option<u64>,
    /// cri: the RuntimeClass handlers, as `--handlers`: "runc,warren,warren-shim".
    pub(super) handlers: Option<String>,
    /// snapshot: snapshots and restores timed (`--repeat`).
    #[serde(default = "default_repeat")]
    repeat: usize,
    /// snapshot: MiB of private data in the exported zone (`--data-mib`).
    #[serde(default = "default_data_mib")]
    data_mib: u64,
    /// demo: the zones' network, none or bridge (`--net`).
    #[serde(default)]
    net: Option<String>,
    /// The template zones are made from (`--template`).
    #[serde(default = "default_template")]
    template: BenchTemplate,
    /// Seconds the booted zones sit idle before CPU and memory are read (`--idle`).
    #[serde(default = "default_idle")]
    idle_s: f64,
    /// Also write results.json, report.md and the charts into this directory (`--out`).
    pub(super) out: Option<PathBuf>,
}

fn default_zones() -> String {
    "1,10,100".into()
}

fn default_repeat() -> usize {
    20
}

fn default_data_mib() -> u64 {
    100
}

fn default_scrapes() -> usize {
    20
}

fn default_template() -> BenchTemplate {
    BenchTemplate::Host
}

fn default_idle() -> f64 {
    10.0
}

async fn start(State(app): State<Shared>, Body(b): Body<BenchBody>) -> ApiResult<Response> {
    let steps = warren::bench::parse_steps(&b.zones).map_err(|e| {
        let mut a = ApiError::from_warren(&e);
        a.field = Some("zones".into());
        a
    })?;
    if let Some(big) = steps.iter().find(|n| **n > MAX_STEP) {
        return Err(ApiError::invalid(
            "zones",
            format!("zones: a step of {big} zones; the API runs steps of at most {MAX_STEP} (run larger ones with 'warren bench density')"),
        ));
    }
    if !(b.idle_s >= 0.0 && b.idle_s <= 3600.0) {
        return Err(ApiError::invalid(
            "idle_s",
            format!(
                "idle_s {}: give seconds between 0 and 3600, e.g. 1",
                b.idle_s
            ),
        ));
    }
    if let Some(out) = b.out.as_ref().filter(|o| !o.is_absolute()) {
        return Err(ApiError::invalid(
            "out",
            format!(
                "out {:?} is relative; give an absolute directory on the daemon's host",
                out.display().to_string()
            ),
        ));
    }
    if app
        .ops
        .list()
        .iter()
        .any(|o| o.verb == "bench" && o.status == Status::Running)
    {
        return Err(ApiError::new(
            409,
            "conflict",
            "a bench is already running (its zones' names are fixed, so one runs at a time); wait for it or cancel it (GET /1.0/operations)",
        ));
    }
    if !(1..=1000).contains(&b.scrapes) {
        return Err(ApiError::invalid(
            "scrapes",
            format!("scrapes {}: give 1 to 1000, e.g. 20", b.scrapes),
        ));
    }
    if b.kind != Kind::Demo && b.net.is_some() {
        return Err(ApiError::invalid(
            "net",
            "\"net\" belongs to \"kind\": \"demo\"; drop it or set that kind",
        ));
    }
    if b.kind != Kind::Scale && (b.workload.is_some() || b.duration_s.is_some()) {
        return Err(ApiError::invalid(
            "workload",
            "\"workload\" and \"duration_s\" belong to \"kind\": \"scale\"; drop them or set that kind",
        ));
    }
    if b.kind != Kind::Cri && b.handlers.is_some() {
        return Err(ApiError::invalid(
            "handlers",
            "\"handlers\" belongs to \"kind\": \"cri\"; drop it or set that kind",
        ));
    }
    let verb = match b.kind {
        Kind::Density => Verb::Bench {
            steps,
            busybox: b.template == BenchTemplate::Busybox,
            idle_ms: (b.idle_s * 1000.0) as u64,
            out: b.out,
        },
        Kind::Demo => {
            let [zones] = steps[..] else {
                return Err(ApiError::invalid(
                    "zones",
                    format!(
                        "zones {:?}: a demo takes one count of zones, e.g. \"100\"",
                        b.zones
                    ),
                ));
            };
            let bridge = match b.net.as_deref() {
                None | Some("none") => false,
                Some("bridge") => true,
                Some(other) => {
                    return Err(ApiError::invalid(
                        "net",
                        format!("net {other:?}: give none or bridge"),
                    ))
                }
            };
            Verb::Demo { zones, bridge }
        }
        Kind::Snapshot => {
            if !(1..=1000).contains(&b.repeat) || !(1..=4096).contains(&b.data_mib) {
                return Err(ApiError::invalid(
                    "repeat",
                    format!(
                        "repeat {} and data_mib {}: give repeat 1 to 1000 and data_mib 1 to 4096, e.g. 20 and 100",
                        b.repeat, b.data_mib
                    ),
                ));
            }
            Verb::BenchSnapshot {
                repeat: b.repeat,
                data_mib: b.data_mib,
            }
        }
        Kind::Metrics => Verb::BenchMetrics {
            steps,
            scrapes: b.scrapes,
            out: b.out,
        },
        Kind::Scale | Kind::Cri => {
            let args = if b.kind == Kind::Scale {
                super::bench_cli::scale_args(&b)?
            } else {
                super::bench_cli::cri_args(&b)?
            };
            let id = app.ops.start("bench", 1);
            let task_id = id.clone();
            tokio::spawn(async move {
                if app.ops.begin_zone(&task_id, "bench") {
                    super::bench_cli::run(&app, &task_id, &args).await;
                }
                app.ops.finish(&task_id);
            });
            return Ok(super::operations::accepted(&id));
        }
    };
    let id = app.ops.start("bench", 1);
    let task_id = id.clone();
    tokio::spawn(async move {
        if app.ops.begin_zone(&task_id, "bench") {
            run(&app, &task_id, verb).await;
        }
        app.ops.finish(&task_id);
    });
    Ok(super::operations::accepted(&id))
}

/// How long a bench has, after SIGTERM, to finish its step and remove what it made.
const GRACE: Duration = Duration::from_secs(60);

/// Stop the bench helper: SIGTERM (it ends after its current step, its guards
/// cleaning up), then SIGKILL if it has not ended within [`GRACE`].
pub(super) async fn stop(child: &mut tokio::process::Child, pid: u32) {
    if let Ok(p) = i32::try_from(pid) {
        let _ = warren_sys::proc::kill(p, warren_sys::libc::SIGTERM);
    }
    if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

/// Run the bench helper for operation `id`: progress as it comes, the result at the
/// end, or on cancel the kill and the cleanup.
async fn run(app: &Shared, id: &str, verb: Verb) {
    let failed = |what: String| {
        ApiError::new(
            500,
            "system",
            format!("the bench's helper process {what}; see the daemon's log"),
        )
    };
    let req = Request {
        root: app.root.clone(),
        lock_wait_s: app.lock_wait.as_secs(),
        verb,
    };
    let mut child = match tokio::process::Command::new(&app.helper_exe)
        .arg("--helper")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            return app
                .ops
                .finish_zone(id, Err(failed(format!("could not start ({e})"))))
        }
    };
    let pid = child.id().unwrap_or(0);
    let body = serde_json::to_vec(&req).expect("requests serialise");
    let mut stdin = child.stdin.take().expect("piped");
    if let Err(e) = stdin.write_all(&body).await {
        let _ = child.start_kill();
        let _ = child.wait().await;
        return app
            .ops
            .finish_zone(id, Err(failed(format!("did not take its request ({e})"))));
    }
    drop(stdin);
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut reply = None;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(l)) => match serde_json::from_str::<Value>(&l) {
                    Ok(mut v) if v.get("progress").is_some() => {
                        app.ops.progress(id, v["progress"].take());
                    }
                    _ => reply = Some(l),
                },
                Ok(None) | Err(_) => break,
            },
            _ = tick.tick() => {
                if app.ops.cancelling(id) {
                    stop(&mut child, pid).await;
                    // Its guards have removed what it made; this removes what a
                    // killed one left (and finds nothing otherwise).
                    let cleanup = app.verb(Verb::BenchCleanup { pid }).await;
                    return app.ops.stopped(id, cleanup);
                }
            }
        }
    }
    let status = child.wait().await;
    let r = match reply.as_deref().map(str::trim).map(serde_json::from_str) {
        Some(Ok(Reply::Ok(v))) => Ok(v),
        Some(Ok(Reply::Err(mut e))) => {
            e.status = crate::state::status_of_code(&e.code);
            Err(e)
        }
        _ => Err(failed(format!(
            "ended ({}) with no reply",
            status.map_or_else(|e| e.to_string(), |s| s.to_string())
        ))),
    };
    app.ops.finish_zone(id, r);
}
