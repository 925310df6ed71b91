//! `warren suspend` / `warren resume`: the text and `--json` of the verbs
//! (`zone::suspend`, `zone::resume`; docs/suspend.md).

use serde::Serialize;

use super::args::Targets;
use super::{each, output, targets};
use crate::error::Result;
use crate::state::ZoneState;
use crate::zone::{self, Context, Outcome, ResumeReport, SuspendReport};

/// One zone's result: the verb result fields of every changing verb plus what it did.
#[derive(Serialize)]
struct Row<R: Serialize> {
    zone: String,
    verb: &'static str,
    changed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    done: Option<R>,
}

impl<R: Serialize> Row<R> {
    fn new(zone: &str, verb: &'static str, o: &Outcome, r: R) -> Row<R> {
        Row {
            zone: zone.into(),
            verb,
            changed: *o == Outcome::Done,
            note: match o {
                Outcome::Done => None,
                Outcome::AlreadyDone(why) => Some(why.to_string()),
            },
            done: (*o == Outcome::Done).then_some(r),
        }
    }
}

fn print<R: Serialize>(rows: &[Row<R>], json: bool, ok: bool) {
    match (json, rows) {
        (false, _) => {}
        (true, []) if ok => output::json(&rows),
        (true, []) => {}
        (true, [one]) => output::json(one),
        (true, all) => output::json(&all),
    }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
}

pub fn suspend(ctx: &Context, t: &Targets, json: bool) -> Result<()> {
    let zones = targets(ctx, t, |s| s == ZoneState::Running)?;
    let mut rows = Vec::new();
    let r = each(&zones, |z| {
        let (o, r) = zone::suspend(ctx, z)?;
        if !json {
            match &o {
                Outcome::AlreadyDone(why) => println!("zone '{z}' {why}; nothing to do"),
                Outcome::Done => {
                    println!(
                        "zone '{z}' suspended: frozen in {:.1} ms, paged out in {:.0} ms; resident {} → {}, {} in swap",
                        r.freeze_ms,
                        r.pageout_ms,
                        mib(r.resident_before),
                        mib(r.resident_after),
                        mib(r.swapped)
                    );
                    if !r.host_swap {
                        eprintln!("warren: zone '{z}': the host has no swap, so only file pages were reclaimed and its anonymous memory stays resident; 'warren swap enable --size SIZE' adds swap");
                    }
                    for (pid, why) in &r.pageout_failed {
                        eprintln!("warren: zone '{z}': process {pid}: its memory was not paged out: {why}");
                    }
                }
            }
        }
        rows.push(Row::<SuspendReport>::new(z, "suspend", &o, r));
        Ok(())
    });
    print(&rows, json, r.is_ok());
    r
}

pub fn resume(ctx: &Context, t: &Targets, prefetch: bool, json: bool) -> Result<()> {
    let zones = targets(ctx, t, |s| s == ZoneState::Suspended)?;
    let mut rows = Vec::new();
    let r = each(&zones, |z| {
        let (o, r) = zone::resume_with(ctx, z, prefetch)?;
        for w in &r.warnings {
            eprintln!("warren: zone '{z}': {w}");
        }
        if !json {
            match &o {
                Outcome::AlreadyDone(why) => println!("zone '{z}' {why}; nothing to do"),
                Outcome::Done => println!(
                    "zone '{z}' resumed in {:.1} ms (suspended {} s){}",
                    r.thaw_ms,
                    r.suspended_s,
                    r.prefetch_ms.map_or(String::new(), |p| format!(
                        "; {:.1} MiB prefetched in {p:.1} ms",
                        r.prefetched.unwrap_or(0) as f64 / (1u64 << 20) as f64
                    ))
                ),
            }
        }
        rows.push(Row::<ResumeReport>::new(z, "resume", &o, r));
        Ok(())
    });
    print(&rows, json, r.is_ok());
    r
}
