//! The CRI test harness: a private containerd with its CRI plugin
//! (`warren::bench::cri::CriContainerd`: own mount, pid and network namespaces, handlers
//! `runc`, `warren` and `warren-shim`), a CRI client, and a guard that stops and removes the pods it
//! started before the daemon goes (everything else goes with the daemon's namespaces
//! and the cgroup sweep of its drop), also when the test panics.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use warren::bench::cri::{CriClient, CriContainerd, CriError, Setup};

/// The RuntimeClass handlers under test, side by side: those a private containerd of
/// the default setup serves as named (not `warren-shim-node`, whose containerd runs
/// with one shim per node: [`Cri::start_with`]).
pub fn handlers() -> Vec<&'static str> {
    let default = Setup::default();
    warren::bench::cri::daemon::HANDLERS
        .iter()
        .filter(|h| h.setup(&default) == default)
        .map(|h| h.name)
        .collect()
}
pub const BUSYBOX: &str = warren::bench::cri::image::BUSYBOX;

/// Handler `warren-shim` needs the shim build: fail saying how to make it.
pub fn require_shim() {
    let shim = warren::bench::cri::daemon::shim_binary(std::path::Path::new(super::WARREN));
    assert!(
        shim.exists(),
        "{} is missing: build it with `cargo build -p containerd-shim-warren` (same target \
         dir as this test) or name one in ${}",
        shim.display(),
        warren::bench::cri::daemon::WARREN_SHIM_ENV
    );
}

/// A daemon, its client and the pods made through it. Fields drop in this order.
pub struct Cri {
    pub client: CriClient,
    pods: Vec<String>,
    pub daemon: CriContainerd,
    dir: tempfile::TempDir,
}

impl Cri {
    pub fn start() -> Cri {
        Cri::start_with(&Setup::default())
    }

    /// A private containerd of `setup` (e.g. one warren shim per node).
    pub fn start_with(setup: &Setup) -> Cri {
        super::require_root();
        let dir = tempfile::Builder::new()
            .prefix("warren-cri-test")
            .tempdir_in("/tmp")
            .unwrap();
        let daemon =
            CriContainerd::start_with(dir.path(), std::path::Path::new(super::WARREN), setup)
                .unwrap_or_else(|e| panic!("the private containerd did not start: {e}"));
        let client = CriClient::connect(&daemon).unwrap_or_else(|e| panic!("{e}"));
        Cri {
            client,
            pods: Vec::new(),
            daemon,
            dir,
        }
    }

    /// A RuntimeService call that must succeed.
    #[track_caller]
    pub fn call(&mut self, call: &str, req: Value) -> Value {
        match self.client.call_timed(call, req.clone()) {
            Ok((Ok(v), _)) => v,
            Ok((Err(e), _)) => panic!("{e}\nrequest: {req}\ncontainerd:\n{}", self.daemon.log()),
            Err(e) => panic!("{e}\ncontainerd:\n{}", self.daemon.log()),
        }
    }

    /// A RuntimeService call that may fail: the gRPC error, or the answer.
    pub fn try_call(&mut self, call: &str, req: Value) -> Result<Value, CriError> {
        self.client
            .call_timed(call, req)
            .unwrap_or_else(|e| panic!("{e}"))
            .0
    }

    /// The pod config of `name` (host network or its own), cgroup parent beneath ours.
    pub fn pod_config(&self, name: &str, host_network: bool) -> Value {
        let logs = self.daemon.logs().join(name);
        std::fs::create_dir_all(&logs).unwrap();
        // As the kubelet: a hostname only for a pod with its own network (runc
        // refuses one without a UTS namespace of its own).
        let hostname = if host_network { "" } else { name };
        json!({
            "metadata": {"name": name, "uid": format!("uid-{name}"), "namespace": "default", "attempt": 0},
            "hostname": hostname,
            "log_directory": logs,
            "linux": {
                "cgroup_parent": self.daemon.cgroup_parent(name),
                "security_context": {"namespace_options": {
                    "network": if host_network { "NODE" } else { "POD" },
                    "pid": "CONTAINER", "ipc": "POD"}}
            }
        })
    }

    /// RunPodSandbox with `handler`; its id (stopped and removed by the guard).
    #[track_caller]
    pub fn run_pod(&mut self, config: &Value, handler: &str) -> String {
        let r = self.call(
            "RunPodSandbox",
            json!({"config": config, "runtime_handler": handler}),
        );
        let id = r["pod_sandbox_id"].as_str().unwrap().to_string();
        self.pods.push(id.clone());
        id
    }

    /// A container config running `command` in busybox, `extra` merged in.
    pub fn container(name: &str, command: &[&str], extra: Value) -> Value {
        let mut c = json!({
            "metadata": {"name": name, "attempt": 0},
            "image": {"image": BUSYBOX},
            "command": command,
            "log_path": format!("{name}.log"),
        });
        if let (Some(c), Some(e)) = (c.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                c.insert(k.clone(), v.clone());
            }
        }
        c
    }

    /// CreateContainer; its id.
    #[track_caller]
    pub fn create(&mut self, pod: &str, pod_config: &Value, config: Value) -> String {
        let r = self.call(
            "CreateContainer",
            json!({"pod_sandbox_id": pod, "config": config, "sandbox_config": pod_config}),
        );
        r["container_id"].as_str().unwrap().to_string()
    }

    /// ContainerStatus (verbose): {"status": ..., "info": {"info": "<json>"}}.
    #[track_caller]
    pub fn status(&mut self, id: &str) -> Value {
        self.call(
            "ContainerStatus",
            json!({"container_id": id, "verbose": true}),
        )
    }

    /// Wait until the container's state is `state` (CONTAINER_EXITED, ...); its status.
    #[track_caller]
    pub fn wait_state(&mut self, id: &str, state: &str, within: Duration) -> Value {
        let t = Instant::now();
        loop {
            let s = self.status(id);
            if s["status"]["state"] == state {
                return s["status"].clone();
            }
            assert!(
                t.elapsed() < within,
                "container {id} is not {state} after {within:?}: {s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The host pid of a container's init (the status holds its pid in containerd's
    /// pid namespace).
    #[track_caller]
    pub fn host_pid(&mut self, id: &str) -> i32 {
        let s = self.status(id);
        let info: Value = serde_json::from_str(s["info"]["info"].as_str().unwrap_or("{}")).unwrap();
        let ns_pid = info["pid"]
            .as_i64()
            .unwrap_or_else(|| panic!("no pid: {s}"));
        for (pid, _) in self.daemon.processes() {
            let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let inner = st
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|p| p.parse::<i64>().ok());
            if inner == Some(ns_pid) {
                return pid;
            }
        }
        panic!("container {id}'s pid {ns_pid} is not in containerd's namespace")
    }

    /// The directory of process `pid`'s cgroup in the hierarchy holding `controller`:
    /// its v1 hierarchy, or (cgroup v2) the unified one where the controller is
    /// enabled for that cgroup.
    pub fn cgroup_dir(pid: i32, controller: &str) -> PathBuf {
        let hiers = warren::bench::cgroups::own_hierarchies(std::path::Path::new("/proc")).unwrap();
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        for l in text.lines() {
            let mut p = l.splitn(3, ':');
            let (_, ctrls, path) = (p.next(), p.next().unwrap_or(""), p.next().unwrap_or(""));
            if ctrls.split(',').any(|c| c == controller) {
                let mut key: Vec<&str> = ctrls.split(',').collect();
                key.sort_unstable();
                let h = hiers.iter().find(|h| h.key == key.join(",")).unwrap();
                return h.dir_of(path);
            }
        }
        let unified = text
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .and_then(|path| Some(hiers.iter().find(|h| h.key.is_empty())?.dir_of(path)));
        if let Some(dir) = unified {
            let ctrls = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
            if ctrls.split_whitespace().any(|c| c == controller) {
                return dir;
            }
        }
        panic!("pid {pid} has no {controller} cgroup: {text}")
    }

    /// A container's memory limit in bytes, as its cgroup holds it (v1
    /// memory.limit_in_bytes, v2 memory.max).
    pub fn memory_limit(mem: &std::path::Path) -> String {
        Self::first_of(mem, &["memory.limit_in_bytes", "memory.max"])
    }

    /// A container's CPU quota in µs per period (v1 cpu.cfs_quota_us, v2 cpu.max's
    /// first field).
    pub fn cpu_quota(cpu: &std::path::Path) -> String {
        Self::first_of(cpu, &["cpu.cfs_quota_us", "cpu.max"])
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string()
    }

    /// A container's CPU shares as the CRI gave them: v1 cpu.shares, or v2's
    /// cpu.weight, which the runtime converted from them (the kernel's and runc's
    /// mapping, `warren::cgroups::shares_to_weight`), shown here as the weight the
    /// given shares map to when it matches.
    pub fn cpu_shares(cpu: &std::path::Path, expected: u64) -> String {
        if cpu.join("cpu.shares").exists() {
            return Self::first_of(cpu, &["cpu.shares"]);
        }
        let weight = Self::first_of(cpu, &["cpu.weight"]);
        if weight == warren::cgroups::shares_to_weight(expected).to_string() {
            expected.to_string()
        } else {
            format!("cpu.weight {weight}")
        }
    }

    fn first_of(dir: &std::path::Path, files: &[&str]) -> String {
        for f in files {
            if let Ok(t) = std::fs::read_to_string(dir.join(f)) {
                return t.trim().to_string();
            }
        }
        panic!("{}: none of {files:?}", dir.display())
    }

    /// Every process of containerd's pid namespace (daemon, shims, runtimes' leftovers,
    /// containers) is in our own cgroup or beneath it, in every hierarchy.
    #[track_caller]
    pub fn assert_processes_beneath_us(&self) {
        let hiers = warren::bench::cgroups::own_hierarchies(std::path::Path::new("/proc")).unwrap();
        let procs = self.daemon.processes();
        assert!(
            procs.len() >= 3,
            "containerd, a shim and a container: {procs:?}"
        );
        for (pid, comm) in procs {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
                continue;
            };
            // v2: beside our own leaf, beneath the delegated base
            // (`warren::cgroups::delegate`).
            warren::bench::cgroups::placed(&text, &hiers, true, &|h| {
                let base = warren::cgroups::delegate::base_of(std::path::Path::new(&h.own_path));
                format!("{}/", base.to_string_lossy().trim_end_matches('/'))
            })
            .unwrap_or_else(|e| panic!("pid {pid} ({comm}) is outside our cgroup: {e}"));
        }
    }

    /// A pod's log file of container `name`.
    pub fn log_file(&self, pod: &str, name: &str) -> PathBuf {
        self.daemon.logs().join(pod).join(format!("{name}.log"))
    }
}

impl Drop for Cri {
    fn drop(&mut self) {
        // The kubelet's way out first; the daemon's drop ends whatever is left.
        for id in self.pods.clone() {
            let _ = self
                .client
                .call_timed("StopPodSandbox", json!({"pod_sandbox_id": id}));
            let _ = self
                .client
                .call_timed("RemovePodSandbox", json!({"pod_sandbox_id": id}));
        }
    }
}
