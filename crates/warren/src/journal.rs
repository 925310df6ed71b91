//! The one event journal of a state root: `<root>/events.jsonl`, one JSON object a line.
//!
//! Every change is one line: lifecycle (`created`, `installed`, `cloned`, `booted`,
//! `halted`, `exited`, `oom`, `evicted`, `uninstalled`, `deleted`), `config` (`config-changed`,
//! with the keys and where they went) and `agent` (`evict`, `restart`, written by
//! [`crate::agent::act`]). Each line has `time_ms`, `type`, `action` and `zone`; the
//! rest depends on the action. A line is one `write(2)` in append mode, so concurrent
//! writers never interleave. Bounded: past [`ROTATE_AT`] the file is renamed to
//! `events.jsonl.1` (the previous one is dropped) under `locks/journal-events.lock`,
//! so the journal holds at most twice that. Lines written by an older warren have no
//! `type`: they are the agent's. `warren events` reads it, `--follow` polls it.
//!
//! Recording is best effort for the verbs: a journal that cannot be written never
//! fails a boot or a halt (the reason goes to stderr).

use std::fs::OpenOptions;
use std::io::{Read, Seek, Write};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::layout::Layout;

/// Size past which the journal is rotated (4 MiB, some 15,000 events).
pub const ROTATE_AT: u64 = 4 << 20;

/// The kinds of event (`--type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    Lifecycle,
    #[default]
    Agent,
    Config,
}

impl std::str::FromStr for EventType {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "lifecycle" => Ok(EventType::Lifecycle),
            "agent" => Ok(EventType::Agent),
            "config" => Ok(EventType::Config),
            _ => Err(format!("{s:?}: expected lifecycle, agent or config")),
        }
    }
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Unix time in milliseconds.
    pub time_ms: u64,
    /// A line without one was written by the agent of an older warren.
    #[serde(rename = "type", default)]
    pub kind: EventType,
    pub action: String,
    pub zone: String,
    /// The action's own fields.
    #[serde(flatten)]
    pub detail: serde_json::Map<String, serde_json::Value>,
}

pub fn path(layout: &Layout) -> PathBuf {
    layout.root().join("events.jsonl")
}

fn rotated(layout: &Layout) -> PathBuf {
    layout.root().join("events.jsonl.1")
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Append one JSON object (it gets `time_ms` and `type` if it lacks them).
pub fn append(layout: &Layout, kind: EventType, mut value: serde_json::Value) -> Result<()> {
    if let Some(o) = value.as_object_mut() {
        o.entry("time_ms").or_insert(now_ms().into());
        o.entry("type")
            .or_insert(serde_json::to_value(kind).expect("a name"));
    }
    let p = path(layout);
    if std::fs::metadata(&p).is_ok_and(|m| m.len() >= ROTATE_AT) {
        let _lock = crate::lock::exclusive(layout, "journal", "events")?;
        // Checked again under the lock: another writer may have rotated it.
        if std::fs::metadata(&p).is_ok_and(|m| m.len() >= ROTATE_AT) {
            std::fs::rename(&p, rotated(layout)).ctx(|| format!("rotating {}", p.display()))?;
        }
    }
    let mut line = serde_json::to_string(&value).expect("events serialise");
    line.push('\n');
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .ctx(|| format!("appending to {}", p.display()))
}

/// Record an event of a verb, best effort (see the module doc).
pub fn note(layout: &Layout, kind: EventType, action: &str, zone: &str, detail: serde_json::Value) {
    let mut v = serde_json::json!({ "action": action, "zone": zone });
    if let (Some(o), serde_json::Value::Object(d)) = (v.as_object_mut(), detail) {
        o.extend(d);
    }
    if let Err(e) = append(layout, kind, v) {
        eprintln!("warren: zone '{zone}': the event '{action}' was not journaled: {e}");
    }
}

/// What `warren events` shows.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub kind: Option<EventType>,
    /// Unix milliseconds: only events at or after it.
    pub since_ms: Option<u64>,
}

impl Filter {
    pub fn wants(&self, e: &Entry) -> bool {
        self.kind.is_none_or(|k| k == e.kind) && self.since_ms.is_none_or(|s| e.time_ms >= s)
    }
}

/// The `type` markers of every kind but `want`, as warren writes them (compact JSON).
fn other_markers(want: EventType) -> Vec<&'static str> {
    [
        (EventType::Lifecycle, r#""type":"lifecycle""#),
        (EventType::Agent, r#""type":"agent""#),
        (EventType::Config, r#""type":"config""#),
    ]
    .into_iter()
    .filter(|(k, _)| *k != want)
    .map(|(_, m)| m)
    .collect()
}

fn parse_lines(text: &str, filter: &Filter) -> Vec<Entry> {
    // A read of one kind skips the other kinds' lines before parsing them (a full
    // journal is some 15,000 lines; `warren metrics` reads the agent's at each scrape).
    // A line marked in another spelling is parsed and filtered as usual.
    let skip = filter.kind.map(other_markers).unwrap_or_default();
    text.lines()
        .filter(|l| !skip.iter().any(|m| l.contains(m)))
        .filter_map(|l| serde_json::from_str::<Entry>(l).ok())
        .filter(|e| filter.wants(e))
        .collect()
}

fn read_file(p: &std::path::Path) -> Result<String> {
    // An older warren did not rotate: its file may be far past ROTATE_AT.
    match crate::fsutil::read_bounded(p, crate::agent::act::MAX_EVENTS_FILE) {
        Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e).ctx(|| {
            format!(
                "reading {} (move it aside and warren starts a new one)",
                p.display()
            )
        }),
    }
}

/// Every recorded event `filter` wants, oldest first (the rotated file, then the
/// current one); lines that do not parse are skipped.
pub fn read(layout: &Layout, filter: &Filter) -> Result<Vec<Entry>> {
    let mut text = read_file(&rotated(layout))?;
    text.push_str(&read_file(&path(layout))?);
    Ok(parse_lines(&text, filter))
}

/// Print what `filter` wants as it is appended, with `emit`, until `emit` says stop
/// (returns false). Polls every 100 ms; a rotation is followed into the new file.
pub fn follow(layout: &Layout, filter: &Filter, emit: impl FnMut(&Entry) -> bool) -> Result<()> {
    follow_while(layout, filter, || true, emit)
}

/// [`follow`] that also ends when `alive` says so, checked at every poll (the daemon's
/// event stream: its client may leave while nothing is appended).
pub fn follow_while(
    layout: &Layout,
    filter: &Filter,
    alive: impl Fn() -> bool,
    mut emit: impl FnMut(&Entry) -> bool,
) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let p = path(layout);
    let mut at = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
    let mut inode = std::fs::metadata(&p).map(|m| m.ino()).unwrap_or(0);
    let mut partial = String::new();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        if !alive() {
            return Ok(());
        }
        let Ok(meta) = std::fs::metadata(&p) else {
            continue;
        };
        if meta.ino() != inode || meta.len() < at {
            inode = meta.ino();
            at = 0;
            partial.clear();
        }
        if meta.len() == at {
            continue;
        }
        let mut f = std::fs::File::open(&p).ctx(|| format!("reading {}", p.display()))?;
        f.seek(std::io::SeekFrom::Start(at))
            .ctx(|| format!("reading {}", p.display()))?;
        let mut buf = Vec::new();
        f.take(ROTATE_AT)
            .read_to_end(&mut buf)
            .ctx(|| format!("reading {}", p.display()))?;
        at += buf.len() as u64;
        partial.push_str(&String::from_utf8_lossy(&buf));
        let complete = match partial.rfind('\n') {
            Some(i) => partial.drain(..=i).collect::<String>(),
            None => continue,
        };
        for e in parse_lines(&complete, filter) {
            if !emit(&e) {
                return Ok(());
            }
        }
    }
}

/// `--since`: a duration back from now (`30s`, `10m`, `2h`, `1d`), Unix seconds, or
/// a UTC time `YYYY-MM-DDTHH:MM:SS[Z]` / `YYYY-MM-DD`; Unix milliseconds. Pure given `now_ms`.
pub fn parse_since(s: &str, now_ms: u64) -> Result<u64> {
    let bad = || {
        Error::Invalid(format!(
            "--since {s:?}: give a duration back from now (30s, 10m, 2h, 1d), Unix seconds, or a UTC time such as 2026-12-03T20:00:00Z"
        ))
    };
    let s = s.trim();
    if let Some(unit) = s.chars().last().filter(|c| "smhd".contains(*c)) {
        if let Ok(n) = s[..s.len() - 1].parse::<u64>() {
            let secs = match unit {
                's' => n,
                'm' => n * 60,
                'h' => n * 3600,
                _ => n * 86400,
            };
            return Ok(now_ms.saturating_sub(secs * 1000));
        }
    }
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n * 1000);
    }
    let t = s.trim_end_matches('Z');
    let (date, time) = t.split_once('T').unwrap_or((t, "00:00:00"));
    let num = |x: &str| x.parse::<i64>().map_err(|_| bad());
    let d: Vec<&str> = date.split('-').collect();
    let h: Vec<&str> = time.split(':').collect();
    if d.len() != 3 || h.len() != 3 {
        return Err(bad());
    }
    let (y, mo, da) = (num(d[0])?, num(d[1])?, num(d[2])?);
    let (hh, mm, ss) = (num(h[0])?, num(h[1])?, num(h[2])?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || hh > 23 || mm > 59 || ss > 60 {
        return Err(bad());
    }
    let days = crate::clock::days_from_civil(y, mo, da);
    let secs = days * 86400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs).map(|s| s * 1000).map_err(|_| bad())
}

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn iso_utc(ms: u64) -> String {
    let (y, m, d, h, mi, s) = crate::clock::civil(ms / 1000);
    format!(
        "{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:03}Z",
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_reads_durations_seconds_and_utc_times() {
        let now = 1_800_000_000_000;
        assert_eq!(parse_since("10m", now).unwrap(), now - 600_000);
        assert_eq!(parse_since("2h", now).unwrap(), now - 7_200_000);
        assert_eq!(parse_since("1700000000", now).unwrap(), 1_700_000_000_000);
        assert_eq!(
            parse_since("2023-11-14T22:13:20Z", now).unwrap(),
            1_700_000_000_000
        );
        assert_eq!(parse_since("1970-01-02", now).unwrap(), 86_400_000);
        assert!(parse_since("yesterday", now).is_err());
        assert!(parse_since("2023-13-01", now).is_err());
    }

    #[test]
    fn iso_utc_inverts_parse_since() {
        assert_eq!(iso_utc(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn a_line_without_type_is_the_agents_and_filters_apply() {
        let text = r#"{"time_ms":5,"action":"evict","zone":"a","reason":"psi"}
{"time_ms":9,"type":"lifecycle","action":"booted","zone":"b","boot_ms":3.5}
not json
"#;
        let all = parse_lines(text, &Filter::default());
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].kind, EventType::Agent);
        assert_eq!(all[0].detail["reason"], "psi");
        let f = Filter {
            kind: Some(EventType::Lifecycle),
            since_ms: Some(6),
        };
        let got = parse_lines(text, &f);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].zone, "b");
    }
}
