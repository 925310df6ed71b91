//! `warren daemon` end to end: a real daemon on a temporary socket and state root,
//! driven over the unix socket with curl, checked against the CLI on the same root.

mod common;
mod daemon_client;

use std::time::Duration;

use common::{require_busybox, Env};
use daemon_client::{curl_as, wait_for, Daemon};

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

#[test]
fn the_api_and_the_cli_agree_through_a_zones_life() {
    let env = Env::new();
    let d = Daemon::start(&env, &[]);
    // A template made through the API, then a zone.
    let t = d.json(
        "POST",
        "/1.0/templates",
        Some(r#"{"name":"bb","from":"busybox"}"#),
        201,
    );
    assert_eq!(t["name"], "bb");
    let c = d.json(
        "POST",
        "/1.0/zones",
        Some(r#"{"name":"dz1","template":"bb","set":["memory.max=64M"],"install":true}"#),
        201,
    );
    assert_eq!(c["install"]["changed"], true, "{c}");
    assert_eq!(env.state("dz1"), "installed", "the CLI sees the API's zone");
    let b = d.json("POST", "/1.0/zones/dz1/boot", None, 200);
    assert_eq!(b["changed"], true, "{b}");
    assert_eq!(env.state("dz1"), "running");
    // The listing has the fields of `list --json`, and agrees with it.
    let api = d.json("GET", "/1.0/zones", None, 200);
    let cli: serde_json::Value = serde_json::from_str(&env.ok(&["list", "--json"]).stdout).unwrap();
    assert_eq!(api[0]["name"], cli[0]["name"]);
    assert_eq!(api[0]["state"], "running");
    assert_eq!(api[0]["init_pid"], cli[0]["init_pid"]);
    // Booting a running zone is idempotent, as in the CLI.
    let again = d.json("POST", "/1.0/zones/dz1/boot", Some("{}"), 200);
    assert_eq!(again["changed"], false, "{again}");
    // exec with captured output.
    let x = d.json(
        "POST",
        "/1.0/zones/dz1/exec",
        Some(r#"{"command":["/bin/sh","-c","echo out; echo err >&2; exit 3"]}"#),
        200,
    );
    assert_eq!(
        (
            x["exit_code"].as_i64(),
            x["stdout"].as_str(),
            x["stderr"].as_str()
        ),
        (Some(3), Some("out\n"), Some("err\n"))
    );
    // Config: a live change, read back by the CLI.
    let ch = d.json(
        "PATCH",
        "/1.0/zones/dz1/config",
        Some(r#"{"set":["memory.max=96M"]}"#),
        200,
    );
    assert!(ch["live"].to_string().contains("memory.max"), "{ch}");
    assert!(env
        .ok(&["config", "get", "dz1", "memory.max"])
        .stdout
        .contains("96M"));
    let g = d.json("GET", "/1.0/zones/dz1/config/memory.max", None, 200);
    assert_eq!(g["value"], "96M");
    // A change the CLI makes is seen by the API.
    env.ok(&["config", "set", "dz1", "max-processes=200"]);
    let g = d.json("GET", "/1.0/zones/dz1/config/max-processes", None, 200);
    assert_eq!(g["value"], 200, "{g}");
    // Halt, and the CLI agrees; delete, and it is gone for both.
    let h = d.json(
        "POST",
        "/1.0/zones/dz1/halt",
        Some(r#"{"timeout_s":5}"#),
        200,
    );
    assert_eq!(h["changed"], true);
    assert_eq!(env.state("dz1"), "installed");
    let e = d.json(
        "POST",
        "/1.0/zones/dz1/exec",
        Some(r#"{"command":["true"]}"#),
        409,
    );
    assert_eq!(
        (e["code"].as_str(), e["zone"].as_str()),
        (Some("wrong_state"), Some("dz1"))
    );
    d.json("DELETE", "/1.0/zones/dz1", None, 409);
    d.json("POST", "/1.0/zones/dz1/uninstall", None, 200);
    d.json("DELETE", "/1.0/zones/dz1", None, 200);
    assert_eq!(env.state("dz1"), "absent");
    let gone = d.json("GET", "/1.0/zones/dz1", None, 404);
    assert_eq!(gone["code"], "not_found");
    assert!(
        gone["fix"].as_str().unwrap().contains("warren create dz1"),
        "{gone}"
    );
    d.json("DELETE", "/1.0/templates/bb", None, 200);
}

#[test]
fn errors_are_structured_and_bodies_are_limited() {
    let env = Env::new();
    let d = Daemon::start(&env, &[]);
    let big = format!(r#"{{"name":"{}"}}"#, "a".repeat(2 << 20));
    let e = d.json("POST", "/1.0/zones", Some(&big), 413);
    assert_eq!(e["code"], "payload_too_large");
    let e = d.json("POST", "/1.0/zones", Some("{not json"), 400);
    assert_eq!(
        (e["code"].as_str(), e["field"].as_str()),
        (Some("invalid_input"), Some("body"))
    );
    let e = d.json("POST", "/1.0/zones", Some(r#"{"name":"Bad_Name"}"#), 400);
    assert_eq!(e["code"], "invalid_input");
    assert!(e["message"].as_str().unwrap().contains("Bad_Name"), "{e}");
    zones(&env, &["dz2"]);
    // The same validation and message as `warren config set`.
    let e = d.json(
        "PATCH",
        "/1.0/zones/dz2/config",
        Some(r#"{"set":["memory.max=12X"]}"#),
        400,
    );
    let cli = env.run(&["config", "set", "dz2", "memory.max=12X"]);
    assert_eq!(cli.code, 5);
    assert_eq!(e["field"], "memory.max", "{e}");
    assert_eq!(e["zone"], "dz2");
    assert!(
        cli.stderr.contains(e["message"].as_str().unwrap()),
        "{e} vs {}",
        cli.stderr
    );
    let e = d.json(
        "POST",
        "/1.0/zones/dz2/halt",
        Some(r#"{"timeout_s":"soon"}"#),
        400,
    );
    assert_eq!(e["field"], "body");
    let e = d.json("GET", "/1.0/nowhere", None, 404);
    assert_eq!(e["code"], "not_found");
    let e = d.json("PUT", "/1.0/zones", None, 405);
    assert_eq!(e["code"], "method_not_allowed");
    let e = d.json(
        "POST",
        "/1.0/zones",
        Some(r#"{"name":"dz3","template":"nope"}"#),
        404,
    );
    assert_eq!(e["field"], "template", "{e}");
}

#[test]
fn an_operation_shows_progress_and_cancels_between_zones() {
    let env = Env::new();
    let names = ["do1", "do2", "do3", "do4", "do5", "do6"];
    zones(&env, &names);
    let d = Daemon::start(&env, &[]);
    // Each boot watches its init for 400 ms, so the operation takes seconds.
    let body = format!(r#"{{"verb":"boot","zones":{:?},"watch_ms":400}}"#, names);
    let started = d.json("POST", "/1.0/operations", Some(&body), 202);
    let url = started["operation"].as_str().unwrap().to_string();
    let mut seen_progress = false;
    wait_for(Duration::from_secs(30), "the first zone booted", || {
        let o = d.json("GET", &url, None, 200);
        seen_progress |= o["status"] == "running" && o["total"] == 6;
        o["done"].as_u64().unwrap() >= 1
    });
    assert!(
        seen_progress,
        "the operation was seen running with its total"
    );
    d.json("DELETE", &url, None, 202);
    wait_for(Duration::from_secs(30), "the operation ended", || {
        d.json("GET", &url, None, 200)["status"] != "running"
    });
    let o = d.json("GET", &url, None, 200);
    assert_eq!(o["status"], "cancelled", "{o}");
    let done = o["done"].as_u64().unwrap() as usize;
    assert!((1..6).contains(&done), "cancelled between zones: {o}");
    assert_eq!(o["results"].as_array().unwrap().len(), done, "{o}");
    // Exactly the zones it reached are running, for the CLI too.
    let running = names.iter().filter(|z| env.state(z) == "running").count();
    assert_eq!(running, done, "{o}");
    // Cancelling an ended operation is a conflict; an unknown one is 404.
    assert_eq!(d.json("DELETE", &url, None, 409)["code"], "conflict");
    d.json("GET", "/1.0/operations/op-999", None, 404);
    // Halt all, to completion.
    let h = d.json(
        "POST",
        "/1.0/operations",
        Some(r#"{"verb":"halt","all":true,"timeout_s":2}"#),
        202,
    );
    let hurl = h["operation"].as_str().unwrap().to_string();
    wait_for(Duration::from_secs(60), "the halt operation", || {
        d.json("GET", &hurl, None, 200)["status"] != "running"
    });
    let o = d.json("GET", &hurl, None, 200);
    assert_eq!(
        (o["status"].as_str(), o["done"].as_u64()),
        (Some("success"), Some(done as u64)),
        "{o}"
    );
    assert!(names.iter().all(|z| env.state(z) == "installed"));
}

#[test]
fn the_event_stream_sees_a_boot_by_the_cli() {
    let env = Env::new();
    zones(&env, &["de1", "de2"]);
    let d = Daemon::start(&env, &[]);
    let mut curl = common::ChildGuard(
        std::process::Command::new("curl")
            .args(["-sSN", "--max-time", "60", "--unix-socket"])
            .arg(&d.socket)
            .arg("http://warren/1.0/events?zone=de1&type=lifecycle")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = curl.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    env.ok(&["boot", "de2"]); // filtered out: another zone
    env.ok(&["boot", "de1"]);
    let mut lines = Vec::new();
    let (mut id, mut data) = (None, None);
    while data.is_none() {
        let l = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no boot event within 20 s; got {lines:?}"));
        if let Some(i) = l.strip_prefix("id: ") {
            id = Some(i.to_string());
        }
        if let Some(j) = l.strip_prefix("data: ") {
            let v: serde_json::Value = serde_json::from_str(j).unwrap();
            assert_eq!(v["zone"], "de1", "the zone filter holds: {v}");
            if v["action"] == "booted" {
                data = Some(v);
            }
        }
        lines.push(l);
    }
    drop(curl);
    // The cursor resumes after that event: the halt comes next, the boot does not again.
    env.ok(&["halt", "de1"]);
    let id = id.expect("an id line before the data");
    let out = std::process::Command::new("curl")
        .args(["-sSN", "--max-time", "3", "--unix-socket"])
        .arg(&d.socket)
        .args(["-H", &format!("Last-Event-ID: {id}")])
        .arg("http://warren/1.0/events?zone=de1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"halted\""), "{text}");
    assert!(!text.contains("\"booted\""), "{text}");
}

#[test]
fn a_peer_neither_root_nor_in_group_warren_is_refused() {
    assert!(
        std::path::Path::new("/usr/bin/setpriv").exists(),
        "this test needs setpriv (util-linux)"
    );
    let env = Env::new();
    // The socket mode lets anyone connect: the per-connection check is what refuses.
    let d = Daemon::start(&env, &["--socket-mode", "0666"]);
    let nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    let asks: [(&str, &str, Option<&str>); 2] = [
        ("GET", "/1.0/zones", None),
        ("POST", "/1.0/zones", Some(r#"{"name":"x"}"#)),
    ];
    for (m, p, b) in asks {
        let (status, text) = curl_as(&d.socket, &nobody, m, p, b);
        assert_eq!(status, 403, "{m} {p} as nobody: {text}");
        let e: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(e["code"], "forbidden");
        assert!(e["message"].as_str().unwrap().contains("uid 65534"), "{e}");
    }
    assert_eq!(d.curl("GET", "/1.0/zones", None).0, 200, "root is served");
    // Without --socket-mode the socket is 0600 (0660 with group warren).
    let d2 = Daemon::start(&env, &[]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&d2.socket).unwrap().permissions().mode() & 0o777;
    assert!(mode == 0o600 || mode == 0o660, "socket mode {mode:o}");
}

#[test]
fn zones_outlive_a_killed_daemon_and_the_next_one_recovers() {
    let env = Env::new();
    zones(&env, &["dk1"]);
    let d = Daemon::start(&env, &[]);
    d.json("POST", "/1.0/zones/dk1/boot", None, 200);
    let pid = env.init_pid("dk1");
    let (dir, socket) = d.kill();
    assert!(
        common::alive(pid),
        "the zone's init survived the daemon's SIGKILL"
    );
    assert_eq!(env.state("dk1"), "running");
    // The stale socket file is replaced by the next daemon.
    let d = Daemon::start_at(&env, dir, socket, &[]);
    let z = d.json("GET", "/1.0/zones/dk1", None, 200);
    assert_eq!(
        (z["state"].as_str(), z["init_pid"].as_i64()),
        (Some("running"), Some(pid as i64))
    );
    d.json("POST", "/1.0/zones/dk1/halt", None, 200);
    assert_eq!(env.state("dk1"), "installed");
}

#[test]
fn socket_activation_serves_the_socket_systemd_passes() {
    let sa = "/usr/bin/systemd-socket-activate";
    assert!(
        std::path::Path::new(sa).exists(),
        "this test needs {sa} (package systemd)"
    );
    let env = Env::new();
    zones(&env, &["da1"]);
    let dir = tempfile::Builder::new()
        .prefix("warren-daemon-sa-")
        .tempdir_in("/tmp")
        .unwrap();
    let socket = dir.path().join("activated.sock");
    // systemd-socket-activate binds, then execs the daemon with LISTEN_FDS=1 and
    // LISTEN_PID set: --socket names another path, which must stay unbound.
    let unused = dir.path().join("unused.sock");
    let _d = common::ChildGuard(
        std::process::Command::new(sa)
            .arg("-l")
            .arg(&socket)
            // It passes no environment unless told.
            .arg(format!(
                "--setenv=WARREN_RUN_DIR={}",
                env.root().join("run").display()
            ))
            .arg(daemon_client::daemon_exe())
            .arg("--root")
            .arg(env.root())
            .arg("--oci-root")
            .arg(env.root().join("oci"))
            .arg("--socket")
            .arg(&unused)
            .spawn()
            .unwrap(),
    );
    wait_for(Duration::from_secs(10), "the activated socket", || {
        socket.exists()
    });
    let (status, text) = curl_as(&socket, &[], "GET", "/1.0/zones/da1", None);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"installed\""), "{text}");
    let (status, _) = curl_as(&socket, &[], "POST", "/1.0/zones/da1/boot", Some("{}"));
    assert_eq!(status, 200);
    assert_eq!(env.state("da1"), "running");
    assert!(
        !unused.exists(),
        "with sockets passed, the daemon binds none of its own"
    );
}

#[test]
fn the_other_verbs_and_reads_answer_as_the_cli() {
    let env = Env::new();
    zones(&env, &["dv1"]);
    let d = Daemon::start(&env, &[]);
    // clone, rename, reboot, logs.
    let c = d.json(
        "POST",
        "/1.0/zones/dv1/clone",
        Some(r#"{"name":"dv2"}"#),
        201,
    );
    assert_eq!(
        (c["zone"].as_str(), c["source"].as_str()),
        (Some("dv2"), Some("dv1"))
    );
    assert_eq!(env.state("dv2"), "installed");
    d.json(
        "POST",
        "/1.0/zones/dv2/rename",
        Some(r#"{"name":"dv3"}"#),
        200,
    );
    assert_eq!(
        (env.state("dv2").as_str(), env.state("dv3").as_str()),
        ("absent", "installed")
    );
    d.json("POST", "/1.0/zones/dv3/boot", None, 200);
    let pid = env.init_pid("dv3");
    d.json(
        "POST",
        "/1.0/zones/dv3/reboot",
        Some(r#"{"timeout_s":2}"#),
        200,
    );
    assert_eq!(env.state("dv3"), "running");
    assert_ne!(env.init_pid("dv3"), pid, "a new init after the reboot");
    let (status, logs) = d.curl("GET", "/1.0/zones/dv3/logs?tail=5", None);
    assert_eq!(status, 200, "{logs}");
    let cli_logs = env.ok(&["logs", "dv3", "--tail", "5"]).stdout;
    assert_eq!(logs, cli_logs);
    // Reads: the CLI's --json objects.
    let t = d.json("GET", "/1.0/templates", None, 200);
    assert_eq!(t[0]["name"], "bb");
    let s = d.json("GET", "/1.0/stat?zones=dv3", None, 200);
    assert_eq!(s["zones"][0]["name"], "dv3", "{s}");
    let m = d.json("GET", "/1.0/memstat", None, 200);
    let cli_m: serde_json::Value =
        serde_json::from_str(&env.ok(&["--json", "memstat"]).stdout).unwrap();
    assert_eq!(
        m.as_object().unwrap().keys().collect::<Vec<_>>(),
        cli_m.as_object().unwrap().keys().collect::<Vec<_>>()
    );
    assert!(d.json("GET", "/1.0/info", None, 200).is_object());
    assert!(d.json("GET", "/1.0/swap", None, 200)["areas"].is_array());
    assert!(d.json("GET", "/1.0/agent", None, 200)["defaults"].is_object());
    let doc = d.json("GET", "/1.0/doctor?zones=10", None, 200);
    let cli_doc: serde_json::Value =
        serde_json::from_str(&env.run(&["--json", "doctor", "--zones", "10"]).stdout).unwrap();
    assert_eq!(
        doc.as_object().unwrap().keys().collect::<Vec<_>>(),
        cli_doc.as_object().unwrap().keys().collect::<Vec<_>>()
    );
    // The metrics renderer of the warren crate, in the 0.0.4 text format curl gets.
    let (status, text) = d.curl("GET", "/metrics", None);
    assert_eq!(status, 200, "/metrics: {text}");
    let running = text.lines().any(|l| {
        l.starts_with("warren_zone_state{")
            && l.contains(r#"zone="dv3""#)
            && l.contains(r#"state="running""#)
            && l.ends_with(" 1")
    });
    assert!(running, "/metrics shows dv3 running:\n{text}");
    // The doctor's verdicts come from a child once it ends: tests/daemon_metrics.rs.
    d.json("POST", "/1.0/zones/dv3/halt", None, 200);
}
