//! `GET /1.0/events`: Server-Sent Events from the state root's journal (the same file
//! and parser as `warren events --follow`, [`warren::journal`]).
//!
//! Each event's SSE id is a cursor `TIME_MS.N`: the N-th event (from 0) of the journal
//! written in that millisecond. `?since=` takes a cursor, or any `warren events
//! --since` form (`10m`, a UTC time); the `Last-Event-ID` header (an SSE client's
//! reconnect) takes precedence. Without either, the stream starts with what is appended
//! from now on. Filters: `zone`, `type` (lifecycle, agent, config). Ordinals are
//! counted over every event, before the filters, so a cursor means the same to any
//! filter.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;
use warren::journal::{self, Entry, EventType, Filter};

use crate::error::{ApiError, ApiResult};
use crate::state::Shared;

#[derive(Deserialize)]
pub struct EventsQuery {
    zone: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    since: Option<String>,
}

/// Where a stream starts: strictly after event `ordinal` of millisecond `time_ms`, or
/// at `time_ms` itself (`ordinal` None).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub time_ms: u64,
    pub ordinal: Option<u64>,
}

/// Parse `since`: a cursor `TIME_MS.N`, else a `--since` form. Pure given `now_ms`.
pub fn parse_cursor(s: &str, now_ms: u64) -> warren::Result<Cursor> {
    if let Some((t, n)) = s.split_once('.') {
        if let (Ok(time_ms), Ok(n)) = (t.parse(), n.parse()) {
            return Ok(Cursor {
                time_ms,
                ordinal: Some(n),
            });
        }
    }
    Ok(Cursor {
        time_ms: journal::parse_since(s, now_ms)?,
        ordinal: None,
    })
}

/// Numbers events as cursors, in journal order.
#[derive(Default)]
struct Numbering {
    last: Option<(u64, u64)>,
}

impl Numbering {
    fn next(&mut self, e: &Entry) -> (u64, u64) {
        let n = match self.last {
            Some((t, n)) if t == e.time_ms => n + 1,
            _ => 0,
        };
        self.last = Some((e.time_ms, n));
        (e.time_ms, n)
    }
}

/// Whether the stream sends event `e` numbered `id`. Pure.
fn wanted(
    e: &Entry,
    id: (u64, u64),
    zone: Option<&str>,
    kind: Option<EventType>,
    from: Option<Cursor>,
) -> bool {
    let after = match from {
        None => true,
        Some(Cursor {
            time_ms,
            ordinal: None,
        }) => id.0 >= time_ms,
        Some(Cursor {
            time_ms,
            ordinal: Some(n),
        }) => id > (time_ms, n),
    };
    after && zone.is_none_or(|z| e.zone == z) && kind.is_none_or(|k| e.kind == k)
}

fn sse(e: &Entry, id: (u64, u64)) -> Event {
    Event::default()
        .id(format!("{}.{}", id.0, id.1))
        .event(match e.kind {
            EventType::Lifecycle => "lifecycle",
            EventType::Agent => "agent",
            EventType::Config => "config",
        })
        .data(serde_json::to_string(e).expect("events serialise"))
}

pub async fn stream(
    State(app): State<Shared>,
    headers: HeaderMap,
    Query(q): Query<EventsQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let kind = q
        .kind
        .as_deref()
        .map(|k| k.parse::<EventType>())
        .transpose()
        .map_err(|e| ApiError::invalid("type", format!("type {e}")))?;
    let since = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or(q.since);
    let from = since
        .as_deref()
        .map(|s| parse_cursor(s, journal::now_ms()))
        .transpose()
        .map_err(|e| {
            let mut a = ApiError::from_warren(&e);
            a.field = Some("since".into());
            a
        })?;
    let zone = q.zone;
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(256);
    let layout = app.context().layout;
    tokio::task::spawn_blocking(move || {
        let mut numbering = Numbering::default();
        let z = zone.as_deref();
        if let Some(c) = from {
            let past = journal::read(
                &layout,
                &Filter {
                    kind: None,
                    since_ms: Some(c.time_ms),
                },
            )
            .unwrap_or_default();
            for e in &past {
                let id = numbering.next(e);
                if wanted(e, id, z, kind, from) && tx.blocking_send(sse(e, id)).is_err() {
                    return;
                }
            }
        }
        let _ = journal::follow_while(
            &layout,
            &Filter::default(),
            || !tx.is_closed(),
            |e| {
                let id = numbering.next(e);
                !wanted(e, id, z, kind, None) || tx.blocking_send(sse(e, id)).is_ok()
            },
        );
    });
    let s = tokio_stream::wrappers::ReceiverStream::new(rx);
    let s = futures_util::StreamExt::map(s, Ok);
    Ok(Sse::new(s).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(t: u64, zone: &str) -> Entry {
        Entry {
            time_ms: t,
            kind: EventType::Lifecycle,
            action: "booted".into(),
            zone: zone.into(),
            detail: Default::default(),
        }
    }

    #[test]
    fn a_cursor_resumes_after_the_event_it_names() {
        let c = parse_cursor("1700.1", 0).expect("a cursor");
        let mut n = Numbering::default();
        let evs = [
            entry(1700, "a"),
            entry(1700, "b"),
            entry(1700, "c"),
            entry(1701, "d"),
        ];
        let sent: Vec<&str> = evs
            .iter()
            .filter(|e| wanted(e, n.next(e), None, None, Some(c)))
            .map(|e| e.zone.as_str())
            .collect();
        assert_eq!(sent, ["c", "d"]);
    }

    #[test]
    fn filters_apply_after_numbering() {
        let mut n = Numbering::default();
        let a = entry(5, "a");
        let b = entry(5, "b");
        assert!(!wanted(&a, n.next(&a), Some("b"), None, None));
        assert_eq!(n.next(&b), (5, 1));
        assert!(parse_cursor("10m", 3_600_000).is_ok_and(|c| c.time_ms == 3_000_000));
        assert!(parse_cursor("yesterday-ish", 0).is_err());
    }
}
