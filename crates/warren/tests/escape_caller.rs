//! Escape attempts for the classes of issue 14 that the sandbox core fixed, tried as
//! the caller of `warren` (its descriptors, its working directory, its terminal), as a
//! hostile image against host users, as a tenant against the host's per-user kernel
//! counters, against the default limits, and against the state root's locks and the
//! host's warren binaries. Classes (issue 14): 1 caller's descriptors, 2 caller's
//! terminal, 4 hostile image / host users, 8 per-zone kernel counters, 9 defaults,
//! 10 locks and binaries.
//!
//! Each test prints a table `class | attempt | expected | result` and fails naming
//! every row that did not hold, with its class. A test that cannot run here (not root,
//! no `script`, no `setpriv`, …) fails saying why.
//!
//! Safety: every probe that would change something of the host's if it got through is
//! a harmless one: the host binaries are "chmod"ed to their current mode, "chown"ed to
//! their current owner, opened for appending without writing, truncated to their own
//! size; an injected terminal line only touches a file in the test's own temporary
//! directory; device nodes are those of /dev/null and /dev/zero; a zone fills its
//! inotify instances and message queues only after the test has checked that its user
//! namespace is owned by its own host uid (else it would starve host root's processes);
//! the host itself only creates one of each and removes it. Everything runs in a
//! temporary state root; the `Env` guard halts and deletes the zones (killing what
//! they left behind), the OCI guard deletes its containers, and the only host
//! processes the tests start are their own children, waited for or killed by pid.

mod common;

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{require_root, Env, Run, WARREN};
use warren_sys::libc;

// ---------------------------------------------------------------------------------
// The table.

struct Table {
    class: &'static str,
    rows: Vec<(String, String, String, bool)>,
}

impl Table {
    fn new(class: &'static str) -> Table {
        Table {
            class,
            rows: Vec::new(),
        }
    }

    fn row(
        &mut self,
        attempt: impl Into<String>,
        expected: impl Into<String>,
        ok: bool,
        result: impl AsRef<str>,
    ) {
        let result = short(result.as_ref(), 110);
        self.rows
            .push((attempt.into(), expected.into(), result, ok));
    }

    /// Print the table; fail naming every row that did not hold.
    fn finish(self) {
        let w0 = self.rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let w1 = self.rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        let wc = self.class.len().max(5);
        println!(
            "{:wc$} | {:w0$} | {:w1$} | result",
            "class", "attempt", "expected"
        );
        for (attempt, expected, result, ok) in &self.rows {
            let mark = if *ok { "ok" } else { "FAILED" };
            println!(
                "{:wc$} | {attempt:w0$} | {expected:w1$} | {mark}: {result}",
                self.class
            );
        }
        let failed: Vec<String> = self
            .rows
            .iter()
            .filter(|r| !r.3)
            .map(|r| format!("class {}: {} ({})", self.class, r.0, r.2))
            .collect();
        println!("{}: {} attempts", self.class, self.rows.len());
        assert!(
            failed.is_empty(),
            "not denied as expected:\n{}",
            failed.join("\n")
        );
    }
}

fn short(s: &str, n: usize) -> String {
    let s = s.replace(['\n', '\r'], " ");
    let s = s.trim();
    if s.chars().count() > n {
        format!("{}…", s.chars().take(n).collect::<String>())
    } else {
        s.to_string()
    }
}

fn output(r: &Run) -> String {
    format!("{}{}", r.stdout, r.stderr)
}

fn summary(r: &Run) -> String {
    format!("exit {} {}", r.code, output(r))
}

/// The value of `key=` in a line of `key=value` words.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

/// Fail loudly if a tool the test drives is missing.
fn require_tool(name: &str, why: &str) {
    let found = std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|d| Path::new(d).join(name).is_file());
    assert!(found, "this test needs `{name}` on the host ({why})");
}

/// A private temporary directory (0755, so an unprivileged user could use it).
fn scratch(prefix: &str) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// The host pids in a zone's cgroups (all controllers, all sub-groups).
fn zone_pids(env: &Env, zone: &str) -> Vec<i32> {
    fn walk(dir: &Path, out: &mut Vec<i32>) {
        if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk(&e.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    for (_, dir) in env.cgroup_dirs(zone) {
        walk(&dir, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

/// The host pid of the zone process whose command line starts with `needle` (waiting
/// up to 5 s for it).
fn find_in_zone(env: &Env, zone: &str, needle: &str) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        for pid in zone_pids(env, zone) {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.starts_with(needle) {
                return Some(pid);
            }
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A host process's descriptors as `n -> target` (seen from the host).
fn host_fds(pid: i32) -> Vec<(i32, String)> {
    let mut v: Vec<(i32, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n: i32 = e.file_name().to_string_lossy().parse().ok()?;
            let l = std::fs::read_link(e.path()).ok()?;
            Some((n, l.to_string_lossy().into_owned()))
        })
        .collect();
    v.sort();
    v
}

/// Field `n` (1-based, as in proc(5)) of /proc/<pid>/stat.
fn stat_field(pid: i32, n: usize) -> Option<i64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit_once(')')?.1;
    rest.split_whitespace().nth(n - 3)?.parse().ok()
}

fn state_base(env: &Env, zone: &str) -> u64 {
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.root().join("zones").join(zone).join("state.json")).unwrap(),
    )
    .unwrap();
    state["idmap"]["base"]
        .as_u64()
        .unwrap_or_else(|| panic!("zone {zone} has no id range in state.json: {state}"))
}

fn sha256(path: &Path) -> String {
    let o = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(o.status.success(), "sha256sum {}", path.display());
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Run `script` as an unprivileged host user (nobody, no groups, no capabilities).
/// setpriv keeps its capabilities up to its own exec (it would resolve a path it
/// execs directly as root), so it always execs `sh`, which then runs with none.
fn as_nobody(script: &str) -> Run {
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "/bin/sh",
            "-c",
            script,
        ])
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A child the test started, killed (by pid) and reaped when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------
// Class 1: the caller's descriptors and working directory.

/// Objects the "careless caller" holds without close-on-exec: a host directory (with a
/// secret file), a host file, a socket, a pipe. Each is kept at a high descriptor
/// (close-on-exec, so no other child of this test gets it) and placed at its target
/// number only in the child that runs warren.
struct Held {
    dir: tempfile::TempDir,
    map: Vec<(RawFd, OwnedFd)>,
    /// dev:ino of every held object, as stat(2) through /proc/self/fd shows them.
    ids: Vec<String>,
}

fn dup_high(fd: RawFd) -> OwnedFd {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor this process owns returns a new one.
    let n = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 300) };
    assert!(
        n >= 300,
        "F_DUPFD_CLOEXEC: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `n` was just returned by fcntl and is owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(n) }
}

fn dev_ino(fd: RawFd) -> String {
    let m = std::fs::metadata(format!("/proc/self/fd/{fd}")).unwrap();
    format!("{}:{}", m.dev(), m.ino())
}

impl Held {
    /// The standard set on 7 (dir), 8 (file), 9 (socket), 10 (pipe), 200 (dir again),
    /// plus `extra` (target, object) pairs.
    fn new(extra: Vec<(RawFd, OwnedFd)>) -> Held {
        let dir = scratch("warren-caller-");
        std::fs::write(dir.path().join("secret"), "host-secret-2f9c\n").unwrap();
        let d = File::open(dir.path()).unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.path().join("secret"))
            .unwrap();
        let (s1, s2) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut p = [0; 2];
        // SAFETY: `p` has room for two descriptors.
        assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: pipe2 returned two new descriptors owned by nobody else.
        let (pr, pw) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        let mut map = vec![
            (7, dup_high(d.as_raw_fd())),
            (8, dup_high(f.as_raw_fd())),
            (9, dup_high(s1.as_raw_fd())),
            (10, dup_high(pr.as_raw_fd())),
            (200, dup_high(d.as_raw_fd())),
        ];
        // Keep the socket's peer and the pipe's write end open for the test's life.
        map.push((-1, dup_high(s2.as_raw_fd())));
        map.push((-1, dup_high(pw.as_raw_fd())));
        map.extend(extra);
        let ids = map.iter().map(|(_, o)| dev_ino(o.as_raw_fd())).collect();
        Held { dir, map, ids }
    }

    /// Place the held objects at their numbers (without close-on-exec) in `cmd`'s child
    /// and run it from the host directory.
    fn give(&self, cmd: &mut Command) {
        let pairs: Vec<(RawFd, RawFd)> = self
            .map
            .iter()
            .filter(|(t, _)| *t >= 0)
            .map(|(t, o)| (o.as_raw_fd(), *t))
            .collect();
        cmd.current_dir(self.dir.path());
        // SAFETY: the closure runs in the forked child before exec and only calls
        // dup2, which is async-signal-safe; `pairs` was allocated before the fork.
        unsafe {
            cmd.pre_exec(move || {
                for &(src, target) in &pairs {
                    if libc::dup2(src, target) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }

    fn targets(&self) -> Vec<RawFd> {
        self.map
            .iter()
            .filter(|(t, _)| *t >= 0)
            .map(|(t, _)| *t)
            .collect()
    }
}

/// Lists the descriptors of `/proc/<argv[1]>` ("self" for its own) as
/// `n link dev:ino` lines; a descriptor gone by the time it is read (the listing's
/// own) shows as `gone`.
const FD_LIST: &str = r#"
import os, sys
pid = sys.argv[1] if sys.argv[1] != "self" else str(os.getpid())
d = "/proc/%s/fd" % pid
for n in sorted(os.listdir(d), key=int):
    p = d + "/" + n
    try:
        l = os.readlink(p)
    except OSError:
        print(n, "gone", "-")
        continue
    try:
        s = os.stat(p)
        i = "%d:%d" % (s.st_dev, s.st_ino)
    except OSError:
        i = "-"
    print(n, l.replace(" ", "_"), i)
"#;

/// Judge an `n link dev:ino` listing (or `ls -l` lines, parsed to `n link`): every
/// descriptor past 2 must be the listing's own or a /proc handle of the process
/// itself, and none may be one of the caller's objects.
fn fds_clean(listing: &str, held: &Held) -> (bool, String) {
    let mut extra = Vec::new();
    let mut numbers = Vec::new();
    let mut ok = true;
    for line in listing.lines() {
        let words: Vec<&str> = if line.contains(" -> ") {
            // `ls -l` (busybox or coreutils): "... N -> target"
            let (left, target) = line.split_once(" -> ").unwrap();
            match left.split_whitespace().last() {
                Some(n) => vec![n, target.trim()],
                None => continue,
            }
        } else {
            line.split_whitespace().collect()
        };
        let Some(n) = words.first().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        numbers.push(n);
        if n <= 2 {
            continue;
        }
        let link = words.get(1).copied().unwrap_or("");
        let id = words.get(2).copied().unwrap_or("-");
        let own_proc = link
            .strip_prefix("/proc/")
            .map(|r| {
                let r = r.strip_suffix("/fd").unwrap_or(r);
                !r.is_empty() && r.chars().all(|c| c.is_ascii_digit())
            })
            .unwrap_or(false);
        let caller = held.ids.iter().any(|i| i == id);
        if caller || !(link == "gone" || own_proc) {
            ok = false;
        }
        extra.push(format!("{n}->{link}"));
    }
    if numbers.is_empty() {
        return (false, format!("no listing: {listing}"));
    }
    (ok, format!("fds {numbers:?} beyond stdio: {extra:?}"))
}

/// The checks that run inside a zone booted (and logged into) by a careless caller.
fn caller_rows_for_zone(t: &mut Table, env: &Env, held: &Held, zone: &str, tag: &str, svc: &str) {
    let mode = if tag == "userns" {
        "default zone"
    } else {
        "userns=false zone"
    };
    // Boot while holding the descriptors, from the host directory.
    let mut c = env.cmd();
    c.args(["boot", zone]);
    held.give(&mut c);
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "boot {zone} with the caller's descriptors: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let r = env.run(&["login", zone, "--", "python3", "-c", FD_LIST, "1"]);
    let (ok, what) = fds_clean(&r.stdout, held);
    t.row(
        format!("{mode}: boot holding dir/file/socket/pipe on 7-10,200: init's fds"),
        "only 0-2 (and init's own /proc handle)",
        ok && r.code == 0,
        format!("{what} {}", r.stderr),
    );

    let r = env.sh(
        zone,
        "for p in /proc/1/fd/7/.. /proc/1/fd/200/. /proc/1/fd/7/../..; do ls $p >/dev/null 2>&1 && echo REACHED $p; done; \
         cat /proc/1/fd/8 2>/dev/null && echo REACHED-file; cat /proc/1/fd/7/secret 2>/dev/null; echo walked",
    );
    let out = output(&r);
    t.row(
        format!("{mode}: walk the host dir via /proc/1/fd/7/.. , 200, read fd 8"),
        "no such descriptor",
        out.contains("walked") && !out.contains("REACHED") && !out.contains("host-secret"),
        summary(&r),
    );

    let planted = held.dir.path().join(format!("planted-{tag}"));
    let r = env.sh(
        zone,
        &format!("touch /proc/1/fd/7/planted-{tag} /proc/1/fd/200/planted-{tag} 2>&1; echo tried"),
    );
    t.row(
        format!("{mode}: write into the host dir via /proc/1/fd/7 and 200"),
        "fails; nothing created on the host",
        !planted.exists() && output(&r).contains("tried"),
        format!("host file exists: {}; {}", planted.exists(), summary(&r)),
    );

    let r = env.sh(
        zone,
        "echo cwd=$(readlink /proc/1/cwd) same=$([ \"$(stat -L -c %d:%i /proc/1/cwd)\" = \"$(stat -c %d:%i /)\" ] && echo yes || echo no)",
    );
    let out = output(&r);
    t.row(
        format!("{mode}: init's cwd (boot run from a host dir)"),
        "the zone's /",
        field(&out, "cwd") == Some("/") && field(&out, "same") == Some("yes"),
        summary(&r),
    );

    let svc_fds = find_in_zone(env, zone, svc).map(host_fds);
    let ok = svc_fds
        .as_ref()
        .is_some_and(|v| v.iter().map(|(n, _)| *n).collect::<Vec<_>>() == vec![0, 1, 2]);
    t.row(
        format!("{mode}: a service started by init ({svc}), from the host"),
        "exactly fds 0-2",
        ok,
        format!("{svc_fds:?}"),
    );

    // Login holding the descriptors, from the host directory.
    let mut c = env.cmd();
    c.args(["login", zone, "--", "python3", "-c", FD_LIST, "self"]);
    held.give(&mut c);
    let o = c.output().unwrap();
    let listing = String::from_utf8_lossy(&o.stdout).into_owned();
    let (ok, what) = fds_clean(&listing, held);
    t.row(
        format!("{mode}: login holding the same fds: the command's fds"),
        "only 0-2 (and the listing's own)",
        ok && o.status.success(),
        format!("{what} {}", String::from_utf8_lossy(&o.stderr)),
    );

    let mut c = env.cmd();
    c.args([
        "login",
        zone,
        "--",
        "/bin/sh",
        "-c",
        "echo cwd=$(pwd) link=$(readlink /proc/self/cwd) same=$([ \"$(stat -c %d:%i .)\" = \"$(stat -c %d:%i /)\" ] && echo yes || echo no); \
         for n in 7 8 9 10 200; do ls /proc/$$/fd/$n/.. >/dev/null 2>&1 && echo REACHED $n; done; echo walked",
    ]);
    held.give(&mut c);
    let o = c.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    t.row(
        format!("{mode}: login from a host cwd holding fds: cwd, /proc/$$/fd/N/.."),
        "cwd is the zone's /; no fd 7-10,200",
        field(&out, "cwd") == Some("/")
            && field(&out, "link") == Some("/")
            && field(&out, "same") == Some("yes")
            && out.contains("walked")
            && !out.contains("REACHED"),
        out,
    );
}

/// A busybox OCI bundle and a private state root; deletes its containers when dropped.
struct Oci {
    dir: tempfile::TempDir,
}

impl Oci {
    fn new() -> Oci {
        let dir = tempfile::Builder::new()
            .prefix("warren-caller-oci-")
            .tempdir()
            .unwrap();
        std::os::unix::fs::symlink(WARREN, dir.path().join("warren-oci")).unwrap();
        let rootfs = dir.path().join("bundle/rootfs");
        std::fs::create_dir_all(rootfs.join("bin")).unwrap();
        std::fs::copy(common::require_busybox(), rootfs.join("bin/busybox")).unwrap();
        for x in [
            "sh", "ls", "cat", "sleep", "readlink", "echo", "stat", "true",
        ] {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(x)).unwrap();
        }
        for d in ["proc", "dev", "sys", "tmp", "etc"] {
            std::fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        Oci { dir }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(self.dir.path().join("warren-oci"));
        c.arg("--root").arg(self.dir.path().join("state"));
        c
    }

    /// Write config.json (from `warren-oci spec`) with `args`.
    fn spec(&self, args: &[&str]) {
        let bundle = self.dir.path().join("bundle");
        let cfg = bundle.join("config.json");
        let _ = std::fs::remove_file(&cfg);
        let o = Command::new(self.dir.path().join("warren-oci"))
            .args(["spec", "--bundle"])
            .arg(&bundle)
            .output()
            .unwrap();
        assert!(o.status.success(), "warren-oci spec");
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&cfg).unwrap()).unwrap();
        v["process"]["args"] = serde_json::json!(args);
        v["process"]["terminal"] = false.into();
        v["root"]["readonly"] = false.into();
        std::fs::write(&cfg, v.to_string()).unwrap();
    }

    /// Run with stdout/stderr in files (a created container keeps the runtime's stdio,
    /// so pipes would not reach EOF); returns (exit code, stdout + stderr).
    fn run(&self, mut c: Command) -> (i32, String) {
        let out = tempfile::tempfile_in(self.dir.path()).unwrap();
        let status = c
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out.try_clone().unwrap())
            .status()
            .unwrap();
        let mut f = out;
        use std::io::{Read, Seek};
        let mut s = String::new();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.read_to_string(&mut s).unwrap();
        (status.code().unwrap_or(-1), s)
    }

    fn bundle(&self) -> String {
        self.dir
            .path()
            .join("bundle")
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for Oci {
    fn drop(&mut self) {
        let state = self.dir.path().join("state");
        for e in std::fs::read_dir(&state).into_iter().flatten().flatten() {
            let id = e.file_name().to_string_lossy().into_owned();
            let mut c = self.cmd();
            c.args(["delete", "--force", &id]);
            let _ = c.stdin(Stdio::null()).output();
        }
    }
}

fn oci_rows(t: &mut Table) {
    let oci = Oci::new();
    // For --preserve-fds: a token file on 3 and a host directory on 4.
    let tok_dir = scratch("warren-caller-oci-tok-");
    std::fs::write(tok_dir.path().join("token"), "passed\n").unwrap();
    let tok = File::open(tok_dir.path().join("token")).unwrap();
    let tdir = File::open(tok_dir.path()).unwrap();
    let held = Held::new(vec![
        (3, dup_high(tok.as_raw_fd())),
        (4, dup_high(tdir.as_raw_fd())),
    ]);
    let list = "ls -l /proc/self/fd; echo cwd=$(readlink /proc/self/cwd); ls /proc/self/cwd/ | tr '\\n' ' '; true";

    oci.spec(&["sh", "-c", list]);
    let mut c = oci.cmd();
    c.args(["run", "--bundle", &oci.bundle(), "fd-run"]);
    held.give(&mut c);
    let (code, out) = oci.run(c);
    let (ok, what) = fds_clean(&out, &held);
    t.row(
        "oci run holding fds 3,4,7-10,200 (no --preserve-fds): the process's fds",
        "only 0-2 (and the listing's own)",
        ok && code == 0,
        what,
    );
    t.row(
        "oci run from a host cwd: the process's cwd",
        "the container's / (its rootfs)",
        code == 0
            && field(&out, "cwd") == Some("/")
            && out.contains("bin dev etc proc")
            && !out.contains("secret"),
        format!(
            "cwd={:?}; its / lists: {}",
            field(&out, "cwd"),
            out.lines().last().unwrap_or_default()
        ),
    );

    let mut c = oci.cmd();
    c.args([
        "run",
        "--preserve-fds",
        "1",
        "--bundle",
        &oci.bundle(),
        "fd-keep",
    ]);
    held.give(&mut c);
    oci.spec(&[
        "sh",
        "-c",
        "ls -l /proc/self/fd; echo fd3=$(readlink /proc/self/fd/3); ls /proc/self/fd/4/ >/dev/null 2>&1 && echo HAS-4; true",
    ]);
    let (code, out) = oci.run(c);
    let numbers: Vec<&str> = out
        .lines()
        .filter_map(|l| {
            l.split_once(" -> ")
                .and_then(|(a, _)| a.split_whitespace().last())
        })
        .collect();
    t.row(
        "oci run --preserve-fds 1 holding 3,4,7-10,200",
        "fd 3 (the passed file) and not 4 or 7+",
        code == 0
            && field(&out, "fd3").is_some_and(|l| l.ends_with("/token"))
            && !out.contains("HAS-4")
            && numbers.iter().all(|n| {
                ["0", "1", "2", "3"].contains(n) || {
                    // the listing's own descriptor (ls opens /proc/self/fd as 3 or 4)
                    out.lines().any(|l| l.contains(&format!(" {n} -> /proc/")))
                }
            }),
        format!("fds {numbers:?} {}", short(&out, 200)),
    );

    // create (holding the fds) + start: the process that runs later has none of them.
    oci.spec(&[
        "sh",
        "-c",
        "ls -l /proc/self/fd > /tmp/fds; exec sleep 1000",
    ]);
    let mut c = oci.cmd();
    c.args(["create", "--bundle", &oci.bundle(), "fd-created"]);
    held.give(&mut c);
    let (code, out) = oci.run(c);
    assert_eq!(code, 0, "oci create: {out}");
    let mut c = oci.cmd();
    c.args(["start", "fd-created"]);
    held.give(&mut c);
    let (code, out) = oci.run(c);
    assert_eq!(code, 0, "oci start: {out}");
    let fds_file = oci.dir.path().join("bundle/rootfs/tmp/fds");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fds_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let listing = std::fs::read_to_string(&fds_file).unwrap_or_default();
    let (ok, what) = fds_clean(&listing, &held);
    t.row(
        "oci create + start, both holding fds: the container's process",
        "only 0-2 (and the listing's own)",
        ok,
        what,
    );

    let mut c = oci.cmd();
    c.args([
        "exec",
        "fd-created",
        "sh",
        "-c",
        "ls -l /proc/self/fd; true",
    ]);
    held.give(&mut c);
    let (code, out) = oci.run(c);
    let (ok, what) = fds_clean(&out, &held);
    t.row(
        "oci exec holding fds into the running container",
        "only 0-2 (and the listing's own)",
        ok && code == 0,
        what,
    );

    let mut c = oci.cmd();
    c.args([
        "exec",
        "--preserve-fds",
        "1",
        "fd-created",
        "sh",
        "-c",
        "echo fd3=$(readlink /proc/self/fd/3); for n in 4 7 8 9 10 200; do [ -e /proc/self/fd/$n ] && echo HAS-$n; done; true",
    ]);
    held.give(&mut c);
    let (code, out) = oci.run(c);
    t.row(
        "oci exec --preserve-fds 1 holding 3,4,7-10,200",
        "fd 3 only",
        code == 0
            && field(&out, "fd3").is_some_and(|l| l.ends_with("/token"))
            && !out.contains("HAS-"),
        format!("exit {code} {out}"),
    );
    let mut c = oci.cmd();
    c.args(["delete", "--force", "fd-created"]);
    let _ = oci.run(c);

    // A created container's process 1 is the runtime itself, waiting for `start`; a
    // process exec'd into the container meanwhile shares its pid namespace and may
    // look at its descriptors. Walking up from them must not reach the host (the
    // probe looks for this test's own directory, which holds `warren-oci`).
    let (wcode, wout) = created_container_exec(
        &oci,
        "fd-wait",
        "for f in /proc/1/fd/*; do for up in .. ../..; do ls \"$f/$up\" 2>/dev/null | grep -qx warren-oci && echo \"REACHED $f/$up\"; done; done; echo walked",
        None,
    );
    let (code, out) = created_container_exec(
        &oci,
        "fd-held",
        "for f in /proc/1/fd/*; do echo \"${f##*/} $(readlink $f) $(stat -L -c %d:%i $f)\"; done; cat /proc/1/fd/7/secret /proc/1/fd/8; echo listed",
        Some(&held),
    );
    let leaked: Vec<&str> = out
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(2)
                .is_some_and(|id| held.ids.iter().any(|h| h == id))
        })
        .collect();
    t.row(
        "oci create holding the caller's fds; exec into the created container: /proc/1/fd",
        "none of the caller's descriptors",
        leaked.is_empty() && !out.contains("host-secret") && (out.contains("listed") || code != 0),
        format!(
            "exit {code} {}caller's fds on process 1: {:?}",
            if out.contains("host-secret") {
                "read the caller's secret through /proc/1/fd/7; "
            } else {
                ""
            },
            leaked
                .iter()
                .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join("->"))
                .collect::<Vec<_>>()
        ),
    );
    t.row(
        "oci exec into a created (not started) container: walk /proc/1/fd/N/.. of its process 1",
        "no host directory reachable",
        !wout.contains("REACHED") && (wout.contains("walked") || wcode != 0),
        format!("exit {wcode} {wout}"),
    );
}

/// Create (not start) container `id` running `sleep` (the caller holding `held`, if
/// given), run `probe` in it through `warren-oci exec`, delete it; returns the exec's
/// exit code and output.
fn created_container_exec(oci: &Oci, id: &str, probe: &str, held: Option<&Held>) -> (i32, String) {
    oci.spec(&["sh", "-c", "exec sleep 1000"]);
    let mut c = oci.cmd();
    c.args(["create", "--bundle", &oci.bundle(), id]);
    if let Some(h) = held {
        h.give(&mut c);
    }
    let (code, out) = oci.run(c);
    assert_eq!(code, 0, "oci create {id}: {out}");
    let mut c = oci.cmd();
    c.args(["exec", id, "sh", "-c", probe]);
    let r = oci.run(c);
    let mut c = oci.cmd();
    c.args(["delete", "--force", id]);
    let _ = oci.run(c);
    r
}

#[test]
fn class1_caller_descriptors_and_cwd() {
    require_root();
    let env = Env::new();
    let held = Held::new(Vec::new());
    // Control: the held objects really reach a plain child at their numbers, so a
    // clean listing in the zone means warren closed them.
    let mut c = Command::new("/bin/sh");
    c.args(["-c", "ls /proc/$$/fd | tr '\\n' ' '"]);
    held.give(&mut c);
    let o = c.output().unwrap();
    let seen = String::from_utf8_lossy(&o.stdout).into_owned();
    for n in held.targets() {
        assert!(
            seen.split_whitespace().any(|w| w == n.to_string()),
            "control: fd {n} did not reach a plain child ({seen}); the test cannot judge warren"
        );
    }

    let mut t = Table::new("1 caller fds");
    env.host_zone("fdz", &["services=[\"sleep 1001\"]"]);
    env.host_zone("fdn", &["userns=false", "services=[\"sleep 1002\"]"]);
    caller_rows_for_zone(&mut t, &env, &held, "fdz", "userns", "sleep 1001");
    caller_rows_for_zone(&mut t, &env, &held, "fdn", "host", "sleep 1002");
    login_on_terminal_with_fds(&mut t, &env, &held, "fdz");

    // `reboot` is another way to start init.
    let mut c = env.cmd();
    c.args(["reboot", "fdz"]);
    held.give(&mut c);
    let o = c.output().unwrap();
    let r = env.run(&["login", "fdz", "--", "python3", "-c", FD_LIST, "1"]);
    let (ok, what) = fds_clean(&r.stdout, &held);
    t.row(
        "reboot holding the fds, from a host cwd: init's fds",
        "only 0-2 (and init's own /proc handle)",
        ok && o.status.success() && r.code == 0,
        format!("{what} {}", String::from_utf8_lossy(&o.stderr)),
    );

    // Other ways a zone's first process starts: a custom init, and a zone whose
    // layer is a loop-mounted image (warren opens more descriptors of its own).
    env.host_zone("fdi", &["init=[\"/bin/sleep\", \"1009\"]"]);
    env.host_zone("fdq", &["disk.max=64M", "services=[\"sleep 1010\"]"]);
    for (zone, what, tag) in [
        ("fdi", "a custom init (/bin/sleep)", "/bin/sleep 1009"),
        ("fdq", "a disk.max zone's service", "sleep 1010"),
    ] {
        let mut c = env.cmd();
        c.args(["boot", zone]);
        held.give(&mut c);
        let o = c.output().unwrap();
        let fds = if o.status.success() {
            find_in_zone(&env, zone, tag).map(host_fds)
        } else {
            None
        };
        t.row(
            format!("boot holding fds: {what}, from the host"),
            "exactly fds 0-2",
            fds.as_ref()
                .is_some_and(|v| v.iter().map(|(n, _)| *n).collect::<Vec<_>>() == vec![0, 1, 2]),
            format!("{fds:?} {}", String::from_utf8_lossy(&o.stderr)),
        );
    }
    let r = env.run(&["login", "fdq", "--", "python3", "-c", FD_LIST, "1"]);
    let (ok, what) = fds_clean(&r.stdout, &held);
    t.row(
        "boot holding fds: a disk.max zone's init",
        "only 0-2 (and init's own /proc handle)",
        ok && r.code == 0,
        format!("{what} {}", r.stderr),
    );
    oci_rows(&mut t);
    t.finish();
}

/// `warren login` on a terminal (the pty path) from a shell that holds a host
/// directory and a host file on 7, 8 and 200.
fn login_on_terminal_with_fds(t: &mut Table, env: &Env, held: &Held, zone: &str) {
    let screen = held.dir.path().join("screen");
    let body = format!(
        "exec 7<\"$T\"; exec 8<>\"$T/secret\"; exec 200<\"$T\"; cd \"$T\"; \"$W\" login {zone} -- python3 -c \"$FDL\" self"
    );
    let screen_f = File::create(&screen).unwrap();
    let mut child = Child(
        Command::new("script")
            .args(["-qec", &format!("bash -c '{body}'"), "/dev/null"])
            .env("W", WARREN)
            .env("T", held.dir.path())
            .env("FDL", FD_LIST)
            .env("WARREN_ROOT", env.root())
            .env("WARREN_OCI_ROOT", env.root().join("oci"))
            .stdin(Stdio::piped())
            .stdout(screen_f.try_clone().unwrap())
            .stderr(screen_f)
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "script did not finish in 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let listing = std::fs::read_to_string(&screen)
        .unwrap_or_default()
        .replace('\r', "");
    let (ok, what) = fds_clean(&listing, held);
    let on_pty = listing.lines().any(|l| l.starts_with("0 /dev/pts/"));
    t.row(
        "login on a terminal (pty path) from a shell holding fds 7, 8, 200",
        "only 0-2 on the zone pty (and the listing's own)",
        ok && on_pty,
        what,
    );
}

// ---------------------------------------------------------------------------------
// Class 2: the caller's terminal.

/// Reports, on one line, what the process holds: its fds 0-2, whether /dev/tty opens,
/// whether it leads its own session and its tty_nr, `tty`'s answer, fd 0's device
/// against the zone's devpts, and the result of TIOCSTI on 0, 1 and 2 with the line
/// `touch <argv[1]>`. With argv[2] it first sleeps that long (ignoring SIGHUP, as a
/// process left behind would), with argv[3] it writes the report there.
const TERM_REPORT: &str = r#"
import fcntl, os, signal, subprocess, sys, termios, time
signal.signal(signal.SIGHUP, signal.SIG_IGN)
if len(sys.argv) > 2:
    time.sleep(float(sys.argv[2]))
r = []
for fd in (0, 1, 2):
    try:
        r.append("fd%d=%s" % (fd, os.readlink("/proc/self/fd/%d" % fd)))
    except OSError as e:
        r.append("fd%d=errno%d" % (fd, e.errno))
try:
    os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    r.append("devtty=opened")
except OSError as e:
    r.append("devtty=errno%d" % e.errno)
st = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
r.append("leader=%s ttynr=%s" % ("yes" if int(st[3]) == os.getpid() else "no:" + st[3], st[4]))
try:
    r.append("tty=" + subprocess.run(["tty"], capture_output=True, text=True).stdout.strip().replace(" ", "_"))
except OSError as e:
    r.append("tty=errno%d" % e.errno)
try:
    s0 = os.fstat(0)
    r.append("fd0rdev=%d fd0dev=%d ptsdev=%d" % (s0.st_rdev, s0.st_dev, os.stat("/dev/pts").st_dev))
except OSError as e:
    r.append("fd0stat=errno%d" % e.errno)
line = ("touch " + sys.argv[1] + "\n").encode()
for fd in (0, 1, 2):
    try:
        for ch in line:
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
        r.append("sti%d=injected" % fd)
    except OSError as e:
        r.append("sti%d=errno%d" % (fd, e.errno))
text = " ".join(r) + "\n"
if len(sys.argv) > 3:
    open(sys.argv[3], "w").write(text)
else:
    sys.stdout.write(text)
    sys.stdout.flush()
"#;

/// One run under a real terminal (`script`), as an admin's shell would do it: `inner`
/// runs in bash on the pty (with $W, $CODE, $MARK, $T set), then the "shell" reads a
/// line from the terminal for `read_secs` and evaluates it, as an interactive shell
/// would after login returns.
struct TermRun {
    /// What the terminal showed (script's output).
    screen: String,
    /// What the host shell read from the terminal after the command.
    host_read: String,
    /// Whether the injected `touch MARK` ran on the host.
    marker_ran: bool,
    /// The caller's terminal (the pty script made) as (filesystem, device), read while
    /// it existed.
    caller_tty: Option<(u64, u64)>,
    /// Report written by the command to $T/out-<n>, if redirected there.
    out: String,
}

fn under_terminal(env: &Env, t: &Path, n: usize, inner: &str, read_secs: u32) -> TermRun {
    let mark = t.join(format!("injected-{n}"));
    let out = t.join(format!("out-{n}"));
    let hostread = t.join(format!("hostread-{n}"));
    let ttyf = t.join(format!("tty-{n}"));
    let screen = t.join(format!("screen-{n}"));
    let body = format!(
        "stat -L -c \"%n %d %t %T\" /dev/stdin > \"$T/tty-{n}\"; {inner}; read -t {read_secs} -r line; printf '%s' \"$line\" > \"$T/hostread-{n}\"; eval \"$line\""
    );
    let cmdline = format!("bash -c '{}'", body.replace('\'', r"'\''"));
    let screen_f = File::create(&screen).unwrap();
    let mut child = Child(
        Command::new("script")
            .args(["-qec", &cmdline, "/dev/null"])
            .env("W", WARREN)
            .env("CODE", TERM_REPORT)
            .env("MARK", &mark)
            .env("OUT", &out)
            .env("T", t)
            .env("WARREN_ROOT", env.root())
            .env("WARREN_OCI_ROOT", env.root().join("oci"))
            .env_remove("WARREN_CGROUP")
            .env_remove("WARREN_STORAGE")
            .stdin(Stdio::piped())
            .stdout(screen_f.try_clone().unwrap())
            .stderr(screen_f)
            .spawn()
            .unwrap(),
    );
    // script's stdin stays open (no data) until it is done: at EOF it would send the
    // terminal's EOF character, which the shell's `read` would take instead.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if child.0.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "script run {n} did not finish in 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    TermRun {
        screen: read(&screen),
        host_read: read(&hostread),
        marker_ran: mark.exists(),
        caller_tty: {
            let text = read(&ttyf);
            let w: Vec<&str> = text.split_whitespace().collect();
            let hex = |i: usize| w.get(i).and_then(|v| u32::from_str_radix(v, 16).ok());
            match (w.get(1).and_then(|v| v.parse::<u64>().ok()), hex(2), hex(3)) {
                (Some(dev), Some(ma), Some(mi)) => Some((dev, libc::makedev(ma, mi))),
                _ => None,
            }
        },
        out: read(&out),
    }
}

/// The (filesystem, device) pair of a terminal: pty numbers repeat across devpts
/// instances, so the device number alone does not tell the caller's from the zone's.
fn tty_id(path: &Path) -> Option<(u64, u64)> {
    let m = std::fs::metadata(path).ok()?;
    (m.rdev() != 0).then_some((m.dev(), m.rdev()))
}

fn sti_all_failed(report: &str) -> bool {
    ["sti0", "sti1", "sti2"]
        .iter()
        .all(|k| field(report, k).is_some_and(|v| v.starts_with("errno")))
}

fn pipes(report: &str) -> bool {
    ["fd0", "fd1", "fd2"]
        .iter()
        .all(|k| field(report, k).is_some_and(|v| v.starts_with("pipe:")))
}

/// Rows for a zone's pipe mode (stdin a terminal, stdout a file) and pty mode.
fn terminal_rows(t: &mut Table, env: &Env, dir: &Path, zone: &str, mode: &str, n0: usize) {
    // stdin a terminal, stdout redirected to a file: three pipes.
    let r = under_terminal(
        env,
        dir,
        n0,
        &format!("\"$W\" login {zone} -- python3 -c \"$CODE\" \"$MARK\" > \"$OUT\""),
        1,
    );
    let rep = r.out.clone();
    t.row(
        format!("{mode}: login with stdin a tty, stdout a file: fds 0-2"),
        "three pipes",
        pipes(&rep),
        &rep,
    );
    t.row(
        format!("{mode}: same: `tty`, open /dev/tty"),
        "not a tty; ENXIO",
        field(&rep, "tty") == Some("not_a_tty") && field(&rep, "devtty") == Some("errno6"),
        format!(
            "tty={:?} devtty={:?}",
            field(&rep, "tty"),
            field(&rep, "devtty")
        ),
    );
    t.row(
        format!("{mode}: same: TIOCSTI 'touch' on 0/1/2 into the caller's shell"),
        "ENOTTY each; the host shell reads nothing",
        sti_all_failed(&rep) && r.host_read.is_empty() && !r.marker_ran,
        format!(
            "sti0={:?} sti1={:?} sti2={:?} host read {:?} ran={}",
            field(&rep, "sti0"),
            field(&rep, "sti1"),
            field(&rep, "sti2"),
            r.host_read,
            r.marker_ran
        ),
    );
    t.row(
        format!("{mode}: same: the command's session and controlling tty"),
        "leads a new session, tty_nr 0",
        field(&rep, "leader") == Some("yes") && field(&rep, "ttynr") == Some("0"),
        format!(
            "leader={:?} ttynr={:?}",
            field(&rep, "leader"),
            field(&rep, "ttynr")
        ),
    );

    // Both stdin and stdout terminals: a pty of the zone's own devpts.
    let r = under_terminal(
        env,
        dir,
        n0 + 1,
        &format!("\"$W\" login {zone} -- python3 -c \"$CODE\" \"$MARK\""),
        1,
    );
    let rep = r.screen.clone();
    let zone_pty =
        field(&rep, "fd0dev").is_some() && field(&rep, "fd0dev") == field(&rep, "ptsdev");
    let caller_dev = r.caller_tty.map(|(dev, _)| dev.to_string());
    t.row(
        format!("{mode}: login with both stdin and stdout ttys: the command's tty"),
        "a pty of the zone's devpts, not the caller's",
        zone_pty && caller_dev.is_some() && field(&rep, "fd0dev") != caller_dev.as_deref(),
        format!(
            "fd0={:?} on devpts {:?}, the zone's devpts {:?}; caller {:?} on {:?}",
            field(&rep, "fd0"),
            field(&rep, "fd0dev"),
            field(&rep, "ptsdev"),
            r.caller_tty,
            caller_dev
        ),
    );
    t.row(
        format!("{mode}: same: TIOCSTI 'touch' into its own pty"),
        "never reaches the caller's shell",
        r.host_read.is_empty() && !r.marker_ran && rep.contains("sti0="),
        format!(
            "sti0={:?} host read {:?} ran={}",
            field(&rep, "sti0"),
            r.host_read,
            r.marker_ran
        ),
    );
    t.row(
        format!("{mode}: same: the command's session"),
        "leads a new session on the zone pty",
        field(&rep, "leader") == Some("yes") && field(&rep, "ttynr").is_some_and(|v| v != "0"),
        format!(
            "leader={:?} ttynr={:?}",
            field(&rep, "leader"),
            field(&rep, "ttynr")
        ),
    );
}

#[test]
fn class2_caller_terminal() {
    require_root();
    require_tool("script", "util-linux: it gives login a real terminal");
    require_tool("bash", "the admin's shell in the terminal runs");
    let env = Env::new();
    let dir = scratch("warren-caller-tty-");
    let mut t = Table::new("2 terminal");

    // Control: without warren, TIOCSTI from the terminal's session reaches the shell,
    // which runs the injected line. If this fails the rows below prove nothing.
    let r = under_terminal(
        &env,
        dir.path(),
        0,
        "python3 -c \"$CODE\" \"$MARK\" > \"$OUT\"",
        1,
    );
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
        .unwrap_or_else(|_| "absent".into());
    assert!(
        r.marker_ran && !r.host_read.is_empty(),
        "control: a host process's TIOCSTI did not reach the shell under `script` (legacy_tiocsti {}): {} / {} / {}",
        legacy.trim(),
        r.out,
        r.host_read,
        r.screen
    );

    env.host_zone("tz", &[]);
    env.host_zone("tzn", &["userns=false"]);
    env.ok(&["boot", "tz"]);
    env.ok(&["boot", "tzn"]);
    terminal_rows(&mut t, &env, dir.path(), "tz", "default zone", 1);
    terminal_rows(&mut t, &env, dir.path(), "tzn", "userns=false zone", 3);

    // stdout a terminal, stdin not (a file): still pipes, nothing to inject into.
    let r = under_terminal(
        &env,
        dir.path(),
        5,
        "\"$W\" login tz -- python3 -c \"$CODE\" \"$MARK\" < /dev/null",
        1,
    );
    t.row(
        "login with stdout a tty, stdin /dev/null: fds 0-2 and TIOCSTI",
        "three pipes; ENOTTY; the host shell reads nothing",
        pipes(&r.screen) && sti_all_failed(&r.screen) && r.host_read.is_empty() && !r.marker_ran,
        &r.screen,
    );

    // Processes left behind after login returns (pipe mode).
    let r = under_terminal(
        &env,
        dir.path(),
        6,
        "\"$W\" login tz -- sh -c \"setsid sleep 1003 <&0 & nohup sleep 1004 <&0 & echo started\" > \"$OUT\"",
        1,
    );
    let caller = r.caller_tty;
    assert!(
        caller.is_some(),
        "the caller's terminal {:?} is not visible",
        r.caller_tty
    );
    for tag in ["sleep 1003", "sleep 1004"] {
        let pid = find_in_zone(&env, "tz", tag);
        let (holds, tty_nr, fds) = match pid {
            Some(p) => {
                let fds = host_fds(p);
                let holds =
                    (0..3).any(|n| tty_id(Path::new(&format!("/proc/{p}/fd/{n}"))) == caller);
                (holds, stat_field(p, 7), fds)
            }
            None => (true, None, Vec::new()),
        };
        t.row(
            format!("a process left behind by login ({tag} &), from the host"),
            "holds no terminal of the caller's; tty_nr 0",
            pid.is_some() && !holds && tty_nr == Some(0),
            format!("pid {pid:?} tty_nr {tty_nr:?} fds {fds:?}"),
        );
    }

    // A process left behind that injects later, after login returned (pipe mode).
    let r = under_terminal(
        &env,
        dir.path(),
        7,
        "\"$W\" login tz -- sh -c \"python3 -c \\\"\\$0\\\" \\\"\\$1\\\" 1 /tmp/late-7 <&0 & echo started\" \"$CODE\" \"$MARK\" > \"$OUT\"; sleep 2",
        1,
    );
    let late = env.run(&["login", "tz", "--", "cat", "/tmp/late-7"]);
    t.row(
        "a process left behind (pipes) injects 'touch' 1 s after login returned",
        "ENOTTY; the host shell reads nothing",
        sti_all_failed(&late.stdout) && r.host_read.is_empty() && !r.marker_ran,
        format!(
            "{} host read {:?} ran={}",
            late.stdout, r.host_read, r.marker_ran
        ),
    );

    // Same in pty mode: the zone's pty is hung up once login is gone.
    let r = under_terminal(
        &env,
        dir.path(),
        8,
        "\"$W\" login tz -- sh -c \"trap '' HUP; python3 -c \\\"\\$0\\\" \\\"\\$1\\\" 1 /tmp/late-8 <&0 & echo started\" \"$CODE\" \"$MARK\"; sleep 2",
        1,
    );
    let late = env.run(&["login", "tz", "--", "cat", "/tmp/late-8"]);
    t.row(
        "a process left behind on the zone pty injects 'touch' 1 s after login returned",
        "fails or lands in the dead zone pty; the host shell reads nothing",
        late.code == 0 && late.stdout.contains("sti0=") && r.host_read.is_empty() && !r.marker_ran,
        format!(
            "{} host read {:?} ran={}",
            late.stdout, r.host_read, r.marker_ran
        ),
    );

    // stdin and stdout host files, no terminal at all.
    let hin = dir.path().join("host-in");
    let hout = dir.path().join("host-out");
    std::fs::write(&hin, "host input\n").unwrap();
    let before = std::fs::read(&hin).unwrap();
    let code = r#"
import os
r = []
for fd in (0, 1, 2):
    r.append("fd%d=%s" % (fd, os.readlink("/proc/self/fd/%d" % fd)))
try:
    f = os.open("/proc/self/fd/0", os.O_WRONLY)
    os.write(f, b"ZONE-WROTE-THIS\n")
    os.close(f)
    r.append("reopen0=wrote-to-" + os.readlink("/proc/self/fd/0"))
except OSError as e:
    r.append("reopen0=errno%d" % e.errno)
print(" ".join(r))
"#;
    let o = env
        .cmd()
        .args(["login", "tz", "--", "python3", "-c", code])
        .stdin(File::open(&hin).unwrap())
        .stdout(File::create(&hout).unwrap())
        .output()
        .unwrap();
    let rep = std::fs::read_to_string(&hout).unwrap_or_default();
    let after = std::fs::read(&hin).unwrap();
    t.row(
        "login with stdin and stdout host files: fds, reopen /proc/self/fd/0 for writing",
        "pipes; the host input file is unchanged",
        o.status.success() && pipes(&rep) && after == before,
        format!(
            "{rep} host-in changed: {} {}",
            after != before,
            String::from_utf8_lossy(&o.stderr)
        ),
    );
    // Kill what was left behind through the zone.
    env.ok(&["halt", "tz", "tzn", "--timeout", "1"]);
    t.finish();
}

// ---------------------------------------------------------------------------------
// Class 4: a hostile image and host users.

/// A root filesystem an attacker would ship: busybox, a setuid-root `id`, a `cat`
/// with cap_dac_read_search, device nodes with /dev/null's and /dev/zero's numbers
/// (mode 666), and a `nobody` user.
fn hostile_image(dir: &Path) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for d in ["dev", "etc", "srv", "proc", "sys", "tmp", "root"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::copy(common::require_busybox(), bin.join("busybox")).unwrap();
    for x in [
        "sh", "sleep", "su", "id", "cat", "ls", "cp", "chmod", "echo",
    ] {
        std::os::unix::fs::symlink("busybox", bin.join(x)).unwrap();
    }
    std::fs::write(
        dir.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(dir.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n").unwrap();
    let id = dir.join("srv/suid-id");
    std::fs::copy("/usr/bin/id", &id).unwrap();
    std::fs::set_permissions(&id, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let cat = dir.join("srv/fcap-cat");
    std::fs::copy("/usr/bin/cat", &cat).unwrap();
    let o = Command::new("setcap")
        .args(["cap_dac_read_search+ep"])
        .arg(&cat)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "setcap on the image's cat: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    for (name, minor) in [("nullnode", "3"), ("zeronode", "5")] {
        let o = Command::new("mknod")
            .args(["-m", "666"])
            .arg(dir.join("srv").join(name))
            .args(["c", "1", minor])
            .output()
            .unwrap();
        assert!(o.status.success(), "mknod {name}");
    }
}

fn denied(r: &Run) -> bool {
    let out = output(r);
    out.contains("Permission denied") && !out.contains("euid=0") && !out.contains("REACHED")
}

#[test]
fn class4_hostile_image_and_host_users() {
    require_root();
    require_tool(
        "setpriv",
        "util-linux: it runs probes as an unprivileged host user",
    );
    require_tool("setcap", "libcap2-bin: the image's file capability");
    require_tool("tar", "the --from-tar template");
    let env = Env::new();
    // The state root itself is left as the operator made it (/var/lib/warren is
    // usually 0755); open it so that only warren's own modes stand between a host
    // user and the templates.
    std::fs::set_permissions(env.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let img = scratch("warren-caller-img-");
    hostile_image(img.path());
    let tar = img.path().with_extension("tar");
    let o = Command::new("tar")
        .args(["--xattrs", "--xattrs-include=*", "-cf"])
        .arg(&tar)
        .arg("-C")
        .arg(img.path())
        .arg(".")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tar: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    struct RmFile(PathBuf);
    impl Drop for RmFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _tar_guard = RmFile(tar.clone());
    env.ok(&[
        "template",
        "create",
        "img",
        "--from-dir",
        img.path().to_str().unwrap(),
    ]);
    env.ok(&[
        "template",
        "create",
        "imgtar",
        "--from-tar",
        tar.to_str().unwrap(),
    ]);
    env.ok(&["create", "hz", "--template", "img"]);
    env.ok(&["install", "hz"]);
    env.ok(&[
        "create",
        "hzn",
        "--template",
        "img",
        "--set",
        "userns=false",
    ]);
    env.ok(&["install", "hzn"]);
    env.ok(&["boot", "hz"]);
    env.ok(&["boot", "hzn"]);
    let root = env.root().display().to_string();

    // Guard: the probes really run unprivileged.
    let g = as_nobody("grep CapEff /proc/self/status; id -u");
    assert!(
        g.stdout.contains("CapEff:\t0000000000000000") && g.stdout.contains("65534"),
        "the unprivileged probe shell is not unprivileged: {g:?}"
    );
    let mut t = Table::new("4 image/users");

    let mut modes = Vec::new();
    let mut ok = true;
    for e in std::fs::read_dir(env.root()).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            let m = e.metadata().unwrap().mode() & 0o7777;
            ok &= m == 0o700;
            modes.push(format!("{}:{m:o}", e.file_name().to_string_lossy()));
        }
    }
    modes.sort();
    t.row(
        "every directory directly inside the state root",
        "0700",
        ok && modes.len() >= 4,
        modes.join(" "),
    );

    let tpl = format!("{root}/templates/img/root/srv");
    let r = as_nobody(&format!("{tpl}/suid-id"));
    t.row(
        "host user execs the image's setuid-root id in templates/",
        "EACCES",
        denied(&r),
        summary(&r),
    );
    let r = as_nobody(&format!("echo x > {tpl}/nullnode && echo REACHED"));
    t.row(
        "host user writes the image's char node (1:3) in templates/",
        "EACCES",
        denied(&r),
        summary(&r),
    );
    let r = as_nobody(&format!("head -c 4 {tpl}/zeronode | od -c"));
    t.row(
        "host user reads the image's char node (1:5) in templates/",
        "EACCES",
        r.stderr.contains("Permission denied") && !r.stdout.contains("\\0"),
        summary(&r),
    );
    let r = as_nobody(&format!("{tpl}/fcap-cat /etc/shadow | head -c 20"));
    t.row(
        "host user runs the image's cap_dac_read_search cat on /etc/shadow",
        "EACCES",
        r.stderr.contains("Permission denied") && !r.stdout.contains("root:"),
        summary(&r),
    );
    let r = as_nobody(&format!("ls {root}/templates/ && echo REACHED"));
    t.row(
        "host user lists templates/",
        "EACCES",
        denied(&r),
        summary(&r),
    );
    let r = as_nobody(&format!("{root}/templates/imgtar/root/srv/suid-id"));
    t.row(
        "host user execs the setuid id of a --from-tar template",
        "EACCES",
        denied(&r),
        summary(&r),
    );

    // A setuid file the zone's root planted in its own layer.
    let r = env.run(&[
        "login",
        "hz",
        "--",
        "/bin/sh",
        "-c",
        "cp /bin/busybox /srv/planted && chmod 4755 /srv/planted && echo planted",
    ]);
    assert!(r.stdout.contains("planted"), "{r:?}");
    let r = as_nobody(&format!("{root}/zones/hz/upper/srv/planted id"));
    t.row(
        "host user execs a setuid file the zone planted (zones/hz/upper)",
        "EACCES",
        denied(&r),
        summary(&r),
    );
    let r = as_nobody(&format!("cat {root}/zones/hz/config.toml && echo REACHED"));
    t.row(
        "host user reads a zone's config",
        "EACCES",
        denied(&r),
        summary(&r),
    );
    let init = env.init_pid("hz");
    let r = as_nobody(&format!("ls /proc/{init}/root/srv && echo REACHED"));
    t.row(
        "host user walks /proc/<zone init>/root",
        "EACCES",
        denied(&r),
        summary(&r),
    );

    // userns=false: a zone process runs as host uid 65534 (the image's nobody), and
    // /proc/<pid>/root of a process of one's own uid is open to that user.
    let r = env.run(&[
        "login",
        "hzn",
        "--",
        "/bin/sh",
        "-c",
        "su -s /bin/sh nobody -c 'exec sleep 1007' </dev/null >/dev/null 2>&1 & echo started",
    ]);
    assert!(r.stdout.contains("started"), "{r:?}");
    let pid = find_in_zone(&env, "hzn", "sleep 1007")
        .unwrap_or_else(|| panic!("no `sleep 1007` running as nobody in hzn"));
    let uid = std::fs::metadata(format!("/proc/{pid}")).unwrap().uid();
    assert_eq!(uid, 65534, "the zone's nobody is not host uid 65534");
    let r = as_nobody(&format!(
        "head -c 4 /proc/{pid}/root/srv/zeronode | od -An -c; echo x > /proc/{pid}/root/srv/nullnode && echo WROTE-NODE"
    ));
    t.row(
        "userns=false: host nobody opens the image's nodes via /proc/<zone nobody pid>/root",
        "EACCES (no usable device node from an image)",
        !r.stdout.contains("\\0") && !r.stdout.contains("WROTE-NODE"),
        summary(&r),
    );
    let r = as_nobody(&format!("/proc/{pid}/root/srv/suid-id"));
    t.row(
        "userns=false: host nobody execs the image's setuid id via that /proc/<pid>/root",
        "no euid 0",
        !output(&r).contains("euid=0") && r.code != -1,
        summary(&r),
    );

    // Pre-existing open directories are tightened by the next command.
    for d in ["templates", "zones", "locks", "userns"] {
        let p = env.root().join(d);
        if p.exists() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    std::fs::create_dir_all(env.root().join("leases-extra")).unwrap();
    std::fs::set_permissions(
        env.root().join("leases-extra"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    env.ok(&["list"]);
    let mut modes = Vec::new();
    let mut ok = true;
    for e in std::fs::read_dir(env.root()).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            let m = e.metadata().unwrap().mode() & 0o7777;
            ok &= m == 0o700;
            modes.push(format!("{}:{m:o}", e.file_name().to_string_lossy()));
        }
    }
    modes.sort();
    t.row(
        "state root dirs opened to 0755 (and a new one), then `warren list`",
        "all back to 0700",
        ok && modes.iter().any(|m| m.starts_with("leases-extra")),
        modes.join(" "),
    );
    t.finish();
}

// ---------------------------------------------------------------------------------
// Class 8: per-zone kernel counters.

const INOTIFY_FILL: &str = r#"
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
print("opened=%d errno=%d" % (len(fds), ctypes.get_errno()), flush=True)
if len(sys.argv) > 1:
    time.sleep(float(sys.argv[1]))
"#;

const MQ_FILL: &str = r#"
import ctypes, os, sys, time
rt = ctypes.CDLL("librt.so.1", use_errno=True)
rt.mq_open.restype = ctypes.c_int
rt.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
n = 0
err = 0
while n < 1000:
    q = rt.mq_open(("/%s%d" % (sys.argv[1], n)).encode(), os.O_CREAT | os.O_RDWR, 0o600, None)
    if q < 0:
        err = ctypes.get_errno()
        break
    n += 1
print("queues=%d errno=%d" % (n, err), flush=True)
if len(sys.argv) > 2:
    time.sleep(float(sys.argv[2]))
for i in range(n):
    rt.mq_unlink(("/%s%d" % (sys.argv[1], i)).encode())
"#;

/// Start `warren login zone -- python3 -c code args` and return it with its first line.
fn hold_in_zone(env: &Env, zone: &str, code: &str, args: &[&str]) -> (Child, String) {
    use std::io::BufRead;
    let mut c = env.cmd();
    c.args(["login", zone, "--", "python3", "-c", code])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = Child(c.spawn().unwrap());
    let out = child.0.stdout.take().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(out).read_line(&mut line).unwrap();
    (child, line.trim().to_string())
}

fn host_inotify() -> Result<(), i32> {
    // SAFETY: inotify_init1 takes flags only; the new descriptor is closed at once.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    Ok(())
}

fn host_mq(name: &str) -> Result<(), i32> {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: a NUL-terminated name, plain flags, no attributes; the queue is closed
    // and removed at once.
    let q = unsafe {
        libc::mq_open(
            c.as_ptr(),
            libc::O_CREAT | libc::O_RDWR | libc::O_EXCL | libc::O_CLOEXEC,
            0o600 as libc::mode_t,
            std::ptr::null::<libc::mq_attr>(),
        )
    };
    if q < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: `q` is the queue just opened; the name is ours.
    unsafe {
        libc::mq_close(q);
        libc::mq_unlink(c.as_ptr());
    }
    Ok(())
}

fn ns_owner(pid: i32) -> Option<u32> {
    let f = File::open(format!("/proc/{pid}/ns/user")).ok()?;
    let mut uid: libc::uid_t = 0;
    // SAFETY: NS_GET_OWNER_UID (_IO(0xb7, 0x4)) writes one uid_t into `uid`.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), 0xb704, &mut uid as *mut libc::uid_t) };
    (rc == 0).then_some(uid)
}

#[test]
fn class8_per_zone_kernel_counters() {
    require_root();
    let env = Env::new();
    env.host_zone("ca", &[]);
    env.host_zone("cb", &[]);
    env.ok(&["boot", "ca"]);
    env.ok(&["boot", "cb"]);
    let mut t = Table::new("8 counters");
    let (base_a, base_b) = (state_base(&env, "ca"), state_base(&env, "cb"));
    let (ia, ib) = (env.init_pid("ca"), env.init_pid("cb"));

    let (oa, ob) = (ns_owner(ia), ns_owner(ib));
    t.row(
        "zone A's user namespace owner (NS_GET_OWNER_UID)",
        "A's own base uid, not root",
        oa == Some(base_a as u32),
        format!("owner {oa:?} base {base_a}"),
    );
    t.row(
        "zone B's user namespace owner",
        "B's own base uid, not A's",
        ob == Some(base_b as u32) && ob != oa,
        format!("owner {ob:?} base {base_b}"),
    );
    let uid_of = |pid: i32| {
        std::fs::metadata(format!("/proc/{pid}"))
            .map(|m| m.uid())
            .ok()
    };
    t.row(
        "A's and B's init, as the host sees them (/proc/<init> owner)",
        "each its own base uid, different",
        uid_of(ia) == Some(base_a as u32) && uid_of(ib) == Some(base_b as u32) && base_a != base_b,
        format!("A {:?} B {:?}", uid_of(ia), uid_of(ib)),
    );

    // Filling A's counters would fill host root's if A's namespace were root's: then
    // the fills are not run (they would starve the host's other processes).
    if oa != Some(base_a as u32) || oa == Some(0) {
        t.row(
            "A fills inotify instances and message queues",
            "not run: A's namespace is not owned by A's own uid",
            false,
            format!("owner {oa:?}"),
        );
        t.finish();
        return;
    }

    // inotify instances.
    assert_eq!(
        host_inotify(),
        Ok(()),
        "the host cannot create an inotify instance even before the test (fs.inotify.max_user_instances exhausted by something else)"
    );
    let limit: i64 = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let (holder, line) = hold_in_zone(&env, "ca", INOTIFY_FILL, &["30"]);
    let opened: i64 = field(&line, "opened")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.row(
        "A opens inotify instances until failure (and holds them)",
        "stops at its own limit (EMFILE)",
        field(&line, "errno") == Some("24") && opened > 0 && opened <= limit,
        format!("{line} (max_user_instances {limit})"),
    );
    let rb = env.run(&["login", "cb", "--", "python3", "-c", INOTIFY_FILL]);
    let opened_b: i64 = field(&rb.stdout, "opened")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.row(
        "B opens inotify instances while A holds its limit",
        "B gets its own full quota",
        opened_b > 0 && opened_b + 8 >= opened,
        summary(&rb),
    );
    let h = host_inotify();
    t.row(
        "host root inotify_init while A holds its limit",
        "succeeds",
        h.is_ok(),
        format!("{h:?}"),
    );
    drop(holder);

    // POSIX message queues (RLIMIT_MSGQUEUE bytes).
    let (holder, line) = hold_in_zone(&env, "ca", MQ_FILL, &["wq", "30"]);
    let qa: i64 = field(&line, "queues")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.row(
        "A creates POSIX message queues until failure (and keeps them)",
        "stops at its own RLIMIT_MSGQUEUE (EMFILE)",
        field(&line, "errno") == Some("24") && qa > 0,
        &line,
    );
    let rb = env.run(&["login", "cb", "--", "python3", "-c", MQ_FILL, "wqb"]);
    let qb: i64 = field(&rb.stdout, "queues")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.row(
        "B creates message queues while A is full",
        "B gets its own full quota",
        qb > 0 && qb >= qa,
        summary(&rb),
    );
    let name = format!("/warren-caller-{}", std::process::id());
    let h = host_mq(&name);
    t.row(
        "host root mq_open while A is full",
        "succeeds",
        h.is_ok(),
        format!("{h:?}"),
    );
    drop(holder);
    t.finish();
}

// ---------------------------------------------------------------------------------
// Class 9: defaults.

const FORK_LOOP: &str = r#"my @p; my $err = 0;
for (1..1200) { my $c = fork(); if (!defined $c) { $err = $! + 0; last } if ($c == 0) { sleep 60; exit 0 } push @p, $c }
print "forked=", scalar(@p), " errno=$err\n";
kill 'KILL', @p; 1 while wait() != -1;"#;

fn limits(env: &Env, zone: &str) -> (String, String) {
    (
        env.cgroup_file(zone, "pids", "pids.max"),
        env.cgroup_file(zone, "memory", "memory.limit_in_bytes"),
    )
}

#[test]
fn class9_default_limits() {
    require_root();
    assert!(
        Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
            && Path::new("/sys/fs/cgroup/pids").is_dir(),
        "this test reads cgroup v1 pids.max and memory.limit_in_bytes; this host has no v1 memory/pids hierarchy"
    );
    let env = Env::new();
    let mut t = Table::new("9 defaults");
    env.host_zone("d1", &[]);
    env.ok(&["boot", "d1"]);
    let (p, m) = limits(&env, "d1");
    t.row("zone with no limits: pids.max", "1024", p == "1024", &p);
    t.row(
        "zone with no limits: memory.limit_in_bytes",
        "536870912 (512M)",
        m == "536870912",
        &m,
    );
    env.host_zone("d1n", &["userns=false"]);
    env.ok(&["boot", "d1n"]);
    let (p, m) = limits(&env, "d1n");
    t.row(
        "userns=false zone with no limits: pids.max, memory",
        "1024, 536870912",
        p == "1024" && m == "536870912",
        format!("{p} {m}"),
    );
    let r = env.run(&["login", "d1", "--", "perl", "-e", FORK_LOOP]);
    let forked: i64 = field(&r.stdout, "forked")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.row(
        "zone with no limits forks 1200 processes",
        "fork fails (EAGAIN) just below 1024",
        field(&r.stdout, "errno") == Some("11") && (1000..1024).contains(&forked),
        summary(&r),
    );
    let r = env.run(&[
        "login",
        "d1",
        "--",
        "python3",
        "-c",
        "b = bytearray(1 << 30); print('allocated', len(b))",
    ]);
    t.row(
        "zone with no limits allocates 1 GiB",
        "killed inside the zone (memory cap), not allocated",
        !r.stdout.contains("allocated") && r.code != 0,
        summary(&r),
    );
    let keys = env.ok(&["config", "keys"]).stdout;
    let doc = |k: &str| {
        keys.lines()
            .find(|l| l.starts_with(k))
            .unwrap_or_default()
            .to_string()
    };
    t.row(
        "`warren config keys` shows the defaults",
        "max-processes default 1024, memory.max default 512M",
        doc("max-processes").contains("1024") && doc("memory.max ").contains("512M"),
        format!("{} / {}", doc("max-processes"), doc("memory.max ")),
    );

    // The host's defaults.
    let defaults = env.root().join("defaults.toml");
    std::fs::write(&defaults, "max-processes = 64\nmemory.max = \"128M\"\n").unwrap();
    env.host_zone("d2", &[]);
    env.ok(&["boot", "d2"]);
    let (p, m) = limits(&env, "d2");
    t.row(
        "defaults.toml max-processes = 64, memory.max = 128M: next boot",
        "pids.max 64, memory 134217728",
        p == "64" && m == "134217728",
        format!("{p} {m}"),
    );
    let r = env.run(&["login", "d2", "--", "perl", "-e", FORK_LOOP]);
    let forked: i64 = field(&r.stdout, "forked")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.row(
        "zone under defaults.toml forks 1200 processes",
        "fork fails (EAGAIN) just below 64",
        field(&r.stdout, "errno") == Some("11") && (50..64).contains(&forked),
        summary(&r),
    );
    env.ok(&["halt", "d1", "--timeout", "1"]);
    env.ok(&["boot", "d1"]);
    let (p, m) = limits(&env, "d1");
    t.row(
        "an existing zone with no limits, rebooted after defaults.toml",
        "the new defaults (64, 128M)",
        p == "64" && m == "134217728",
        format!("{p} {m}"),
    );
    env.host_zone("d3", &["max-processes=200"]);
    env.ok(&["boot", "d3"]);
    let (p, m) = limits(&env, "d3");
    t.row(
        "zone's own max-processes = 200 under defaults.toml",
        "its own wins (200); memory from defaults (128M)",
        p == "200" && m == "134217728",
        format!("{p} {m}"),
    );
    env.host_zone("d4", &["memory.max=256M"]);
    env.ok(&["boot", "d4"]);
    let (p, m) = limits(&env, "d4");
    t.row(
        "zone's own memory.max = 256M under defaults.toml",
        "its own wins (268435456); pids from defaults (64)",
        p == "64" && m == "268435456",
        format!("{p} {m}"),
    );
    env.host_zone("d5", &["max-threads=300"]);
    env.ok(&["boot", "d5"]);
    let (p, _) = limits(&env, "d5");
    t.row(
        "zone's own max-threads = 300 under defaults.toml",
        "pids.max 300 (no default on top)",
        p == "300",
        &p,
    );

    // Bad host defaults: the boot fails naming the file and the key.
    env.host_zone("d6", &[]);
    for (text, key, what) in [
        ("max-processes = \"lots\"\n", "max-processes", "a bad value"),
        ("cpu.max = 1\n", "cpu.max", "a key with no host default"),
        ("max-processes = = 3\n", "defaults.toml", "invalid TOML"),
    ] {
        std::fs::write(&defaults, text).unwrap();
        let r = env.run(&["boot", "d6"]);
        let state = if env.root().join("zones/d6/runtime.json").exists() {
            "running"
        } else {
            "not running"
        };
        t.row(
            format!("defaults.toml with {what} ({})", text.trim()),
            "boot fails naming defaults.toml and the key",
            r.code != 0
                && r.stderr.contains("defaults.toml")
                && r.stderr.contains(key)
                && state != "running",
            format!("exit {} state {state} {}", r.code, r.stderr),
        );
    }
    std::fs::write(&defaults, "max-processes = 64\n").unwrap();
    t.finish();
}

// ---------------------------------------------------------------------------------
// Class 10: locks and host binaries.

/// Harmless probes of /proc/1/exe: chmod to its mode, chown to its owner, open for
/// appending (nothing written), truncate to its size, remove a user xattr it does not
/// have (ENODATA would mean the zone may write its xattrs).
const EXE_PROBES: &str = r#"
import os
p = "/proc/1/exe"
st = os.stat(p)
r = ["exe=%d:%d" % (st.st_dev, st.st_ino), "ro=%d" % (os.statvfs(p).f_flag & 1)]
def t(name, f):
    try:
        f()
        r.append(name + "=ALLOWED")
    except OSError as e:
        r.append("%s=errno%d" % (name, e.errno))
t("chmod", lambda: os.chmod(p, st.st_mode & 0o7777))
t("chown", lambda: os.chown(p, st.st_uid, st.st_gid))
t("write", lambda: os.close(os.open(p, os.O_WRONLY | os.O_APPEND)))
t("truncate", lambda: os.truncate(p, st.st_size))
t("xattr", lambda: os.removexattr(p, "user.warren-probe"))
print(" ".join(r))
"#;

/// Every process of the zone (as it sees them) that runs one of the files whose
/// dev:ino are in argv: whether that file sits on a read-only mount.
const FIND_HOST_BINARIES: &str = r#"
import os, sys
want = set(sys.argv[1:])
found = []
for n in os.listdir("/proc"):
    if not n.isdigit():
        continue
    p = "/proc/%s/exe" % n
    try:
        st = os.stat(p)
        ro = os.statvfs(p).f_flag & 1
    except OSError:
        continue
    if "%d:%d" % (st.st_dev, st.st_ino) in want:
        found.append("%s:ro=%d" % (n, ro))
print("found=" + ",".join(found))
"#;

#[test]
fn class10_locks_and_host_binaries() {
    require_root();
    require_tool(
        "setpriv",
        "util-linux: it runs probes as an unprivileged host user",
    );
    require_tool("flock", "util-linux: the lock probe");
    let env = Env::new();
    std::fs::set_permissions(env.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut t = Table::new("10 locks/bins");
    env.host_zone("lk", &[]);
    env.host_zone("lkn", &["userns=false"]);
    env.ok(&["boot", "lk"]);
    env.ok(&["boot", "lkn"]);
    let locks = env.root().join("locks");
    let root = env.root().display().to_string();

    let mut modes = Vec::new();
    let dmode = std::fs::metadata(&locks).unwrap().mode() & 0o7777;
    let mut ok = dmode == 0o700;
    for e in std::fs::read_dir(&locks).unwrap().flatten() {
        let m = e.metadata().unwrap().mode() & 0o7777;
        ok &= m == 0o600;
        modes.push(format!("{}:{m:o}", e.file_name().to_string_lossy()));
    }
    t.row(
        "lock files and their directory",
        "files 0600 in a 0700 dir",
        ok && !modes.is_empty(),
        format!("dir {dmode:o}; {}", modes.join(" ")),
    );
    let r = as_nobody(&format!(
        "flock -n {root}/locks/zone-lk.lock true && echo REACHED"
    ));
    t.row(
        "host user flocks zone-lk.lock",
        "EACCES",
        denied(&r),
        summary(&r),
    );
    let r = as_nobody(&format!(
        "flock -n {root}/locks/userns-ranges.lock true && echo REACHED"
    ));
    t.row(
        "host user flocks userns-ranges.lock",
        "EACCES",
        denied(&r),
        summary(&r),
    );
    let r = as_nobody(&format!("flock -n {root}/locks true && echo REACHED"));
    t.row(
        "host user flocks the locks directory itself",
        "EACCES",
        denied(&r),
        summary(&r),
    );
    // A lock file and directory left open by an older warren.
    std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        locks.join("zone-lk.lock"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let r = as_nobody(&format!(
        "flock -s -n {root}/locks/zone-lk.lock true && echo opened-while-open"
    ));
    assert!(
        r.stdout.contains("opened-while-open"),
        "control: with 0755/0644 a host user can open the lock ({r:?})"
    );
    env.ok(&["halt", "lk", "--timeout", "1"]);
    env.ok(&["boot", "lk"]);
    let fm = std::fs::metadata(locks.join("zone-lk.lock"))
        .unwrap()
        .mode()
        & 0o7777;
    let dm = std::fs::metadata(&locks).unwrap().mode() & 0o7777;
    t.row(
        "0644 lock file in a 0755 locks dir (older warren), then halt + boot",
        "tightened to 0600 / 0700",
        fm == 0o600 && dm == 0o700,
        format!("file {fm:o} dir {dm:o}"),
    );

    // Host binaries.
    let warren = PathBuf::from(WARREN);
    let init = warren.with_file_name("warren-init");
    let mut bins = vec![warren.clone()];
    if init.exists() {
        bins.push(init.clone());
    }
    let snap = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.mode(), m.uid(), m.gid(), sha256(p))
    };
    let before: Vec<_> = bins.iter().map(|b| snap(b)).collect();
    let ids: Vec<String> = bins
        .iter()
        .map(|b| {
            let m = std::fs::metadata(b).unwrap();
            format!("{}:{}", m.dev(), m.ino())
        })
        .collect();

    for (zone, mode) in [("lk", "default zone"), ("lkn", "userns=false zone")] {
        let r = env.run(&["login", zone, "--", "python3", "-c", EXE_PROBES]);
        let rep = r.stdout.clone();
        let denied_as =
            |k: &str, allowed: &[&str]| field(&rep, k).is_some_and(|v| allowed.contains(&v));
        t.row(
            format!("{mode}: chmod /proc/1/exe (to its own mode)"),
            "EROFS/EPERM/EACCES",
            denied_as("chmod", &["errno30", "errno1", "errno13"]),
            format!("{:?} {}", field(&rep, "chmod"), r.stderr),
        );
        t.row(
            format!("{mode}: chown /proc/1/exe (to its own owner)"),
            "EROFS/EPERM/EACCES (EINVAL: unmapped owner)",
            denied_as("chown", &["errno30", "errno1", "errno13", "errno22"]),
            format!("{:?}", field(&rep, "chown")),
        );
        t.row(
            format!("{mode}: open /proc/1/exe for writing"),
            "ETXTBSY/EROFS/EACCES",
            denied_as("write", &["errno26", "errno30", "errno13", "errno1"]),
            format!("{:?}", field(&rep, "write")),
        );
        t.row(
            format!("{mode}: truncate /proc/1/exe (to its own size)"),
            "ETXTBSY/EROFS/EACCES",
            denied_as("truncate", &["errno26", "errno30", "errno13", "errno1"]),
            format!("{:?}", field(&rep, "truncate")),
        );
        t.row(
            format!("{mode}: change /proc/1/exe's xattrs (file capabilities)"),
            "EROFS/EPERM (ENODATA would mean writable)",
            denied_as("xattr", &["errno30", "errno1", "errno13"]),
            format!("{:?}", field(&rep, "xattr")),
        );
        let mut args = vec!["login", zone, "--", "python3", "-c", FIND_HOST_BINARIES];
        args.extend(ids.iter().map(String::as_str));
        let r = env.run(&args);
        let found = field(&r.stdout, "found").unwrap_or("?").to_string();
        t.row(
            format!("{mode}: processes running a host warren binary, seen from inside"),
            "none, or only through a read-only mount",
            r.code == 0
                && found
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .all(|s| s.ends_with("ro=1")),
            format!("found={found} {}", r.stderr),
        );
    }

    // The OCI runtime: a created container's process 1 is warren itself, waiting for
    // `start`; a process exec'd into the container meanwhile probes its /proc/1/exe
    // (chmod to its own mode, open for appending: harmless if they got through).
    let oci = Oci::new();
    let (code, out) = created_container_exec(
        &oci,
        "exe-wait",
        "echo exe=$(readlink /proc/1/exe); m=$(stat -L -c %a /proc/1/exe) && chmod $m /proc/1/exe && echo CHMOD-ALLOWED; : >> /proc/1/exe && echo WRITE-ALLOWED; echo probed",
        None,
    );
    t.row(
        "oci exec into a created container: chmod / open for writing /proc/1/exe",
        "EPERM/EACCES/EROFS/ETXTBSY (the host binary is not reachable)",
        !out.contains("ALLOWED") && (out.contains("probed") || code != 0),
        format!("exit {code} {out}"),
    );
    drop(oci);

    let after: Vec<_> = bins.iter().map(|b| snap(b)).collect();
    t.row(
        "host warren and warren-init after the probes",
        "mode, owner and sha256 unchanged",
        before == after,
        bins.iter()
            .zip(&after)
            .map(|(b, a)| {
                format!(
                    "{}: {:o} {}:{} {}",
                    b.file_name().unwrap().to_string_lossy(),
                    a.0 & 0o7777,
                    a.1,
                    a.2,
                    &a.3[..12]
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    );
    env.ok(&["halt", "lk", "lkn", "--timeout", "1"]);
    let b1 = env.run(&["boot", "lk", "lkn"]);
    let r1 = env.run(&["login", "lk", "--", "echo", "alive"]);
    let r2 = env.run(&["login", "lkn", "--", "echo", "alive"]);
    t.row(
        "later boots of both zones",
        "boot and login work",
        b1.code == 0 && r1.stdout.contains("alive") && r2.stdout.contains("alive"),
        format!("{} {} {}", summary(&b1), summary(&r1), summary(&r2)),
    );
    t.finish();
}
