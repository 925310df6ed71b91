//! End-to-end lifecycle on the real kernel: templates, create, install, clone, boot,
//! login, halt, uninstall, delete; isolation checks from inside; cleanup checks.

mod common;

use common::{alive, host_mounts_under, Env};

/// Walk a zone through every state and check what it looks like from inside and out.
fn lifecycle(env: &Env, template_args: &[&str], zone: &str) {
    env.ok(template_args);
    env.ok(&["create", zone, "--template", template_args[2]]);
    assert_eq!(env.state(zone), "configured");
    env.run(&["boot", zone]).fails(
        4,
        &format!("zone '{zone}' is configured; install it before boot"),
    );
    env.ok(&["install", zone]);
    assert_eq!(env.state(zone), "installed");
    let r = env.ok(&["boot", zone]);
    assert!(r.stdout.contains("booted"), "{}", r.stdout);
    assert_eq!(env.state(zone), "running");
    // Idempotent: booting a running zone succeeds and says so.
    let again = env.ok(&["boot", zone]);
    assert!(again.stdout.contains("already running"), "{}", again.stdout);

    // Inside: hostname, PID 1 is init, read-only shared layers, no host processes.
    let r = env.ok(&["login", zone, "--", "hostname"]);
    assert_eq!(r.stdout.trim(), zone);
    let r = env.sh(zone, "cat /proc/1/cmdline | tr '\\0' ' '").ok();
    assert!(
        r.stdout.starts_with("warren-init"),
        "pid 1 is {:?}",
        r.stdout
    );
    let r = env.sh(zone, "ls /proc | grep -c '^[0-9]'").ok();
    let visible: usize = r.stdout.trim().parse().unwrap();
    assert!(
        visible <= 5,
        "the zone sees {visible} processes; host processes leak in"
    );
    let me = std::process::id();
    let r = env
        .sh(
            zone,
            &format!("test -e /proc/{me} && echo visible || echo hidden"),
        )
        .ok();
    assert_eq!(
        r.stdout.trim(),
        "hidden",
        "the test process (host pid {me}) is visible"
    );
    let r = env.sh(zone, "cat /proc/net/dev | grep -c :").ok();
    assert_eq!(r.stdout.trim(), "1", "a net=none zone has only lo");

    // Zones outlive the command that booted them; halt cleans everything up.
    let pid = env.init_pid(zone);
    assert!(alive(pid));
    let cgroups = env.cgroup_dirs(zone);
    assert!(!cgroups.is_empty());
    env.ok(&["halt", zone]);
    assert_eq!(env.state(zone), "installed");
    assert!(!alive(pid), "init {pid} survived halt");
    for (_, d) in &cgroups {
        assert!(!d.exists(), "cgroup {} survived halt", d.display());
    }
    assert!(
        env.group_dirs().is_empty(),
        "group cgroups left: {:?}",
        env.group_dirs()
    );
    assert!(
        host_mounts_under(env.root()).is_empty(),
        "host mounts left: {:?}",
        host_mounts_under(env.root())
    );
    let again = env.ok(&["halt", zone]);
    assert!(again.stdout.contains("not running"), "{}", again.stdout);

    env.run(&["delete", zone])
        .fails(4, "uninstall it before delete");
    env.ok(&["uninstall", zone]);
    assert_eq!(env.state(zone), "configured");
    env.ok(&["delete", zone]);
    assert_eq!(env.state(zone), "absent");
    env.ok(&["template", "delete", template_args[2]]);
}

#[test]
fn host_template_lifecycle() {
    let env = Env::new();
    lifecycle(
        &env,
        &["template", "create", "host", "--from", "host"],
        "web1",
    );
    // /usr is the host's, read-only.
    env.host_zone("ro", &[]);
    env.ok(&["boot", "ro"]);
    env.sh("ro", "touch /usr/warren-test")
        .fails(1, "Read-only file system");
    let r = env.sh("ro", "test -x /usr/bin/env && echo shared").ok();
    assert_eq!(r.stdout.trim(), "shared");
    // Writes elsewhere land in the zone's private layer only.
    env.sh("ro", "echo private > /etc/motd").ok();
    assert!(env.root().join("zones/ro/upper/etc/motd").exists());
    assert!(!env.root().join("templates/host/root/etc/motd").exists());
}

#[test]
fn busybox_template_lifecycle() {
    common::require_busybox();
    let env = Env::new();
    lifecycle(&env, &["template", "create", "bb", "--busybox"], "bb1");
}

#[test]
fn clones_are_independent() {
    let env = Env::new();
    env.host_zone("base", &["memory.max=64M"]);
    env.ok(&["clone", "base", "c1"]);
    env.ok(&["clone", "base", "c2"]);
    assert_eq!(env.state("c1"), "installed");
    // The clone keeps the source's config.
    let cfg = env.ok(&["config", "show", "c1"]).stdout;
    assert!(cfg.contains("max = \"64M\""), "{cfg}");
    env.ok(&["boot", "base", "c1", "c2"]);
    env.sh("c1", "echo mine > /root/only-c1").ok();
    env.sh("c1", "cat /root/only-c1").ok();
    for other in ["base", "c2"] {
        let r = env
            .sh(other, "test -e /root/only-c1 && echo seen || echo absent")
            .ok();
        assert_eq!(r.stdout.trim(), "absent", "{other} sees c1's file");
    }
    // A running zone is cloned frozen (issue 16, docs/snapshots.md) and runs on.
    env.sh("base", "echo at-clone > /root/base-file").ok();
    env.ok(&["clone", "base", "c3"]);
    assert_eq!(env.state("base"), "running");
    env.ok(&["boot", "c3"]);
    let r = env.sh("c3", "cat /root/base-file").ok();
    assert_eq!(r.stdout.trim(), "at-clone");
    env.ok(&["halt", "--all"]);
    // Disk per untouched clone: tens of KiB, not MiB.
    let du = warren::fsutil::disk_usage(&env.root().join("zones/c2")).unwrap();
    assert!(du < 64 * 1024, "an untouched clone takes {du} bytes");
}

#[test]
fn login_propagates_exit_status_and_runs_in_the_zone_cgroup() {
    let env = Env::new();
    env.host_zone("z", &[]);
    env.ok(&["boot", "z"]);
    let r = env.sh("z", "exit 7");
    assert_eq!(r.code, 7);
    let r = env.sh("z", "cat /proc/self/cgroup | grep memory").ok();
    assert!(
        r.stdout.trim().ends_with(":/"),
        "cgroup namespace root: {}",
        r.stdout
    );
    // The init joined its cgroups (on v1 by writing itself into `tasks`) before it
    // made its cgroup namespace: its own cgroup is that namespace's root.
    let init_at_root = |zone: &str| {
        let r = env.sh(zone, "grep -E 'memory|pids' /proc/1/cgroup").ok();
        assert_eq!(r.stdout.lines().count(), 2, "{zone}: {}", r.stdout);
        assert!(
            r.stdout.lines().all(|l| l.ends_with(":/")),
            "{zone}: the init's cgroups: {}",
            r.stdout
        );
    };
    init_at_root("z");
    // The same with the parent moving it by pid (the measurement switch).
    env.host_zone("z2", &[]);
    let out = env
        .cmd()
        .env("WARREN_CGROUP_SELF_JOIN", "off")
        .args(["boot", "z2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "boot z2: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    init_at_root("z2");
    env.ok(&["halt", "z2"]);
    env.run(&["login", "z", "--", "no-such-command"])
        .fails(127, "command not found");
    env.ok(&["halt", "z"]);
    env.run(&["login", "z", "--", "true"])
        .fails(125, "boot it before login");
}

#[test]
fn services_run_under_warren_init_and_stop_on_halt() {
    let env = Env::new();
    env.host_zone(
        "svc",
        &["services=[\"sleep 1000\", [\"/bin/sleep\", \"999\"]]"],
    );
    env.ok(&["boot", "svc"]);
    // init starts the services just after boot returns: give it a moment.
    let mut seen = String::new();
    for _ in 0..50 {
        seen = env.sh("svc", "ps -eo args").ok().stdout;
        if seen.contains("sleep 1000") && seen.contains("/bin/sleep 999") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        seen.contains("sleep 1000") && seen.contains("/bin/sleep 999"),
        "{seen}"
    );
    // Services do not inherit init's blocked signals.
    let r = env
        .sh(
            "svc",
            "for p in $(pgrep -x sleep); do grep SigBlk /proc/$p/status; done",
        )
        .ok();
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);
    assert!(
        r.stdout.lines().all(|l| l.ends_with("0000000000000000")),
        "{}",
        r.stdout
    );
    let r = env.ok(&["halt", "svc", "--timeout", "5"]);
    assert!(
        r.stdout.contains("halted") && !r.stdout.contains("killed"),
        "{}",
        r.stdout
    );
}

/// At halt a process that joined the zone (`warren exec`: not a child of its init)
/// gets SIGTERM as the services do; with its init alone, a zone halts gracefully too
/// (init then skips the signal: runtime::init's shutdown).
#[test]
fn halt_signals_processes_that_joined_and_an_init_alone_just_exits() {
    let env = Env::new();
    env.host_zone("jn", &[]);
    env.ok(&["boot", "jn"]);
    let mut joined = env
        .cmd()
        .args([
            "exec",
            "jn",
            "--",
            "sh",
            "-c",
            "trap 'echo term > /tmp/got-term; exit 0' TERM; echo up > /tmp/up; while :; do sleep 0.1; done",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = env.root().join("zones/jn/upper/tmp/up");
    for _ in 0..100 {
        if up.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(up.exists(), "the joined process never started");
    let r = env.ok(&["halt", "jn", "--timeout", "5"]);
    assert!(!r.stdout.contains("killed"), "{}", r.stdout);
    let _ = joined.wait();
    let got = std::fs::read_to_string(env.root().join("zones/jn/upper/tmp/got-term"))
        .expect("the joined process got no SIGTERM at halt");
    assert_eq!(got.trim(), "term");
    env.ok(&["boot", "jn"]);
    let r = env.ok(&["halt", "jn", "--timeout", "5"]);
    assert!(!r.stdout.contains("killed"), "{}", r.stdout);
}

#[test]
fn custom_init_that_ignores_sigterm_is_killed_after_the_timeout() {
    let env = Env::new();
    env.host_zone("stubborn", &["init=[\"/bin/sleep\", \"infinity\"]"]);
    env.ok(&["boot", "stubborn"]);
    let pid = env.init_pid("stubborn");
    let r = env.ok(&["halt", "stubborn", "--timeout", "1"]);
    assert!(
        r.stdout.contains("killed after the stop timeout"),
        "{}",
        r.stdout
    );
    assert!(!alive(pid));
    assert!(env.group_dirs().is_empty());
}

#[test]
fn reboot_gives_a_new_init() {
    let env = Env::new();
    env.host_zone("r", &[]);
    env.run(&["reboot", "r"]).fails(4, "not running");
    env.ok(&["boot", "r"]);
    let first = env.init_pid("r");
    env.ok(&["reboot", "r"]);
    let second = env.init_pid("r");
    assert_ne!(first, second);
    assert!(!alive(first) && alive(second));
}

#[test]
fn tar_and_dir_templates() {
    common::require_busybox();
    let env = Env::new();
    env.ok(&["template", "create", "bb", "--busybox"]);
    let root = env.root().join("templates/bb/root");
    let tarball = env.root().join("bb.tar.gz");
    let st = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&tarball)
        .arg("-C")
        .arg(&root)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    env.ok(&[
        "template",
        "create",
        "fromtar",
        "--from-tar",
        tarball.to_str().unwrap(),
    ]);
    env.ok(&[
        "template",
        "create",
        "fromdir",
        "--from-dir",
        root.to_str().unwrap(),
    ]);
    for t in ["fromtar", "fromdir"] {
        let z = format!("z-{t}");
        env.ok(&["create", &z, "--template", t]);
        env.ok(&["install", &z]);
        env.ok(&["boot", &z]);
        let r = env.sh(&z, "echo ok from $(hostname)").ok();
        assert_eq!(r.stdout.trim(), format!("ok from {z}"));
    }
    // A template in use cannot be deleted.
    env.run(&["template", "delete", "fromtar"])
        .fails(6, "used by zone(s) z-fromtar");
    let list = env.ok(&["template", "list", "--json"]).stdout;
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
}

#[test]
fn interactive_login_gets_a_pty_from_the_zone() {
    let env = Env::new();
    env.host_zone("tty", &[]);
    env.ok(&["boot", "tty"]);
    // script(1) gives warren a terminal on stdin and stdout, as a person's shell would.
    let cmd = format!("{} login tty -- /bin/sh -c 'tty; exit 3'", common::WARREN);
    let out = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("WARREN_ROOT", env.root())
        .env("WARREN_RUN_DIR", env.root().join("run"))
        .output()
        .expect("script(1) from bsdutils");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("/dev/pts/0"),
        "no pty of the zone's own devpts: {stdout:?}"
    );
    assert_eq!(out.status.code(), Some(3), "{stdout}");
}

/// Regression: warren-init run by hand outside a zone once took SIGTERM as a shutdown
/// and sent kill(-1, SIGTERM) to every process on the host. It must refuse to start.
#[test]
fn warren_init_refuses_to_run_outside_a_zone() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warren-init"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only runs as PID 1"));
}
