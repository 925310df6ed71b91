//! Work inside the scale bench's zones: `warren login` child processes (one per zone,
//! output to a file), reaped or killed on drop, and "run this script in every zone at
//! once".

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::guards::check_signals;
use crate::error::{Error, IoContext, Result};
use crate::zone::Context;

/// `warren login ZONE -- /bin/sh -c SCRIPT` as a child, stdout and stderr to `log`
/// (a file, never a pipe: a daemon the script starts could hold a pipe open).
pub(super) fn login(ctx: &Context, zone: &str, script: &str, log: &Path) -> Result<Child> {
    let exe = std::env::current_exe().ctx(|| "finding the warren binary".to_string())?;
    let f = File::create(log).ctx(|| format!("creating {}", log.display()))?;
    let f2 = f
        .try_clone()
        .ctx(|| format!("duplicating {}", log.display()))?;
    Command::new(exe)
        .env("WARREN_ROOT", ctx.layout.root())
        .args(["login", zone, "--", "/bin/sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(f)
        .stderr(f2)
        .spawn()
        .ctx(|| format!("zone '{zone}': starting warren login"))
}

/// Children of one phase; killed and reaped on drop if still running.
pub(super) struct Logins(pub(super) Vec<(String, PathBuf, Child)>);

impl Drop for Logins {
    fn drop(&mut self) {
        for (_, _, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Logins {
    pub(super) fn all_done(&mut self) -> bool {
        self.0
            .iter_mut()
            .all(|(_, _, c)| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Wait for all; (zone, success, output) each.
    pub(super) fn wait(mut self) -> Vec<(String, bool, String)> {
        std::mem::take(&mut self.0)
            .into_iter()
            .map(|(zone, log, mut c)| {
                let ok = c.wait().map(|s| s.success()).unwrap_or(false);
                let out = std::fs::read_to_string(&log).unwrap_or_default();
                (zone, ok, out)
            })
            .collect()
    }
}

pub(super) fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.trim().lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" / ")
}

/// Run `script(zone index)` in every zone at once; an error names the first zone that failed.
pub(super) fn in_all_zones(
    ctx: &Context,
    names: &[String],
    logs: &Path,
    what: &str,
    script: &dyn Fn(usize) -> String,
) -> Result<()> {
    let mut l = Logins(Vec::new());
    for (i, z) in names.iter().enumerate() {
        let log = logs.join(format!("{z}-{what}.log"));
        l.0.push((z.clone(), log.clone(), login(ctx, z, &script(i), &log)?));
    }
    // Polled, not waited for, so that a caught signal stops the bench here too.
    while !l.all_done() {
        check_signals(&format!("running {what} in the zones"))?;
        std::thread::sleep(Duration::from_millis(100));
    }
    for (zone, ok, out) in l.wait() {
        if !ok {
            return Err(Error::Refused(format!(
                "zone '{zone}': {what} failed: {}",
                tail(&out)
            )));
        }
    }
    Ok(())
}
