//! The scale bench's guards on host state, each undone on drop: the memory budget on
//! the zone group (old limit written back), the swap a step enabled (disabled), the
//! bench's zones (deleted), `warren agent` (killed), and the caught signals (SIGINT,
//! SIGTERM, SIGHUP noted instead of killing the bench, so the others get to run).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::super::{cleanup, interrupt};
use super::{study, AgentPolicy, AgentThresholds};
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

/// The agent's config for `policy` (`evict` or `suspend`; see the module doc of
/// [`super`] for why wake-on-connect is off), with swap triggers set from a measured
/// step if given ([`study::thresholds_from_swap`]).
pub(super) fn agent_config(policy: AgentPolicy, thresholds: Option<&AgentThresholds>) -> String {
    format!(
        "watch = \"group\"\ninterval-ms = 250\nsuspend-first = {}\nwake-on-connect = false\n{}",
        policy == AgentPolicy::Suspend,
        thresholds.map_or(String::new(), study::thresholds_toml)
    )
}

pub(super) fn start_agent(
    ctx: &Context,
    scratch: &Path,
    policy: AgentPolicy,
    thresholds: Option<&AgentThresholds>,
) -> Result<AgentChild> {
    crate::agent::none_running(ctx)?;
    let cfg = scratch.join("agent.toml");
    std::fs::write(&cfg, agent_config(policy, thresholds))
        .ctx(|| format!("writing {}", cfg.display()))?;
    let log = scratch.join("agent.log");
    let f = File::create(&log).ctx(|| format!("creating {}", log.display()))?;
    let errors = f
        .try_clone()
        .ctx(|| format!("opening {} for the agent's errors", log.display()))?;
    let exe = std::env::current_exe().ctx(|| "finding the warren binary".to_string())?;
    let child = Command::new(exe)
        .env("WARREN_ROOT", ctx.layout.root())
        .arg("agent")
        .arg("--config")
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(f)
        .stderr(errors)
        .spawn()
        .ctx(|| "--agent: starting warren agent".to_string())?;
    Ok(AgentChild(child))
}

/// SIGINT, SIGTERM and SIGHUP caught for the bench's run ([`interrupt::Caught`]), seen
/// by [`check_signals`]; their default action is back on drop.
pub(super) type Signals = interrupt::Caught;

/// An error if one of the caught signals came: the bench stops `doing` this and
/// unwinds, each guard undoing what it made.
pub(super) fn check_signals(doing: &str) -> Result<()> {
    match interrupt::signal() {
        None => Ok(()),
        Some(sig) => Err(Error::Refused(format!(
            "bench scale: interrupted by signal {sig} ({}) while {doing}; its zones, template, budget, swap and agent were removed",
            interrupt::name(sig)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_suspends_only_under_the_suspend_policy_and_never_wakes() {
        let evict = agent_config(AgentPolicy::Evict, None);
        let suspend = agent_config(AgentPolicy::Suspend, None);
        assert!(evict.contains("suspend-first = false\n"), "{evict}");
        assert!(suspend.contains("suspend-first = true\n"), "{suspend}");
        for c in [evict, suspend] {
            assert!(c.contains("wake-on-connect = false\n"), "{c}");
            let parsed: crate::agent::config::AgentConfig =
                crate::agent::config::parse(&c).expect("a valid agent config");
            assert_eq!(parsed.watch, "group");
        }
        let t = study::thresholds_from_swap(8, 800.0, 0.0);
        let c = agent_config(AgentPolicy::Evict, Some(&t));
        let parsed = crate::agent::config::parse(&c).expect("a valid agent config");
        assert_eq!(parsed.swap_in.trigger, 1200.0);
        assert_eq!(parsed.swap_out.trigger, study::FLOOR_PAGES_S);
        assert!(!parsed.suspend_first);
    }
}
