//! The runc-compatible command line. Exit codes, as runc's: 0 success, 1 any error
//! (message on stderr and in `--log`); `exec` without `--detach` exits with the
//! process's status (128 + signal if it was killed).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::{ops, Ctx, Log, DEFAULT_ROOT};
use crate::error::{Error, IoContext, Result};

/// The name the binary dispatches on (a symlink to `warren`).
pub const ARGV0: &str = "warren-oci";

#[derive(Parser, Debug)]
#[command(
    name = "warren-oci",
    about = "warren as an OCI runtime (runc's command line)",
    after_help = "Exit codes: 0 success, 1 failure (as runc); exec exits with the process's status.\n\nExamples:\n  warren-oci spec && warren-oci create --bundle . c1 && warren-oci start c1\n  warren-oci state c1\n  warren-oci kill c1 TERM && warren-oci delete c1\n  warren-oci --cgroup-nest create --bundle . c2   # cgroups in <own cgroup>/warren-oci/<cgroupsPath>"
)]
pub struct OciCli {
    /// State root for containers.
    #[arg(long, global = true, default_value = DEFAULT_ROOT, env = "WARREN_OCI_ROOT")]
    pub root: PathBuf,
    /// Log file (errors and warnings).
    #[arg(long, global = true)]
    pub log: Option<PathBuf>,
    /// Log format: text or json (runc's JSON lines, which containerd reads).
    #[arg(long, global = true, default_value = "text")]
    pub log_format: String,
    /// Log debug messages and echo warnings on stderr.
    #[arg(long, global = true)]
    pub debug: bool,
    /// cgroupsPath is `slice:prefix:name`: made (without systemd) as the cgroupfs path
    /// systemd would use, `<slice path>/<prefix>-<name>.scope`.
    #[arg(long, global = true)]
    pub systemd_cgroup: bool,
    /// Make every container's cgroups beneath this runtime's own cgroup, in
    /// `warren-oci/<cgroupsPath>` (the path kept as given below it), instead of where
    /// cgroupsPath names them: for hosts where a process may only make cgroups beneath
    /// its own. podman: `--runtime-flag cgroup-nest`; containerd: set
    /// WARREN_OCI_CGROUP_NEST=1 in containerd's environment (its shims pass it on).
    #[arg(
        long,
        global = true,
        env = "WARREN_OCI_CGROUP_NEST",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub cgroup_nest: bool,
    /// Accepted and ignored (runc's rootless mode).
    #[arg(long, global = true)]
    pub rootless: Option<String>,
    #[command(subcommand)]
    pub cmd: OciCmd,
}

#[derive(Subcommand, Debug)]
pub enum OciCmd {
    /// Create a container from a bundle; its process waits for 'start'.
    Create {
        #[arg(long, short = 'b', default_value = ".")]
        bundle: PathBuf,
        #[arg(long)]
        pid_file: Option<PathBuf>,
        /// Unix socket that receives the pty master (SCM_RIGHTS) when process.terminal.
        #[arg(long)]
        console_socket: Option<PathBuf>,
        /// chroot instead of pivot_root (for a rootfs on a ramfs).
        #[arg(long)]
        no_pivot: bool,
        /// Pass descriptors 3 to 3+N-1 to the container's process; no other descriptor
        /// of the caller reaches it.
        #[arg(long, default_value_t = 0)]
        preserve_fds: u32,
        #[arg(long)]
        no_new_keyring: bool,
        id: String,
    },
    /// Create and start a container, then wait for it (runc run).
    Run {
        #[arg(long, short = 'b', default_value = ".")]
        bundle: PathBuf,
        #[arg(long)]
        pid_file: Option<PathBuf>,
        #[arg(long)]
        console_socket: Option<PathBuf>,
        #[arg(long, short = 'd')]
        detach: bool,
        #[arg(long)]
        no_pivot: bool,
        /// As for `create`.
        #[arg(long, default_value_t = 0)]
        preserve_fds: u32,
        id: String,
    },
    /// Run the created container's process.
    Start { id: String },
    /// Print the container's state (runtime-spec JSON).
    State { id: String },
    /// Send a signal (default TERM) to the container's init, or with --all to every process.
    Kill {
        #[arg(long, short = 'a')]
        all: bool,
        id: String,
        signal: Option<String>,
    },
    /// Delete a stopped (or, with --force, any) container.
    Delete {
        #[arg(long, short = 'f')]
        force: bool,
        id: String,
    },
    /// Run a process in a running container.
    Exec {
        /// The process as JSON (runtime-spec process).
        #[arg(long, short = 'p')]
        process: Option<PathBuf>,
        #[arg(long, short = 't')]
        tty: bool,
        #[arg(long, short = 'd')]
        detach: bool,
        #[arg(long)]
        pid_file: Option<PathBuf>,
        #[arg(long)]
        console_socket: Option<PathBuf>,
        #[arg(long)]
        cwd: Option<PathBuf>,
        #[arg(long, short = 'e')]
        env: Vec<String>,
        /// uid[:gid]
        #[arg(long, short = 'u')]
        user: Option<String>,
        #[arg(long)]
        preserve_fds: Option<u32>,
        #[arg(long)]
        no_new_privs: bool,
        id: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The container's processes.
    Ps {
        #[arg(long, short = 'f', default_value = "table")]
        format: String,
        id: String,
    },
    /// List containers.
    List {
        #[arg(long, short = 'f', default_value = "table")]
        format: String,
        #[arg(long, short = 'q')]
        quiet: bool,
    },
    /// Freeze every process of the container.
    Pause { id: String },
    /// Thaw a paused container.
    Resume { id: String },
    /// What this runtime supports (JSON).
    Features,
    /// Write a default config.json into the bundle directory.
    Spec {
        #[arg(long, short = 'b', default_value = ".")]
        bundle: PathBuf,
    },
    /// Change the container's cgroup limits.
    Update {
        /// linux.resources JSON file, or - for stdin.
        #[arg(long, short = 'r')]
        resources: Option<String>,
        #[arg(long)]
        memory: Option<i64>,
        #[arg(long)]
        pids_limit: Option<i64>,
        id: String,
    },
}

/// Run the OCI command line over `args` (args[0] is the program name).
pub fn main_with(args: Vec<OsString>) -> i32 {
    let cli = match OciCli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 1 } else { 0 };
        }
    };
    // Only stdio and the descriptors the caller asked to preserve may reach a
    // container; everything else the caller left open is closed at every exec.
    let preserve = match &cli.cmd {
        OciCmd::Create { preserve_fds, .. } | OciCmd::Run { preserve_fds, .. } => *preserve_fds,
        OciCmd::Exec { preserve_fds, .. } => preserve_fds.unwrap_or(0),
        _ => 0,
    };
    if let Err(e) = warren_sys::fds::cloexec_from(3 + preserve.min(65536) as i32) {
        eprintln!("warren-oci: marking inherited descriptors close-on-exec: {e}");
        return 1;
    }
    warren_sys::fds::prime_thread_check();
    let ctx = Ctx {
        root: cli.root.clone(),
        log: Log::new(cli.log.as_deref(), cli.log_format == "json", cli.debug),
        systemd_cgroup: cli.systemd_cgroup,
        cgroup_nest: cli.cgroup_nest,
        proc_root: PathBuf::from("/proc"),
    };
    ctx.log.debug(&format!("{:?}", cli.cmd));
    match run(&ctx, cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            ctx.log.error(&msg);
            eprintln!("warren-oci: {msg}");
            1
        }
    }
}

fn print_json(v: &serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(v).expect("json"));
}

fn run(ctx: &Ctx, cmd: OciCmd) -> Result<i32> {
    match cmd {
        OciCmd::Create {
            bundle,
            pid_file,
            console_socket,
            no_pivot,
            preserve_fds,
            id,
            ..
        } => {
            ops::create(
                ctx,
                &ops::CreateArgs {
                    id: &id,
                    bundle: &bundle,
                    pid_file: pid_file.as_deref(),
                    console_socket: console_socket.as_deref(),
                    no_pivot,
                    preserve_fds,
                },
            )?;
        }
        OciCmd::Run {
            bundle,
            pid_file,
            console_socket,
            detach,
            no_pivot,
            preserve_fds,
            id,
        } => {
            ops::create(
                ctx,
                &ops::CreateArgs {
                    id: &id,
                    bundle: &bundle,
                    pid_file: pid_file.as_deref(),
                    console_socket: console_socket.as_deref(),
                    no_pivot,
                    preserve_fds,
                },
            )?;
            let r = super::state::load(&ctx.root, &id)?;
            ops::start(ctx, &id)?;
            if detach {
                return Ok(0);
            }
            let pid = r.pid.expect("created");
            let status = warren_sys::proc::waitpid_blocking(pid)
                .ctx(|| format!("container '{id}': waiting for it"))?;
            ops::delete(ctx, &id, true)?;
            return Ok(status.code());
        }
        OciCmd::Start { id } => ops::start(ctx, &id)?,
        OciCmd::State { id } => print_json(&ops::state(ctx, &id)?),
        OciCmd::Kill { all, id, signal } => {
            ops::kill(ctx, &id, signal.as_deref().unwrap_or("TERM"), all)?
        }
        OciCmd::Delete { force, id } => ops::delete(ctx, &id, force)?,
        OciCmd::Exec {
            process,
            tty,
            detach,
            pid_file,
            console_socket,
            cwd,
            env,
            user,
            no_new_privs,
            preserve_fds,
            id,
            args,
            ..
        } => {
            let mut p: oci_spec::runtime::Process = match &process {
                Some(f) => {
                    let text = crate::fsutil::read_text_bounded(f, crate::fsutil::MAX_SMALL_FILE)
                        .ctx(|| {
                        format!("container '{id}': reading --process {}", f.display())
                    })?;
                    serde_json::from_str(&text).map_err(|e| {
                        Error::Invalid(format!(
                            "container '{id}': --process {}: {e}; expected a runtime-spec process",
                            f.display()
                        ))
                    })?
                }
                None => {
                    if args.is_empty() {
                        return Err(Error::Invalid(format!(
                            "container '{id}': exec needs --process FILE or a command after the id"
                        )));
                    }
                    let spec = ops::load_spec(&id, &super::state::load(&ctx.root, &id)?.bundle)?;
                    let mut p = spec.process().clone().unwrap_or_default();
                    p.set_args(Some(args.clone()));
                    p.set_terminal(Some(tty));
                    let mut e = p.env().clone().unwrap_or_default();
                    e.extend(env.iter().cloned());
                    p.set_env(Some(e));
                    if let Some(c) = &cwd {
                        p.set_cwd(c.clone());
                    }
                    if let Some(u) = &user {
                        let (uid, gid) = u.split_once(':').unwrap_or((u, "0"));
                        let bad = || {
                            Error::Invalid(format!(
                                "container '{id}': --user {u:?}: expected uid[:gid] as numbers"
                            ))
                        };
                        let mut usr = p.user().clone();
                        usr.set_uid(uid.parse().map_err(|_| bad())?);
                        usr.set_gid(gid.parse().map_err(|_| bad())?);
                        p.set_user(usr);
                    }
                    if no_new_privs {
                        p.set_no_new_privileges(Some(true));
                    }
                    p
                }
            };
            if tty {
                p.set_terminal(Some(true));
            }
            return ops::exec(
                ctx,
                ops::ExecArgs {
                    id: &id,
                    process: p,
                    console_socket: console_socket.as_deref(),
                    pid_file: pid_file.as_deref(),
                    detach,
                    preserve_fds: preserve_fds.unwrap_or(0),
                },
            );
        }
        OciCmd::Ps { format, id } => {
            let pids = ops::pids(ctx, &id)?;
            if format == "json" {
                println!("{}", serde_json::to_string(&pids).expect("json"));
            } else {
                println!("{:>8} CMD", "PID");
                for pid in pids {
                    let cmd = std::fs::read(ctx.proc_root.join(format!("{pid}/cmdline")))
                        .unwrap_or_default();
                    let cmd: Vec<String> = cmd
                        .split(|b| *b == 0)
                        .filter(|s| !s.is_empty())
                        .map(|s| String::from_utf8_lossy(s).into_owned())
                        .collect();
                    println!("{pid:>8} {}", cmd.join(" "));
                }
            }
        }
        OciCmd::List { format, quiet } => {
            let mut all = Vec::new();
            for id in super::state::list(&ctx.root) {
                if let Ok(v) = ops::state(ctx, &id) {
                    all.push(v);
                }
            }
            if format == "json" {
                println!("{}", serde_json::Value::Array(all));
            } else if quiet {
                all.iter()
                    .for_each(|v| println!("{}", v["id"].as_str().unwrap_or("")));
            } else {
                println!(
                    "{:<24} {:>8} {:<10} {:<40} CREATED",
                    "ID", "PID", "STATUS", "BUNDLE"
                );
                for v in all {
                    println!(
                        "{:<24} {:>8} {:<10} {:<40} {}",
                        v["id"].as_str().unwrap_or(""),
                        v["pid"],
                        v["status"].as_str().unwrap_or(""),
                        v["bundle"].as_str().unwrap_or(""),
                        v["created"].as_str().unwrap_or("")
                    );
                }
            }
        }
        OciCmd::Pause { id } => ops::pause(ctx, &id, true)?,
        OciCmd::Resume { id } => ops::pause(ctx, &id, false)?,
        OciCmd::Features => print_json(&super::features()),
        OciCmd::Spec { bundle } => {
            let path = bundle.join("config.json");
            if path.exists() {
                return Err(Error::Invalid(format!(
                    "File {} exists. Remove it first",
                    path.display()
                )));
            }
            let spec = oci_spec::runtime::Spec::default();
            let text = serde_json::to_string_pretty(&spec).expect("json");
            std::fs::write(&path, text).ctx(|| format!("writing {}", path.display()))?;
        }
        OciCmd::Update {
            resources,
            memory,
            pids_limit,
            id,
        } => {
            let text = match resources {
                Some(r) => r,
                None => {
                    let mut v = serde_json::json!({});
                    if let Some(m) = memory {
                        v["memory"] = serde_json::json!({"limit": m});
                    }
                    if let Some(n) = pids_limit {
                        v["pids"] = serde_json::json!({"limit": n});
                    }
                    let tmp = std::env::temp_dir()
                        .join(format!("warren-oci-update-{}.json", std::process::id()));
                    std::fs::write(&tmp, v.to_string())
                        .ctx(|| format!("writing {}", tmp.display()))?;
                    let r = ops::update(ctx, &id, &tmp.display().to_string());
                    let _ = std::fs::remove_file(&tmp);
                    r?;
                    return Ok(0);
                }
            };
            ops::update(ctx, &id, &text)?;
        }
    }
    Ok(0)
}
