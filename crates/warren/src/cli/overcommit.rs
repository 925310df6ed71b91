//! `warren swap` and `warren agent`: parsing helpers, help texts and
//! printing; the work is in [`crate::swap`] and [`crate::agent`].

use std::path::PathBuf;

use clap::Subcommand;

use super::output;
use crate::agent::{self, AgentConfig};
use crate::config::{format_size, parse_size};
use crate::error::{Error, Result};
use crate::swap;
use crate::zone::Context;

#[derive(Subcommand, Debug)]
pub enum SwapCmd {
    /// Create and enable warren's swap (a file, or zram), and set vm.swappiness.
    #[command(after_help = "\
The swap file is written with real zeroed blocks (never sparse), mode 0600, with a swap
header written by warren (no mkswap needed), then enabled with swapon(2). Filesystems
that cannot hold swap (tmpfs, overlayfs, nfs, btrfs without NOCOW ...) are refused with
the fix. --zram uses /dev/zram0 (compressed RAM) if it exists and is unused (exit 7 if
not). What warren enabled is recorded in <root>/swap/state.json; 'swap disable' turns
off only that, and puts vm.swappiness back if warren changed it.

Examples:
  warren swap enable --size 4G
  warren swap enable --size 2G --file /srv/swapfile --swappiness 100
  warren swap enable --size 1G --zram
  warren swap status --json
  warren swap disable")]
    Enable {
        /// Size of the swap area, e.g. 512M or 4G.
        #[arg(long, value_name = "SIZE")]
        size: String,
        /// Where the swap file goes [default: <root>/swap/swapfile].
        #[arg(long, value_name = "PATH", conflicts_with = "zram")]
        file: Option<PathBuf>,
        /// Use the zram0 device (compressed RAM) instead of a file.
        #[arg(long)]
        zram: bool,
        /// zram's compressor (one of /sys/block/zram0/comp_algorithm, e.g. lz4 or
        /// lzo-rle) [default: the kernel's]. docs/suspend.md, "Warm again", says which wins.
        #[arg(long, value_name = "ALG", requires = "zram")]
        zram_algorithm: Option<String>,
        /// vm.swappiness to set while warren's swap is on (0-200).
        #[arg(long, default_value_t = 60)]
        swappiness: u64,
    },
    /// Turn off warren's swap, remove it, restore vm.swappiness.
    Disable,
    /// Swap areas on the host, and which one is warren's.
    Status,
}

pub fn swap_cmd(ctx: &Context, json: bool, c: SwapCmd) -> Result<()> {
    let proc_ = &ctx.host.proc;
    match c {
        SwapCmd::Enable {
            size,
            file,
            zram,
            zram_algorithm,
            swappiness,
        } => {
            let size = parse_size(&size).ok_or_else(|| {
                Error::Invalid(format!(
                    "--size {size:?}: expected a size such as 512M or 4G"
                ))
            })?;
            ctx.require_root()?;
            let o = swap::EnableOptions {
                size,
                file,
                zram,
                zram_algorithm,
                swappiness,
            };
            let (r, already) = swap::enable(&ctx.layout, proc_, &ctx.host.sys, &o)?;
            if json {
                output::json(&r);
            } else if already {
                println!(
                    "warren's swap is already on ({}, {}); nothing to do",
                    r.path.display(),
                    format_size(r.size_bytes)
                );
            } else {
                println!(
                    "swap on: {} ({}){}",
                    r.path.display(),
                    format_size(r.size_bytes),
                    match (r.swappiness_before, r.swappiness_set) {
                        (Some(b), Some(s)) => format!(", vm.swappiness {b} -> {s}"),
                        _ => String::new(),
                    }
                );
            }
        }
        SwapCmd::Disable => {
            ctx.require_root()?;
            match swap::disable(&ctx.layout, proc_, &ctx.host.sys)? {
                Some(r) if !json => println!(
                    "swap off: {} ({})",
                    r.path.display(),
                    match r.kind {
                        swap::SwapKind::File => "file removed",
                        swap::SwapKind::Zram => "zram0 reset",
                    }
                ),
                Some(r) => output::json(&r),
                None if !json => println!("warren has no swap on in this root; nothing to do"),
                None => output::json(&serde_json::Value::Null),
            }
        }
        SwapCmd::Status => {
            let s = swap::status(&ctx.layout, proc_)?;
            if json {
                output::json(&s);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = s
                .areas
                .iter()
                .map(|a| {
                    let mine = s
                        .warren
                        .as_ref()
                        .is_some_and(|w| w.path.as_os_str() == a.path.as_str());
                    vec![
                        a.path.clone(),
                        a.kind.clone(),
                        format_size(a.size_bytes),
                        format_size(a.used_bytes),
                        a.priority.to_string(),
                        if mine { "yes" } else { "no" }.into(),
                    ]
                })
                .collect();
            if rows.is_empty() {
                println!("no swap is on");
            } else {
                output::table(&["AREA", "TYPE", "SIZE", "USED", "PRIO", "WARREN"], &rows);
            }
            println!(
                "swap total {}, free {}; vm.swappiness {}",
                format_size(s.swap_total_bytes),
                format_size(s.swap_free_bytes),
                s.swappiness.map_or("-".into(), |v| v.to_string())
            );
        }
    }
    Ok(())
}

/// `warren agent --help`: what it does, the defaults, examples.
pub fn agent_help() -> String {
    format!(
        "\
Samples every interval-ms: MemAvailable, swap used and total, swap-in/out pages/s (from
/proc/vmstat over window-s), memory PSI full avg10 (host, or the watched cgroup's on v2),
and, when an eviction is due, each zone's anonymous memory + swap against its
memory.request. A threshold becomes active after staying crossed for its grace-s and
stays active until its clear level (hysteresis). While one is active the agent halts one
zone (SIGTERM, then kill after halt-timeout-s): best-effort before normal, critical only
with evict-critical = true and when nothing lower runs; within a class the zone most
above its request, then the youngest. One eviction per cooldown-s. Each is recorded in
<root>/events.jsonl ('warren events') and in the zone's state ('warren list' shows
'evicted: <reason>' until its next boot). See docs/overcommit.md.

--config FILE overrides any of these defaults:

{}
Examples:
  warren agent --dry-run                  # log what it would evict, do nothing
  warren agent --config /etc/warren/agent.toml
  warren agent --watch group --once       # one window against warren's zone cgroup",
        agent::config::DEFAULTS_TOML
    )
}

pub fn agent_cmd(
    ctx: &Context,
    json: bool,
    config: Option<PathBuf>,
    watch: Option<String>,
    dry_run: bool,
    once: bool,
) -> Result<()> {
    let mut cfg = match &config {
        None => AgentConfig::defaults(),
        Some(p) => agent::config::load_file(p, "--config")?,
    };
    if let Some(w) = watch {
        cfg.watch = w;
    }
    agent::run(
        ctx,
        &cfg,
        &agent::RunOptions {
            dry_run,
            once,
            json,
        },
    )
}
