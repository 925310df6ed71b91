//! `warren bench cri`: pod density through the CRI. For each handler (runc, warren via
//! the runc shim) and each N, a fresh private containerd ([`super::daemon`]) starts N
//! pods, one `busybox sleep` container each, as a kubelet does: RunPodSandbox, then
//! CreateContainer and StartContainer, timed one call at a time. With the N pods
//! running it reads what they cost the host: the shims' RSS and PSS (smaps_rollup of
//! every shim), containerd's own growth, the host's memory before and after (the
//! pinned sum and the memstat anon row, as `bench density` does), and what the pods'
//! own memory cgroups hold, per pod; [`Beyond`] is the host's growth beyond the
//! pods' cgroups and where it went (shims, containerd, the kernel outside them). Then it stops and removes every pod (StopPodSandbox +
//! RemovePodSandbox, timed per pod) and ends the daemon, with everything in its
//! namespaces and the pods' cgroups, also when the step fails.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::client::CriClient;
use super::daemon::{CriContainerd, PodCgroupMemory, Setup};
use super::image::BUSYBOX;
use super::memcg::{MemcgProbe, SlabCache};
use super::phases::Breakdown;
use crate::bench::system::Failure;
use crate::bench::Machine;
use crate::error::Result;
use crate::measure::{
    mem_per_zone, mem_sample, summarize, MemPerZone, MemSample, Progress, Summary,
};
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
    /// The daemon's snapshotter and log level (debug: each step's RunPodSandbox
    /// broken down, [`super::phases`]).
    pub setup: Setup,
    /// Where each step's containerd log is copied (`containerd-<handler>-<n>.log`),
    /// with `setup.debug`.
    pub log_dir: Option<PathBuf>,
}

/// One handler at one N.
#[derive(Debug, Clone, Serialize)]
pub struct CriStep {
    pub handler: String,
    pub pods: usize,
    pub pod_network: bool,
    pub snapshotter: String,
    pub run_pod_sandbox_ms: Summary,
    pub create_container_ms: Summary,
    pub start_container_ms: Summary,
    /// StopPodSandbox + RemovePodSandbox of one pod.
    pub teardown_ms: Summary,
    pub teardown_total_ms: f64,
    /// Shim processes running with the N pods up (one per pod with the runc shim).
    pub shims: u64,
    /// The shims' threads (their /proc/<pid>/task entries) summed, per pod.
    pub shim_threads_per_pod: f64,
    /// The shims' RSS and PSS summed, per pod, KiB.
    pub shim_rss_kib_per_pod: f64,
    pub shim_pss_kib_per_pod: f64,
    /// containerd's own RSS growth from before the first pod, per pod, KiB.
    pub containerd_rss_growth_kib_per_pod: f64,
    /// Host memory per pod (shims, containers, kernel: everything the pods added).
    pub host_per_pod: MemPerZone,
    /// The host's memory per pod beyond what the pods' own cgroups hold.
    pub beyond: Beyond,
    /// Where RunPodSandbox's time went (with containerd at log level debug).
    pub breakdown: Option<Breakdown>,
    pub loadavg: String,
}

/// Per pod, KiB: what a pod costs the host beyond its containers, and where.
///
/// "Held" memory is what the kernel cannot drop: anonymous pages, shmem and kernel
/// memory (slab, both kinds, stacks, page tables, per-CPU), on the host from
/// /proc/meminfo before and after the pods started, in the pods' memory cgroups
/// from their stat files (each pod's cgroup parent holds its sandbox and its
/// containers). `beyond` is the host's rise less the cgroups'; it is split into the
/// shims' anonymous memory (PSS of their anonymous pages), containerd's anonymous
/// growth, the kernel's growth outside the pods' cgroups, and the rest, which none
/// of them explains (other processes of the host: noise on a shared machine).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Beyond {
    /// The host's held memory, its rise per pod.
    pub host_kib: f64,
    /// The pods' cgroups: usage (page cache included), then held: anon + shmem +
    /// kernel, and the kernel part alone.
    pub cgroups_usage_kib: f64,
    pub cgroups_held_kib: f64,
    pub cgroups_kernel_kib: f64,
    /// host − the cgroups' held memory.
    pub beyond_kib: f64,
    pub shim_anon_kib: f64,
    pub containerd_anon_kib: f64,
    /// containerd's PSS growth (its file pages included: not part of `beyond`).
    pub containerd_pss_kib: f64,
    /// The CRI client's anonymous growth (the bench's python3, in the kubelet's
    /// place: a term of the node agent, not of the runtime).
    pub client_anon_kib: f64,
    /// The kernel's rise outside the pods' cgroups: the host's kernel rows less the
    /// cgroups' kernel memory.
    pub kernel_kib: f64,
    /// Memory cgroups per pod (its cgroup parent, the sandbox's, each container's).
    pub memcgs_per_pod: f64,
    /// Of `kernel_kib`: the per-memcg shrinker state of the pods' memory cgroups,
    /// memcgs per pod × what one empty memcg adds on this boot ([`super::memcg`]:
    /// set by the highest shrinker id since boot, not by the pod); 0 without the probe.
    pub kernel_memcg_kib: f64,
    /// Of `kernel_kib`: dying memory cgroups (removed, not yet freed: earlier pods',
    /// the probe's) that the kernel freed (−) or that appeared (+) during the step,
    /// × what one holds, per pod: a term of the host, not of these pods; 0 without
    /// the probe or the count.
    pub kernel_dying_kib: f64,
    /// Dying memory cgroups before and after the pods started (host-wide).
    pub dying_memcgs: Option<(u64, u64)>,
    /// The rise of [`super::memcg::CACHE`] per pod, KiB: its objects (active) and its
    /// slots (objects + free ones, i.e. the slab pages it holds). Where the objects
    /// rose more than the slots, new objects filled slots left free by earlier frees
    /// (memory the host already held): the host's slab rises less than the pods'
    /// memcgs cost, and `kernel_rest_kib` shows it as a negative.
    pub cache_objects_kib: f64,
    pub cache_slots_kib: f64,
    /// kernel − kernel_memcg − kernel_dying: the pods' other kernel objects outside
    /// their cgroups (the shims' threads' kernel stacks, namespaces, mounts).
    pub kernel_rest_kib: f64,
    /// beyond − shims − containerd − the CRI client − kernel.
    pub rest_kib: f64,
}

/// The host's held memory in a meminfo reading (bytes), and its kernel part.
fn held(m: &MemSample) -> (u64, u64) {
    let g = |k: &str| m.meminfo.get(k).copied().unwrap_or(0);
    let kernel = ["Slab", "KernelStack", "PageTables", "Percpu"]
        .iter()
        .map(|k| g(k))
        .sum::<u64>();
    (g("AnonPages") + g("Shmem") + kernel, kernel)
}

/// What one process holds, for [`beyond`]: (anonymous PSS, PSS) in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Held {
    pub anon_bytes: u64,
    pub pss_bytes: u64,
}

/// What splits the kernel's part of [`Beyond`]: the probe's figure, the dying
/// memory cgroups and [`super::memcg::CACHE`]'s line, each before/after the pods.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelSide<'a> {
    pub memcg: Option<&'a MemcgProbe>,
    pub dying: Option<(u64, u64)>,
    pub cache: Option<(SlabCache, SlabCache)>,
}

/// Processes outside the pods whose growth [`Beyond`] names, each before/after.
#[derive(Debug, Clone, Copy, Default)]
pub struct Others {
    pub containerd: (Held, Held),
    pub client: (Held, Held),
}

/// [`Beyond`] for `n` pods from the host before/after, the pods' cgroups (which
/// hold nothing before the first pod), the shims, containerd and the CRI client
/// before/after, and what one memory cgroup costs outside it (the probe, if it ran).
pub fn beyond(
    n: usize,
    (before, after): (&MemSample, &MemSample),
    cgroups: &PodCgroupMemory,
    shims: Held,
    others: Others,
    kernel_side: KernelSide<'_>,
) -> Beyond {
    let Others {
        containerd: (cd_before, cd_after),
        client: (cl_before, cl_after),
    } = others;
    let KernelSide {
        memcg,
        dying,
        cache,
    } = kernel_side;
    let per = |b: f64| b / 1024.0 / n.max(1) as f64;
    let d = |a: u64, b: u64| b as f64 - a as f64;
    let ((hb, kb), (ha, ka)) = (held(before), held(after));
    let host = per(d(hb, ha));
    let cg_held = per(cgroups.pinned_bytes() as f64);
    let cg_kernel = per(cgroups.kernel_bytes as f64);
    let beyond_kib = host - cg_held;
    let shim_anon = per(shims.anon_bytes as f64);
    let cd_anon = per(d(cd_before.anon_bytes, cd_after.anon_bytes));
    let client_anon = per(d(cl_before.anon_bytes, cl_after.anon_bytes));
    let kernel = per(d(kb, ka)) - cg_kernel;
    let memcgs = cgroups.memcgs as f64 / n.max(1) as f64;
    let kernel_memcg = super::memcg::pod_share_kib(memcgs, memcg);
    let kernel_dying = dying.map_or(0.0, |(b, a)| {
        super::memcg::pod_share_kib(d(b, a) / n.max(1) as f64, memcg)
    });
    Beyond {
        host_kib: host,
        cgroups_usage_kib: per(cgroups.usage_bytes as f64),
        cgroups_held_kib: cg_held,
        cgroups_kernel_kib: cg_kernel,
        beyond_kib,
        shim_anon_kib: shim_anon,
        containerd_anon_kib: cd_anon,
        containerd_pss_kib: per(d(cd_before.pss_bytes, cd_after.pss_bytes)),
        client_anon_kib: client_anon,
        kernel_kib: kernel,
        memcgs_per_pod: memcgs,
        kernel_memcg_kib: kernel_memcg,
        kernel_dying_kib: kernel_dying,
        dying_memcgs: dying,
        cache_objects_kib: cache.map_or(0.0, |(b, a)| {
            per(d(b.active_objs, a.active_objs) * a.objsize as f64)
        }),
        cache_slots_kib: cache.map_or(0.0, |(b, a)| {
            per(d(b.num_objs, a.num_objs) * a.objsize as f64)
        }),
        kernel_rest_kib: kernel - kernel_memcg - kernel_dying,
        rest_kib: beyond_kib - shim_anon - cd_anon - client_anon - kernel,
    }
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct CriResults {
    pub schema_version: u32,
    pub date: String,
    pub machine: Machine,
    pub containerd_version: String,
    /// What one empty memory cgroup adds to the kernel outside it, measured before
    /// the first pod ([`super::memcg::probe`]); None with `memcg_probe_error` if it
    /// could not run.
    pub memcg_probe: Option<MemcgProbe>,
    pub memcg_probe_error: Option<String>,
    pub steps: Vec<CriStep>,
}

/// Run the bench. Writes nothing; see [`super::report::write`].
pub fn run(ctx: &Context, opts: &Options, progress: &mut dyn Progress) -> Result<CriResults> {
    ctx.require_root()?;
    super::client::python()?;
    let warren_shim =
        |h: &String| super::daemon::Handler::named(h).is_some_and(|h| h.is_warren_shim());
    if opts.handlers.iter().any(warren_shim) {
        let shim = super::daemon::shim_binary(&opts.warren);
        if !shim.exists() {
            return Err(Failure::Failed(format!(
                "handlers warren-shim*: {} is missing; build it with `cargo build -p \
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
    // Before any pod: the probe's memory cgroups are gone (and most of their slab
    // freed) before the first step's "before" reading.
    let (memcg_probe, memcg_probe_error) = match memcg_probe() {
        Ok(p) => (Some(p), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let mut steps = Vec::new();
    for &n in &opts.steps {
        for h in &opts.handlers {
            steps.push(step(opts, h, n, memcg_probe.as_ref(), progress)?);
        }
    }
    progress.done();
    Ok(CriResults {
        schema_version: crate::bench::SCHEMA_VERSION,
        date,
        machine,
        containerd_version,
        memcg_probe,
        memcg_probe_error,
        steps,
    })
}

/// Empty memory cgroups the probe makes per round, and its rounds.
const PROBE_MEMCGS: usize = 10;
const PROBE_ROUNDS: usize = 3;

fn memcg_probe() -> std::result::Result<MemcgProbe, Failure> {
    super::daemon::prepare_pod_cgroups(Path::new("/proc"))?;
    let (dir, _) = super::memcg::own_memory_dir(Path::new("/proc"))?;
    super::memcg::probe(
        &dir,
        Path::new("/proc/slabinfo"),
        PROBE_MEMCGS,
        PROBE_ROUNDS,
    )
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// smaps_rollup of one process (zeros if gone).
fn smaps(pid: i32) -> Smaps {
    smaps_total(Path::new("/proc"), &[pid])
}

/// The threads of `pids` (entries of `<proc>/<pid>/task`) summed; a pid gone
/// counts none.
fn threads(proc_root: &Path, pids: &[i32]) -> u64 {
    pids.iter()
        .filter_map(|p| std::fs::read_dir(proc_root.join(format!("{p}/task"))).ok())
        .map(|d| d.count() as u64)
        .sum()
}

/// [`super::memcg::CACHE`]'s line of /proc/slabinfo now (None: unreadable).
fn cache() -> Option<SlabCache> {
    let text = std::fs::read_to_string("/proc/slabinfo").ok()?;
    super::memcg::slab_cache(&text, super::memcg::CACHE)
}

fn held_of(s: &Smaps) -> Held {
    Held {
        anon_bytes: s.pss_anon_bytes,
        pss_bytes: s.pss_bytes,
    }
}

fn step(
    opts: &Options,
    handler: &str,
    n: usize,
    memcg: Option<&MemcgProbe>,
    progress: &mut dyn Progress,
) -> Result<CriStep> {
    let dir = tempfile_dir()?;
    let r = (|| -> std::result::Result<CriStep, Failure> {
        let setup = match super::daemon::Handler::named(handler) {
            Some(h) => h.setup(&opts.setup),
            None => opts.setup.clone(),
        };
        let daemon = CriContainerd::start_with(&dir, &opts.warren, &setup)?;
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
        let dying_before = super::memcg::dying_memcgs(Path::new("/proc"));
        let cache_before = cache();
        let before = mem_sample(Path::new("/proc"));
        let containerd_before = smaps(containerd);
        let client_before = smaps(pods.client.pid());
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
        let dying_after = super::memcg::dying_memcgs(Path::new("/proc"));
        let cache_after = cache();
        let containerd_after = smaps(containerd);
        let client_after = smaps(pods.client.pid());
        let pod_cgroups = daemon.pod_memory();
        let shim_pids: Vec<i32> = daemon
            .processes()
            .into_iter()
            .filter(|(_, c)| c.starts_with("containerd-shim"))
            .map(|(p, _)| p)
            .collect();
        let shims: Smaps = smaps_total(Path::new("/proc"), &shim_pids);
        let shim_threads = threads(Path::new("/proc"), &shim_pids);
        let per = |b: u64| b as f64 / 1024.0 / n.max(1) as f64;
        let load = loadavg();
        progress.phase(&format!("{handler} N={n} teardown"), n as u64);
        let breakdown = opts.setup.debug.then(|| {
            let log = daemon.full_log();
            if let Some(d) = &opts.log_dir {
                let f = d.join(format!("containerd-{handler}-{n}.log"));
                let _ = std::fs::create_dir_all(d).and_then(|()| std::fs::write(&f, &log));
            }
            let names: Vec<String> = (0..n).map(|i| format!("bench-{i}")).collect();
            super::phases::breakdown(&log, &names)
        });
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
            snapshotter: opts.setup.snapshotter.clone(),
            run_pod_sandbox_ms: summarize(&run_ms),
            create_container_ms: summarize(&create_ms),
            start_container_ms: summarize(&start_ms),
            teardown_ms: summarize(&down_ms),
            teardown_total_ms,
            shims: shims.processes,
            shim_threads_per_pod: shim_threads as f64 / n.max(1) as f64,
            shim_rss_kib_per_pod: per(shims.rss_bytes),
            shim_pss_kib_per_pod: per(shims.pss_bytes),
            containerd_rss_growth_kib_per_pod: (containerd_after.rss_bytes as f64
                - containerd_before.rss_bytes as f64)
                / 1024.0
                / n.max(1) as f64,
            host_per_pod: mem_per_zone(&before, &after, n),
            beyond: beyond(
                n,
                (&before, &after),
                &pod_cgroups,
                held_of(&shims),
                Others {
                    containerd: (held_of(&containerd_before), held_of(&containerd_after)),
                    client: (held_of(&client_before), held_of(&client_after)),
                },
                KernelSide {
                    memcg,
                    dying: dying_before.zip(dying_after),
                    cache: cache_before.zip(cache_after),
                },
            ),
            breakdown,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(anon: u64, slab: u64) -> MemSample {
        let mut meminfo = std::collections::BTreeMap::new();
        for (k, v) in [
            ("AnonPages", anon),
            ("Shmem", 0),
            ("Slab", slab),
            ("KernelStack", 0),
            ("PageTables", 0),
            ("Percpu", 0),
        ] {
            meminfo.insert(k.to_string(), v);
        }
        MemSample {
            pinned: 0,
            available: 0,
            host: None,
            meminfo,
        }
    }

    #[test]
    fn threads_are_the_task_entries_of_the_pids_still_there() {
        let root = tempfile::tempdir().unwrap();
        for (pid, tids) in [(10, &[10, 11, 12][..]), (20, &[20][..])] {
            for tid in tids {
                std::fs::create_dir_all(root.path().join(format!("{pid}/task/{tid}"))).unwrap();
            }
        }
        assert_eq!(threads(root.path(), &[10, 20]), 4);
        assert_eq!(threads(root.path(), &[10, 30]), 3, "a pid gone counts none");
        assert_eq!(threads(root.path(), &[]), 0);
    }

    #[track_caller]
    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-6, "{a} != {b}");
    }

    #[test]
    fn beyond_the_containers_splits_the_hosts_rise() {
        const MIB: u64 = 1 << 20;
        // 10 pods: the host held 40 MiB more anon and 12 MiB more slab; the pods'
        // cgroups hold 20 MiB anon and 8 MiB kernel; shims 10 MiB anon; containerd
        // grew by 5 MiB anon.
        let (before, after) = (sample(100 * MIB, 50 * MIB), sample(140 * MIB, 62 * MIB));
        let cg = PodCgroupMemory {
            pods: 10,
            usage_bytes: 35 * MIB,
            anon_bytes: 20 * MIB,
            shmem_bytes: 0,
            kernel_bytes: 8 * MIB,
            memcgs: 30,
        };
        let held = |a: u64, p: u64| Held {
            anon_bytes: a * MIB,
            pss_bytes: p * MIB,
        };
        // The same pods, split with what is known of the kernel's side.
        let split = |side: KernelSide| {
            beyond(
                10,
                (&before, &after),
                &cg,
                held(10, 30),
                Others {
                    containerd: (held(20, 40), held(25, 48)),
                    client: (held(30, 40), held(32, 42)),
                },
                side,
            )
        };
        let b = split(KernelSide {
            dying: Some((70, 60)),
            ..KernelSide::default()
        });
        close(b.host_kib, 52.0 * 1024.0 / 10.0);
        close(b.cgroups_held_kib, 28.0 * 1024.0 / 10.0);
        close(b.cgroups_usage_kib, 35.0 * 1024.0 / 10.0);
        close(b.beyond_kib, 24.0 * 1024.0 / 10.0);
        close(b.shim_anon_kib, 1024.0);
        close(b.containerd_anon_kib, 512.0);
        close(b.containerd_pss_kib, 8.0 * 1024.0 / 10.0);
        close(b.kernel_kib, 4.0 * 1024.0 / 10.0);
        close(b.client_anon_kib, 2.0 * 1024.0 / 10.0);
        // 24 − 10 − 5 − 2 − 4 = 3 MiB nobody named, over 10 pods.
        close(b.rest_kib, 3.0 * 1024.0 / 10.0);
        // Without the probe the kernel's part is not split.
        close(b.memcgs_per_pod, 3.0);
        close(b.kernel_memcg_kib, 0.0);
        close(b.kernel_dying_kib, 0.0);
        close(b.kernel_rest_kib, b.kernel_kib);
        // With it: 3 memcgs a pod at 100 kmalloc-1k objects each = 300 KiB of the
        // 409.6; the total and the rest are what they were.
        let probe = MemcgProbe::from_rounds(10, 1024, &[(5000, 6000)]);
        let s = split(KernelSide {
            memcg: Some(&probe),
            ..KernelSide::default()
        });
        close(s.kernel_memcg_kib, 300.0);
        close(s.kernel_rest_kib, 4.0 * 1024.0 / 10.0 - 300.0);
        // 10 dying memcgs freed meanwhile (70 → 60): 10 × 100 KiB less slab over 10
        // pods, −100 KiB a pod; the pods' own rest is that much larger.
        let z = split(KernelSide {
            memcg: Some(&probe),
            dying: Some((70, 60)),
            cache: Some((
                SlabCache {
                    active_objs: 1000,
                    num_objs: 1600,
                    objsize: 1024,
                },
                SlabCache {
                    active_objs: 4000,
                    num_objs: 4000,
                    objsize: 1024,
                },
            )),
        });
        // 3000 more objects, 2400 more slots: 300 and 240 KiB a pod.
        close(z.cache_objects_kib, 300.0);
        close(z.cache_slots_kib, 240.0);
        close(z.kernel_dying_kib, -100.0);
        close(z.kernel_rest_kib, 4.0 * 1024.0 / 10.0 - 300.0 + 100.0);
        close(z.kernel_kib, b.kernel_kib);
        close(s.kernel_kib, b.kernel_kib);
        close(s.beyond_kib, b.beyond_kib);
        close(s.rest_kib, b.rest_kib);
    }
}
