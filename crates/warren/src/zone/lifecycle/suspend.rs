//! `warren suspend` / `warren resume`: running ⇄ suspended (docs/suspend.md).
//!
//! Suspend, under the zone's lock: the zone's cgroups get a freezer (v1: a directory
//! in the freezer hierarchy, joined now), the record says a suspend is under way
//! (`suspension.done = false`), the zone is frozen, its memory paged out
//! ([`crate::suspend::pageout`]), and the record says suspended. Resume asks a running
//! agent to let go of the zone's sockets (`agent::control::release_for_resume`), thaws
//! it and records it running. Each step is a fault point; what a crash leaves is repaired by
//! the next command that takes the lock ([`repair`], from `zone::reconcile`: `gc`,
//! `boot`, `resume`, `halt`, …): a suspend that did not finish is rolled back (thawed,
//! recorded running), a resume that thawed but did not record it is recorded.

use std::time::{Duration, Instant};

use super::{load_locked, zone_lock, Context, Outcome, Zone};
use crate::cgroups::freeze::FREEZE_TIMEOUT;
use crate::error::{Error, Result};
use crate::fault;
use crate::journal::{self, EventType};
use crate::state::{self, Decision, Suspension, Verb, ZoneState};

/// What a suspend did, for the CLI and `--json`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SuspendReport {
    pub freeze_ms: f64,
    pub pageout_ms: f64,
    pub resident_before: u64,
    pub resident_after: u64,
    pub swapped: u64,
    /// Whether the host had swap (without it only file pages leave RAM).
    pub host_swap: bool,
    /// Processes whose memory could not be paged out, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pageout_failed: Vec<(i32, String)>,
}

/// What a resume did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ResumeReport {
    pub thaw_ms: f64,
    /// How long the zone was suspended.
    pub suspended_s: u64,
    /// `--prefetch`: how long reading its swapped-out memory back took (after the
    /// thaw, the zone running meanwhile), and the bytes advised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefetch_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefetched: Option<u64>,
    /// What went wrong around a resume that was done all the same (the agent did not
    /// confirm that it let go of the zone's sockets).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `warren suspend`: freeze a running zone and page its memory out.
pub fn suspend(ctx: &Context, name: &str) -> Result<(Outcome, SuspendReport)> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, name)?;
    let mut z = load_locked(ctx, name)?;
    if let Decision::AlreadyDone(m) = state::check(name, Verb::Suspend, z.state(ctx))? {
        return Ok((Outcome::AlreadyDone(m), SuspendReport::default()));
    }
    let mut rt = z
        .runtime
        .clone()
        .expect("a running zone has a runtime record");
    let (driver, _) = ctx.cgroups()?;
    rt.cgroups = driver
        .join_freezer(name, &rt.cgroups)
        .map_err(|e| Error::Unsupported(format!("zone '{name}': cannot suspend it: {e}")))?;
    fault::point("suspend.after-join");
    let host_swap = crate::suspend::host_has_swap(&ctx.host.proc);
    rt.suspension = Some(Suspension {
        since_ms: super::super::now_ms(),
        done: false,
        resident_before: 0,
        resident_after: 0,
        swapped: 0,
        host_swap,
        socket_queues: None,
    });
    state::save_runtime(&z.dir, &rt)?;
    fault::point("suspend.after-intent");
    let t = Instant::now();
    if let Err(e) = rt.cgroups.set_frozen(true, FREEZE_TIMEOUT) {
        roll_back(&mut z, rt);
        return Err(e.into());
    }
    let freeze = t.elapsed();
    fault::point("suspend.after-freeze");
    // What waits on its sockets now, frozen: the agent's baseline (wake on growth only).
    let socket_queues = rt.init.as_ref().and_then(|i| {
        crate::agent::wake_diag::queues_now(&ctx.host.proc, i.pid, &rt.cgroups)
            .map_err(|e| {
                eprintln!(
                    "warren: zone '{name}': its sockets' queues were not read ({e}); the agent reads them when it first watches the zone"
                )
            })
            .ok()
    });
    let before = crate::suspend::holdings(&rt.cgroups, &ctx.host.proc);
    let t = Instant::now();
    let pageout = crate::suspend::pageout(&rt.cgroups, &ctx.host.proc);
    let pageout_time = t.elapsed();
    let after = crate::suspend::holdings(&rt.cgroups, &ctx.host.proc);
    fault::point("suspend.after-pageout");
    let s = Suspension {
        done: true,
        resident_before: before.resident,
        resident_after: after.resident,
        swapped: after.swapped,
        socket_queues,
        ..rt.suspension.clone().expect("set above")
    };
    rt.state = ZoneState::Suspended;
    rt.suspension = Some(s);
    if let Err(e) = state::save_runtime(&z.dir, &rt) {
        // Not recorded: it must not stay frozen behind a record that says running.
        roll_back(&mut z, rt);
        return Err(e);
    }
    let report = SuspendReport {
        freeze_ms: ms(freeze),
        pageout_ms: ms(pageout_time),
        resident_before: before.resident,
        resident_after: after.resident,
        swapped: after.swapped,
        host_swap,
        pageout_failed: pageout.failed,
    };
    journal::note(
        &ctx.layout,
        EventType::Lifecycle,
        "suspended",
        name,
        serde_json::json!({
            "freeze_ms": report.freeze_ms,
            "pageout_ms": report.pageout_ms,
            "resident_before": report.resident_before,
            "resident_after": report.resident_after,
            "swapped": report.swapped,
            "host_swap": host_swap,
        }),
    );
    Ok((Outcome::Done, report))
}

/// Undo a suspend that failed part way: thaw, record running (best effort, each
/// failure said; the next locked command repairs what is left).
fn roll_back(z: &mut Zone, mut rt: state::Runtime) {
    if let Err(e) = rt.cgroups.set_frozen(false, FREEZE_TIMEOUT) {
        super::run::warn(&z.name, "thawing it after a failed suspend", &e.into());
    }
    rt.state = ZoneState::Running;
    rt.suspension = None;
    if let Err(e) = state::save_runtime(&z.dir, &rt) {
        super::run::warn(&z.name, "recording it running after a failed suspend", &e);
    }
    z.runtime = Some(rt);
}

/// `warren resume`: thaw a suspended zone; its memory comes back as it is touched.
pub fn resume(ctx: &Context, name: &str) -> Result<(Outcome, ResumeReport)> {
    resume_with(ctx, name, false)
}

/// `warren resume [--prefetch]`: with `prefetch`, once the zone is thawed and recorded
/// running, read its swapped-out memory back ([`crate::suspend::prefetch`]) while it
/// runs; the resume's own latency (the thaw) is unchanged.
pub fn resume_with(ctx: &Context, name: &str, prefetch: bool) -> Result<(Outcome, ResumeReport)> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, name)?;
    let mut z = load_locked(ctx, name)?;
    if let Decision::AlreadyDone(m) = state::check(name, Verb::Resume, z.state(ctx))? {
        return Ok((Outcome::AlreadyDone(m), ResumeReport::default()));
    }
    let mut rt = z
        .runtime
        .take()
        .expect("a suspended zone has a runtime record");
    // An agent may hold the suspended zone's sockets: it lets go now, before the thaw
    // (it takes nothing from a zone whose lock is held, as this one is), so a halt
    // right after this resume finds its ports free. Bounded; no agent costs a connect.
    let warnings: Vec<String> = rt
        .init
        .and_then(|i| crate::agent::control::release_for_resume(&ctx.layout, name, i.pid))
        .into_iter()
        .collect();
    let t = Instant::now();
    rt.cgroups.set_frozen(false, FREEZE_TIMEOUT)?;
    let thaw = t.elapsed();
    fault::point("resume.after-thaw");
    let since = rt.suspension.as_ref().map_or(0, |s| s.since_ms);
    rt.state = ZoneState::Running;
    rt.suspension = None;
    state::save_runtime(&z.dir, &rt)?;
    let mut report = ResumeReport {
        thaw_ms: ms(thaw),
        suspended_s: super::super::now_ms().saturating_sub(since) / 1000,
        prefetch_ms: None,
        prefetched: None,
        warnings,
    };
    journal::note(
        &ctx.layout,
        EventType::Lifecycle,
        "resumed",
        name,
        serde_json::json!({ "thaw_ms": report.thaw_ms, "suspended_s": report.suspended_s }),
    );
    if prefetch {
        let t = Instant::now();
        let p = crate::suspend::prefetch(&rt.cgroups, &ctx.host.proc);
        report.prefetch_ms = Some(ms(t.elapsed()));
        report.prefetched = Some(p.advised);
        for (pid, e) in &p.failed {
            eprintln!("warren: zone '{name}': prefetch of process {pid}: {e}");
        }
    }
    Ok((Outcome::Done, report))
}

/// Wake a suspended zone before `login` / `cp` use it, saying so (and the resume's
/// warnings) on stderr. Returns whether it was suspended.
pub fn wake(ctx: &Context, name: &str) -> Result<bool> {
    let (o, r) = resume(ctx, name)?;
    for w in &r.warnings {
        eprintln!("warren: zone '{name}': {w}");
    }
    if o == Outcome::Done {
        eprintln!(
            "warren: zone '{name}' was suspended; resumed it ({:.1} ms); 'warren suspend {name}' suspends it again",
            r.thaw_ms
        );
        return Ok(true);
    }
    Ok(false)
}

/// Repair what a crashed suspend or resume left in a live zone's record (under its
/// lock, from `zone::reconcile`): an unfinished suspend is rolled back; a suspended
/// record whose cgroups are thawed (a resume that thawed, then died) says running.
pub(in crate::zone) fn repair(ctx: &Context, z: &mut Zone) -> Result<()> {
    let Some(rt) = z.runtime.as_mut() else {
        return Ok(());
    };
    if !rt.cgroups.has_freezer() {
        // A suspend that died between joining the freezer and recording it: adopt the
        // directory, so halt removes it.
        if let Ok(by_name) = crate::zone::records::cgroups_by_name(ctx, &z.name) {
            if let Some(f) = by_name.dirs.into_iter().find(|(c, d)| {
                c.split(',').any(|x| x == "freezer") && !rt.cgroups.dirs.iter().any(|(_, e)| e == d)
            }) {
                rt.cgroups.dirs.push(f);
                state::save_runtime(&z.dir, rt)?;
            }
        }
    }
    let unfinished = rt.suspension.as_ref().is_some_and(|s| !s.done);
    let thawed = rt.state == ZoneState::Suspended && !rt.cgroups.is_frozen();
    if !unfinished && !thawed {
        return Ok(());
    }
    if unfinished && rt.cgroups.has_freezer() {
        rt.cgroups.set_frozen(false, FREEZE_TIMEOUT)?;
    }
    rt.state = ZoneState::Running;
    rt.suspension = None;
    state::save_runtime(&z.dir, rt)?;
    journal::note(
        &ctx.layout,
        EventType::Lifecycle,
        "resumed",
        &z.name,
        serde_json::json!({
            "repaired": if unfinished { "a suspend interrupted part way was rolled back" }
                        else { "a resume interrupted after its thaw was recorded" },
        }),
    );
    Ok(())
}
