//! Day-2 operations on real zones: live limits (the cgroup files read back, a refused
//! change rolled back), an init that dies at boot reported with its status, OOM kills
//! counted, `logs -f` following the console, `events --follow` streaming while other
//! commands run, and `--json` from every changing verb.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::Env;

/// A `warren` child reading its stdout line by line; killed (by its pid) on drop.
struct Streaming {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Streaming {
    fn start(env: &Env, args: &[&str]) -> Streaming {
        let mut child = env
            .cmd()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Streaming { child, lines }
    }

    /// The next line holding `needle`, within 10 s; lines before it are dropped.
    #[track_caller]
    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return l,
                Ok(l) => seen.push(l),
                Err(_) => break,
            }
        }
        panic!("no line with {needle:?} within 10 s; saw {seen:?}");
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn list_entry(env: &Env, zone: &str) -> serde_json::Value {
    let v = json(&env.ok(&["--json", "list"]).stdout);
    v.as_array()
        .unwrap()
        .iter()
        .find(|z| z["name"] == zone)
        .cloned()
        .unwrap_or_else(|| panic!("{zone} not listed: {v}"))
}

#[test]
fn config_set_changes_a_running_zones_cgroups_at_once() {
    let env = Env::new();
    env.host_zone("lv", &["memory.max=256M", "memory.swap=0"]);
    env.ok(&["boot", "lv"]);
    let pid = env.init_pid("lv");
    let r = env.ok(&[
        "config",
        "set",
        "lv",
        "memory.max=128M",
        "cpu.max=0.25",
        "max-processes=40",
        "hostname=other",
    ]);
    assert!(
        r.stdout
            .contains("cpu.max, max-processes, memory.max applied to the running zone"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("hostname saved; needs a reboot"),
        "{}",
        r.stdout
    );
    assert_eq!(
        env.cgroup_file("lv", "memory", "memory.limit_in_bytes"),
        (128u64 << 20).to_string()
    );
    assert_eq!(env.cgroup_file("lv", "pids", "pids.max"), "40");
    // Booted without a CPU limit: the cpu cgroup was made and init moved into it.
    assert_eq!(env.cgroup_file("lv", "cpu", "cpu.cfs_quota_us"), "25000");
    let (_, cpu_dir) = env
        .cgroup_dirs("lv")
        .into_iter()
        .find(|(c, _)| c.split(',').any(|x| x == "cpu"))
        .unwrap();
    let procs = std::fs::read_to_string(cpu_dir.join("cgroup.procs")).unwrap();
    assert!(
        procs.lines().any(|l| l.trim() == pid.to_string()),
        "init {pid} is not in {}: {procs}",
        cpu_dir.display()
    );

    // --live-only: the zone changes, the config does not; list shows both values.
    env.ok(&["config", "set", "lv", "--live-only", "memory.max=64M"]);
    assert_eq!(
        env.cgroup_file("lv", "memory", "memory.limit_in_bytes"),
        (64u64 << 20).to_string()
    );
    let show = env.ok(&["config", "show", "lv"]).stdout;
    assert!(show.contains("max = \"128M\""), "{show}");
    assert!(
        show.contains("# in force: memory.limit_in_bytes = 67108864 (configured: 134217728)"),
        "{show}"
    );
    let entry = list_entry(&env, "lv");
    let drift: Vec<&serde_json::Value> = entry["in_force"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f.get("configured").is_some())
        .collect();
    // memory.limit_in_bytes, and memsw's (memory.swap=0 makes it equal).
    assert!(
        drift.iter().any(|f| f["file"] == "memory.limit_in_bytes"
            && f["in_force"] == "67108864"
            && f["configured"] == "134217728"),
        "{entry}"
    );
    assert!(drift
        .iter()
        .all(|f| f["file"].as_str().unwrap().starts_with("memory.")));
    let info = env.ok(&["info", "lv"]).stdout;
    assert!(
        info.contains("in force:")
            && info.contains("memory.limit_in_bytes=67108864 (configured 134217728)"),
        "{info}"
    );
    let verbose = env.ok(&["list", "-v"]).stdout;
    assert!(
        verbose.contains("[in force memory.limit_in_bytes=67108864"),
        "{verbose}"
    );
    env.run(&["config", "set", "lv", "--live-only", "hostname=x"])
        .fails(5, "hostname cannot change while the zone runs");
    // --live-only with the config's own value puts the zone back in line with it.
    env.ok(&["config", "set", "lv", "--live-only", "memory.max=128M"]);
    assert_eq!(
        env.cgroup_file("lv", "memory", "memory.limit_in_bytes"),
        (128u64 << 20).to_string()
    );
    env.ok(&["config", "set", "lv", "--live-only", "memory.max=64M"]);

    // disk.max is not live, and the answer says why and what to do.
    let r = env.ok(&["config", "set", "lv", "disk.max=1G"]);
    assert!(
        r.stdout.contains("disk.max saved; needs a reboot")
            && r.stdout.contains("uninstall and install the zone"),
        "{}",
        r.stdout
    );
    env.ok(&["config", "unset", "lv", "disk.max"]);

    // --next-boot: the config changes, the zone does not.
    env.ok(&["config", "set", "lv", "--next-boot", "max-processes=60"]);
    assert_eq!(env.cgroup_file("lv", "pids", "pids.max"), "40");

    // A change the kernel refuses changes nothing: 40 MiB of anonymous memory held by
    // a process (not reclaimable without swap, and memory.swap=0 caps memory + swap)
    // cannot fit in 16M. (/dev/shm is on the zone's disk now, reclaimable page cache.)
    env.ok(&["config", "set", "lv", "memory.max=128M", "max-processes=40"]);
    env.sh(
        "lv",
        "nohup perl -e '$x = \"x\" x (40 << 20); open(F, \">/tmp/held\"); close F; sleep 120' \
         >/dev/null 2>&1 & while [ ! -e /tmp/held ]; do sleep 0.05; done",
    )
    .ok();
    let before = std::fs::read_to_string(env.root().join("zones/lv/config.toml")).unwrap();
    let r = env.run(&["config", "set", "lv", "max-processes=77", "memory.max=16M"]);
    assert_ne!(
        r.code, 0,
        "a 16M cap below 40M of anonymous memory was accepted: {r:?}"
    );
    assert!(r.stderr.contains("none was changed"), "{}", r.stderr);
    assert_eq!(
        env.cgroup_file("lv", "pids", "pids.max"),
        "40",
        "not rolled back"
    );
    assert_eq!(
        env.cgroup_file("lv", "memory", "memory.limit_in_bytes"),
        (128u64 << 20).to_string()
    );
    let after = std::fs::read_to_string(env.root().join("zones/lv/config.toml")).unwrap();
    assert_eq!(
        before, after,
        "the config changed although the zone did not"
    );

    // Unset on a running zone goes back to the default cap (config::defaults).
    env.ok(&["config", "unset", "lv", "max-processes"]);
    assert_eq!(env.cgroup_file("lv", "pids", "pids.max"), "1024");
    let ev = env.ok(&["events", "--type", "config"]).stdout;
    assert!(ev.contains("config-changed"), "{ev}");
}

#[test]
fn an_init_that_dies_at_boot_is_reported_with_its_status_and_console() {
    let env = Env::new();
    env.host_zone("f", &["init=/bin/false"]);
    // A watch long enough for a loaded host (the default is 150 ms).
    env.run(&["boot", "f", "--watch", "5000"])
        .fails(1, "its init exited with status 1 right after starting");
    assert_eq!(env.state("f"), "installed");
    let text = env.ok(&["list"]).stdout;
    assert!(text.contains("installed, exited (status 1)"), "{text}");
    let entry = list_entry(&env, "f");
    assert_eq!(entry["last_run"]["status"], 1, "{entry}");

    // What init printed before dying is quoted, and kept for `warren logs`.
    env.ok(&[
        "config",
        "set",
        "f",
        r#"init=["/bin/sh", "-c", "echo going-down-now; exit 3"]"#,
    ]);
    // A shell needs longer than the default watch on a loaded host: watch 5 s.
    let r = env
        .run(&["boot", "f", "--watch", "5000"])
        .fails(1, "exited with status 3");
    assert!(r.stderr.contains("going-down-now"), "{}", r.stderr);
    let logs = env.ok(&["logs", "f"]).stdout;
    assert!(logs.contains("going-down-now"), "{logs}");
    let ev = env.ok(&["--json", "events", "--type", "lifecycle"]).stdout;
    let exits: Vec<serde_json::Value> = json(&ev)
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "exited")
        .cloned()
        .collect();
    assert_eq!(exits.len(), 2, "{ev}");
    assert_eq!(exits[1]["status"], 3);
    assert_eq!(exits[1]["during"], "boot");

    // An init that ends after the watch: warren is no longer its parent, so only that
    // it ended is known, first from list, then recorded by the next command.
    env.ok(&[
        "config",
        "set",
        "f",
        r#"init=["/bin/sh", "-c", "sleep 1; exit 4"]"#,
    ]);
    env.ok(&["boot", "f", "--watch", "0"]);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = env.ok(&["list"]).stdout;
        if text.contains("installed, exited (status unknown)") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the ended init is not shown: {text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    env.ok(&["halt", "f"]);
    let entry = list_entry(&env, "f");
    assert_eq!(entry["last_run"]["exited"], true, "{entry}");
    assert!(entry["last_run"].get("status").is_none(), "{entry}");

    // A good init boots, and the record of the failure is cleared.
    env.ok(&["config", "unset", "f", "init"]);
    env.ok(&["boot", "f"]);
    assert!(list_entry(&env, "f").get("last_run").is_none());
}

#[test]
fn a_failing_service_is_logged_on_the_console_by_warren_init() {
    let env = Env::new();
    env.host_zone("sv", &[r#"services=["echo svc-ran; exit 7", "sleep 300"]"#]);
    env.ok(&["boot", "sv"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let logs = env.ok(&["logs", "sv"]).stdout;
        if logs.contains("exited with status 7") {
            assert!(logs.contains("svc-ran"), "{logs}");
            assert!(
                logs.contains("warren-init: service \"/bin/sh -c echo svc-ran; exit 7\""),
                "{logs}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no service exit on the console: {logs}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The zone runs on: a service is not its init.
    assert_eq!(env.state("sv"), "running");
}

#[test]
fn oom_kills_are_counted_while_running_and_after_halt() {
    let env = Env::new();
    env.host_zone("o", &["memory.max=32M", "memory.swap=0"]);
    env.ok(&["boot", "o"]);
    let r = env.sh("o", "dd if=/dev/zero of=/dev/null bs=128M count=1");
    assert_ne!(r.code, 0, "the hog survived: {r:?}");
    let kills = list_entry(&env, "o")["oom_kills"].as_u64().unwrap();
    assert!(kills >= 1, "no OOM kill counted");
    let text = env.ok(&["list"]).stdout;
    assert!(
        text.contains(&format!("running, oom-killed ({kills})")),
        "{text}"
    );
    env.ok(&["halt", "o"]);
    let text = env.ok(&["list"]).stdout;
    assert!(
        text.contains(&format!("installed, oom-killed ({kills})")),
        "{text}"
    );
    let ev = env.ok(&["events", "--type", "lifecycle"]).stdout;
    assert!(ev.contains(" oom ") || ev.contains("  oom  "), "{ev}");
}

#[test]
fn logs_tail_and_follow_the_console() {
    let env = Env::new();
    env.host_zone("lg", &[]);
    env.ok(&["boot", "lg"]);
    env.sh(
        "lg",
        "echo line-one >> /dev/console; echo line-two >> /dev/console",
    )
    .ok();
    let r = env.ok(&["logs", "lg", "--tail", "1"]);
    assert!(
        r.stdout.contains("line-two") && !r.stdout.contains("line-one"),
        "{}",
        r.stdout
    );
    let f = Streaming::start(&env, &["logs", "lg", "-f"]);
    f.wait_for("line-two");
    env.sh("lg", "echo line-three >> /dev/console").ok();
    f.wait_for("line-three");
    // Halt ends the follow; the saved console holds it all.
    env.ok(&["halt", "lg"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut f = f;
    while f.child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "logs -f did not end with the zone"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let saved = env.ok(&["logs", "lg"]).stdout;
    assert!(saved.contains("line-three"), "{saved}");
    env.run(&["logs", "lg", "--since", "yesterday"])
        .fails(5, "--since \"yesterday\"");
}

#[test]
fn events_follow_streams_while_other_commands_run() {
    let env = Env::new();
    env.host_zone("ev", &[]);
    let f = Streaming::start(
        &env,
        &["--json", "events", "--follow", "--type", "lifecycle"],
    );
    // Past events first: created and installed.
    let l = f.wait_for("\"installed\"");
    assert_eq!(json(&l)["zone"], "ev");
    env.ok(&["boot", "ev"]);
    let booted = json(&f.wait_for("\"booted\""));
    assert_eq!(booted["type"], "lifecycle");
    assert!(booted["init_pid"].as_i64().unwrap() > 1);
    // A config event is not of the type asked for.
    env.ok(&["config", "set", "ev", "max-processes=55"]);
    env.ok(&["halt", "ev"]);
    let halted = f.wait_for("\"halted\"");
    assert!(!halted.contains("config-changed"));
    // --since in the future shows nothing.
    let r = env.ok(&["events", "--since", "2999-01-01T00:00:00Z"]);
    assert!(r.stdout.contains("no events"), "{}", r.stdout);
}

#[test]
fn every_changing_verb_answers_in_json() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    let c = json(&env.ok(&["--json", "create", "j1"]).stdout);
    assert_eq!(c["template"], "host");
    let check = |args: &[&str], verb: &str, zone: &str| -> serde_json::Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let v = json(&env.ok(&a).stdout);
        assert_eq!(v["verb"], verb, "{v}");
        assert_eq!(v["zone"], zone, "{v}");
        v
    };
    assert_eq!(check(&["install", "j1"], "install", "j1")["changed"], true);
    assert_eq!(check(&["install", "j1"], "install", "j1")["changed"], false);
    let b = check(&["boot", "j1"], "boot", "j1");
    assert!(b["boot_ms"].as_f64().unwrap() > 0.0 && b["init_pid"].as_i64().unwrap() > 1);
    let s = json(
        &env.ok(&["--json", "config", "set", "j1", "max-processes=70"])
            .stdout,
    );
    assert_eq!(s["live"][0], "max-processes");
    assert_eq!(s["saved"], true);
    let u = json(
        &env.ok(&["--json", "config", "unset", "j1", "max-processes"])
            .stdout,
    );
    assert_eq!(u["changed"][0], "max-processes");
    check(&["reboot", "j1"], "reboot", "j1");
    assert_eq!(check(&["halt", "j1"], "halt", "j1")["graceful"], true);
    assert_eq!(check(&["clone", "j1", "j2"], "clone", "j2")["source"], "j1");
    // Several zones: an array, one object each.
    let all = json(&env.ok(&["--json", "boot", "j1", "j2"]).stdout);
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
    let all = json(&env.ok(&["--json", "halt", "--all"]).stdout);
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
    let none = json(&env.ok(&["--json", "halt", "--all"]).stdout);
    assert_eq!(none, serde_json::json!([]));
    check(&["uninstall", "j2"], "uninstall", "j2");
    check(&["delete", "j2"], "delete", "j2");
    check(&["delete", "--force", "j1"], "delete", "j1");
    let t = json(&env.ok(&["--json", "template", "delete", "host"]).stdout);
    assert_eq!(t["template"], "host");
}
