//! The scale bench's guards on host state, each undone on drop: the memory budget on
//! the zone group (old limit written back), the swap a step enabled (disabled), the
//! bench's zones (deleted), `warren agent` (killed).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::super::cleanup;
use crate::error::{Error, IoContext, Result};
use crate::swap;
use crate::zone::Context;

/// The memory budget on the zone group; the old limit is written back on drop.
pub(super) struct Budget {
    file: PathBuf,
    old: String,
}

impl Drop for Budget {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.file, &self.old);
    }
}

pub(super) fn set_budget(ctx: &Context, bytes: u64) -> Result<Budget> {
    let (driver, _) = ctx.cgroups()?;
    let dir = driver.memory_parent().ok_or_else(|| {
        Error::Unsupported("--oversubscribe: no memory cgroup for the zones' group".into())
    })?;
    let file = ["memory.limit_in_bytes", "memory.max"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.exists())
        .ok_or_else(|| {
            Error::Unsupported(format!(
                "--oversubscribe: {} has no memory limit file",
                dir.display()
            ))
        })?;
    let old = std::fs::read_to_string(&file).ctx(|| format!("reading {}", file.display()))?;
    std::fs::write(&file, bytes.to_string()).ctx(|| {
        format!(
            "--oversubscribe: writing the budget to {} (lower it, or raise --memory-per-zone)",
            file.display()
        )
    })?;
    Ok(Budget {
        file,
        old: old.trim().to_string(),
    })
}

/// warren swap this step enabled; disabled on drop.
pub(super) struct SwapOn<'a>(pub(super) &'a Context);

impl Drop for SwapOn<'_> {
    fn drop(&mut self) {
        let _ = swap::disable(&self.0.layout, &self.0.host.proc, &self.0.host.sys);
    }
}

/// Deletes the bench's zones on drop (before the swap guard turns swap off).
pub(super) struct ZonesGone<'a>(pub(super) &'a Context);

impl Drop for ZonesGone<'_> {
    fn drop(&mut self) {
        let _ = cleanup(self.0);
    }
}

/// `warren agent` for the step; killed on drop.
pub(super) struct AgentChild(Child);

impl Drop for AgentChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) fn start_agent(ctx: &Context, scratch: &Path) -> Result<AgentChild> {
    let cfg = scratch.join("agent.toml");
    // suspend-first = false: the step measures evictions; a zone the agent suspended
    // would hold its workload (run through `warren login`) frozen until the step's end.
    std::fs::write(
        &cfg,
        "watch = \"group\"\ninterval-ms = 250\nsuspend-first = false\n",
    )
    .ctx(|| format!("writing {}", cfg.display()))?;
    let log = scratch.join("agent.log");
    let f = File::create(&log).ctx(|| format!("creating {}", log.display()))?;
    let exe = std::env::current_exe().ctx(|| "finding the warren binary".to_string())?;
    let child = Command::new(exe)
        .env("WARREN_ROOT", ctx.layout.root())
        .arg("agent")
        .arg("--config")
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(f)
        .stderr(Stdio::null())
        .spawn()
        .ctx(|| "--agent: starting warren agent".to_string())?;
    Ok(AgentChild(child))
}
