//! The daemon's endpoints for the verbs that landed beside it (snapshots, suspend and
//! resume, export and import, templates from a zone or an OCI archive, profiles, gc,
//! proc-views), end to end against a real daemon on a temporary root and checked with
//! the CLI.

#[path = "oci_image/build.rs"]
#[allow(dead_code)]
mod build;
mod common;
mod daemon_client;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{require_busybox, Env};
use daemon_client::{wait_for, Daemon};
use serde_json::Value;

/// A busybox template `bb` and installed zones `names` (made with the CLI).
fn zones(env: &Env, names: &[&str]) {
    require_busybox();
    if !env.root().join("templates/bb").exists() {
        env.ok(&["template", "create", "bb", "--busybox"]);
    }
    for z in names {
        env.ok(&["create", z, "--template", "bb"]);
        env.ok(&["install", z]);
    }
}

/// Run `script` in `zone` through the API; its exit code and stdout.
fn exec(d: &Daemon, zone: &str, script: &str) -> (i64, String) {
    let body = serde_json::json!({ "command": ["/bin/sh", "-c", script] }).to_string();
    let x = d.json("POST", &format!("/1.0/zones/{zone}/exec"), Some(&body), 200);
    (
        x["exit_code"].as_i64().unwrap(),
        x["stdout"].as_str().unwrap().to_string(),
    )
}

/// POST `file` as an `application/octet-stream` body to `path`; the answer as JSON.
fn upload(d: &Daemon, file: &Path, path: &str) -> Value {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "120", "--unix-socket"])
        .arg(&d.socket)
        .args([
            "-X",
            "POST",
            "-H",
            "content-type: application/octet-stream",
            "--data-binary",
        ])
        .arg(format!("@{}", file.display()))
        .arg(format!("http://warren{path}"))
        .output()
        .expect("curl runs (apt-get install curl)");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "POST {path}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Wait for the operation a 202 answered, and return it ended.
fn ended(d: &Daemon, started: &Value, limit: Duration) -> Value {
    let url = started["operation"].as_str().unwrap().to_string();
    wait_for(limit, &format!("operation {url}"), || {
        d.json("GET", &url, None, 200)["status"] != "running"
    });
    d.json("GET", &url, None, 200)
}

#[test]
fn snapshots_restore_files_and_suspend_resume_through_the_api() {
    let env = Env::new();
    zones(&env, &["dv1"]);
    let d = Daemon::start(&env, &[]);
    let s = d.json(
        "POST",
        "/1.0/zones/dv1/snapshots",
        Some(r#"{"name":"s1"}"#),
        201,
    );
    assert_eq!(
        (s["name"].as_str(), s["zone"].as_str()),
        (Some("s1"), Some("dv1")),
        "{s}"
    );
    let cli: Value =
        serde_json::from_str(&env.ok(&["snapshot", "list", "dv1", "--json"]).stdout).unwrap();
    assert_eq!(
        cli[0]["name"], "s1",
        "the CLI sees the API's snapshot: {cli}"
    );
    let l = d.json("GET", "/1.0/zones/dv1/snapshots", None, 200);
    assert_eq!(l.as_array().map(Vec::len), Some(1), "{l}");
    assert_eq!(
        d.json("GET", "/1.0/snapshots", None, 200),
        l,
        "one zone, one snapshot"
    );
    assert_eq!(
        d.json("GET", "/1.0/zones/dv1/snapshots/s1", None, 200)["name"],
        "s1"
    );
    // Change a file, then restore: the file is as it was at the snapshot.
    d.json("POST", "/1.0/zones/dv1/boot", None, 200);
    assert_eq!(exec(&d, "dv1", "echo changed > /etc/marker").0, 0);
    // A file in and out through /files (warren cp), as the zone sees it.
    let put = Command::new("curl")
        .args(["-sS", "--unix-socket"])
        .arg(&d.socket)
        .args([
            "-X",
            "PUT",
            "-H",
            "content-type: application/octet-stream",
            "--data-binary",
            "hello from the API",
        ])
        .arg("http://warren/1.0/zones/dv1/files?path=/etc/greeting&mode=0640")
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&put.stdout).unwrap();
    assert_eq!(r["direction"], "in", "{r}");
    assert_eq!(
        exec(&d, "dv1", "cat /etc/greeting; stat -c ' %a' /etc/greeting"),
        (0, "hello from the API 640\n".into())
    );
    let (status, text) = d.curl("GET", "/1.0/zones/dv1/files?path=/etc/greeting", None);
    assert_eq!((status, text.as_str()), (200, "hello from the API"));
    let e = d.json("GET", "/1.0/zones/dv1/files?path=/no/such", None, 404);
    assert_eq!(e["zone"], "dv1", "{e}");
    let e = d.json("GET", "/1.0/zones/dv1/files?path=etc/x", None, 400);
    assert_eq!(e["field"], "path", "{e}");
    // Suspend and resume, idempotent as the CLI.
    let sp = d.json("POST", "/1.0/zones/dv1/suspend", None, 200);
    assert_eq!(sp["changed"], true, "{sp}");
    assert!(sp["freeze_ms"].is_number(), "the suspend report: {sp}");
    assert_eq!(env.state("dv1"), "suspended");
    assert_eq!(
        d.json("POST", "/1.0/zones/dv1/suspend", None, 200)["changed"],
        false
    );
    let e = d.json(
        "POST",
        "/1.0/zones/dv1/exec",
        Some(r#"{"command":["true"]}"#),
        409,
    );
    assert_eq!(e["code"], "wrong_state", "{e}");
    let rs = d.json("POST", "/1.0/zones/dv1/resume", None, 200);
    assert_eq!(rs["changed"], true, "{rs}");
    assert_eq!(env.state("dv1"), "running");
    assert_eq!(exec(&d, "dv1", "cat /etc/marker"), (0, "changed\n".into()));
    // Restoring a running zone is refused with the state named.
    let e = d.json("POST", "/1.0/zones/dv1/snapshots/s1/restore", None, 409);
    assert_eq!(
        (e["code"].as_str(), e["zone"].as_str()),
        (Some("wrong_state"), Some("dv1")),
        "{e}"
    );
    d.json(
        "POST",
        "/1.0/zones/dv1/halt",
        Some(r#"{"timeout_s":5}"#),
        200,
    );
    let r = d.json("POST", "/1.0/zones/dv1/snapshots/s1/restore", None, 200);
    assert_eq!(r["verb"], "snapshot-restore", "{r}");
    d.json("POST", "/1.0/zones/dv1/boot", None, 200);
    assert_eq!(exec(&d, "dv1", "test -e /etc/marker").0, 1, "restored");
    // Suspending an installed zone is a wrong state; resume of a running one a no-op.
    assert_eq!(
        d.json("POST", "/1.0/zones/dv1/resume", None, 200)["changed"],
        false
    );
    d.json(
        "POST",
        "/1.0/zones/dv1/halt",
        Some(r#"{"timeout_s":5}"#),
        200,
    );
    let e = d.json("POST", "/1.0/zones/dv1/suspend", None, 409);
    assert_eq!(
        (e["code"].as_str(), e["field"].as_str()),
        (Some("wrong_state"), Some("state")),
        "{e}"
    );
    // Clone from the snapshot, one zone and many (an operation with jobs).
    let c = d.json(
        "POST",
        "/1.0/zones/dv1/clone",
        Some(r#"{"name":"dv2","snapshot":"s1"}"#),
        201,
    );
    assert_eq!(c["snapshot"], "s1", "{c}");
    assert_eq!(env.state("dv2"), "installed");
    let op = d.json(
        "POST",
        "/1.0/operations",
        Some(r#"{"verb":"clone","source":"dv1","snapshot":"s1","zones":["dv3","dv4","dv5"],"jobs":2}"#),
        202,
    );
    let o = ended(&d, &op, Duration::from_secs(120));
    assert_eq!(
        (o["status"].as_str(), o["done"].as_u64()),
        (Some("success"), Some(3)),
        "{o}"
    );
    assert!(["dv3", "dv4", "dv5"]
        .iter()
        .all(|z| env.state(z) == "installed"));
    // Errors: structured, naming the zone and the field.
    let e = d.json("GET", "/1.0/zones/dv1/snapshots/nope", None, 404);
    assert_eq!(
        (e["code"].as_str(), e["zone"].as_str(), e["field"].as_str()),
        (Some("not_found"), Some("dv1"), Some("snapshot")),
        "{e}"
    );
    let e = d.json(
        "POST",
        "/1.0/zones/dv1/snapshots",
        Some(r#"{"name":"Bad_Snap"}"#),
        400,
    );
    assert_eq!(
        (e["field"].as_str(), e["zone"].as_str()),
        (Some("snapshot"), Some("dv1")),
        "{e}"
    );
    assert!(e["fix"].as_str().unwrap().contains("a-z"), "{e}");
    let e = d.json("POST", "/1.0/zones/nozone/suspend", None, 404);
    assert_eq!(
        (e["code"].as_str(), e["zone"].as_str()),
        (Some("not_found"), Some("nozone")),
        "{e}"
    );
    let e = d.json("GET", "/1.0/zones/nozone/snapshots", None, 404);
    assert_eq!(e["zone"], "nozone", "{e}");
    let e = d.json(
        "POST",
        "/1.0/zones/dv1/clone",
        Some(r#"{"name":"dv6","snapshot":"nope"}"#),
        404,
    );
    assert_eq!(e["field"], "snapshot", "{e}");
    // The journal has the events the CLI's verbs write, in order.
    let events: Value = serde_json::from_str(&env.ok(&["events", "--json"]).stdout).unwrap();
    let actions: Vec<String> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["zone"] == "dv1")
        .filter_map(|e| e["action"].as_str().map(str::to_string))
        .collect();
    let want = [
        "snapshot-created",
        "suspended",
        "resumed",
        "snapshot-restored",
    ];
    let mut at = actions.iter();
    assert!(
        want.iter().all(|w| at.any(|a| a == w)),
        "the journal has {want:?} in order: {actions:?}"
    );
    // Delete the snapshot: the list is empty for both.
    d.json("DELETE", "/1.0/zones/dv1/snapshots/s1", None, 200);
    assert_eq!(
        d.json("GET", "/1.0/zones/dv1/snapshots", None, 200),
        serde_json::json!([])
    );
    d.json("DELETE", "/1.0/zones/dv1/snapshots/s1", None, 404);
}

#[test]
fn export_then_import_makes_a_zone_that_boots_and_templates_come_from_zones() {
    let env = Env::new();
    zones(&env, &["dx1"]);
    let d = Daemon::start(&env, &[]);
    d.json("POST", "/1.0/zones/dx1/boot", None, 200);
    assert_eq!(exec(&d, "dx1", "echo kept > /etc/marker").0, 0);
    d.json(
        "POST",
        "/1.0/zones/dx1/halt",
        Some(r#"{"timeout_s":5}"#),
        200,
    );
    let file = env.root().join("dx1.tar.zst");
    let body = serde_json::json!({ "path": file }).to_string();
    let op = d.json("POST", "/1.0/zones/dx1/export", Some(&body), 202);
    let o = ended(&d, &op, Duration::from_secs(120));
    assert_eq!(o["status"], "success", "{o}");
    assert!(o["results"][0]["bytes"].as_u64().unwrap() > 0, "{o}");
    assert!(file.is_file());
    let body = serde_json::json!({ "path": file, "name": "dx2" }).to_string();
    let op = d.json("POST", "/1.0/import", Some(&body), 202);
    let o = ended(&d, &op, Duration::from_secs(120));
    assert_eq!(
        (o["status"].as_str(), o["results"][0]["zone"].as_str()),
        (Some("success"), Some("dx2")),
        "{o}"
    );
    assert_eq!(
        env.state("dx2"),
        "installed",
        "the CLI sees the imported zone"
    );
    d.json("POST", "/1.0/zones/dx2/boot", None, 200);
    assert_eq!(exec(&d, "dx2", "cat /etc/marker"), (0, "kept\n".into()));
    d.json(
        "POST",
        "/1.0/zones/dx2/halt",
        Some(r#"{"timeout_s":5}"#),
        200,
    );
    // Importing again under the same name: the operation fails with the zone's error.
    let op = d.json("POST", "/1.0/import", Some(&body), 202);
    let o = ended(&d, &op, Duration::from_secs(60));
    assert_eq!(
        (o["status"].as_str(), o["errors"][0]["code"].as_str()),
        (Some("failure"), Some("conflict")),
        "{o}"
    );
    // The same archive sent as the body: spooled, imported, the spool removed.
    let up = upload(&d, &file, "/1.0/import/upload?name=dx4");
    let o = ended(&d, &up, Duration::from_secs(120));
    assert_eq!(o["status"], "success", "{o}");
    assert_eq!(env.state("dx4"), "installed");
    d.json("POST", "/1.0/zones/dx4/boot", None, 200);
    assert_eq!(exec(&d, "dx4", "cat /etc/marker"), (0, "kept\n".into()));
    d.json(
        "POST",
        "/1.0/zones/dx4/halt",
        Some(r#"{"timeout_s":5}"#),
        200,
    );
    let spooled: Vec<_> = std::fs::read_dir(env.root())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".upload"))
        .collect();
    assert!(
        spooled.is_empty(),
        "the uploaded archive was removed: {spooled:?}"
    );
    let empty = env.root().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let e = upload(&d, &empty, "/1.0/import/upload");
    assert_eq!(
        (e["code"].as_str(), e["field"].as_str()),
        (Some("invalid_input"), Some("body")),
        "{e}"
    );
    let junk = env.root().join("junk");
    std::fs::write(&junk, b"not an archive").unwrap();
    let o = ended(
        &d,
        &upload(&d, &junk, "/1.0/import/upload?name=dx5"),
        Duration::from_secs(60),
    );
    assert_eq!(
        (o["status"].as_str(), o["errors"][0]["code"].as_str()),
        (Some("failure"), Some("invalid_input")),
        "{o}"
    );
    // Paths: relative is refused, a missing archive is 404.
    let e = d.json(
        "POST",
        "/1.0/zones/dx1/export",
        Some(r#"{"path":"rel.tar"}"#),
        400,
    );
    assert_eq!(
        (e["field"].as_str(), e["zone"].as_str()),
        (Some("path"), Some("dx1")),
        "{e}"
    );
    let e = d.json(
        "POST",
        "/1.0/import",
        Some(r#"{"path":"/nonexistent/x.tar.zst"}"#),
        404,
    );
    assert_eq!(e["field"], "path", "{e}");
    // A template from the zone's root, its info, and a zone made from it.
    let t = d.json(
        "POST",
        "/1.0/templates",
        Some(r#"{"name":"fromdx1","from":"zone","zone":"dx1"}"#),
        201,
    );
    assert_eq!(t["name"], "fromdx1", "{t}");
    let i = d.json("GET", "/1.0/templates/fromdx1", None, 200);
    assert_eq!(i["name"], "fromdx1", "{i}");
    let cli: Value =
        serde_json::from_str(&env.ok(&["template", "info", "fromdx1", "--json"]).stdout).unwrap();
    assert_eq!(i, cli, "the API's template info is the CLI's");
    d.json(
        "POST",
        "/1.0/zones",
        Some(r#"{"name":"dx3","template":"fromdx1","install":true}"#),
        201,
    );
    d.json("POST", "/1.0/zones/dx3/boot", None, 200);
    assert_eq!(exec(&d, "dx3", "cat /etc/marker"), (0, "kept\n".into()));
    d.json(
        "POST",
        "/1.0/zones/dx3/halt",
        Some(r#"{"timeout_s":5}"#),
        200,
    );
    let e = d.json(
        "POST",
        "/1.0/templates",
        Some(r#"{"name":"t2","from":"zone"}"#),
        400,
    );
    assert_eq!(e["field"], "zone", "{e}");
    let e = d.json("GET", "/1.0/templates/nope", None, 404);
    assert_eq!(e["field"], "template", "{e}");
    let e = d.json(
        "POST",
        "/1.0/templates",
        Some(r#"{"name":"t3","from":"zone","zone":"nozone"}"#),
        404,
    );
    assert_eq!(e["zone"], "nozone", "{e}");
}

#[test]
fn templates_come_from_oci_archives_with_the_image_chosen() {
    let env = Env::new();
    let d = Daemon::start(&env, &[]);
    let layer = build::tar_of(&[build::dir("etc/"), build::file("etc/from-oci", b"yes")]);
    let opts = build::Opts {
        refs: vec!["localhost/app:1".into(), "localhost/app:2".into()],
        ..Default::default()
    };
    let layout = build::write(&env.root().join("img"), &[(layer, build::Comp::Gzip)], opts);
    let archive = layout.to_tar();
    // Two images: "image" chooses, as --image does, with the CLI's message.
    let body = serde_json::json!({ "name": "ocit", "from": "oci", "path": archive });
    let e = d.json("POST", "/1.0/templates", Some(&body.to_string()), 400);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("choose one with --image"),
        "{e}"
    );
    let body =
        serde_json::json!({ "name": "ocit", "from": "oci", "path": archive, "image": "app:2" });
    let t = d.json("POST", "/1.0/templates", Some(&body.to_string()), 201);
    assert_eq!(t["name"], "ocit", "{t}");
    let i = d.json("GET", "/1.0/templates/ocit", None, 200);
    assert!(
        i.to_string().contains("app:2"),
        "the image is in the manifest: {i}"
    );
    let root = env.root().join("templates/ocit/root/etc/from-oci");
    assert_eq!(std::fs::read_to_string(root).unwrap(), "yes");
    // "image" without "from": "oci", and "oci" without a path, are refused up front.
    let e = d.json(
        "POST",
        "/1.0/templates",
        Some(r#"{"name":"t4","from":"busybox","image":"x"}"#),
        400,
    );
    assert_eq!(e["field"], "image", "{e}");
    let e = d.json(
        "POST",
        "/1.0/templates",
        Some(r#"{"name":"t5","from":"oci"}"#),
        400,
    );
    assert_eq!(e["field"], "path", "{e}");
    d.json("DELETE", "/1.0/templates/ocit", None, 200);
}

#[test]
fn profiles_and_gc_through_the_api() {
    let env = Env::new();
    zones(&env, &[]);
    let d = Daemon::start(&env, &[]);
    let body = r#"{"name":"small","set":["memory.max=64M"]}"#;
    d.json("POST", "/1.0/profiles", Some(body), 201);
    let e = d.json("POST", "/1.0/profiles", Some(body), 409);
    assert_eq!(e["code"], "conflict", "{e}");
    let cli: Value = serde_json::from_str(&env.ok(&["profile", "list", "--json"]).stdout).unwrap();
    assert_eq!(d.json("GET", "/1.0/profiles", None, 200), cli);
    d.json(
        "PATCH",
        "/1.0/profiles/small",
        Some(r#"{"set":["max-processes=100"]}"#),
        200,
    );
    d.json(
        "PATCH",
        "/1.0/profiles/small",
        Some(r#"{"unset":["memory.max"]}"#),
        200,
    );
    let p = d.json("GET", "/1.0/profiles/small", None, 200);
    assert_eq!(p["config"]["max-processes"], 100, "{p}");
    assert!(p["config"].get("memory.max").is_none(), "{p}");
    // A zone made with it through the API has its keys.
    d.json(
        "POST",
        "/1.0/zones",
        Some(r#"{"name":"dp1","template":"bb","profiles":["small"]}"#),
        201,
    );
    assert!(env
        .ok(&["config", "get", "dp1", "max-processes"])
        .stdout
        .contains("100"));
    d.json("DELETE", "/1.0/profiles/small", None, 200);
    let e = d.json("GET", "/1.0/profiles/small", None, 404);
    assert_eq!(e["code"], "not_found", "{e}");
    let e = d.json("POST", "/1.0/profiles", Some(r#"{"name":"Bad_P"}"#), 400);
    assert_eq!(e["field"], "profile name", "{e}");
    let e = d.json("PATCH", "/1.0/profiles/small", Some("{}"), 400);
    assert_eq!(e["field"], "set", "{e}");
    // proc-views of a running zone, as the CLI's; a refresh answers the same rows.
    d.json("POST", "/1.0/zones/dp1/install", None, 200);
    d.json("POST", "/1.0/zones/dp1/boot", None, 200);
    let v = d.json("GET", "/1.0/proc-views", None, 200);
    let cli: Value = serde_json::from_str(&env.ok(&["proc-views", "--json"]).stdout).unwrap();
    assert_eq!(v, cli, "the API's proc-views are the CLI's");
    assert_eq!(v.as_array().map(Vec::len), Some(1), "one running zone: {v}");
    let r = d.json("POST", "/1.0/proc-views", None, 200);
    assert_eq!(r.as_array().map(Vec::len), Some(1), "{r}");
    d.json(
        "POST",
        "/1.0/zones/dp1/halt",
        Some(r#"{"timeout_s":5}"#),
        200,
    );
    // gc: its report, as the CLI's.
    let g = d.json("POST", "/1.0/gc", None, 200);
    for k in ["removed", "incomplete", "skipped", "repaired"] {
        assert!(g[k].is_array(), "{k}: {g}");
    }
}
