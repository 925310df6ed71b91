//! `bench scale --tune`: the network sysctls `warren doctor` says the run's largest step
//! needs (a plan of N bridged zones at the run's request rate: neighbour tables,
//! conntrack, somaxconn, the ephemeral port range, TIME_WAIT buckets), raised for the
//! run and written back afterwards.
//!
//! Only `net.*` fixes are applied (what the consolidation study tuned); they are raised,
//! never lowered, live only (nothing is written to sysctl.d, unlike `doctor --fix`). The
//! old text of every key changed is recorded in the state root
//! (`.bench-scale-sysctls.json`, written before the first change) and written back when
//! the guard drops: at the end of the run, on failure, and on a panic's unwind. A run
//! that dies without unwinding (Ctrl-C's SIGINT, SIGKILL) is covered by a watcher
//! process started with the first change ([`watch`], `warren bench tune-watch`, which
//! ignores SIGINT, SIGHUP and SIGTERM): it holds the read end of a pipe whose write end
//! only the bench has, and when that reaches EOF (the bench exited, however) it writes
//! back whatever the record still lists. After a power cut the record is still there,
//! and the next `bench scale` on that state root restores it first ([`recover`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::doctor::{self, fix, snapshot::sysctl_path, NetPlan, Plan};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::atomic_write;
use crate::zone::Context;

const RECORD: &str = ".bench-scale-sysctls.json";

/// One sysctl the bench changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tuned {
    pub key: String,
    /// The text it had (written back).
    pub old: String,
    /// The text the bench wrote.
    pub new: String,
}

/// What `--tune` found and did (part of `results.json`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct TuneReport {
    /// Each finding of the doctor's serving and network checks before the run:
    /// "key: verdict (current → needed)".
    pub findings: Vec<String>,
    /// Whether `--tune` was given.
    pub requested: bool,
    pub applied: Vec<Tuned>,
    /// Whether every key was written back afterwards (set after the run).
    pub restored: bool,
}

/// Restores the recorded sysctls on drop.
pub(super) struct SysctlGuard {
    proc_root: PathBuf,
    record: PathBuf,
    applied: Vec<Tuned>,
    /// The watcher and the write end of its pipe (closed last, on drop).
    watcher: Option<(Child, ChildStdin)>,
}

impl SysctlGuard {
    /// Write every old value back; true if all were.
    pub(super) fn restore(&mut self) -> bool {
        let ok = restore_all(&self.proc_root, &self.applied);
        if ok {
            let _ = std::fs::remove_file(&self.record);
            self.applied.clear();
        }
        ok
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        let _ = self.restore();
        if let Some((mut child, stdin)) = self.watcher.take() {
            drop(stdin); // EOF: the watcher finds the record gone (or restores it) and exits
            let _ = child.wait();
        }
    }
}

/// `warren bench tune-watch`: wait for EOF on stdin (the bench that started this has
/// exited, or dropped its guard), then write back what the state root's record still
/// lists. Ignores the signals a terminal or a session end sends the bench's group.
pub fn watch(ctx: &Context) -> Result<()> {
    use warren_sys::libc;
    for sig in [libc::SIGINT, libc::SIGHUP, libc::SIGTERM, libc::SIGQUIT] {
        warren_sys::signal::ignore(sig);
    }
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    while stdin.read(&mut sink).is_ok_and(|n| n > 0) {}
    recover(ctx)
}

fn start_watcher(ctx: &Context) -> Result<(Child, ChildStdin)> {
    let exe = std::env::current_exe().ctx(|| "finding the warren binary".to_string())?;
    let mut child = Command::new(exe)
        .env("WARREN_ROOT", ctx.layout.root())
        .args(["bench", "tune-watch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ctx(|| {
            "--tune: starting the watcher that restores the sysctls if the bench dies".to_string()
        })?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| Error::Refused("--tune: the watcher has no stdin pipe".into()))?;
    Ok((child, stdin))
}

fn restore_all(proc_root: &Path, applied: &[Tuned]) -> bool {
    applied.iter().rev().fold(true, |ok, t| {
        let path = sysctl_path(proc_root, &t.key);
        ok & std::fs::write(&path, format!("{}\n", t.old)).is_ok()
    })
}

/// Restore what a run that died left recorded; a no-op without a record.
pub(super) fn recover(ctx: &Context) -> Result<()> {
    let record = ctx.layout.root().join(RECORD);
    let text = match std::fs::read_to_string(&record) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).ctx(|| format!("reading {}", record.display())),
    };
    let applied: Vec<Tuned> = serde_json::from_str(&text).map_err(|e| {
        Error::Invalid(format!(
            "{}: {e}; it lists sysctls an earlier bench scale --tune changed: restore them by hand and delete it",
            record.display()
        ))
    })?;
    if !restore_all(&ctx.host.proc, &applied) {
        return Err(Error::Refused(format!(
            "{}: could not write back every sysctl an earlier bench scale --tune changed; restore them by hand and delete it",
            record.display()
        )));
    }
    std::fs::remove_file(&record).ctx(|| format!("removing {}", record.display()))
}

/// The doctor's network findings for `zones` bridged zones at `rate` requests/s each.
pub fn plan_findings(ctx: &Context, zones: usize, rate: f64) -> Vec<doctor::Finding> {
    let plan = Plan::new(zones as u64, 1, None, 0, NetPlan::Bridge)
        .map(|p| p.with_rate(rate.ceil() as u64));
    let Ok(plan) = plan else { return Vec::new() };
    doctor::assess(&doctor::read_snapshot(ctx), &plan)
        .into_iter()
        .filter(|f| f.limit.starts_with("net.") || f.limit == "bridge ports")
        .collect()
}

/// One line per finding, for the report.
pub fn describe(findings: &[doctor::Finding]) -> Vec<String> {
    findings
        .iter()
        .map(|f| {
            let cur = match &f.current {
                doctor::Current::Value(v) => v.to_string(),
                doctor::Current::Unlimited => "unlimited".into(),
                doctor::Current::Unknown(e) => format!("unknown ({e})"),
            };
            let fix = f
                .fix
                .as_ref()
                .map_or(String::new(), |x| format!("; fix: {x}"));
            format!(
                "{}: {} ({cur}, needs {}){fix}",
                f.limit, f.verdict, f.needed
            )
        })
        .collect()
}

/// Apply the `net.*` sysctl fixes of `findings`; the guard writes them back.
pub(super) fn apply(ctx: &Context, findings: &[doctor::Finding]) -> Result<SysctlGuard> {
    let mut guard = SysctlGuard {
        proc_root: ctx.host.proc.clone(),
        record: ctx.layout.root().join(RECORD),
        applied: Vec::new(),
        watcher: None,
    };
    let changes: Vec<fix::Change> = fix::changes(findings)
        .into_iter()
        .filter(|c| c.key.starts_with("net."))
        .collect();
    for c in changes {
        let path = sysctl_path(&ctx.host.proc, &c.key);
        let old = std::fs::read_to_string(&path)
            .ctx(|| format!("--tune: reading {}", path.display()))?
            .trim()
            .to_string();
        if doctor::serving::parse_sysctl(&c.key, &old).is_some_and(|v| v >= c.to) {
            continue;
        }
        if guard.watcher.is_none() {
            guard.watcher = Some(start_watcher(ctx)?);
        }
        let new = doctor::serving::sysctl_text(&c.key, c.to);
        guard.applied.push(Tuned {
            key: c.key.clone(),
            old,
            new: new.clone(),
        });
        // Recorded before the write, so a crash right after it can be undone.
        let json = serde_json::to_vec_pretty(&guard.applied).expect("plain data");
        atomic_write(&guard.record, &json, true)
            .ctx(|| format!("--tune: writing {}", guard.record.display()))?;
        std::fs::write(&path, format!("{new}\n")).ctx(|| {
            format!(
                "--tune: writing {} = {new} (the doctor's fix for this run; run without --tune to measure untuned)",
                c.key
            )
        })?;
    }
    Ok(guard)
}

impl SysctlGuard {
    pub(super) fn applied(&self) -> &[Tuned] {
        &self.applied
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guard writes back what it changed, in a fixture /proc, and drops its record.
    #[test]
    fn the_guard_restores_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let key = "net.ipv4.ip_local_port_range";
        let path = sysctl_path(d.path(), key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "32768\t60999\n").unwrap();
        let record = d.path().join(RECORD);
        std::fs::write(&record, "[]").unwrap();
        {
            let _g = SysctlGuard {
                proc_root: d.path().to_path_buf(),
                record: record.clone(),
                watcher: None,
                applied: vec![Tuned {
                    key: key.into(),
                    old: "32768\t60999".into(),
                    new: "1024\t65535".into(),
                }],
            };
            std::fs::write(&path, "1024\t65535\n").unwrap();
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "32768\t60999\n");
        assert!(!record.exists());
    }
}
