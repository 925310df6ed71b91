//! The agent's effects: evict a zone through [`crate::zone::evict`] (the same graceful
//! halt as `warren halt`), boot evicted zones again, and record each action as one JSON
//! line in `<root>/events.jsonl` (`warren events` prints them).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::decide::{Breach, Sample};
use crate::error::Result;
use crate::layout::Layout;
use crate::zone::{self, Context};

/// One line of `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Unix time in milliseconds.
    pub time_ms: u64,
    /// "evict" or "restart".
    pub action: String,
    pub zone: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// Anonymous memory + swap of the zone when it was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_bytes: Option<u64>,
    /// The zone's own memory PSI full avg10 (cgroup v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_psi_full_avg10: Option<f64>,
    /// The signal values (available %, swap used %, swap-in and swap-out pages/s, PSI
    /// full avg10 %) that the decision saw.
    #[serde(default)]
    pub signals: serde_json::Value,
    /// The active thresholds with their values and triggers.
    #[serde(default)]
    pub breaches: serde_json::Value,
    /// Evict: whether the zone stopped on SIGTERM within the timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful: Option<bool>,
    /// Evict: from the first threshold becoming active (past its grace) until the
    /// zone's processes were gone, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// Evict: how long the halt itself took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halt_ms: Option<u64>,
    /// Suspend: how long the suspend took, and what the zone still holds after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_after: Option<u64>,
    /// The action failed: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub fn events_path(layout: &Layout) -> PathBuf {
    crate::journal::path(layout)
}

/// Append one event to the state root's journal ([`crate::journal`], type `agent`).
pub fn record(layout: &Layout, e: &Event) -> Result<()> {
    crate::journal::append(
        layout,
        crate::journal::EventType::Agent,
        serde_json::to_value(e).expect("event serialises"),
    )
}

/// The most of `events.jsonl` warren reads (64 MiB, some 200,000 events).
pub const MAX_EVENTS_FILE: u64 = 64 << 20;

/// Every recorded agent event, oldest first; lines that do not parse are skipped.
pub fn read(layout: &Layout) -> Result<Vec<Event>> {
    let filter = crate::journal::Filter {
        kind: Some(crate::journal::EventType::Agent),
        since_ms: None,
    };
    Ok(crate::journal::read(layout, &filter)?
        .into_iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect())
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What the decision saw, for the event.
pub struct Seen<'a> {
    pub sample: &'a Sample,
    pub breaches: &'a [Breach],
    pub priority: crate::config::Priority,
    pub usage_bytes: u64,
    pub request_bytes: u64,
    pub zone_psi_full_avg10: Option<f64>,
}

fn priority_name(p: crate::config::Priority) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn signals_json(s: &Sample) -> serde_json::Value {
    serde_json::json!({
        "available_pct": s.values[0],
        "swap_used_pct": s.values[1],
        "swap_in_pages_per_s": s.values[2],
        "swap_out_pages_per_s": s.values[3],
        "psi_full_avg10": s.values[4],
    })
}

/// The event of an `action` taken on `zone_name` under pressure at `done` (ms): what
/// the agent saw of it; the action's own figures and outcome are the caller's to fill.
fn under_pressure(action: &str, zone_name: &str, reason: &str, seen: &Seen, done: u64) -> Event {
    Event {
        time_ms: done,
        action: action.into(),
        zone: zone_name.into(),
        reason: reason.into(),
        priority: Some(priority_name(seen.priority)),
        usage_bytes: Some(seen.usage_bytes),
        request_bytes: Some(seen.request_bytes),
        zone_psi_full_avg10: seen.zone_psi_full_avg10,
        signals: signals_json(seen.sample),
        breaches: serde_json::to_value(seen.breaches).unwrap_or_default(),
        graceful: None,
        latency_ms: None,
        halt_ms: None,
        suspend_ms: None,
        resident_after: None,
        error: None,
    }
}

/// Evict `zone` and record the event (also when the halt failed).
pub fn evict(
    ctx: &Context,
    zone_name: &str,
    reason: &str,
    timeout: Duration,
    seen: &Seen,
) -> Result<Event> {
    let t0 = Instant::now();
    let result = zone::evict(ctx, zone_name, reason, timeout);
    let halt_ms = t0.elapsed().as_millis() as u64;
    let done = now_ms();
    let active_since = seen.breaches.iter().map(|b| b.active_since_ms).min();
    let mut e = under_pressure("evict", zone_name, reason, seen, done);
    e.halt_ms = Some(halt_ms);
    match &result {
        Ok(Some(graceful)) => {
            e.graceful = Some(*graceful);
            e.latency_ms = active_since.map(|a| done.saturating_sub(a));
        }
        Ok(None) => e.error = Some("the zone was no longer running".into()),
        Err(err) => e.error = Some(err.to_string()),
    }
    // The eviction is done whether or not it can be logged (a full state filesystem is
    // when evicting matters most): a failed append is reported, not the eviction's error.
    if let Err(err) = record(&ctx.layout, &e) {
        eprintln!("warren: agent: zone '{zone_name}': evicted, but not logged: {err}");
    }
    result.map(|_| e)
}

/// Suspend `zone` (docs/suspend.md) and record the event (also when it failed).
pub fn suspend(ctx: &Context, zone_name: &str, reason: &str, seen: &Seen) -> Result<Event> {
    let t0 = Instant::now();
    let result = zone::suspend(ctx, zone_name);
    let took = t0.elapsed().as_millis() as u64;
    let done = now_ms();
    let active_since = seen.breaches.iter().map(|b| b.active_since_ms).min();
    let mut e = under_pressure("suspend", zone_name, reason, seen, done);
    e.suspend_ms = Some(took);
    match &result {
        Ok((zone::Outcome::Done, r)) => {
            e.resident_after = Some(r.resident_after);
            e.latency_ms = active_since.map(|a| done.saturating_sub(a));
        }
        Ok((zone::Outcome::AlreadyDone(why), _)) => e.error = Some(why.to_string()),
        Err(err) => e.error = Some(err.to_string()),
    }
    if let Err(err) = record(&ctx.layout, &e) {
        eprintln!("warren: agent: zone '{zone_name}': suspended, but not logged: {err}");
    }
    result.map(|_| e)
}

impl Event {
    /// An event of the agent's own, not chosen under pressure (a restart, a wake): no
    /// zone sample, no signals; `error` when the action failed.
    pub fn plain(action: &str, zone: &str, reason: String, error: Option<String>) -> Event {
        Event {
            time_ms: now_ms(),
            action: action.into(),
            zone: zone.into(),
            reason,
            priority: None,
            usage_bytes: None,
            request_bytes: None,
            zone_psi_full_avg10: None,
            signals: serde_json::Value::Null,
            breaches: serde_json::Value::Null,
            graceful: None,
            latency_ms: None,
            halt_ms: None,
            suspend_ms: None,
            resident_after: None,
            error,
        }
    }
}

/// Boot an evicted zone again and record it.
pub fn restart(ctx: &Context, zone_name: &str, calm_for_ms: u64) -> Result<Event> {
    let result = zone::boot(ctx, zone_name);
    let e = Event::plain(
        "restart",
        zone_name,
        format!(
            "pressure below every threshold for {:.0} s",
            calm_for_ms as f64 / 1000.0
        ),
        result.as_ref().err().map(|e| e.to_string()),
    );
    record(&ctx.layout, &e)?;
    result.map(|_| e)
}
