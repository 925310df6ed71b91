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

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{require_root, WARREN};

/// The busybox image of the archive `warren::bench::cri::image` builds (the CRI test's).
const IMAGE: &str = warren::bench::cri::image::BUSYBOX;
/// The containerd namespace; `ctr` makes cgroupsPath `/<namespace>/<id>`, which
/// warren-oci, nesting, makes as `warren-oci/<namespace>/<id>` beneath its own cgroup.
const NS: &str = "warrentest";

/// The cgroup directories on this host for a path `warren-oci/<leaf>` made beneath
/// this process's own cgroup (one per mounted hierarchy).
fn container_cgroup_dirs(leaf: &str) -> Vec<PathBuf> {
    let mounts =
        warren::cgroups::parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap());
    let own =
        warren::cgroups::parse_proc_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap());
    mounts
        .iter()
        .map(|m| {
            let path = own
                .iter()
                .find(|(c, _)| m.controllers.iter().all(|x| c.contains(x)) && !c.is_empty())
                .map(|(_, p)| p.clone())
                .unwrap_or_else(|| "/".into());
            m.mountpoint
                .join(path.trim_start_matches('/'))
                .join(warren::oci::cgroup::GROUP)
                .join(leaf)
        })
        .filter(|d| d.exists())
        .collect()
}

/// `(hierarchy, path)` pairs of a /proc/<pid>/cgroup text, keyed by the
/// hierarchy's controller list (`""` for the unified one).
fn cgroup_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let (_, ctrl, path) = (it.next()?, it.next()?, it.next()?);
            Some((ctrl.to_string(), path.to_string()))
        })
        .collect()
}

/// Every line of `theirs` names a cgroup at or beneath ours in the same hierarchy.
fn assert_beneath(what: &str, theirs: &str, ours: &str) {
    let ours = cgroup_lines(ours);
    for (ctrl, path) in cgroup_lines(theirs) {
        let (_, mine) = ours
            .iter()
            .find(|(c, _)| *c == ctrl)
            .unwrap_or_else(|| panic!("{what}: hierarchy {ctrl:?} is not in ours {ours:?}"));
        let mine = mine.trim_end_matches('/');
        assert!(
            path == mine || path.starts_with(&format!("{mine}/")) || mine.is_empty(),
            "{what}: {ctrl}:{path} is not beneath our {ctrl}:{mine}"
        );
    }
}

/// A private containerd; dropping it removes tasks, containers, the daemon (with
/// everything in its pid namespace), the container cgroups and the directory.
struct Containerd {
    dir: tempfile::TempDir,
    /// `unshare`, the parent of the daemon (the namespace's init).
    unshare: Child,
    ids: Vec<String>,
}

impl Containerd {
    fn start() -> Containerd {
        require_root();
        for bin in ["containerd", "ctr", "containerd-shim-runc-v2", "unshare"] {
            let found = std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).exists()))
                .unwrap_or(false);
            assert!(
                found,
                "{bin} is not installed: scripts/test.sh installs containerd (apt-get install containerd)"
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("warren-ctd-test")
            .tempdir_in("/tmp")
            .unwrap();
        let p = dir.path();
        std::os::unix::fs::symlink(WARREN, p.join("warren-oci")).unwrap();
        std::fs::create_dir_all(p.join("fifo")).unwrap();
        // Plugins that would reach beyond the temp dir (CRI: CNI and /opt; opt: /opt)
        // or need other filesystems are off; `native` snapshots are directories.
        let config = format!(
            r#"version = 2
root = "{p}/root"
state = "{p}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.overlayfs", "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{p}/containerd.sock"
[ttrpc]
  address = "{p}/containerd.sock.ttrpc"
[debug]
  level = "debug"
"#,
            p = p.display()
        );
        std::fs::write(p.join("config.toml"), config).unwrap();
        let log = std::fs::File::create(p.join("containerd.log")).unwrap();
        let script = format!(
            "mount -t tmpfs tmpfs /run && exec containerd -c {}/config.toml",
            p.display()
        );
        // Nesting: ctr's absolute cgroupsPath would leave our cgroup. The shims
        // inherit containerd's environment and pass it to warren-oci.
        let unshare = Command::new("unshare")
            .env(warren::oci::cgroup::NEST_ENV, "1")
            .args([
                "--mount",
                "--propagation",
                "private",
                "--pid",
                "--fork",
                "--kill-child=SIGKILL",
                "--mount-proc",
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut c = Containerd {
            dir,
            unshare,
            ids: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if c.ctr(&["version"]).status.success() {
                break;
            }
            if let Ok(Some(st)) = c.unshare.try_wait() {
                panic!("containerd exited ({st}): {}", c.log());
            }
            assert!(
                Instant::now() < deadline,
                "containerd did not answer on its socket within 30s: {}",
                c.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        c
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn log(&self) -> String {
        std::fs::read_to_string(self.path().join("containerd.log")).unwrap_or_default()
    }
    /// The daemon's host pid: unshare's only child.
    fn daemon_pid(&self) -> Option<i32> {
        let pid = self.unshare.id();
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }
    fn ctr_cmd(&self) -> Command {
        let mut c = Command::new("ctr");
        c.arg("-a")
            .arg(self.path().join("containerd.sock"))
            .args(["-n", NS]);
        c
    }
    fn ctr(&self, args: &[&str]) -> Output {
        self.ctr_cmd()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
    #[track_caller]
    fn ctr_ok(&self, args: &[&str]) -> String {
        let o = self.ctr(args);
        assert!(
            o.status.success(),
            "ctr {args:?}: {} {}\ncontainerd log:\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
            self.log()
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    /// A container id unique to this test process.
    fn id(&mut self, name: &str) -> String {
        let id = format!("{name}-{}", std::process::id());
        self.ids.push(id.clone());
        id
    }
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
    /// The host pids of every process in the daemon's pid namespace.
    fn namespace_pids(&self) -> Vec<i32> {
        let mut out = Vec::new();
        let mut todo: Vec<i32> = self.daemon_pid().into_iter().collect();
        while let Some(pid) = todo.pop() {
            out.push(pid);
            for t in std::fs::read_dir(format!("/proc/{pid}/task"))
                .into_iter()
                .flatten()
                .flatten()
            {
                let children =
                    std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
                todo.extend(
                    children
                        .split_whitespace()
                        .filter_map(|s| s.parse::<i32>().ok()),
                );
            }
        }
        out
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // containerd's own path first: it deletes through warren-oci.
        for id in self.ids.clone() {
            let _ = self.ctr(&["task", "kill", "-s", "KILL", &id]);
            let _ = self.ctr(&["task", "delete", "--force", &id]);
            let _ = self.ctr(&["container", "delete", &id]);
        }
        // Then the daemon: SIGKILL to the pid namespace's init ends every shim and
        // container process in it, and with the last of them its mounts (/run's
        // tmpfs, the rootfs binds) go; unshare reaps it and exits.
        if let Some(pid) = self.daemon_pid() {
            let _ = warren_sys::proc::kill(pid, 9);
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
        for id in &self.ids {
            for d in container_cgroup_dirs(&format!("{NS}/{id}")) {
                common::force_remove_cgroup(&d);
                // warren-oci/<namespace> and warren-oci go with their last container
                // (busy otherwise).
                for group in d.ancestors().skip(1).take(2) {
                    let _ = std::fs::remove_dir(group);
                }
            }
        }
        for m in common::host_mounts_under(self.path()) {
            if let Some(target) = m.split_whitespace().nth(4) {
                let _ = Command::new("umount").args(["-l", target]).status();
            }
        }
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
