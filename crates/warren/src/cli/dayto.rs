//! Day-2 verbs: `warren logs` (the console), `warren events` (the journal), what
//! `config set` answers, and the result object every changing verb prints with `--json`.

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::output;
use crate::error::{Error, IoContext, Result};
use crate::journal::{self, Entry, EventType, Filter};
use crate::runtime::console;
use crate::zone::{self, ConfigChange, Context};

pub(super) const EVENTS_HELP: &str = "\
Event types and actions:
  lifecycle  created, installed, cloned, booted, halted, exited, oom, uninstalled, deleted
  config     config-changed (the keys, which were applied live, which wait for a reboot)
  agent      evict, restart (the overcommit agent)
One journal per state root, <root>/events.jsonl, rotated to events.jsonl.1 at 4 MiB.
--json prints an array; with --follow one JSON object per line as events happen.

Examples:
  warren events --since 1h
  warren events --follow --type lifecycle
  warren events --json --type agent";

pub(super) const LOGS_HELP: &str = "\
The console is what the zone's init and services write to stdout, stderr and
/dev/console: a capped tmpfs while the zone runs, saved to <zone>/console.log at halt
(the copy before it: console.log.1). Without --since: the running zone's live console,
or the last saved one. Console lines carry no time (the zone writes raw bytes), so
--since T selects whole consoles: the saved copies last written since T, then the live
one.

Examples:
  warren logs web1 --tail 20
  warren logs web1 -f
  warren logs web1 --since 1d";

pub(super) const LIVE_HELP: &str = "\
On a running zone these keys change at once, in its cgroups, and in the config:
max-processes, max-threads, memory.max, memory.swap, memory.request, cpu.shares,
cpu.weight, cpu.max, cpuset. If the kernel refuses one (e.g. memory.max below what the
zone uses and cannot reclaim), nothing is changed. Other keys (disk.max among them: its
image is sized at boot) take effect at the next boot, and the answer names them.

Examples:
  warren config set web1 memory.max=128M cpu.max=0.25
  warren config set web1 --live-only memory.max=1G      # the config keeps its value
  warren config set web1 --next-boot cpu.max=2           # the running zone keeps its";

/// What a changing verb prints with `--json`: one object per zone.
#[derive(Debug, Clone, Serialize)]
pub struct VerbResult {
    pub zone: String,
    pub verb: &'static str,
    /// false when the zone already was where the verb takes it.
    pub changed: bool,
    /// Why nothing was done, or how it was done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_pid: Option<i32>,
    /// halt: init stopped on SIGTERM within the timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graceful: Option<bool>,
    /// clone: the zone it was made from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A zone of several that failed (`boot`, `clone`, `halt`): the error as printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `error`: the exit code that error alone would give.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<u8>,
    /// What the verb says beside its result (done all the same), e.g. a halt whose
    /// agent did not confirm it let go of the zone's sockets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl VerbResult {
    pub fn new(zone: &str, verb: &'static str, outcome: &zone::Outcome) -> VerbResult {
        VerbResult {
            zone: zone.into(),
            verb,
            changed: *outcome == zone::Outcome::Done,
            note: match outcome {
                zone::Outcome::Done => None,
                zone::Outcome::AlreadyDone(why) => Some(why.to_string()),
            },
            boot_ms: None,
            init_pid: None,
            graceful: None,
            source: None,
            error: None,
            exit: None,
            warnings: Vec::new(),
        }
    }
}

/// The results of a verb over several zones: printed at the end, one object for one
/// zone, an array for several (as the verb named them).
#[derive(Default)]
pub struct Results(pub Vec<VerbResult>);

impl Results {
    /// Print them after the verb ran over its zones (`ok`: it failed for none); no
    /// zone at all (`halt --all` with none running) is an empty array.
    pub fn print(&self, json: bool, ok: bool) {
        match (json, self.0.as_slice()) {
            (false, _) => {}
            (true, []) if ok => output::json(&self.0),
            (true, []) => {}
            (true, [one]) => output::json(one),
            (true, all) => output::json(all),
        }
    }
}

/// What `config set` / `unset` / `edit` say.
pub fn config_change(c: &ConfigChange, json: bool) {
    if json {
        output::json(c);
        return;
    }
    let z = &c.zone;
    if c.changed.is_empty() {
        if c.saved {
            println!("zone '{z}': nothing changed");
        } else {
            println!("zone '{z}': the running zone's limits written from its config");
        }
        return;
    }
    if !c.live.is_empty() {
        println!(
            "zone '{z}': {} applied to the running zone{}",
            c.live.join(", "),
            if c.saved {
                " and saved"
            } else {
                " only (config.toml unchanged)"
            }
        );
    }
    if !c.next_boot.is_empty() {
        if c.state >= crate::state::ZoneState::Ready {
            println!(
                "zone '{z}': {} saved; needs a reboot: takes effect at the next boot (the zone is {}; 'warren reboot {z}')",
                c.next_boot.join(", "),
                c.state
            );
        } else {
            println!("zone '{z}': {} saved", c.next_boot.join(", "));
        }
    }
    for n in &c.notes {
        println!("  {n}");
    }
}

pub fn events_cmd(
    ctx: &Context,
    json: bool,
    follow: bool,
    kind: Option<EventType>,
    since: Option<&str>,
) -> Result<()> {
    let filter = Filter {
        kind,
        since_ms: since
            .map(|s| journal::parse_since(s, journal::now_ms()))
            .transpose()?,
    };
    let past = journal::read(&ctx.layout, &filter)?;
    if follow {
        for e in &past {
            print_line(e, json);
        }
        return journal::follow(&ctx.layout, &filter, |e| {
            print_line(e, json);
            // A closed pipe ends it (`warren events -f | head`).
            std::io::stdout().flush().is_ok()
        });
    }
    if json {
        output::json(&past);
    } else if past.is_empty() {
        println!("no events");
    } else {
        let rows: Vec<Vec<String>> = past.iter().map(row).collect();
        output::table(&["TIME", "TYPE", "ACTION", "ZONE", "DETAIL"], &rows);
    }
    Ok(())
}

fn kind_name(k: EventType) -> String {
    serde_json::to_value(k)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn row(e: &Entry) -> Vec<String> {
    let detail: Vec<String> = e
        .detail
        .iter()
        .filter(|(_, v)| !v.is_null() && !matches!(v, serde_json::Value::Object(_)))
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            v => format!("{k}={v}"),
        })
        .collect();
    vec![
        journal::iso_utc(e.time_ms),
        kind_name(e.kind),
        e.action.clone(),
        e.zone.clone(),
        detail.join(" "),
    ]
}

fn print_line(e: &Entry, json: bool) {
    if json {
        println!("{}", serde_json::to_string(e).expect("events serialise"));
    } else {
        println!("{}", row(e).join("  "));
    }
}

/// `warren logs ZONE [-f] [--tail N] [--since T]`.
pub fn logs_cmd(
    ctx: &Context,
    name: &str,
    follow: bool,
    tail: Option<usize>,
    since: Option<&str>,
) -> Result<()> {
    let z = zone::load(ctx, name)?;
    let since_ms = since
        .map(|s| journal::parse_since(s, journal::now_ms()))
        .transpose()?;
    let running = z.state(ctx) == crate::state::ZoneState::Running;
    let live = z
        .runtime
        .as_ref()
        .and_then(|rt| rt.init)
        .filter(|_| running)
        .map(|init| {
            console::open_live(&ctx.host.proc, init).ok_or_else(|| {
                Error::Invalid(format!(
                    "zone '{name}': its live console cannot be opened (its init's stdout is no longer the console, or warren is not root)"
                ))
            })
        })
        .transpose()?;
    let saved: Vec<PathBuf> = [z.dir.join("console.log.1"), z.dir.join("console.log")]
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    let mut files: Vec<PathBuf> = match since_ms {
        Some(t) => saved
            .into_iter()
            .filter(|p| modified_ms(p).is_some_and(|m| m >= t))
            .collect(),
        // The newest console only: the live one, else the last saved.
        None if live.is_some() => Vec::new(),
        None => saved.into_iter().last().into_iter().collect(),
    };
    let mut text = Vec::new();
    for p in files.drain(..) {
        let b = crate::fsutil::read_bounded(&p, console::CONSOLE_MAX)
            .ctx(|| format!("zone '{name}': reading {}", p.display()))?;
        text.extend_from_slice(&b);
    }
    let mut at = 0u64;
    if let Some(f) = &live {
        let mut f = f;
        f.seek(std::io::SeekFrom::Start(0))
            .and_then(|_| f.take(console::CONSOLE_MAX).read_to_end(&mut text))
            .ctx(|| format!("zone '{name}': reading its live console"))?;
        at = f.stream_position().unwrap_or(0);
    }
    let text = String::from_utf8_lossy(&text);
    let shown = match tail {
        Some(n) => crate::runtime::last_lines(&text, n),
        None => text.trim_end_matches('\n').to_string(),
    };
    let mut out = std::io::stdout();
    if !shown.is_empty() {
        let _ = writeln!(out, "{shown}");
    }
    let _ = out.flush();
    if let (true, Some(f)) = (follow, live) {
        follow_console(ctx, &z, f, at);
    }
    Ok(())
}

fn modified_ms(p: &Path) -> Option<u64> {
    let m = std::fs::metadata(p).ok()?.modified().ok()?;
    m.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64)
}

/// Print what is appended to the live console `f` from offset `at` until the zone's
/// init is gone or stdout is closed. Polls every 100 ms.
fn follow_console(ctx: &Context, z: &zone::Zone, mut f: std::fs::File, mut at: u64) {
    let mut out = std::io::stdout();
    loop {
        // Truncated (a `>` redirection onto /dev/console): start again from its top.
        if f.metadata().is_ok_and(|m| m.len() < at) {
            at = 0;
        }
        let mut buf = Vec::new();
        if f.seek(std::io::SeekFrom::Start(at)).is_ok()
            && (&f)
                .take(console::CONSOLE_MAX)
                .read_to_end(&mut buf)
                .is_ok()
            && !buf.is_empty()
        {
            at += buf.len() as u64;
            if out.write_all(&buf).and_then(|_| out.flush()).is_err() {
                return;
            }
        }
        let alive = z
            .runtime
            .as_ref()
            .and_then(|rt| ctx.init_fact(rt))
            .is_some_and(|f| f == crate::state::InitFact::Alive);
        if !alive {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
