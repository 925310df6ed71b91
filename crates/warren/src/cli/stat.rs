//! `warren stat` and `warren memstat`: their help texts, the live refresh loop and the
//! printing; the figures come from [`crate::stat`].

use std::io::{IsTerminal, Write};
use std::time::Duration;

use super::output;
use crate::error::{Error, Result};
use crate::stat;
use crate::zone::Context;

pub const STAT_HELP: &str = "\
Without --interval, CPU % is measured over 0.5 s (two samples); with --interval S, over
each S seconds (the first report waits S). CPU % is of one CPU: 200 = two CPUs busy.
MEM is what the zone's memory cgroup is charged (anon + page cache + kernel); CACHE
includes shmem. TASKS is pids.current/pids.max (processes and threads). PSI is memory
pressure 'some/full avg10' (%); on cgroup v1 it is the host's, marked '*'. DISK is the
zone's private layer. [system] is what no zone accounts for. '-': not reported by this
kernel. --json prints one object per report, one per line (docs/stat-schema.md).

Examples:
  warren stat                          # every booted zone, once
  warren stat web1 db1 --pss           # with PSS/USS (slow)
  warren stat --interval 2 --sort mem  # live, like prstat -Z
  warren stat web1 --interval 2 --count 1 --json";

pub const MEMSTAT_HELP: &str = "\
HOST rows are /proc/meminfo and add up to the total; ZONES and PER ZONE are the sums
and averages of what the booted zones' cgroups are charged ('-': not reported). 'mapped
by zones' is the sum of Pss_File over zone processes: the template and host files they
map, each page shared out among its mappers. --json: docs/stat-schema.md.";

pub fn stat(
    ctx: &Context,
    json: bool,
    opts: stat::Options,
    interval: Option<f64>,
    count: Option<u64>,
) -> Result<()> {
    let print = |r: &stat::StatReport| {
        if json {
            println!(
                "{}",
                serde_json::to_string(r).expect("API objects serialise")
            );
        } else {
            print!("{}", stat::render::stat(r));
        }
        let _ = std::io::stdout().flush();
    };
    let mut sampler = stat::Sampler::new(opts);
    let Some(secs) = interval else {
        print(&sampler.snapshot(ctx, stat::SNAPSHOT_WINDOW)?);
        return Ok(());
    };
    if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
        return Err(Error::Invalid(format!(
            "--interval {secs}: expected seconds above 0, such as 2 or 0.5"
        )));
    }
    if count == Some(0) {
        return Err(Error::Invalid(
            "--count must be at least 1: give how many samples to take, e.g. --count 5".into(),
        ));
    }
    let redraw = !json && std::io::stdout().is_terminal();
    let mut n = 0;
    loop {
        let report = sampler.tick(ctx, Duration::from_secs_f64(secs))?;
        if redraw {
            print!("\x1b[H\x1b[2J");
        } else if n > 0 && !json {
            println!();
        }
        print(&report);
        n += 1;
        if count.is_some_and(|c| n >= c) {
            return Ok(());
        }
    }
}

/// `warren memstat`.
pub fn memstat(ctx: &Context, json: bool) -> Result<()> {
    let m = stat::memstat::memstat(ctx)?;
    if json {
        output::json(&m);
    } else {
        print!("{}", stat::render::memstat(&m));
    }
    Ok(())
}
