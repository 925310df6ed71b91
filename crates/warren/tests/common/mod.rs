//! Test harness: runs the real `warren` binary against a temporary state root, and
//! removes everything the test made (zones, their processes and cgroups, templates,
//! the state root) when the guard drops, also when the test panics.

#![allow(dead_code)]

pub mod cri;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const WARREN: &str = env!("CARGO_BIN_EXE_warren");

/// Fail loudly (not silently pass) where the test cannot run.
pub fn require_root() {
    assert_eq!(
        unsafe_free_euid(),
        0,
        "these tests create namespaces, mounts and cgroups and must run as root (the README's test command does)"
    );
}

fn unsafe_free_euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|u| u.parse().ok())
        .unwrap()
}

pub fn require_busybox() -> PathBuf {
    let p = warren::storage::template::find_static_busybox();
    p.unwrap_or_else(|e| {
        panic!("this test needs busybox-static (the README's test command installs it): {e}")
    })
}

/// One test's state root.
pub struct Env {
    pub dir: tempfile::TempDir,
}

/// What a command printed and how it ended.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "expected success; stdout: {} stderr: {}",
            self.stdout, self.stderr
        );
        self
    }
    #[track_caller]
    pub fn fails(self, code: i32, needle: &str) -> Run {
        assert_eq!(
            self.code, code,
            "exit code; stdout: {} stderr: {}",
            self.stdout, self.stderr
        );
        assert!(
            self.stderr.contains(needle),
            "stderr should contain {needle:?}: {}",
            self.stderr
        );
        self
    }
}

impl Env {
    pub fn new() -> Env {
        require_root();
        Env {
            dir: tempfile::Builder::new()
                .prefix("warren-test-")
                .tempdir_in("/tmp")
                .unwrap(),
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(WARREN);
        // A private OCI state root: `list` and `stat` also show the containers of
        // the default one (/run/warren-oci), which tests running beside this one use.
        c.env("WARREN_ROOT", self.root())
            // The host-wide id-range registry (/run/warren) of this test's own.
            .env("WARREN_RUN_DIR", self.root().join("run"))
            .env("WARREN_OCI_ROOT", self.root().join("oci"))
            .env_remove("WARREN_CGROUP")
            .env_remove("WARREN_STORAGE");
        c
    }

    /// Run warren with `args`.
    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.cmd().args(args).output().unwrap())
    }

    /// Run and require success.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> Run {
        let r = self.run(args);
        assert_eq!(
            r.code, 0,
            "warren {args:?} failed: {} {}",
            r.stdout, r.stderr
        );
        r
    }

    /// `warren login ZONE -- sh -c SCRIPT`, returning the run.
    pub fn sh(&self, zone: &str, script: &str) -> Run {
        self.run(&["login", zone, "--", "/bin/sh", "-c", script])
    }

    /// The host template plus an installed zone.
    pub fn host_zone(&self, zone: &str, sets: &[&str]) {
        if !self.root().join("templates/host").exists() {
            self.ok(&["template", "create", "host", "--from", "host"]);
        }
        let mut args = vec!["create", zone];
        for s in sets {
            args.push("--set");
            args.push(s);
        }
        self.ok(&args);
        self.ok(&["install", zone]);
    }

    /// The zone's runtime record (JSON), present while booted.
    pub fn runtime(&self, zone: &str) -> serde_json::Value {
        let p = self.root().join("zones").join(zone).join("runtime.json");
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
    }

    /// The zone's cgroup directories while booted: (controllers, dir).
    pub fn cgroup_dirs(&self, zone: &str) -> Vec<(String, PathBuf)> {
        self.runtime(zone)["cgroups"]["dirs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d[0].as_str().unwrap().to_string(),
                    PathBuf::from(d[1].as_str().unwrap()),
                )
            })
            .collect()
    }

    pub fn cgroup_file(&self, zone: &str, controller: &str, file: &str) -> String {
        let (_, dir) = self
            .cgroup_dirs(zone)
            .into_iter()
            .find(|(c, _)| c.split(',').any(|x| x == controller))
            .unwrap_or_else(|| panic!("no {controller} cgroup for {zone}"));
        std::fs::read_to_string(dir.join(file))
            .unwrap()
            .trim()
            .to_string()
    }

    pub fn init_pid(&self, zone: &str) -> i32 {
        self.runtime(zone)["init"]["pid"].as_i64().unwrap() as i32
    }

    pub fn state(&self, zone: &str) -> String {
        let r = self.ok(&["list", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .find(|z| z["name"] == zone)
            .map(|z| z["state"].as_str().unwrap().to_string())
            .unwrap_or_else(|| "absent".into())
    }

    /// This root's cgroup group directories (they must be gone after the last halt).
    pub fn group_dirs(&self) -> Vec<PathBuf> {
        let group = warren::layout::Layout::new(self.root()).cgroup_group();
        let proc_ = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let mounts = warren::cgroups::parse_mountinfo(&proc_);
        let own = warren::cgroups::parse_proc_cgroup(&own);
        let mut out = Vec::new();
        for m in mounts {
            let path = own
                .iter()
                .find(|(c, _)| m.controllers.iter().all(|x| c.contains(x)) && !c.is_empty())
                .map(|(_, p)| p.clone())
                .unwrap_or_else(|| "/".into());
            let dir = m.mountpoint.join(path.trim_start_matches('/')).join(&group);
            if dir.exists() {
                out.push(dir);
            }
        }
        out
    }
}

/// Kill whatever is left in a cgroup tree and remove it (guard cleanup only).
pub fn force_remove_cgroup(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                force_remove_cgroup(&e.path());
            }
        }
    }
    // A frozen v1 group (a suspended zone) keeps its tasks from dying until thawed.
    let _ = std::fs::write(dir.join("freezer.state"), "THAWED");
    for _ in 0..200 {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        if procs.trim().is_empty() {
            break;
        }
        for pid in procs.lines() {
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for _ in 0..200 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // Halt and delete through warren first: that is the path users take.
        let _ = self.run(&["halt", "--all", "--timeout", "1"]);
        if let Ok(entries) = std::fs::read_dir(self.root().join("zones")) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !name.starts_with('.') {
                    let _ = self.run(&["delete", "--force", &name]);
                }
            }
        }
        // Then make sure: no cgroup of this root survives the test.
        for d in self.group_dirs() {
            force_remove_cgroup(&d);
        }
    }
}

/// Whether a process exists (and is not a zombie).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| warren::stats::parse_stat(&s))
        .is_some_and(|(st, _)| st != 'Z' && st != 'X')
}

/// Mount entries on the host that mention `path`.
pub fn host_mounts_under(path: &Path) -> Vec<String> {
    let needle = path.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&needle))
        .map(str::to_string)
        .collect()
}

// Pause points (`warren::fault::PAUSE_ENV`): a warren child stopped at a chosen moment
// while the test does the other side of a race.

/// Kills a warren child (stopped or not) if the test ends early: resumed first
/// (SIGCONT), so that it never lingers stopped, then killed.
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // Not reaped yet (so the pid is still the child's): resume it.
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = warren_sys::proc::kill(self.0.id() as i32, warren_sys::libc::SIGCONT);
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Wait until process `pid` is stopped (it reached its pause point).
pub fn wait_stopped(pid: u32) {
    let t = std::time::Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next());
        if state == Some("T") {
            return;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "warren (pid {pid}) never reached its pause point: {stat}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

pub fn resume(pid: u32) {
    let ok = Command::new("kill")
        .args(["-CONT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill -CONT {pid}");
}
