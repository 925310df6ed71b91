//! The host verbs through the daemon on a temporary root: `POST`/`DELETE /1.0/swap`
//! (a small swap file in the test's root, turned off and removed by a guard also on
//! failure).

mod common;
mod daemon_client;

use std::process::Command;
use std::time::Duration;

use common::{require_root, Env};
use daemon_client::Daemon;

/// Turns off and removes the test's swap file and restores vm.swappiness, also on
/// panic (the API's DELETE is what the test checks; this is the net under it).
struct SwapGuard {
    file: std::path::PathBuf,
    swappiness: String,
}

impl Drop for SwapGuard {
    fn drop(&mut self) {
        let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
        if swaps.contains(self.file.to_str().unwrap()) {
            let _ = Command::new("swapoff").arg(&self.file).status();
        }
        let _ = std::fs::remove_file(&self.file);
        let now = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap_or_default();
        if now != self.swappiness {
            let _ = std::fs::write("/proc/sys/vm/swappiness", self.swappiness.trim());
        }
    }
}

#[test]
fn swap_is_enabled_and_disabled_through_the_api() {
    require_root();
    let env = Env::new();
    let d = Daemon::start(&env, &[]);
    let file = env.root().join("swap/swapfile");
    let _guard = SwapGuard {
        file: file.clone(),
        swappiness: std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap(),
    };
    // Refused before anything is made: a bad size, a relative file, both kinds.
    let e = d.json("POST", "/1.0/swap", Some(r#"{"size":"12X"}"#), 400);
    assert_eq!(e["field"], "size", "{e}");
    let e = d.json(
        "POST",
        "/1.0/swap",
        Some(r#"{"size":"16M","file":"rel/swap"}"#),
        400,
    );
    assert_eq!(e["field"], "file", "{e}");
    let e = d.json(
        "POST",
        "/1.0/swap",
        Some(r#"{"size":"16M","file":"/tmp/x","zram":true}"#),
        400,
    );
    assert_eq!(e["field"], "file", "{e}");
    assert!(!file.exists(), "a refused enable made {}", file.display());

    let before = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let r = d.json(
        "POST",
        "/1.0/swap",
        Some(r#"{"size":"16M","swappiness":61}"#),
        200,
    );
    assert_eq!(r["changed"], true, "{r}");
    assert_eq!(r["size_bytes"], 16u64 << 20, "{r}");
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    assert!(swaps.contains(file.to_str().unwrap()), "{swaps}");
    // The CLI sees the swap the API enabled (the same record in the root).
    let s = env.ok(&["swap", "status", "--json"]).stdout;
    assert!(s.contains(file.to_str().unwrap()), "{s}");
    let st = d.json("GET", "/1.0/swap", None, 200);
    assert_eq!(st["warren"]["path"], file.to_str().unwrap(), "{st}");
    // Enabling again changes nothing.
    let r = d.json("POST", "/1.0/swap", Some(r#"{"size":"16M"}"#), 200);
    assert_eq!(r["changed"], false, "{r}");

    let r = d.json("DELETE", "/1.0/swap", None, 200);
    assert_eq!(r["changed"], true, "{r}");
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    assert!(!swaps.contains(file.to_str().unwrap()), "{swaps}");
    assert!(!file.exists(), "the swap file is left: {}", file.display());
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap(),
        before,
        "vm.swappiness restored"
    );
    let r = d.json("DELETE", "/1.0/swap", None, 200);
    assert_eq!(r["changed"], false, "{r}");
}

/// The pids of processes whose command line contains `needle`.
fn pids_with(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(needle) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn the_agent_runs_as_an_operation_one_per_root_until_cancelled() {
    require_root();
    let env = Env::new();
    let d = Daemon::start(&env, &[]);
    let root = env.root().display().to_string();
    // A config that is not the agent's is refused before anything runs.
    let e = d.json(
        "POST",
        "/1.0/agent",
        Some(r#"{"config":"[available]\ntrigger = 20.0\nclear = 10.0\n"}"#),
        400,
    );
    assert_eq!(e["field"], "config", "{e}");
    // A trigger every host crosses (less than 100% of memory available), in a dry run:
    // the agent's lines appear as the operation's progress.
    let op = d.json(
        "POST",
        "/1.0/agent",
        Some(r#"{"dry_run":true,"config":"interval-ms = 100\n[available]\ntrigger = 100.0\nclear = 100.0\n"}"#),
        202,
    );
    let url = op["operation"].as_str().unwrap().to_string();
    let mut seen = serde_json::Value::Null;
    daemon_client::wait_for(Duration::from_secs(60), "the agent's first lines", || {
        seen = d.json("GET", &url, None, 200);
        assert_eq!(seen["status"], "running", "{seen}");
        seen["progress"]["last"]["crossed"] == "available"
    });
    // One agent per root: a second operation, and a CLI agent, are refused.
    let e = d.json("POST", "/1.0/agent", Some(r#"{"dry_run":true}"#), 409);
    assert_eq!(e["code"], "conflict", "{e}");
    env.run(&["agent", "--dry-run", "--once"])
        .fails(6, "another agent is running");
    let agents = pids_with(&format!("{root}\0--json\0agent"));
    assert_eq!(agents.len(), 1, "one agent process: {agents:?}");
    d.json("DELETE", &url, None, 202);
    daemon_client::wait_for(Duration::from_secs(60), "the cancelled agent", || {
        d.json("GET", &url, None, 200)["status"] != "running"
    });
    let o = d.json("GET", &url, None, 200);
    assert_eq!(o["status"], "cancelled", "{o}");
    assert_eq!(o["results"][0]["agent"], "stopped", "stopped cleanly: {o}");
    assert!(
        !common::alive(agents[0]),
        "the agent (pid {}) is still running",
        agents[0]
    );
    // An agent whose daemon is killed outright stops too (it asked for SIGTERM when
    // its parent dies), and frees the root.
    let op = d.json("POST", "/1.0/agent", Some(r#"{"dry_run":true}"#), 202);
    let url = op["operation"].as_str().unwrap().to_string();
    daemon_client::wait_for(Duration::from_secs(60), "the second agent", || {
        d.json("GET", &url, None, 200)["progress"]["last"]["agent"] == "started"
    });
    let agents = pids_with(&format!("{root}\0--json\0agent"));
    assert_eq!(agents.len(), 1, "one agent process: {agents:?}");
    drop(d.kill());
    daemon_client::wait_for(
        Duration::from_secs(30),
        "the orphaned agent to stop",
        || !common::alive(agents[0]),
    );
    // The root is free again: a CLI agent may run.
    let cfg = env.root().join("agent-once.toml");
    std::fs::write(&cfg, "interval-ms = 100\nwindow-s = 1.0\n").unwrap();
    env.ok(&[
        "agent",
        "--dry-run",
        "--once",
        "--config",
        cfg.to_str().unwrap(),
    ]);
}
