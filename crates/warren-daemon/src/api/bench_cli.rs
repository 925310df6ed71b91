//! `POST /1.0/bench` with `"kind": "scale"` or `"cri"`: `warren bench scale|cri` run as
//! the CLI beside the daemon (`warren --json bench scale ...`), so that it is the CLI's
//! bench in every way, its own signal handling included (`bench::interrupt`; `bench cri`
//! runs a private containerd of its own, which its guards end). Its results object
//! (what `--json` prints) becomes the operation's result; it shows no step progress.
//!
//! A cancel sends the CLI SIGTERM, by its pid, and relies on the CLI's own cleanup;
//! one that has not ended within [`super::bench`]'s grace is killed, and the helper
//! then removes whatever is left (`warren-bench-*` zones and templates, the bench's
//! scratch directory), as for the other kinds.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::bench::BenchBody;
use crate::error::{ApiError, ApiResult};
use crate::helper::Verb;
use crate::state::{cli_error, Shared};

/// The longest workload run the API starts per step (seconds).
const MAX_DURATION_S: u64 = 3600;

/// `bench scale`'s arguments from the body (the CLI checks the rest).
pub(super) fn scale_args(b: &BenchBody) -> ApiResult<Vec<String>> {
    let workload = b.workload.as_deref().ok_or_else(|| {
        ApiError::invalid(
            "workload",
            "\"kind\": \"scale\" needs \"workload\": pgbench, mariadb or http",
        )
    })?;
    if !matches!(workload, "pgbench" | "mariadb" | "http") {
        return Err(ApiError::invalid(
            "workload",
            format!("workload {workload:?}: give pgbench, mariadb or http"),
        ));
    }
    let mut args: Vec<String> = [
        "--json",
        "bench",
        "scale",
        "--workload",
        workload,
        "--zones",
        &b.zones,
    ]
    .map(String::from)
    .to_vec();
    if let Some(d) = b.duration_s {
        if !(1..=MAX_DURATION_S).contains(&d) {
            return Err(ApiError::invalid(
                "duration_s",
                format!("duration_s {d}: give 1 to {MAX_DURATION_S} seconds, e.g. 30"),
            ));
        }
        args.extend(["--duration".into(), d.to_string()]);
    }
    push_out(&mut args, b)?;
    Ok(args)
}

/// `bench cri`'s arguments from the body: `zones` are the pod counts (the CLI checks
/// their cap), `handlers` the RuntimeClass handlers.
pub(super) fn cri_args(b: &BenchBody) -> ApiResult<Vec<String>> {
    let mut args: Vec<String> = ["--json", "bench", "cri", "--pods", &b.zones]
        .map(String::from)
        .to_vec();
    if let Some(h) = &b.handlers {
        if let Some(bad) = h
            .split(',')
            .find(|x| !matches!(*x, "runc" | "warren" | "warren-shim"))
        {
            return Err(ApiError::invalid(
                "handlers",
                format!("handlers {h:?}: {bad:?} is not one; give runc, warren or warren-shim, comma-separated"),
            ));
        }
        args.extend(["--handlers".into(), h.clone()]);
    }
    push_out(&mut args, b)?;
    Ok(args)
}

/// `--out DIR` when the body names an (absolute) directory.
fn push_out(args: &mut Vec<String>, b: &BenchBody) -> ApiResult<()> {
    if let Some(out) = &b.out {
        if !out.is_absolute() {
            return Err(ApiError::invalid(
                "out",
                format!(
                    "out {:?} is relative; give an absolute directory on the daemon's host",
                    out.display().to_string()
                ),
            ));
        }
        args.extend(["--out".into(), out.display().to_string()]);
    }
    Ok(())
}

/// Run the CLI's bench for operation `id`, its results at the end, or on cancel the
/// stop and the cleanup.
pub(super) async fn run(app: &Shared, id: &str, args: &[String]) {
    let mut child = match spawn_cli(app, args, "the bench", false) {
        Ok(c) => c,
        Err(e) => return app.ops.finish_zone(id, Err(e)),
    };
    let pid = child.id().unwrap_or(0);
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let reader = tokio::spawn(async move {
        let (mut o, mut e) = (Vec::new(), Vec::new());
        let (mut out, mut err) = ((&mut out).take(64 << 20), (&mut err).take(64 << 10));
        let _ = tokio::join!(out.read_to_end(&mut o), err.read_to_end(&mut e));
        (o, e)
    });
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let status = loop {
        tokio::select! {
            s = child.wait() => break s,
            _ = tick.tick() => {
                if app.ops.cancelling(id) {
                    super::bench::stop(&mut child, pid).await;
                    let cleanup = app.verb(Verb::BenchCleanup { pid }).await;
                    reader.abort();
                    return app.ops.stopped(id, cleanup);
                }
            }
        }
    };
    let (stdout, stderr) = reader.await.unwrap_or_default();
    let r = match status.ok().and_then(|s| s.code()) {
        Some(0) => serde_json::from_slice::<Value>(&stdout).map_err(|e| {
            ApiError::new(
                500,
                "system",
                format!("the bench's output is not its results ({e}); see the daemon's log"),
            )
        }),
        Some(c) => Err(cli_error(c, &stderr, None)),
        None => Err(ApiError::new(
            500,
            "system",
            format!("the bench (pid {pid}) was killed by a signal; see the daemon's log"),
        )),
    };
    app.ops.finish_zone(id, r);
}

/// `warren --root ROOT ARGS…` beside the daemon (`what` names it in the error), stdin
/// closed, stdout and stderr piped. `stop_with_daemon`: it is told this daemon's pid
/// (`warren::agent::PARENT_ENV`: it stops when the daemon dies, however it dies) and
/// killed when its handle is dropped.
pub(super) fn spawn_cli(
    app: &Shared,
    args: &[String],
    what: &str,
    stop_with_daemon: bool,
) -> ApiResult<tokio::process::Child> {
    let mut cmd = tokio::process::Command::new(&app.cli_exe);
    cmd.arg("--root")
        .arg(&app.root)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if stop_with_daemon {
        cmd.env(warren::agent::PARENT_ENV, std::process::id().to_string())
            .kill_on_drop(true);
    }
    cmd.spawn().map_err(|e| {
        ApiError::new(
            500,
            "system",
            format!(
                "could not start {what} ({}: {e}); install the warren CLI beside the daemon",
                app.cli_exe.display()
            ),
        )
    })
}
