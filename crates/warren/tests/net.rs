//! Zone networking on the real kernel: bridged zones talk to each other (ICMP and TCP),
//! `none` zones have only loopback, `host` zones share the host's stack, addresses are
//! unique under parallel boots, halts free everything, bad configs are refused.
//!
//! Every test uses its own bridge and subnet (a test never touches `warren0`) and a
//! [`BridgeGuard`] that deletes the bridge and any veth left on it, also on panic.
//! Traffic goes only between namespaces the test made.

mod common;

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{alive, Env};
use warren::net::netlink::Netlink;

/// Deletes its bridge and every port left on it when dropped. Declare it *before* the
/// `Env`, so the zones are halted (Env drops first) before the bridge goes.
struct BridgeGuard {
    name: String,
}

impl BridgeGuard {
    fn new(tag: &str) -> BridgeGuard {
        let name = format!("wt{:x}{tag}", std::process::id());
        assert!(name.len() <= 15, "{name}");
        BridgeGuard { name }
    }
}

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        let Ok(mut nl) = Netlink::open() else {
            return;
        };
        for port in ports(&self.name) {
            let _ = nl.delete_link(&port);
        }
        let _ = nl.delete_link(&self.name);
        let _ = warren::net::filter::remove_table(&self.name);
    }
}

fn ports(bridge: &str) -> Vec<String> {
    std::fs::read_dir(format!("/sys/class/net/{bridge}/brif"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// The zone's address and host-side veth from its runtime record.
fn net_of(env: &Env, zone: &str) -> (Ipv4Addr, String) {
    let rt = env.runtime(zone);
    let net = &rt["net"];
    (
        net["address"].as_str().unwrap().parse().unwrap(),
        net["veth"].as_str().unwrap().to_string(),
    )
}

fn leases(env: &Env, bridge: &str) -> serde_json::Map<String, serde_json::Value> {
    let p = env.root().join("net").join(format!("{bridge}.json"));
    match std::fs::read_to_string(&p) {
        Ok(s) => serde_json::from_str::<serde_json::Value>(&s).unwrap()["leases"]
            .as_object()
            .unwrap()
            .clone(),
        Err(_) => serde_json::Map::new(),
    }
}

fn bridged(bridge: &str, subnet: &str) -> Vec<String> {
    vec![
        "net=bridge".into(),
        format!("net-bridge={bridge}"),
        format!("net-subnet={subnet}"),
    ]
}

fn bb_zone(env: &Env, zone: &str, sets: &[String]) {
    if !env.root().join("templates/bb").exists() {
        env.ok(&["template", "create", "bb", "--busybox"]);
    }
    let mut args = vec!["create", zone, "--template", "bb"];
    for s in sets {
        args.push("--set");
        args.push(s);
    }
    env.ok(&args);
    env.ok(&["install", zone]);
}

#[test]
fn bridged_zones_ping_and_talk_tcp_and_halt_cleans_up() {
    common::require_busybox();
    let br = BridgeGuard::new("a");
    let env = Env::new();
    let sets = bridged(&br.name, "10.250.1.0/24");
    bb_zone(&env, "a", &sets);
    bb_zone(&env, "b", &sets);
    env.ok(&["boot", "a", "b"]);
    let (addr_a, veth_a) = net_of(&env, "a");
    let (addr_b, veth_b) = net_of(&env, "b");
    assert_ne!(addr_a, addr_b);
    for a in [addr_a, addr_b] {
        assert!(a.octets()[..3] == [10, 250, 1] && a.octets()[3] >= 2, "{a}");
    }

    // Host side: the bridge holds the gateway, the veths are its ports.
    let mut got = ports(&br.name);
    got.sort();
    let mut want = vec![veth_a.clone(), veth_b.clone()];
    want.sort();
    assert_eq!(got, want);

    // The host ends carry no IPv6: a bridge port needs none, and each one's link-local
    // and multicast routes would make every boot walk all the others' (docs/scaling.md).
    for v in [&veth_a, &veth_b] {
        let conf = format!("/proc/sys/net/ipv6/conf/{v}/disable_ipv6");
        let off = std::fs::read_to_string(&conf).unwrap_or_else(|e| panic!("{conf}: {e}"));
        assert_eq!(off.trim(), "1", "{conf}");
        let out = std::process::Command::new("ip")
            .args(["-6", "route", "show", "table", "all", "dev", v])
            .output()
            .expect("running ip (iproute2)");
        assert!(out.status.success(), "{out:?}");
        let routes = String::from_utf8_lossy(&out.stdout);
        assert!(routes.trim().is_empty(), "IPv6 routes on {v}: {routes}");
    }

    // Zone side: eth0 with the address, up; the default route via the bridge.
    let r = env.sh("a", "ip -4 addr show eth0; ip route").ok();
    assert!(
        r.stdout.contains(&format!("inet {addr_a}/24")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("UP"), "{}", r.stdout);
    assert!(
        r.stdout.contains("default via 10.250.1.1 dev eth0"),
        "{}",
        r.stdout
    );

    // ICMP both ways, and to the gateway (the host's end of the bridge).
    env.sh("a", &format!("ping -c 1 -W 3 {addr_b}")).ok();
    env.sh("b", &format!("ping -c 1 -W 3 {addr_a}")).ok();
    env.sh("a", "ping -c 1 -W 3 10.250.1.1").ok();

    // IPv6 between the zones still crosses the bridge (it forwards frames; the ports'
    // own IPv6 is what is off): a reaches b's link-local address once b's duplicate
    // address detection is done.
    let deadline = Instant::now() + Duration::from_secs(15);
    let ll_b = loop {
        let r = env.sh("b", "ip -6 addr show dev eth0").ok();
        let ll = r.stdout.lines().find_map(|l| {
            let l = l.trim();
            (l.starts_with("inet6 fe80:") && !l.contains("tentative")).then(|| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap()
                    .split('/')
                    .next()
                    .unwrap()
                    .to_string()
            })
        });
        if let Some(ll) = ll {
            break ll;
        }
        assert!(
            Instant::now() < deadline,
            "zone b's eth0 has no usable link-local address: {}",
            r.stdout
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = env.sh("a", &format!("ping6 -c 1 -W 2 -I eth0 {ll_b}"));
        if r.code == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "zone a cannot reach b over IPv6 ({ll_b}): {} {}",
            r.stdout,
            r.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // TCP: a server in b (detached, output to a file), a client in a. The server's
    // stdin is a pipe held open by sleep: on EOF of stdin busybox nc may end the
    // connection before reading it.
    env.sh(
        "b",
        "sleep 30 2>/dev/null | nc -l -p 8080 > /tmp/got 2>/dev/null & echo started",
    )
    .ok();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = env.sh("b", "netstat -ltn | grep -c ':8080 '");
        if r.stdout.trim() == "1" {
            break;
        }
        assert!(Instant::now() < deadline, "nc never listened in zone b");
        std::thread::sleep(Duration::from_millis(50));
    }
    env.sh("a", &format!("echo hello-from-a | nc -w 3 {addr_b} 8080"))
        .ok();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = env.sh("b", "cat /tmp/got").ok();
        if r.stdout.trim() == "hello-from-a" {
            break;
        }
        assert!(Instant::now() < deadline, "zone b received {:?}", r.stdout);
        std::thread::sleep(Duration::from_millis(50));
    }

    // `list -v` shows the addresses.
    let r = env.ok(&["list", "-v"]);
    assert!(r.stdout.contains("ADDRESS"), "{}", r.stdout);
    assert!(r.stdout.contains(&addr_a.to_string()), "{}", r.stdout);
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["list", "--json"]).stdout).unwrap();
    let json_addrs: HashSet<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z["address"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        json_addrs,
        HashSet::from([addr_a.to_string(), addr_b.to_string()])
    );

    // Halt: no port, no veth, no lease; the bridge stays until gc.
    env.ok(&["halt", "a", "b"]);
    assert!(
        ports(&br.name).is_empty(),
        "ports left: {:?}",
        ports(&br.name)
    );
    assert!(!link_exists(&veth_a) && !link_exists(&veth_b));
    assert!(
        leases(&env, &br.name).is_empty(),
        "{:?}",
        leases(&env, &br.name)
    );
    assert!(link_exists(&br.name));
    // The freed address is handed out again.
    env.ok(&["boot", "b"]);
    assert_eq!(net_of(&env, "b").0, Ipv4Addr::new(10, 250, 1, 2));
    env.ok(&["halt", "b"]);

    env.ok(&["delete", "--force", "a", "b"]);
    let r = env.ok(&["gc"]);
    assert!(
        r.stdout.contains(&format!("bridge {}", br.name)),
        "{}",
        r.stdout
    );
    assert!(!link_exists(&br.name), "gc left bridge {}", br.name);
    assert!(!env
        .root()
        .join("net")
        .join(format!("{}.json", br.name))
        .exists());
}

#[test]
fn none_zone_has_only_loopback_and_host_zone_shares_the_host_stack() {
    let env = Env::new();
    env.host_zone("n", &[]);
    env.host_zone("h", &["net=host"]);
    env.ok(&["boot", "n", "h"]);
    let r = env
        .sh("n", "grep : /proc/net/dev | cut -d: -f1 | tr -d ' '")
        .ok();
    assert_eq!(r.stdout.trim(), "lo", "a net=none zone sees {:?}", r.stdout);
    let host_ns = std::fs::read_link("/proc/self/ns/net").unwrap();
    let r = env.sh("h", "readlink /proc/self/ns/net").ok();
    assert_eq!(r.stdout.trim(), host_ns.to_string_lossy());
    let r = env.sh("n", "readlink /proc/self/ns/net").ok();
    assert_ne!(r.stdout.trim(), host_ns.to_string_lossy());
    // Every host interface that exists before and after the look is seen inside.
    let names = |text: &str| -> HashSet<String> {
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(n, _)| n.trim().to_string())
            .filter(|n| !n.contains('|'))
            .collect()
    };
    let before = names(&std::fs::read_to_string("/proc/net/dev").unwrap());
    let inside = names(&env.sh("h", "cat /proc/net/dev").ok().stdout);
    let after = names(&std::fs::read_to_string("/proc/net/dev").unwrap());
    for n in before.intersection(&after) {
        assert!(
            inside.contains(n),
            "host interface {n} not seen in a net=host zone"
        );
    }
    assert!(inside.len() > 1, "{inside:?}");
}

#[test]
fn fifty_parallel_boots_get_unique_addresses() {
    let br = BridgeGuard::new("p");
    let env = Env::new();
    let sets = bridged(&br.name, "10.250.2.0/24");
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let names: Vec<String> = (0..50).map(|i| format!("p{i:02}")).collect();
    env.host_zone(&names[0], &sets);
    for n in &names[1..] {
        env.ok(&["clone", &names[0], n]);
    }
    let children: Vec<_> = names
        .iter()
        .map(|n| env.cmd().args(["boot", n]).output_spawn())
        .collect();
    for (n, c) in names.iter().zip(children) {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "boot {n}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let addrs: Vec<Ipv4Addr> = names.iter().map(|n| net_of(&env, n).0).collect();
    let unique: HashSet<_> = addrs.iter().collect();
    assert_eq!(unique.len(), 50, "duplicate addresses: {addrs:?}");
    assert_eq!(leases(&env, &br.name).len(), 50);
    assert_eq!(ports(&br.name).len(), 50);
    // Reachable, not merely recorded: the first zone pings the last.
    let busybox = common::require_busybox();
    env.sh(
        &names[0],
        &format!("{} ping -c 1 -W 3 {}", busybox.display(), addrs[49]),
    )
    .ok();

    env.ok(&["halt", "--all"]);
    assert!(
        ports(&br.name).is_empty(),
        "ports left: {:?}",
        ports(&br.name)
    );
    assert!(leases(&env, &br.name).is_empty());
}

trait SpawnOutput {
    fn output_spawn(&mut self) -> std::process::Child;
}

impl SpawnOutput for std::process::Command {
    fn output_spawn(&mut self) -> std::process::Child {
        self.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }
}

#[test]
fn bad_network_configs_are_refused() {
    let br = BridgeGuard::new("r");
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    let b = format!("net-bridge={}", br.name);

    // Refused at create: an address outside the subnet, the gateway, keys without
    // net=bridge, a subnet too small to hold anything, a bad bridge name.
    env.run(&[
        "create", "x", "--set", "net=bridge", "--set", &b, "--set",
        "net-subnet=10.250.3.0/30", "--set", "net-address=10.250.4.2",
    ])
    .fails(
        5,
        "zone 'x': net-address 10.250.4.2 cannot be used in net-subnet 10.250.3.0/30: it is outside the subnet; pick an address from 10.250.3.2 to 10.250.3.2",
    );
    env.run(&[
        "create",
        "x",
        "--set",
        "net=bridge",
        "--set",
        "net-address=10.231.0.1",
    ])
    .fails(5, "it is the gateway");
    env.run(&["create", "x", "--set", "net-subnet=10.250.3.0/24"])
        .fails(5, "net-subnet apply only to net = \"bridge\"");
    env.run(&[
        "create",
        "x",
        "--set",
        "net=bridge",
        "--set",
        "net-subnet=10.250.3.0/31",
    ])
    .fails(5, "from /8 to /30");
    env.run(&[
        "create",
        "x",
        "--set",
        "net=bridge",
        "--set",
        "net-bridge=no such",
    ])
    .fails(5, "net-bridge \"no such\"");

    // A /30 holds one zone: the second is refused at boot, and leaves nothing behind.
    let small = ["net=bridge", &b, "net-subnet=10.250.3.0/30"];
    env.host_zone("one", &small);
    env.host_zone("two", &small);
    env.ok(&["boot", "one"]);
    env.run(&["boot", "two"]).fails(
        5,
        &format!("zone 'two': net-subnet 10.250.3.0/30 has no free address: it holds 1 zone(s) and all are running on bridge {}", br.name),
    );
    assert_eq!(env.state("two"), "installed");
    assert_eq!(ports(&br.name).len(), 1);
    assert_eq!(leases(&env, &br.name).len(), 1);

    // A pinned address in use by a running zone is refused; once that zone is gone
    // without a halt (its init killed), the stale lease is reclaimed.
    let pinned = [
        "net=bridge",
        &b,
        "net-subnet=10.250.3.0/30",
        "net-address=10.250.3.2",
    ];
    env.host_zone("three", &pinned);
    env.run(&["boot", "three"]).fails(
        5,
        "zone 'three': net-address 10.250.3.2 is already in use by running zone 'one'",
    );
    let init = env.init_pid("one");
    let _ = std::process::Command::new("kill")
        .args(["-9", &init.to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(init) || !ports(&br.name).is_empty() {
        assert!(Instant::now() < deadline, "zone 'one' did not die");
        std::thread::sleep(Duration::from_millis(20));
    }
    env.ok(&["boot", "three"]);
    assert_eq!(net_of(&env, "three").0, Ipv4Addr::new(10, 250, 3, 2));
    let l = leases(&env, &br.name);
    assert_eq!(l.keys().collect::<Vec<_>>(), vec!["three"]);

    // Another subnet on the same bridge while it serves a running zone is refused.
    env.host_zone("four", &["net=bridge", &b, "net-subnet=10.250.5.0/24"]);
    env.run(&["boot", "four"]).fails(
        5,
        "net-subnet 10.250.5.0/24 differs from 10.250.3.0/30, which bridge",
    );
    env.ok(&["halt", "three"]);
    assert!(ports(&br.name).is_empty());
    assert!(leases(&env, &br.name).is_empty());
}

#[test]
fn failed_bridged_boot_leaves_no_veth_and_no_lease() {
    let br = BridgeGuard::new("f");
    let env = Env::new();
    let mut sets = bridged(&br.name, "10.250.6.0/24");
    sets.push("init=[\"/no/such/init\"]".into());
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    env.host_zone("bad", &sets);
    env.run(&["boot", "bad"])
        .fails(9, "starting init /no/such/init failed");
    assert_eq!(env.state("bad"), "installed");
    assert!(
        ports(&br.name).is_empty(),
        "ports left: {:?}",
        ports(&br.name)
    );
    assert!(
        leases(&env, &br.name).is_empty(),
        "{:?}",
        leases(&env, &br.name)
    );
    assert!(!link_exists(&warren::net::veth_name(
        &warren::layout::Layout::new(env.root()),
        "bad"
    )));
    // Nor its bridge filter chains (the table may stay until gc).
    let filtered = warren::net::filter::filtered_veths(&br.name).unwrap();
    assert!(filtered.is_empty(), "filter chains left: {filtered:?}");
}
