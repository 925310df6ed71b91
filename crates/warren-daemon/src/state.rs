//! What every handler shares: the state root, where the helper and the CLI are, the
//! operations, the metrics plug-in; and the two ways a handler reaches warren:
//! [`App::read`] (a library call on a blocking thread, for reading verbs) and
//! [`App::verb`] (a changing verb in a one-shot helper process, `helper`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use warren::layout::{HostPaths, Layout};
use warren::zone::Context;

use crate::error::{ApiError, ApiResult};
use crate::helper::{Reply, Request, Verb};
use crate::ops::Operations;

/// The Prometheus exposition of a state root in the format asked for: plugged in by
/// whoever builds the router (`main` keeps one `warren::metrics::Scraper`); without
/// one, `/metrics` is 501.
pub type MetricsRenderer =
    Arc<dyn Fn(&Context, warren::metrics::Format) -> warren::Result<String> + Send + Sync>;

/// Shared by every handler.
pub struct App {
    pub root: PathBuf,
    /// The OCI runtime's state root (containers listed beside the zones).
    pub oci_root: PathBuf,
    /// This binary, run as `--helper` for each changing verb.
    pub helper_exe: PathBuf,
    /// The `warren` CLI (beside this binary), for `exec` and `doctor`.
    pub cli_exe: PathBuf,
    /// Bound on each per-zone lock wait of a request (the CLI's `--wait`).
    pub lock_wait: Duration,
    pub ops: Operations,
    pub metrics: Option<MetricsRenderer>,
}

pub type Shared = Arc<App>;

impl App {
    pub fn context(&self) -> Context {
        Context::new(Layout::new(self.root.clone()), HostPaths::default())
    }

    /// Run a reading library call on a blocking thread with a fresh [`Context`].
    pub async fn read<T, F>(self: &Arc<Self>, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Context) -> warren::Result<T> + Send + 'static,
    {
        let app = self.clone();
        tokio::task::spawn_blocking(move || f(&app.context()).map_err(ApiError::from))
            .await
            .map_err(|e| {
                ApiError::new(500, "system", format!("the request's worker failed: {e}"))
            })?
    }

    /// Run one changing verb in a helper process and return its API object. A client
    /// that leaves mid-verb drops this future, not the helper: the verb runs to its end
    /// (never torn), and tokio reaps the helper.
    pub async fn verb(&self, verb: Verb) -> ApiResult<Value> {
        let subject = verb.subject().to_string();
        let req = Request {
            root: self.root.clone(),
            lock_wait_s: self.lock_wait.as_secs(),
            verb,
        };
        let body = serde_json::to_vec(&req).expect("requests serialise");
        let fail = |what: String| {
            ApiError::new(
                500,
                "system",
                format!("the verb's helper process {what}; see the daemon's log"),
            )
            .about(&subject)
        };
        let mut child = tokio::process::Command::new(&self.helper_exe)
            .arg("--helper")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .map_err(|e| {
                fail(format!(
                    "could not start ({}: {e})",
                    self.helper_exe.display()
                ))
            })?;
        let mut stdin = child.stdin.take().expect("piped");
        stdin
            .write_all(&body)
            .await
            .map_err(|e| fail(format!("did not take its request ({e})")))?;
        drop(stdin);
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| fail(format!("could not be waited for ({e})")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        match serde_json::from_str::<Reply>(text.trim()) {
            Ok(Reply::Ok(v)) => Ok(v),
            Ok(Reply::Err(mut e)) => {
                // The status is not in the body: derive it again from the code.
                e.status = status_of_code(&e.code);
                Err(e)
            }
            Err(_) => Err(fail(format!("ended with {} and no reply", out.status))),
        }
    }
}

/// What the `warren` CLI printed and how it ended.
pub struct CliOutput {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl App {
    /// Run the `warren` CLI beside this binary on the same state root (`exec`,
    /// `logs`, `doctor`: verbs whose work is the CLI's own process), with a bound.
    pub async fn cli(&self, args: &[String], limit: Duration) -> ApiResult<CliOutput> {
        let mut cmd = tokio::process::Command::new(&self.cli_exe);
        cmd.arg("--root")
            .arg(&self.root)
            .arg("--wait")
            .arg(self.lock_wait.as_secs().to_string())
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(|e| {
            ApiError::new(
                500,
                "system",
                format!(
                    "the warren CLI could not be started ({}: {e}); install it beside warren-daemon",
                    self.cli_exe.display()
                ),
            )
        })?;
        let out = tokio::time::timeout(limit, child.wait_with_output())
            .await
            .map_err(|_| {
                ApiError::new(
                    504,
                    "timeout",
                    format!(
                        "'warren {}' did not finish within {} s; it was killed; give a larger \"timeout_s\"",
                        args.join(" "),
                        limit.as_secs()
                    ),
                )
            })?
            .map_err(|e| ApiError::new(500, "system", format!("waiting for the warren CLI: {e}")))?;
        Ok(CliOutput {
            code: out.status.code().unwrap_or(128 + 9),
            stdout: out.stdout,
            stderr: out.stderr,
        })
    }
}

/// The structured error of a CLI run that failed with exit code `code`: its
/// message is the CLI's own (which names the zone, the field and the fix).
pub fn cli_error(code: i32, stderr: &[u8], zone: Option<&str>) -> ApiError {
    let text = String::from_utf8_lossy(stderr);
    let message = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("warren: "))
        .unwrap_or(text.trim())
        .to_string();
    let name = code_of_exit(code);
    let mut e = ApiError::new(status_of_code(name), name, message);
    e.zone = zone.map(str::to_string);
    e
}

fn code_of_exit(code: i32) -> &'static str {
    failures()
        .find(|c| *c as i32 == code)
        .map_or("failure", crate::error::code_name)
}

/// Every failure code (all but `Ok`).
fn failures() -> impl Iterator<Item = warren::ExitCode> {
    warren::ExitCode::ALL
        .into_iter()
        .filter(|c| *c != warren::ExitCode::Ok)
}

/// The HTTP status of an error code sent back by the helper.
pub(crate) fn status_of_code(code: &str) -> u16 {
    failures()
        .find(|c| crate::error::code_name(*c) == code)
        .map_or(500, crate::error::status_of)
}
