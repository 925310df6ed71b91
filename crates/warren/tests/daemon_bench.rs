//! `POST /1.0/bench`: `warren bench density` as an operation against a real daemon on
//! a temporary root: its result, its progress, one bench at a time, and a cancel that
//! leaves no zone, template, cgroup or scratch directory behind.

mod common;
mod daemon_client;

use std::path::Path;
use std::time::Duration;

use common::{require_busybox, Env};
use daemon_client::{wait_for, Daemon};
use serde_json::Value;

/// Wait for the operation a 202 answered, and return it ended.
fn ended(d: &Daemon, started: &Value, limit: Duration) -> Value {
    let url = started["operation"].as_str().unwrap().to_string();
    wait_for(limit, &format!("operation {url}"), || {
        d.json("GET", &url, None, 200)["status"] != "running"
    });
    d.json("GET", &url, None, 200)
}

/// The cgroup directories under this root's group whose names contain `needle`.
fn cgroups_named(env: &Env, needle: &str) -> Vec<String> {
    fn walk(dir: &Path, needle: &str, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let p = e.path();
                if e.file_name().to_string_lossy().contains(needle) {
                    out.push(p.display().to_string());
                }
                walk(&p, needle, out);
            }
        }
    }
    let mut out = Vec::new();
    for g in env.group_dirs() {
        walk(&g, needle, &mut out);
    }
    out
}

#[test]
fn bench_runs_as_an_operation_and_a_cancel_leaves_nothing_behind() {
    let env = Env::new();
    require_busybox();
    let d = Daemon::start(&env, &[]);
    // One small step to its end: the results are the operation's.
    let op = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"zones":"2","template":"busybox","idle_s":0.2}"#),
        202,
    );
    let o = ended(&d, &op, Duration::from_secs(300));
    assert_eq!(o["status"], "success", "{o}");
    let r = &o["results"][0];
    assert_eq!(r["steps"], serde_json::json!([2]), "{o}");
    assert_eq!(r["systems"][0]["name"], "warren", "{o}");
    // A larger one, cancelled while its zones are being made.
    let op = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"zones":"60","template":"busybox","idle_s":5}"#),
        202,
    );
    let url = op["operation"].as_str().unwrap().to_string();
    let e = d.json("POST", "/1.0/bench", Some(r#"{"zones":"1"}"#), 409);
    assert_eq!(e["code"], "conflict", "one bench at a time: {e}");
    let mut seen = Value::Null;
    wait_for(Duration::from_secs(120), "the bench's progress", || {
        seen = d.json("GET", &url, None, 200);
        seen["progress"]["pos"].as_u64().is_some_and(|p| p >= 5)
    });
    assert!(seen["progress"]["phase"].is_string(), "{seen}");
    d.json("DELETE", &url, None, 202);
    wait_for(Duration::from_secs(120), "the cancelled bench", || {
        d.json("GET", &url, None, 200)["status"] != "running"
    });
    let o = d.json("GET", &url, None, 200);
    assert_eq!(o["status"], "cancelled", "{o}");
    eprintln!("cancelled bench: {o}");
    // The bench's own guards removed its zones; the cleanup after it found the rest.
    assert!(o["results"][0]["zones_removed"].is_u64(), "{o}");
    let list: Value = serde_json::from_str(&env.ok(&["list", "--json"]).stdout).unwrap();
    let left: Vec<&Value> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|z| z["name"].as_str().unwrap().starts_with("warren-bench-"))
        .collect();
    assert!(
        left.is_empty(),
        "the cancel removed every bench zone: {left:?}"
    );
    assert!(
        env.ok(&["template", "list", "--json"]).stdout.trim() == "[]",
        "and its template"
    );
    let cg = cgroups_named(&env, "warren-bench-");
    assert!(cg.is_empty(), "and their cgroups: {cg:?}");
    let scratch: Vec<_> = std::fs::read_dir(env.root())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".bench"))
        .collect();
    assert!(scratch.is_empty(), "and its scratch directory: {scratch:?}");
    // Bad input is refused before anything runs.
    let e = d.json("POST", "/1.0/bench", Some(r#"{"zones":"1,x"}"#), 400);
    assert_eq!(e["field"], "zones", "{e}");
    let e = d.json("POST", "/1.0/bench", Some(r#"{"zones":"5000"}"#), 400);
    assert_eq!(e["field"], "zones", "{e}");
}

/// The bench's zones (`warren-bench-*`) in this root.
fn bench_zones(env: &Env) -> Vec<String> {
    let list: Value = serde_json::from_str(&env.ok(&["list", "--json"]).stdout).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .filter_map(|z| z["name"].as_str())
        .filter(|n| n.starts_with("warren-bench-"))
        .map(String::from)
        .collect()
}

#[test]
fn bench_metrics_runs_as_an_operation_and_stops_cleanly_on_cancel() {
    let env = Env::new();
    require_busybox();
    let d = Daemon::start(&env, &[]);
    let op = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"kind":"metrics","zones":"2","scrapes":2}"#),
        202,
    );
    let o = ended(&d, &op, Duration::from_secs(300));
    assert_eq!(o["status"], "success", "{o}");
    let step = &o["results"][0]["steps"][0];
    assert_eq!(step["zones"], 2, "{o}");
    assert!(step["warm_ms"]["median"].is_number(), "{o}");
    assert!(
        bench_zones(&env).is_empty(),
        "a finished bench leaves no zone"
    );
    // Options of another kind are refused.
    let e = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"kind":"metrics","workload":"http"}"#),
        400,
    );
    assert_eq!(e["field"], "workload", "{e}");
    let e = d.json("POST", "/1.0/bench", Some(r#"{"kind":"scale"}"#), 400);
    assert_eq!(e["field"], "workload", "scale needs a workload: {e}");
    let e = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"kind":"metrics","scrapes":0}"#),
        400,
    );
    assert_eq!(e["field"], "scrapes", "{e}");
    // A larger one, cancelled while its zones boot: SIGTERM stops it after the zone in
    // hand and its own guards remove its zones, so the cleanup after it finds none.
    let op = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"kind":"metrics","zones":"60","scrapes":2}"#),
        202,
    );
    let url = op["operation"].as_str().unwrap().to_string();
    wait_for(Duration::from_secs(120), "the bench's progress", || {
        d.json("GET", &url, None, 200)["progress"]["pos"]
            .as_u64()
            .is_some_and(|p| p >= 3)
    });
    d.json("DELETE", &url, None, 202);
    wait_for(Duration::from_secs(120), "the cancelled bench", || {
        d.json("GET", &url, None, 200)["status"] != "running"
    });
    let o = d.json("GET", &url, None, 200);
    assert_eq!(o["status"], "cancelled", "{o}");
    eprintln!("cancelled metrics bench: {o}");
    assert_eq!(
        o["results"][0]["zones_removed"], 0,
        "the bench's own guards removed its zones on SIGTERM: {o}"
    );
    assert!(bench_zones(&env).is_empty(), "no bench zone is left");
    assert_eq!(env.ok(&["template", "list", "--json"]).stdout.trim(), "[]");
    let cg = cgroups_named(&env, "warren-bench-");
    assert!(cg.is_empty(), "nor their cgroups: {cg:?}");
}

#[test]
fn the_demo_runs_as_an_operation_and_a_cancel_removes_its_zones() {
    let env = Env::new();
    let d = Daemon::start(&env, &[]);
    let demo_zones = |env: &Env| -> Vec<String> {
        let list: Value = serde_json::from_str(&env.ok(&["list", "--json"]).stdout).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .filter_map(|z| z["name"].as_str())
            .filter(|n| n.starts_with("warren-demo-"))
            .map(String::from)
            .collect()
    };
    let e = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"kind":"demo","zones":"1,2"}"#),
        400,
    );
    assert_eq!(e["field"], "zones", "{e}");
    let op = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"kind":"demo","zones":"2"}"#),
        202,
    );
    let o = ended(&d, &op, Duration::from_secs(300));
    assert_eq!(o["status"], "success", "{o}");
    assert_eq!(o["results"][0]["zones"], 2, "{o}");
    assert!(demo_zones(&env).is_empty(), "the demo removed its zones");
    // Cancelled while its zones are cloned: it stops after the zone in hand and
    // removes what it made.
    let op = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"kind":"demo","zones":"60"}"#),
        202,
    );
    let url = op["operation"].as_str().unwrap().to_string();
    wait_for(Duration::from_secs(120), "the demo's progress", || {
        d.json("GET", &url, None, 200)["progress"]["pos"]
            .as_u64()
            .is_some_and(|p| p >= 3)
    });
    d.json("DELETE", &url, None, 202);
    wait_for(Duration::from_secs(120), "the cancelled demo", || {
        d.json("GET", &url, None, 200)["status"] != "running"
    });
    let o = d.json("GET", &url, None, 200);
    assert_eq!(o["status"], "cancelled", "{o}");
    assert_eq!(
        o["results"][0]["zones_removed"], 0,
        "the demo removed its own zones on SIGTERM: {o}"
    );
    assert!(demo_zones(&env).is_empty(), "no demo zone is left");
    let cg = cgroups_named(&env, "warren-demo-");
    assert!(cg.is_empty(), "nor their cgroups: {cg:?}");
}

#[test]
fn bench_snapshot_runs_as_an_operation() {
    let env = Env::new();
    let d = Daemon::start(&env, &[]);
    let e = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"kind":"snapshot","repeat":0}"#),
        400,
    );
    assert_eq!(e["field"], "repeat", "{e}");
    let op = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"kind":"snapshot","repeat":2,"data_mib":1}"#),
        202,
    );
    let o = ended(&d, &op, Duration::from_secs(300));
    assert_eq!(o["status"], "success", "{o}");
    let r = &o["results"][0];
    assert_eq!(
        (r["repeat"].as_u64(), r["data_mib"].as_u64()),
        (Some(2), Some(1)),
        "{o}"
    );
    assert!(r["snapshot_ms_median"].is_number(), "{o}");
    assert_eq!(
        o["progress"]["phase"], "export and import",
        "its last phase: {o}"
    );
}

/// `"kind": "cri"`: `warren bench cri` through the API — one pod with handler `warren`
/// (the runc shim with warren-oci) in the CLI's own private containerd — its result,
/// and the handlers refused when they are not CRI handlers or not of this kind.
#[test]
fn bench_cri_runs_as_an_operation() {
    let env = Env::new();
    let d = Daemon::start(&env, &[]);
    let e = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"kind":"cri","zones":"1","handlers":"warren,kata"}"#),
        400,
    );
    assert_eq!(e["field"], "handlers", "{e}");
    let e = d.json(
        "POST",
        "/1.0/bench",
        Some(r#"{"kind":"metrics","handlers":"runc"}"#),
        400,
    );
    assert_eq!(e["field"], "handlers", "handlers belong to cri: {e}");
    // Its report goes to the test's own directory, not the source tree's bench/results.
    let out = env.root().join("cri-out");
    let body = serde_json::json!({"kind": "cri", "zones": "1", "handlers": "warren", "out": out});
    let op = d.json("POST", "/1.0/bench", Some(&body.to_string()), 202);
    let o = ended(&d, &op, Duration::from_secs(300));
    assert_eq!(
        o["status"], "success",
        "bench cri needs containerd, containernetworking-plugins and the CRI venv (scripts/test.sh installs them): {o}"
    );
    let step = &o["results"][0]["steps"][0];
    assert_eq!(
        (step["handler"].as_str(), step["pods"].as_u64()),
        (Some("warren"), Some(1)),
        "{o}"
    );
    assert!(
        step["run_pod_sandbox_ms"]["median"]
            .as_f64()
            .is_some_and(|m| m > 0.0),
        "{o}"
    );
}
