//! Issue 19, item 2, for unix sockets (docs/suspend.md, "Wake on connection"): a
//! client that connects to a suspended zone's listening unix socket — in the zone's
//! filesystem, reached from the host through the zone's root — waits on the listener,
//! `warren agent` sees it with a sock_diag dump and resumes the zone, and the
//! connection is answered. The added latency of that first request is printed.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{ChildGuard, Env};

/// One request over the unix socket at `path`: (connect to last byte, the answer).
fn ask(path: &Path, timeout: Duration) -> std::io::Result<(Duration, String)> {
    let t = Instant::now();
    let mut c = UnixStream::connect(path)?;
    c.set_read_timeout(Some(timeout))?;
    c.write_all(b"ping")?;
    let mut out = String::new();
    c.read_to_string(&mut out)?;
    Ok((t.elapsed(), out))
}

/// The zone runs a unix-socket echo server; start `warren agent` (20 ms ticks).
fn agent(env: &Env) -> ChildGuard {
    let cfg = env.root().join("agent.toml");
    std::fs::write(
        &cfg,
        "interval-ms = 20\nwake-scan-s = 0.2\n[available]\ntrigger = 0.0\nclear = 0.0\ngrace-s = 0.0\n",
    )
    .unwrap();
    ChildGuard(
        env.cmd()
            .args(["agent", "--config", cfg.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    )
}

#[test]
fn a_unix_socket_connection_wakes_a_suspended_zone_and_is_answered() {
    let env = Env::new();
    // A host-network zone: its unix listeners sit among the host's in one namespace,
    // so the agent must pick the zone's own by inode.
    env.host_zone("usock", &[]);
    env.ok(&["boot", "usock"]);
    let server = "import socket, os\n\
        p = '/tmp/wake.sock'\n\
        if os.path.exists(p): os.unlink(p)\n\
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
        s.bind(p)\n\
        s.listen(16)\n\
        while True:\n\
        \x20   c, _ = s.accept()\n\
        \x20   c.sendall(b'pong:' + c.recv(64))\n\
        \x20   c.close()\n";
    std::fs::write(env.root().join("server.py"), server).unwrap();
    env.ok(&[
        "cp",
        env.root().join("server.py").to_str().unwrap(),
        "usock:/tmp/server.py",
    ]);
    let r = env.sh(
        "usock",
        "python3 /tmp/server.py </dev/null >/dev/null 2>&1 & echo started",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The socket as a host client reaches it: through the zone's root.
    let path = Path::new("/proc")
        .join(env.init_pid("usock").to_string())
        .join("root/tmp/wake.sock");
    let t = Instant::now();
    let warm = loop {
        match ask(&path, Duration::from_secs(2)) {
            Ok((d, out)) if out == "pong:ping" => break d,
            _ if t.elapsed() < Duration::from_secs(20) => {
                std::thread::sleep(Duration::from_millis(100))
            }
            r => panic!(
                "the zone's unix server did not answer at {}: {r:?}",
                path.display()
            ),
        }
    };
    env.ok(&["suspend", "usock"]);
    let _agent = agent(&env);
    // Let the agent read the list of suspended zones (and the zone's sockets) first.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(env.state("usock"), "suspended");
    let (woken, out) =
        ask(&path, Duration::from_secs(20)).expect("the first request after suspend");
    assert_eq!(out, "pong:ping");
    assert_eq!(env.state("usock"), "running");
    eprintln!(
        "first unix-socket request to a suspended zone: {:.1} ms (a warm request: {:.1} ms; load: {})",
        woken.as_secs_f64() * 1000.0,
        warm.as_secs_f64() * 1000.0,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let evs: serde_json::Value =
        serde_json::from_str(&env.ok(&["events", "--json", "--type", "agent"]).stdout).unwrap();
    assert!(
        evs.as_array().unwrap().iter().any(|e| e["action"] == "wake"
            && e["zone"] == "usock"
            && e["reason"].as_str().unwrap_or("").contains("unix socket")),
        "{evs}"
    );
    // Suspended again with nobody connecting: the agent leaves it suspended.
    env.ok(&["suspend", "usock"]);
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        env.state("usock"),
        "suspended",
        "woken with no client waiting"
    );
}
