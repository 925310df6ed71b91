//! `warren login` as a full exec (issue 15, item 3), end to end as root on real zones:
//! `-e`, `-u`, `-w`, the zone's `env` key, the aliases `exec` and `shell`, exit codes
//! 125/126/127 apart from the command's own, and a pty (`-t`) whose size follows the
//! caller's terminal when it is resized (SIGWINCH), driven from a pty pair the test
//! opens itself.

mod common;

use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{ChildGuard, Env};

#[test]
fn user_env_cwd_and_the_zones_env() {
    let env = Env::new();
    env.host_zone(
        "lx-opts",
        &["env=[\"LANG=C.UTF-8\", \"FROM_ZONE=zone\", \"OVER=zone\"]"],
    );
    env.ok(&["boot", "lx-opts"]);
    // The defaults: root, in / (a login shell starts at home), with the zone's env.
    let r = env.ok(&[
        "login",
        "lx-opts",
        "--",
        "/bin/sh",
        "-c",
        "id -u; id -g; pwd; echo $LANG $FROM_ZONE $OVER",
    ]);
    assert_eq!(r.stdout, "0\n0\n/\nC.UTF-8 zone zone\n");
    // -u NAME (from the zone's /etc/passwd), -w, -e over the zone's env, and -e KEY
    // taking the caller's value.
    let out = env
        .cmd()
        .args([
            "exec",
            "-u",
            "nobody",
            "-w",
            "/tmp",
            "-e",
            "OVER=cli",
            "-e",
            "CALLER_VAR",
            "lx-opts",
            "/bin/sh",
            "-c",
            "id -un; id -u; pwd; echo $OVER $FROM_ZONE $CALLER_VAR $USER",
        ])
        .env("CALLER_VAR", "from-caller")
        .output()
        .unwrap();
    let r = (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(r.0, 0, "{r:?}");
    assert_eq!(r.1, "nobody\n65534\n/tmp\ncli zone from-caller nobody\n");
    // UID:GID that /etc/passwd does not list.
    let r = env.ok(&[
        "exec",
        "-u",
        "4321:99",
        "lx-opts",
        "/bin/sh",
        "-c",
        "id -u; id -g; pwd",
    ]);
    assert_eq!(r.stdout, "4321\n99\n/\n");
    // A user that holds no capability: it cannot write root's files.
    let r = env.run(&[
        "exec",
        "-u",
        "nobody",
        "lx-opts",
        "/bin/sh",
        "-c",
        "echo x > /etc/lx-opts-probe",
    ]);
    assert!(
        r.code != 0 && r.stderr.contains("Permission denied"),
        "{r:?}"
    );
    // Bad -u, -w and -e are warren's errors: 125, naming the option.
    env.run(&["exec", "-u", "no-such-user", "lx-opts", "true"])
        .fails(125, "no user \"no-such-user\" in the zone's /etc/passwd");
    env.run(&["exec", "-w", "/no/such/dir", "lx-opts", "true"])
        .fails(125, "-w /no/such/dir");
    env.run(&["exec", "-e", "=x", "lx-opts", "true"])
        .fails(125, "-e \"=x\"");
    // `shell` is a login shell; with stdin closed it exits at once.
    let out = env
        .cmd()
        .args(["shell", "lx-opts"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The zone's env reaches its init (and services) too.
    let pid = env.init_pid("lx-opts");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(
        environ.split('\0').any(|e| e == "LANG=C.UTF-8"),
        "{environ}"
    );
}

#[test]
fn exit_codes_never_collide_with_the_commands() {
    let env = Env::new();
    env.host_zone("lx-codes", &[]);
    env.ok(&["boot", "lx-codes"]);
    let code = |args: &[&str]| env.run(args).code;
    // The command's own statuses pass through, 3 included.
    assert_eq!(
        code(&["login", "lx-codes", "--", "/bin/sh", "-c", "exit 3"]),
        3
    );
    assert_eq!(
        code(&["exec", "lx-codes", "/bin/sh", "-c", "exit 125"]),
        125
    );
    assert_eq!(
        code(&["exec", "lx-codes", "/bin/sh", "-c", "kill -9 $$"]),
        137
    );
    // warren's own: a missing zone (3 for every other verb), a halted zone, usage.
    env.run(&["login", "lx-no-such-zone", "--", "true"])
        .fails(125, "does not exist");
    env.run(&["exec", "--no-such-flag", "lx-codes", "true"])
        .fails(125, "--no-such-flag");
    // Not found (127), found but not executable (126).
    env.run(&["exec", "lx-codes", "no-such-command-here"])
        .fails(127, "command not found");
    env.run(&["exec", "lx-codes", "/no/such/program"])
        .fails(127, "no such file");
    env.run(&["exec", "lx-codes", "/etc/passwd"])
        .fails(126, "Permission denied");
    env.ok(&["halt", "lx-codes"]);
    env.run(&["exec", "lx-codes", "true"]).fails(125, "boot it");
}

/// A pty pair of the test's own; the slave's path and the master.
struct Pty {
    master: std::fs::File,
    slave: std::path::PathBuf,
}

impl Pty {
    fn open() -> Pty {
        let (master, slave) = warren_sys::pty::open_master().expect("opening a pty pair");
        Pty { master, slave }
    }

    fn set_size(&self, rows: u32, cols: u32) {
        let st = std::process::Command::new("stty")
            .arg("-F")
            .arg(&self.slave)
            .args(["rows", &rows.to_string(), "cols", &cols.to_string()])
            .status()
            .expect("running stty");
        assert!(st.success(), "stty -F {} failed", self.slave.display());
    }

    /// Read from the master until `needle` appears (or panic after `secs`).
    fn expect(&self, seen: &mut String, needle: &str, secs: u64) {
        let start = Instant::now();
        let fd = self.master.as_raw_fd();
        let mut buf = [0u8; 4096];
        while !seen.contains(needle) {
            assert!(
                start.elapsed() < Duration::from_secs(secs),
                "no {needle:?} on the pty after {secs} s; got {seen:?}"
            );
            let ready = warren_sys::pty::poll_in(&[fd], 100).unwrap();
            if ready[0] & warren_sys::libc::POLLIN != 0 {
                let n = warren_sys::pty::read_fd(fd, &mut buf).unwrap_or(0);
                seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
    }
}

#[test]
fn the_pty_follows_the_callers_window_size() {
    let env = Env::new();
    env.host_zone("lx-pty", &[]);
    env.ok(&["boot", "lx-pty"]);
    let pty = Pty::open();
    pty.set_size(31, 91);
    let slave = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(&pty.slave)
            .unwrap()
    };
    // setsid -c: the slave becomes warren's controlling terminal, so resizing it sends
    // warren SIGWINCH, as a terminal emulator's resize does.
    let mut cmd = std::process::Command::new("setsid");
    cmd.arg("-c")
        .arg(common::WARREN)
        .args(["login", "-t", "lx-pty", "--", "/bin/sh", "-c"])
        .arg("tty; stty size; read x; stty size; exit 7")
        .env("WARREN_ROOT", env.root())
        .env("WARREN_OCI_ROOT", env.root().join("oci"))
        .stdin(slave())
        .stdout(slave())
        .stderr(slave());
    let mut child = ChildGuard(cmd.spawn().unwrap());
    let mut seen = String::new();
    pty.expect(&mut seen, "31 91", 20);
    assert!(
        seen.contains("/dev/pts/"),
        "the command's stdin is a pty: {seen:?}"
    );
    pty.set_size(42, 123);
    // Let warren take the SIGWINCH before the line that makes the command look again.
    std::thread::sleep(Duration::from_millis(300));
    (&pty.master).write_all(b"\n").unwrap();
    pty.expect(&mut seen, "42 123", 20);
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(7), "{seen:?}");
}

#[test]
fn tty_flags_force_or_refuse_a_pty() {
    let env = Env::new();
    env.host_zone("lx-tty", &[]);
    env.ok(&["boot", "lx-tty"]);
    // No terminal here: pipes by default, a pty with -t.
    let r = env.ok(&["exec", "lx-tty", "/bin/sh", "-c", "tty || true"]);
    assert_eq!(r.stdout.trim(), "not a tty");
    let r = env.ok(&["exec", "-it", "lx-tty", "/bin/sh", "-c", "tty"]);
    assert!(r.stdout.starts_with("/dev/pts/"), "{r:?}");
    // On a terminal, -T still gives pipes.
    let pty = Pty::open();
    let slave = || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(&pty.slave)
            .unwrap()
    };
    let mut cmd = env.cmd();
    cmd.args([
        "exec",
        "-T",
        "lx-tty",
        "/bin/sh",
        "-c",
        "tty || echo piped-$?",
    ])
    .stdin(slave())
    .stdout(slave())
    .stderr(slave());
    let mut child = ChildGuard(cmd.spawn().unwrap());
    let mut seen = String::new();
    pty.expect(&mut seen, "piped-1", 20);
    assert!(child.0.wait().unwrap().success());
}
