//! Issue 19, item 1: `warren suspend` / `warren resume` end to end on this kernel — the
//! zone's cgroup frozen, its memory in swap, a counter that stops and goes on, halt of
//! a suspended zone, login and cp waking it, and a crash at each step of a suspend or
//! resume repaired by the next command (docs/suspend.md).

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::Env;

/// warren's swap file in the test's root, turned off and removed when the test ends
/// (also when it fails).
struct Swap<'a>(&'a Env);

impl<'a> Swap<'a> {
    fn enable(env: &'a Env, size: &str) -> Swap<'a> {
        env.ok(&["swap", "enable", "--size", size]);
        Swap(env)
    }
}

impl Drop for Swap<'_> {
    fn drop(&mut self) {
        // The zones first: a swapoff would otherwise read their pages back in.
        let _ = self.0.run(&["halt", "--all", "--timeout", "1"]);
        let r = self.0.run(&["swap", "disable"]);
        if r.code != 0 {
            eprintln!("swap disable failed: {} {}", r.stdout, r.stderr);
        }
    }
}

/// The zone's private tree on the host (where its /tmp lives with the host template).
fn zone_root(env: &Env, zone: &str) -> PathBuf {
    let r = env.ok(&["--json", "info", zone]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    PathBuf::from(v["root"].as_str().expect("an installed zone has a root"))
}

/// Start a counter (10 a second, into /tmp/counter) and, with `mib`, a shell holding
/// that much anonymous memory (a command substitution kept in a variable).
fn start_workload(env: &Env, zone: &str, mib: u32) {
    let script = format!(
        "(i=0; while :; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.1; done) </dev/null >/dev/null 2>&1 &
         if [ {mib} -gt 0 ]; then
           (x=$(head -c {bytes} /dev/zero | tr '\\0' x); echo held > /tmp/held; sleep 100000; echo ${{#x}}) </dev/null >/dev/null 2>&1 &
         fi
         echo started",
        bytes = u64::from(mib) << 20
    );
    let r = env.sh(zone, &script);
    assert_eq!(
        r.code, 0,
        "starting the workload: {} {}",
        r.stdout, r.stderr
    );
    let root = zone_root(env, zone);
    let t = Instant::now();
    while !(root.join("tmp/counter").exists() && (mib == 0 || root.join("tmp/held").exists())) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the workload did not start in {zone}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn counter(env: &Env, zone: &str) -> u64 {
    let p = zone_root(env, zone).join("tmp/counter");
    // Read until a whole line is there (the counter rewrites the file).
    for _ in 0..50 {
        if let Ok(n) = std::fs::read_to_string(&p)
            .unwrap_or_default()
            .trim()
            .parse()
        {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no counter in {}", p.display());
}

fn json(r: &common::Run) -> serde_json::Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
}

fn freezer_state(env: &Env, zone: &str) -> Option<String> {
    let dirs = env.cgroup_dirs(zone);
    if let Some((_, d)) = dirs
        .iter()
        .find(|(c, _)| c.split(',').any(|x| x == "freezer"))
    {
        return std::fs::read_to_string(d.join("freezer.state"))
            .ok()
            .map(|s| s.trim().to_string());
    }
    let (_, d) = dirs.first()?;
    let events = std::fs::read_to_string(d.join("cgroup.events")).ok()?;
    warren::cgroups::freeze::frozen_in_events(&events)
        .map(|f| if f { "FROZEN" } else { "THAWED" }.to_string())
}

#[test]
fn suspend_freezes_pages_out_and_resume_goes_on() {
    let env = Env::new();
    let _swap = Swap::enable(&env, "512M");
    env.host_zone("s1", &[]);
    env.ok(&["boot", "s1"]);
    start_workload(&env, "s1", 64);

    let r = env.ok(&["--json", "suspend", "s1"]);
    let v = json(&r);
    assert_eq!(v["changed"], true, "{v}");
    assert_eq!(env.state("s1"), "suspended");
    assert_eq!(env.runtime("s1")["state"], "suspended");
    assert_eq!(freezer_state(&env, "s1").as_deref(), Some("FROZEN"));
    // What it held went to swap: most of the 64 MiB.
    let before = v["resident_before"].as_u64().unwrap();
    let after = v["resident_after"].as_u64().unwrap();
    let swapped = v["swapped"].as_u64().unwrap();
    assert!(before > 64 << 20, "resident before {before}");
    assert!(after < 16 << 20, "resident after {after} (before {before})");
    assert!(swapped > 48 << 20, "swapped {swapped}");
    // list --json shows it, with what it holds now.
    let list = json(&env.ok(&["--json", "list"]));
    let row = &list.as_array().unwrap()[0];
    assert_eq!(row["state"], "suspended");
    assert!(
        row["suspended"]["swapped"].as_u64().unwrap() > 48 << 20,
        "{row}"
    );
    // Frozen: the counter stands still.
    let c1 = counter(&env, "s1");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(counter(&env, "s1"), c1, "the counter moved while suspended");
    // Idempotent.
    let again = json(&env.ok(&["--json", "suspend", "s1"]));
    assert_eq!(again["changed"], false);
    assert_eq!(again["note"], "already suspended");

    let r = json(&env.ok(&["--json", "resume", "s1"]));
    assert_eq!(r["changed"], true);
    assert_eq!(env.state("s1"), "running");
    assert_eq!(freezer_state(&env, "s1").as_deref(), Some("THAWED"));
    let t = Instant::now();
    while counter(&env, "s1") <= c1 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the counter did not go on"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Both are in the journal.
    let ev = env.ok(&["events"]).stdout;
    assert!(ev.contains("suspended") && ev.contains("resumed"), "{ev}");
}

#[test]
fn halt_of_a_suspended_zone_stops_it_and_removes_its_cgroups() {
    let env = Env::new();
    env.host_zone("s2", &[]);
    env.ok(&["boot", "s2"]);
    start_workload(&env, "s2", 0);
    env.ok(&["suspend", "s2"]);
    let init = env.init_pid("s2");
    let dirs = env.cgroup_dirs("s2");
    let t = Instant::now();
    env.ok(&["halt", "s2", "--timeout", "5"]);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "halt waited for its timeout"
    );
    assert_eq!(env.state("s2"), "installed");
    assert!(!common::alive(init), "init {init} survived the halt");
    for (_, d) in dirs {
        assert!(!d.exists(), "{} left behind", d.display());
    }
    assert!(env.group_dirs().is_empty(), "{:?}", env.group_dirs());
}

#[test]
fn login_and_cp_wake_a_suspended_zone() {
    let env = Env::new();
    env.host_zone("s3", &[]);
    env.ok(&["boot", "s3"]);
    env.ok(&["suspend", "s3"]);
    let r = env.sh("s3", "echo hello");
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    assert_eq!(r.stdout.trim(), "hello");
    assert!(
        r.stderr.contains("was suspended; resumed it"),
        "{}",
        r.stderr
    );
    assert_eq!(env.state("s3"), "running");

    env.ok(&["suspend", "s3"]);
    let host_file = env.root().join("greeting");
    std::fs::write(&host_file, "hi\n").unwrap();
    let r = env.run(&["cp", host_file.to_str().unwrap(), "s3:/tmp/greeting"]);
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("was suspended; resumed it"),
        "{}",
        r.stderr
    );
    assert_eq!(env.state("s3"), "running");
    assert_eq!(env.sh("s3", "cat /tmp/greeting").stdout, "hi\n");
    // Boot refuses, naming resume.
    env.ok(&["suspend", "s3"]);
    env.run(&["boot", "s3"]).fails(4, "warren resume");
}

/// Run `args` with a crash point: warren must die there (SIGKILL).
fn crash_at(env: &Env, point: &str, args: &[&str]) {
    let status = env
        .cmd()
        .args(args)
        .env(warren::fault::ENV, point)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(9), "warren was not killed at {point}");
}

#[test]
fn crash_mid_suspend_or_resume_is_repaired() {
    let env = Env::new();
    env.host_zone("s4", &[]);
    env.ok(&["boot", "s4"]);
    start_workload(&env, "s4", 0);
    // Each crash point, and a different command to find it.
    for (point, repair) in [
        ("suspend.after-join", vec!["gc"]),
        ("suspend.after-intent", vec!["boot", "s4"]),
        ("suspend.after-freeze", vec!["resume", "s4"]),
        ("suspend.after-pageout", vec!["gc"]),
    ] {
        crash_at(&env, point, &["suspend", "s4"]);
        env.ok(&repair);
        assert_eq!(env.state("s4"), "running", "after {point} and {repair:?}");
        let rt = env.runtime("s4");
        assert_eq!(rt["state"], "running", "{point}: {rt}");
        assert!(rt.get("suspension").is_none(), "{point}: {rt}");
        // The freezer joined before the crash is in the record, thawed.
        assert_eq!(
            freezer_state(&env, "s4").as_deref(),
            Some("THAWED"),
            "{point}"
        );
        let c = counter(&env, "s4");
        let t = Instant::now();
        while counter(&env, "s4") <= c {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "{point}: zone stays frozen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // A resume that thawed and died before recording it.
    env.ok(&["suspend", "s4"]);
    crash_at(&env, "resume.after-thaw", &["resume", "s4"]);
    env.ok(&["gc"]);
    assert_eq!(env.runtime("s4")["state"], "running");
    assert_eq!(env.state("s4"), "running");
    // And a suspend after all that works, and halt leaves nothing.
    env.ok(&["suspend", "s4"]);
    env.ok(&["halt", "s4"]);
    assert!(env.group_dirs().is_empty(), "{:?}", env.group_dirs());
}

/// ksmd started for the test when it was not running, and its `run` setting restored
/// when the test ends (it is host-wide).
struct KsmRun(Option<String>);

const KSM_RUN: &str = "/sys/kernel/mm/ksm/run";

impl KsmRun {
    fn ensure() -> KsmRun {
        let before = std::fs::read_to_string(KSM_RUN).unwrap_or_else(|e| {
            panic!("this kernel has no KSM ({KSM_RUN}: {e}); memory.merge cannot be tested here")
        });
        if before.trim() == "1" {
            return KsmRun(None);
        }
        eprintln!(
            "starting ksmd for this test ({KSM_RUN} was {}; restored at the end)",
            before.trim()
        );
        std::fs::write(KSM_RUN, "1").unwrap();
        KsmRun(Some(before.trim().to_string()))
    }
}

impl Drop for KsmRun {
    fn drop(&mut self) {
        if let Some(v) = &self.0 {
            if let Err(e) = std::fs::write(KSM_RUN, v) {
                eprintln!("restoring {KSM_RUN} to {v} failed: {e}");
            }
        }
    }
}

#[test]
fn merging_zones_share_identical_pages_and_stat_shows_it() {
    let env = Env::new();
    let _ksm = KsmRun::ensure();
    // 8 MiB of identical pages, held by a service: init's children inherit the merge
    // setting (a `warren login` session is not init's child, docs/suspend.md).
    let service = r#"services=["x=$(head -c 8388608 /dev/zero | tr '\\0' x); echo held > /tmp/held; sleep 100000; echo ${#x}"]"#;
    let zones = ["k1", "k2", "k3"];
    for z in zones {
        env.host_zone(z, &["memory.merge=true", service]);
    }
    // A zone without the key: never read, never merged.
    env.host_zone("k0", &[service]);
    for z in ["k0", "k1", "k2", "k3"] {
        env.ok(&["boot", z]);
    }
    for z in ["k0", "k1", "k2", "k3"] {
        let held = zone_root(&env, z).join("tmp/held");
        let t = Instant::now();
        while !held.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "{z}'s service did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let t = Instant::now();
    loop {
        let v = json(&env.ok(&["--json", "stat", "k0", "k1", "k2", "k3"]));
        let rows = v["zones"].as_array().unwrap().clone();
        let ksm = |name: &str| {
            rows.iter()
                .find(|r| r["name"] == name)
                .map(|r| r["ksm"].clone())
                .unwrap()
        };
        assert!(
            ksm("k0").is_null(),
            "a zone without memory.merge: {}",
            ksm("k0")
        );
        let merged: Vec<u64> = zones
            .iter()
            .map(|z| ksm(z)["merging_pages"].as_u64().unwrap_or(0))
            .collect();
        if merged.iter().all(|&m| m > 1000) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "ksmd merged too little in 60 s: {merged:?} pages"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let text = env.ok(&["stat", "k1"]).stdout;
    assert!(text.contains("KSM k1:"), "{text}");
    // The doctor says that these zones merge across tenants.
    let d = json(&env.run(&["--json", "doctor", "--zones", "4"]));
    let f = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["limit"] == "memory.merge (KSM)")
        .cloned()
        .unwrap_or_else(|| panic!("no KSM finding in {d}"));
    assert_eq!(f["verdict"], "weakens", "{f}");
    assert!(f["note"].as_str().unwrap().contains("k1, k2, k3"), "{f}");
}

/// Issue 19, item 4: under pressure the agent suspends the best-effort zone first (the
/// critical one never), and halts only once nothing is left to suspend. The budget is a
/// plain directory of files the test controls, as in tests/overcommit.rs.
#[test]
fn agent_suspends_before_it_halts_and_never_suspends_a_critical_zone() {
    let env = Env::new();
    env.host_zone("be", &["priority=best-effort"]);
    env.host_zone("crit", &["priority=critical"]);
    env.ok(&["boot", "be"]);
    env.ok(&["boot", "crit"]);
    let budget = env.root().join("budget");
    std::fs::create_dir(&budget).unwrap();
    for (name, text) in [
        ("memory.limit_in_bytes", (100u64 << 20).to_string()),
        ("memory.usage_in_bytes", (99u64 << 20).to_string()),
        ("memory.stat", "total_inactive_file 0\n".to_string()),
    ] {
        std::fs::write(budget.join(name), text).unwrap();
    }
    let cfg = env.root().join("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            "interval-ms = 50\nwindow-s = 0.5\ncooldown-s = 0.1\nhalt-timeout-s = 2\nwatch = \"{}\"\n[available]\ntrigger = 10.0\nclear = 20.0\ngrace-s = 0.0\n",
            budget.display()
        ),
    )
    .unwrap();
    let agent_once = || env.ok(&["agent", "--once", "--config", cfg.to_str().unwrap()]);
    agent_once();
    assert_eq!(env.state("be"), "suspended");
    assert_eq!(env.state("crit"), "running");
    let evs = json(&env.ok(&["events", "--json", "--type", "agent"]));
    let e = &evs.as_array().unwrap()[0];
    assert_eq!(e["action"], "suspend", "{e}");
    assert_eq!(e["zone"], "be");
    let reason = e["reason"].as_str().unwrap();
    assert!(
        reason.contains("available memory") && reason.contains("suspended before halting any zone"),
        "{reason}"
    );
    // Still under pressure, nothing left to suspend (crit is critical): now a halt, of
    // the suspended best-effort zone; never of crit.
    agent_once();
    assert_eq!(env.state("be"), "installed");
    assert_eq!(env.state("crit"), "running");
    let evs = json(&env.ok(&["events", "--json", "--type", "agent"]));
    let e = &evs.as_array().unwrap()[1];
    assert_eq!(e["action"], "evict", "{e}");
    assert!(
        e["reason"]
            .as_str()
            .unwrap()
            .contains("no zone is left to suspend"),
        "{e}"
    );
    agent_once();
    assert_eq!(env.state("crit"), "running", "a critical zone was acted on");
}

/// Issue 19, item 3: `suspend-after` — the agent suspends a zone idle that long, and
/// leaves a busy one (a counter) and one without the key running.
#[test]
fn agent_suspends_a_zone_idle_for_suspend_after() {
    let env = Env::new();
    env.host_zone("idle", &["suspend-after=2s"]);
    env.host_zone("busy", &["suspend-after=2s"]);
    env.host_zone("plain", &[]);
    for z in ["idle", "busy", "plain"] {
        env.ok(&["boot", z]);
    }
    start_workload(&env, "busy", 0);
    // No pressure at all: thresholds no host reaches.
    let cfg = env.root().join("agent.toml");
    std::fs::write(
        &cfg,
        "interval-ms = 100\nidle-scan-s = 0.5\n[available]\ntrigger = 0.0\nclear = 0.0\ngrace-s = 0.0\n",
    )
    .unwrap();
    let agent = common::ChildGuard(
        env.cmd()
            .args(["agent", "--config", cfg.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    while env.state("idle") != "suspended" {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the idle zone was not suspended in 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Long enough for the busy zone too, had it been idle.
    std::thread::sleep(Duration::from_secs(3));
    drop(agent);
    assert_eq!(env.state("busy"), "running");
    assert_eq!(env.state("plain"), "running");
    let evs = json(&env.ok(&["events", "--json", "--type", "agent"]));
    let e = evs
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["zone"] == "idle")
        .cloned()
        .unwrap();
    assert_eq!(e["action"], "suspend");
    assert!(
        e["reason"]
            .as_str()
            .unwrap()
            .contains("suspend-after = \"2s\""),
        "{e}"
    );
}

/// Deletes its bridge and the ports left on it when dropped (declared before the `Env`,
/// so the zones are halted first), as in tests/net.rs.
struct BridgeGuard(String);

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        let Ok(mut nl) = warren::net::netlink::Netlink::open() else {
            return;
        };
        if let Ok(d) = std::fs::read_dir(format!("/sys/class/net/{}/brif", self.0)) {
            for e in d.flatten() {
                let _ = nl.delete_link(&e.file_name().to_string_lossy());
            }
        }
        let _ = nl.delete_link(&self.0);
        let _ = warren::net::filter::remove_table(&self.0);
    }
}

/// Issue 19, item 2: a connection to a suspended bridged zone waits in the listen
/// backlog, the agent sees it and resumes the zone, and the request is answered. The
/// added latency of that first request is printed.
#[test]
fn a_connection_wakes_a_suspended_zone_and_is_answered() {
    use std::io::{Read, Write};
    let br = BridgeGuard(format!("ws{:x}", std::process::id()));
    let env = Env::new();
    env.host_zone(
        "web",
        &[
            "net=bridge",
            &format!("net-bridge={}", br.0),
            "net-subnet=10.250.19.0/24",
        ],
    );
    env.ok(&["boot", "web"]);
    let addr = env.runtime("web")["net"]["address"]
        .as_str()
        .unwrap()
        .to_string();
    let r = env.sh(
        "web",
        "cd /tmp && python3 -m http.server 8080 </dev/null >/dev/null 2>&1 & echo started",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let target: std::net::SocketAddr = format!("{addr}:8080").parse().unwrap();
    let get = |timeout: Duration| -> std::io::Result<(Duration, String)> {
        let t = Instant::now();
        let mut c = std::net::TcpStream::connect_timeout(&target, timeout)?;
        c.set_read_timeout(Some(timeout))?;
        c.write_all(b"GET / HTTP/1.0\r\n\r\n")?;
        let mut out = String::new();
        c.read_to_string(&mut out)?;
        Ok((t.elapsed(), out))
    };
    let t = Instant::now();
    let warm = loop {
        match get(Duration::from_secs(2)) {
            Ok((d, out)) if out.starts_with("HTTP/1.0 200") => break d,
            _ if t.elapsed() < Duration::from_secs(20) => {
                std::thread::sleep(Duration::from_millis(100))
            }
            r => panic!("the zone's server did not answer: {r:?}"),
        }
    };
    env.ok(&["suspend", "web"]);
    let cfg = env.root().join("agent.toml");
    std::fs::write(
        &cfg,
        "interval-ms = 20\nwake-scan-s = 0.2\n[available]\ntrigger = 0.0\nclear = 0.0\ngrace-s = 0.0\n",
    )
    .unwrap();
    let _agent = common::ChildGuard(
        env.cmd()
            .args(["agent", "--config", cfg.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Let the agent read the list of suspended zones first.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(env.state("web"), "suspended");
    let (woken, out) = get(Duration::from_secs(20)).expect("the first request after suspend");
    assert!(out.starts_with("HTTP/1.0 200"), "{out}");
    assert_eq!(env.state("web"), "running");
    eprintln!(
        "first request to a suspended zone: {:.1} ms (a warm request: {:.1} ms; load: {})",
        woken.as_secs_f64() * 1000.0,
        warm.as_secs_f64() * 1000.0,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let evs = json(&env.ok(&["events", "--json", "--type", "agent"]));
    assert!(
        evs.as_array().unwrap().iter().any(|e| e["action"] == "wake"
            && e["zone"] == "web"
            && e["reason"] == "a client is waiting on a TCP socket"),
        "{evs}"
    );
}
