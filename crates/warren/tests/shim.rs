//! containerd runs containers through warren's own shim, `containerd-shim-warren-v1`
//! (`ctr run --runtime io.containerd.warren.v1`), found on the private containerd's
//! PATH (tests/common/containerd.rs): output and exit codes, `ctr task exec`, `ps`,
//! `metrics`, `pause` / `resume`, `kill`, `delete`, a terminal; a containerd
//! restart while a container runs; and the shim's memory beside the runc shim's.
//!
//! The shim binary is built by `cargo build -p containerd-shim-warren` (scripts/test.sh
//! builds the workspace) into the directory of the `warren` binary under test.

mod common;
#[path = "common/containerd.rs"]
mod ctd;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ctd::{assert_beneath, busybox_image, container_cgroup_dirs, Containerd, Options, IMAGE, NS};

const RUNTIME: &str = "io.containerd.warren.v1";
const SHIM: &str = "containerd-shim-warren-v1";

/// The shim binary beside the warren under test; a test without it fails saying how
/// to build it.
fn shim_binary() -> PathBuf {
    let p = std::path::Path::new(common::WARREN)
        .parent()
        .unwrap()
        .join(SHIM);
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
