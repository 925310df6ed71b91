//! The suspended zones the agent watches for a client (docs/suspend.md, "Wake on
//! connection", "One wait for all suspended zones"): which they are (re-read every
//! `wake-scan-s`: [`sleepers`]), each held in the one wait ([`super::wake_hold`]) or
//! swept every tick ([`wake_waiting`]: [`super::wake_diag`], [`super::wake`]), why one
//! is swept for now and when it is tried again ([`Waiting`]: room, a thaw, a stale
//! scan, a command's lock), the wait itself with the control socket's requests
//! ([`wait_or_stop`], [`super::control`]), the journal's lines that let go of a zone
//! another command took out of its suspension ([`JournalWatch`]), and the wake.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{
    act, control, log, stop_signal, wake, wake_close, wake_diag, wake_hold, Known, RunOptions,
};
use crate::zone::{self, Context};

/// Sleep `d` in the held zones' one wait, waking each zone whose queue grew as soon
/// as it does (not at the next tick), letting go of those whose init exited and of
/// those a halt asks for ([`control`]); returns early for a stop signal (which is
/// returned).
pub(super) fn wait_or_stop(
    ctx: &Context,
    o: &RunOptions,
    d: Duration,
    holder: &mut wake_hold::Holder,
    control: Option<&control::Control>,
    sleeping: &mut Vec<Sleeper>,
) -> Option<i32> {
    let end = Instant::now() + d;
    // A control socket taken out of the set by an accept error is back each tick.
    if let Some(c) = control {
        holder.resume_control(c.as_fd());
    }
    loop {
        if let Some(sig) = stop_signal() {
            return Some(sig);
        }
        // Polled at least once a tick, also when the tick's own work took all of it:
        // otherwise a long tick (sweeping thousands of zones) kept every held zone's
        // client waiting for as long as the ticks stayed long.
        let left = end.saturating_duration_since(Instant::now());
        let last = left.is_zero();
        let ready = match holder.wait(left.min(Duration::from_millis(50))) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("warren: agent: waiting on the suspended zones' sockets: {e}");
                if last {
                    return None;
                }
                std::thread::sleep(left.min(Duration::from_millis(50)));
                continue;
            }
        };
        // A zone whose copies lingered in a close (said by the holder) is swept from
        // now on, never held.
        for name in holder.take_lingered() {
            if let Some(z) = sleeping.iter_mut().find(|z| z.name == name) {
                if let Some(id) = z.held.take() {
                    holder.release(id);
                }
                z.waiting = None;
            }
        }
        for r in ready {
            let id = match r {
                wake_hold::Ready::Socket(id) | wake_hold::Ready::Exited(id) => id,
                wake_hold::Ready::Control => {
                    if let Some(c) = control {
                        serve_control(c, sleeping, holder);
                    }
                    continue;
                }
            };
            let Some(i) = sleeping.iter().position(|z| z.held == Some(id)) else {
                holder.release(id);
                continue;
            };
            let z = &mut sleeping[i];
            let waiting = match r {
                // Halted, deleted or dead: its sockets must not outlive it here. (The
                // control socket was answered above.)
                wake_hold::Ready::Exited(_) | wake_hold::Ready::Control => None,
                wake_hold::Ready::Socket(_) => match z.sockets.as_mut().map(|w| w.pending()) {
                    Some(Ok(None)) => continue,
                    Some(Ok(Some(kind))) => Some(kind),
                    Some(Err(e)) => {
                        eprintln!(
                            "warren: agent: zone '{}': sock_diag failed ({e}); waking it (a socket of it was readable)",
                            z.name
                        );
                        Some("a socket")
                    }
                    None => Some("a socket"),
                },
            };
            let z = sleeping.swap_remove(i);
            holder.release(id);
            if let Some(waiting) = waiting {
                wake_zone(ctx, o, &z.name, waiting);
            }
        }
        if last {
            return None;
        }
    }
}

/// Answer the halts' requests waiting on the control socket ([`control`]), each once
/// the copies of the suspension it names are closed (by a closer thread, whether this
/// request or the init's exit released them); an accept error is said and takes the socket out of
/// the wait until the next tick (a connection it left queued would make every wait
/// return at once).
fn serve_control(
    c: &control::Control,
    sleeping: &mut Vec<Sleeper>,
    holder: &mut wake_hold::Holder,
) {
    let (requests, err) = c.requests();
    for (r, s) in requests {
        let answer: wake_close::Then = Box::new(move |held| control::Control::answer(&s, held));
        match (release_named(sleeping, &r), r.init) {
            (Some(id), _) => holder.release_then(id, answer),
            // Let go already (its init's exit came first): answered once the copies
            // of that suspension are closed.
            (None, Some(init)) => holder.when_closed(init, answer),
            (None, None) => answer(false),
        }
    }
    if let Some(e) = err {
        eprintln!(
            "warren: agent: accepting a request on its control socket failed ({e}); it is not waited on until the next tick"
        );
        holder.pause_control(c.as_fd());
    }
}

/// Say, when it changes, how many suspended zones are swept every tick rather than
/// held in the one wait because the descriptor budget is used up.
pub(super) fn say_swept(
    o: &RunOptions,
    sleeping: &[Sleeper],
    holder: Option<&wake_hold::Holder>,
    said: &mut Option<usize>,
) {
    let Some(h) = holder else {
        return;
    };
    let swept = sleeping
        .iter()
        .filter(|z| z.waiting == Some(Waiting::Room))
        .count();
    if *said == Some(swept) || (said.is_none() && swept == 0) {
        return;
    }
    *said = Some(swept);
    let (used, budget) = h.usage();
    log(
        o.json,
        serde_json::json!({"agent": "wake-hold", "held_zones": h.len(), "swept_zones": swept, "descriptors": used, "budget": budget}),
        format!(
            "agent: {} suspended zones held in one wait ({used} descriptors of a budget of {budget}: RLIMIT_NOFILE less {} for the agent); {swept} swept every tick{}",
            h.len(),
            wake_hold::RESERVE,
            if swept > 0 { ": raise the agent's descriptor limit (ulimit -n) to hold them all" } else { "" }
        ),
    );
}

/// The journal's growth: a `resumed`, `halted`, `deleted`, … line for a watched zone
/// means another command took it out of its suspension, so the agent lets go of its
/// sockets at once rather than at the next re-read of the suspended zones.
pub(super) struct JournalWatch {
    path: PathBuf,
    seen: u64,
}

impl JournalWatch {
    pub(super) fn new(ctx: &Context) -> JournalWatch {
        let path = crate::journal::path(&ctx.layout);
        let seen = std::fs::metadata(&path).map_or(0, |m| m.len());
        JournalWatch { path, seen }
    }

    /// Names of zones in lifecycle lines written since the last call (pure on `text`).
    fn left(text: &str) -> Vec<String> {
        text.lines()
            .filter_map(|l| serde_json::from_str::<crate::journal::Entry>(l).ok())
            .filter(|e| e.kind == crate::journal::EventType::Lifecycle && e.action != "suspended")
            .map(|e| e.zone)
            .collect()
    }

    pub(super) fn release_left(
        &mut self,
        sleeping: &mut Vec<Sleeper>,
        mut holder: Option<&mut wake_hold::Holder>,
    ) {
        let len = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if len == self.seen {
            return;
        }
        // Rotated: read the new file from its start.
        let from = if len < self.seen { 0 } else { self.seen };
        let Ok(mut f) = File::open(&self.path) else {
            return;
        };
        let mut text = String::new();
        if f.seek(std::io::SeekFrom::Start(from)).is_err()
            || f.take(len - from).read_to_string(&mut text).is_err()
        {
            self.seen = len;
            return;
        }
        // Whole lines only: a line being written is read at the next tick.
        let Some(end) = text.rfind('\n') else {
            return;
        };
        self.seen = from + end as u64 + 1;
        let left = JournalWatch::left(&text[..end]);
        sleeping.retain(|z| {
            let gone = left.contains(&z.name);
            if gone {
                if let (Some(id), Some(h)) = (z.held, holder.as_deref_mut()) {
                    h.release(id);
                }
            }
            !gone
        });
    }
}

/// Stop watching the zone `r` names (halted, deleted, evicted: [`control`]), if its
/// init is the one named; its holding, for the caller to release.
pub(super) fn release_named(sleeping: &mut Vec<Sleeper>, r: &control::Request) -> Option<u64> {
    let i = sleeping.iter().position(|z| r.names(&z.name, z.pid))?;
    sleeping.swap_remove(i).held
}

/// Why a watched zone is swept rather than held, when it may be held later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// The descriptor budget was used up: held as soon as a release makes room.
    Room,
    /// Its cgroup was not frozen: scanned afresh once it is, at a re-read.
    Frozen,
    /// Its scan no longer matched it (a descriptor moved, a process gone): scanned
    /// afresh and tried again at the next re-read (so at most once a `wake-scan-s`).
    Stale,
    /// A command held its lock (a resume or halt under way): tried again at the next
    /// re-read.
    Busy,
}

/// Try to hold zone `z` in `h` (its sockets found, not held yet), unless a command
/// holds the zone's lock (`layout`'s): a `resume` asks the agent to let go before it
/// thaws, and must not find the zone held again by the time it has.
fn try_hold(layout: &crate::layout::Layout, h: &mut wake_hold::Holder, z: &mut Sleeper) {
    let Some(w) = z.sockets.as_ref().filter(|w| !w.watched.is_empty()) else {
        z.waiting = None;
        return;
    };
    let _lock = match crate::lock::try_exclusive_path(&layout.lock_file("zone", &z.name)) {
        Ok(Some(lock)) => Some(lock),
        Ok(None) => {
            z.waiting = Some(Waiting::Busy);
            return;
        }
        // No lock file to take (a full state filesystem): held without it.
        Err(_) => None,
    };
    let cgroups = &z.cgroups;
    let in_zone = |pid: i32| cgroups.pids().is_ok_and(|p| p.contains(&pid));
    let r = h.hold(
        &z.name,
        z.pid,
        &w.watched,
        &|| cgroups.is_frozen(),
        &in_zone,
    );
    let waiting = match &r {
        Ok(_) => None,
        Err(wake_hold::NotHeld::Full) => Some(Waiting::Room),
        Err(wake_hold::NotHeld::NotFrozen) => Some(Waiting::Frozen),
        Err(wake_hold::NotHeld::Stale(_)) => Some(Waiting::Stale),
        Err(wake_hold::NotHeld::Lingered | wake_hold::NotHeld::Failed(_)) => None,
    };
    match r {
        Ok(id) => {
            z.held = Some(id);
            if let Some(w) = z.sockets.as_mut() {
                w.park();
            }
        }
        Err(wake_hold::NotHeld::Full) => {}
        // Said once, not at each retry.
        Err(e @ (wake_hold::NotHeld::NotFrozen | wake_hold::NotHeld::Stale(_))) => {
            if z.waiting != waiting {
                eprintln!(
                    "warren: agent: zone '{}': its sockets are swept, not held: {e}",
                    z.name
                );
            }
        }
        Err(e) => eprintln!(
            "warren: agent: zone '{}': its sockets are swept every tick, not held ({e})",
            z.name
        ),
    }
    z.waiting = waiting;
}

/// Hold the zones that wait for room if it is there now, and with `reread` those that
/// wait for a re-read; whether one was held.
pub(super) fn hold_waiting(
    layout: &crate::layout::Layout,
    h: &mut wake_hold::Holder,
    sleeping: &mut [Sleeper],
    reread: bool,
) -> bool {
    let mut any = false;
    for z in sleeping.iter_mut() {
        any |= hold_if_due(layout, h, z, reread);
    }
    any
}

/// [`hold_waiting`] for one zone.
fn hold_if_due(
    layout: &crate::layout::Layout,
    h: &mut wake_hold::Holder,
    z: &mut Sleeper,
    reread: bool,
) -> bool {
    let now = z.held.is_none()
        && due(z.waiting, reread, || {
            z.sockets.as_ref().is_some_and(|w| h.fits(w.watched.len()))
        });
    if now {
        try_hold(layout, h, z);
    }
    now && z.held.is_some()
}

/// Whether a zone swept for `waiting` is tried again now (pure): one that waits for
/// room when `fits` says there is, the others only at a re-read of the suspended
/// zones (`reread`), so that none is retried, or rescanned, at every tick.
fn due(waiting: Option<Waiting>, reread: bool, fits: impl FnOnce() -> bool) -> bool {
    match waiting {
        Some(Waiting::Room) => fits(),
        Some(Waiting::Frozen | Waiting::Stale | Waiting::Busy) => reread,
        None => false,
    }
}

/// Whether a zone not held is scanned afresh at a re-read before it is tried again
/// (pure): one found thawed, or whose scan was stale, once it is frozen (what it ran
/// meanwhile may have moved its sockets).
fn rescan_due(waiting: Option<Waiting>, frozen: impl FnOnce() -> bool) -> bool {
    matches!(waiting, Some(Waiting::Frozen | Waiting::Stale)) && frozen()
}

/// A suspended zone whose sockets the agent watches.
pub(super) struct Sleeper {
    name: String,
    pid: i32,
    /// It has a network namespace of its own that the host reaches (bridged).
    bridged: bool,
    /// Read through the fallback, TCP/UDP in /proc/PID/net ([`wake`]): sock_diag failed
    /// for this bridged zone (a host-network zone's /proc/PID/net is the host's).
    proc_fallback: bool,
    /// Its sockets by sock_diag ([`wake_diag`]: unix, TCP, UDP), any network mode;
    /// `None`: it holds no socket (nothing to wait on), or the watch failed.
    sockets: Option<wake_diag::SocketWatch>,
    /// The fallback's baseline: the suspension's record, or its first read.
    proc_baseline: Option<wake::Baseline>,
    /// Its holding in the one wait ([`wake_hold`]); `None`: swept every tick.
    held: Option<u64>,
    /// Swept for now, held once this clears ([`hold_waiting`]).
    waiting: Option<Waiting>,
    /// Its cgroups: whether it is frozen is read right before its sockets are taken.
    cgroups: crate::cgroups::CgroupSet,
}

/// The suspended zones of `known` to watch, keeping the socket watches and holdings
/// of `old` for the zones still there with the same init (their sockets are read only
/// once, or again when [`rescan_due`]), letting go of the holdings of zones no longer
/// suspended, and then holding each new one's sockets in `holder` if it can (and each
/// old one that waited for it: [`hold_if_due`]). Every watch is made and every stale
/// holding let go before any zone is held, so the budget ([`wake_hold::Holder::fits`])
/// counts what is open.
pub(super) fn sleepers(
    ctx: &Context,
    known: Vec<Known>,
    old: Vec<Sleeper>,
    holder: Option<&mut wake_hold::Holder>,
) -> Vec<Sleeper> {
    // By zone and init: a re-read of 9,000 suspended zones matched each against a
    // list of as many (a fifth of the agent's time at 10,000 zones).
    let mut old: HashMap<(String, i32), Sleeper> = old
        .into_iter()
        .map(|z| ((z.name.clone(), z.pid), z))
        .collect();
    let mut new: Vec<(Sleeper, bool)> = Vec::new();
    for k in known.into_iter().filter(|k| k.suspended) {
        let Some(pid) = k.init_pid else {
            continue;
        };
        if let Some(mut z) = old.remove(&(k.name.clone(), pid)) {
            if z.held.is_none() && rescan_due(z.waiting, || z.cgroups.is_frozen()) {
                rescan(ctx, &mut z, k.socket_queues.as_ref(), holder.as_deref());
            }
            new.push((z, false));
            continue;
        }
        let (sockets, diag_failed) = match watch(
            ctx,
            pid,
            &k.cgroups,
            k.socket_queues.as_ref(),
            holder.as_deref(),
        ) {
            Ok(w) => (w, false),
            Err(e) => {
                eprintln!(
                        "warren: agent: zone '{}': its sockets are not watched by sock_diag ({e}); a bridged zone's are read from /proc/PID/net instead",
                        k.name
                    );
                (None, true)
            }
        };
        let z = Sleeper {
            name: k.name,
            pid,
            bridged: k.veth.is_some(),
            proc_fallback: diag_failed && k.veth.is_some(),
            sockets,
            proc_baseline: k.socket_queues.as_ref().map(wake::Baseline::recorded),
            held: None,
            waiting: None,
            cgroups: k.cgroups,
        };
        new.push((z, true));
    }
    let Some(h) = holder else {
        return new.into_iter().map(|(z, _)| z).collect();
    };
    for z in old.into_values() {
        if let Some(id) = z.held {
            h.release(id);
        }
    }
    new.into_iter()
        .map(|(mut z, fresh)| {
            if fresh {
                try_hold(&ctx.layout, h, &mut z);
            } else {
                hold_if_due(&ctx.layout, h, &mut z, true);
            }
            z
        })
        .collect()
}

/// Watch the sockets of the zone whose init is `pid` by sock_diag
/// ([`wake_diag::SocketWatch::new`]), its netlink socket counted in `holder`'s
/// descriptor budget while the watch lives.
fn watch(
    ctx: &Context,
    pid: i32,
    cgroups: &crate::cgroups::CgroupSet,
    recorded: Option<&std::collections::BTreeMap<u32, u32>>,
    holder: Option<&wake_hold::Holder>,
) -> std::io::Result<Option<wake_diag::SocketWatch>> {
    let mut w = wake_diag::SocketWatch::new(&ctx.host.proc, pid, cgroups, recorded)?;
    if let (Some(w), Some(h)) = (w.as_mut(), holder) {
        w.counted = Some(h.counted());
    }
    Ok(w)
}

/// Scan zone `z`'s sockets afresh (its descriptors may have changed while it ran),
/// keeping the old scan if the new one fails.
fn rescan(
    ctx: &Context,
    z: &mut Sleeper,
    recorded: Option<&std::collections::BTreeMap<u32, u32>>,
    holder: Option<&wake_hold::Holder>,
) {
    match watch(ctx, z.pid, &z.cgroups, recorded, holder) {
        Ok(w) => z.sockets = w,
        Err(e) => eprintln!(
            "warren: agent: zone '{}': scanning its sockets again failed ({e}); the earlier scan is kept",
            z.name
        ),
    }
}

/// Resume each swept suspended zone (not held in the one wait) that has a client
/// waiting beyond its baseline ([`wake_diag`], or [`wake`]), sweeping from `next` for
/// at most `budget` (at least one zone) and leaving `next` where the next tick goes
/// on. A sweep of thousands of zones takes seconds (each dump walks the host's
/// listening hash, shared by every network namespace): done whole it held the tick,
/// and with it the held zones' wait, for as long.
pub(super) fn wake_waiting(
    ctx: &Context,
    o: &RunOptions,
    sleeping: &mut Vec<Sleeper>,
    next: &mut usize,
    budget: Duration,
) {
    let start = Instant::now();
    let mut i = *next;
    for seen in 0..sleeping.len() {
        if sleeping.is_empty() || (seen > 0 && start.elapsed() >= budget) {
            break;
        }
        i %= sleeping.len();
        match sweep(ctx, &mut sleeping[i]) {
            Some(waiting) => {
                let z = sleeping.remove(i);
                wake_zone(ctx, o, &z.name, waiting);
            }
            None => i += 1,
        }
    }
    *next = i;
}

/// Whether a client waits on one of the sockets of zone `z`, which is not held: what
/// it waits on, for the wake's record.
fn sweep(ctx: &Context, z: &mut Sleeper) -> Option<&'static str> {
    if z.held.is_some() {
        return None;
    }
    match z.sockets.as_mut().map(|w| {
        // Let go of (or never held): swept every tick, on a socket kept open.
        w.unpark();
        w.pending()
    }) {
        Some(Ok(w)) => w,
        Some(Err(e)) => {
            // Not silently deaf: from now on the /proc fallback (bridged zones).
            eprintln!(
                "warren: agent: zone '{}': sock_diag failed ({e}); its sockets are read from /proc/PID/net from now on",
                z.name
            );
            if let Some(w) = z.sockets.take() {
                z.proc_baseline.get_or_insert(w.baseline);
            }
            z.proc_fallback = z.bridged;
            None
        }
        None if z.proc_fallback => match z.proc_baseline.as_mut() {
            Some(base) => wake::pending(&ctx.host.proc, z.pid, base).then_some("a TCP/UDP socket"),
            None => {
                // No record: what waits at this first read is the baseline.
                z.proc_baseline = Some(wake::Baseline::new(wake::read(&ctx.host.proc, z.pid)));
                None
            }
        },
        None => None,
    }
}

/// Resume zone `name` because a client waits on `waiting` ("a TCP socket", …), and
/// record it: an agent event `wake` with the resume's latency. A zone that another
/// command resumed meanwhile is left alone, unrecorded.
fn wake_zone(ctx: &Context, o: &RunOptions, name: &str, waiting: &str) {
    let t = Instant::now();
    let r = zone::resume(ctx, name);
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if matches!(r, Ok((zone::Outcome::AlreadyDone(_), _))) {
        return;
    }
    let e = act::Event {
        latency_ms: Some(ms as u64),
        ..act::Event::plain(
            "wake",
            name,
            format!("a client is waiting on {waiting}"),
            r.as_ref().err().map(|e| e.to_string()),
        )
    };
    if let Err(err) = act::record(&ctx.layout, &e) {
        eprintln!("warren: agent: zone '{name}': woken, but not logged: {err}");
    }
    match r {
        Ok(_) => log(
            o.json,
            serde_json::to_value(&e).unwrap_or_default(),
            format!("agent: woke zone '{name}' in {ms:.1} ms: a client is waiting on {waiting}"),
        ),
        Err(err) => eprintln!("warren: agent: waking zone '{name}': {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_lines_but_a_suspend_take_a_zone_out_of_the_wait() {
        let text = concat!(
            r#"{"time_ms":1,"type":"lifecycle","action":"resumed","zone":"a"}"#,
            "\n",
            r#"{"time_ms":2,"type":"lifecycle","action":"suspended","zone":"b"}"#,
            "\n",
            r#"{"time_ms":3,"type":"agent","action":"wake","zone":"c"}"#,
            "\n",
            r#"{"time_ms":4,"type":"lifecycle","action":"halted","zone":"d"}"#,
            "\n",
            r#"{"time_ms":5,"type":"lifecycle","act"#,
        );
        assert_eq!(JournalWatch::left(text), vec!["a", "d"]);
    }

    /// Third review, finding 3: a zone whose scan went stale is scanned afresh (once
    /// frozen) and tried again at a re-read of the suspended zones, never at every
    /// tick; so is one found thawed or locked by a command. One waiting for room is
    /// tried as soon as it fits.
    #[test]
    fn a_stale_frozen_or_locked_zone_is_rescanned_and_retried_only_at_a_re_read() {
        for w in [Waiting::Stale, Waiting::Frozen, Waiting::Busy] {
            assert!(!due(Some(w), false, || true), "{w:?} retried at a tick");
            assert!(
                due(Some(w), true, || false),
                "{w:?} not retried at a re-read"
            );
        }
        assert!(due(Some(Waiting::Room), false, || true));
        assert!(!due(Some(Waiting::Room), true, || false));
        assert!(
            !due(None, true, || true),
            "a zone that cannot be held is swept"
        );
        assert!(rescan_due(Some(Waiting::Stale), || true));
        assert!(rescan_due(Some(Waiting::Frozen), || true));
        assert!(
            !rescan_due(Some(Waiting::Stale), || false),
            "a zone not frozen is not scanned: it could change again"
        );
        for w in [Some(Waiting::Busy), Some(Waiting::Room), None] {
            assert!(!rescan_due(w, || true), "{w:?} rescanned");
        }
    }
}
