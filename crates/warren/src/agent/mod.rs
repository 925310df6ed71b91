//! The overcommit agent: `warren agent` evicts zones before the OOM killer has to.
//!
//! # Why an agent
//!
//! Density means overcommit: the zones' memory caps add up to more than the host has,
//! on the bet that they are not all busy at once. When the bet loses, the kernel's
//! answer is the OOM killer, which picks a *process* by its badness score, anywhere:
//! the database of a critical zone as readily as a batch job, and a zone left with
//! half its processes is worse than a zone stopped cleanly. Like the illumos resource
//! capping daemon (rcapd), which samples each project's RSS and pages it out when it
//! exceeds its cap, warren's agent samples from user space and acts on *zones*, with
//! a policy the operator wrote down: zones have a class (`priority = critical |
//! normal | best-effort`) and a guaranteed size (`memory.request`); when the host runs
//! short, the agent halts the zone that matters least and uses most beyond its
//! guarantee, gracefully, and says why.
//!
//! # What it watches
//!
//! Every `interval-ms` (default 500 ms) it reads /proc/meminfo (MemAvailable, swap
//! total and free), /proc/vmstat (pswpin, pswpout: averaged over `window-s` so one
//! burst does not look like thrashing) and /proc/pressure/memory. With `watch =
//! "group"` (warren's own zone group) or a cgroup path, the budget is that cgroup's
//! limit instead of the host: available = limit − working set, swap used against
//! its memsw (v1) or swap.max (v2) room, and on v2 its own PSI. That is how an
//! operator gives warren a memory budget on a shared host, and how the tests make
//! pressure without starving the machine. Zones (their records, and anonymous memory
//! plus swap from their memory cgroups) are read only when an eviction is due — a
//! threshold active and the cool-down over — and, with `restart-evicted`, every
//! `zone-refresh-s`: with 500 zones the agent reads a few /proc files a tick, not a
//! thousand.
//!
//! # How it decides
//!
//! Pure functions in [`decide`]: each signal has a trigger, a clear level and a grace
//! period. A crossing becomes *active* only after staying past the trigger for the
//! grace period (a spike shorter than that does nothing) and stays active until the
//! value is back past the clear level (hysteresis: no flapping at the line). While
//! any is active, the agent suspends one zone that is not critical (`suspend-first`,
//! the default: docs/suspend.md; [`decide::suspend_rank`]), and only when none is left
//! to suspend evicts one: from the lowest class running
//! (best-effort, then normal; critical never while a lower class runs, and only with
//! `evict-critical = true` at all), the one furthest above its request, the youngest
//! on a tie. Then it waits `cooldown-s` to see the effect before evicting again:
//! freed memory shows in MemAvailable at once, but swap rates and PSI are averages
//! that lag.
//!
//! # How it acts
//!
//! [`act`]: the same halt as `warren halt` (SIGTERM to init, then kill after the
//! timeout), under the zone's lock; `evicted: <reason>` in its state.json (shown by
//! `warren list`, cleared by its next boot); one JSON line in `<root>/events.jsonl`
//! with the reason and the numbers. With `restart-evicted = true`, evicted zones boot
//! again (one per cool-down) once every signal has been below its trigger for
//! `restart-after-s`. `--dry-run` prints what it would do and does nothing.
//!
//! Zones with `suspend-after` are suspended once idle that long ([`idle`]), pressure
//! or not, read every `idle-scan-s`.
//!
//! One agent runs per state root: it holds the root's agent lock
//! (`locks/agent-agent.lock`, [`lock_path`]) while it runs, and a second one (CLI or
//! the daemon's agent operation) is refused, naming the holder. SIGINT, SIGTERM and
//! SIGHUP are blocked while it runs and taken between ticks ([`stop_signal`]): the
//! agent ends after the action in hand (never in the middle of a halt), logs
//! `{"agent":"stopped"}`, and exits 0.
//!
//! What it does not do: limit a zone (that is `memory.max`), or page a zone out
//! (the kernel does that, guided by `memory.request` as soft limit / memory.low).

pub mod act;
pub mod config;
pub mod control;
pub mod decide;
pub mod idle;
pub mod sample;
mod seen;
mod sleepers;
pub mod wake;
pub mod wake_close;
pub mod wake_diag;
pub mod wake_hold;

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use config::AgentConfig;
use decide::{Policy, Track, ZoneView};
use sleepers::{
    hold_waiting, release_named, say_swept, sleepers, wait_or_stop, wake_waiting, JournalWatch,
    Sleeper,
};

use crate::error::{Error, IoContext, Result};
use crate::state::ZoneState;
use crate::zone::{self, Context};

/// Options of `warren agent` beyond its config file.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub dry_run: bool,
    /// Sample for one window, act at most once, exit.
    pub once: bool,
    pub json: bool,
}

/// A running zone as the agent tracks it between refreshes.
#[derive(Clone)]
struct Known {
    name: String,
    priority: crate::config::Priority,
    request: Option<u64>,
    booted_at_ms: u64,
    cgroups: crate::cgroups::CgroupSet,
    suspended: bool,
    /// `suspend-after`, seconds.
    suspend_after: Option<u64>,
    /// The host end of its veth (bridged zones).
    veth: Option<String>,
    init_pid: Option<i32>,
    /// A suspended zone's socket queues at suspension (the wake's baseline).
    socket_queues: Option<std::collections::BTreeMap<u32, u32>>,
}

/// Installed zones the agent evicted, with their class (for restarts).
type Evicted = Vec<(String, crate::config::Priority)>;

fn running_zones(ctx: &Context, seen: &mut Seen) -> Result<(Vec<Known>, Evicted)> {
    let mut running = Vec::new();
    let mut evicted = Vec::new();
    let names = zone::names_in(&ctx.layout)?;
    seen.keep_only(&names);
    for name in names {
        let found = seen.get(ctx, &name, || {
            let Ok(z) = zone::load(ctx, &name) else {
                return (Found::Other, None, None);
            };
            let init = z.runtime.as_ref().and_then(|rt| rt.init);
            // The state from this one look at the init, kept with the result.
            let fact = init.map(|i| ctx.fact_of(i));
            let state = z.state_given(ctx, fact);
            let found = match (state, &z.runtime) {
                (st @ (ZoneState::Running | ZoneState::Suspended), Some(rt)) => {
                    Found::Known(Box::new(Known {
                        name: name.clone(),
                        priority: z.config.priority,
                        request: z.config.limits.memory_request,
                        booted_at_ms: rt.booted_at_ms,
                        cgroups: rt.cgroups.clone(),
                        suspended: st == ZoneState::Suspended,
                        suspend_after: z.config.suspend_after,
                        veth: rt.net.as_ref().map(|n| n.veth.clone()),
                        init_pid: rt.init.map(|i| i.pid),
                        socket_queues: rt.suspension.as_ref().and_then(|s| s.socket_queues.clone()),
                    }))
                }
                (ZoneState::Installed, _) if z.lifecycle.evicted.is_some() => {
                    Found::Evicted(z.config.priority)
                }
                _ => Found::Other,
            };
            (found, init, fact)
        });
        match found {
            Found::Known(k) => running.push(*k),
            Found::Evicted(p) => evicted.push((name, p)),
            Found::Other => {}
        }
    }
    Ok((running, evicted))
}

/// What the agent makes of one zone's records ([`running_zones`]).
#[derive(Clone)]
enum Found {
    /// Running or suspended.
    Known(Box<Known>),
    /// Installed after an eviction: a candidate for a restart.
    Evicted(crate::config::Priority),
    Other,
}

/// The zones' records as last read ([`seen`]).
type Seen = seen::Seen<Found>;

/// The cgroup whose budget the agent watches, if any.
pub(crate) fn watched_dir(ctx: &Context, cfg: &AgentConfig) -> Result<Option<PathBuf>> {
    match cfg.watch.as_str() {
        "host" => Ok(None),
        "group" => {
            let (driver, _) = ctx.cgroups()?;
            let dir = driver
                .memory_parent()
                .ok_or_else(|| {
                    Error::Unsupported(
                        "watch = \"group\": no memory cgroup for zones (the memory controller is not mounted); set watch to \"host\" or to a cgroup directory".into(),
                    )
                })?;
            Ok(Some(dir))
        }
        path => Ok(Some(PathBuf::from(path))),
    }
}

fn log(json: bool, value: serde_json::Value, text: String) {
    if json {
        println!("{value}");
    } else {
        println!("{text}");
    }
}

/// The lock file an agent holds while it runs on this root.
pub fn lock_path(ctx: &Context) -> PathBuf {
    ctx.layout.lock_file("agent", "agent")
}

/// Take this root's agent lock, or refuse naming the agent that holds it. With the
/// state filesystem full (no block or inode for a first lock file), or read-only, the
/// agent runs without it, saying so: evicting under pressure never waits on a write.
fn one_agent(ctx: &Context) -> Result<Option<crate::lock::Lock>> {
    let path = lock_path(ctx);
    let held = match crate::lock::try_exclusive_path(&path) {
        Ok(held) => held,
        Err(Error::Io { source, .. })
            if matches!(
                source.raw_os_error(),
                Some(warren_sys::libc::ENOSPC | warren_sys::libc::EDQUOT | warren_sys::libc::EROFS)
            ) =>
        {
            eprintln!(
                "warren: warning: the agent runs without the root's agent lock ({}: {source}); make sure no other agent runs on {}",
                path.display(),
                ctx.layout.root().display()
            );
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    held.map(Some).ok_or_else(|| Error::Relayed {
        message: format!(
            "another agent is running on the state root {} ({}); one agent runs per root: stop that one first (Ctrl-C, or cancel its operation in the daemon: GET /1.0/operations)",
            ctx.layout.root().display(),
            crate::lock::describe(&crate::lock::holders(&ctx.host.proc, &path))
        ),
        exit: crate::ExitCode::Conflict,
    })
}

/// Refuse, naming the holder, when an agent already runs on this root (a command about
/// to start its own agent, e.g. `bench scale --agent`, asks first: the agent it starts
/// would be refused, its error unseen).
pub fn none_running(ctx: &Context) -> Result<()> {
    one_agent(ctx).map(drop)
}

/// Set by a daemon that runs the agent as an operation: its pid. The agent then asks
/// for SIGTERM when that parent dies (`PR_SET_PDEATHSIG`), so a daemon killed outright
/// does not leave its agent running; the signal is taken between ticks like any stop.
pub const PARENT_ENV: &str = "WARREN_AGENT_PARENT_PID";

fn stop_with_parent() -> Result<()> {
    let Some(parent) = std::env::var(PARENT_ENV)
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
    else {
        return Ok(());
    };
    warren_sys::proc::set_pdeathsig(warren_sys::libc::SIGTERM)
        .ctx(|| "asking for SIGTERM when the daemon that started the agent dies".into())?;
    if warren_sys::proc::getppid() != parent {
        return Err(Error::Relayed {
            message: format!(
                "agent: the daemon that started it (pid {parent}) is gone; start the agent again"
            ),
            exit: crate::ExitCode::Failure,
        });
    }
    Ok(())
}

/// A stop signal taken (they are blocked while the agent runs), if one came.
fn stop_signal() -> Option<i32> {
    warren_sys::signal::take(&crate::bench::interrupt::STOP)
}

/// Sleep `d`, waking early for a stop signal (which is returned).
fn sleep_or_stop(d: Duration) -> Option<i32> {
    let end = Instant::now() + d;
    loop {
        if let Some(sig) = stop_signal() {
            return Some(sig);
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// `warren agent`: run until stopped by a signal (or, with `once`, for one window).
pub fn run(ctx: &Context, cfg: &AgentConfig, o: &RunOptions) -> Result<()> {
    if !o.dry_run {
        ctx.require_root()?;
    }
    let _lock = one_agent(ctx)?;
    let mask = warren_sys::signal::block(&crate::bench::interrupt::STOP)
        .ctx(|| "blocking SIGINT, SIGTERM and SIGHUP".into())?;
    stop_with_parent()?;
    let r = watch_loop(ctx, cfg, o);
    let _ = warren_sys::signal::restore(&mask);
    if let Ok(Some(sig)) = r {
        log(
            o.json,
            serde_json::json!({"agent": "stopped", "signal": sig}),
            format!("agent: stopped by signal {sig}"),
        );
    }
    r.map(drop)
}

/// The agent's loop; `Some(signal)` when a stop signal ended it.
fn watch_loop(ctx: &Context, cfg: &AgentConfig, o: &RunOptions) -> Result<Option<i32>> {
    let watch = watched_dir(ctx, cfg)?;
    let interval = Duration::from_millis(cfg.interval_ms);
    let th = cfg.thresholds();
    let policy = Policy {
        cooldown_ms: cfg.cooldown_ms(),
        evict_critical: cfg.evict_critical,
        suspend_first: cfg.suspend_first,
    };
    let mut rates = sample::Rates::new(cfg.window_ms());
    let mut tracks = [Track::default(); 5];
    let mut last_action: Option<u64> = None;
    let mut idle: idle::Tracks = idle::Tracks::new();
    let mut idle_scanned: Option<Instant> = None;
    // Suspended zones whose sockets are watched (`wake-on-connect`): held in one wait
    // (`wake-hold`) or swept every tick.
    let mut sleeping: Vec<Sleeper> = Vec::new();
    let mut sleeping_read: Option<Instant> = None;
    let mut seen = Seen::new();
    // Where the last tick's sweep of the zones not held stopped (see [`wake_waiting`]).
    let mut sweep_next = 0;
    let mut holder = (cfg.wake_on_connect && cfg.wake_hold && !o.dry_run)
        .then(|| wake_hold::Holder::new(&ctx.host.proc, None))
        .and_then(|h| {
            h.map_err(|e| {
                eprintln!("warren: agent: no epoll set for suspended zones ({e}); their sockets are swept every tick")
            })
            .ok()
        });
    // Where halt asks it to let go of a zone's sockets (only a holder holds any).
    let control = holder.as_mut().and_then(|h| {
        control::Control::bind(&ctx.layout)
            .and_then(|c| h.watch_control(c.as_fd()).map(|()| c))
            .map_err(|e| {
                eprintln!(
                    "warren: agent: no control socket at {} ({e}); a halt cannot ask it to let go of a held zone's sockets, which it then does when it sees the zone's init exit",
                    control::socket_path(&ctx.layout).display()
                )
            })
            .ok()
    });
    let mut swept_said: Option<usize> = None;
    let mut journal = JournalWatch::new(ctx);
    let mut calm_since: Option<u64> = None;
    let mut zones: Vec<Known> = Vec::new();
    let mut evicted: Evicted = Vec::new();
    let mut refreshed: Option<Instant> = None;
    let mut empty_scan: Option<u64> = None;
    let started = Instant::now();
    log(
        o.json,
        serde_json::json!({"agent": "started", "watch": watch, "dry_run": o.dry_run, "hold_budget": holder.as_ref().map(|h| h.usage().1)}),
        format!(
            "agent: watching {}{}",
            watch
                .as_ref()
                .map_or("the host".to_string(), |d| d.display().to_string()),
            if o.dry_run { " (dry run)" } else { "" }
        ),
    );
    loop {
        let tick = Instant::now();
        let now = act::now_ms();
        let host = sample::host(&ctx.host.proc);
        rates.push(now, host.pswpin, host.pswpout);
        let budget = watch.as_deref().and_then(sample::budget);
        let s = sample::signals(now, &host, budget.as_ref(), &rates);
        // Zones are read only when an eviction is due (a threshold active and the
        // cool-down over), and for restarts every zone-refresh-s: a calm host with
        // 500 zones costs a few /proc reads a tick.
        let breaching = !decide::track(&th, &tracks, &s).1.is_empty();
        let cooled = |t: Option<u64>| t.is_none_or(|t| now.saturating_sub(t) >= policy.cooldown_ms);
        // A scan that found nothing to evict (only critical zones) is not repeated
        // every tick either.
        let due = breaching && cooled(last_action) && cooled(empty_scan);
        let stale =
            refreshed.is_none_or(|r| r.elapsed() >= Duration::from_secs_f64(cfg.zone_refresh_s));
        if due || (cfg.restart_evicted && stale) {
            (zones, evicted) = running_zones(ctx, &mut seen)?;
            refreshed = Some(Instant::now());
        }
        let views: Vec<ZoneView> = if due {
            zones
                .iter()
                .map(|k| {
                    sample::zone_view(
                        &k.name,
                        &k.cgroups,
                        k.priority,
                        k.request,
                        k.booted_at_ms,
                        k.suspended,
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let d = decide::decide(&th, &tracks, &s, &views, last_action, &policy);
        for (i, sig) in decide::SIGNALS.iter().enumerate() {
            if tracks[i].since_ms.is_none() && d.tracks[i].since_ms.is_some() {
                let t = th.0[i];
                log(
                    o.json,
                    serde_json::json!({"crossed": sig, "value": s.values[i], "trigger": t.trigger, "grace_ms": t.grace_ms}),
                    format!(
                        "agent: {sig:?} {:.1} crossed {} (acts after {} ms unless it clears)",
                        s.values[i].unwrap_or(0.0),
                        t.trigger,
                        t.grace_ms
                    ),
                );
            }
        }
        tracks = d.tracks;
        if due && d.eviction.is_none() {
            empty_scan = Some(now);
        }
        if let Some(ev) = &d.eviction {
            let v = views
                .iter()
                .find(|v| v.name == ev.zone)
                .expect("chosen from views");
            if o.dry_run {
                log(
                    o.json,
                    serde_json::json!({"would": ev.action, "would_evict": (ev.action == decide::Action::Evict).then_some(&ev.zone), "zone": ev.zone, "reason": ev.reason, "signals": s.values}),
                    format!(
                        "agent: would {} zone '{}': {} (dry run)",
                        if ev.action == decide::Action::Suspend {
                            "suspend"
                        } else {
                            "evict"
                        },
                        ev.zone,
                        ev.reason
                    ),
                );
            } else {
                let seen = act::Seen {
                    sample: &s,
                    breaches: &d.breaches,
                    priority: v.priority,
                    usage_bytes: v.usage_bytes,
                    request_bytes: v.request_bytes,
                    zone_psi_full_avg10: v.psi_full_avg10,
                };
                if ev.action == decide::Action::Suspend {
                    match act::suspend(ctx, &ev.zone, &ev.reason, &seen) {
                        Ok(e) => log(
                            o.json,
                            serde_json::to_value(&e).unwrap_or_default(),
                            match &e.error {
                                Some(why) => format!(
                                    "agent: zone '{}' chosen but not suspended: {why}",
                                    ev.zone
                                ),
                                None => format!(
                                    "agent: suspended zone '{}' in {} ms, {} MiB left resident: {}",
                                    ev.zone,
                                    e.suspend_ms.unwrap_or(0),
                                    e.resident_after.unwrap_or(0) >> 20,
                                    ev.reason
                                ),
                            },
                        ),
                        Err(e) => eprintln!("warren: agent: suspending zone '{}': {e}", ev.zone),
                    }
                    if let Some(k) = zones.iter_mut().find(|k| k.name == ev.zone) {
                        k.suspended = true;
                    }
                } else {
                    match act::evict(ctx, &ev.zone, &ev.reason, cfg.halt_timeout(), &seen) {
                        Ok(e) if e.error.is_some() => log(
                            o.json,
                            serde_json::to_value(&e).unwrap_or_default(),
                            format!(
                                "agent: zone '{}' chosen but not evicted: {}",
                                ev.zone,
                                e.error.clone().unwrap_or_default()
                            ),
                        ),
                        Ok(e) => log(
                            o.json,
                            serde_json::to_value(&e).unwrap_or_default(),
                            format!(
                                "agent: evicted zone '{}' ({}, {} MiB above request) in {} ms: {}",
                                ev.zone,
                                e.priority.clone().unwrap_or_default(),
                                v.excess() >> 20,
                                e.halt_ms.unwrap_or(0),
                                ev.reason
                            ),
                        ),
                        Err(e) => eprintln!("warren: agent: evicting zone '{}': {e}", ev.zone),
                    }
                    zones.retain(|k| k.name != ev.zone);
                    // Its own halt does not ask itself ([`control`]): let go here.
                    let r = control::Request {
                        zone: ev.zone.clone(),
                        init: None,
                    };
                    if let (Some(id), Some(h)) = (release_named(&mut sleeping, &r), holder.as_mut())
                    {
                        h.release(id);
                    }
                }
            }
            last_action = Some(now);
            if o.once {
                return Ok(None);
            }
        }
        // Restart evicted zones once the pressure has been gone long enough.
        let calm = !decide::any_pending(&tracks);
        calm_since = if calm { calm_since.or(Some(now)) } else { None };
        if cfg.restart_evicted && !o.dry_run {
            let calm_for = calm_since.map_or(0, |c| now - c);
            let cooled = last_action.is_none_or(|t| now - t >= policy.cooldown_ms);
            if calm_for >= cfg.restart_after_ms() && cooled {
                evicted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                if let Some((name, _)) = evicted.first().cloned() {
                    match act::restart(ctx, &name, calm_for) {
                        Ok(_) => log(
                            o.json,
                            serde_json::json!({"restarted": name}),
                            format!("agent: booted evicted zone '{name}' again"),
                        ),
                        Err(e) => eprintln!("warren: agent: booting zone '{name}': {e}"),
                    }
                    evicted.remove(0);
                    last_action = Some(now);
                    refreshed = None;
                }
            }
        }
        if cfg.wake_on_connect && !o.dry_run {
            if sleeping_read.is_none_or(|r| r.elapsed() >= Duration::from_secs_f64(cfg.wake_scan_s))
            {
                sleeping_read = Some(Instant::now());
                let known = running_zones(ctx, &mut seen)?.0;
                sleeping = sleepers(ctx, known, std::mem::take(&mut sleeping), holder.as_mut());
                say_swept(o, &sleeping, holder.as_ref(), &mut swept_said);
            }
            // Another command resumed, halted or deleted one: let go of it now.
            journal.release_left(&mut sleeping, holder.as_mut());
            // Room freed (a wake, a halt): hold the zones that waited for it.
            if let Some(h) = holder.as_mut() {
                if hold_waiting(&ctx.layout, h, &mut sleeping, false) {
                    say_swept(o, &sleeping, Some(h), &mut swept_said);
                }
            }
            wake_waiting(ctx, o, &mut sleeping, &mut sweep_next, interval / 2);
        }
        if idle_scanned.is_none_or(|r| r.elapsed() >= Duration::from_secs_f64(cfg.idle_scan_s)) {
            idle_scanned = Some(Instant::now());
            idle_scan(ctx, &mut seen, o, &mut idle, &s)?;
        }
        if o.once && started.elapsed() >= Duration::from_millis(cfg.window_ms()) {
            return Ok(None);
        }
        let rest = interval.saturating_sub(tick.elapsed());
        let stopped = match holder.as_mut() {
            Some(h) => wait_or_stop(ctx, o, rest, h, control.as_ref(), &mut sleeping),
            None => sleep_or_stop(rest),
        };
        if let Some(sig) = stopped {
            return Ok(Some(sig));
        }
    }
}

/// The idle policy ([`idle`]): read every running zone with `suspend-after`, and
/// suspend those idle for that long.
fn idle_scan(
    ctx: &Context,
    seen: &mut Seen,
    o: &RunOptions,
    tracks: &mut idle::Tracks,
    s: &decide::Sample,
) -> Result<()> {
    let now = act::now_ms();
    let (zones, _) = running_zones(ctx, seen)?;
    let watched: Vec<&Known> = zones
        .iter()
        .filter(|k| k.suspend_after.is_some() && !k.suspended)
        .collect();
    tracks.retain(|(name, boot), _| {
        watched
            .iter()
            .any(|k| &k.name == name && k.booted_at_ms == *boot)
    });
    for k in watched {
        let after = k.suspend_after.expect("filtered");
        let key = (k.name.clone(), k.booted_at_ms);
        let now_a = idle::Activity {
            cpu_ns: k.cgroups.cpu_ns().unwrap_or(0),
            net_bytes: k
                .veth
                .as_deref()
                .map_or(0, |v| idle::veth_bytes(&ctx.host.sys, v)),
        };
        let i = idle::step(tracks.get(&key).copied(), now_a, now);
        tracks.insert(key.clone(), i);
        if !idle::due(&i, after, now) {
            continue;
        }
        let reason = format!(
            "idle for {} (no CPU, no network): suspend-after = \"{}\"",
            crate::config::duration_text(now.saturating_sub(i.since_ms) / 1000),
            crate::config::duration_text(after)
        );
        if o.dry_run {
            log(
                o.json,
                serde_json::json!({"would": "suspend", "zone": k.name, "reason": reason}),
                format!("agent: would suspend zone '{}': {reason} (dry run)", k.name),
            );
            continue;
        }
        let v = sample::zone_view(
            &k.name,
            &k.cgroups,
            k.priority,
            k.request,
            k.booted_at_ms,
            false,
        );
        let seen = act::Seen {
            sample: s,
            breaches: &[],
            priority: v.priority,
            usage_bytes: v.usage_bytes,
            request_bytes: v.request_bytes,
            zone_psi_full_avg10: v.psi_full_avg10,
        };
        match act::suspend(ctx, &k.name, &reason, &seen) {
            Ok(e) => log(
                o.json,
                serde_json::to_value(&e).unwrap_or_default(),
                format!("agent: suspended zone '{}': {reason}", k.name),
            ),
            Err(e) => eprintln!("warren: agent: suspending zone '{}': {e}", k.name),
        }
        tracks.remove(&key);
    }
    Ok(())
}
