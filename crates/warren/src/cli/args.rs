//! The command line's flags (clap derive), its help texts and exit codes.

use super::*;

pub(super) const EXIT_CODES: &str = "\
Exit codes:
  0  success (also when the zone already was where the verb takes it)
  1  failure of another kind, or some of several zones failed
  2  usage error (bad flags or arguments)
  3  the zone, template or profile does not exist
  4  the zone is in the wrong state for the verb
  5  invalid input: a name, a config key or value
  6  the name is taken, the template is in use, or a lock wait (--wait) expired
  7  the host lacks something (a package, a kernel feature, a cgroup controller)
  8  not running as root
  9  the kernel or filesystem refused an operation
 10  a state file is corrupt (the message names it and the remedy; docs/recovery.md)
'warren login' exits with the status of the command it ran, or 125/126/127
(see 'warren login --help').

Examples:
  warren template create host --from host
  warren create web1 --set memory.max=256M --set max-processes=100
  warren install web1 && warren boot web1
  warren login web1 -- ps ax
  warren clone web1 web2
  warren list -v
  warren ls 'web*' --state running -c name,address,memory
  warren profile create small memory.max=64M && warren create web3 --profile small
  warren stat --interval 2 --sort mem
  warren halt web1 && warren uninstall web1 && warren delete web1
  warren demo --zones 100
  warren doctor --zones 5000 --procs-per-zone 3
  warren swap enable --size 4G && warren agent --dry-run";

pub(super) const DOCTOR_HELP: &str = "\
Checks every kernel, cgroup and process limit that caps density (pids, threads,
namespaces, inotify, neighbour tables, conntrack, memory, disk, ...) against the planned
number of zones: its current value, what the plan needs, a verdict and the fix.
Verdicts: 'will fail' when the need exceeds the limit, 'tight' above 80 % of it, 'ok'
otherwise, 'unknown' when the limit cannot be read (the note says why).
Host settings that weaken isolation get 'weakens isolation' and the sysctl that fixes
them (advice; --fix leaves them alone and the exit code ignores them):
dev.tty.legacy_tiocsti, kernel.unprivileged_userns_clone, accept_ra on the bridges of
this state root, and net.ipv4.ip_forward when there are such bridges.

--fix raises the sysctls the plan needs (never lowers one): now, through /proc/sys, and
at every boot, in /etc/sysctl.d/90-warren.conf. --dry-run shows the changes only.

--probe creates processes or threads (at a bounded rate, up to --max) inside a
throwaway pids cgroup capped at --cap (default --max + 8) and reports how many it got
and which limit stopped it. It always kills what it made and removes the cgroup, also
on Ctrl-C; if warren is killed, its probe dies with it and the next 'warren doctor'
removes the empty cgroup.

Exit codes:
  0    nothing will fail (tight and unknown limits are reported, not failed);
       --probe: it ran and cleaned up
  1    some limit will fail for this plan
  130  --probe was interrupted (Ctrl-C), after cleaning up
  other codes as for every verb (8: not root, needed for --fix and --probe)

Examples:
  warren doctor --zones 20000
  warren doctor --zones 2000 --procs-per-zone 4 --threads-per-zone 20 --net bridge
  warren doctor --zones 20000 --fix --dry-run
  warren doctor --probe procs --max 2000
  warren doctor --probe threads --max 5000 --cap 1000";

pub(super) const LOGIN_HELP: &str = "\
The command runs as the zone's root in / (a login shell in the user's home) unless
-u or -w say otherwise, with the zone's default environment (config key env) under
the -e entries. With a terminal on stdin and stdout it gets a pty of the zone (-t
forces one, -T refuses one), whose size follows the caller's terminal.

Exit codes: the command's own status (128 + N when signal N killed it), else
  125  warren itself failed (no such zone, zone not running, bad -u, ...)
  126  the command exists in the zone but cannot be executed
  127  the command was not found in the zone

Examples:
  warren login web1
  warren exec web1 ps ax
  warren login -u www-data -w /srv -e LANG=C.UTF-8 web1 -- sh -c 'id; pwd'
  warren shell web1";

pub(super) const CP_HELP: &str = "\
One side is ZONE:PATH, the other a host path. The zone may be running or halted.
Inside the zone, paths are resolved as the zone sees them and never lead out of it:
a symlink planted by the zone is followed within the zone's root or not at all.
What is copied in is owned by the zone's root (or --uid/--gid, as ids inside the
zone), mapped into the zone's host id range; what is copied out is owned by the
caller, without set-id bits.

Examples:
  warren cp ./site.conf web1:/etc/nginx/conf.d/
  warren cp -r ./www web1:/srv/www --uid 33 --gid 33
  warren cp web1:/var/log/syslog ./web1-syslog
  warren cp -r web1:/etc ./web1-etc";

/// `warren login`'s options (also `exec` and `shell`).
#[derive(Args, Debug, Default)]
pub struct LoginOpts {
    /// Set an environment variable (repeatable); KEY alone takes the caller's value.
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Run as this user of the zone: NAME or UID, optionally :GID or :GROUP.
    #[arg(long, short = 'u', value_name = "NAME|UID[:GID]")]
    pub user: Option<String>,
    /// Working directory inside the zone [default: /; a login shell: the user's home].
    #[arg(long, short = 'w', value_name = "DIR")]
    pub cwd: Option<String>,
    /// Allocate a pty even when stdin or stdout is not a terminal.
    #[arg(long, short = 't', conflicts_with = "no_tty")]
    pub tty: bool,
    /// Never allocate a pty: three pipes, even on a terminal.
    #[arg(long = "no-tty", short = 'T')]
    pub no_tty: bool,
    /// Accepted as podman's `exec -i`: stdin is always relayed.
    #[arg(long, short = 'i')]
    pub interactive: bool,
}

/// An octal mode such as 0640 or 755.
fn parse_mode(s: &str) -> std::result::Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| format!("{s:?}: expected an octal mode such as 0644"))
}

#[derive(Parser, Debug)]
#[command(
    name = "warren",
    version,
    about = "Dense, fast, isolated zones on one Linux host",
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// State root (templates, zones, locks).
    #[arg(long, global = true, env = "WARREN_ROOT", default_value = DEFAULT_ROOT)]
    pub root: PathBuf,
    /// Print JSON (the API objects) instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// The OCI runtime's state root (`warren oci --root`): `list` and `stat` show its
    /// containers beside the zones, kind `oci`.
    #[arg(long, global = true, env = "WARREN_OCI_ROOT", default_value = crate::oci::DEFAULT_ROOT, value_name = "DIR")]
    pub oci_root: PathBuf,
    /// Wait at most this many seconds for a zone's or template's lock (held by another
    /// command), then fail naming the holder (exit 6). Unset: wait as long as it takes,
    /// saying who holds the lock after 3 seconds (gc: at most 60 s, and never for a
    /// zone another command holds: it skips it).
    #[arg(long, global = true, env = "WARREN_WAIT", value_name = "SECONDS", value_parser = parse_wait)]
    pub wait: Option<std::time::Duration>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Manage templates: the read-only roots zones are made from.
    #[command(subcommand)]
    Template(TemplateCmd),
    /// Create a zone (state: configured).
    #[command(
        after_help = "Example: warren create db1 --template host --set memory.max=1G --set cpu.max=0.5"
    )]
    Create {
        zone: String,
        /// Template to make the zone from [default: host].
        #[arg(long, short)]
        template: Option<String>,
        /// A config file (TOML) to start from.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Set a config key, e.g. --set memory.max=512M (repeatable; see 'warren config keys').
        #[arg(long = "set", short = 's', value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Copy a profile's keys into the config, after the default profile and
        /// before --config and --set (repeatable, applied in order).
        #[arg(long = "profile", short = 'p', value_name = "PROFILE")]
        profiles: Vec<String>,
    },
    /// Show or change a zone's config (warren's zonecfg).
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Install zones: give them their copy-on-write root (configured → installed).
    Install {
        #[arg(required = true)]
        zones: Vec<String>,
    },
    /// Make NEW, installed, from SRC's root by copy-on-write (a running SRC is frozen
    /// while its layer is copied: crash-consistent), or from SRC's snapshot NAME;
    /// several NEW zones are cloned in parallel (--jobs).
    #[command(after_help = CLONE_HELP)]
    Clone {
        src: String,
        /// The new zones' names.
        #[arg(required = true, value_name = "NEW")]
        new: Vec<String>,
        #[command(flatten)]
        pipeline: Pipeline,
        /// Clone SRC's snapshot NAME instead of its current layer.
        #[arg(long, value_name = "NAME")]
        snapshot: Option<String>,
    },
    /// Boot zones (installed → running).
    #[command(
        visible_alias = "start",
        after_help = "--autoboot boots every installed zone with autoboot = true (the systemd unit contrib/warren-autoboot.service runs it at host start)."
    )]
    Boot {
        #[command(flatten)]
        targets: Targets,
        /// Boot the zones whose config says autoboot = true.
        #[arg(long, conflicts_with_all = ["zones", "all"])]
        autoboot: bool,
        /// Milliseconds to watch each new init: one that ends within them fails the
        /// boot with its exit status and console (0: do not watch).
        #[arg(long, value_name = "MS", default_value_t = crate::runtime::BOOT_WATCH.as_millis() as u64)]
        watch: u64,
        #[command(flatten)]
        pipeline: Pipeline,
    },
    /// Halt zones: SIGTERM to init, wait, then kill what is left (running → installed).
    #[command(visible_alias = "stop")]
    Halt {
        #[command(flatten)]
        targets: Targets,
        /// Seconds to wait after SIGTERM before killing [default: the zone's stop-timeout, else 10].
        #[arg(long)]
        timeout: Option<u64>,
        #[command(flatten)]
        pipeline: Pipeline,
    },
    /// Suspend running zones: freeze them and page their memory out (docs/suspend.md).
    #[command(
        after_help = "Example: warren swap enable --size 1G && warren suspend web1 && warren list\n\nA suspended zone keeps its processes and state; 'warren resume', 'warren login' and\n'warren cp' wake it, 'warren halt' stops it."
    )]
    Suspend {
        #[command(flatten)]
        targets: Targets,
    },
    /// Wake suspended zones: thaw them; their memory comes back as it is touched.
    Resume {
        #[command(flatten)]
        targets: Targets,
        /// After the thaw, read the zone's swapped-out memory back while it runs
        /// (process_madvise MADV_WILLNEED), so it is warm sooner.
        #[arg(long)]
        prefetch: bool,
    },
    /// Halt and boot zones again.
    Reboot {
        #[arg(required = true)]
        zones: Vec<String>,
        #[arg(long)]
        timeout: Option<u64>,
    },
    /// Run a command (default: a login shell) inside a running zone.
    #[command(visible_alias = "exec", after_help = LOGIN_HELP)]
    Login {
        zone: String,
        #[command(flatten)]
        opts: LoginOpts,
        /// The command and its arguments (after the zone, or after --).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// A login shell in a running zone ('warren login ZONE' with no command).
    #[command(after_help = LOGIN_HELP)]
    Shell {
        zone: String,
        #[command(flatten)]
        opts: LoginOpts,
    },
    /// Copy files and trees into or out of a zone: SRC ZONE:DST or ZONE:SRC DST.
    #[command(after_help = CP_HELP)]
    Cp {
        /// A host path, or ZONE:PATH (an absolute path inside the zone).
        src: String,
        /// A host path, or ZONE:PATH.
        dst: String,
        /// Copy directories and everything beneath them.
        #[arg(long, short)]
        recursive: bool,
        /// Owner of what is copied in, as the zone sees it [default: 0, the zone's root].
        #[arg(long, value_name = "UID")]
        uid: Option<u32>,
        /// Group of what is copied in, as the zone sees it [default: 0].
        #[arg(long, value_name = "GID")]
        gid: Option<u32>,
        /// Mode of the files copied (octal, e.g. 0640) [default: the source's].
        #[arg(long, value_name = "OCTAL", value_parser = parse_mode)]
        mode: Option<u32>,
    },
    /// warren cp's side inside a zone (internal: run by 'warren cp').
    #[command(name = "cp-helper", hide = true)]
    CpHelper {
        zone: String,
        #[arg(allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Remove zones' roots (installed → configured).
    Uninstall {
        #[arg(required = true)]
        zones: Vec<String>,
    },
    /// Delete zones (must be configured, unless --force).
    #[command(visible_alias = "rm")]
    Delete {
        #[arg(required = true)]
        zones: Vec<String>,
        /// Halt and uninstall first if needed.
        #[arg(long, short)]
        force: bool,
    },
    /// List zones and their states.
    #[command(visible_alias = "ls", after_help = listing::LIST_HELP)]
    List {
        /// Only zones whose name matches: a name, or a glob with * and ?.
        #[arg(value_name = "NAME|GLOB")]
        pattern: Option<String>,
        /// Only zones in this state (see below); repeatable.
        #[arg(long, value_name = "STATE", value_parser = [
            "configured", "incomplete", "installed", "ready", "running", "suspended",
            "shutting_down", "evicted",
        ])]
        state: Vec<String>,
        /// table (for people), json (the API objects, as --json) or csv.
        #[arg(long, value_name = "FORMAT", value_parser = ["table", "json", "csv"])]
        format: Option<String>,
        /// The columns, comma-separated (see below).
        #[arg(long, short = 'c', value_name = "COLUMNS", value_delimiter = ',')]
        columns: Vec<String>,
        /// More columns: pid, uptime, network, limits, root.
        #[arg(long, short)]
        verbose: bool,
    },
    /// What zones cost now: CPU, memory, processes, pressure, disk (prstat -Z, zonestat).
    #[command(after_help = stat::STAT_HELP)]
    Stat {
        /// Zones to show [default: every booted zone].
        zones: Vec<String>,
        /// Refresh every S seconds: a live table, CPU % over each interval.
        #[arg(long, short, value_name = "S")]
        interval: Option<f64>,
        /// Stop after N reports.
        #[arg(long, short, value_name = "N", requires = "interval")]
        count: Option<u64>,
        /// Order zones by cpu, mem (charged memory) or procs, highest first.
        #[arg(long, short, value_name = "KEY", default_value = "cpu",
              value_parser = PossibleValuesParser::new(SortKey::NAMES)
                  .map(|s| s.parse::<SortKey>().expect("one of NAMES")))]
        sort: SortKey,
        /// Also sum PSS and USS (unique memory) over every zone process from
        /// /proc/PID/smaps_rollup. Slow: the kernel walks each process's page tables
        /// to answer, so it costs in proportion to the zones' mapped memory.
        #[arg(long)]
        pss: bool,
    },
    /// The host's memory by kind (mdb's ::memstat), with what the zones are charged.
    #[command(after_help = stat::MEMSTAT_HELP)]
    Memstat,
    /// The host as warren sees it (kernel, cgroups, storage backend and why), or one
    /// zone in detail: state, limits in its config, id range, address, root, profiles.
    Info {
        /// The zone to describe [default: the host].
        zone: Option<String>,
    },
    /// Each running zone's /proc views (lxcfs's meminfo, cpuinfo, uptime…): live, dead
    /// or none; --refresh repairs dead ones.
    #[command(
        name = "proc-views",
        after_help = "A zone keeps the binds of the lxcfs it booted with: if lxcfs died, its views fail with ENOTCONN. --refresh detaches them and attaches lxcfs's new mount (or, while lxcfs is down, leaves the host's files). docs/proc-views.md\n\nExamples:\n  warren proc-views\n  warren proc-views --refresh --json"
    )]
    ProcViews {
        /// Repair the views of running zones: re-attach dead ones (as root).
        #[arg(long)]
        refresh: bool,
    },
    /// Remove what interrupted commands left: temp dirs and files, stale runtime
    /// records, orphaned cgroups, unused lock files.
    Gc,
    /// Prometheus metrics of the zones, the host's memory, the agent and the doctor,
    /// printed once (or written atomically with --output, for node_exporter's textfile
    /// collector). docs/metrics.md lists every metric.
    #[command(after_help = METRICS_HELP)]
    Metrics(MetricsArgs),
    /// Check the host's limits against a planned density; --fix them or --probe them.
    #[command(after_help = DOCTOR_HELP)]
    Doctor(DoctorArgs),
    /// Swap for overcommit: a swap file or zram, and vm.swappiness.
    #[command(subcommand)]
    Swap(overcommit::SwapCmd),
    /// Watch memory pressure and evict zones before the OOM killer has to.
    #[command(after_help = overcommit::agent_help())]
    Agent {
        /// Agent config (TOML) overriding the defaults shown below.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Budget to watch: host, group (warren's zone cgroup) or a cgroup directory.
        #[arg(long, value_name = "WHAT")]
        watch: Option<String>,
        /// Log what would be evicted; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Sample for one window, act at most once, exit.
        #[arg(long)]
        once: bool,
    },
    /// The event journal: lifecycle, config and agent events (<root>/events.jsonl).
    #[command(after_help = dayto::EVENTS_HELP)]
    Events {
        /// Keep printing events as they happen (one JSON line each with --json).
        #[arg(long, short)]
        follow: bool,
        /// Only events of this type: lifecycle, agent or config.
        #[arg(long = "type", value_name = "TYPE")]
        kind: Option<crate::journal::EventType>,
        /// Only events since T: 30s, 10m, 2h, 1d back, Unix seconds, or 2026-12-03T20:00:00Z.
        #[arg(long, value_name = "T")]
        since: Option<String>,
    },
    /// Serve the REST API (/1.0/...) on a unix socket: runs warren-daemon (installed
    /// beside warren) on this state root; docs/daemon.md.
    #[command(after_help = DAEMON_HELP)]
    Daemon {
        /// The socket to listen on [default: <run dir>/warren.sock, /run/warren/warren.sock].
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        /// Mode of the socket file, octal [default: 0660 with group warren, else 0600].
        #[arg(long, value_name = "OCTAL")]
        socket_mode: Option<String>,
        /// Bound on each per-zone lock wait of a request, in seconds.
        #[arg(long, value_name = "S", default_value_t = 30)]
        lock_wait: u64,
        /// Also serve the API over TCP with TLS, client certificates required
        /// (`warren remote trust-token`; docs/daemon.md, "Remote access (TLS)").
        #[arg(long, value_name = "ADDR:PORT")]
        listen_https: Option<String>,
    },
    /// A zone's console: what its init and services print (live while it runs).
    #[command(after_help = dayto::LOGS_HELP)]
    Logs {
        zone: String,
        /// Keep printing what the zone writes, until it halts (or Ctrl-C).
        #[arg(long, short)]
        follow: bool,
        /// Only the last N lines.
        #[arg(long, short = 'n', value_name = "N")]
        tail: Option<usize>,
        /// Also the saved consoles of earlier runs written since T (see below).
        #[arg(long, value_name = "T")]
        since: Option<String>,
    },
    /// The main job: clone and boot N zones from the host template, measure, clean up.
    Demo {
        /// How many zones.
        #[arg(long, default_value_t = 100)]
        zones: usize,
        /// The zones' network: none (loopback only) or bridge (eth0 on the demo's
        /// own bridge wdemo0, subnet 10.239.0.0/16, removed afterwards).
        #[arg(long, default_value = "none", value_parser = ["none", "bridge"])]
        net: String,
        #[command(flatten)]
        pipeline: Pipeline,
    },
    /// Benchmarks: `bench density` (zones per step, latency, memory, disk, CPU) and
    /// `bench scale` (a real workload in N zones at once: throughput, latency, memory).
    #[command(subcommand)]
    Bench(BenchCmd),

    // Day-2 helpers (issue 15, items 6 and 8).
    /// Rename a halted zone: its directory, lock, address lease and id range record.
    #[command(
        after_help = "Example: warren halt web1 && warren rename web1 shop1 && warren boot shop1"
    )]
    Rename { zone: String, new: String },
    /// Named sets of config keys copied into zones at create (the `default` one always).
    #[command(subcommand)]
    Profile(ProfileCmd),
    // --- snapshots, export and import (docs/snapshots.md) ---
    /// Snapshots of a zone's private layer: create, list, restore, delete.
    #[command(subcommand)]
    Snapshot(SnapshotCmd),
    /// Write a zone (config, private layer, template record) to a zstd-compressed tar.
    #[command(
        after_help = "Examples:\n  warren export web1 web1.wzone\n  warren export --with-template web1 web1-full.wzone\n  warren export --snapshot nightly web1 web1-nightly.wzone"
    )]
    Export {
        zone: String,
        file: PathBuf,
        /// Carry the template's root in the archive, for a host that lacks it.
        #[arg(long)]
        with_template: bool,
        /// Export the zone's snapshot NAME instead of its current layer.
        #[arg(long, value_name = "NAME")]
        snapshot: Option<String>,
    },
    /// Make an installed zone from an archive written by 'warren export'.
    #[command(
        after_help = "Examples:\n  warren import web1.wzone\n  warren import web1.wzone web1-copy\n  warren import --with-template web1-full.wzone"
    )]
    Import {
        file: PathBuf,
        /// The new zone's name [default: the exported zone's].
        name: Option<String>,
        /// Make the archive's template on this host if it has none of that name.
        #[arg(long)]
        with_template: bool,
    },
    /// Print a shell completion script (bash, zsh or fish) to stdout.
    #[command(after_help = gen::COMPLETIONS_HELP)]
    Completions {
        #[arg(value_parser = ["bash", "zsh", "fish"])]
        shell: String,
    },
    /// Write man pages (warren.1 and one per verb) into DIR.
    #[command(after_help = "Example: warren man /usr/local/share/man/man1 && mandb -q")]
    Man { dir: PathBuf },
}

#[derive(Subcommand, Debug)]
pub enum ProfileCmd {
    /// Create a profile, optionally with keys: warren profile create small memory.max=64M
    Create {
        name: String,
        #[arg(value_name = "KEY=VALUE")]
        assignments: Vec<String>,
    },
    /// Set keys in a profile (new zones get them; existing zones keep theirs).
    Set {
        name: String,
        #[arg(required = true, value_name = "KEY=VALUE")]
        assignments: Vec<String>,
    },
    /// Remove keys from a profile.
    Unset {
        name: String,
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Print a profile (TOML, or JSON with --json) and the zones made with it.
    Show { name: String },
    /// List profiles.
    List,
    /// Delete a profile (zones made with it keep their config).
    Delete { name: String },
}

// `Scale` carries the most flags; the command line is parsed once per process, so its
// size costs nothing worth a Box (which clap's derive would have to see through).
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Pod density through the CRI: for each handler and N, a private containerd
    /// starts N pods (RunPodSandbox, CreateContainer, StartContainer), measures their
    /// latency and host memory (shims' RSS/PSS, host anon), tears them down; writes
    /// results.json and report.md.
    #[command(after_help = "Examples:
  warren bench cri --pods 10,50
  warren bench cri --pods 10 --handlers warren --pod-network --out /tmp/cri-bench
  warren bench cri --pods 20 --handlers runc,warren-shim --breakdown --snapshotter overlayfs

Needs containerd, runc and containernetworking-plugins (apt-get) and the CRI client's
venv (/var/cache/warren-test/cri; scripts/test.sh makes it; WARREN_CRI_PYTHON names
another python3). containerd runs in its own mount, pid and network namespaces, its root
in a temp dir and its state on the namespace's /run tmpfs (as on a host); every pod, shim
and cgroup goes when a step ends, also on failure.")]
    Cri {
        /// Pod counts, one step each (at most 300).
        #[arg(long, default_value = "10")]
        pods: String,
        /// RuntimeClass handlers: runc, warren (the runc shim with warren-oci),
        /// warren-shim (warren's own shim, containerd-shim-warren-v1 beside this
        /// binary or $WARREN_SHIM_BINARY, one per pod), warren-shim-node (the same
        /// shim, one for every pod: WARREN_SHIM_GROUP=node for containerd).
        #[arg(long, value_delimiter = ',', default_value = "runc,warren", value_parser = ["runc", "warren", "warren-shim", "warren-shim-node"])]
        handlers: Vec<String>,
        /// Give each pod its own network namespace (a CNI bridge in containerd's
        /// namespace) instead of the host network.
        #[arg(long)]
        pod_network: bool,
        /// Where to write the results [default: bench/results/<date>-<hostname>-cri].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Most pods a step may start. Raise it above 300 only when nothing else on
        /// the host starts hundreds of processes (kernel.pid_max is shared), e.g.
        /// the 500 pods under a machine-wide lock.
        #[arg(long, default_value_t = crate::bench::cri::run::MAX_PODS)]
        max_pods: usize,
        /// containerd's snapshotter for the images and pods: native (copies the
        /// image's tree per pod) or overlayfs.
        #[arg(long, default_value = "native", value_parser = ["native", "overlayfs"])]
        snapshotter: String,
        /// Break RunPodSandbox down into phases from containerd's debug log (log
        /// level debug, which slows containerd; each step's log is kept in --out).
        #[arg(long)]
        breakdown: bool,
    },
    /// Internal: started by `bench scale --tune`; writes the sysctls it raised back
    /// when the bench exits, however it exits.
    #[command(hide = true)]
    TuneWatch,
    /// Snapshot, restore, export and import figures (SPEC.md, "Snapshots and export"),
    /// on scratch state roots of its own; run a release build.
    #[command(after_help = "Example: warren bench snapshot --repeat 20 --data-mib 100 --json")]
    Snapshot {
        /// Snapshots and restores to time (the median is reported).
        #[arg(long, default_value_t = 20)]
        repeat: usize,
        /// MiB of private data in the exported zone.
        #[arg(long, default_value_t = 100)]
        data_mib: u64,
    },
    /// For each N: clone and boot N fresh zones, measure them, remove them; write
    /// results.json, report.md, latency.svg and memory.svg.
    #[command(after_help = "Examples:
  warren bench density --zones 1,10,100
  warren bench density --zones 1,10,100,500 --compare crun,lxc,podman --out /tmp/bench
  warren bench density --zones 1,3 --idle 1 --template busybox --json
  warren bench density --zones 1,10 --via oci --compare crun

Zones, crun, LXC and podman containers and the bench's templates are removed after each step,
also on failure. --compare installs nothing: a missing system is reported as not
installed, with the command that installs it. LXC runs with a private lxcpath in the
bench's scratch dir and keeps its cgroups beneath the bench's own (lxc.cgroup.relative);
if it does not, it is reported as unavailable. podman runs with a private --root,
--runroot and --tmpdir in the scratch dir and --cgroup-parent beneath the bench's own
cgroup, checked the same way.")]
    Density {
        /// Zone counts, one step each.
        #[arg(long, default_value = "1,10,100")]
        zones: String,
        /// The template zones are made from.
        #[arg(long, default_value = "host", value_parser = ["host", "busybox"])]
        template: String,
        /// The zones' network: none (loopback only) or bridge (the bench's own bridge
        /// wbench0, subnet 10.238.0.0/16, removed afterwards).
        #[arg(long, default_value = "none", value_parser = ["none", "bridge"])]
        net: String,
        /// Where to write the results [default: bench/results/<date>-<hostname>].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Seconds the booted zones sit idle before CPU and memory are read.
        #[arg(long, default_value_t = 10.0)]
        idle: f64,
        /// Run the same steps with other systems too (comma-separated: crun, lxc, podman;
        /// crun-nocgroups: crun with --cgroup-manager=disabled, no cgroup at all).
        #[arg(long, value_delimiter = ',', value_parser = ["crun", "crun-nocgroups", "lxc", "podman"])]
        compare: Vec<String>,
        /// How warren's own steps start zones: native (clone + boot) or oci (`warren
        /// oci create` + `start` on a bundle of the busybox template, as containerd
        /// and podman do; implies --template busybox).
        #[arg(long, default_value = "native", value_parser = ["native", "oci"])]
        via: String,
    },
    /// For each N: boot N zones, then time one Prometheus scrape (`warren metrics`):
    /// cold (doctor checks and disk walks) and warm (as a daemon keeps its scraper);
    /// writes results.json and report.md.
    #[command(after_help = "Examples:
  warren bench metrics --zones 10,100,300
  warren bench metrics --zones 1000 --scrapes 50 --out /tmp/metrics-bench
  warren bench metrics --zones 10,1000 --daemon target/release/warren-daemon

Zones are made from the bench's busybox template and removed after each step, also on failure.
Keep N within what the host's kernel.pid_max allows for everything else running on it.")]
    Metrics {
        /// Zone counts, one step each.
        #[arg(long, default_value = "10,100")]
        zones: String,
        /// Warm scrapes timed per step.
        #[arg(long, default_value_t = 20)]
        scrapes: usize,
        /// Also start this warren-daemon on the bench's root in each step, time its
        /// /metrics and read its memory (RSS), e.g. target/release/warren-daemon.
        #[arg(long, value_name = "EXE")]
        daemon: Option<PathBuf>,
        /// Where to write the results [default: bench/results/<date>-<hostname>-metrics].
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// For each N: N zones run a real workload at once (PostgreSQL + pgbench in each
    /// zone, or a web server in each bridged zone loaded open loop from the host);
    /// aggregate throughput, latency (http: response time), CPU, memory, swap and
    /// evictions; writes results.json, report.md, throughput.svg and latency.svg (http:
    /// and response_time.svg).
    #[command(after_help = "Examples:
  warren bench scale --workload pgbench --zones 1,2,4,8
  warren bench scale --workload pgbench --zones 1,2,4 --memory-per-zone 512M --oversubscribe 25 --agent
  warren bench scale --workload http --zones 1,2,4 --duration 10
  warren bench scale --workload pgbench --zones 4,8 --memory-per-zone 256M --oversubscribe 25 --agent-policy both
  warren bench scale --workload http --zones 1,2,4,8,16,32,64,128,256 --tune --pin
  warren bench scale --workload mariadb --zones 1,2 --duration 10 --warmup 5
  warren bench scale --study wasp --budget 2G

--study wasp (the OpenShift + wasp overcommit study, docs/studies.md) sets, unless given:
--workload pgbench,mariadb, --zones 1,2,4,8,12, --memory-per-zone BUDGET / 9.6 (12 zones
= 125 % of the budget), --cpu-per-zone CPUs x 1.125 / 12 (12 zones = 112.5 % of the
host's CPUs), --agent-policy evict with its swap triggers from the largest step that fits
the budget (8): 1.5 x the swap I/O that step averaged, at least 256 pages/s, --counterfactual
(the steps past it once more without the agent), --buffer-pct 50, --repeat 3, --warmup 10,
--calibrate.

--oversubscribe PCT gives the zones a memory budget B = N x memory-per-zone / (1 + PCT/100),
set as the memory limit of this state root's zone group cgroup (restored afterwards), so
the zones' caps add up to PCT % more than B; B must fit in the host's MemAvailable. With
PCT > 0 and no swap on the host, warren's swap file of N x memory-per-zone - B is enabled
for each step and removed after it. Without it, oversubscription is reported against the
host's MemAvailable.

--agent-policy evict runs the agent with suspend-first = false (it halts zones under
pressure), suspend with suspend-first = true (it suspends them; the bench resumes them
when the step's time is up), both runs each step twice, evict then suspend, and reports
evictions, suspensions, OOM kills and zones lost side by side. Ctrl-C (SIGINT, SIGTERM,
SIGHUP) stops the bench at its next check and removes everything it made.

pgbench needs the host's PostgreSQL (apt-get install postgresql; Debian 12 ships pgbench
in postgresql-15), mariadb the host's MariaDB and sysbench (apt-get install mariadb-server
sysbench); the bench installs nothing. http needs bridge networking (the bench's
own bridges, removed afterwards) and is reported as skipped without it; --server nginx
needs the host's nginx (apt-get install nginx-light). http's load is open loop: --rate
requests/s per zone scheduled by the clock, response time from the scheduled time; a
one-zone calibration step runs first and last (docs/bench.md, docs/studies.md).")]
    Scale {
        /// What each zone runs: pgbench, mariadb, http, or several databases
        /// (pgbench,mariadb: every step of each, in turn) [default with --study wasp:
        /// pgbench,mariadb].
        #[arg(
            long,
            value_name = "WORKLOAD[,WORKLOAD]",
            required_unless_present = "study"
        )]
        workload: Option<String>,
        /// A study's preset (see below): wasp = the OpenShift + wasp overcommit study.
        #[arg(long, value_parser = ["wasp"], requires = "budget")]
        study: Option<String>,
        /// One fixed memory budget for the zones' group at every step (with --study
        /// wasp: the host's memory of the study, each zone capped at BUDGET / 9.6).
        #[arg(long, value_name = "SIZE", conflicts_with = "oversubscribe")]
        budget: Option<String>,
        /// Zone counts, one step each [default: 1,2,4,8; --study wasp: 1,2,4,8,12].
        #[arg(long)]
        zones: Option<String>,
        /// memory.max of each zone [default: 512M; --study wasp: BUDGET / 9.6].
        #[arg(long, value_name = "SIZE")]
        memory_per_zone: Option<String>,
        /// cpu.max of each zone, in CPUs (default: uncapped).
        #[arg(long, value_name = "CPUS")]
        cpu_per_zone: Option<f64>,
        /// Give the zones a memory budget PCT % smaller than their caps add up to (see below).
        #[arg(long, value_name = "PCT")]
        oversubscribe: Option<f64>,
        /// Run `warren agent` (watching the zones' group) during each step; count evictions.
        #[arg(long)]
        agent: bool,
        /// What the agent does under pressure (implies --agent; default: evict).
        #[arg(long, value_enum, value_name = "POLICY")]
        agent_policy: Option<crate::bench::scale::AgentPolicy>,
        /// Each zone also holds this much anonymous memory beside its workload, every
        /// page touched once a second (a working set that makes the budget bite).
        #[arg(long, value_name = "SIZE")]
        working_set: Option<String>,
        /// Seconds of the timed run per step (after the warm-up).
        #[arg(long, default_value_t = 30)]
        duration: u64,
        /// Databases: seconds the client runs first in every zone, unmeasured
        /// [default: 0; --study wasp: 10].
        #[arg(long, value_name = "S")]
        warmup: Option<u64>,
        /// Run every workload's steps this many times, interleaved (A B A B ...), and
        /// report medians with min-max [default: 1; --study wasp: 3].
        #[arg(long, value_name = "N")]
        repeat: Option<usize>,
        /// Databases: a one-zone calibration step per workload first and last (the
        /// machine's noise) [default with --study wasp or --repeat > 1].
        #[arg(long)]
        calibrate: bool,
        /// Set the agent's swap-in/out triggers from the swap I/O measured at this step,
        /// for the larger steps [--study wasp: the largest step that fits the budget].
        #[arg(long, value_name = "N")]
        agent_thresholds_from: Option<usize>,
        /// Run every step past --agent-thresholds-from (every step without it) once more
        /// with the agent off: what the agent cost and saved [default with --study wasp].
        #[arg(long)]
        counterfactual: bool,
        /// shared_buffers / innodb_buffer_pool_size as % of the zone's memory
        /// [default: PostgreSQL 25, MariaDB 50; --study wasp: 50].
        #[arg(long, value_name = "PCT")]
        buffer_pct: Option<u32>,
        /// mariadb: rows in each of sysbench's 4 tables (about 0.4 MiB per 1,000 rows).
        #[arg(long, value_name = "ROWS", default_value_t = 50_000)]
        sysbench_rows: u32,
        /// pgbench connections per zone (http: the load is --rate, open loop).
        #[arg(long, default_value_t = 2)]
        clients: usize,
        /// pgbench scale factor (about 15 MiB of tables per unit).
        #[arg(long, default_value_t = 4)]
        pgbench_scale: u32,
        /// http: the zones' bridge (removed afterwards if unused).
        #[arg(long, default_value = "wbench1")]
        bridge: String,
        /// http: the bridge's subnet.
        #[arg(long, default_value = "10.237.0.0/16")]
        subnet: String,
        #[command(flatten)]
        http: ScaleHttpArgs,
        /// Where to write the results [default: bench/results/<date>-<hostname>-<workload>].
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// `bench scale --workload http`: the KVM consolidation study's knobs (docs/studies.md).
#[derive(Args, Debug)]
pub struct ScaleHttpArgs {
    /// http: the web server in each zone (busybox httpd, or the host's nginx).
    #[arg(long, value_enum, default_value_t = crate::bench::scale::http::Server::Busybox)]
    pub server: crate::bench::scale::http::Server,
    /// http: requests per second per zone, scheduled by the clock (open loop).
    #[arg(long, value_name = "R", default_value_t = 5.0)]
    pub rate: f64,
    /// http: raise the network sysctls `warren doctor` names for the largest step, for
    /// the run (written back afterwards).
    #[arg(long)]
    pub tune: bool,
    /// http: pin zone i to CPU i mod #CPUs (cpuset).
    #[arg(long)]
    pub pin: bool,
    /// http: zones per bridge; more zones go to further bridges (a bridge takes 1,023).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub zones_per_bridge: usize,
    /// http: skip the one-zone calibration step at the start and the end.
    #[arg(long)]
    pub no_calibration: bool,
}

#[derive(Args, Debug)]
pub struct Targets {
    /// Zone names.
    pub zones: Vec<String>,
    /// Every zone (boot: installed ones; halt: running ones).
    #[arg(long, conflicts_with = "zones")]
    pub all: bool,
}

/// How many zones `boot`, `clone` and `halt` work on at once (zone::pipeline).
#[derive(Args, Debug)]
pub struct Pipeline {
    /// Zones in flight at once, in forked worker processes that each take one zone
    /// after another, results printed in the zones' order [default: 8 per CPU, at
    /// most 32; 1: one after another, in this process].
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
}

/// `warren clone --help`: how to make many.
pub const CLONE_HELP: &str = "Examples:
  warren clone web web2                 one clone
  warren clone web web{1..100}          100 clones (the shell expands the braces), 16 at a time
  warren clone web db1 db2 --jobs 1     one after another
  warren clone --snapshot before-upgrade web web-old    from web's snapshot

Each NEW gets its own id range and copy of SRC's private layer; a failing NEW (a taken
name, a full disk) is reported and the others go on; the exit status is 1 if any failed.";

const METRICS_HELP: &str = "Examples:
  warren metrics
  warren metrics --format prometheus --output /var/lib/node_exporter/textfile/warren.prom
  warren metrics --doctor-zones 5000 --agent-config /etc/warren/agent.toml

The text is OpenMetrics 1.0 (what Prometheus scrapes natively) or, with --format prometheus,
the 0.0.4 text format that node_exporter's textfile collector reads. A figure the kernel does
not give here is left out, never shown as 0.";

/// `warren metrics`.
#[derive(Args, Debug)]
pub struct MetricsArgs {
    /// Write to this file (atomically: a temporary file renamed over it) instead of
    /// printing.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// openmetrics or prometheus (the 0.0.4 text format).
    #[arg(long, default_value = "openmetrics", value_parser = ["openmetrics", "prometheus"])]
    pub format: String,
    /// The density the doctor's verdicts are judged against (as `warren doctor --zones`).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub doctor_zones: u64,
    /// Leave the doctor's verdicts out.
    #[arg(long)]
    pub no_doctor: bool,
    /// Print only the doctor's verdicts, as JSON (internal: the daemon runs this in a
    /// child for its /metrics, as its threads must not fork the doctor's checks).
    #[arg(long, hide = true, conflicts_with_all = ["no_doctor", "format"])]
    pub doctor_row: bool,
    /// The agent's config (TOML), for what it watches and its triggers [default: its
    /// defaults].
    #[arg(long, value_name = "FILE")]
    pub agent_config: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Zones planned on this host.
    #[arg(long, default_value_t = 1000)]
    pub zones: u64,
    /// Processes per zone besides its init.
    #[arg(long, default_value_t = 1)]
    pub procs_per_zone: u64,
    /// Tasks (threads) per zone, all processes included [default: 1 + procs-per-zone].
    #[arg(long)]
    pub threads_per_zone: Option<u64>,
    /// Memory each zone's programs use, on top of warren's 0.5 MiB per zone (e.g. 64M).
    #[arg(long, value_name = "SIZE")]
    pub mem_per_zone: Option<String>,
    /// How the zones are networked.
    #[arg(long, value_enum, default_value_t = NetPlan::None)]
    pub net: NetPlan,
    /// With --net bridge: new connections per second each zone gets from the host
    /// (checks somaxconn, the ephemeral port range, TIME_WAIT buckets).
    #[arg(long, value_name = "R", default_value_t = 0)]
    pub rate_per_zone: u64,
    /// Show the note of every limit, not only of those that are not ok.
    #[arg(long, short)]
    pub verbose: bool,
    /// Raise the sysctls the plan needs, now and at boot (never lowers a value).
    #[arg(long, conflicts_with = "probe")]
    pub fix: bool,
    /// With --fix: print the changes without making them.
    #[arg(long, requires = "fix")]
    pub dry_run: bool,
    /// Where --fix writes 90-warren.conf.
    #[arg(long, hide = true, value_name = "DIR", default_value = fix::DEFAULT_SYSCTL_DIR)]
    pub sysctl_dir: PathBuf,
    /// Measure instead: create processes or threads until --max or the first failure.
    #[arg(long, value_enum)]
    pub probe: Option<probe::ProbeKind>,
    /// With --probe: how many to create at most.
    #[arg(long, default_value_t = 1000, requires = "probe")]
    pub max: u64,
    /// With --probe: the pids.max of the probe's cgroup [default: --max + 8].
    #[arg(long, requires = "probe")]
    pub cap: Option<u64>,
}

#[derive(Subcommand, Debug)]
pub enum SnapshotCmd {
    /// Snapshot a zone (installed or running; default NAME: the UTC time).
    #[command(after_help = "Example: warren snapshot create web1 before-upgrade")]
    Create { zone: String, name: Option<String> },
    /// List snapshots with their sizes (of one zone, or of all).
    List { zone: Option<String> },
    /// Put a halted zone's layer back as it was in the snapshot (the snapshot stays).
    #[command(
        after_help = "Example: warren halt web1 && warren snapshot restore web1 before-upgrade"
    )]
    Restore { zone: String, name: String },
    /// Delete a snapshot.
    Delete { zone: String, name: String },
}

#[derive(Subcommand, Debug)]
pub enum TemplateCmd {
    /// Create a template.
    #[command(
        after_help = "Examples:\n  warren template create host --from host\n  warren template create bb --busybox\n  warren template create deb --from-tar rootfs.tar.gz\n  warren template create web --from-oci web.tar --image localhost/web:1"
    )]
    Create {
        name: String,
        /// "host": a sparse root sharing the host's read-only /usr.
        #[arg(long, value_parser = ["host"], group = "source")]
        from: Option<String>,
        /// Copy a directory holding a root filesystem.
        #[arg(long, value_name = "PATH", group = "source")]
        from_dir: Option<PathBuf>,
        /// Unpack a tar or tar.gz of a root filesystem.
        #[arg(long, value_name = "FILE", group = "source")]
        from_tar: Option<PathBuf>,
        /// A root of the static busybox binary (apt-get install busybox-static).
        #[arg(long, group = "source")]
        busybox: bool,
        /// An OCI image: an OCI image layout (directory or tar, as 'podman save
        /// --format oci-archive' or 'skopeo copy ... oci-archive:' write) or a
        /// docker-archive tar ('podman save', 'docker save'). Its Entrypoint/Cmd, Env,
        /// WorkingDir and User become its zones' defaults (docs/images.md).
        #[arg(long, value_name = "ARCHIVE", group = "source")]
        from_oci: Option<PathBuf>,
        /// With --from-oci: which image of the archive (its ref.name or RepoTag, such
        /// as localhost/web:1); needed when it holds several.
        #[arg(long, value_name = "REF", requires = "from_oci")]
        image: Option<String>,
        /// Publish a halted zone: its merged root (template + private layer).
        #[arg(long, value_name = "ZONE", group = "source")]
        from_zone: Option<String>,
    },
    /// List templates.
    List,
    /// Show one template: its kind, source and, for an OCI image, the image's
    /// reference, digest and the zone defaults its config gives.
    Info { name: String },
    /// Delete a template (refused while zones use it).
    Delete { name: String },
}

#[derive(Subcommand, Debug)]
pub enum ConfigCmd {
    /// Print a zone's config (TOML, or JSON with --json).
    Show { zone: String },
    /// Set keys: warren config set web1 memory.max=1G cpu.max=0.5
    #[command(after_help = dayto::LIVE_HELP)]
    Set {
        zone: String,
        #[arg(required = true, value_name = "KEY=VALUE")]
        assignments: Vec<String>,
        #[command(flatten)]
        when: When,
    },
    /// Edit the config file in $EDITOR (on a copy; validated, then written atomically).
    ///
    /// Also repairs a config.toml that is missing, not UTF-8 or not valid TOML: the
    /// copy holds what could be read. An invalid result is not written; the copy is kept.
    Edit { zone: String },
    /// Remove keys (back to their defaults; live on a running zone as for set).
    Unset {
        zone: String,
        #[arg(required = true)]
        keys: Vec<String>,
        #[command(flatten)]
        when: When,
    },
    /// List the config keys: an example, the default, whether it changes live, the meaning.
    Keys,
    /// Print one key's value in a zone's config, or its default when unset.
    Get { zone: String, key: String },
}

/// Where `config set` / `unset` apply (zonecfg -r, Incus's live update).
#[derive(Args, Debug)]
pub struct When {
    /// Change the running zone only; config.toml stays as it is (live keys only).
    #[arg(long, conflicts_with = "next_boot")]
    pub live_only: bool,
    /// Change config.toml only; the running zone keeps its limits until it reboots.
    #[arg(long)]
    pub next_boot: bool,
}

impl When {
    pub fn apply_to(&self) -> zone::ApplyTo {
        match (self.live_only, self.next_boot) {
            (true, _) => zone::ApplyTo::LiveOnly,
            (_, true) => zone::ApplyTo::NextBoot,
            _ => zone::ApplyTo::Both,
        }
    }
}

/// `--wait`: a number of seconds, 0 or more (fractions allowed).
fn parse_wait(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s.trim().parse().map_err(|_| {
        format!("{s:?} is not a number of seconds; use e.g. --wait 30 or --wait 0.5")
    })?;
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!(
            "{s:?} is out of range; use 0 (do not wait) up to 1000000000 seconds"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// `warren daemon --help`.
pub const DAEMON_HELP: &str = "\
The daemon serves the same state root as the CLI, under the same per-zone locks: the
two never disagree, and the CLI keeps working without it. It holds nothing per zone:
stopping or killing it leaves every zone running. Root may read and write; members of
group 'warren' may only read (GET); anyone else is refused (403). Under systemd, use
contrib/warren.socket (socket activation) and contrib/warren.service.

Examples:
  warren daemon
  warren daemon --socket /tmp/w.sock
  curl --unix-socket /run/warren/warren.sock http://warren/1.0/zones
  warren daemon --listen-https 0.0.0.0:8443     # remote access, client certs only

Remote access (the TLS client):
  warren remote trust-token [--name N] [--read-only] [--ttl S]   # on the server
  warren remote add NAME https://HOST:PORT --token TOKEN          # on a client
  warren remote list | remove NAME
  warren remote trust-list | trust-remove NAME|FINGERPRINT                # on the server
  warren --remote NAME list | info [ZONE] | boot ZONE | halt ZONE | reboot ZONE";
