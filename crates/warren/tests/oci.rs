//! warren as an OCI runtime, driven for real: its own CLI (the state machine and the
//! error cases, as runc answers them), podman (`--runtime`), containerd (`ctr run`
//! with the runc shim's BinaryName pointing at warren-oci). Every test works in a
//! temporary directory: a private state root, a private podman store and runroot, a
//! private containerd daemon; guards remove containers, cgroups, storage and daemons
//! even when a test fails. cgroups are made only beneath the test's own cgroup.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{require_busybox, require_root, WARREN};

/// A temp dir with a `warren-oci` symlink, a busybox bundle and a state root.
struct Oci {
    dir: tempfile::TempDir,
}

impl Oci {
    fn new() -> Oci {
        require_root();
        let dir = tempfile::Builder::new()
            .prefix("warren-oci-test")
            .tempdir()
            .unwrap();
        std::os::unix::fs::symlink(WARREN, dir.path().join("warren-oci")).unwrap();
        let rootfs = dir.path().join("bundle/rootfs");
        std::fs::create_dir_all(rootfs.join("bin")).unwrap();
        std::fs::copy(require_busybox(), rootfs.join("bin/busybox")).unwrap();
        for x in [
            "sh", "echo", "cat", "sleep", "id", "ls", "hostname", "seq", "tty", "true", "head",
            "tail", "mkdir", "grep", "ulimit",
        ] {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(x)).unwrap();
        }
        for d in ["proc", "dev", "sys", "tmp", "etc"] {
            std::fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        Oci { dir }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn bin(&self) -> PathBuf {
        self.path().join("warren-oci")
    }
    fn bundle(&self) -> PathBuf {
        self.path().join("bundle")
    }
    /// Runs with stdout and stderr in files: a created container's process keeps
    /// the runtime's stdio (as with runc), so pipes would not reach EOF.
    fn run(&self, args: &[&str]) -> Output {
        let out = tempfile::tempfile_in(self.path()).unwrap();
        let err = tempfile::tempfile_in(self.path()).unwrap();
        let status = Command::new(self.bin())
            .arg("--root")
            .arg(self.path().join("state"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(err.try_clone().unwrap())
            .status()
            .unwrap();
        let read = |mut f: std::fs::File| {
            use std::io::{Read, Seek};
            let mut v = Vec::new();
            f.seek(std::io::SeekFrom::Start(0)).unwrap();
            f.read_to_end(&mut v).unwrap();
            v
        };
        Output {
            status,
            stdout: read(out),
            stderr: read(err),
        }
    }
    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    /// runc's failure: exit 1 and a message naming the container on stderr.
    fn fails(&self, args: &[&str], needle: &str) {
        let o = self.run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    }
    fn status(&self, id: &str) -> String {
        let v: serde_json::Value = serde_json::from_str(&self.ok(&["state", id])).unwrap();
        v["status"].as_str().unwrap().to_string()
    }
    /// A config.json from `warren-oci spec` with these args.
    fn spec(&self, args: &[&str], edit: impl FnOnce(&mut serde_json::Value)) {
        let cfg = self.bundle().join("config.json");
        let _ = std::fs::remove_file(&cfg);
        let o = Command::new(self.bin())
            .args(["spec", "--bundle"])
            .arg(self.bundle())
            .output()
            .unwrap();
        assert!(o.status.success());
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&cfg).unwrap()).unwrap();
        v["process"]["args"] = serde_json::json!(args);
        v["process"]["terminal"] = false.into();
        v["root"]["readonly"] = false.into();
        edit(&mut v);
        std::fs::write(&cfg, v.to_string()).unwrap();
    }
}

impl Drop for Oci {
    fn drop(&mut self) {
        let state = self.path().join("state");
        for e in std::fs::read_dir(&state).into_iter().flatten().flatten() {
            let id = e.file_name().to_string_lossy().into_owned();
            let _ = self.run(&["delete", "--force", &id]);
        }
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn state_machine_and_runc_errors() {
    let t = Oci::new();
    let out = t.path().join("bundle/rootfs/tmp/out");
    t.spec(&["sh", "-c", "echo started > /tmp/out; sleep 1000"], |_| {});
    t.ok(&[
        "create",
        "--bundle",
        t.bundle().to_str().unwrap(),
        "--pid-file",
        t.path().join("pid").to_str().unwrap(),
        "c1",
    ]);
    assert_eq!(t.status("c1"), "created");
    let pid: i32 = std::fs::read_to_string(t.path().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(common::alive(pid));
    // Created: the user process has not run yet.
    std::thread::sleep(Duration::from_millis(200));
    assert!(!out.exists(), "the process ran before start");
    let v: serde_json::Value = serde_json::from_str(&t.ok(&["state", "c1"])).unwrap();
    assert_eq!(v["pid"], pid);
    assert_eq!(v["id"], "c1");
    assert!(v["ociVersion"].as_str().unwrap().starts_with("1."));
    t.fails(
        &["create", "--bundle", t.bundle().to_str().unwrap(), "c1"],
        "exists",
    );
    t.ok(&["start", "c1"]);
    assert_eq!(t.status("c1"), "running");
    wait_for("the process to write", || out.exists());
    t.fails(&["start", "c1"], "running");
    t.fails(&["delete", "c1"], "not stopped: running");
    // ps lists the init; pause and resume go through the freezer.
    let ps: Vec<i32> = serde_json::from_str(&t.ok(&["ps", "--format", "json", "c1"])).unwrap();
    assert!(ps.contains(&pid), "{ps:?}");
    t.ok(&["pause", "c1"]);
    assert_eq!(t.status("c1"), "paused");
    t.fails(&["pause", "c1"], "not running");
    t.ok(&["resume", "c1"]);
    assert_eq!(t.status("c1"), "running");
    t.ok(&["kill", "c1", "KILL"]);
    wait_for("stopped", || t.status("c1") == "stopped");
    t.fails(&["start", "c1"], "has stopped");
    t.fails(&["kill", "c1"], "not running");
    t.ok(&["delete", "c1"]);
    t.fails(&["state", "c1"], "does not exist");
    t.fails(&["start", "nope"], "does not exist");
    t.fails(&["delete", "nope"], "does not exist");
    t.ok(&["delete", "--force", "nope"]);
    t.fails(&["kill", "c1", "NOSIG"], "not known");
    // Malformed config.json: exit 1, the file and the fix named, nothing left behind.
    std::fs::write(t.bundle().join("config.json"), "{\"ociVersion\": ").unwrap();
    t.fails(
        &["create", "--bundle", t.bundle().to_str().unwrap(), "bad"],
        "config.json is malformed",
    );
    assert!(!t.path().join("state/bad").exists());
    t.fails(
        &["create", "--bundle", t.bundle().to_str().unwrap(), "a/b"],
        "invalid",
    );
}

#[test]
fn config_reaches_the_process() {
    let t = Oci::new();
    let script = "echo uid=$(id -u) gid=$(id -g) groups=$(id -G); hostname; cat /proc/self/status | grep -E '^(CapBnd|NoNewPrivs|Seccomp):'; \
                  echo x > /ro/f 2>/dev/null || echo ro-refused; cat /proc/kcore 2>&1 | head -c 0; [ -s /proc/kcore ] || echo kcore-masked; \
                  cat /proc/sys/net/ipv4/ip_forward; ls /data; mkdir /tmp/x 2>&1 || true; ulimit -n";
    let data = t.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("hello"), "").unwrap();
    t.spec(&["sh", "-c", script], |v| {
        v["process"]["user"] = serde_json::json!({"uid": 1000, "gid": 1000, "additionalGids": [5]});
        v["process"]["noNewPrivileges"] = true.into();
        v["process"]["rlimits"] = serde_json::json!([{"type": "RLIMIT_NOFILE", "soft": 512, "hard": 512}]);
        v["process"]["capabilities"] = serde_json::json!({"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"], "permitted": ["CAP_KILL"]});
        v["hostname"] = "oci-box".into();
        v["root"]["readonly"] = false.into();
        let mounts = v["mounts"].as_array_mut().unwrap();
        mounts.push(serde_json::json!({"destination": "/data", "type": "bind", "source": data, "options": ["rbind", "ro"]}));
        mounts.push(serde_json::json!({"destination": "/ro", "type": "tmpfs", "source": "tmpfs", "options": ["ro"]}));
        v["linux"]["sysctl"] = serde_json::json!({"net.ipv4.ip_forward": "1"});
        v["linux"]["seccomp"] = serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]});
    });
    let log = t.path().join("log.json");
    let o = Command::new(t.bin())
        .args([
            "--root",
            t.path().join("state").to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
            "--log-format",
            "json",
        ])
        .args(["run", "--bundle", t.bundle().to_str().unwrap(), "r1"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    for want in [
        "uid=1000 gid=1000 groups=1000 5",
        "oci-box",
        "CapBnd:\t0000000000000020",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
        "ro-refused",
        "kcore-masked",
        "\n1\n",
        "hello",
        "Operation not permitted",
        "512",
    ] {
        assert!(out.contains(want), "{want:?} missing from {out}");
    }
}

/// A profile listing the three x86 ABIs, as Docker's default does on x86_64: the kernel
/// accepts the multi-architecture program, and the rules apply with x86_64's numbers,
/// argument conditions included (the i386 and x32 sections are checked by the unit tests
/// of `oci::seccomp`, through the BPF interpreter).
#[test]
fn a_multi_arch_seccomp_profile_is_loaded_and_applied() {
    let t = Oci::new();
    let script = "grep ^Seccomp: /proc/self/status; mkdir /tmp/x 2>&1; \
                  kill -0 $$ 2>&1 || echo kill-0-refused; kill -CONT $$ && echo kill-cont-ok";
    t.spec(&["sh", "-c", script], |v| {
        v["root"]["readonly"] = false.into();
        v["linux"]["seccomp"] = serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            "syscalls": [
                {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
                {"names": ["kill"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
                 "args": [{"index": 1, "value": 0, "op": "SCMP_CMP_EQ"}]}]});
    });
    let out = run_ok(&t, &[], "multiarch");
    for want in [
        "Seccomp:\t2",
        "Function not implemented",
        "kill-0-refused",
        "kill-cont-ok",
    ] {
        assert!(out.contains(want), "{want:?} missing from {out}");
    }
}

#[test]
fn hooks_get_the_state_on_stdin() {
    let t = Oci::new();
    let rec = t.path().join("hooks.log");
    t.spec(&["true"], |v| {
        let hook = |name: &str| serde_json::json!([{"path": "/bin/sh", "args": ["sh", "-c", format!("read s; echo {name} \"$s\" >> {}", rec.display())]}]);
        v["hooks"] = serde_json::json!({"createRuntime": hook("createRuntime"), "poststart": hook("poststart"), "poststop": hook("poststop")});
    });
    t.ok(&["create", "--bundle", t.bundle().to_str().unwrap(), "h1"]);
    t.ok(&["start", "h1"]);
    wait_for("stopped", || t.status("h1") == "stopped");
    t.ok(&["delete", "h1"]);
    let text = std::fs::read_to_string(&rec).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (line, (name, status)) in lines.iter().zip([
        ("createRuntime", "creating"),
        ("poststart", "running"),
        ("poststop", "stopped"),
    ]) {
        let (n, json) = line.split_once(' ').unwrap();
        assert_eq!(n, name);
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(
            (v["id"].as_str(), v["status"].as_str()),
            (Some("h1"), Some(status)),
            "{line}"
        );
    }
}

#[test]
fn console_socket_receives_the_pty_master() {
    let t = Oci::new();
    t.spec(
        &["sh", "-c", "tty; [ -t 0 ] && [ -t 1 ] && echo both-ttys"],
        |v| {
            v["process"]["terminal"] = true.into();
        },
    );
    let sock = t.path().join("console.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let recv = std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let (conn, _) = listener.accept().unwrap();
        warren_sys::pty::recv_fd(conn.as_raw_fd()).unwrap()
    });
    t.ok(&[
        "create",
        "--bundle",
        t.bundle().to_str().unwrap(),
        "--console-socket",
        sock.to_str().unwrap(),
        "t1",
    ]);
    let (master, _) = recv.join().unwrap();
    t.ok(&["start", "t1"]);
    let mut f = std::fs::File::from(master);
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    use std::io::Read;
    while let Ok(n) = f.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.contains("/dev/console") || out.contains("/dev/pts/"),
        "{out}"
    );
    assert!(out.contains("both-ttys"), "{out}");
}

/// A private podman: store, runroot, a cgroup parent beneath our own cgroup.
struct Podman {
    oci: Oci,
    parent: String,
}

impl Podman {
    fn new() -> Option<Podman> {
        if Command::new("podman").arg("--version").output().is_err() {
            panic!("podman is not installed: scripts/test.sh installs it (apt-get install podman)");
        }
        let oci = Oci::new();
        // podman passes an absolute cgroupsPath, <parent>/libpod-<id>: with one parent
        // beneath our cgroup in every hierarchy, warren-oci makes it where it says.
        let parent = format!(
            "{}/warren-podman-test-{}",
            own_common_path(),
            std::process::id()
        );
        let p = Podman { oci, parent };
        let mut tar = Command::new("tar")
            .arg("-C")
            .arg(p.oci.bundle().join("rootfs"))
            .args(["-cf", "-", "."])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let o = p
            .cmd()
            .args(["import", "-", "localhost/warren-bb:test"])
            .stdin(tar.stdout.take().unwrap())
            .output()
            .unwrap();
        let _ = tar.wait();
        assert!(
            o.status.success(),
            "podman import: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        Some(p)
    }
    fn cmd(&self) -> Command {
        let mut c = Command::new("podman");
        c.arg("--root")
            .arg(self.oci.path().join("pstore"))
            .arg("--runroot")
            .arg(self.oci.path().join("prun"))
            .args([
                "--cgroup-manager",
                "cgroupfs",
                "--events-backend",
                "none",
                "--storage-driver",
                "vfs",
            ])
            .arg("--runtime")
            .arg(self.oci.bin())
            // The runtime's state root in the temp dir, not /run/warren-oci.
            .arg("--runtime-flag")
            .arg(format!("root={}", self.oci.path().join("state").display()));
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.run_with(self.cmd(), args)
    }
    fn run_with(&self, mut c: Command, args: &[&str]) -> Output {
        c.arg("run")
            .args(["--network", "none", "--cgroup-parent", &self.parent])
            .args(args);
        c.stdin(Stdio::null()).output().unwrap()
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self.cmd().args(["rm", "-af", "-t", "0"]).output();
        let _ = self.cmd().args(["rmi", "-af"]).output();
        let store = self.oci.path().join("pstore");
        // vfs layers are plain directories, but podman may leave an overlay or shm mount.
        for m in common::host_mounts_under(self.oci.path()) {
            let _ = Command::new("umount").args(["-l", &m]).status();
        }
        let _ = std::fs::remove_dir_all(store);
        // podman's cgroupfs parent (it made <parent>/conmon, and conmon may still be
        // exiting after `rm`): kill what is left in it and remove the tree, retrying.
        let own = Path::new("/proc/self/cgroup");
        let text = std::fs::read_to_string(own).unwrap_or_default();
        for line in text.lines() {
            let mut f = line.splitn(3, ':');
            let (Some(_), Some(ctrls), Some(_)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let dir = match ctrls {
                "" => "unified".to_string(),
                c => c.trim_start_matches("name=").to_string(),
            };
            let base = Path::new("/sys/fs/cgroup")
                .join(dir)
                .join(self.parent.trim_start_matches('/'));
            if base.exists() {
                common::force_remove_cgroup(&base);
            }
        }
    }
}

#[test]
fn podman_runs_zones_through_warren_oci() {
    let Some(p) = Podman::new() else { return };
    let img = "localhost/warren-bb:test";
    let o = p.run(&["--rm", img, "echo", "hi"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "hi");
    let o = p.run(&["--rm", img, "sh", "-c", "exit 7"]);
    assert_eq!(
        o.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Limits: memory.limit_in_bytes is the container's, and 20 tasks is the ceiling.
    let o = p.run(&["--rm", "--memory", "64m", "--pids-limit", "20", img, "sh", "-c",
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max; for i in $(seq 1 40); do sleep 3 & done 2>&1 | tail -1; echo done"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out} {err}");
    assert!(out.contains("67108864") && out.contains("\n20\n"), "{out}");
    assert!(
        err.contains("can't fork")
            || err.contains("Resource temporarily unavailable")
            || out.contains("can't fork"),
        "the 21st task was not refused: {out} {err}"
    );
    // Memory: a process that touches 200 MiB is OOM-killed at 64 MiB.
    let o = p.run(&[
        "--rm",
        "--memory",
        "64m",
        "--memory-swap",
        "64m",
        img,
        "sh",
        "-c",
        "head -c 200m /dev/zero | tail > /dev/null",
    ]);
    assert_ne!(
        o.status.code(),
        Some(0),
        "200 MiB fit in a 64 MiB container"
    );
    // Detached, exec, stop, rm.
    let o = p.run(&["-d", "--name", "d1", img, "sleep", "1000"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = p
        .cmd()
        .args(["exec", "d1", "sh", "-c", "echo in-exec; exit 3"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "in-exec");
    let o = p.cmd().args(["stop", "-t", "1", "d1"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = p.cmd().args(["rm", "d1"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The nesting flag through podman's --runtime-flag: the container's cgroup is
    // then beneath the runtime's (conmon's, in the parent), its path kept below it.
    let mut nest = p.cmd();
    nest.args(["--runtime-flag", "cgroup-nest"]);
    let o = p.run_with(
        nest,
        &[
            "--rm",
            "--cgroupns",
            "host",
            img,
            "cat",
            "/proc/self/cgroup",
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let memory = out
        .lines()
        .find(|l| l.split(':').nth(1) == Some("memory"))
        .unwrap_or_else(|| panic!("no memory line: {out}"));
    assert!(
        memory.contains(&format!(":{}/", p.parent))
            && memory.contains(&format!("/warren-oci{}/libpod-", p.parent)),
        "not nested beneath the runtime's cgroup: {memory}"
    );
    // -t: a terminal on stdio (script(1) gives podman a terminal of its own).
    let mut c = p.cmd();
    c.args([
        "run",
        "--rm",
        "-t",
        "--network",
        "none",
        "--cgroup-parent",
        &p.parent,
        img,
        "sh",
        "-c",
        "[ -t 0 ] && [ -t 1 ] && echo is-a-tty",
    ]);
    let line = std::iter::once(c.get_program())
        .chain(c.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    let o = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("is-a-tty"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// `warren` (not `warren oci`) against a private zone root, reading `t`'s OCI root.
fn warren_json(t: &Oci, args: &[&str]) -> serde_json::Value {
    let o = Command::new(WARREN)
        .env("WARREN_ROOT", t.path().join("zones-root"))
        .env("WARREN_RUN_DIR", t.path().join("zones-root").join("run"))
        .arg("--oci-root")
        .arg(t.path().join("state"))
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "warren {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn warren_table(t: &Oci, args: &[&str]) -> String {
    let o = Command::new(WARREN)
        .env("WARREN_ROOT", t.path().join("zones-root"))
        .env("WARREN_RUN_DIR", t.path().join("zones-root").join("run"))
        .env("WARREN_OCI_ROOT", t.path().join("state"))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn oci_row<'a>(list: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|z| z["name"] == id)
        .unwrap_or_else(|| panic!("{id} not listed: {list}"))
}

#[test]
fn list_and_stat_show_oci_containers() {
    let t = Oci::new();
    t.spec(&["sh", "-c", "sleep 1000"], |_| {});
    let id = "listed";
    t.ok(&[
        "create",
        "--bundle",
        t.bundle().to_str().unwrap(),
        "--pid-file",
        t.path().join("pid").to_str().unwrap(),
        id,
    ]);
    let pid: i64 = std::fs::read_to_string(t.path().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Created: listed as kind oci, state ready (its init waits), status created.
    let list = warren_json(&t, &["list"]);
    let row = oci_row(&list, id);
    assert_eq!(row["kind"], "oci", "{row}");
    assert_eq!(row["state"], "ready", "{row}");
    assert_eq!(row["oci"]["status"], "created", "{row}");
    assert_eq!(row["init_pid"], pid, "{row}");
    assert_eq!(row["oci"]["bundle"].as_str(), t.bundle().to_str(), "{row}");
    assert!(
        row["oci"]["created"].as_str().unwrap().contains('T'),
        "{row}"
    );

    t.ok(&["start", id]);
    let list = warren_json(&t, &["list"]);
    let row = oci_row(&list, id);
    assert_eq!(
        (row["state"].as_str(), row["oci"]["status"].as_str()),
        (Some("running"), Some("running")),
        "{row}"
    );
    let table = warren_table(&t, &["list", "-v"]);
    let line = table
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_else(|| panic!("{table}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols[1], "running", "{table}");
    assert!(cols.contains(&"oci"), "no KIND oci: {table}");
    assert!(cols.contains(&pid.to_string().as_str()), "no PID: {table}");
    assert!(table.lines().next().unwrap().contains("KIND"), "{table}");

    // stat reads its cgroups: memory charged, one process, the pids.max of none.
    let report = warren_json(&t, &["stat"]);
    let z = oci_row(&report["zones"], id);
    assert_eq!(z["kind"], "oci", "{z}");
    assert_eq!(z["state"], "running", "{z}");
    assert!(z["memory"]["charged_bytes"].as_u64().unwrap() > 0, "{z}");
    assert_eq!(z["processes"], 1, "{z}");
    assert!(z["uptime_s"].is_u64(), "{z}");
    let table = warren_table(&t, &["stat"]);
    assert!(table.contains(&format!("{id} [oci]")), "{table}");

    // Paused is still running in zone terms; the status says paused.
    t.ok(&["pause", id]);
    let row = oci_row(&warren_json(&t, &["list"]), id).clone();
    assert_eq!(
        (row["state"].as_str(), row["oci"]["status"].as_str()),
        (Some("running"), Some("paused")),
        "{row}"
    );
    t.ok(&["resume", id]);

    // Stopped: installed in zone terms, no pid; stat leaves it out.
    t.ok(&["kill", id, "KILL"]);
    wait_for("stopped", || t.status(id) == "stopped");
    let row = oci_row(&warren_json(&t, &["list"]), id).clone();
    assert_eq!(
        (row["state"].as_str(), row["oci"]["status"].as_str()),
        (Some("installed"), Some("stopped")),
        "{row}"
    );
    assert!(row.get("init_pid").is_none(), "{row}");
    let report = warren_json(&t, &["stat"]);
    assert!(
        report["zones"]
            .as_array()
            .unwrap()
            .iter()
            .all(|z| z["name"] != id),
        "a stopped container in stat: {report}"
    );
    t.ok(&["delete", id]);
    let list = warren_json(&t, &["list"]);
    assert!(
        list.as_array().unwrap().iter().all(|z| z["name"] != id),
        "{list}"
    );
}

/// Runs `warren-oci run` with the bundle's config and returns its stdout.
fn run_ok(t: &Oci, extra: &[&str], id: &str) -> String {
    let bundle = t.bundle();
    let mut args = vec!["run", "--bundle", bundle.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push(id);
    t.ok(&args)
}

#[test]
fn user_namespace_maps_the_ids() {
    let t = Oci::new();
    t.spec(
        &[
            "sh",
            "-c",
            "cat /proc/self/uid_map /proc/self/gid_map; id -u; id -g; ls -ln /bin/busybox",
        ],
        |v| {
            v["linux"]["namespaces"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({"type": "user"}));
            let map = serde_json::json!([{"containerID": 0, "hostID": 200000, "size": 65536}]);
            v["linux"]["uidMappings"] = map.clone();
            v["linux"]["gidMappings"] = map;
        },
    );
    let out = run_ok(&t, &[], "userns");
    let maps: Vec<Vec<&str>> = out
        .lines()
        .take(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        maps,
        vec![vec!["0", "200000", "65536"], vec!["0", "200000", "65536"]],
        "{out}"
    );
    let rest: Vec<&str> = out.lines().skip(2).collect();
    assert_eq!(&rest[..2], &["0", "0"], "root inside: {out}");
    // Files owned by host root are outside the mapping: the overflow id.
    assert!(rest[2].contains(" 65534 "), "{out}");
}

/// A namespace made by the test with `unshare --<kind>=<file>` (running `cmd` in it
/// first), bound to a file in the test's directory; removed on drop (the namespace,
/// and what is in it, go when the bind mount does).
struct NsFile {
    file: PathBuf,
}

impl NsFile {
    fn new(dir: &Path, kind: &str, cmd: &[&str]) -> NsFile {
        let file = dir.join(format!("{kind}ns"));
        std::fs::write(&file, "").unwrap();
        let ns = NsFile { file };
        let o = Command::new("unshare")
            .arg(format!("--{kind}={}", ns.file.display()))
            .args(cmd)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "unshare --{kind}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        ns
    }
}

impl Drop for NsFile {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.file).status();
        let _ = std::fs::remove_file(&self.file);
    }
}

#[test]
fn a_network_namespace_is_joined_by_path() {
    let t = Oci::new();
    let link = format!("wo{}", std::process::id() % 100_000_000);
    // A network namespace as CNI makes one, with a veth pair in it (LINK and LINKp).
    let peer = format!("{link}p");
    let ns = NsFile::new(
        t.path(),
        "net",
        &[
            "ip", "link", "add", &link, "type", "veth", "peer", "name", &peer,
        ],
    );
    t.spec(&["sh", "-c", "cat /proc/net/dev"], |v| {
        for n in v["linux"]["namespaces"].as_array_mut().unwrap() {
            if n["type"] == "network" {
                n["path"] = ns.file.to_str().unwrap().into();
            }
        }
    });
    let out = run_ok(&t, &[], "netjoin");
    assert!(out.contains(&format!("{link}:")), "{link} missing: {out}");
    // The same namespace as the file's, not a new one.
    let ours = std::fs::metadata(&ns.file).unwrap();
    use std::os::unix::fs::MetadataExt;
    t.spec(&["sh", "-c", "sleep 1000"], |v| {
        for n in v["linux"]["namespaces"].as_array_mut().unwrap() {
            if n["type"] == "network" {
                n["path"] = ns.file.to_str().unwrap().into();
            }
        }
    });
    t.ok(&[
        "create",
        "--bundle",
        t.bundle().to_str().unwrap(),
        "--pid-file",
        t.path().join("pid").to_str().unwrap(),
        "netjoin2",
    ]);
    let pid = std::fs::read_to_string(t.path().join("pid")).unwrap();
    let theirs = std::fs::metadata(format!("/proc/{}/ns/net", pid.trim())).unwrap();
    assert_eq!(theirs.ino(), ours.ino(), "the init is in another netns");
    t.ok(&["delete", "--force", "netjoin2"]);
    // A path that is not there: runc's failure, naming the field.
    t.spec(&["true"], |v| {
        for n in v["linux"]["namespaces"].as_array_mut().unwrap() {
            if n["type"] == "network" {
                n["path"] = "/nonexistent/netns".into();
            }
        }
    });
    t.fails(
        &["create", "--bundle", t.bundle().to_str().unwrap(), "netbad"],
        "linux.namespaces net: path /nonexistent/netns",
    );
    assert!(!t.path().join("state/netbad").exists());
}

#[test]
fn no_pivot_runs_in_the_rootfs() {
    let t = Oci::new();
    t.spec(
        &["sh", "-c", "[ -x /bin/busybox ] && echo has-busybox; [ -e /etc/os-release ] || echo no-host-etc; cat /proc/self/mountinfo | head -1"],
        |_| {},
    );
    let out = run_ok(&t, &["--no-pivot"], "nopivot");
    assert!(
        out.contains("has-busybox") && out.contains("no-host-etc"),
        "{out}"
    );
}

#[test]
fn features_describe_the_runtime() {
    let t = Oci::new();
    let v: serde_json::Value = serde_json::from_str(&t.ok(&["features"])).unwrap();
    assert_eq!(v["ociVersionMin"], "1.0.0");
    assert!(
        v["ociVersionMax"].as_str().unwrap().starts_with("1."),
        "{v}"
    );
    let strings = |p: &serde_json::Value| -> Vec<String> {
        p.as_array()
            .unwrap_or_else(|| panic!("not an array: {p}"))
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let hooks = strings(&v["hooks"]);
    for h in [
        "createRuntime",
        "createContainer",
        "startContainer",
        "poststart",
        "poststop",
    ] {
        assert!(hooks.iter().any(|x| x == h), "{h} not in {hooks:?}");
    }
    let ns = strings(&v["linux"]["namespaces"]);
    for n in ["user", "network", "pid", "mount", "ipc", "uts", "cgroup"] {
        assert!(ns.iter().any(|x| x == n), "{n} not in {ns:?}");
    }
    assert!(strings(&v["mountOptions"]).iter().any(|o| o == "rbind"));
    assert!(strings(&v["linux"]["capabilities"])
        .iter()
        .any(|c| c == "CAP_SYS_ADMIN"));
    assert_eq!(v["linux"]["seccomp"]["enabled"], true);
    assert!(strings(&v["linux"]["seccomp"]["actions"])
        .iter()
        .any(|a| a == "SCMP_ACT_ERRNO"));
    assert_eq!(v["linux"]["cgroup"]["v1"], true);
    assert_eq!(v["linux"]["apparmor"]["enabled"], false);
}

/// The host directory of a live process's cgroup in the v1 `controller` hierarchy.
fn v1_cgroup_dir(pid: &str, controller: &str) -> PathBuf {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = text
        .lines()
        .find_map(|l| {
            let mut it = l.splitn(3, ':');
            let (_, c, p) = (it.next()?, it.next()?, it.next()?);
            c.split(',').any(|x| x == controller).then(|| p.to_string())
        })
        .unwrap_or_else(|| panic!("no {controller} line in {text}"));
    Path::new("/sys/fs/cgroup")
        .join(controller)
        .join(path.trim_start_matches('/'))
}

#[test]
fn update_changes_the_limits() {
    let t = Oci::new();
    if !Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
        panic!("this test reads cgroup v1 memory files; this host has no /sys/fs/cgroup/memory");
    }
    t.spec(&["sleep", "1000"], |v| {
        v["linux"]["resources"] =
            serde_json::json!({"memory": {"limit": 134217728}, "pids": {"limit": 50}});
    });
    t.ok(&[
        "create",
        "--bundle",
        t.bundle().to_str().unwrap(),
        "--pid-file",
        t.path().join("pid").to_str().unwrap(),
        "upd",
    ]);
    t.ok(&["start", "upd"]);
    let pid = std::fs::read_to_string(t.path().join("pid")).unwrap();
    let mem = v1_cgroup_dir(pid.trim(), "memory");
    let pids = v1_cgroup_dir(pid.trim(), "pids");
    let read = |d: &Path, f: &str| {
        std::fs::read_to_string(d.join(f))
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(read(&mem, "memory.limit_in_bytes"), "134217728");
    assert_eq!(read(&pids, "pids.max"), "50");
    let res = t.path().join("resources.json");
    std::fs::write(
        &res,
        r#"{"memory": {"limit": 67108864}, "pids": {"limit": 20}}"#,
    )
    .unwrap();
    t.ok(&["update", "--resources", res.to_str().unwrap(), "upd"]);
    assert_eq!(read(&mem, "memory.limit_in_bytes"), "67108864");
    assert_eq!(read(&pids, "pids.max"), "20");
    // Bad JSON: refused, limits kept.
    std::fs::write(&res, "{\"memory\": ").unwrap();
    t.fails(
        &["update", "--resources", res.to_str().unwrap(), "upd"],
        "linux.resources",
    );
    assert_eq!(read(&mem, "memory.limit_in_bytes"), "67108864");
    t.ok(&["delete", "--force", "upd"]);
}

#[test]
fn exec_tty_sends_a_pty_to_the_console_socket() {
    let t = Oci::new();
    t.spec(&["sleep", "1000"], |_| {});
    t.ok(&["create", "--bundle", t.bundle().to_str().unwrap(), "ex"]);
    t.ok(&["start", "ex"]);
    // --tty without a socket is refused.
    t.fails(&["exec", "--tty", "ex", "true"], "console-socket");
    let sock = t.path().join("exec-console.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let recv = std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let (conn, _) = listener.accept().unwrap();
        warren_sys::pty::recv_fd(conn.as_raw_fd()).unwrap()
    });
    let o = t.run(&[
        "exec",
        "--tty",
        "--console-socket",
        sock.to_str().unwrap(),
        "ex",
        "sh",
        "-c",
        "tty; [ -t 0 ] && [ -t 1 ] && echo exec-has-tty; exit 4",
    ]);
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (master, _) = recv.join().unwrap();
    let mut f = std::fs::File::from(master);
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    use std::io::Read;
    while let Ok(n) = f.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    let out = String::from_utf8_lossy(&out);
    assert!(out.contains("/dev/pts/"), "{out}");
    assert!(out.contains("exec-has-tty"), "{out}");
    t.ok(&["delete", "--force", "ex"]);
}

#[test]
fn create_and_start_container_hooks_run_in_the_container() {
    let t = Oci::new();
    // createContainer runs in the container's mount namespace before pivot_root (as
    // runc's): it writes to the host path of the rootfs's /tmp and records its mount
    // namespace. startContainer runs after it, inside the root: its /tmp is the same
    // directory.
    let log = t.bundle().join("rootfs/tmp/hooks.log");
    t.spec(&["sleep", "1000"], |v| {
        let create = format!(
            "read s; echo createContainer \"$s\" >> {0}; echo ns $(readlink /proc/self/ns/mnt) >> {0}",
            log.display()
        );
        let start = "read s; echo startContainer \"$s\" >> /tmp/hooks.log";
        v["hooks"] = serde_json::json!({
            "createContainer": [{"path": "/bin/sh", "args": ["sh", "-c", create]}],
            "startContainer": [{"path": "/bin/sh", "args": ["sh", "-c", start]}]});
    });
    t.ok(&[
        "create",
        "--bundle",
        t.bundle().to_str().unwrap(),
        "--pid-file",
        t.path().join("pid").to_str().unwrap(),
        "hk",
    ]);
    let pid = std::fs::read_to_string(t.path().join("pid")).unwrap();
    let init_ns = std::fs::read_link(format!("/proc/{}/ns/mnt", pid.trim())).unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("createContainer {") && !text.contains("startContainer"),
        "after create: {text:?}"
    );
    let ns_line = format!("ns {}", init_ns.display());
    assert!(
        text.lines().any(|l| l == ns_line),
        "createContainer ran outside the container's mount namespace ({ns_line}): {text}"
    );
    t.ok(&["start", "hk"]);
    t.ok(&["delete", "--force", "hk"]);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with("ns ")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, (name, status)) in lines.iter().zip([
        ("createContainer", "creating"),
        ("startContainer", "created"),
    ]) {
        let (n, json) = line.split_once(' ').unwrap();
        assert_eq!(n, name, "{text}");
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(
            (v["id"].as_str(), v["status"].as_str()),
            (Some("hk"), Some(status)),
            "{line}"
        );
        assert_eq!(v["pid"].as_i64(), pid.trim().parse().ok(), "{line}");
    }
}

#[test]
fn bench_density_via_oci_measures_containers_made_by_the_runtime() {
    let env = common::Env::new();
    let out = env.root().join("out");
    let r = env.ok(&[
        "bench",
        "density",
        "--zones",
        "1,2",
        "--idle",
        "1",
        "--via",
        "oci",
        "--out",
        out.to_str().unwrap(),
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["template"], "busybox", "--via oci uses the busybox root");
    let sys = &v["systems"][0];
    assert_eq!(
        (sys["name"].as_str(), sys["status"].as_str()),
        (Some("warren-oci"), Some("ok")),
        "{sys}"
    );
    let steps = sys["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{sys}");
    for (s, n) in steps.iter().zip([1, 2]) {
        assert_eq!(s["zones"], n, "{s}");
        for k in ["clone_ms", "boot_ms", "halt_ms", "delete_ms"] {
            assert!(s[k]["median"].as_f64().unwrap() > 0.0, "{k}: {s}");
        }
        let disk = s["disk_per_zone_kib"].as_f64().unwrap();
        assert!(disk > 0.0 && disk < 1024.0, "disk per zone {disk} KiB: {s}");
    }
    assert!(r.stdout.contains("| warren-oci |"), "{}", r.stdout);
    // Nothing left: no container state, no scratch dir, no template, no zone.
    let list = env.ok(&["list", "--json"]);
    assert_eq!(list.stdout.trim(), "[]", "{}", list.stdout);
    let left: Vec<_> = std::fs::read_dir(env.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".bench"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The OCI containers get no network but loopback: a bridge is refused.
    env.run(&["bench", "density", "--via", "oci", "--net", "bridge"])
        .fails(5, "--via oci --net bridge");
}

/// runtime-spec: `hostname` with a UTS namespace joined by path sets it there.
#[test]
fn hostname_is_set_in_a_uts_namespace_joined_by_path() {
    let t = Oci::new();
    let ns = NsFile::new(t.path(), "uts", &["true"]);
    t.spec(&["hostname"], |v| {
        v["hostname"] = "joined-uts".into();
        let nss = v["linux"]["namespaces"].as_array_mut().unwrap();
        nss.retain(|n| n["type"] != "uts");
        nss.push(serde_json::json!({"type": "uts", "path": ns.file}));
    });
    let out = run_ok(&t, &[], "utsjoin");
    assert_eq!(out.trim(), "joined-uts");
    // The host's hostname is untouched; the joined namespace has the new one.
    assert_ne!(
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap()
            .trim(),
        "joined-uts"
    );
    let o = Command::new("nsenter")
        .arg(format!("--uts={}", ns.file.display()))
        .arg("hostname")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "joined-uts");
}

/// runtime-spec: `linux.devices` nodes get exactly `fileMode`, `uid` and `gid`,
/// whatever the runtime's umask (runc's behaviour).
#[test]
fn devices_get_exactly_their_mode_and_owner() {
    let t = Oci::new();
    t.spec(&["ls", "-ln", "/dev/wnull", "/dev/wzero"], |v| {
        v["linux"]["devices"] = serde_json::json!([
            {"path": "/dev/wnull", "type": "c", "major": 1, "minor": 3, "fileMode": 0o666, "uid": 5, "gid": 6},
            {"path": "/dev/wzero", "type": "c", "major": 1, "minor": 5, "fileMode": 0o640, "uid": 0, "gid": 0}
        ]);
    });
    // A restrictive umask in the runtime's caller must not filter the modes.
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 077; exec {} --root {} run --bundle {} devs",
            t.bin().display(),
            t.path().join("state").display(),
            t.bundle().display()
        ))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = |name: &str| {
        out.lines()
            .find(|l| l.ends_with(name))
            .unwrap_or_else(|| panic!("{name} missing: {out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        line("/dev/wnull").starts_with("crw-rw-rw- 1 5 6 1, 3"),
        "{out}"
    );
    assert!(
        line("/dev/wzero").starts_with("crw-r----- 1 0 0 1, 5"),
        "{out}"
    );
}

/// The process's user is applied before `create` returns: a user the container cannot
/// become makes `create` fail with the reason, not a container that dies at `start`.
#[test]
fn create_fails_when_the_process_user_cannot_be_applied() {
    let t = Oci::new();
    t.spec(&["true"], |v| {
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "user"}));
        // Container ids 0-65535 are mapped: uid 70000 does not exist in the namespace.
        let map = serde_json::json!([{"containerID": 0, "hostID": 210000, "size": 65536}]);
        v["linux"]["uidMappings"] = map.clone();
        v["linux"]["gidMappings"] = map;
        v["process"]["user"] = serde_json::json!({"uid": 70000, "gid": 0});
    });
    let bundle = t.bundle();
    t.fails(
        &["create", "--bundle", bundle.to_str().unwrap(), "baduser"],
        "become uid 70000",
    );
    // Nothing is left running, and the record says why it cannot start.
    let o = t.run(&["state", "baduser"]);
    if o.status.success() {
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_ne!(v["status"], "created", "{v}");
    }
}

/// runtime-spec `linux.rootfsPropagation: "shared"`: the container starts (the mount
/// holding the rootfs is made private before pivot_root, as runc does) and its root is
/// shared in its own mount namespace.
#[test]
fn shared_rootfs_propagation_works() {
    let t = Oci::new();
    // The line whose mount point (field 5) is "/".
    let root_line = "grep -E '^[0-9]+ [0-9]+ [0-9:]+ [^ ]+ / ' /proc/self/mountinfo";
    t.spec(&["sh", "-c", root_line], |v| {
        v["linux"]["rootfsPropagation"] = "rshared".into();
    });
    let out = run_ok(&t, &[], "shared");
    assert!(
        out.contains("shared:"),
        "the container's / is not shared: {out}"
    );
}

/// runtime-spec: a namespace type not listed is the runtime's. Without a mount
/// namespace the container runs in the runtime's filesystem; asking it to mount or
/// mask anything then is refused with the reason.
#[test]
fn a_namespace_not_listed_is_inherited_from_the_runtime() {
    let t = Oci::new();
    let marker = t.path().join("host-file");
    std::fs::write(&marker, "seen from the host's filesystem\n").unwrap();
    let script = format!("readlink /proc/self/ns/mnt; cat {}", marker.display());
    t.spec(&["sh", "-c", &script], |v| {
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n["type"] != "mount");
        v["mounts"] = serde_json::json!([]);
        v["linux"]["maskedPaths"] = serde_json::json!([]);
        v["linux"]["readonlyPaths"] = serde_json::json!([]);
    });
    let out = run_ok(&t, &[], "nomnt");
    let ours = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    assert!(out.contains(&*ours.to_string_lossy()), "{out}");
    assert!(out.contains("seen from the host's filesystem"), "{out}");

    t.spec(&["true"], |v| {
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n["type"] != "mount");
        v["linux"]["maskedPaths"] = serde_json::json!([]);
        v["linux"]["readonlyPaths"] = serde_json::json!([]);
    });
    let bundle = t.bundle();
    t.fails(
        &["create", "--bundle", bundle.to_str().unwrap(), "nomnt2"],
        "mounts: needs a mount namespace of the container's own",
    );
}

/// runtime-spec resources as runc applies them on cgroup v1: `cpu.period` as given
/// (not rescaled), `memory.swappiness`, `disableOOMKiller`; fields warren cannot apply
/// are refused naming the field, never silently ignored.
#[test]
fn resources_are_applied_as_given_or_refused() {
    let t = Oci::new();
    if !Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
        panic!("this test reads cgroup v1 files; this host has no /sys/fs/cgroup/memory");
    }
    t.spec(&["sleep", "1000"], |v| {
        v["linux"]["resources"] = serde_json::json!({
            "memory": {"limit": 134217728, "swappiness": 10, "disableOOMKiller": true},
            "cpu": {"quota": 25000, "period": 50000}
        });
    });
    t.ok(&[
        "create",
        "--bundle",
        t.bundle().to_str().unwrap(),
        "--pid-file",
        t.path().join("pid").to_str().unwrap(),
        "res",
    ]);
    let pid = std::fs::read_to_string(t.path().join("pid")).unwrap();
    let read = |c: &str, f: &str| {
        std::fs::read_to_string(v1_cgroup_dir(pid.trim(), c).join(f))
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(read("cpu", "cpu.cfs_period_us"), "50000");
    assert_eq!(read("cpu", "cpu.cfs_quota_us"), "25000");
    assert_eq!(read("memory", "memory.swappiness"), "10");
    assert!(
        read("memory", "memory.oom_control").contains("oom_kill_disable 1"),
        "{}",
        read("memory", "memory.oom_control")
    );
    t.ok(&["delete", "--force", "res"]);

    let bundle = t.bundle();
    for (field, resources) in [
        (
            "linux.resources.blockIO",
            serde_json::json!({"blockIO": {"weight": 500}}),
        ),
        (
            "linux.resources.network",
            serde_json::json!({"network": {"classID": 7}}),
        ),
        (
            "linux.resources.hugepageLimits",
            serde_json::json!({"hugepageLimits": [{"pageSize": "2MB", "limit": 1073741824}]}),
        ),
    ] {
        t.spec(&["true"], |v| v["linux"]["resources"] = resources.clone());
        t.fails(
            &["create", "--bundle", bundle.to_str().unwrap(), "refused"],
            field,
        );
    }
}

/// Bad input found by the hostile-operator run (issue 22): a config without
/// `ociVersion` or with one warren does not implement, a relative `process.cwd` and a
/// negative memory limit are refused by `create` naming the field and the fix, and
/// leave no container behind.
#[test]
fn create_refuses_a_missing_version_a_relative_cwd_and_negative_limits() {
    let t = Oci::new();
    let bundle = t.bundle();
    let b = bundle.to_str().unwrap();
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "nover",
            Box::new(|v: &mut serde_json::Value| {
                v.as_object_mut().unwrap().remove("ociVersion");
            }),
            "ociVersion: is missing; set it to",
        ),
        (
            "badver",
            Box::new(|v: &mut serde_json::Value| v["ociVersion"] = "2.0.0".into()),
            "ociVersion: \"2.0.0\" is not supported",
        ),
        (
            "relcwd",
            Box::new(|v: &mut serde_json::Value| v["process"]["cwd"] = "tmp".into()),
            "process.cwd: \"tmp\" is relative",
        ),
        (
            "negmem",
            Box::new(|v: &mut serde_json::Value| {
                v["linux"]["resources"] = serde_json::json!({"memory": {"limit": -5}});
            }),
            "linux.resources.memory.limit: -5 is negative",
        ),
    ];
    for (id, edit, needle) in cases {
        t.spec(&["true"], edit);
        t.fails(&["create", "--bundle", b, id], needle);
        assert!(
            !t.run(&["state", id]).status.success(),
            "{id} left behind after a refused create"
        );
    }
}

/// This process's cgroup path in the v1 hierarchy of `controller`.
fn own_v1_path(controller: &str) -> String {
    let text = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    warren::cgroups::parse_proc_cgroup(&text)
        .into_iter()
        .find(|(c, _)| c.iter().any(|x| x == controller))
        .map(|(_, p)| p)
        .unwrap_or_else(|| panic!("no {controller} line in our /proc/self/cgroup: {text}"))
}

/// The v1 controllers every OCI container joins.
const JOINED: [&str; 5] = ["memory", "pids", "cpuacct", "devices", "freezer"];

/// A path beneath this process's cgroup in every joined hierarchy (the deepest of
/// them, when every other is at or above it): an absolute cgroupsPath below it keeps
/// the sandbox rule. Fails, saying why, on a host where there is none.
fn own_common_path() -> String {
    let paths: Vec<String> = JOINED.iter().map(|c| own_v1_path(c)).collect();
    let deepest = paths.iter().max_by_key(|p| p.len()).unwrap().clone();
    for p in &paths {
        let p = p.trim_end_matches('/');
        assert!(
            deepest.starts_with(&format!("{p}/")) || deepest == p || p.is_empty(),
            "cannot test an absolute cgroupsPath within the sandbox rule here: our cgroups {paths:?} \
             have no path beneath all of them"
        );
    }
    deepest.trim_end_matches('/').to_string()
}

/// `/sys/fs/cgroup/<controller>/<path>`.
fn v1_dir(controller: &str, path: &str) -> PathBuf {
    Path::new("/sys/fs/cgroup")
        .join(controller)
        .join(path.trim_start_matches('/'))
}

/// Cgroup trees this test made or made warren make: removed at the end, even on failure.
struct CgroupTrees(Vec<PathBuf>);

impl Drop for CgroupTrees {
    fn drop(&mut self) {
        for d in &self.0 {
            if d.exists() {
                common::force_remove_cgroup(d);
            }
        }
    }
}

/// Creates and starts `id` with this cgroupsPath (and global flags `global`), and
/// returns the host's `/proc/<pid>/cgroup` path of its init for each of [`JOINED`].
fn start_in(t: &Oci, global: &[&str], cgroups_path: &str, id: &str) -> Vec<String> {
    t.spec(&["sleep", "1000"], |v| {
        v["linux"]["cgroupsPath"] = cgroups_path.into();
    });
    let pid_file = t.path().join(format!("{id}.pid"));
    let mut args = global.to_vec();
    let bundle = t.bundle();
    args.extend([
        "create",
        "--bundle",
        bundle.to_str().unwrap(),
        "--pid-file",
        pid_file.to_str().unwrap(),
        id,
    ]);
    t.ok(&args);
    t.ok(&["start", id]);
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let text = std::fs::read_to_string(format!("/proc/{}/cgroup", pid.trim())).unwrap();
    joined_paths(&text)
}

/// The paths of the [`JOINED`] hierarchies in a /proc/PID/cgroup text.
fn joined_paths(text: &str) -> Vec<String> {
    let lines = warren::cgroups::parse_proc_cgroup(text);
    JOINED
        .iter()
        .map(|c| {
            lines
                .iter()
                .find(|(cs, _)| cs.iter().any(|x| x == c))
                .map(|(_, p)| p.clone())
                .unwrap_or_else(|| panic!("no {c} line in {text}"))
        })
        .collect()
}

/// runtime-spec `linux.cgroupsPath`: an absolute path from the root of every
/// hierarchy, a relative one beneath the runtime's cgroup, both kept as given, their
/// missing directories made and, at delete, exactly those removed; `--cgroup-nest`
/// puts it beneath the runtime's cgroup in `warren-oci/`.
#[test]
fn cgroups_path_is_honoured_as_the_runtime_spec_says() {
    let t = Oci::new();
    if !Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
        panic!("this test reads cgroup v1 directories; this host has no /sys/fs/cgroup/memory");
    }
    let base = own_common_path();
    let top = format!("ocicg-test-{}", std::process::id());
    let mut trees = Vec::new();
    for c in JOINED {
        trees.push(v1_dir(c, &format!("{base}/{top}")));
        trees.push(v1_dir(c, &format!("{}/{top}", own_v1_path(c))));
        trees.push(v1_dir(c, &format!("{}/warren-oci/{top}", own_v1_path(c))));
    }
    let _trees = CgroupTrees(trees);

    // Absolute: the same path in every hierarchy, from its root. In memory the
    // parent exists already (made here): it is joined, and stays after delete.
    let pre = v1_dir("memory", &format!("{base}/{top}"));
    std::fs::create_dir(&pre).unwrap();
    let abs = format!("{base}/{top}/abs/c1");
    let got = start_in(&t, &[], &abs, "abs");
    assert!(got.iter().all(|p| *p == abs), "{got:?} != {abs}");
    // Later verbs, run from here, find the cgroups in the record.
    assert_eq!(t.status("abs"), "running");
    t.ok(&["pause", "abs"]);
    assert_eq!(t.status("abs"), "paused");
    assert_eq!(
        std::fs::read_to_string(v1_dir("freezer", &abs).join("freezer.state"))
            .unwrap()
            .trim(),
        "FROZEN"
    );
    t.ok(&["resume", "abs"]);
    let ps: Vec<i32> = serde_json::from_str(&t.ok(&["ps", "--format", "json", "abs"])).unwrap();
    assert_eq!(ps.len(), 1, "{ps:?}");
    let res = t.path().join("resources.json");
    std::fs::write(&res, r#"{"pids": {"limit": 30}}"#).unwrap();
    t.ok(&["update", "--resources", res.to_str().unwrap(), "abs"]);
    assert_eq!(
        std::fs::read_to_string(v1_dir("pids", &abs).join("pids.max"))
            .unwrap()
            .trim(),
        "30"
    );
    t.ok(&["delete", "--force", "abs"]);
    for c in JOINED {
        let d = v1_dir(c, &format!("{base}/{top}"));
        assert!(!d.join("abs").exists(), "{}/abs was left", d.display());
        // Made by warren (every hierarchy but memory): removed; memory's: kept.
        assert_eq!(d.exists(), c == "memory", "{}", d.display());
    }
    std::fs::remove_dir(&pre).unwrap();

    // Relative: beneath the runtime's own cgroup in each hierarchy.
    let got = start_in(&t, &[], &format!("{top}/rel/c2"), "rel");
    for (c, p) in JOINED.iter().zip(&got) {
        let own = own_v1_path(c);
        assert_eq!(*p, format!("{}/{top}/rel/c2", own.trim_end_matches('/')));
    }
    // A process exec'd into it enters the same cgroups as its init (on v1 it writes
    // itself into each `tasks` file as its first step).
    let seen = |file: &str| joined_paths(&t.ok(&["exec", "rel", "cat", file]));
    assert_eq!(seen("/proc/self/cgroup"), seen("/proc/1/cgroup"));
    t.ok(&["delete", "--force", "rel"]);
    for c in JOINED {
        let d = v1_dir(c, &format!("{}/{top}", own_v1_path(c)));
        assert!(!d.exists(), "{} was left", d.display());
    }

    // Nesting: an absolute path outside our cgroup lands beneath it, kept as given.
    let got = start_in(
        &t,
        &[warren::oci::cgroup::NEST_FLAG],
        &format!("/{top}/c3"),
        "nest",
    );
    for (c, p) in JOINED.iter().zip(&got) {
        let own = own_v1_path(c);
        assert_eq!(
            *p,
            format!("{}/warren-oci/{top}/c3", own.trim_end_matches('/'))
        );
    }
    t.ok(&["delete", "--force", "nest"]);
    for c in JOINED {
        let d = v1_dir(c, &format!("{}/warren-oci/{top}", own_v1_path(c)));
        assert!(!d.exists(), "{} was left", d.display());
    }

    // The root cgroup itself is refused, with the fix.
    t.spec(&["true"], |v| v["linux"]["cgroupsPath"] = "/".into());
    t.fails(
        &["create", "--bundle", t.bundle().to_str().unwrap(), "root"],
        "names the root cgroup itself",
    );
}
