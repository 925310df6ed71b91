//! containerd runs containers through warren's own shim, `containerd-shim-warren-v1`
//! (`ctr run --runtime io.containerd.warren.v1`), found on the private containerd's
//! PATH (tests/common/containerd.rs): output and exit codes, `ctr task exec`, `ps`,
//! `metrics`, `pause` / `resume`, `kill`, `delete`, a terminal; a containerd
//! restart while a container runs; a live TaskOOM; and the shim's memory beside the
//! runc shim's.
//!
//! The shim binary is built by `cargo build -p containerd-shim-warren` (scripts/test.sh
//! does) into the directory of the `warren` binary under test; `WARREN_SHIM_BINARY`
//! names another (`--release`, to measure its memory).

mod common;
#[path = "common/containerd.rs"]
mod ctd;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ctd::{assert_beneath, busybox_image, container_cgroup_dirs, Containerd, Options, IMAGE, NS};

const RUNTIME: &str = "io.containerd.warren.v1";
const SHIM: &str = "containerd-shim-warren-v1";

/// The shim binary beside the warren under test (or `$WARREN_SHIM_BINARY`, e.g. a
/// release build to measure); a test without it fails saying how to build it.
fn shim_binary() -> PathBuf {
    let p = std::env::var_os("WARREN_SHIM_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(common::WARREN)
                .parent()
                .unwrap()
                .join(SHIM)
        });
    assert!(
        p.exists(),
        "{} is missing: build it first with `cargo build -p containerd-shim-warren` (same target dir as this test)",
        p.display()
    );
    p
}

fn start(restartable: bool) -> Containerd {
    let shim = shim_binary();
    let c = Containerd::start_with(Options {
        path_dir: shim.parent(),
        restartable,
    });
    let image = busybox_image(c.path());
    let out = c.ctr_ok(&[
        "images",
        "import",
        "--snapshotter",
        "native",
        image.to_str().unwrap(),
    ]);
    assert!(out.contains(IMAGE), "{out}");
    c
}

/// `ctr run` arguments for the warren shim.
fn run_args(c: &Containerd, runtime: &str, flags: &[&str], id: &str, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["run", "--snapshotter", "native", "--runtime", runtime]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.push("--fifo-dir".into());
    v.push(c.path().join("fifo").display().to_string());
    v.extend(flags.iter().map(|s| s.to_string()));
    v.push(IMAGE.into());
    v.push(id.into());
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

fn run(c: &Containerd, flags: &[&str], id: &str, args: &[&str]) -> Output {
    c.ctr_cmd()
        .args(run_args(c, RUNTIME, flags, id, args))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The STATUS column of `ctr task ls` for `id`.
fn task_status(c: &Containerd, id: &str) -> Option<String> {
    let tasks = c.ctr_ok(&["task", "ls"]);
    tasks
        .lines()
        .find(|l| l.split_whitespace().next() == Some(id))
        .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
}

fn wait_status(c: &Containerd, id: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let st = task_status(c, id);
        if st.as_deref() == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{id}: status {st:?}, expected {want}\ncontainerd log:\n{}",
            c.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ctr_runs_tasks_through_the_warren_shim() {
    let mut c = start(false);
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();

    // Output reaches ctr; the container's cgroups are beneath ours (nesting).
    let id = c.id("echo");
    let o = run(
        &c,
        &["--rm"],
        &id,
        &["sh", "-c", "echo hi; cat /proc/self/cgroup"],
    );
    assert!(o.status.success(), "{}\n{}", text(&o), c.log());
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.starts_with("hi\n"), "{out}");
    let theirs: String = out.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert_beneath("the container", &theirs, &own);
    assert!(
        theirs.contains(&format!("/{NS}/{id}")),
        "the container's cgroup is not its cgroupsPath nested: {theirs}"
    );

    // The exit status is the container's.
    let id = c.id("exit5");
    let o = run(
        &c,
        &["--rm"],
        &id,
        &["sh", "-c", "echo out; echo err >&2; exit 5"],
    );
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out\n");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("err"),
        "{}",
        text(&o)
    );

    // A detached container: exec, ps, metrics, pause/resume, kill, delete.
    let id = c.id("sleep");
    let o = run(&c, &["-d"], &id, &["sleep", "1000"]);
    assert!(o.status.success(), "{}\n{}", text(&o), c.log());
    wait_status(&c, &id, "RUNNING");
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
        "echo in-container; exit 3",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}\n{}", text(&o), c.log());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "in-container\n");
    let ps = c.ctr_ok(&["task", "ps", &id]);
    assert_eq!(ps.lines().count(), 2, "one process (the init): {ps}");
    let metrics = c.ctr_ok(&["task", "metrics", &id]);
    let value = |name: &str| -> Option<u64> {
        metrics
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let (mem, pids) = if metrics.contains("memory.usage_in_bytes") {
        (value("memory.usage_in_bytes"), value("pids.current"))
    } else {
        (value("memory.usage"), value("pids.current"))
    };
    assert!(mem.is_some_and(|m| m > 0), "memory usage in: {metrics}");
    assert_eq!(pids, Some(1), "pids.current in: {metrics}");
    c.ctr_ok(&["task", "pause", &id]);
    wait_status(&c, &id, "PAUSED");
    c.ctr_ok(&["task", "resume", &id]);
    wait_status(&c, &id, "RUNNING");
    c.ctr_ok(&["task", "kill", "-s", "KILL", &id]);
    wait_status(&c, &id, "STOPPED");
    let o = c.ctr(&["task", "delete", &id]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("exit code 137"), "{}", text(&o));
    c.ctr_ok(&["container", "delete", &id]);
    assert!(
        container_cgroup_dirs(&format!("{NS}/{id}")).is_empty(),
        "delete left the container's cgroups"
    );

    // A terminal: ctr needs one of its own, so it runs under script(1).
    let id = c.id("tty");
    let cmd: Vec<String> = ["ctr", "-a"]
        .iter()
        .map(|s| s.to_string())
        .chain([c.path().join("containerd.sock").display().to_string()])
        .chain(["-n".into(), NS.into()])
        .chain(run_args(
            &c,
            RUNTIME,
            &["--rm", "-t"],
            &id,
            &["sh", "-c", "tty; echo tty-ok"],
        ))
        .map(|a| format!("'{a}'"))
        .collect();
    let o = Command::new("script")
        .args(["-qec", &cmd.join(" "), "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}\n{}", text(&o), c.log());
    assert!(
        out.contains("/dev/pts/") && out.contains("tty-ok"),
        "{}",
        text(&o)
    );
}

/// The shim pids in the daemon's namespace whose binary ends with `name`.
fn shims(c: &Containerd, name: &str) -> Vec<i32> {
    c.namespace_pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .map(|e| {
                    e.to_string_lossy()
                        .trim_end_matches(" (deleted)")
                        .ends_with(name)
                })
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn a_containerd_restart_leaves_the_shim_and_its_container_running() {
    let mut c = start(true);
    let id = c.id("survivor");
    let o = run(&c, &["-d"], &id, &["sleep", "1000"]);
    assert!(o.status.success(), "{}\n{}", text(&o), c.log());
    wait_status(&c, &id, "RUNNING");
    let before = shims(&c, SHIM);
    assert_eq!(before.len(), 1, "one shim for the container");
    let old = c.containerd_pid().expect("containerd runs");
    warren_sys::proc::kill(old, 9).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = c.containerd_pid();
        if now.is_some_and(|p| p != old) && c.ctr(&["version"]).status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "containerd did not come back: {}",
            c.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(shims(&c, SHIM), before, "the shim outlives containerd");
    // containerd reconnects to the shim: the task is there and obeys.
    wait_status(&c, &id, "RUNNING");
    let fifo = c.path().join("fifo");
    let o = c.ctr(&[
        "task",
        "exec",
        "--fifo-dir",
        fifo.to_str().unwrap(),
        "--exec-id",
        "after",
        &id,
        "true",
    ]);
    assert!(o.status.success(), "exec after the restart: {}", text(&o));
    c.ctr_ok(&["task", "kill", "-s", "KILL", &id]);
    wait_status(&c, &id, "STOPPED");
    let o = c.ctr(&["task", "delete", &id]);
    assert!(o.status.success(), "{}", text(&o));
    c.ctr_ok(&["container", "delete", &id]);
    assert!(
        container_cgroup_dirs(&format!("{NS}/{id}")).is_empty(),
        "delete left the container's cgroups"
    );
}

/// A child of the container allocates past the container's memory limit and is
/// OOM-killed while the container's init lives on: `TaskOOM` (`/tasks/oom`) reaches
/// containerd's event stream while the task is still RUNNING (the shim's live
/// watcher, not the check at the init's exit), and before any exit of the task.
#[test]
fn an_oom_kill_in_a_running_container_is_published_at_once() {
    use std::io::BufRead;
    let mut c = start(false);
    let mut events = c
        .ctr_cmd()
        .arg("events")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let out = events.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // `ctr events` subscribes as it starts; give it the moment.
    std::thread::sleep(Duration::from_millis(500));
    let id = c.id("oom-live");
    let o = run(
        &c,
        &["-d", "--memory-limit", &(32u64 << 20).to_string()],
        &id,
        &[
            "sh",
            "-c",
            "sleep 1; dd if=/dev/zero of=/dev/null bs=128M count=1; sleep 1000",
        ],
    );
    assert!(o.status.success(), "{}\n{}", text(&o), c.log());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    let oom = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(&id) => {
                assert!(
                    !line.contains("/tasks/exit"),
                    "the task exited before any TaskOOM: {seen:#?}\n{line}"
                );
                let oom = line.contains("/tasks/oom");
                seen.push(line);
                if oom {
                    break true;
                }
            }
            Ok(_) => {}
            Err(_) => break false,
        }
    };
    let status = task_status(&c, &id);
    let _ = events.kill();
    let _ = events.wait();
    assert!(
        oom,
        "no /tasks/oom for {id} within 30 s; its events: {seen:#?}\ncontainerd log:\n{}",
        c.log()
    );
    assert_eq!(
        status.as_deref(),
        Some("RUNNING"),
        "the container's init lives on after its child's OOM kill"
    );
    c.ctr_ok(&["task", "kill", "-s", "KILL", &id]);
    wait_status(&c, &id, "STOPPED");
    let o = c.ctr(&["task", "delete", &id]);
    assert!(o.status.success(), "{}", text(&o));
    c.ctr_ok(&["container", "delete", &id]);
}

/// `(Rss, Pss, Anonymous)` in KiB of `pid`, from smaps_rollup.
fn rss_pss(pid: i32) -> (u64, u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("Rss:"), field("Pss:"), field("Anonymous:"))
}

/// Sums of `(Rss, Pss, Anonymous)` over `pids`.
fn memory(pids: &[i32]) -> (u64, u64, u64) {
    pids.iter()
        .map(|p| rss_pss(*p))
        .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
}

/// The shims' own memory per container, warren's beside the runc shim's (running
/// warren-oci), the same containers in the same daemon. Printed for the docs; the
/// test holds warren's shim to less than the runc shim's PSS per container.
#[test]
fn the_warren_shim_costs_less_memory_per_container_than_the_runc_shim() {
    const N: usize = 3;
    let mut c = start(false);
    for i in 0..N {
        let id = c.id(&format!("mw{i}"));
        let o = run(&c, &["-d"], &id, &["sleep", "1000"]);
        assert!(o.status.success(), "{}\n{}", text(&o), c.log());
        let id = c.id(&format!("mr{i}"));
        let o = c
            .ctr_cmd()
            .args(run_args(
                &c,
                "io.containerd.runc.v2",
                &[
                    "-d",
                    "--runc-binary",
                    c.path().join("warren-oci").to_str().unwrap(),
                    "--runc-root",
                    c.path().join("oci-root").to_str().unwrap(),
                ],
                &id,
                &["sleep", "1000"],
            ))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}\n{}", text(&o), c.log());
    }
    // Let both settle (the runc shim's Go runtime grows for a moment after start).
    std::thread::sleep(Duration::from_secs(1));
    let (warren, runc) = (shims(&c, SHIM), shims(&c, "containerd-shim-runc-v2"));
    assert_eq!(
        (warren.len(), runc.len()),
        (N, N),
        "one shim per container each"
    );
    let (w, r) = (memory(&warren), memory(&runc));
    let n = N as u64;
    let per = |(rss, pss, anon): (u64, u64, u64)| (rss / n, pss / n, anon / n);
    let (w, r) = (per(w), per(r));
    eprintln!(
        "per container: warren shim RSS {} KiB PSS {} KiB anon {} KiB; runc shim RSS {} KiB PSS {} KiB anon {} KiB",
        w.0, w.1, w.2, r.0, r.1, r.2
    );
    if std::env::var_os("WARREN_SHIM_SMAPS").is_some() {
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "cd /proc/{}; echo threads $(ls task | wc -l); awk '/^[0-9a-f]+-/{{m=$0}} /^Anonymous:/{{if($2>0) print $2, m}}' smaps | sort -n | tail -12",
                warren[0]
            ))
            .status();
    }
    assert!(
        w.1 < r.1,
        "the warren shim's PSS per container ({} KiB) is not below the runc shim's ({} KiB)",
        w.1,
        r.1
    );
}

// `start` racing `start` on one pod's socket (a review finding; docs/kubernetes.md,
// "One server per pod"). No containerd: the shim binary is run as containerd runs it,
// in bundles whose config names the same pod.

const RACE_NS: &str = "warren-race";

/// A pod of `n` bundles and the shim servers its `start`s spawned (found by the
/// test's own `-address`, which no other process carries). On drop the servers are
/// killed and the pod's socket and lock file removed, also when the test panics.
struct Pod {
    dir: tempfile::TempDir,
    address: String,
    socket: PathBuf,
    n: usize,
}

impl Pod {
    fn new(n: usize) -> Pod {
        use sha2::Digest;
        common::require_root();
        let dir = tempfile::tempdir().unwrap();
        let address = dir.path().join("containerd.sock").display().to_string();
        for i in 0..n {
            let b = dir.path().join(format!("c{i}"));
            std::fs::create_dir(&b).unwrap();
            let config = serde_json::json!({
                "annotations": {"io.kubernetes.cri.sandbox-id": "pod"}
            });
            std::fs::write(b.join("config.json"), config.to_string()).unwrap();
        }
        // containerd's socket name: sha256 of <address>/<namespace>/<grouping>.
        let hash = sha2::Sha256::digest(format!("{address}/{RACE_NS}/pod").as_bytes());
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        let socket = PathBuf::from(format!("/run/containerd/s/{hex}"));
        Pod {
            dir,
            address,
            socket,
            n,
        }
    }

    /// `start` as containerd runs it, for container `c<i>` of the pod.
    fn start(&self, i: usize) -> Command {
        self.action(i, "start")
    }

    /// The shim binary's `action` as containerd runs it, in container `c<i>`'s
    /// bundle (its state root, for `delete`, in the test's directory).
    fn action(&self, i: usize, action: &str) -> Command {
        assert!(i < self.n);
        let mut cmd = Command::new(shim_binary());
        cmd.args(["-namespace", RACE_NS, "-id", &format!("c{i}")])
            .args(["-address", &self.address, action])
            .current_dir(self.dir.path().join(format!("c{i}")))
            .env("WARREN_RUN_DIR", self.dir.path().join("run"))
            .env("WARREN_SHIM_ROOT", self.dir.path().join("shim-root"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn lock_file(&self) -> PathBuf {
        let mut lock = self.socket.clone().into_os_string();
        lock.push(".lock");
        PathBuf::from(lock)
    }

    /// The live servers of this pod.
    fn servers(&self) -> Vec<i32> {
        let mut out = Vec::new();
        for p in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let ours = args
                .windows(2)
                .any(|w| w[0] == b"-address" && w[1] == self.address.as_bytes());
            if ours && args.contains(&&b"-socket"[..]) && common::alive(pid) {
                out.push(pid);
            }
        }
        out
    }

    /// Kill this pod's servers as containerd kills a shim (SIGKILL): the socket file
    /// stays behind, refusing, as a dead server's does.
    fn kill_servers(&self) {
        for pid in self.servers() {
            let _ = warren_sys::proc::kill(pid, 9);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.servers().is_empty() {
            assert!(
                Instant::now() < deadline,
                "the pod's servers outlived SIGKILL"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What a finished `start` printed: its exit status must be 0.
    fn address_of(o: Output) -> String {
        assert!(o.status.success(), "start: {}", text(&o));
        String::from_utf8(o.stdout).unwrap()
    }

    /// Every `start` answered with the pod's socket, exactly one server serves it
    /// (no second one left listening on an unlinked path), and it accepts.
    fn check_one_server(&self, answers: &[String]) {
        let want = format!("unix://{}", self.socket.display());
        for (i, a) in answers.iter().enumerate() {
            assert_eq!(a, &want, "start {i}'s answer");
        }
        let servers = self.servers();
        assert_eq!(servers.len(), 1, "servers of the pod: {servers:?}");
        std::os::unix::net::UnixStream::connect(&self.socket)
            .unwrap_or_else(|e| panic!("connecting to {}: {e}", self.socket.display()));
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        for pid in self.servers() {
            let _ = warren_sys::proc::kill(pid, 9);
        }
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(self.lock_file());
    }
}

/// Whether process `pid` has the file at `path` open (a `start` waiting for the
/// socket's lock has its lock file open while it polls; no `/proc/locks` line shows a
/// non-blocking try).
fn has_open(pid: u32, path: &std::path::Path) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.flatten()
                .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == path))
        })
        .unwrap_or(false)
}

/// Wait for a guarded child and take what it printed (the guard then has nothing
/// left to kill).
fn finish(g: &mut common::ChildGuard) -> Output {
    use std::io::Read;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    g.0.stdout.take().unwrap().read_to_end(&mut stdout).unwrap();
    g.0.stderr.take().unwrap().read_to_end(&mut stderr).unwrap();
    let status = g.0.wait().unwrap();
    Output {
        status,
        stdout,
        stderr,
    }
}

fn inode(path: &std::path::Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&std::fs::symlink_metadata(path).unwrap())
}

/// The review's race, made to happen: `start` A stops between its bind and its listen
/// (its socket refuses, as a dead server's does), and `start` B of the same pod comes.
/// B must wait for A rather than unlink A's socket and start a second server; then
/// both answer with the one server's address. (A is resumed long before B's wait
/// would give up, `socket::LOCK_WAIT`.)
#[test]
fn a_start_between_anothers_bind_and_listen_waits_and_shares_its_server() {
    let pod = Pod::new(2);
    // With no socket on the path, then with a dead server's.
    for stale in [false, true] {
        if stale {
            pod.kill_servers();
            assert!(pod.socket.exists(), "a killed server's socket stays");
        }
        let mut a = common::ChildGuard(
            pod.start(0)
                .env(warren::fault::PAUSE_ENV, "shim.start-before-listen")
                .spawn()
                .unwrap(),
        );
        common::wait_stopped(a.0.id());
        let refused = std::os::unix::net::UnixStream::connect(&pod.socket).unwrap_err();
        assert_eq!(
            refused.kind(),
            std::io::ErrorKind::ConnectionRefused,
            "{refused}"
        );
        let a_socket = inode(&pod.socket);
        let mut b = common::ChildGuard(pod.start(1).spawn().unwrap());
        let deadline = Instant::now() + Duration::from_secs(20);
        while !has_open(b.0.id(), &pod.lock_file()) {
            if b.0.try_wait().unwrap().is_some() {
                panic!(
                    "start B ended while A was between bind and listen: {}\nservers {:?}",
                    text(&finish(&mut b)),
                    pod.servers()
                );
            }
            assert!(Instant::now() < deadline, "start B neither waits nor ends");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Waiting (polling the lock), not gone on: it would have replaced A's socket.
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            b.0.try_wait().unwrap().is_none(),
            "start B ended while A was between bind and listen: {}",
            text(&finish(&mut b))
        );
        assert_eq!(inode(&pod.socket), a_socket, "A's socket was replaced");
        common::resume(a.0.id());
        let answers = [
            Pod::address_of(finish(&mut a)),
            Pod::address_of(finish(&mut b)),
        ];
        assert_eq!(inode(&pod.socket), a_socket, "A's socket was replaced");
        pod.check_one_server(&answers);
        for i in 0..2 {
            let file = pod.dir.path().join(format!("c{i}/address"));
            assert_eq!(std::fs::read_to_string(file).unwrap(), answers[0]);
        }
    }
}

/// Many `start`s of one pod at once, round after round, each round after the last
/// one's server was killed (its socket left, stale): every round, every `start`
/// answers with the same address and exactly one server serves it.
#[test]
fn concurrent_starts_of_one_pod_leave_one_server() {
    const STARTS: usize = 6;
    const ROUNDS: usize = 20;
    let pod = Pod::new(STARTS);
    for round in 0..ROUNDS {
        pod.kill_servers();
        let mut starts: Vec<common::ChildGuard> = (0..STARTS)
            .map(|i| common::ChildGuard(pod.start(i).spawn().unwrap()))
            .collect();
        let answers: Vec<String> = starts
            .iter_mut()
            .map(|g| Pod::address_of(finish(g)))
            .collect();
        let servers = pod.servers();
        assert_eq!(servers.len(), 1, "round {round}: servers {servers:?}");
        pod.check_one_server(&answers);
    }
}

/// Review finding: the socket's lock had no bound. A `start` stopped (SIGSTOP) while
/// it holds the lock — here at its pause point between bind and listen — held every
/// later `start` of the pod, forever and silently. The next `start` now fails within
/// the bound (`socket::LOCK_WAIT`, 5 s) with an error naming the holder, stopped, and
/// the remedy; resumed, the stopped one serves the pod as before.
#[test]
fn a_start_stopped_holding_the_lock_fails_the_next_within_the_bound_naming_it() {
    let pod = Pod::new(2);
    let mut a = common::ChildGuard(
        pod.start(0)
            .env(warren::fault::PAUSE_ENV, "shim.start-before-listen")
            .spawn()
            .unwrap(),
    );
    common::wait_stopped(a.0.id());
    let t = Instant::now();
    let mut b = common::ChildGuard(pod.start(1).spawn().unwrap());
    let o = finish(&mut b);
    let took = t.elapsed();
    let err = text(&o);
    assert!(
        !o.status.success(),
        "start B succeeded past a held lock: {err}"
    );
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(15),
        "start B gave up after {took:?} (the bound is 5 s): {err}"
    );
    let a_pid = a.0.id();
    for want in [
        format!("pid {a_pid} ("),
        "stopped".to_string(),
        format!("kill -CONT {a_pid}"),
        pod.lock_file().display().to_string(),
    ] {
        assert!(err.contains(&want), "start B's error lacks {want:?}: {err}");
    }
    assert!(pod.servers().is_empty(), "start B started a server");
    common::resume(a_pid);
    let answer = Pod::address_of(finish(&mut a));
    pod.check_one_server(&[answer]);
}

/// Review finding: a killed server left `<socket>.lock` (and its socket) in
/// /run/containerd/s for good. The `delete` action, which containerd runs after a
/// shim died, removes both; it leaves a live server's.
#[test]
fn delete_removes_a_killed_servers_socket_and_lock_file_and_leaves_a_live_ones() {
    let pod = Pod::new(1);
    let answer = Pod::address_of(pod.start(0).output().unwrap());
    assert!(pod.socket.exists() && pod.lock_file().exists());
    let delete = |what: &str| {
        let o = pod.action(0, "delete").output().unwrap();
        assert!(o.status.success(), "delete ({what}): {}", text(&o));
    };
    delete("a live server");
    assert!(
        pod.socket.exists() && pod.lock_file().exists(),
        "delete removed a live server's files"
    );
    pod.check_one_server(&[answer]);
    pod.kill_servers();
    assert!(pod.socket.exists() && pod.lock_file().exists());
    delete("a killed server");
    assert!(!pod.socket.exists(), "the killed server's socket stays");
    assert!(
        !pod.lock_file().exists(),
        "the killed server's lock file stays"
    );
}
