//! The command line: parsing (clap), then calls into [`crate::zone`] and friends, then
//! tables for people or `--json` (the API objects) for scripts. No logic of its own.
//!
//! Laid out by idea: the flags and help texts are in `args`, the verbs' dispatch here,
//! the longer handlers beside it (`zonecfg`: template and config, `doctor_cmd`, `bench_cmd`,
//! `listing`: list and info ZONE, `profile_cmd`, `gen`: completions and man pages,
//! `assist`: "did you mean" and who may run what).

mod args;
mod assist;
mod batch;
mod bench_cmd;
mod dayto;
mod doctor_cmd;
mod gen;
mod listing;
mod metrics_cmd;
mod output;
mod overcommit;
mod profile_cmd;
mod snapshot_cmd;
mod stat;
mod suspend_cmd;
mod zonecfg;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};

use crate::doctor::{self, fix, probe, NetPlan, Plan};
use crate::error::{Error, ExitCode, IoContext, Result};
use crate::layout::{HostPaths, Layout, DEFAULT_ROOT};
use crate::stat::SortKey;
use crate::storage::template::{self, Source};
use crate::zone::{self, Context, Outcome};
use crate::{bench, config, demo, host, names, storage};

pub use args::*;
use doctor_cmd::doctor_cmd;
use zonecfg::{config_cmd, template_cmd};

/// Parse the command line, run, and return the process exit code.
pub fn main() -> i32 {
    warren_sys::signal::default_sigpipe();
    // No descriptor the caller left open (without close-on-exec) may reach a zone:
    // flag them all now, before anything forks (docs/isolation.md, "Descriptors").
    if let Err(e) = warren_sys::fds::cloexec_from(3) {
        eprintln!("warren: marking inherited descriptors close-on-exec: {e}");
        return ExitCode::Failure as i32;
    }
    warren_sys::fds::prime_thread_check();
    if let Some(args) = remote_args(&std::env::args().collect::<Vec<_>>()) {
        return remote_exec(args);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if !e.use_stderr() {
                0
            } else if login_verb(std::env::args()) {
                ExitCode::LoginFailed as i32
            } else {
                ExitCode::Usage as i32
            };
        }
    };
    // Only as root: a non-root caller may not learn the zones' names.
    if warren_sys::geteuid() == 0 {
        assist::suggest_from(&cli.root);
    }
    // A login's own failures exit 125 (126, 127), apart from the command's statuses.
    let login = matches!(cli.command, Command::Login { .. } | Command::Shell { .. });
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            output::print_error(&e);
            if login {
                e.login_exit_code() as i32
            } else {
                e.exit_code() as i32
            }
        }
    }
}

/// Whether a command line that failed to parse is a login's (`login`, `exec`,
/// `shell`): its first word that is not an option (nor a global option's value).
fn login_verb(args: impl Iterator<Item = String>) -> bool {
    let mut args = args.skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--root" | "--oci-root" => {
                args.next();
            }
            _ if a.starts_with('-') => {}
            verb => return matches!(verb, "login" | "exec" | "shell"),
        }
    }
    false
}

impl LoginOpts {
    /// The login request these options make with `argv`.
    fn request<'a>(&'a self, argv: &'a [String]) -> crate::runtime::login::Request<'a> {
        use crate::runtime::login::Tty;
        crate::runtime::login::Request {
            argv,
            env: &self.env,
            user: self.user.as_deref(),
            cwd: self.cwd.as_deref(),
            tty: match (self.tty, self.no_tty) {
                (true, _) => Tty::Force,
                (_, true) => Tty::Never,
                _ => Tty::Auto,
            },
        }
    }
}

impl Pipeline {
    /// `--jobs`, else the default for this host's CPUs.
    fn jobs(&self, ctx: &Context) -> usize {
        self.jobs.map_or_else(
            || zone::pipeline::default_jobs(crate::stats::online_cpus(&ctx.host.sys).len()),
            usize::from,
        )
    }
}

fn secs(t: Option<u64>) -> Option<Duration> {
    t.map(Duration::from_secs)
}

/// Run `f` for each zone; print each failure; one error for several.
fn each(zones: &[String], mut f: impl FnMut(&str) -> Result<()>) -> Result<()> {
    if let [one] = zones {
        return f(one);
    }
    let mut failed = 0;
    for z in zones {
        if let Err(e) = f(z) {
            output::print_error(&e);
            failed += 1;
        }
    }
    if failed > 0 {
        return Err(Error::Partial {
            failed,
            total: zones.len(),
        });
    }
    Ok(())
}

/// A verb's result for zone `z` that was done, with its warnings, said on stderr.
fn with_warnings(z: &str, verb: &'static str, warnings: Vec<String>) -> dayto::VerbResult {
    for w in &warnings {
        eprintln!("warren: zone '{z}': {w}");
    }
    let mut v = dayto::VerbResult::new(z, verb, &Outcome::Done);
    v.warnings = warnings;
    v
}

fn say(json: bool, zone: &str, outcome: &Outcome, done: &str) {
    if json {
        return;
    }
    say_text(zone, outcome, done)
}

fn say_text(zone: &str, outcome: &Outcome, done: &str) {
    match outcome {
        Outcome::Done => println!("zone '{zone}' {done}"),
        Outcome::AlreadyDone(why) => println!("zone '{zone}' {why}; nothing to do"),
    }
}

fn targets(
    ctx: &Context,
    t: &Targets,
    want: fn(crate::state::ZoneState) -> bool,
) -> Result<Vec<String>> {
    if !t.all {
        if t.zones.is_empty() {
            return Err(Error::Invalid(
                "name at least one zone, or use --all".into(),
            ));
        }
        return Ok(t.zones.clone());
    }
    Ok(zone::list(ctx)?
        .into_iter()
        .filter(|i| i.state.is_some_and(want))
        .map(|i| i.name)
        .collect())
}

fn run(cli: Cli) -> Result<i32> {
    // gc never hangs: it skips busy zones without waiting, and bounds the waits for
    // the shared locks (id ranges, leases) even when --wait is not given.
    let gc_bound = matches!(cli.command, Command::Gc).then_some(crate::lock::GC_WAIT);
    if let Some(limit) = cli.wait.or(gc_bound) {
        crate::lock::set_wait_limit(limit);
    }
    let layout = Layout::new(cli.root.clone());
    if warren_sys::geteuid() != 0 && assist::needs_root(&cli.command) {
        return Err(Error::NotRoot);
    }
    if warren_sys::geteuid() == 0 {
        layout.secure().ctx(|| {
            format!(
                "restricting the state root {} to root (its directories become 0700)",
                layout.root().display()
            )
        })?;
    }
    let ctx = Context::new(layout, HostPaths::default());
    let json = cli.json;
    match cli.command {
        Command::Template(t) => template_cmd(&ctx, json, t)?,
        Command::Create {
            zone: name,
            template,
            config,
            sets,
            profiles,
        } => {
            let cfg = zone::create_with_profiles(
                &ctx,
                &name,
                template.as_deref(),
                config.as_deref(),
                &sets,
                Some(&profiles),
            )?;
            if json {
                output::json(&cfg);
            } else {
                println!("zone '{name}' configured (template '{}')", cfg.template);
            }
        }
        Command::Config(c) => config_cmd(&ctx, json, c)?,
        Command::Install { zones } => {
            let mut res = dayto::Results::default();
            let r = each(&zones, |z| {
                let o = zone::install(&ctx, z)?;
                say(json, z, &o, "installed");
                res.0.push(dayto::VerbResult::new(z, "install", &o));
                Ok(())
            });
            res.print(json, r.is_ok());
            r?
        }
        Command::Clone {
            src,
            new,
            pipeline,
            snapshot,
        } => {
            let jobs = pipeline.jobs(&ctx);
            let mut res = batch::Batch::new(new.len());
            let line = format!("installed as a clone of '{src}'");
            let failed =
                zone::pipeline::clone_many(&ctx, &src, &new, snapshot.as_deref(), jobs, |z, r| {
                    if let Some(v) = res.add(json, z, "clone", r, &line) {
                        v.source = Some(src.clone());
                    }
                });
            res.finish(json, failed)?
        }
        Command::Boot {
            targets: t,
            autoboot,
            watch,
            pipeline,
        } => {
            let zones = if autoboot {
                zone::boot_autoboot(&ctx)?
            } else {
                targets(&ctx, &t, |s| s == crate::state::ZoneState::Installed)?
            };
            if zones.is_empty() && (autoboot || t.all) && !json {
                println!("no zone to boot");
            }
            let jobs = pipeline.jobs(&ctx);
            let watch = Duration::from_millis(watch);
            let mut res = batch::Batch::new(zones.len());
            let failed = zone::pipeline::boot_many(&ctx, &zones, jobs, watch, |z, r| {
                let line = match &r {
                    Ok(d) => format!("booted in {:.1} ms", d.ms),
                    Err(_) => String::new(),
                };
                res.add(json, z, "boot", r, &line);
            });
            res.finish(json, failed)?
        }
        Command::Halt {
            targets: t,
            timeout,
            pipeline,
        } => {
            let zones = targets(&ctx, &t, |s| s >= crate::state::ZoneState::Ready)?;
            let jobs = pipeline.jobs(&ctx);
            let mut res = batch::Batch::new(zones.len());
            let failed = zone::pipeline::halt_many(&ctx, &zones, jobs, secs(timeout), |z, r| {
                let line = match &r {
                    Ok(d) if d.graceful == Some(false) => {
                        "halted (killed after the stop timeout)".to_string()
                    }
                    _ => "halted".to_string(),
                };
                res.add(json, z, "halt", r, &line);
            });
            res.finish(json, failed)?
        }
        Command::Suspend { targets: t } => suspend_cmd::suspend(&ctx, &t, json)?,
        Command::Resume {
            targets: t,
            prefetch,
        } => suspend_cmd::resume(&ctx, &t, prefetch, json)?,
        Command::Reboot { zones, timeout } => {
            let mut res = dayto::Results::default();
            let r = each(&zones, |z| {
                let warnings = zone::reboot(&ctx, z, secs(timeout))?;
                say(json, z, &Outcome::Done, "rebooted");
                res.0.push(with_warnings(z, "reboot", warnings));
                Ok(())
            });
            res.print(json, r.is_ok());
            r?
        }
        Command::Login {
            zone: z,
            opts,
            command,
        } => return zone::login(&ctx, &z, &opts.request(&command)),
        Command::Shell { zone: z, opts } => return zone::login(&ctx, &z, &opts.request(&[])),
        Command::Cp {
            src,
            dst,
            recursive,
            uid,
            gid,
            mode,
        } => {
            let opts = zone::CpOptions {
                recursive,
                uid,
                gid,
                mode,
            };
            let done = zone::cp(&ctx, &src, &dst, &opts)?;
            if json {
                output::json(&done);
            }
        }
        Command::CpHelper { zone: z, args } => zone::cp_helper(&ctx, &z, &args)?,
        Command::Uninstall { zones } => {
            let mut res = dayto::Results::default();
            let r = each(&zones, |z| {
                let o = zone::uninstall(&ctx, z)?;
                say(json, z, &o, "uninstalled");
                res.0.push(dayto::VerbResult::new(z, "uninstall", &o));
                Ok(())
            });
            res.print(json, r.is_ok());
            r?
        }
        Command::Delete { zones, force } => {
            let mut res = dayto::Results::default();
            let r = each(&zones, |z| {
                let warnings = zone::delete(&ctx, z, force)?;
                say(json, z, &Outcome::Done, "deleted");
                res.0.push(with_warnings(z, "delete", warnings));
                Ok(())
            });
            res.print(json, r.is_ok());
            r?
        }
        Command::Daemon {
            socket,
            socket_mode,
            lock_wait,
            listen_https,
        } => {
            return Err(daemon_exec(
                &cli.root,
                socket,
                socket_mode,
                lock_wait,
                listen_https,
            ))
        }
        Command::Logs {
            zone: z,
            follow,
            tail,
            since,
        } => dayto::logs_cmd(&ctx, &z, follow, tail, since.as_deref())?,
        Command::List {
            pattern,
            state,
            format,
            columns,
            verbose,
        } => listing::list_cmd(
            &ctx,
            json,
            &cli.oci_root,
            listing::ListArgs {
                pattern,
                states: state,
                format,
                columns,
                verbose,
            },
        )?,
        Command::Info { zone: Some(z) } => listing::zone_info(&ctx, json, &z)?,
        Command::Gc => {
            let report = zone::gc(&ctx)?;
            if json {
                output::json(&report);
            } else {
                for r in &report.removed {
                    println!("removed {r}");
                }
                for i in &report.incomplete {
                    println!("incomplete: {i}");
                }
                // Reported, not fatal: gc went on past it (and autoboot must go on too).
                for d in &report.damaged {
                    eprintln!("warren: gc: damaged: {d}");
                }
                for s in &report.skipped {
                    println!("skipped (busy): {s}");
                }
                for r in &report.repaired {
                    println!("repaired {r}");
                }
                if report.removed.is_empty()
                    && report.incomplete.is_empty()
                    && report.damaged.is_empty()
                    && report.skipped.is_empty()
                    && report.repaired.is_empty()
                {
                    println!("nothing to collect");
                }
            }
        }
        Command::Stat {
            zones,
            interval,
            count,
            sort,
            pss,
        } => stat::stat(
            &ctx,
            json,
            crate::stat::Options {
                zones,
                sort,
                pss,
                oci_root: Some(cli.oci_root.clone()),
            },
            interval,
            count,
        )?,
        Command::Memstat => stat::memstat(&ctx, json)?,
        Command::Info { zone: None } => {
            let info = host::info(&ctx)?;
            if json {
                output::json(&info);
            } else {
                output::host_info(&info);
            }
        }
        Command::ProcViews { refresh } => {
            let views = crate::zone::proc_views(&ctx, refresh)?;
            if json {
                output::json(&views);
            } else {
                output::proc_views(&views);
            }
        }
        Command::Doctor(args) => return doctor_cmd(&ctx, json, args),
        Command::Metrics(args) => metrics_cmd::metrics_cmd(&ctx, &cli.oci_root, args)?,
        Command::Swap(c) => overcommit::swap_cmd(&ctx, json, c)?,
        Command::Agent {
            config,
            watch,
            dry_run,
            once,
        } => overcommit::agent_cmd(&ctx, json, config, watch, dry_run, once)?,
        Command::Events {
            follow,
            kind,
            since,
        } => dayto::events_cmd(&ctx, json, follow, kind, since.as_deref())?,
        Command::Demo {
            zones,
            net,
            pipeline,
        } => {
            if zones == 0 {
                return Err(Error::Invalid(
                    "--zones must be at least 1: give how many zones to run, e.g. --zones 100"
                        .into(),
                ));
            }
            let mut bars = output::Bars::new(json);
            let jobs = pipeline.jobs(&ctx);
            // SIGINT/SIGTERM/SIGHUP stop it after the zone in hand; it then removes
            // what it made, as after any failure.
            let mut progress = bench::interrupt::Interruptible::new(&mut bars)?;
            let report = demo::run(&ctx, zones, jobs, net == "bridge", &mut progress);
            if let Some(sig) = progress.signal() {
                return Err(demo::stopped(sig));
            }
            drop(progress);
            let report = report?;
            if json {
                output::json(&report);
            } else {
                output::demo_report(&report);
            }
        }
        Command::Bench(BenchCmd::Density {
            zones,
            template,
            net,
            out,
            idle,
            compare,
            via,
        }) => {
            let steps = bench::parse_steps(&zones)?;
            let via_oci = via == "oci";
            if via_oci && net == "bridge" {
                return Err(Error::Invalid(
                    "--via oci --net bridge: the OCI containers get the network namespace of 'warren oci spec' (loopback only); drop --net bridge".into(),
                ));
            }
            if !(idle > 0.0 && idle <= 3600.0) {
                return Err(Error::Invalid(format!(
                    "--idle {idle}: give seconds between 0 and 3600, e.g. --idle 1"
                )));
            }
            let opts = bench::Options {
                steps,
                template: if template == "busybox" || via_oci {
                    bench::TemplateKind::Busybox
                } else {
                    bench::TemplateKind::Host
                },
                bridge: net == "bridge",
                idle: Duration::from_secs_f64(idle),
                compare,
                via_oci,
            };
            let dir = out.unwrap_or_else(|| bench::default_out(&ctx));
            let mut bars = output::Bars::new(json);
            let mut progress = bench::interrupt::Interruptible::new(&mut bars)?;
            let results = bench::run(&ctx, &opts, &mut progress);
            if let Some(sig) = progress.signal() {
                return Err(bench::interrupt::stopped(sig));
            }
            drop(progress);
            let results = results?;
            bench::write(&dir, &results)?;
            if json {
                output::json(&results);
            } else {
                print!("{}", bench::report::markdown(&results));
                println!("\nwritten to {}", dir.display());
            }
        }
        Command::Bench(BenchCmd::Cri {
            pods,
            handlers,
            pod_network,
            out,
            max_pods,
            snapshotter,
            breakdown,
        }) => {
            let setup = crate::bench::cri::Setup {
                snapshotter,
                debug: breakdown,
                shim_per_node: false,
            };
            bench_cmd::cri_bench(
                &ctx,
                json,
                &pods,
                (handlers, pod_network, max_pods, setup),
                out,
            )?
        }
        Command::Bench(BenchCmd::TuneWatch) => bench::scale::tune::watch(&ctx)?,
        Command::Bench(BenchCmd::Metrics {
            zones,
            scrapes,
            out,
            daemon,
        }) => bench_cmd::metrics_bench(&ctx, json, &zones, scrapes, out, daemon)?,
        Command::Bench(BenchCmd::Scale {
            workload,
            study,
            budget,
            zones,
            memory_per_zone,
            cpu_per_zone,
            oversubscribe,
            agent,
            agent_policy,
            working_set,
            duration,
            warmup,
            repeat,
            calibrate,
            agent_thresholds_from,
            counterfactual,
            buffer_pct,
            sysbench_rows,
            clients,
            pgbench_scale,
            bridge,
            subnet,
            http,
            out,
        }) => {
            let mut opts = bench_cmd::scale_options(
                bench_cmd::ScaleFlags {
                    workload: workload.as_deref(),
                    study: study.as_deref(),
                    budget: budget.as_deref(),
                    zones: zones.as_deref(),
                    memory_per_zone: memory_per_zone.as_deref(),
                    cpu_per_zone,
                    oversubscribe,
                    agent: (agent || agent_policy.is_some())
                        .then(|| agent_policy.unwrap_or(bench::scale::AgentPolicy::Evict)),
                    working_set: working_set.as_deref(),
                    duration,
                    warmup,
                    repeat,
                    calibrate,
                    thresholds_from: agent_thresholds_from,
                    counterfactual,
                    buffer_pct,
                    sysbench_rows,
                    clients,
                    pgbench_scale,
                    bridge,
                    subnet,
                    no_calibration: http.no_calibration,
                },
                crate::stats::online_cpus(&ctx.host.sys).len(),
            )?;
            opts.http = bench_cmd::scale_http_options(&http)?;
            let dir = out.unwrap_or_else(|| {
                let mut d = bench::default_out(&ctx).into_os_string();
                match &opts.study {
                    Some(s) => d.push(format!("-{s}")),
                    None => {
                        let names: Vec<&str> = opts.workloads.iter().map(|w| w.name()).collect();
                        d.push(format!("-{}", names.join("-")));
                    }
                }
                PathBuf::from(d)
            });
            let mut bars = output::Bars::new(json);
            let results = bench::scale::run(&ctx, &opts, &mut bars)?;
            bench::scale::write(&dir, &results)?;
            if json {
                output::json(&results);
            } else {
                print!("{}", bench::scale::report::markdown(&results));
                println!("\nwritten to {}", dir.display());
            }
        }
        Command::Rename { zone: z, new } => {
            zone::rename(&ctx, &z, &new)?;
            if !json {
                println!("zone '{z}' renamed to '{new}'");
            }
        }
        Command::Profile(c) => profile_cmd::profile_cmd(&ctx, json, c)?,
        Command::Snapshot(c) => snapshot_cmd::snapshot_cmd(&ctx, json, c)?,
        Command::Bench(BenchCmd::Snapshot { repeat, data_mib }) => {
            ctx.require_root()?;
            let mut bars = output::Bars::new(json);
            // SIGINT/SIGTERM/SIGHUP stop it between measurements, its scratch roots
            // removed by their guard.
            let mut progress = bench::interrupt::Interruptible::new(&mut bars)?;
            let r = bench::snapshot::run(repeat, data_mib, &mut progress);
            if let Some(sig) = progress.signal() {
                return Err(bench::interrupt::stopped(sig));
            }
            drop(progress);
            let r = r?;
            if json {
                output::json(&r);
            } else {
                println!("{r:#?}");
            }
        }
        c @ (Command::Export { .. } | Command::Import { .. }) => {
            snapshot_cmd::archive_cmd(&ctx, json, c)?
        }
        Command::Completions { shell } => gen::completions(&shell)?,
        Command::Man { dir } => {
            let pages = gen::man_pages(&dir)?;
            if json {
                output::json(&pages);
            } else {
                println!("{} man pages written to {}", pages.len(), dir.display());
            }
        }
    }
    Ok(0)
}

/// `warren remote ...` and `warren --remote NAME VERB ...` as `warren-daemon remote ...`
/// arguments and the `--root` given (the TLS client lives in the daemon's crate;
/// docs/daemon.md, "Remote access (TLS)"), or `None` for any other command line. The
/// global options (`--root`, `--json`, `--oci-root`, `--wait`) may come anywhere; only
/// words before a `--` count.
fn remote_args(argv: &[String]) -> Option<(Vec<String>, Option<String>)> {
    let words = argv.get(1..).unwrap_or_default();
    let end = words.iter().position(|a| a == "--").unwrap_or(words.len());
    let (mut rest, mut root, mut json, mut remote) = (Vec::new(), None, false, None);
    let mut it = words[..end].iter();
    while let Some(w) = it.next() {
        let (k, inline) = match w.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v.to_string())),
            _ => (w.as_str(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next().cloned());
        match k {
            "--json" => json = true,
            "--root" => root = Some(value()?),
            "--remote" => remote = Some(value()?),
            "--oci-root" | "--wait" => {
                value()?;
            }
            _ => rest.push(w.clone()),
        }
    }
    rest.extend(words[end..].iter().cloned());
    let mut out = match remote {
        Some(name) => ["remote", "call", &name].map(String::from).to_vec(),
        None if rest.first().is_some_and(|w| w == "remote") => vec![rest.remove(0)],
        None => return None,
    };
    let call = out.len() == 3;
    let takes_json = call
        || rest
            .first()
            .is_some_and(|v| ["list", "trust-token", "trust-list"].contains(&v.as_str()));
    // A remote call takes it before the verb: what follows an exec's `--` is the
    // command's own.
    if json && call {
        out.push("--json".into());
    }
    out.extend(rest);
    if json && takes_json && !call {
        out.push("--json".into());
    }
    Some((out, root))
}

/// Replace this process with `warren-daemon ARGS` (the remote client). Returns the exit
/// code only on failure.
fn remote_exec((args, root): (Vec<String>, Option<String>)) -> i32 {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(e) => e.with_file_name("warren-daemon"),
        Err(e) => {
            eprintln!("warren: finding warren's own executable: {e}");
            return ExitCode::Unsupported as i32;
        }
    };
    let mut cmd = std::process::Command::new(&exe);
    if let Some(r) = root {
        cmd.env("WARREN_ROOT", r);
    }
    let e = cmd.args(args).exec();
    eprintln!(
        "warren: running {}: {e}; install warren-daemon beside warren (cargo build builds both)",
        exe.display()
    );
    ExitCode::Unsupported as i32
}

#[cfg(test)]
mod remote_args_tests {
    use super::remote_args;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn some(s: &str, root: Option<&str>) -> Option<(Vec<String>, Option<String>)> {
        Some((v(s), root.map(String::from)))
    }

    #[test]
    fn remote_words_go_to_the_client() {
        assert_eq!(
            remote_args(&v("warren remote list")),
            some("remote list", None)
        );
        assert_eq!(
            remote_args(&v("warren --root /r --json remote trust-token --name a")),
            some("remote trust-token --name a --json", Some("/r"))
        );
        assert_eq!(
            remote_args(&v("warren --json remote add s https://h:1 --token t")),
            some("remote add s https://h:1 --token t", None)
        );
        assert_eq!(
            remote_args(&v("warren --remote srv list --json")),
            some("remote call srv --json list", None)
        );
        assert_eq!(
            remote_args(&v("warren --json --remote srv exec z -- ls --json")),
            some("remote call srv --json exec z -- ls --json", None)
        );
        assert_eq!(
            remote_args(&v("warren boot z1 --remote=srv")),
            some("remote call srv boot z1", None)
        );
        assert_eq!(remote_args(&v("warren exec z -- echo --remote x")), None);
        assert_eq!(remote_args(&v("warren list")), None);
    }
}

/// `warren daemon`: replace this process with the `warren-daemon` beside it (the CLI
/// stays free of the daemon's async runtime). Returns only on failure.
fn daemon_exec(
    root: &Path,
    socket: Option<PathBuf>,
    mode: Option<String>,
    lock_wait: u64,
    listen_https: Option<String>,
) -> Error {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(e) => e.with_file_name("warren-daemon"),
        Err(e) => return Error::Unsupported(format!("finding warren's own executable: {e}")),
    };
    let mut cmd = std::process::Command::new(&exe);
    cmd.arg("--root").arg(root);
    cmd.arg("--lock-wait").arg(lock_wait.to_string());
    if let Some(s) = socket {
        cmd.arg("--socket").arg(s);
    }
    if let Some(m) = mode {
        cmd.arg("--socket-mode").arg(m);
    }
    if let Some(a) = listen_https {
        cmd.arg("--listen-https").arg(a);
    }
    let e = cmd.exec();
    Error::Unsupported(format!(
        "running {}: {e}; install warren-daemon beside warren (cargo build builds both)",
        exe.display()
    ))
}

#[cfg(test)]
mod login_verb_tests {
    use super::login_verb;

    fn args(s: &str) -> impl Iterator<Item = String> + '_ {
        s.split(' ').map(str::to_string)
    }

    #[test]
    fn a_logins_usage_error_is_told_apart() {
        assert!(login_verb(args("warren login --bogus z")));
        assert!(login_verb(args("warren --root /x --json exec z")));
        assert!(login_verb(args("warren shell")));
        assert!(!login_verb(args("warren boot --bogus")));
        assert!(!login_verb(args("warren --root login boot")));
        assert!(!login_verb(args("warren")));
    }
}
