//! Issue 19, item 2, for unix sockets (docs/suspend.md, "Wake on connection"): a
//! client that connects to a suspended zone's listening unix socket — in the zone's
//! filesystem, reached from the host through the zone's root — waits on the listener,
//! `warren agent` sees it with a sock_diag dump and resumes the zone, and the
//! connection is answered. The added latency of that first request is printed.
//!
//! Wake on growth only: a connection the zone left unaccepted before its suspension
//! does not wake it (the suspension records the queues as the baseline), a new one does.
//!
//! One wait for all suspended zones: the agent holds a suspended zone's listening
//! sockets (`pidfd_getfd`) in one epoll set, a connection wakes the zone at once, and
//! the agent's duplicates never outlive the suspension (a halted zone's port is free);
//! with too few descriptors it sweeps instead, and says so.

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

/// The pid (host's view) of the zone's process whose command line mentions `needle`.
fn zone_process(env: &Env, zone: &str, needle: &str) -> i32 {
    for (_, dir) in env.cgroup_dirs(zone) {
        let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
            continue;
        };
        for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmd).contains(needle) {
                return pid;
            }
        }
    }
    panic!("no process of zone '{zone}' runs {needle}");
}

/// A unix-socket server in a host-network zone that listens at `/tmp/NAME.sock` and
/// accepts nothing until it gets SIGUSR1 (so a connection can be left waiting), then
/// answers each request with `pong:` and what it read. Returns the socket's path as the
/// host reaches it.
fn gated_server(env: &Env, zone: &str, name: &str) -> std::path::PathBuf {
    let server = format!(
        "import socket, os, signal\n\
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])\n\
        p = '/tmp/{name}.sock'\n\
        if os.path.exists(p): os.unlink(p)\n\
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
        s.bind(p)\n\
        s.listen(16)\n\
        signal.sigwait([signal.SIGUSR1])\n\
        while True:\n\
        \x20   c, _ = s.accept()\n\
        \x20   try: c.sendall(b'pong:' + c.recv(64))\n\
        \x20   except OSError: pass\n\
        \x20   c.close()\n"
    );
    let file = env.root().join(format!("{name}.py"));
    std::fs::write(&file, server).unwrap();
    env.ok(&[
        "cp",
        file.to_str().unwrap(),
        &format!("{zone}:/tmp/{name}_server.py"),
    ]);
    let r = env.sh(
        zone,
        &format!("python3 /tmp/{name}_server.py </dev/null >/dev/null 2>&1 & echo started"),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let path = Path::new("/proc")
        .join(env.init_pid(zone).to_string())
        .join(format!("root/tmp/{name}.sock"));
    let t = Instant::now();
    // Listening once a connect succeeds (it then waits in the backlog; dropped here).
    while UnixStream::connect(&path).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the zone's server did not listen at {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    path
}

fn wakes(env: &Env, zone: &str) -> usize {
    let evs: serde_json::Value =
        serde_json::from_str(&env.ok(&["events", "--json", "--type", "agent"]).stdout).unwrap();
    evs.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "wake" && e["zone"] == zone)
        .count()
}

/// A tenant that left a connection unaccepted before its suspension is not woken for
/// it at every tick (freeze/thaw churn): the suspension records each socket's queue
/// and the agent wakes on growth only. A new connection then wakes the zone, and both
/// are answered.
#[test]
fn a_connection_left_waiting_at_suspension_does_not_wake_the_zone_but_a_new_one_does() {
    let env = Env::new();
    env.host_zone("held", &[]);
    env.ok(&["boot", "held"]);
    let path = gated_server(&env, "held", "held");
    // The probe connection of gated_server is left unaccepted; one more, with a request.
    let mut first = UnixStream::connect(&path).unwrap();
    first.write_all(b"one").unwrap();
    env.ok(&["suspend", "held"]);
    let queues = env.runtime("held")["suspension"]["socket_queues"].clone();
    let recorded: Vec<u64> = queues
        .as_object()
        .unwrap_or_else(|| panic!("no socket_queues in the suspension record: {queues}"))
        .values()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(
        recorded,
        vec![2],
        "the listener's two waiting connections, as recorded at suspension"
    );
    let _agent = agent(&env);
    // Some 75 ticks of 20 ms, and several re-reads of the suspended zones.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        env.state("held"),
        "suspended",
        "woken for connections that were already waiting at suspension"
    );
    assert_eq!(wakes(&env, "held"), 0);
    // Let the server accept once it runs again (the signal waits while it is frozen).
    let server = zone_process(&env, "held", "held_server.py");
    sigusr1(server);
    let (_, out) = ask(&path, Duration::from_secs(20)).expect("a new connection after suspend");
    assert_eq!(out, "pong:ping");
    assert_eq!(env.state("held"), "running");
    assert_eq!(wakes(&env, "held"), 1);
    // The connection that waited through the suspension was not lost.
    first
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut got = String::new();
    first.read_to_string(&mut got).unwrap();
    assert_eq!(got, "pong:one");
}

fn sigusr1(pid: i32) {
    let r = std::process::Command::new("kill")
        .args(["-USR1", &pid.to_string()])
        .status()
        .unwrap();
    assert!(r.success(), "kill -USR1 {pid}");
}

/// The inodes of the sockets process `pid` holds.
fn sockets_of(pid: u32) -> Vec<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let t = std::fs::read_link(e.path()).ok()?;
                    let t = t.to_string_lossy();
                    t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Wait (at most 20 s) until `cond` holds.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(20), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A TCP server on 127.0.0.1:`port` in a host-network zone, answering `pong:` and
/// what it read (with SO_REUSEADDR, as servers do: its port is free again once its
/// listener is gone, whatever connections linger in TIME-WAIT).
fn tcp_server(env: &Env, zone: &str, port: u16) {
    let server = format!(
        "import socket\n\
        s = socket.socket()\n\
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
        s.bind(('127.0.0.1', {port}))\n\
        s.listen(16)\n\
        while True:\n\
        \x20   c, _ = s.accept()\n\
        \x20   try: c.sendall(b'pong:' + c.recv(64))\n\
        \x20   except OSError: pass\n\
        \x20   c.close()\n"
    );
    let file = env.root().join("tcp_server.py");
    std::fs::write(&file, server).unwrap();
    env.ok(&[
        "cp",
        file.to_str().unwrap(),
        &format!("{zone}:/tmp/tcp_server.py"),
    ]);
    let r = env.sh(
        zone,
        "python3 /tmp/tcp_server.py </dev/null >/dev/null 2>&1 & echo started",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    until("the zone's TCP server listens", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

fn tcp_ask(port: u16) -> std::io::Result<(Duration, String)> {
    let t = Instant::now();
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port))?;
    c.set_read_timeout(Some(Duration::from_secs(20)))?;
    c.write_all(b"ping")?;
    let mut out = String::new();
    c.read_to_string(&mut out)?;
    Ok((t.elapsed(), out))
}

/// A loopback port nobody listens on now (the zone's server takes it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The agent holds a suspended zone's listener in its one epoll set (a duplicate in
/// its own descriptor table), wakes the zone at the first connection, and lets go of
/// the duplicate when it wakes it and when the zone is halted: the port is free again.
#[test]
fn the_agent_holds_a_suspended_zones_listener_and_never_keeps_it_past_a_halt() {
    let env = Env::new();
    env.host_zone("hold", &["net=host"]);
    env.ok(&["boot", "hold"]);
    let port = free_port();
    tcp_server(&env, "hold", port);
    let server = zone_process(&env, "hold", "tcp_server.py") as u32;
    // Its listener (the only socket it holds while no client is connected).
    let listener = sockets_of(server);
    assert_eq!(listener.len(), 1, "{listener:?}");
    env.ok(&["suspend", "hold"]);
    let agent = agent(&env);
    let apid = agent.0.id();
    until("the agent holds the zone's listener", || {
        sockets_of(apid).contains(&listener[0])
    });
    let (woken, out) = tcp_ask(port).expect("the first request after suspend");
    assert_eq!(out, "pong:ping");
    assert_eq!(env.state("hold"), "running");
    eprintln!(
        "first TCP request to a suspended zone held in the one wait: {:.1} ms (load: {})",
        woken.as_secs_f64() * 1000.0,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    until("the agent let go of the woken zone's listener", || {
        !sockets_of(apid).contains(&listener[0])
    });
    let evs: serde_json::Value =
        serde_json::from_str(&env.ok(&["events", "--json", "--type", "agent"]).stdout).unwrap();
    assert!(
        evs.as_array().unwrap().iter().any(|e| e["action"] == "wake"
            && e["zone"] == "hold"
            && e["reason"] == "a client is waiting on a TCP socket"),
        "{evs}"
    );
    // Suspended and held again, then halted: the duplicate must not keep the port.
    env.ok(&["suspend", "hold"]);
    until("the agent holds the listener again", || {
        sockets_of(apid).contains(&listener[0])
    });
    env.ok(&["halt", "hold"]);
    until("the agent let go of the halted zone's listener", || {
        !sockets_of(apid).contains(&listener[0])
    });
    let t = Instant::now();
    while let Err(e) = std::net::TcpListener::bind(("127.0.0.1", port)) {
        if t.elapsed() > Duration::from_secs(20) {
            let ss = std::process::Command::new("ss")
                .args(["-tanpe"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let mine: Vec<&str> = ss
                .lines()
                .filter(|l| l.contains(&format!(":{port} ")))
                .collect();
            panic!("the halted zone's port {port} is still bound ({e}): {mine:#?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(wakes(&env, "hold"), 1, "the halt is not a wake");
}

/// With too few descriptors to hold a zone's sockets the agent sweeps that zone every
/// tick instead, says so, and still wakes it.
#[test]
fn an_agent_without_descriptors_to_spare_sweeps_and_says_so() {
    let env = Env::new();
    env.host_zone("swept", &["net=host"]);
    env.ok(&["boot", "swept"]);
    let port = free_port();
    tcp_server(&env, "swept", port);
    let listener = sockets_of(zone_process(&env, "swept", "tcp_server.py") as u32);
    env.ok(&["suspend", "swept"]);
    let cfg = env.root().join("agent.toml");
    std::fs::write(
        &cfg,
        "interval-ms = 20\nwake-scan-s = 0.2\n[available]\ntrigger = 0.0\nclear = 0.0\ngrace-s = 0.0\n",
    )
    .unwrap();
    let log = env.root().join("agent.log");
    let base = env.cmd();
    // RLIMIT_NOFILE 260: the agent keeps 256 for its own work, so it can hold nothing.
    let mut c = std::process::Command::new("prlimit");
    c.args(["--nofile=260:260", common::WARREN, "agent", "--config"])
        .arg(&cfg);
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::process::Stdio::null());
    let agent = ChildGuard(c.spawn().unwrap());
    until("the agent says it sweeps the zone", || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("0 suspended zones held in one wait")
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("1 swept every tick: raise the agent's descriptor limit"),
        "{text}"
    );
    assert!(!sockets_of(agent.0.id()).contains(&listener[0]));
    let (_, out) = tcp_ask(port).expect("the first request after suspend");
    assert_eq!(out, "pong:ping");
    assert_eq!(env.state("swept"), "running");
    assert_eq!(wakes(&env, "swept"), 1);
}
