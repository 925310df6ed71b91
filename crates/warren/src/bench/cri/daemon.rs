//! A private containerd 1.6 with its CRI plugin on, for the CRI test and bench.
//!
//! It runs in its own mount, pid and network namespaces (`unshare`): a fresh tmpfs on
//! /run (the runc v2 shim puts its sockets in /run/containerd/s whatever `state`
//! says) and on /var/lib (CNI's result cache, /var/lib/cni, stays in the namespace);
//! killing the daemon, the pid namespace's init, ends every shim and container; the
//! pods' network (a CNI `bridge` with `host-local` addresses, Debian's
//! containernetworking-plugins) and the streaming server (127.0.0.1) live in the
//! namespace's own network stack, so nothing reaches the host's. `hostNetwork` pods
//! share that namespace. Its root, socket, CNI config and the container logs are in
//! the caller's directory; its state on the namespace's /run ([`STATE`]), as on a host.
//!
//! The RuntimeClass handlers are the rows of [`HANDLERS`]: the runc v2 shim with
//! `runc` (Debian's runc) and with `warren` (BinaryName = warren-oci, a symlink to
//! the warren binary), and `warren-shim`, warren's own shim
//! (`io.containerd.warren.v1`: `containerd-shim-warren-v1`, found through a
//! symlink in the daemon's `bin/`, first on its PATH; see [`shim_binary`]).
//! containerd's
//! environment holds `WARREN_OCI_CGROUP_NEST=1`; pods are given cgroup parents
//! relative to the runtime's own cgroup ([`CriContainerd::cgroup_parent`]), so both
//! runtimes make their cgroups beneath the caller's own. `restrict_oom_score_adj`
//! is on: the host gives no CAP_SYS_RESOURCE.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::bench::cgroups;
use crate::bench::system::Failure;

/// The containerd namespace the CRI plugin uses.
pub const K8S_NS: &str = "k8s.io";
/// The CNI network of the pods (in the daemon's network namespace only).
pub const POD_SUBNET: &str = "10.239.0.0/24";

/// A running private containerd. Dropping it ends the daemon with everything in its
/// namespaces and removes the cgroups made beneath [`CriContainerd::cgroup_parent`].
pub struct CriContainerd {
    dir: PathBuf,
    unshare: Child,
    /// Unique per daemon: every pod's cgroup parent starts with it.
    prefix: String,
}

/// How a private containerd is set up beyond the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The snapshotter of the images and the pods: [`SNAPSHOTTERS`].
    pub snapshotter: String,
    /// Log level debug (containerd's per-event lines and its shims' debug lines, which
    /// [`super::phases`] reads).
    pub debug: bool,
    /// warren's shim serves every pod from one process ([`SHIM_GROUP_ENV`] = `node`
    /// in containerd's environment) instead of one per pod.
    pub shim_per_node: bool,
}

/// The snapshotters a private containerd may use: `native` copies an image's tree
/// for each container, `overlayfs` mounts it.
pub const SNAPSHOTTERS: &[&str] = &["native", "overlayfs"];

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            snapshotter: "native".into(),
            debug: false,
            shim_per_node: false,
        }
    }
}

/// containerd's `state` (bundles, the runtimes' state, pid files, the shims'
/// sockets): in /run, on the daemon's own tmpfs, as a host's containerd keeps it
/// (`/run/containerd`), not on disk beside `root`, where each pod would pay for
/// writes and fsyncs no host pays.
pub const STATE: &str = "/run/containerd";

/// containerd's config.toml for a daemon in `p`.
fn config(p: &Path, warren_oci: &Path, setup: &Setup) -> String {
    let cri = r#"plugins."io.containerd.grpc.v1.cri""#;
    // Every snapshotter but the one in use is off (fewer plugins to load).
    let off: String = SNAPSHOTTERS
        .iter()
        .filter(|s| **s != setup.snapshotter)
        .map(|s| format!(", \"io.containerd.snapshotter.v1.{s}\""))
        .collect();
    let level = if setup.debug { "debug" } else { "info" };
    format!(
        r#"version = 2
root = "{p}/root"
state = "{state}"
disabled_plugins = ["io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"{off}]
[debug]
  level = "{level}"
[grpc]
  address = "{p}/containerd.sock"
[ttrpc]
  address = "{p}/containerd.sock.ttrpc"
[{cri}]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [{cri}.containerd]
    snapshotter = "{snapshotter}"
    default_runtime_name = "runc"
{runtimes}  [{cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{p}/cni"
"#,
        p = p.display(),
        state = STATE,
        pause = super::image::PAUSE,
        snapshotter = setup.snapshotter,
        runtimes = HANDLERS
            .iter()
            .map(|h| h.toml(warren_oci))
            .collect::<String>(),
    )
}

/// A RuntimeClass handler of the private containerd: a row of [`HANDLERS`].
#[derive(Debug, Clone, Copy)]
pub struct Handler {
    /// The handler's name (a RuntimeClass's `handler`, the CRI's `runtime_handler`).
    pub name: &'static str,
    /// containerd's `runtime_type`: the shim (`io.containerd.runc.v2` is
    /// `containerd-shim-runc-v2` on PATH).
    pub runtime_type: &'static str,
    /// The runc shim's BinaryName: a program on PATH, or [`WARREN_OCI`] for the
    /// symlink to the warren binary; empty for a shim that takes no runc options.
    pub binary: &'static str,
}

/// The runtime_type of warren's own shim (`containerd-shim-warren-v1` on PATH).
pub const WARREN_SHIM_TYPE: &str = "io.containerd.warren.v1";
/// The binary containerd looks for on its PATH for [`WARREN_SHIM_TYPE`].
pub const WARREN_SHIM: &str = "containerd-shim-warren-v1";
/// Names another build of the shim (`--release`, to measure).
pub const WARREN_SHIM_ENV: &str = "WARREN_SHIM_BINARY";
/// containerd-shim-warren's grouping of pods (its `service::GROUP_ENV`): `node` for
/// one shim serving every pod, else one per pod.
pub const SHIM_GROUP_ENV: &str = "WARREN_SHIM_GROUP";

/// warren's shim: `$WARREN_SHIM_BINARY`, or `containerd-shim-warren-v1` beside the
/// warren binary `warren` (where `cargo build -p containerd-shim-warren` puts it).
pub fn shim_binary(warren: &Path) -> PathBuf {
    std::env::var_os(WARREN_SHIM_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| warren.parent().unwrap_or(Path::new(".")).join(WARREN_SHIM))
}

/// Stands for the warren-oci symlink in [`Handler::binary`].
pub const WARREN_OCI: &str = "<warren-oci>";

/// The handlers, side by side.
pub const HANDLERS: &[Handler] = &[
    Handler {
        name: "runc",
        runtime_type: "io.containerd.runc.v2",
        binary: "runc",
    },
    Handler {
        name: "warren",
        runtime_type: "io.containerd.runc.v2",
        binary: WARREN_OCI,
    },
    Handler {
        name: "warren-shim",
        runtime_type: WARREN_SHIM_TYPE,
        binary: "",
    },
    // The same shim, its containerd started with one shim per node
    // ([`Setup::shim_per_node`], [`Handler::setup`]).
    Handler {
        name: "warren-shim-node",
        runtime_type: WARREN_SHIM_TYPE,
        binary: "",
    },
];

impl Handler {
    /// The handler named `name`, if it is one.
    pub fn named(name: &str) -> Option<&'static Handler> {
        HANDLERS.iter().find(|h| h.name == name)
    }

    /// Is it warren's own shim (either grouping)?
    pub fn is_warren_shim(&self) -> bool {
        self.runtime_type == WARREN_SHIM_TYPE
    }

    /// The setup of a containerd that runs this handler's pods: `base`, with one
    /// shim per node for `warren-shim-node`.
    pub fn setup(&self, base: &Setup) -> Setup {
        Setup {
            shim_per_node: self.name == "warren-shim-node",
            ..base.clone()
        }
    }

    /// Its `[...containerd.runtimes.<name>]` table; the runtime's state in [`STATE`].
    fn toml(&self, warren_oci: &Path) -> String {
        let t = format!(
            r#"plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{}"#,
            self.name
        );
        if self.binary.is_empty() {
            // Not the runc shim: containerd would decode runc's options for it.
            return format!(
                "    [{t}]\n      runtime_type = \"{}\"\n",
                self.runtime_type
            );
        }
        let binary = if self.binary == WARREN_OCI {
            warren_oci.display().to_string()
        } else {
            self.binary.to_string()
        };
        format!(
            "    [{t}]\n      runtime_type = \"{}\"\n      [{t}.options]\n        \
             BinaryName = \"{binary}\"\n        Root = \"{STATE}/{}-root\"\n",
            self.runtime_type, self.name
        )
    }
}

fn cni_config(p: &Path) -> String {
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": "warren-cri",
        "plugins": [
            {"type": "bridge", "bridge": "wcri0", "isGateway": true, "ipMasq": false,
             "ipam": {"type": "host-local", "subnet": POD_SUBNET,
                      "dataDir": p.join("cni-ipam")}},
            {"type": "loopback"}
        ]
    })
    .to_string()
}

/// The kubelet's part on cgroup v2: the pods' cgroups are made beneath this process's
/// own (their parents are relative), so its subtree must hand them the controllers;
/// the kubelet's `kubepods` is prepared the same way. On v2 that needs this cgroup
/// free of processes, which containerd and its shims, in a pid namespace of their
/// own, cannot arrange (they see the others as pid 0): so this process does it before
/// starting containerd, as warren itself does for zones (`cgroups::delegate`: itself
/// and its siblings move to a leaf, then the controllers are enabled). On v1
/// (controllers in hierarchies of their own) nothing is needed.
pub fn prepare_pod_cgroups(proc_root: &Path) -> Result<(), Failure> {
    let hiers = cgroups::own_hierarchies(proc_root)?;
    if hiers
        .iter()
        .any(|h| h.key.split(',').any(|c| c == "memory"))
    {
        return Ok(());
    }
    let Some(unified) = hiers.iter().find(|h| h.key.is_empty()) else {
        return Ok(());
    };
    let base = crate::cgroups::delegate::base_of(&unified.own);
    let available = std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    let wanted: Vec<&str> = ["cpu", "memory", "pids"]
        .into_iter()
        .filter(|c| available.split_whitespace().any(|a| a == *c))
        .collect();
    crate::cgroups::delegate::ensure(&base, &wanted)
        .map_err(|e| Failure::Failed(format!("the pods' cgroups beneath {}: {e}", base.display())))
}

/// Whether `bin` is on PATH.
fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).exists()))
}

impl CriContainerd {
    /// Start one in `dir` (empty, the caller's; removed by the caller after the drop)
    /// with `warren` as warren-oci, and import the busybox and pause images.
    pub fn start(dir: &Path, warren: &Path) -> Result<CriContainerd, Failure> {
        Self::start_with(dir, warren, &Setup::default())
    }

    /// [`CriContainerd::start`] set up as `setup` says.
    pub fn start_with(dir: &Path, warren: &Path, setup: &Setup) -> Result<CriContainerd, Failure> {
        if !SNAPSHOTTERS.contains(&setup.snapshotter.as_str()) {
            return Err(Failure::Failed(format!(
                "snapshotter {:?}: use one of {}",
                setup.snapshotter,
                SNAPSHOTTERS.join(", ")
            )));
        }
        for (bin, pkg) in [
            ("containerd", "containerd"),
            ("ctr", "containerd"),
            ("containerd-shim-runc-v2", "containerd"),
            ("runc", "runc"),
            ("unshare", "util-linux"),
            ("nsenter", "util-linux"),
            ("ip", "iproute2"),
        ] {
            if !on_path(bin) {
                return Err(Failure::Failed(format!(
                    "{bin} is not installed: apt-get install {pkg} (scripts/test.sh does)"
                )));
            }
        }
        if !Path::new("/usr/lib/cni/bridge").exists() {
            return Err(Failure::Failed(
                "/usr/lib/cni/bridge is missing: apt-get install containernetworking-plugins \
                 (scripts/test.sh does)"
                    .into(),
            ));
        }
        prepare_pod_cgroups(Path::new("/proc"))?;
        let oci = dir.join("warren-oci");
        std::os::unix::fs::symlink(warren, &oci).map_err(Failure::io(&oci))?;
        for d in ["cni", "cni-ipam", "logs", "bin"] {
            let d = dir.join(d);
            std::fs::create_dir_all(&d).map_err(Failure::io(&d))?;
        }
        let write = |name: &str, text: String| {
            let f = dir.join(name);
            std::fs::write(&f, text).map_err(Failure::io(&f))
        };
        write("config.toml", config(dir, &oci, setup))?;
        // warren's shim on containerd's PATH. A missing build is not an error here
        // (the runc handlers work without it); a pod of handler `warren-shim` then
        // fails naming the binary, and its callers check first ([`shim_binary`]).
        let shim = shim_binary(warren);
        let link = dir.join("bin").join(WARREN_SHIM);
        std::os::unix::fs::symlink(&shim, &link).map_err(Failure::io(&link))?;
        let mut path = vec![dir.join("bin")];
        path.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let path = std::env::join_paths(path)
            .map_err(|e| Failure::Failed(format!("PATH with {}: {e}", dir.display())))?;
        write("cni/10-warren-cri.conflist", cni_config(dir))?;
        let log_path = dir.join("containerd.log");
        let log = std::fs::File::create(&log_path).map_err(Failure::io(&log_path))?;
        let err = log.try_clone().map_err(Failure::io(&log_path))?;
        let script = format!(
            "ip link set lo up && mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/lib \
             && exec containerd -c {}/config.toml",
            dir.display()
        );
        // The grouping is the setup's, whatever the caller's environment says.
        let mut unshare = Command::new("unshare");
        if setup.shim_per_node {
            unshare.env(SHIM_GROUP_ENV, "node");
        } else {
            unshare.env_remove(SHIM_GROUP_ENV);
        }
        let unshare = unshare
            .env(crate::oci::cgroup::NEST_ENV, "1")
            .env("PATH", path)
            .args([
                "--mount",
                "--propagation",
                "private",
                "--pid",
                "--net",
                "--fork",
                "--kill-child=SIGKILL",
                "--mount-proc",
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(Failure::spawn("unshare"))?;
        let mut c = CriContainerd {
            dir: dir.to_path_buf(),
            unshare,
            prefix: format!("warren-cri-{}-{}", std::process::id(), unique()),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if c.ctr(&["version"]).is_ok() && c.socket().exists() {
                break;
            }
            if let Ok(Some(st)) = c.unshare.try_wait() {
                return Err(Failure::Failed(format!(
                    "containerd exited ({st}); its log:\n{}",
                    c.log()
                )));
            }
            if Instant::now() > deadline {
                return Err(Failure::Failed(format!(
                    "containerd did not answer on {} within 60s; its log:\n{}",
                    c.socket().display(),
                    c.log()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let images = super::image::build(dir)?;
        c.ctr(&[
            "images",
            "import",
            "--snapshotter",
            &setup.snapshotter,
            &images.to_string_lossy(),
        ])?;
        Ok(c)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }
    /// Where pods' logs go (`log_directory` of a pod: a directory beneath it).
    pub fn logs(&self) -> PathBuf {
        self.dir.join("logs")
    }
    /// The daemon's whole log so far.
    pub fn full_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }
    /// The daemon's log so far (for failure messages).
    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(60).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
    /// The daemon's host pid: unshare's only child.
    pub fn daemon_pid(&self) -> Option<i32> {
        let pid = self.unshare.id();
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }
    /// A pod cgroup parent relative to the runtime's own cgroup, unique to this daemon
    /// (runc and warren-oci make relative paths beneath their own cgroup, which is the
    /// caller's).
    pub fn cgroup_parent(&self, pod: &str) -> String {
        format!("{}-{pod}", self.prefix)
    }
    /// `ctr -n k8s.io ARGS` against this daemon; its stdout. Err: what it printed.
    pub fn ctr(&self, args: &[&str]) -> Result<String, Failure> {
        let o = Command::new("ctr")
            .arg("-a")
            .arg(self.socket())
            .args(["-n", K8S_NS])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(Failure::spawn("ctr"))?;
        if !o.status.success() {
            return Err(Failure::Command {
                command: format!("ctr {}", args.join(" ")),
                status: o.status,
                stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }
    /// Host pids of every process in the daemon's pid namespace (daemon, shims,
    /// containers), with their command names.
    pub fn processes(&self) -> Vec<(i32, String)> {
        self.daemon_pid()
            .map(descendants)
            .unwrap_or_default()
            .into_iter()
            .map(|pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                (pid, comm.trim().to_string())
            })
            .collect()
    }
    /// What the memory cgroups of this daemon's pods hold now, summed over each pod's
    /// cgroup parent (its sandbox and containers beneath it): the memory hierarchy
    /// (v1) or the unified one (v2, where it has the memory controller).
    pub fn pod_memory(&self) -> PodCgroupMemory {
        let hiers = cgroups::own_hierarchies(Path::new("/proc")).unwrap_or_default();
        let v1 = hiers
            .iter()
            .find(|h| h.key.split(',').any(|c| c == "memory"));
        let (h, v1) = match v1 {
            Some(h) => (h, true),
            None => match hiers.iter().find(|h| h.key.is_empty()) {
                Some(h) => (h, false),
                None => return PodCgroupMemory::default(),
            },
        };
        let mut total = PodCgroupMemory::default();
        // v2: the pods are beside this process's leaf ([`prepare_pod_cgroups`]).
        let own = crate::cgroups::delegate::base_of(&h.own);
        for base in [own.clone(), own.join(crate::oci::cgroup::GROUP)] {
            for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
                if !e.file_name().to_string_lossy().starts_with(&self.prefix) {
                    continue;
                }
                let d = e.path();
                let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap_or_default();
                let num = |f: &str| read(f).trim().parse::<u64>().ok();
                let m = if v1 {
                    cgroup_memory(
                        true,
                        &read("memory.stat"),
                        num("memory.usage_in_bytes").unwrap_or(0),
                        num("memory.kmem.usage_in_bytes"),
                    )
                } else {
                    cgroup_memory(
                        false,
                        &read("memory.stat"),
                        num("memory.current").unwrap_or(0),
                        None,
                    )
                };
                total.add(&m);
                total.memcgs += memcgs_at(&d);
            }
        }
        total
    }

    /// The cgroup directories of this daemon's pods (both runtimes, every hierarchy).
    pub fn pod_cgroup_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        for h in cgroups::own_hierarchies(Path::new("/proc")).unwrap_or_default() {
            let own = crate::cgroups::delegate::base_of(&h.own);
            for base in [own.clone(), own.join(crate::oci::cgroup::GROUP)] {
                for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
                    if e.file_name().to_string_lossy().starts_with(&self.prefix) {
                        cgroups::collect_dirs(&e.path(), &mut dirs);
                    }
                }
            }
        }
        dirs
    }
}

/// What pods' memory cgroups hold (bytes), summed over the pods' cgroup parents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PodCgroupMemory {
    /// Pod cgroups read.
    pub pods: u64,
    /// v1 memory.usage_in_bytes / v2 memory.current: everything charged (page
    /// cache and kernel memory included).
    pub usage_bytes: u64,
    /// Anonymous pages (v1 total_rss, v2 anon).
    pub anon_bytes: u64,
    pub shmem_bytes: u64,
    /// Kernel memory charged to them (v1 memory.kmem.usage_in_bytes; v2 the
    /// memory.stat kernel rows: slab, kernel_stack, pagetables, percpu, sock).
    pub kernel_bytes: u64,
    /// Memory cgroups at and below the pods' cgroup parents (the parent, its
    /// sandbox's, each container's, and whatever a runtime nests): each costs the
    /// kernel per-memcg state outside them (see [`super::memcg`]).
    pub memcgs: u64,
}

impl PodCgroupMemory {
    fn add(&mut self, o: &PodCgroupMemory) {
        self.pods += o.pods;
        self.usage_bytes += o.usage_bytes;
        self.anon_bytes += o.anon_bytes;
        self.shmem_bytes += o.shmem_bytes;
        self.kernel_bytes += o.kernel_bytes;
        self.memcgs += o.memcgs;
    }
    /// What of it the host counts as pinned (not reclaimable page cache): anon,
    /// shmem, kernel.
    pub fn pinned_bytes(&self) -> u64 {
        self.anon_bytes + self.shmem_bytes + self.kernel_bytes
    }
}

/// Memory cgroups at and below `dir` (a directory with a `memory.stat`: every one
/// in a v1 memory hierarchy; in v2 those the memory controller is enabled for).
fn memcgs_at(dir: &Path) -> u64 {
    let mut dirs = Vec::new();
    cgroups::collect_dirs(dir, &mut dirs);
    dirs.iter()
        .filter(|d| d.join("memory.stat").is_file())
        .count() as u64
}

/// One pod cgroup's memory from its memory.stat text, its usage and (v1) its kmem
/// usage.
fn cgroup_memory(v1: bool, stat: &str, usage: u64, kmem: Option<u64>) -> PodCgroupMemory {
    let field = |k: &str| {
        stat.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    if v1 {
        PodCgroupMemory {
            pods: 1,
            usage_bytes: usage,
            anon_bytes: field("total_rss"),
            shmem_bytes: field("total_shmem"),
            kernel_bytes: kmem.unwrap_or(0),
            memcgs: 0,
        }
    } else {
        PodCgroupMemory {
            pods: 1,
            usage_bytes: usage,
            anon_bytes: field("anon"),
            shmem_bytes: field("shmem"),
            kernel_bytes: ["slab", "kernel_stack", "pagetables", "percpu", "sock"]
                .iter()
                .map(|k| field(k))
                .sum(),
            memcgs: 0,
        }
    }
}

/// A counter that makes two daemons of one process distinct.
fn unique() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

impl Drop for CriContainerd {
    fn drop(&mut self) {
        // SIGKILL to the pid namespace's init ends every shim and container in it; with
        // the last of them the namespace's mounts and network (bridge, veths) go.
        if let Some(pid) = self.daemon_pid() {
            let _ = warren_sys::proc::kill(pid, 9);
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
        cgroups::remove_dirs(self.pod_cgroup_dirs(), Duration::from_millis(500));
        // warren-oci's own group goes with its last container (busy otherwise).
        for h in cgroups::own_hierarchies(Path::new("/proc")).unwrap_or_default() {
            let _ = std::fs::remove_dir(h.own.join(crate::oci::cgroup::GROUP));
        }
        let _ = std::io::stderr().flush();
    }
}

/// `root` and every process beneath it (through each thread's `children` list in /proc),
/// e.g. a private containerd's pid namespace seen from the host.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        out.push(pid);
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            todo.extend(
                children
                    .split_whitespace()
                    .filter_map(|s| s.parse::<i32>().ok()),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_has_a_runtime_table_per_handler() {
        let c = config(
            Path::new("/t"),
            Path::new("/t/warren-oci"),
            &Setup::default(),
        );
        let v: toml::Value = toml::from_str(&c).unwrap();
        let cri = &v["plugins"]["io.containerd.grpc.v1.cri"];
        assert_eq!(cri["containerd"]["snapshotter"].as_str(), Some("native"));
        assert_eq!(v["debug"]["level"].as_str(), Some("info"));
        let off = v["disabled_plugins"].as_array().unwrap();
        assert!(off
            .iter()
            .any(|p| p.as_str() == Some("io.containerd.snapshotter.v1.overlayfs")));
        let c = config(
            Path::new("/t"),
            Path::new("/t/warren-oci"),
            &Setup {
                snapshotter: "overlayfs".into(),
                debug: true,
                shim_per_node: false,
            },
        );
        let v: toml::Value = toml::from_str(&c).unwrap();
        assert_eq!(
            v["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["snapshotter"].as_str(),
            Some("overlayfs")
        );
        assert_eq!(v["debug"]["level"].as_str(), Some("debug"));
        let off = v["disabled_plugins"].as_array().unwrap();
        assert!(off
            .iter()
            .any(|p| p.as_str() == Some("io.containerd.snapshotter.v1.native")));
        assert!(!off
            .iter()
            .any(|p| p.as_str() == Some("io.containerd.snapshotter.v1.overlayfs")));
        assert_eq!(cri["restrict_oom_score_adj"].as_bool(), Some(true));
        let rt = &cri["containerd"]["runtimes"];
        for h in HANDLERS {
            assert_eq!(rt[h.name]["runtime_type"].as_str(), Some(h.runtime_type));
        }
        assert_eq!(
            rt["warren"]["options"]["BinaryName"].as_str(),
            Some("/t/warren-oci")
        );
        assert_eq!(
            rt["runc"]["options"]["Root"].as_str(),
            Some("/run/containerd/runc-root")
        );
        assert_eq!(v["state"].as_str(), Some(STATE));
        assert_eq!(v["root"].as_str(), Some("/t/root"));
        assert!(rt["warren-shim"].get("options").is_none(), "{c}");
    }

    #[test]
    fn memory_cgroups_of_a_pod_are_the_directories_with_memory_stat() {
        // A pod's parent, its sandbox's and a container's cgroups, and one nested
        // directory without the memory controller (v2: not enabled for it).
        let t = tempfile::tempdir().unwrap();
        let pod = t.path().join("pod");
        for d in ["", "sandbox", "ctr", "ctr/nomem"] {
            std::fs::create_dir_all(pod.join(d)).unwrap();
            if d != "ctr/nomem" {
                std::fs::write(pod.join(d).join("memory.stat"), "").unwrap();
            }
        }
        assert_eq!(memcgs_at(&pod), 3);
        assert_eq!(memcgs_at(&t.path().join("gone")), 0);
    }

    #[test]
    fn pod_cgroup_memory_from_v1_and_v2_files() {
        let v1 = "cache 10\nrss 20\nshmem 1\ntotal_cache 100\ntotal_rss 4096\ntotal_rss_huge 0\ntotal_shmem 8\n";
        let m = cgroup_memory(true, v1, 9000, Some(700));
        assert_eq!(
            m,
            PodCgroupMemory {
                pods: 1,
                usage_bytes: 9000,
                anon_bytes: 4096,
                shmem_bytes: 8,
                kernel_bytes: 700,
                memcgs: 0,
            }
        );
        assert_eq!(m.pinned_bytes(), 4096 + 8 + 700);
        let v2 = "anon 300\nfile 50\nkernel 999\nkernel_stack 16\npagetables 8\npercpu 4\nsock 0\nshmem 2\nslab 100\nslab_reclaimable 60\n";
        let m = cgroup_memory(false, v2, 800, None);
        assert_eq!((m.anon_bytes, m.shmem_bytes, m.kernel_bytes), (300, 2, 128));
        let mut sum = PodCgroupMemory::default();
        sum.add(&m);
        sum.add(&m);
        assert_eq!((sum.pods, sum.usage_bytes), (2, 1600));
    }
}
