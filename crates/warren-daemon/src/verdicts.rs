//! The doctor's verdicts for the daemon's `/metrics` (`warren_doctor_check`,
//! `warren_doctor_plan_zones`, `warren_doctor_age_seconds`).
//!
//! One of the doctor's checks forks a throwaway user namespace, which this
//! multi-threaded process must not do; so the doctor runs in a child, `warren
//! metrics --doctor-row` (the CLI beside the daemon, single-threaded, on the same
//! state root), which prints its verdicts as JSON. [`Verdicts`] keeps the last
//! answer and when it came; the metrics renderer hands it to its kept `Scraper`, so
//! the daemon's gauges are the ones `warren metrics` shows.
//!
//! A scrape never waits for the doctor: it asks for a run ([`Verdicts::kick`]),
//! which starts one in the background only when the verdicts are older than
//! [`REFRESH`], no run is under way and none started in the last [`MIN_GAP`]; and it
//! shows what is kept (nothing until the first run ends, a second or so after the
//! daemon starts). A background loop also asks every [`REFRESH`], so the verdicts
//! stay fresh without scrapes. A run that fails (or outlasts [`TIMEOUT`], killed)
//! keeps the older verdicts, whose age then grows: alert on
//! `warren_doctor_age_seconds`; the daemon's log says why.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use warren::metrics::DoctorRow;

/// How old the verdicts may get before a scrape (or the background loop) asks for a
/// new run: as long as `warren metrics`' own scraper keeps them.
pub const REFRESH: Duration = warren::metrics::DOCTOR_REFRESH;

/// The least time between two starts, whatever asks (a failing doctor is not run at
/// every scrape).
pub const MIN_GAP: Duration = Duration::from_secs(10);

/// How long one run may take before it is killed.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// What the kept verdicts know about runs.
#[derive(Debug, Default)]
struct Runs {
    /// The last verdicts and when their run ended.
    last: Option<(Instant, DoctorRow)>,
    /// When the last run started.
    started: Option<Instant>,
    /// A run is under way.
    running: bool,
}

/// Why a run of the doctor gave no verdicts (logged; the older verdicts stay).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The CLI could not be started.
    #[error("starting {} (install the warren CLI beside warren-daemon): {source}", exe.display())]
    Start {
        exe: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("'warren metrics --doctor-row' did not finish within {} s and was killed", TIMEOUT.as_secs())]
    Timeout,
    #[error("waiting for 'warren metrics --doctor-row': {0}")]
    Wait(#[source] std::io::Error),
    #[error("'warren metrics --doctor-row' ended with {status}: {stderr}")]
    Failed {
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error(
        "'warren metrics --doctor-row' printed no verdicts ({0}); is the CLI the daemon's version?"
    )]
    Output(#[source] serde_json::Error),
}

/// Whether to start a run now. Pure.
fn due(now: Instant, last_ok: Option<Instant>, started: Option<Instant>, running: bool) -> bool {
    let old = |t: Option<Instant>, d: Duration| t.is_none_or(|t| now.duration_since(t) >= d);
    !running && old(started, MIN_GAP) && old(last_ok, REFRESH)
}

/// The doctor's verdicts, kept for the metrics renderer.
pub struct Verdicts {
    /// The `warren` CLI.
    cli_exe: PathBuf,
    root: PathBuf,
    /// The density judged (`warren metrics --doctor-zones`).
    zones: u64,
    runs: Mutex<Runs>,
    rt: tokio::runtime::Handle,
}

impl Verdicts {
    /// Verdicts for `root` judged at `zones` zones, runs spawned on `rt`.
    pub fn new(
        cli_exe: PathBuf,
        root: PathBuf,
        zones: u64,
        rt: tokio::runtime::Handle,
    ) -> Arc<Verdicts> {
        Arc::new(Verdicts {
            cli_exe,
            root,
            zones: zones.max(1),
            runs: Mutex::new(Runs::default()),
            rt,
        })
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, Runs> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last verdicts and when their run ended (none before the first run ends).
    pub fn latest(&self) -> Option<(Instant, DoctorRow)> {
        self.runs().last.clone()
    }

    /// Start a run in the background if one is due (see the module doc); never waits.
    pub fn kick(self: &Arc<Self>) {
        {
            let mut r = self.runs();
            let now = Instant::now();
            if !due(now, r.last.as_ref().map(|l| l.0), r.started, r.running) {
                return;
            }
            r.running = true;
            r.started = Some(now);
        }
        let me = self.clone();
        self.rt.spawn(async move {
            let result = me.run().await;
            let mut r = me.runs();
            r.running = false;
            match result {
                Ok(row) => r.last = Some((Instant::now(), row)),
                Err(e) => eprintln!(
                    "warren-daemon: the doctor's verdicts for /metrics: {e}; the older ones (if any) are still shown, with their age in warren_doctor_age_seconds"
                ),
            }
        });
    }

    /// Ask for a run every [`REFRESH`], forever (the daemon spawns it once).
    pub async fn keep_fresh(self: Arc<Self>) {
        loop {
            self.kick();
            tokio::time::sleep(REFRESH).await;
        }
    }

    /// One run of `warren metrics --doctor-row` in a child.
    async fn run(&self) -> Result<DoctorRow, RunError> {
        let child = tokio::process::Command::new(&self.cli_exe)
            .arg("--root")
            .arg(&self.root)
            .args(["metrics", "--doctor-row", "--doctor-zones"])
            .arg(self.zones.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| RunError::Start {
                exe: self.cli_exe.clone(),
                source,
            })?;
        let out = tokio::time::timeout(TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| RunError::Timeout)?
            .map_err(RunError::Wait)?;
        if !out.status.success() {
            return Err(RunError::Failed {
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        serde_json::from_slice(&out.stdout).map_err(RunError::Output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_due_when_old_idle_and_not_just_started() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // Never ran: due.
        assert!(due(t0, None, None, false));
        // Under way: never a second one.
        assert!(!due(at(100), None, Some(t0), true));
        // Failed runs are retried, but not more often than MIN_GAP.
        assert!(!due(at(5), None, Some(t0), false));
        assert!(due(at(10), None, Some(t0), false));
        // Fresh verdicts are kept for REFRESH.
        assert!(!due(at(30), Some(at(1)), Some(t0), false));
        assert!(due(at(61), Some(at(1)), Some(t0), false));
    }

    /// A stand-in for the CLI: a script that prints `out` and exits `code`.
    fn fake_cli(dir: &std::path::Path, out: &str, code: i32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(format!("warren-{code}"));
        std::fs::write(&p, format!("#!/bin/sh\necho '{out}'\nexit {code}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_is_kept_a_failed_one_keeps_nothing_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let good = fake_cli(dir.path(), r#"{"plan_zones":7,"findings":[]}"#, 0);
        let v = Verdicts::new(
            good,
            dir.path().into(),
            7,
            tokio::runtime::Handle::current(),
        );
        assert!(v.latest().is_none());
        v.kick();
        // A second kick while the first runs starts nothing.
        v.kick();
        let t = Instant::now();
        while v.latest().is_none() {
            assert!(t.elapsed() < Duration::from_secs(10), "no verdicts");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(v.latest().unwrap().1.plan_zones, 7);
        let bad = fake_cli(dir.path(), "not json", 0);
        let w = Verdicts::new(bad, dir.path().into(), 7, tokio::runtime::Handle::current());
        let e = w.run().await.unwrap_err();
        assert!(matches!(e, RunError::Output(_)), "{e}");
        assert!(e.to_string().contains("daemon's version"), "{e}");
        let failing = fake_cli(dir.path(), "", 3);
        let f = Verdicts::new(
            failing,
            dir.path().into(),
            7,
            tokio::runtime::Handle::current(),
        );
        assert!(matches!(f.run().await, Err(RunError::Failed { .. })));
        let none = Verdicts::new(
            dir.path().join("absent"),
            dir.path().into(),
            7,
            tokio::runtime::Handle::current(),
        );
        let e = none.run().await.unwrap_err();
        assert!(e.to_string().contains("install the warren CLI"), "{e}");
    }
}
