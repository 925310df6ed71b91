//! `warren stat` and `warren memstat` on real zones, and their JSON against the schema
//! documented in docs/stat-schema.md.
//!
//! The tests of this file take one lock so that they do not run at once: one of them
//! measures CPU, and the others would steal it.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::Env;
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const MIB: u64 = 1 << 20;

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// `warren stat ARGS --json` for one zone: its object.
fn stat_zone(env: &Env, zone: &str, extra: &[&str]) -> Value {
    let mut args = vec!["stat", zone, "--json"];
    args.extend(extra);
    let v = json(&env.ok(&args).stdout);
    let zones = v["zones"].as_array().unwrap();
    assert_eq!(zones.len(), 1, "{v}");
    assert_eq!(zones[0]["name"], zone);
    zones[0].clone()
}

/// Wait (at most 30 s) until `script` succeeds inside the zone.
#[track_caller]
fn wait_until(env: &Env, zone: &str, script: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while env.sh(zone, script).code != 0 {
        assert!(Instant::now() < deadline, "timed out waiting for: {script}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Start `command` inside the zone, detached: no descriptor of the login is kept, so
/// the login returns at once and the process lives on (until the guard halts the zone).
fn detach(env: &Env, zone: &str, command: &str) {
    env.sh(zone, &format!("{command} >/dev/null 2>&1 </dev/null &"))
        .ok();
}

#[test]
fn a_zone_touching_64_mib_shows_it_as_anon_in_stat_and_memstat() {
    let _s = serial();
    let env = Env::new();
    env.host_zone("a", &[]);
    env.ok(&["boot", "a"]);
    // bytes multiplication writes every byte, so all 64 MiB are resident.
    detach(
        &env,
        "a",
        r#"python3 -c 'import time; b=b"x"*(64<<20); open("/tmp/ready","w").close(); time.sleep(300)'"#,
    );
    wait_until(&env, "a", "test -e /tmp/ready");

    let z = stat_zone(&env, "a", &["--pss"]);
    let anon = z["memory"]["anon_bytes"].as_u64().unwrap();
    assert!(anon >= 60 * MIB, "anon {anon} < 60 MiB: {z}");
    let charged = z["memory"]["charged_bytes"].as_u64().unwrap();
    assert!(charged >= anon, "{z}");
    let uss = z["pss"]["uss_bytes"].as_u64().unwrap();
    assert!(uss >= 60 * MIB, "the 64 MiB are private: uss {uss}: {z}");
    assert_eq!(z["state"], "running");
    assert!(
        z["processes"].as_u64().unwrap() >= 2,
        "init and python: {z}"
    );
    // This host's kernel reports kernel memory per cgroup (v1 kmem or v2 kernel).
    assert!(z["memory"]["kernel_bytes"].as_u64().unwrap() > 0, "{z}");

    let m = json(&env.ok(&["memstat", "--json"]).stdout);
    assert_eq!(m["zones"]["booted"], 1);
    let total_anon = m["zones"]["total"]["anon_bytes"].as_u64().unwrap();
    assert!(total_anon >= 60 * MIB, "{m}");
    assert_eq!(m["zones"]["per_zone"]["anon_bytes"], total_anon);
    let h = &m["host"];
    let kinds: u64 = [
        &h["kernel"]["total_bytes"],
        &h["anon_bytes"],
        &h["page_cache_bytes"],
        &h["buffers_bytes"],
        &h["shmem_bytes"],
        &h["swap_cached_bytes"],
        &h["hugetlb_bytes"],
        &h["free_bytes"],
    ]
    .iter()
    .map(|v| v.as_u64().unwrap())
    .sum();
    assert_eq!(kinds, h["total_bytes"].as_u64().unwrap(), "{m}");
    assert!(h["anon_bytes"].as_u64().unwrap() >= 60 * MIB);
    // python3 and its libraries are host files the zone maps.
    assert!(
        m["mapped_files"]["pss_file_bytes"].as_u64().unwrap() > MIB,
        "{m}"
    );
    let text = env.ok(&["memstat"]).stdout;
    assert!(text.contains("anon") && text.contains("PER ZONE"), "{text}");
}

#[test]
fn ten_sleepers_make_eleven_processes_and_the_table_and_live_view_work() {
    let _s = serial();
    let env = Env::new();
    env.host_zone("p", &["max-processes=50"]);
    env.ok(&["boot", "p"]);
    env.sh(
        "p",
        "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 300 >/dev/null 2>&1 </dev/null & done",
    )
    .ok();
    let z = stat_zone(&env, "p", &[]);
    assert!(z["processes"].as_u64().unwrap() >= 11, "init + 10: {z}");
    assert!(z["tasks"].as_u64().unwrap() >= 11, "{z}");
    assert_eq!(z["pids_max"], 50);
    assert_eq!(z["max_processes"], 50);
    assert!(z["uptime_s"].is_u64());

    let table = env.ok(&["stat", "p"]).stdout;
    let row = table
        .lines()
        .find(|l| l.starts_with("p "))
        .unwrap_or_else(|| panic!("no row for p: {table}"));
    assert!(row.contains("/50"), "tasks/pids.max: {row}");
    assert!(
        table.contains("[system]") && table.starts_with("host: "),
        "{table}"
    );

    // The live view, not on a terminal: one JSON line per report.
    let r = env.ok(&[
        "stat",
        "p",
        "--interval",
        "0.3",
        "--count",
        "2",
        "--sort",
        "procs",
        "--json",
    ]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    for l in lines {
        let v = json(l);
        let w = v["cpu_window_s"].as_f64().unwrap();
        assert!((0.25..1.5).contains(&w), "window {w}");
        assert!(v["zones"][0]["processes"].as_u64().unwrap() >= 11);
    }
}

#[test]
fn a_cpu_hog_shows_a_busy_cpu_over_two_seconds() {
    let _s = serial();
    let env = Env::new();
    env.host_zone("h", &[]);
    env.ok(&["boot", "h"]);
    let idle = stat_zone(&env, "h", &[]);
    assert!(idle["cpu_pct"].as_f64().unwrap() < 20.0, "{idle}");
    // Two spinning shells: the host's other work (this is a shared 2-CPU machine) may
    // hold one CPU, and the figure under test is the zone's CPU time, not the scheduler.
    for _ in 0..2 {
        detach(&env, "h", "sh -c 'while :; do :; done'");
    }
    let z = stat_zone(&env, "h", &["--interval", "2", "--count", "1"]);
    let cpu = z["cpu_pct"].as_f64().unwrap();
    assert!(cpu >= 80.0, "cpu {cpu}% < 80% of a CPU: {z}");
    let cpus = std::thread::available_parallelism().unwrap().get() as f64;
    assert!(cpu <= cpus * 100.0 * 1.05, "more than the host has: {cpu}");
    assert!(z["cpu_total_s"].as_f64().unwrap() >= 1.6, "{z}");
}

#[test]
fn two_zones_running_the_same_host_binary_share_its_text() {
    let _s = serial();
    let env = Env::new();
    for z in ["s1", "s2"] {
        env.host_zone(z, &[]);
        env.ok(&["boot", z]);
        detach(&env, z, "sleep 300");
    }
    let v = json(&env.ok(&["stat", "s1", "s2", "--pss", "--json"]).stdout);
    assert_eq!(v["pss"], true);
    for z in v["zones"].as_array().unwrap() {
        let p = &z["pss"];
        let rss = p["rss_bytes"].as_u64().unwrap();
        let pss = p["pss_bytes"].as_u64().unwrap();
        let uss = p["uss_bytes"].as_u64().unwrap();
        assert!(p["processes"].as_u64().unwrap() >= 2, "init and sleep: {z}");
        // warren-init's text is mapped by both zones, sleep's and libc's by the host
        // too: neither is unique to one zone.
        assert!(
            uss * 2 < rss,
            "USS {uss} should be far below RSS {rss}: {z}"
        );
        assert!(pss < rss, "PSS {pss} should be below RSS {rss}: {z}");
        assert!(p["shared_bytes"].as_u64().unwrap() > 0);
    }
}

#[test]
fn bad_stat_arguments_say_what_is_wrong() {
    let _s = serial();
    let env = Env::new();
    env.run(&["stat", "--sort", "disk"])
        .fails(2, "possible values: cpu, mem, procs");
    env.run(&["stat", "--count", "2"]).fails(2, "--interval");
    env.run(&["stat", "--interval", "0"])
        .fails(5, "expected seconds above 0");
    env.run(&["stat", "--interval", "1", "--count", "0"])
        .fails(5, "--count must be at least 1");
    env.run(&["stat", "nosuch"])
        .fails(3, "'nosuch' does not exist");
    // No zone booted: the host summary and [system] still print.
    let v = json(&env.ok(&["stat", "--json"]).stdout);
    assert_eq!(v["zones"].as_array().unwrap().len(), 0);
    assert!(v["system"]["memory_bytes"].as_u64().unwrap() > 0);
    let m = json(&env.ok(&["memstat", "--json"]).stdout);
    assert_eq!(m["zones"]["booted"], 0);
    assert!(m["zones"]["per_zone"]["anon_bytes"].is_null());
}

// ---- the schema contract ------------------------------------------------------------

/// (field path, type) rows of the section of docs/stat-schema.md titled `title`.
fn documented(title: &str) -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/stat-schema.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let mut rows = Vec::new();
    let mut inside = false;
    for line in doc.lines() {
        if line.starts_with("## ") {
            inside = line.contains(title);
            continue;
        }
        if inside && line.starts_with("| `") {
            let line = line.replace("\\|", "\u{1}");
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            rows.push((
                cells[1].trim_matches('`').to_string(),
                cells[2].replace('\u{1}', "|"),
            ));
        }
    }
    assert!(!rows.is_empty(), "no field table under {title:?} in {path}");
    rows
}

/// The values at `path` ("zones[].memory.anon_bytes"): Err for a missing key; nothing
/// below a null parent.
fn values<'a>(v: &'a Value, segs: &[&str]) -> Vec<Result<&'a Value, String>> {
    let Some((seg, rest)) = segs.split_first() else {
        return vec![Ok(v)];
    };
    if v.is_null() {
        return Vec::new();
    }
    let name = seg.trim_end_matches("[]");
    let Some(child) = v.get(name) else {
        return vec![Err(format!("missing {name:?} in {v}"))];
    };
    if seg.ends_with("[]") {
        let Some(items) = child.as_array() else {
            return vec![Err(format!("{name:?} is not an array"))];
        };
        return items.iter().flat_map(|i| values(i, rest)).collect();
    }
    values(child, rest)
}

fn has_type(v: &Value, ty: &str) -> bool {
    ty.split('|').any(|t| match t {
        "integer" => v.is_u64() || v.is_i64(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "null" => v.is_null(),
        other => panic!("unknown type {other:?} in the schema doc"),
    })
}

/// Every field path printed.
fn printed(v: &Value, prefix: &str, out: &mut Vec<String>) {
    let Some(obj) = v.as_object() else { return };
    for (k, child) in obj {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        out.push(path.clone());
        match child {
            Value::Object(_) => printed(child, &path, out),
            Value::Array(items) => {
                for i in items {
                    printed(i, &format!("{path}[]"), out);
                }
            }
            _ => {}
        }
    }
}

/// Check `v` against the documented rows, both ways; every documented path must have
/// been seen (with a value) unless it is under one of `may_be_null`.
fn check_contract(title: &str, v: &Value, may_be_null: &[&str]) {
    let doc = documented(title);
    for (path, ty) in &doc {
        let segs: Vec<&str> = path.split('.').collect();
        let found = values(v, &segs);
        if found.is_empty() && !may_be_null.iter().any(|p| path.starts_with(p)) {
            panic!("{title}: documented field {path} never appeared: {v}");
        }
        for f in found {
            let val = f.unwrap_or_else(|e| panic!("{title}: {path}: {e}"));
            assert!(
                has_type(val, ty),
                "{title}: {path} should be {ty}, is {val}"
            );
        }
    }
    let mut seen = Vec::new();
    printed(v, "", &mut seen);
    for p in seen {
        assert!(
            doc.iter().any(|(d, _)| *d == p),
            "{title}: {p} is printed but not documented in docs/stat-schema.md"
        );
    }
    assert_eq!(v["schema_version"], 1);
}

#[test]
fn json_output_matches_the_documented_schema() {
    let _s = serial();
    let env = Env::new();
    // memory.merge: its ksm object is read (ksmd need not run for /proc/PID/ksm_stat).
    env.host_zone("j", &["max-threads=64", "memory.merge=true"]);
    env.ok(&["boot", "j"]);
    detach(&env, "j", "sleep 300");
    // Without PSI (psi=0, or no CONFIG_PSI) the pressure objects are null.
    let mut no_psi: Vec<&str> = if std::path::Path::new("/proc/pressure/memory").exists() {
        vec![]
    } else {
        vec!["host.memory_pressure.", "zones[].memory_pressure."]
    };
    // A kernel without /proc/PID/ksm_stat (before 6.1) gives ksm null.
    if !std::path::Path::new("/proc/self/ksm_stat").exists() {
        no_psi.push("zones[].ksm.");
    }
    let v = json(&env.ok(&["stat", "--pss", "--json"]).stdout);
    assert!(!v["zones"].as_array().unwrap().is_empty());
    check_contract("warren stat --json", &v, &no_psi);
    // Without --pss the pss object is null, still within the schema.
    let v = json(&env.ok(&["stat", "j", "--json"]).stdout);
    assert!(v["zones"][0]["pss"].is_null());
    check_contract("warren stat --json", &v, &["zones[].pss.", "zones[].ksm."]);
    let m = json(&env.ok(&["memstat", "--json"]).stdout);
    check_contract("warren memstat --json", &m, &[]);
}
