//! containerd drives warren as its OCI runtime: `ctr run` with the runc v2 shim
//! pointed at warren-oci (`--runc-binary`, the shim's BinaryName option).
//!
//! The test starts a private containerd: its own root, state and gRPC socket in a
//! temp dir, the CRI plugin off (it would want CNI), the `native` snapshotter (plain
//! directories, no overlay mounts on the host). The shim hard-codes its socket
//! directory under /run/containerd, so the daemon runs in a private mount namespace
//! with a fresh tmpfs on /run, and in a private pid namespace so that killing the
//! daemon (the namespace's init) ends every shim and container it started. The
//! image is an OCI image archive made from busybox-static (by
//! `warren::bench::cri::image`, which the CRI test uses too), imported with
//! `ctr images import`. cgroups stay beneath the test's own cgroup: containerd and
//! the shims inherit it, and containerd's environment holds WARREN_OCI_CGROUP_NEST=1,
//! which the shims pass on to warren-oci, so it makes the container's cgroups beneath
//! the shim's (checked for every process of the namespace) instead of at the absolute
//! cgroupsPath `/<namespace>/<id>` that ctr asks for.

mod common;
#[path = "common/containerd.rs"]
mod ctd;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::WARREN;
use ctd::{assert_beneath, cgroup_lines, container_cgroup_dirs, Containerd, IMAGE, NS};

impl Containerd {
    /// `ctr run` with the runc shim running warren-oci (its BinaryName option).
    fn run(&self, flags: &[&str], id: &str, args: &[&str]) -> Output {
        let p = self.path();
        self.ctr_cmd()
            .args([
                "run",
                "--snapshotter",
                "native",
                "--runtime",
                "io.containerd.runc.v2",
            ])
            .arg("--fifo-dir")
            .arg(p.join("fifo"))
            .arg("--runc-binary")
            .arg(p.join("warren-oci"))
            .arg("--runc-root")
            .arg(p.join("oci-root"))
            .args(flags)
            .args([IMAGE, id])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

#[test]
fn ctr_runs_tasks_through_warren_oci() {
    let mut c = Containerd::start();
    let image = warren::bench::cri::image::build(c.path()).unwrap_or_else(|e| panic!("{e}"));
    let out = c.ctr_ok(&[
        "images",
        "import",
        "--snapshotter",
        "native",
        image.to_str().unwrap(),
    ]);
    assert!(out.contains(IMAGE), "{out}");

    // Output reaches ctr, and the container's cgroups are warren-oci's, beneath ours.
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let id = c.id("echo");
    let o = c.run(
        &["--rm"],
        &id,
        &["sh", "-c", "echo hi; cat /proc/self/cgroup"],
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out} {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        c.log()
    );
    let (first, theirs) = out.split_once('\n').unwrap();
    assert_eq!(first.trim(), "hi", "{out}");
    assert_beneath("the container", theirs, &own);
    let memory = cgroup_lines(theirs)
        .into_iter()
        .find(|(c, _)| c.split(',').any(|x| x == "memory"))
        .map(|(_, p)| p)
        .unwrap_or_default();
    assert!(
        memory.ends_with(&format!("/warren-oci/{NS}/{id}")),
        "the container's memory cgroup is {memory:?}, not warren-oci's: {theirs}"
    );
    assert!(
        container_cgroup_dirs(&format!("{NS}/{id}")).is_empty(),
        "--rm left the container's cgroups"
    );

    // The exit status is the task's.
    let id = c.id("exit");
    let o = c.run(&["--rm"], &id, &["sh", "-c", "exit 5"]);
    assert_eq!(
        o.status.code(),
        Some(5),
        "{} {}",
        String::from_utf8_lossy(&o.stderr),
        c.log()
    );

    // A detached task: listed as running, exec works with its own status, every
    // process of containerd's namespace (daemon, shim, container) is beneath our
    // cgroup; kill reports the signal as the status; delete removes the cgroups.
    let id = c.id("detached");
    let o = c.run(&["-d"], &id, &["sleep", "1000"]);
    assert!(
        o.status.success(),
        "{} {}",
        String::from_utf8_lossy(&o.stderr),
        c.log()
    );
    let tasks = c.ctr_ok(&["task", "ls"]);
    let line = tasks
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} not in {tasks}"));
    assert!(line.contains("RUNNING"), "{line}");
    let fifo = c.path().join("fifo");
    let o = c.ctr(&[
        "task",
        "exec",
        "--fifo-dir",
        fifo.to_str().unwrap(),
        "--exec-id",
        "e1",
        &id,
        "sh",
        "-c",
        "echo in-exec; exit 3",
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "in-exec");
    let pids = c.namespace_pids();
    assert!(
        pids.len() >= 3,
        "expected containerd, a shim and the container in the namespace: {pids:?}"
    );
    for pid in pids.iter().filter(|p| common::alive(**p)) {
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if let Ok(theirs) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) {
            assert_beneath(&format!("pid {pid} ({cmd})"), &theirs, &own);
        }
    }
    assert!(
        !container_cgroup_dirs(&format!("{NS}/{id}")).is_empty(),
        "the running task has no cgroup beneath ours"
    );
    // warren list sees it under the shim's runtime root (`<Root>/<namespace>`). The
    // recorded pids are those of containerd's pid namespace, so warren runs there
    // (as on a host, where containerd is in the host's).
    let daemon = c.daemon_pid().expect("containerd runs").to_string();
    let o = Command::new("nsenter")
        .args(["-t", &daemon, "-m", "-p", "--", WARREN])
        .env("WARREN_ROOT", c.path().join("zones"))
        .env("WARREN_RUN_DIR", c.path().join("zones").join("run"))
        .arg("--oci-root")
        .arg(c.path().join("oci-root").join(NS))
        .args(["list", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} not in warren list: {list}"));
    assert_eq!(
        (row["kind"].as_str(), row["oci"]["status"].as_str()),
        (Some("oci"), Some("running")),
        "{row}"
    );
    // pause / resume go through `warren-oci pause` (the freezer), ps through
    // `warren-oci ps --format json`.
    c.ctr_ok(&["task", "pause", &id]);
    let tasks = c.ctr_ok(&["task", "ls"]);
    assert!(
        tasks
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("PAUSED")),
        "{tasks}"
    );
    c.ctr_ok(&["task", "resume", &id]);
    let tasks = c.ctr_ok(&["task", "ls"]);
    assert!(
        tasks
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("RUNNING")),
        "{tasks}"
    );
    let task_pid = tasks
        .lines()
        .find(|l| l.starts_with(&id))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("no pid for {id}: {tasks}"))
        .to_string();
    let ps = c.ctr_ok(&["task", "ps", &id]);
    assert!(
        ps.lines()
            .skip(1)
            .any(|l| l.split_whitespace().next() == Some(task_pid.as_str())),
        "the task's pid {task_pid} is not in ps: {ps}"
    );
    c.ctr_ok(&["task", "kill", "-s", "KILL", &id]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let tasks = c.ctr_ok(&["task", "ls"]);
        if tasks
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("STOPPED"))
        {
            break;
        }
        assert!(Instant::now() < deadline, "{id} did not stop: {tasks}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = c.ctr(&["task", "delete", &id]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{said}");
    assert!(
        said.contains("137"),
        "delete should report status 137: {said}"
    );
    c.ctr_ok(&["container", "delete", &id]);
    assert!(
        container_cgroup_dirs(&format!("{NS}/{id}")).is_empty(),
        "task delete left the container's cgroups"
    );
}
