//! What tests/escape_net.rs uses: the bridge guard, zones as the test sees them, the
//! frame tool run inside zones (frames.py), the sniffer, the host-side observers
//! (UDP sockets, the ARP table, IPv6 addresses and routes) and the printed table.

use std::net::{Ipv4Addr, UdpSocket};
use std::process::{Child, Stdio};
use std::time::Duration;

use super::common::{Env, Run};
use warren::net::filter;
use warren::net::netlink::Netlink;

pub const FRAMES: &str = include_str!("frames.py");
pub const CLASS: &str = "7 bridge";

/// Deletes its bridge, every port left on it and its nftables table when dropped.
/// Declare it before the `Env`, so the zones are halted first.
pub struct BridgeGuard {
    pub name: String,
}

impl BridgeGuard {
    pub fn new(tag: &str) -> BridgeGuard {
        let name = format!("we{:x}{tag}", std::process::id());
        assert!(name.len() <= 15, "{name}");
        BridgeGuard { name }
    }
}

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        if let Ok(mut nl) = Netlink::open() {
            for port in ports(&self.name) {
                let _ = nl.delete_link(&port);
            }
            let _ = nl.delete_link(&self.name);
        }
        let _ = filter::remove_table(&self.name);
    }
}

pub fn ports(bridge: &str) -> Vec<String> {
    std::fs::read_dir(format!("/sys/class/net/{bridge}/brif"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Kills (only) the `warren login` this test started, even on panic.
pub struct Sniffer(pub Option<Child>);

impl Drop for Sniffer {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One booted bridged zone as the test sees it.
pub struct Zone {
    pub ip: Ipv4Addr,
    pub veth: String,
    pub mac: String,
    pub ll: String,
    /// `ll` as `/proc/net/if_inet6` writes it.
    pub ll_hex: String,
}

pub fn zone(env: &Env, name: &'static str) -> Zone {
    let net = &env.runtime(name)["net"];
    let veth = net["veth"].as_str().unwrap().to_string();
    let m = filter::zone_mac(&veth);
    Zone {
        ip: net["address"].as_str().unwrap().parse().unwrap(),
        mac: m.map(|b| format!("{b:02x}")).join(":"),
        ll: filter::link_local(m).to_string(),
        ll_hex: filter::link_local(m)
            .octets()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        veth,
    }
}

pub fn bridged(bridge: &str, subnet: &str, extra: &[&str]) -> Vec<String> {
    let mut v = vec![
        "net=bridge".to_string(),
        format!("net-bridge={bridge}"),
        format!("net-subnet={subnet}"),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

pub fn make(env: &Env, name: &str, sets: &[String]) {
    let s: Vec<&str> = sets.iter().map(String::as_str).collect();
    env.host_zone(name, &s);
}

pub fn py(env: &Env, zone: &str, args: &[&str]) -> Run {
    assert!(
        std::path::Path::new("/usr/bin/python3").exists(),
        "this test forges frames inside zones with the host's /usr/bin/python3 (the host template shares /usr): apt-get install python3 (scripts/test.sh does)"
    );
    let mut a = vec!["login", zone, "--", "/usr/bin/python3", "-c", FRAMES];
    a.extend_from_slice(args);
    let r = env.run(&a);
    assert_eq!(
        r.code, 0,
        "frames.py {args:?} in zone '{zone}' failed: {} {}",
        r.stdout, r.stderr
    );
    r
}

pub fn send(env: &Env, zone: &str, kind: &str, kv: &[String]) {
    let mut a = vec!["send", kind];
    a.extend(kv.iter().map(String::as_str));
    py(env, zone, &a);
}

/// Start watching `zone`'s eth0 for `secs` seconds; returns once it listens.
pub fn sniff(env: &Env, zone: &str, secs: u32) -> Sniffer {
    use std::io::Read;
    let mut child = env
        .cmd()
        .args([
            "login",
            zone,
            "--",
            "/usr/bin/python3",
            "-c",
            FRAMES,
            "sniff",
        ])
        .arg(secs.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"ready\n") {
        match out.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            _ => panic!(
                "the sniffer in zone '{zone}' did not start: {}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
    child.stdout = Some(out);
    Sniffer(Some(child))
}

/// The markers the sniffer saw. Zone `from` (or the host, for `None`) sends WMKzz to
/// `to` first: it goes after the attempts, so once the sniffer has it, every earlier
/// frame that got through has arrived too (and the sniffer stops).
pub fn seen(env: &Env, from: Option<&str>, to: Ipv4Addr, mut s: Sniffer) -> Vec<String> {
    match from {
        Some(zone) => {
            py(env, zone, &["udp", &to.to_string(), "9", "WMKzz"]);
        }
        None => {
            let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
            for _ in 0..3 {
                let _ = sock.send_to(b"WMKzz", (to, 9));
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    let from = from.unwrap_or("the host");
    let child = s.0.take().unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("seen"))
        .unwrap_or_else(|| {
            panic!(
                "the sniffer printed no result: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let marks: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    assert!(
        marks.iter().any(|m| m == "WMKzz"),
        "the sniffer stopped before the last frame from {from} arrived: {marks:?}"
    );
    marks
}

/// A UDP socket on the gateway address, to see what reaches the host.
pub fn host_listener(gw: Ipv4Addr) -> (UdpSocket, u16) {
    let s = UdpSocket::bind((gw, 0)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let port = s.local_addr().unwrap().port();
    (s, port)
}

pub fn received(s: &UdpSocket) -> Vec<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    while let Ok(n) = s.recv(&mut buf) {
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    got
}

/// The host's ARP entry for `ip` on `dev`: its MAC, if complete.
pub fn neighbour(ip: Ipv4Addr, dev: &str) -> Option<String> {
    let t = std::fs::read_to_string("/proc/net/arp").unwrap();
    t.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 6 && f[0] == ip.to_string() && f[5] == dev && f[2] == "0x2")
            .then(|| f[3].to_string())
    })
}

/// Make the host resolve `ip` (send it a datagram) and wait for the entry.
pub fn resolve(ip: Ipv4Addr, dev: &str) -> Option<String> {
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    for _ in 0..30 {
        let _ = s.send_to(b"x", (ip, 9));
        if let Some(m) = neighbour(ip, dev) {
            return Some(m);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

pub fn bridge_mac(bridge: &str) -> String {
    std::fs::read_to_string(format!("/sys/class/net/{bridge}/address"))
        .unwrap()
        .trim()
        .to_string()
}

/// Lines of `/proc/net/if_inet6` and `/proc/net/ipv6_route` (host or zone).
pub fn v6_state(text: &str, dev: &str) -> (bool, bool) {
    let mut prefix_addr = false;
    let mut default_route = false;
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 6 && f[5] == dev && f[0].starts_with("20010db8") {
            prefix_addr = true;
        }
        if f.len() == 10
            && f[9] == dev
            && f[0] == "00000000000000000000000000000000"
            && f[1] == "00"
            && f[4] != "00000000000000000000000000000000"
        {
            default_route = true;
        }
    }
    (prefix_addr, default_route)
}

pub struct Table {
    pub rows: Vec<(String, String, String, bool)>,
}

impl Table {
    pub fn row(&mut self, attempt: &str, expected: &str, result: String, ok: bool) {
        self.rows
            .push((attempt.to_string(), expected.to_string(), result, ok));
    }

    pub fn finish(self) {
        let w0 = self.rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let w1 = self.rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        println!(
            "{:8} | {:w0$} | {:w1$} | result",
            "class", "attempt", "expected"
        );
        for (attempt, expected, result, ok) in &self.rows {
            let mark = if *ok { "ok" } else { "FAILED" };
            println!("{CLASS:8} | {attempt:w0$} | {expected:w1$} | {mark}: {result}");
        }
        let failed: Vec<String> = self
            .rows
            .iter()
            .filter(|r| !r.3)
            .map(|r| format!("class 7: {}", r.0))
            .collect();
        assert!(failed.is_empty(), "not denied as expected: {failed:?}");
    }
}
