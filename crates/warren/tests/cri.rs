//! Kubernetes at the CRI level: the gRPC calls a kubelet makes, sent to a private
//! containerd 1.6 with its CRI plugin (tests/common/cri.rs), against RuntimeClass
//! handler `warren` (the runc v2 shim with BinaryName = warren-oci), handler
//! `warren-shim` (warren's own shim, `containerd-shim-warren-v1`, built by `cargo
//! build -p containerd-shim-warren` beside the warren under test, or
//! `$WARREN_SHIM_BINARY`) and handler `runc` side by side, with the same assertions. The client is the Kubernetes project's
//! generated CRI stubs (PyPI container-runtime-interface-api) over grpcio.
//!
//! Covered: RunPodSandbox (host network, and a pod network namespace with an address
//! from a CNI bridge in containerd's own network namespace), CreateContainer with
//! memory and CPU limits (seen in the container's cgroup), StartContainer, ExecSync,
//! Exec with a tty and Attach through the streaming server (WebSocket), ContainerStats
//! and ListContainerStats, UpdateContainerResources (the cgroup changes),
//! ReopenContainerLog, StopContainer honouring the grace period (a container trapping
//! SIGTERM exits 0 in its grace, one ignoring it is killed when the grace ends),
//! StopPodSandbox, RemovePodSandbox (the containers' cgroups go); and failures as the
//! kubelet reads them: an image that is not there, an image config without a command,
//! a command the image lacks
//! (StartError), OOM (OOMKilled, 137; with warren's shim also an OOM at once), a
//! container that exits at once (its code). On cgroup v2: the same warren-shim
//! lifecycle in a freshly booted VM with Debian 12's kernel and this host's userland
//! (`cri_on_debian12_cgroup_v2_in_a_fresh_vm`, at the end).

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cri::{handlers, Cri};
use serde_json::{json, Value};

const MIB: u64 = 1024 * 1024;

/// `value` of a CRI UInt64Value (JSON: {"value": "123"}), 0 when absent.
fn u64_of(v: &Value) -> u64 {
    match &v["value"] {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_u64().unwrap_or(0),
        _ => 0,
    }
}

/// The whole lifecycle of one pod with `handler`.
/// warren's shim (the parent of the container's init: its subreaper) serves the
/// pod on two threads, its runtime's and the reaper, with two tasks (the sandbox's
/// and the container's), two connections from containerd, a `Wait` outstanding on
/// each and the OOM watch.
fn assert_shim_threads(init: i32) -> i32 {
    let status = std::fs::read_to_string(format!("/proc/{init}/status")).unwrap();
    let shim: i32 = status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no PPid in /proc/{init}/status"));
    let comm = std::fs::read_to_string(format!("/proc/{shim}/comm")).unwrap();
    assert!(
        comm.starts_with("containerd-shim"),
        "the parent of the container's init {init} is {shim} ({comm:?}), not the shim"
    );
    let threads: Vec<String> = std::fs::read_dir(format!("/proc/{shim}/task"))
        .unwrap()
        .filter_map(|t| {
            let t = t.ok()?.file_name();
            let name = std::fs::read_to_string(format!("/proc/{shim}/task/{}/comm", t.to_str()?));
            Some(format!("{} {}", t.to_str()?, name.ok()?.trim()))
        })
        .collect();
    assert_eq!(threads.len(), 2, "the shim {shim}'s threads: {threads:?}");
    shim
}

/// Wait until the file at `log` holds `needle`, failing with `what` after `within`.
fn wait_log(log: &std::path::Path, needle: &str, within: Duration, what: impl Fn() -> String) {
    let t = Instant::now();
    while !std::fs::read_to_string(log).is_ok_and(|s| s.contains(needle)) {
        assert!(t.elapsed() < within, "{}", what());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn lifecycle(cri: &mut Cri, handler: &str) {
    let name = format!("life-{handler}");
    let pod_cfg = cri.pod_config(&name, true);
    let pod = cri.run_pod(&pod_cfg, handler);
    let st = cri.call("PodSandboxStatus", json!({"pod_sandbox_id": pod}));
    assert_eq!(st["status"]["state"], "SANDBOX_READY", "{handler}: {st}");
    assert_eq!(st["status"]["runtime_handler"], handler, "{st}");

    // A long-running container with limits, trapping SIGTERM (grace: 1 s of work).
    let main = Cri::container(
        "main",
        &[
            "sh",
            "-c",
            "trap 'echo got-term; sleep 1; echo bye; exit 0' TERM; \
             i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done",
        ],
        json!({"linux": {"resources": {
            "memory_limit_in_bytes": 64 * MIB, "cpu_period": 100000, "cpu_quota": 50000,
            "cpu_shares": 512}}}),
    );
    let id = cri.create(&pod, &pod_cfg, main);
    cri.call("StartContainer", json!({"container_id": id}));
    let s = cri.wait_state(&id, "CONTAINER_RUNNING", Duration::from_secs(20));
    assert_eq!(s["metadata"]["name"], "main", "{s}");

    // Limits in the container's cgroup.
    let pid = cri.host_pid(&id);
    let mem = Cri::cgroup_dir(pid, "memory");
    let cpu = Cri::cgroup_dir(pid, "cpu");
    assert_eq!(
        Cri::memory_limit(&mem),
        (64 * MIB).to_string(),
        "{handler}: {}",
        mem.display()
    );
    assert_eq!(Cri::cpu_quota(&cpu), "50000", "{handler}");
    assert_eq!(Cri::cpu_shares(&cpu, 512), "512", "{handler}");
    // ... in the pod's cgroup parent, beneath our own cgroup (as are containerd, the
    // shims and every container).
    cri.assert_processes_beneath_us();
    let parent = cri.daemon.cgroup_parent(&name);
    assert!(
        mem.to_string_lossy().contains(&format!("/{parent}/")),
        "{handler}: {} is not in the pod's cgroup parent {parent}",
        mem.display()
    );

    // ExecSync: output and exit code.
    let r = cri.call(
        "ExecSync",
        json!({"container_id": id, "cmd": ["sh", "-c", "echo out-$((6*7)); echo err >&2; exit 3"], "timeout": 20}),
    );
    assert_eq!(r["stdout"], "out-42\n", "{handler}: {r}");
    assert_eq!(r["stderr"], "err\n", "{handler}: {r}");
    assert_eq!(r["exit_code"], 3, "{handler}: {r}");
    if handler == "warren-shim" {
        assert_shim_threads(pid);
    }

    // Exec with a tty through the streaming server.
    let r = cri.call(
        "Exec",
        json!({"container_id": id, "cmd": ["sh"], "tty": true, "stdin": true, "stdout": true}),
    );
    let url = r["url"].as_str().unwrap().to_string();
    let out = cri
        .client
        .stream(&url, "tty; echo done-$((1+2)); exit 7\n", None, 20.0)
        .unwrap_or_else(|e| panic!("{handler}: exec stream: {e}"));
    let text = out["stdout"].as_str().unwrap_or("");
    assert!(
        text.contains("/dev/pts/"),
        "{handler}: no tty in the exec: {out}"
    );
    assert!(text.contains("done-3"), "{handler}: {out}");
    let causes = out["status"]["details"]["causes"].to_string();
    assert!(
        out["status"]["status"] == "Failure" && causes.contains("\"7\""),
        "{handler}: the exec's exit code 7 is not in its status: {out}"
    );

    // ContainerStats and ListContainerStats.
    let r = cri.call("ContainerStats", json!({"container_id": id}));
    let ws = u64_of(&r["stats"]["memory"]["working_set_bytes"]);
    assert!(ws > 0 && ws < 64 * MIB, "{handler}: working set {ws}: {r}");
    assert!(
        u64_of(&r["stats"]["cpu"]["usage_core_nano_seconds"]) > 0,
        "{handler}: no CPU usage: {r}"
    );
    let r = cri.call(
        "ListContainerStats",
        json!({"filter": {"pod_sandbox_id": pod}}),
    );
    let ids: Vec<&str> = r["stats"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["attributes"]["id"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(ids, vec![id.as_str()], "{handler}: {r}");

    // UpdateContainerResources: the cgroup follows.
    cri.call(
        "UpdateContainerResources",
        json!({"container_id": id, "linux": {"memory_limit_in_bytes": 96 * MIB,
            "cpu_period": 100000, "cpu_quota": 20000, "cpu_shares": 256}}),
    );
    assert_eq!(Cri::memory_limit(&mem), (96 * MIB).to_string(), "{handler}");
    assert_eq!(Cri::cpu_quota(&cpu), "20000", "{handler}");
    assert_eq!(Cri::cpu_shares(&cpu, 256), "256", "{handler}");

    // ReopenContainerLog: the log moved away, a new one is written.
    let log = cri.log_file(&name, "main");
    let first = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        first.contains(" stdout F tick 0"),
        "{handler}: CRI log format: {first}"
    );
    let moved = log.with_extension("log.1");
    std::fs::rename(&log, &moved).unwrap();
    cri.call("ReopenContainerLog", json!({"container_id": id}));
    wait_log(&log, "tick", Duration::from_secs(10), || {
        format!("{handler}: no new log after reopen")
    });

    // Attach to a container reading its stdin.
    let attach_cfg = Cri::container("attach", &["sh"], json!({"stdin": true}));
    let att = cri.create(&pod, &pod_cfg, attach_cfg);
    cri.call("StartContainer", json!({"container_id": att}));
    cri.wait_state(&att, "CONTAINER_RUNNING", Duration::from_secs(20));
    let r = cri.call(
        "Attach",
        json!({"container_id": att, "stdin": true, "stdout": true, "stderr": true}),
    );
    let url = r["url"].as_str().unwrap().to_string();
    let out = cri
        .client
        .stream(&url, "echo attached-$((2*3))\n", Some("attached-6"), 20.0)
        .unwrap_or_else(|e| panic!("{handler}: attach stream: {e}"));
    assert!(
        out["stdout"].as_str().unwrap_or("").contains("attached-6"),
        "{handler}: {out}"
    );

    // StopContainer honours the grace period: the trap runs (1 s) and exits 0.
    let t = Instant::now();
    cri.call("StopContainer", json!({"container_id": id, "timeout": 20}));
    let took = t.elapsed();
    let s = cri.wait_state(&id, "CONTAINER_EXITED", Duration::from_secs(5));
    assert_eq!(s["exit_code"], 0, "{handler}: {s}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(15),
        "{handler}: stop took {took:?}, the trap needs 1 s of its 20 s grace"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("got-term") && text.contains("bye"),
        "{handler}: {text}"
    );
    // ... and one that ignores SIGTERM is killed when a 2 s grace ends. It says when
    // its trap is set: "running" comes before the shell has read it (a SIGTERM then
    // ended it with 143, under load).
    let deaf = Cri::container(
        "deaf",
        &[
            "sh",
            "-c",
            "trap '' TERM; echo armed; while true; do sleep 0.2; done",
        ],
        json!({}),
    );
    let deaf = cri.create(&pod, &pod_cfg, deaf);
    cri.call("StartContainer", json!({"container_id": deaf}));
    cri.wait_state(&deaf, "CONTAINER_RUNNING", Duration::from_secs(20));
    wait_log(
        &cri.log_file(&name, "deaf"),
        " stdout F armed",
        Duration::from_secs(20),
        || format!("{handler}: the deaf container never said its trap was set"),
    );
    let t = Instant::now();
    cri.call("StopContainer", json!({"container_id": deaf, "timeout": 2}));
    let took = t.elapsed();
    let s = cri.wait_state(&deaf, "CONTAINER_EXITED", Duration::from_secs(5));
    assert_eq!(s["exit_code"], 137, "{handler}: {s}");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(12),
        "{handler}: stop took {took:?} with a 2 s grace"
    );

    // StopPodSandbox, RemovePodSandbox: gone, with the containers' cgroups.
    cri.call("StopPodSandbox", json!({"pod_sandbox_id": pod}));
    let st = cri.call("PodSandboxStatus", json!({"pod_sandbox_id": pod}));
    assert_eq!(st["status"]["state"], "SANDBOX_NOTREADY", "{handler}: {st}");
    cri.call("RemovePodSandbox", json!({"pod_sandbox_id": pod}));
    let left = cri.call("ListPodSandbox", json!({"filter": {"id": pod}}));
    assert!(
        left["items"].as_array().is_none_or(|a| a.is_empty()),
        "{left}"
    );
    let left = cri.call("ListContainers", json!({"filter": {"pod_sandbox_id": pod}}));
    assert!(
        left["containers"].as_array().is_none_or(|a| a.is_empty()),
        "{left}"
    );
    let dirs = cri.daemon.pod_cgroup_dirs();
    for c in [&pod, &id, &att, &deaf] {
        assert!(
            !dirs.iter().any(|d| d.ends_with(c)),
            "{handler}: the cgroup of {c} is left: {dirs:?}"
        );
    }
}

/// A pod with its own network namespace: an address from the CNI bridge, on eth0.
fn pod_network(cri: &mut Cri, handler: &str) {
    let name = format!("net-{handler}");
    let cfg = cri.pod_config(&name, false);
    let pod = cri.run_pod(&cfg, handler);
    let st = cri.call("PodSandboxStatus", json!({"pod_sandbox_id": pod}));
    let ip = st["status"]["network"]["ip"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        ip.starts_with("10.239.0."),
        "{handler}: pod ip {ip:?}: {st}"
    );
    let c = Cri::container("net", &["sleep", "1000"], json!({}));
    let id = cri.create(&pod, &cfg, c);
    cri.call("StartContainer", json!({"container_id": id}));
    let r = cri.call(
        "ExecSync",
        json!({"container_id": id, "cmd": ["ip", "-4", "addr", "show", "eth0"], "timeout": 20}),
    );
    assert!(
        r["stdout"]
            .as_str()
            .unwrap_or("")
            .contains(&format!("inet {ip}/")),
        "{handler}: {r}"
    );
    cri.call("StopPodSandbox", json!({"pod_sandbox_id": pod}));
    cri.call("RemovePodSandbox", json!({"pod_sandbox_id": pod}));
}

#[test]
fn cri_pod_lifecycle_with_warren() {
    let mut cri = Cri::start();
    lifecycle(&mut cri, "warren");
    pod_network(&mut cri, "warren");
}

/// warren's own shim (`containerd-shim-warren-v1`, one per pod): the same assertions.
#[test]
fn cri_pod_lifecycle_with_warren_shim() {
    common::cri::require_shim();
    let mut cri = Cri::start();
    lifecycle(&mut cri, "warren-shim");
    pod_network(&mut cri, "warren-shim");
}

/// One warren shim per node (`WARREN_SHIM_GROUP=node` for containerd, handler
/// `warren-shim-node` of the bench): two pods' containers are children of the same
/// shim, still on two threads; a pod's removal leaves the other served, and the
/// last one's leaves the shim up for its linger.
#[test]
fn cri_pods_share_one_warren_shim_per_node() {
    common::cri::require_shim();
    let handler = warren::bench::cri::daemon::Handler::named("warren-shim-node").unwrap();
    // Debug: the shim's lines of each create reach containerd's log.
    let mut cri = Cri::start_with(&handler.setup(&warren::bench::cri::daemon::Setup {
        debug: true,
        ..Default::default()
    }));
    let mut pods = Vec::new();
    for name in ["node-a", "node-b"] {
        let cfg = cri.pod_config(name, true);
        let pod = cri.run_pod(&cfg, handler.name);
        let c = Cri::container("main", &["sleep", "1000"], json!({}));
        let id = cri.create(&pod, &cfg, c);
        cri.call("StartContainer", json!({"container_id": id}));
        cri.wait_state(&id, "CONTAINER_RUNNING", Duration::from_secs(20));
        let shim = assert_shim_threads(cri.host_pid(&id));
        pods.push((pod, id, shim));
    }
    assert_eq!(pods[0].2, pods[1].2, "one shim for both pods: {pods:?}");
    let shim = pods[0].2;
    let exec = |cri: &mut Cri, id: &str| {
        let r = cri.call(
            "ExecSync",
            json!({"container_id": id, "cmd": ["echo", "served"], "timeout": 20}),
        );
        assert_eq!(r["stdout"], "served\n", "{r}");
    };
    exec(&mut cri, &pods[1].1);
    for call in ["StopPodSandbox", "RemovePodSandbox"] {
        cri.call(call, json!({"pod_sandbox_id": pods[0].0}));
    }
    assert!(common::alive(shim), "the shim went with the first pod");
    exec(&mut cri, &pods[1].1);
    assert_eq!(
        cri.status(&pods[1].1)["status"]["state"],
        "CONTAINER_RUNNING"
    );
    // The shim's log still reaches containerd after the pod it started in is gone
    // (it moved to a live task's FIFO): a new pod's create is logged.
    let cfg = cri.pod_config("node-c", true);
    let third = cri.run_pod(&cfg, handler.name);
    let line = format!("create {third}: done");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !cri.daemon.full_log().contains(&line) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        cri.daemon.full_log().contains(&line),
        "the node's shim's log is lost after its first pod went: no {line:?} in containerd's log"
    );
    for pod in [&pods[1].0, &third] {
        for call in ["StopPodSandbox", "RemovePodSandbox"] {
            cri.call(call, json!({"pod_sandbox_id": pod}));
        }
    }
    assert!(
        common::alive(shim),
        "the node's shim stopped with its last pod instead of lingering"
    );
}

#[test]
fn cri_pod_lifecycle_with_runc() {
    let mut cri = Cri::start();
    lifecycle(&mut cri, "runc");
    pod_network(&mut cri, "runc");
}

/// Failures as the kubelet reads them, every handler in one daemon.
#[test]
fn cri_failures_are_reported_as_the_kubelet_expects() {
    common::cri::require_shim();
    let mut cri = Cri::start();
    for handler in handlers() {
        let name = format!("fail-{handler}");
        let cfg = cri.pod_config(&name, true);
        let pod = cri.run_pod(&cfg, handler);

        // An image that is not there: CreateContainer fails, naming it.
        let c = json!({"metadata": {"name": "noimage"}, "image": {"image": "localhost/absent:1"},
            "command": ["true"]});
        let e = cri
            .try_call(
                "CreateContainer",
                json!({"pod_sandbox_id": pod, "config": c, "sandbox_config": cfg}),
            )
            .expect_err("an absent image must fail");
        assert!(e.details.contains("localhost/absent:1"), "{handler}: {e}");

        // A bad image config (neither Entrypoint nor Cmd) and no command in the
        // container's: CreateContainer fails saying so.
        let c = json!({"metadata": {"name": "badcfg"},
            "image": {"image": warren::bench::cri::image::NO_COMMAND}});
        let e = cri
            .try_call(
                "CreateContainer",
                json!({"pod_sandbox_id": pod, "config": c, "sandbox_config": cfg}),
            )
            .expect_err("an image without a command must fail");
        assert!(e.details.contains("no command specified"), "{handler}: {e}");

        // A command the image lacks: StartContainer fails, the status says StartError.
        let c = Cri::container("nocmd", &["/no/such/binary"], json!({}));
        let id = cri.create(&pod, &cfg, c);
        let e = cri
            .try_call("StartContainer", json!({"container_id": id}))
            .expect_err("a missing binary must fail to start");
        assert!(e.details.contains("/no/such/binary"), "{handler}: {e}");
        let s = cri.wait_state(&id, "CONTAINER_EXITED", Duration::from_secs(10));
        assert_eq!(s["reason"], "StartError", "{handler}: {s}");

        // OOM: 16 MiB limit, 64 MiB touched.
        let c = Cri::container(
            "oom",
            &[
                "sh",
                "-c",
                "sleep 0.5; dd if=/dev/zero of=/dev/null bs=64M count=1",
            ],
            json!({"linux": {"resources": {"memory_limit_in_bytes": 16 * MIB}}}),
        );
        let id = cri.create(&pod, &cfg, c);
        cri.call("StartContainer", json!({"container_id": id}));
        let s = cri.wait_state(&id, "CONTAINER_EXITED", Duration::from_secs(20));
        assert_eq!(
            (&s["reason"], &s["exit_code"]),
            (&json!("OOMKilled"), &json!(137)),
            "{handler}: {s}\ncontainerd:\n{}",
            cri.daemon.log()
        );

        // warren's shim reads the OOM kill from the container's cgroup at its exit, so
        // an OOM at once (before the runc shim would watch) is OOMKilled too.
        if handler == "warren-shim" {
            let c = Cri::container(
                "oom-now",
                &["dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"],
                json!({"linux": {"resources": {"memory_limit_in_bytes": 16 * MIB}}}),
            );
            let id = cri.create(&pod, &cfg, c);
            cri.call("StartContainer", json!({"container_id": id}));
            let s = cri.wait_state(&id, "CONTAINER_EXITED", Duration::from_secs(20));
            assert_eq!(
                (&s["reason"], &s["exit_code"]),
                (&json!("OOMKilled"), &json!(137)),
                "{handler}: an OOM at once: {s}"
            );
        }

        // Exits at once: its code, reason Error; 0 is Completed.
        for (code, reason) in [(3, "Error"), (0, "Completed")] {
            let c = Cri::container(
                &format!("exit{code}"),
                &["sh", "-c", &format!("exit {code}")],
                json!({}),
            );
            let id = cri.create(&pod, &cfg, c);
            cri.call("StartContainer", json!({"container_id": id}));
            let s = cri.wait_state(&id, "CONTAINER_EXITED", Duration::from_secs(20));
            let got = s["exit_code"].as_i64().unwrap_or(0);
            assert_eq!(
                (got, s["reason"].as_str()),
                (code, Some(reason)),
                "{handler}: {s}"
            );
        }
        cri.call("StopPodSandbox", json!({"pod_sandbox_id": pod}));
        cri.call("RemovePodSandbox", json!({"pod_sandbox_id": pod}));
    }
}

/// `warren bench cri` runs every handler and reports what it measured: latencies,
/// the shims, the memory beyond the pods' cgroups, and (`--breakdown`, containerd at
/// log level debug) RunPodSandbox's phases read from containerd's log.
#[test]
fn bench_cri_measures_pods_per_handler() {
    let env = common::Env::new();
    let out = env.root().join("cri-bench");
    let shim = warren::bench::cri::daemon::shim_binary(std::path::Path::new(common::WARREN));
    assert!(
        shim.exists(),
        "{} is missing: build it first with `cargo build -p containerd-shim-warren`",
        shim.display()
    );
    let r = env.ok(&[
        "bench",
        "cri",
        "--pods",
        "2",
        "--handlers",
        "runc,warren,warren-shim",
        "--breakdown",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "{v}");
    for (st, handler) in steps.iter().zip(["runc", "warren", "warren-shim"]) {
        assert_eq!(
            (st["handler"].as_str(), st["pods"].as_u64()),
            (Some(handler), Some(2)),
            "{st}"
        );
        for k in [
            "run_pod_sandbox_ms",
            "create_container_ms",
            "start_container_ms",
            "teardown_ms",
        ] {
            assert!(
                st[k]["median"].as_f64().unwrap() > 0.0,
                "{handler} {k}: {st}"
            );
        }
        // One shim per pod (the runc shim for runc and warren, warren's own).
        assert_eq!(st["shims"], 2, "{st}");
        assert!(
            st["shim_rss_kib_per_pod"].as_f64().unwrap() > 1024.0,
            "{st}"
        );
        // The pods' own cgroups hold their processes; the shims' anonymous memory
        // is part of what lies beyond them.
        let b = &st["beyond"];
        assert!(
            b["cgroups_usage_kib"].as_f64().unwrap() > 0.0,
            "{handler}: {b}"
        );
        assert!(
            b["cgroups_held_kib"].as_f64().unwrap() > 0.0,
            "{handler}: {b}"
        );
        assert!(b["shim_anon_kib"].as_f64().unwrap() > 0.0, "{handler}: {b}");
        for k in [
            "host_kib",
            "beyond_kib",
            "containerd_anon_kib",
            "client_anon_kib",
            "kernel_kib",
            "rest_kib",
        ] {
            assert!(
                b[k].as_f64().is_some_and(f64::is_finite),
                "{handler} {k}: {b}"
            );
        }
        // Both pods found whole in containerd's debug log, the shim's start and the
        // task's create and start among the phases.
        let bd = &st["breakdown"];
        assert_eq!(bd["pods"], 2, "{handler}: {bd}");
        assert!(bd["total_ms"]["median"].as_f64().unwrap() > 0.0, "{bd}");
        let phases: Vec<&str> = bd["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        for want in ["task start", "task create (the pause container's create)"] {
            assert!(
                phases.contains(&want),
                "{handler}: {want} not in {phases:?}"
            );
        }
        if handler == "warren-shim" {
            assert!(
                bd["helper_ms"]["median"].as_f64().unwrap() > 0.0,
                "the shim's helper timed: {bd}"
            );
        }
        assert!(out.join(format!("containerd-{handler}-2.log")).exists());
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| warren | 2 | host |"), "{report}");
    assert!(
        report.contains("## Memory beyond the containers"),
        "{report}"
    );
    assert!(
        report.contains("## RunPodSandbox broken down: warren-shim, 2 pods, native snapshotter"),
        "{report}"
    );
    assert!(out.join("results.json").exists());
}

// ---- cgroup v2 on Debian 12's kernel, in a fresh VM ----
//
// The tests above run on this host (cgroup v1 hybrid). This one boots Debian 12's own
// kernel (6.1), cgroup v2 only, fresh, under QEMU (TCG) with this host's userland
// (`scripts/vm/hostroot.sh`: this host's root read-only through virtiofs under a tmpfs
// overlay, so containerd, the CRI client's venv and the warren under test are there),
// and runs there, from a cgroup laid out as systemd's `Delegate=yes` service: the
// warren-shim lifecycle test above (this test binary, in the guest), then `warren bench
// cri` with two pods. What it shows that the host cannot: the pods' cgroups get their
// controllers on v2 (the test and the bench prepare their delegated subtree as the
// kubelet does; each pod's sandbox and container have a memory cgroup beneath the
// pod's), the shim sets and updates the limits in v2's files, and a fresh boot's
// per-memcg shrinker state is small, the premise of docs/kubernetes.md's fresh-boot
// figures. Needs qemu-system-x86 and virtiofsd (scripts/test.sh installs both);
// fails naming what is missing. QEMU and the virtiofsd daemons share the script's
// process group and are killed with it on every path.

const WARREN: &str = env!("CARGO_BIN_EXE_warren");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// hostroot.sh in a process group of its own: killed as a group when dropped, so
/// QEMU and the virtiofsd daemons go with it even when the script's own trap cannot
/// run.
struct Guest(Child);

impl Drop for Guest {
    fn drop(&mut self) {
        let pgid = self.0.id() as i32;
        // SAFETY: kill(2) on our own child's process group; no memory is touched.
        unsafe {
            warren_sys::libc::kill(-pgid, warren_sys::libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

fn fetch_kernel(which: &str) -> String {
    let out = Command::new(repo().join("scripts/vm/fetch-kernel.sh"))
        .arg(which)
        .output()
        .expect("running scripts/vm/fetch-kernel.sh");
    assert!(
        out.status.success(),
        "fetch-kernel.sh {which}: {}\nscripts/test.sh adds the bookworm-backports source and caches the kernels",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn cri_on_debian12_cgroup_v2_in_a_fresh_vm() {
    let kdir = fetch_kernel("debian12");
    let shim = Path::new(WARREN).with_file_name("containerd-shim-warren-v1");
    assert!(
        shim.exists(),
        "{} is missing: cargo build -p containerd-shim-warren (scripts/test.sh does)",
        shim.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let work = tmp.path().join("work");
    // This very test binary runs the warren-shim lifecycle test in the guest (cargo
    // runs tests from the package's directory), then the bench.
    let me = std::env::current_exe().unwrap();
    let guest_cmd = format!(
        "set -e; cd {pkg}; {me} --exact cri_pod_lifecycle_with_warren_shim --test-threads=1; \
         root=$(mktemp -d /tmp/cri.XXXX); WARREN_ROOT=$root {WARREN} bench cri --pods 2 \
         --handlers warren-shim --snapshotter overlayfs --oci-root $root/oci --out {out}/run",
        pkg = env!("CARGO_MANIFEST_DIR"),
        me = me.display(),
        out = out.display()
    );
    let console = tmp.path().join("console.log");
    let child = Command::new(repo().join("scripts/vm/hostroot.sh"))
        .args([
            kdir.as_str(),
            out.to_str().unwrap(),
            "bash",
            "-c",
            &guest_cmd,
        ])
        .env("WARREN_VM_WORK", &work)
        .env("WARREN_VM_MEM", "4096")
        .env("WARREN_VM_DISK", "8")
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&console).unwrap())
        .stderr(Stdio::from(
            std::fs::File::create(tmp.path().join("stderr")).unwrap(),
        ))
        .spawn()
        .expect("starting scripts/vm/hostroot.sh");
    let mut guest = Guest(child);
    let deadline = Instant::now() + Duration::from_secs(900);
    let status = loop {
        if let Some(s) = guest.0.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let text = std::fs::read_to_string(&console).unwrap_or_default();
    let err = std::fs::read_to_string(tmp.path().join("stderr")).unwrap_or_default();
    assert_ne!(
        status.and_then(|s| s.code()),
        Some(127),
        "QEMU or virtiofsd is not installed: {err}"
    );
    assert!(
        status.is_some(),
        "the guest did not finish within 900 s; console:\n{text}"
    );
    assert!(
        status.unwrap().success(),
        "the lifecycle test or the bench failed in the guest ({status:?}): {err}\nconsole:\n{text}"
    );
    assert!(
        text.contains("test cri_pod_lifecycle_with_warren_shim ... ok"),
        "the lifecycle test did not pass in the guest:\n{text}"
    );
    assert!(
        text.contains("WARREN-VM-KERNEL 6.1."),
        "not Debian 12's kernel:\n{text}"
    );
    let results = out.join("run/results.json");
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&results)
            .unwrap_or_else(|e| panic!("{}: {e}\nconsole:\n{text}", results.display())),
    )
    .unwrap();
    assert_eq!(r["machine"]["cgroup_version"], "v2", "{}", r["machine"]);
    assert!(
        r["machine"]["kernel"]
            .as_str()
            .is_some_and(|k| k.starts_with("6.1.")),
        "{}",
        r["machine"]
    );
    let step = &r["steps"][0];
    assert_eq!(step["handler"], "warren-shim", "{step}");
    assert_eq!(step["pods"], 2, "{step}");
    assert_eq!(step["shims"], 2, "one shim per pod: {step}");
    let beyond = &step["beyond"];
    // The pod's cgroup, its sandbox's and its container's: all memory cgroups (the
    // controllers reached them through the delegated subtree).
    assert_eq!(beyond["memcgs_per_pod"], 3.0, "{beyond}");
    assert!(
        beyond["cgroups_usage_kib"].as_f64().unwrap_or(0.0) > 0.0,
        "the pods' memory cgroups charged nothing: {beyond}"
    );
    // The probe ran on v2 beneath the delegated base, and a fresh boot's shrinker
    // state per memory cgroup is a few KiB (this long-lived host's: ~620).
    assert!(
        r["memcg_probe_error"].is_null(),
        "{}",
        r["memcg_probe_error"]
    );
    let per_memcg = r["memcg_probe"]["kib_per_memcg"]
        .as_f64()
        .unwrap_or(f64::NAN);
    assert!(
        per_memcg < 64.0,
        "one empty memcg adds {per_memcg} KiB on a fresh boot: {}",
        r["memcg_probe"]
    );
}
