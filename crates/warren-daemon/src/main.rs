//! `warren-daemon`: parse the options, take the listeners, serve (or, as `--helper`,
//! run one changing verb single-threaded: [`warren_daemon::helper`]).

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use warren_daemon::listen::{self, Listener, SocketOptions};
use warren_daemon::{api, App};

/// The daemon's exit codes (documented in docs/daemon.md).
#[repr(i32)]
enum Exit {
    /// A listener could not be set up, or the options are wrong.
    Setup = 1,
    /// Not root.
    Permission = 8,
}

/// warren's REST API over a unix socket (docs/daemon.md).
#[derive(Parser)]
#[command(name = "warren-daemon", version)]
struct Opts {
    /// State root, as the CLI's --root.
    #[arg(long, env = "WARREN_ROOT", default_value = warren::layout::DEFAULT_ROOT)]
    root: PathBuf,
    /// The OCI runtime's state root: `GET /1.0/zones` and `/1.0/stat` show its
    /// containers beside the zones (kind `oci`), as `warren list` does.
    #[arg(long, env = "WARREN_OCI_ROOT", default_value = warren::oci::DEFAULT_ROOT, value_name = "DIR")]
    oci_root: PathBuf,
    /// The unix socket to listen on [default: <run dir>/warren.sock]; ignored when
    /// systemd passes sockets (LISTEN_FDS).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Mode of the socket file, octal [default: 0660 with group warren, else 0600].
    /// The peer-credential check applies whatever the mode.
    #[arg(long, value_name = "OCTAL", value_parser = parse_mode)]
    socket_mode: Option<u32>,
    /// Bound on each per-zone lock wait of a request, in seconds (the CLI's --wait).
    #[arg(long, default_value_t = 30)]
    lock_wait: u64,
    /// Also serve the API over TCP with TLS on ADDR:PORT, client certificates required
    /// (the trust store and server certificate under <root>/daemon; docs/daemon.md,
    /// "Remote access (TLS)").
    #[arg(long, value_name = "ADDR:PORT")]
    listen_https: Option<std::net::SocketAddr>,
    /// Also serve the web dashboard (and the API) to browsers over plain HTTP on this
    /// loopback address, guarded by a random token (docs/daemon.md, "Dashboard").
    #[arg(long, value_name = "ADDR:PORT")]
    listen_http: Option<std::net::SocketAddr>,
    /// Run one verb read from stdin and exit (internal: the daemon's own helper).
    #[arg(long, hide = true)]
    helper: bool,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("{s:?}: expected an octal mode such as 0660"))
}

fn main() {
    // The helper is checked before anything starts a thread: it must stay single-threaded.
    if std::env::args().nth(1).as_deref() == Some("--helper") {
        std::process::exit(warren_daemon::helper::main());
    }
    // `warren remote ...` and `warren --remote NAME VERB` (the TLS client).
    if std::env::args().nth(1).as_deref() == Some("remote") {
        std::process::exit(warren_daemon::remote::main(
            std::env::args().skip(2).collect(),
        ));
    }
    let opts = Opts::parse();
    if warren_sys::geteuid() != 0 {
        eprintln!("warren-daemon: must run as root (its verbs create namespaces, mounts and cgroups); run it with sudo or as warren.service");
        std::process::exit(Exit::Permission as i32);
    }
    let code = match serve(opts) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("warren-daemon: {e}");
            Exit::Setup as i32
        }
    };
    std::process::exit(code);
}

fn serve(opts: Opts) -> Result<(), String> {
    let passed = listen::activated().map_err(|e| format!("socket activation: {e}"))?;
    // Nothing inherited reaches the helpers or zones (the listeners are close-on-exec).
    warren_sys::fds::cloexec_from(3)
        .map_err(|e| format!("marking descriptors close-on-exec: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let cli_exe = exe.with_file_name("warren");
    let socket = opts
        .socket
        .unwrap_or_else(|| warren::layout::HostPaths::default().run.join("warren.sock"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    rt.block_on(async move {
        let mut listeners = passed
            .into_iter()
            .map(listen::adopt)
            .collect::<std::io::Result<Vec<Listener>>>()
            .map_err(|e| format!("socket activation: {e}"))?;
        if listeners.is_empty() {
            let l = listen::bind(&SocketOptions {
                path: socket.clone(),
                mode: opts.socket_mode,
            })
            .map_err(|e| format!("binding {}: {e}", socket.display()))?;
            listeners.push(l);
        }
        let opts_oci_root = opts.oci_root.clone();
        let verdicts = warren_daemon::verdicts::Verdicts::new(
            cli_exe.clone(),
            opts.root.clone(),
            DOCTOR_ZONES,
            tokio::runtime::Handle::current(),
        );
        tokio::spawn(verdicts.clone().keep_fresh());
        let app = Arc::new(App {
            root: opts.root,
            oci_root: opts.oci_root,
            helper_exe: exe,
            cli_exe,
            lock_wait: Duration::from_secs(opts.lock_wait),
            ops: Default::default(),
            metrics: Some(metrics_renderer(&opts_oci_root, verdicts.clone())),
        });
        let root = app.root.clone();
        // What a daemon killed mid-request left in the root (its upload and file spools).
        api::sweep_spools(&root);
        let router = api::router(app);
        if let Some(addr) = opts.listen_https {
            let l = warren_daemon::tls::bind(addr, &root)
                .await
                .map_err(|e| format!("--listen-https {addr}: {e}"))?;
            let local = l.listener.local_addr().map_or(addr, |a| a);
            eprintln!("warren-daemon: listening on https://{local} (client certificates required)");
            tokio::spawn(warren_daemon::tls::serve(l, router.clone()));
        }
        let cleanup: Vec<PathBuf> = listeners
            .iter()
            .filter_map(|l: &Listener| l.bound_path().map(PathBuf::from))
            .collect();
        if let Some(addr) = opts.listen_http {
            if let Err(e) = dashboard(addr, router.clone()).await {
                for p in &cleanup {
                    let _ = std::fs::remove_file(p);
                }
                return Err(e);
            }
        }
        for l in listeners {
            eprintln!("warren-daemon: listening on {}", l.describe());
            tokio::spawn(listen::serve(l, router.clone()));
        }
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| format!("SIGTERM handler: {e}"))?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        for p in cleanup {
            let _ = std::fs::remove_file(p);
        }
        eprintln!("warren-daemon: stopped");
        Ok(())
    })
}

/// The density the doctor's verdicts in `/metrics` are judged against (as `warren
/// metrics`' default).
const DOCTOR_ZONES: u64 = 1000;

/// `/metrics`: one kept [`warren::metrics::Scraper`] (disk walks and swap rates reused
/// between scrapes), one scrape at a time. The doctor's verdicts come from a child
/// process ([`warren_daemon::verdicts`]: its user-namespace check forks, which this
/// multi-threaded process must not); a scrape asks for a fresh run when they are old
/// and shows the latest it has, never waiting for one.
fn metrics_renderer(
    oci_root: &std::path::Path,
    verdicts: Arc<warren_daemon::verdicts::Verdicts>,
) -> warren_daemon::state::MetricsRenderer {
    let scraper = std::sync::Mutex::new(warren::metrics::Scraper::new(warren::metrics::Options {
        oci_root: Some(oci_root.to_path_buf()),
        doctor: false,
        doctor_zones: DOCTOR_ZONES,
        ..Default::default()
    }));
    Arc::new(move |ctx, format| {
        verdicts.kick();
        let mut s = scraper.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, row)) = verdicts.latest() {
            s.supply_doctor(row, at);
        }
        s.render(ctx, format)
    })
}

/// The dashboard's loopback listener: bound, its token written root-only beside the
/// socket and printed, served ([`warren_daemon::ui`]).
async fn dashboard(addr: std::net::SocketAddr, router: axum::Router) -> Result<(), String> {
    warren_daemon::ui::check_addr(&addr)?;
    let l = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--listen-http {addr}: {e}"))?;
    let token =
        warren_daemon::ui::new_token().map_err(|e| format!("making the dashboard's token: {e}"))?;
    let run = warren::layout::HostPaths::default().run;
    std::fs::create_dir_all(&run).map_err(|e| format!("{}: {e}", run.display()))?;
    let file = run.join("dashboard.token");
    warren_daemon::ui::write_token(&file, &token)
        .map_err(|e| format!("writing {}: {e}", file.display()))?;
    let bound = l
        .local_addr()
        .map_err(|e| format!("--listen-http {addr}: {e}"))?;
    eprintln!(
        "warren-daemon: dashboard on http://{bound}/?token={token} (token also in {})",
        file.display()
    );
    tokio::spawn(warren_daemon::ui::serve_http(l, router, token.into()));
    Ok(())
}
