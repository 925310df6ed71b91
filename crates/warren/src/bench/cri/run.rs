//! `warren bench cri`: pod density through the CRI. For each handler (runc, warren via
//! the runc shim) and each N, a fresh private containerd ([`super::daemon`]) starts N
//! pods, one `busybox sleep` container each, as a kubelet does: RunPodSandbox, then
//! CreateContainer and StartContainer, timed one call at a time. With the N pods
//! running it reads what they cost the host: the shims' RSS and PSS (smaps_rollup of
//! every `containerd-shim-runc-v2`), containerd's own growth, and the host's memory
//! before and after (the pinned sum and the memstat anon row, as `bench density`
//! does), per pod. Then it stops and removes every pod (StopPodSandbox +
//! RemovePodSandbox, timed per pod) and ends the daemon, with everything in its
//! namespaces and the pods' cgroups, also when the step fails.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::client::CriClient;
use super::daemon::CriContainerd;
use super::image::BUSYBOX;
use crate::bench::system::Failure;
use crate::bench::Machine;
use crate::error::Result;
use crate::measure::{mem_per_zone, mem_sample, summarize, MemPerZone, Progress, Summary};
use crate::stat::readers::{smaps_total, Smaps};
use crate::zone::Context;

/// Most pods one step may start by default (kernel.pid_max is shared with everything
/// else); `warren bench cri --max-pods` raises it.
pub const MAX_PODS: usize = 300;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub steps: Vec<usize>,
    pub handlers: Vec<String>,
    /// Pods with their own network namespace (a CNI bridge) instead of host network.
    pub pod_network: bool,
    /// The warren binary warren-oci runs as.
    pub warren: PathBuf,
}

/// One handler at one N.
#[derive(Debug, Clone, Serialize)]
pub struct CriStep {
    pub handler: String,
    pub pods: usize,
    pub pod_network: bool,
    pub run_pod_sandbox_ms: Summary,
    pub create_container_ms: Summary,
    pub start_container_ms: Summary,
    /// StopPodSandbox + RemovePodSandbox of one pod.
    pub teardown_ms: Summary,
    pub teardown_total_ms: f64,
    /// Shim processes running with the N pods up (one per pod with the runc shim).
    pub shims: u64,
    /// The shims' RSS and PSS summed, per pod, KiB.
    pub shim_rss_kib_per_pod: f64,
    pub shim_pss_kib_per_pod: f64,
    /// containerd's own RSS growth from before the first pod, per pod, KiB.
    pub containerd_rss_growth_kib_per_pod: f64,
    /// Host memory per pod (shims, containers, kernel: everything the pods added).
    pub host_per_pod: MemPerZone,
    pub loadavg: String,
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct CriResults {
    pub schema_version: u32,
    pub date: String,
    pub machine: Machine,
    pub containerd_version: String,
    pub steps: Vec<CriStep>,
}

/// Run the bench. Writes nothing; see [`super::report::write`].
pub fn run(ctx: &Context, opts: &Options, progress: &mut dyn Progress) -> Result<CriResults> {
    ctx.require_root()?;
    super::client::python()?;
    if opts.handlers.iter().any(|h| h == "warren-shim") {
        let shim = super::daemon::shim_binary(&opts.warren);
        if !shim.exists() {
            return Err(Failure::Failed(format!(
                "handler warren-shim: {} is missing; build it with `cargo build -p \
                 containerd-shim-warren` (beside the warren binary) or name one in ${}",
                shim.display(),
                super::daemon::WARREN_SHIM_ENV
            ))
            .into());
        }
    }
    let date = crate::bench::now_rfc3339();
    let machine = crate::bench::machine(ctx)?;
    let containerd_version = std::process::Command::new("containerd")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let mut steps = Vec::new();
    for &n in &opts.steps {
        for h in &opts.handlers {
            steps.push(step(opts, h, n, progress)?);
        }
    }
    progress.done();
    Ok(CriResults {
        schema_version: crate::bench::SCHEMA_VERSION,
        date,
        machine,
        containerd_version,
        steps,
    })
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// RSS of one process, bytes (0 if gone).
fn rss(pid: i32) -> u64 {
    smaps_total(Path::new("/proc"), &[pid]).rss_bytes
}

fn step(opts: &Options, handler: &str, n: usize, progress: &mut dyn Progress) -> Result<CriStep> {
    let dir = tempfile_dir()?;
    let r = (|| -> std::result::Result<CriStep, Failure> {
        let daemon = CriContainerd::start(&dir, &opts.warren)?;
        let mut client = CriClient::connect(&daemon)?;
        let mut pods = Pods {
            client: &mut client,
            ids: Vec::new(),
        };
        let containerd = daemon
            .processes()
            .into_iter()
            .find(|(_, c)| c == "containerd")
            .map(|(p, _)| p)
            .ok_or_else(|| Failure::Failed("containerd is not running".into()))?;
        std::thread::sleep(Duration::from_millis(500));
        let before = mem_sample(Path::new("/proc"));
        let containerd_before = rss(containerd);
        let (mut run_ms, mut create_ms, mut start_ms) = (Vec::new(), Vec::new(), Vec::new());
        progress.phase(&format!("{handler} N={n} start"), n as u64);
        for i in 0..n {
            // A stop signal (SIGINT, SIGTERM, SIGHUP: `bench::interrupt`) ends the step
            // here; `Pods` and the daemon's drop remove what it made.
            if let Some(sig) = progress.interrupted() {
                return Err(Failure::Interrupted(sig));
            }
            let name = format!("bench-{i}");
            let logs = daemon.logs().join(&name);
            std::fs::create_dir_all(&logs).map_err(Failure::io(&logs))?;
            let network = if opts.pod_network { "POD" } else { "NODE" };
            let config = json!({
                "metadata": {"name": name, "uid": format!("uid-{i}"), "namespace": "bench", "attempt": 0},
                "hostname": if opts.pod_network { name.as_str() } else { "" },
                "log_directory": logs,
                "linux": {"cgroup_parent": daemon.cgroup_parent(&name),
                    "security_context": {"namespace_options": {"network": network, "pid": "CONTAINER", "ipc": "POD"}}}
            });
            let (r, ms) = pods.client.call_timed(
                "RunPodSandbox",
                json!({"config": config, "runtime_handler": handler}),
            )?;
            let pod = r.map_err(|e| Failure::Failed(format!("{handler}: {e}")))?["pod_sandbox_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            pods.ids.push(pod.clone());
            run_ms.push(ms);
            let container = json!({"metadata": {"name": "sleep", "attempt": 0},
                "image": {"image": BUSYBOX}, "command": ["sleep", "100000"], "log_path": "sleep.log"});
            let (r, ms) = pods.client.call_timed(
                "CreateContainer",
                json!({"pod_sandbox_id": pod, "config": container, "sandbox_config": config}),
            )?;
            let id = r.map_err(|e| Failure::Failed(format!("{handler}: {e}")))?["container_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            create_ms.push(ms);
            let (r, ms) = pods
                .client
                .call_timed("StartContainer", json!({"container_id": id}))?;
            r.map_err(|e| Failure::Failed(format!("{handler}: {e}")))?;
            start_ms.push(ms);
            progress.step();
        }
        std::thread::sleep(Duration::from_secs(2));
        let after = mem_sample(Path::new("/proc"));
        let containerd_after = rss(containerd);
        let shim_pids: Vec<i32> = daemon
            .processes()
            .into_iter()
            .filter(|(_, c)| c.starts_with("containerd-shim"))
            .map(|(p, _)| p)
            .collect();
        let shims: Smaps = smaps_total(Path::new("/proc"), &shim_pids);
        let per = |b: u64| b as f64 / 1024.0 / n.max(1) as f64;
        let load = loadavg();
        progress.phase(&format!("{handler} N={n} teardown"), n as u64);
        let mut down_ms = Vec::new();
        let t = Instant::now();
        for pod in std::mem::take(&mut pods.ids) {
            let t = Instant::now();
            for call in ["StopPodSandbox", "RemovePodSandbox"] {
                pods.client
                    .call(call, json!({"pod_sandbox_id": pod}))
                    .map_err(|e| Failure::Failed(format!("{handler}: {e}")))?;
            }
            down_ms.push(crate::measure::ms(t.elapsed()));
            progress.step();
        }
        let teardown_total_ms = crate::measure::ms(t.elapsed());
        Ok(CriStep {
            handler: handler.to_string(),
            pods: n,
            pod_network: opts.pod_network,
            run_pod_sandbox_ms: summarize(&run_ms),
            create_container_ms: summarize(&create_ms),
            start_container_ms: summarize(&start_ms),
            teardown_ms: summarize(&down_ms),
            teardown_total_ms,
            shims: shims.processes,
            shim_rss_kib_per_pod: per(shims.rss_bytes),
            shim_pss_kib_per_pod: per(shims.pss_bytes),
            containerd_rss_growth_kib_per_pod: (containerd_after as f64 - containerd_before as f64)
                / 1024.0
                / n.max(1) as f64,
            host_per_pod: mem_per_zone(&before, &after, n),
            loadavg: load,
        })
    })();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(r?)
}

/// The step's scratch directory (containerd's root, state, socket, logs).
fn tempfile_dir() -> std::result::Result<PathBuf, Failure> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "warren-bench-cri-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).map_err(Failure::io(&dir))?;
    Ok(dir)
}

/// The pods of a step: stopped and removed through the CRI if the step ends early
/// (the daemon's drop, after this, ends whatever is left).
struct Pods<'a> {
    client: &'a mut CriClient,
    ids: Vec<String>,
}

impl Drop for Pods<'_> {
    fn drop(&mut self) {
        for id in std::mem::take(&mut self.ids) {
            for call in ["StopPodSandbox", "RemovePodSandbox"] {
                let _ = self.client.call(call, json!({"pod_sandbox_id": id}));
            }
        }
    }
}
