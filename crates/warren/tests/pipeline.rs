//! Boot, clone and halt of many zones as a pipeline (`zone::pipeline`): zones in
//! flight at once (--jobs), results in the zones' order, one bad zone among good ones
//! reported without stopping them, `--json` with per-zone errors, and the exit status.

mod common;

use std::time::{Duration, Instant};

use common::{alive, Env};

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}{i}")).collect()
}

fn zones_of(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("an array: {v}"))
        .iter()
        .map(|r| r["zone"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn many_zones_clone_boot_and_halt_in_order_with_a_bad_one_among_them() {
    let env = Env::new();
    env.host_zone("pbase", &[]);
    let zones = names("pz", 6);
    // Clone of many, three at a time, one name taken (pz3 made first).
    env.ok(&["clone", "pbase", "pz3"]);
    let mut args = vec!["--json", "clone", "pbase", "--jobs", "3"];
    args.extend(zones.iter().map(String::as_str));
    let r = env.run(&args);
    assert_eq!(r.code, 1, "one clone failed: {} {}", r.stdout, r.stderr);
    assert!(r.stderr.contains("1 of 6 zone(s) failed"), "{}", r.stderr);
    assert!(
        r.stderr.contains("zone 'pz3' already exists"),
        "{}",
        r.stderr
    );
    let v = json(&r.stdout);
    assert_eq!(zones_of(&v), zones, "in the order given: {v}");
    for (i, z) in v.as_array().unwrap().iter().enumerate() {
        if i == 2 {
            assert_eq!(z["changed"], false, "{z}");
            assert_eq!(z["exit"], 6, "a taken name is a conflict: {z}");
            assert!(z["error"].as_str().unwrap().contains("already exists"));
        } else {
            assert_eq!(z["changed"], true, "{z}");
            assert_eq!(z["source"], "pbase", "{z}");
            assert!(z.get("error").is_none(), "{z}");
        }
        assert_eq!(env.state(&zones[i]), "installed");
    }
    // Each clone has a range of its own.
    let ranges: std::collections::HashSet<String> = std::fs::read_dir(env.root().join("userns"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .map(|n| n.split_once('-').unwrap().0.to_string())
        .collect();
    assert_eq!(ranges.len(), 7, "pbase and six clones: {ranges:?}");

    // Boot of many, with a missing zone and a configured one among them: the others
    // boot, the two are reported with their own exit codes, the status says 2 failed.
    env.ok(&["create", "pconf"]);
    let mut args = vec!["--json", "boot", "--jobs", "4"];
    args.extend(zones[..3].iter().map(String::as_str));
    args.extend(["pmissing", "pconf"]);
    args.extend(zones[3..].iter().map(String::as_str));
    let r = env.run(&args);
    assert_eq!(r.code, 1, "{} {}", r.stdout, r.stderr);
    assert!(r.stderr.contains("2 of 8 zone(s) failed"), "{}", r.stderr);
    let v = json(&r.stdout);
    let order: Vec<&str> = args[4..].to_vec();
    assert_eq!(zones_of(&v), order, "{v}");
    let mut pids = std::collections::HashSet::new();
    for r in v.as_array().unwrap() {
        match r["zone"].as_str().unwrap() {
            "pmissing" => assert_eq!(r["exit"], 3, "not found: {r}"),
            "pconf" => assert_eq!(r["exit"], 4, "wrong state: {r}"),
            z => {
                assert_eq!(r["changed"], true, "{r}");
                assert!(r["boot_ms"].as_f64().unwrap() > 0.0, "{r}");
                let pid = r["init_pid"].as_i64().unwrap() as i32;
                assert_eq!(pid, env.init_pid(z), "{r}");
                assert!(alive(pid) && pids.insert(pid), "{r}");
                assert_eq!(env.state(z), "running");
            }
        }
    }
    assert_eq!(pids.len(), 6);
    // Booting them again: nothing to do, in order, exit 0.
    let mut args = vec!["--json", "boot"];
    args.extend(zones.iter().map(String::as_str));
    let v = json(&env.ok(&args).stdout);
    assert_eq!(zones_of(&v), zones);
    assert!(v.as_array().unwrap().iter().all(|r| r["changed"] == false));

    // Halt of all, pipelined: every running zone stops, each reported once, and every
    // zone's cgroups are removed and its claim in the host's id-range registry
    // released (after all of them stopped: halt_keeping_cgroups).
    let dirs: Vec<std::path::PathBuf> = zones
        .iter()
        .flat_map(|z| env.cgroup_dirs(z).into_iter().map(|(_, d)| d))
        .collect();
    assert!(dirs.iter().all(|d| d.is_dir()), "{dirs:?}");
    let claims = || -> Vec<String> {
        std::fs::read_dir(env.root().join("run/userns"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.parse::<u32>().is_ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(claims().len(), zones.len(), "{:?}", claims());
    let v = json(&env.ok(&["--json", "halt", "--all", "--jobs", "4"]).stdout);
    let left: Vec<_> = dirs.iter().filter(|d| d.exists()).collect();
    assert!(left.is_empty(), "halt --all left cgroups: {left:?}");
    assert!(
        claims().is_empty(),
        "halt --all left claims: {:?}",
        claims()
    );
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .all(|r| r.get("kept").is_none() && r.get("cgroups").is_none()),
        "what the halts kept leaked into the output: {v}"
    );
    let mut halted = zones_of(&v);
    halted.sort();
    assert_eq!(halted, zones);
    assert!(v.as_array().unwrap().iter().all(|r| r["graceful"] == true));
    for z in &zones {
        assert_eq!(env.state(z), "installed");
    }
    for pid in pids {
        assert!(!alive(pid), "init {pid} survived halt --all");
    }
}

#[test]
fn zones_in_flight_overlap_their_waits() {
    // Each boot watches its init for 1.5 s: one after another, 6 zones take 9 s; six
    // at a time about 1.5 s. The bound (6 s) leaves a wide margin for a busy host.
    let env = Env::new();
    env.host_zone("obase", &[]);
    let zones = names("oz", 6);
    let mut args = vec!["clone", "obase"];
    args.extend(zones.iter().map(String::as_str));
    env.ok(&args);
    let mut args = vec!["boot", "--watch", "1500", "--jobs", "6"];
    args.extend(zones.iter().map(String::as_str));
    let t = Instant::now();
    let r = env.ok(&args);
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(6),
        "6 boots with a 1.5 s watch each took {took:?}: not overlapped"
    );
    // People's output: one line per zone, in order.
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{}", r.stdout);
    for (l, z) in lines.iter().zip(&zones) {
        assert!(l.starts_with(&format!("zone '{z}' booted in ")), "{l}");
    }
    // --jobs 1: one after another (the same verbs, in this process).
    env.ok(&["halt", "--all", "--jobs", "1"]);
    let mut args = vec!["boot", "--watch", "700", "--jobs", "1"];
    args.extend(zones[..3].iter().map(String::as_str));
    let t = Instant::now();
    env.ok(&args);
    assert!(
        t.elapsed() >= Duration::from_millis(2100),
        "--jobs 1 watched 3 inits one after another in {:?}",
        t.elapsed()
    );
}

#[test]
fn a_watched_boot_gives_its_slot_to_the_next_zone_and_still_catches_a_dying_init() {
    // Two at a time, each init watched for 2 s: if a watch held its slot, the third
    // zone could start only after the first one's watch ended (2 s later); released,
    // all six start within a fraction of one watch.
    let env = Env::new();
    env.host_zone("wbase", &[]);
    env.host_zone("wbad", &["init=/bin/false"]);
    let zones = names("wz", 6);
    let mut args = vec!["clone", "wbase"];
    args.extend(zones.iter().map(String::as_str));
    env.ok(&args);
    let mut args = vec!["--json", "boot", "--watch", "2000", "--jobs", "2"];
    args.extend(zones[..3].iter().map(String::as_str));
    args.push("wbad");
    args.extend(zones[3..].iter().map(String::as_str));
    let r = env.run(&args);
    assert_eq!(r.code, 1, "{} {}", r.stdout, r.stderr);
    assert!(r.stderr.contains("1 of 7 zone(s) failed"), "{}", r.stderr);
    let v = json(&r.stdout);
    assert_eq!(zones_of(&v), args[6..].to_vec(), "in order: {v}");
    let bad = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["zone"] == "wbad")
        .unwrap();
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .contains("exited with status 1"),
        "the watch still catches an init that dies: {bad}"
    );
    assert_eq!(env.state("wbad"), "installed");
    // Start times of the six inits, in clock ticks since the host's boot.
    let ticks = |pid: i32| -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after = stat.rsplit_once(')').unwrap().1;
        after.split_whitespace().nth(19).unwrap().parse().unwrap()
    };
    let hz = 100; // USER_HZ on Linux
    let starts: Vec<u64> = zones.iter().map(|z| ticks(env.init_pid(z))).collect();
    let spread = starts.iter().max().unwrap() - starts.iter().min().unwrap();
    assert!(
        spread * 1000 / hz < 2000,
        "six inits started {} ms apart with two slots: a watch held its slot ({starts:?})",
        spread * 1000 / hz
    );
    env.ok(&["halt", "--all"]);
}

#[test]
fn jobs_must_be_positive_and_one_zone_keeps_its_own_exit_code() {
    let env = Env::new();
    let r = env.run(&["boot", "--jobs", "0", "x"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    // One zone: its own error and exit code, not "1 of 1 failed".
    env.run(&["boot", "nosuch"])
        .fails(3, "zone 'nosuch' does not exist");
    env.run(&["clone", "nosuch", "n2"])
        .fails(3, "zone 'nosuch' does not exist");
    // Several missing zones: each named, the partial failure counted.
    let r = env.run(&["halt", "nosuch1", "nosuch2"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("zone 'nosuch1' does not exist"));
    assert!(r.stderr.contains("zone 'nosuch2' does not exist"));
    assert!(r.stderr.contains("2 of 2 zone(s) failed"), "{}", r.stderr);
}
