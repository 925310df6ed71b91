//! Class 7 of issue 14 (docs/isolation.md, "Tenants on a bridge"): a zone on a warren
//! bridge, as its root with CAP_NET_RAW, tries to pass for another zone or for a
//! router. Zone A forges frames on its `eth0` (tests/escape_net/frames.py, run with the
//! host's python3 from the shared /usr); zone B watches its own `eth0` with a packet
//! socket, and the host watches its neighbour table, addresses, routes and UDP
//! sockets bound to the gateway address. The test prints a table
//! `class | attempt | expected | result` and fails naming every row that did not
//! match.
//!
//! Every test has its own bridge and subnet, and a guard that deletes the bridge, any
//! port left on it and its nftables table, also on panic. Traffic stays between the
//! host and the namespaces the test made.
//!
//! Control run: `WARREN_TEST_NET_UNFILTERED=1` deletes the zones' filter chains right
//! after boot, and then the attack rows are expected to FAIL (each attack works on an
//! unfiltered bridge), which shows the rows test what they claim.

mod common;

#[path = "escape_net/helpers.rs"]
mod helpers;

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

use common::Env;
use helpers::*;
use warren::net::filter;

fn unfiltered_control_run(bridge: &str, zones: &[&Zone]) -> bool {
    if std::env::var_os("WARREN_TEST_NET_UNFILTERED").is_none() {
        return false;
    }
    for z in zones {
        filter::remove(bridge, &z.veth).unwrap();
    }
    println!("control run: filter chains deleted, attack rows should FAIL");
    true
}

#[test]
fn tenants_on_a_bridge_cannot_spoof_each_other() {
    common::require_root();
    assert!(
        std::path::Path::new("/proc/net/if_inet6").exists(),
        "this test needs IPv6 on the host (router advertisements and neighbour discovery are part of it)"
    );
    let br = BridgeGuard::new("s");
    let env = Env::new();
    let sets = bridged(&br.name, "10.251.7.0/24", &[]);
    make(&env, "a", &sets);
    make(&env, "b", &sets);
    env.ok(&["boot", "a", "b"]);
    let (a, b) = (zone(&env, "a"), zone(&env, "b"));
    let gw = Ipv4Addr::new(10, 251, 7, 1);
    let gw_mac = bridge_mac(&br.name);
    let mut t = Table { rows: Vec::new() };
    let _control = unfiltered_control_run(&br.name, &[&a, &b]);

    // The host side of the setup.
    let knobs: Vec<String> = ["accept_ra", "autoconf"]
        .iter()
        .map(|k| {
            let v = std::fs::read_to_string(format!("/proc/sys/net/ipv6/conf/{}/{k}", br.name))
                .unwrap_or_default();
            format!("{k}={}", v.trim())
        })
        .collect();
    t.row(
        "warren's bridge accepts router advertisements",
        "accept_ra=0 autoconf=0",
        knobs.join(" "),
        knobs == ["accept_ra=0", "autoconf=0"],
    );
    // From here on the test's own bridge takes router advertisements (2: even if the
    // host forwards) and configures addresses from them, so the router-advertisement
    // rows test the filter alone; never a default route (accept_ra_defrtr = 0), so
    // even the control run cannot send the host's traffic into a zone.
    for (k, v) in [
        ("accept_ra_defrtr", "0"),
        ("accept_ra", "2"),
        ("autoconf", "1"),
    ] {
        std::fs::write(format!("/proc/sys/net/ipv6/conf/{}/{k}", br.name), v).unwrap();
    }
    let eth0 = py(&env, "a", &["mac"]).stdout.trim().to_string();
    let chains = filter::filtered_veths(&br.name).unwrap();
    t.row(
        "boot without a filter for the zone",
        "chains for both veths, eth0 has warren's MAC",
        format!("filtered {chains:?}, eth0 {eth0}"),
        chains.contains(&a.veth) && chains.contains(&b.veth) && eth0 == a.mac,
    );

    // Seen by the host: UDP to a socket on the gateway address.
    let (sock, port) = host_listener(gw);
    let port_s = port.to_string();
    let base = |mark: &str| {
        vec![
            format!("dst={gw}"),
            format!("port={port_s}"),
            format!("dst_mac={gw_mac}"),
            format!("mark={mark}"),
        ]
    };
    let mut legit = base("WMKh1");
    legit.push(format!("src={}", a.ip));
    send(&env, "a", "udp4", &legit);
    py(&env, "a", &["udp", &gw.to_string(), &port_s, "WMKh2"]);
    let mut spoof_ip = base("WMKh3");
    spoof_ip.push(format!("src={}", b.ip));
    send(&env, "a", "udp4", &spoof_ip);
    let mut spoof_mac = base("WMKh4");
    spoof_mac.push(format!("src={}", a.ip));
    spoof_mac.push(format!("src_mac={}", b.mac));
    send(&env, "a", "udp4", &spoof_mac);
    let got = received(&sock);
    let has = |m: &str| got.iter().any(|g| g == m);
    t.row(
        "A sends IPv4 from its own address to the host (raw and socket)",
        "delivered",
        format!("host got {got:?}"),
        has("WMKh1") && has("WMKh2"),
    );
    t.row(
        "A sends IPv4 with B's source address to the host",
        "dropped",
        format!("host got WMKh3: {}", has("WMKh3")),
        !has("WMKh3"),
    );
    t.row(
        "A sends with B's source MAC to the host",
        "dropped",
        format!("host got WMKh4: {}", has("WMKh4")),
        !has("WMKh4"),
    );

    // The host's ARP entry for B. Linux lets a reply override an entry only after
    // locktime (1 s), so each forgery waits for that first.
    let dev = br.name.as_str();
    let before = resolve(b.ip, dev);
    std::thread::sleep(Duration::from_millis(1300));
    send(
        &env,
        "a",
        "arp_reply",
        &[
            format!("spa={}", b.ip),
            format!("gw={gw}"),
            format!("gw_mac={gw_mac}"),
        ],
    );
    std::thread::sleep(Duration::from_millis(200));
    let after = neighbour(b.ip, dev);
    t.row(
        "A sends a forged ARP reply: B's address is at A's MAC",
        "host's entry for B keeps B's MAC",
        format!("before {before:?}, after {after:?}"),
        before.as_deref() == Some(b.mac.as_str()) && after == before,
    );
    std::thread::sleep(Duration::from_millis(1300));
    send(&env, "a", "garp", &[format!("spa={}", b.ip)]);
    std::thread::sleep(Duration::from_millis(200));
    let after_garp = neighbour(b.ip, dev);
    t.row(
        "A sends gratuitous ARP for B's address",
        "host's entry for B keeps B's MAC",
        format!("after {after_garp:?}"),
        after_garp.as_deref() == Some(b.mac.as_str()),
    );
    send(
        &env,
        "a",
        "arp_reply",
        &[
            format!("spa={}", a.ip),
            format!("gw={gw}"),
            format!("gw_mac={gw_mac}"),
        ],
    );
    let own = resolve(a.ip, dev);
    t.row(
        "A answers ARP for its own address",
        "host's entry for A is A's MAC",
        format!("{own:?}"),
        own.as_deref() == Some(a.mac.as_str()),
    );

    // Seen by B: everything A sends towards it, on B's own eth0.
    let sniffer = sniff(&env, "b", 60);
    let b6 = format!("b6={}", b.ll);
    let a6 = format!("src6={}", a.ll);
    let b_mac = format!("b_mac={}", b.mac);
    py(&env, "a", &["udp", &b.ip.to_string(), "9", "WMKp1"]);
    let sends: Vec<(&str, Vec<String>)> = vec![
        (
            "udp4",
            vec![
                format!("src={gw}"),
                format!("dst={}", b.ip),
                "port=9".into(),
                format!("dst_mac={}", b.mac),
                "mark=WMKs1".into(),
            ],
        ),
        (
            "icmp_redirect",
            vec![
                format!("src={}", a.ip),
                format!("b={}", b.ip),
                b_mac.clone(),
                "mark=WMKs2".into(),
            ],
        ),
        (
            "dhcp_offer",
            vec![
                format!("src={}", a.ip),
                format!("b={}", b.ip),
                "mark=WMKs3".into(),
            ],
        ),
        (
            "dhcp6_advertise",
            vec![a6.clone(), b6.clone(), b_mac.clone(), "mark=WMKs4".into()],
        ),
        (
            "ra",
            vec![
                a6.clone(),
                "prefix=2001:db8:7::".into(),
                "mark=WMKs5".into(),
            ],
        ),
        (
            "icmp6_redirect",
            vec![a6.clone(), b6.clone(), b_mac.clone(), "mark=WMKs6".into()],
        ),
        (
            "na",
            vec![a6.clone(), format!("target={}", b.ll), "mark=WMKs7".into()],
        ),
        (
            "na",
            vec![a6.clone(), format!("target={}", a.ll), "mark=WMKp2".into()],
        ),
        (
            "dad_ns",
            vec![format!("target={}", b.ll), "mark=WMKsa".into()],
        ),
        (
            "dad_ns",
            vec![format!("target={}", a.ll), "mark=WMKp3".into()],
        ),
        (
            "udp6",
            vec![
                format!("src6={}", b.ll),
                b6.clone(),
                b_mac.clone(),
                "mark=WMKs8".into(),
            ],
        ),
        (
            "vlan",
            vec![
                format!("src={gw}"),
                format!("b={}", b.ip),
                b_mac.clone(),
                "mark=WMKs9".into(),
            ],
        ),
    ];
    for (kind, kv) in &sends {
        send(&env, "a", kind, kv);
    }
    let marks = seen(&env, Some("a"), b.ip, sniffer);
    let saw = |m: &str| marks.iter().any(|x| x == m);
    let rows: [(&str, &str, &str); 13] = [
        (
            "WMKp1",
            "A sends B a datagram through its own stack",
            "B receives it",
        ),
        (
            "WMKp2",
            "A advertises its own IPv6 address (NA)",
            "B receives it",
        ),
        (
            "WMKp3",
            "A probes its own link-local address (DAD from ::)",
            "B receives it",
        ),
        (
            "WMKsa",
            "A probes B's link-local address (DAD from ::)",
            "dropped",
        ),
        (
            "WMKs1",
            "A sends B IPv4 claiming the gateway's address",
            "dropped",
        ),
        ("WMKs2", "A sends B an ICMP redirect", "dropped"),
        ("WMKs3", "A sends a DHCP offer (udp 67 -> 68)", "dropped"),
        (
            "WMKs4",
            "A sends B a DHCPv6 advertise (udp 547 -> 546)",
            "dropped",
        ),
        (
            "WMKs5",
            "A sends a router advertisement with a prefix",
            "dropped",
        ),
        ("WMKs6", "A sends B an ICMPv6 redirect", "dropped"),
        (
            "WMKs7",
            "A advertises B's link-local address as its own (NA)",
            "dropped",
        ),
        (
            "WMKs8",
            "A sends B IPv6 from B's own link-local address",
            "dropped",
        ),
        (
            "WMKs9",
            "A sends an 802.1Q-tagged frame (unfiltered inner IPv4)",
            "dropped",
        ),
    ];
    for (mark, attempt, expected) in rows {
        let positive = mark.starts_with("WMKp");
        t.row(
            attempt,
            expected,
            format!("B saw {mark}: {}", saw(mark)),
            saw(mark) == positive,
        );
    }

    // What the router advertisement would have changed.
    let in_b = env.sh("b", "cat /proc/net/if_inet6 /proc/net/ipv6_route");
    let (b_addr, b_route) = v6_state(&in_b.stdout, "eth0");
    t.row(
        "A's router advertisement configures B",
        "no 2001:db8:7:: address, no default route in B",
        format!(
            "address {b_addr}, default route {b_route} (exit {})",
            in_b.code
        ),
        in_b.code == 0 && !b_addr && !b_route,
    );
    let host_v6 = format!(
        "{}{}",
        std::fs::read_to_string("/proc/net/if_inet6").unwrap(),
        std::fs::read_to_string("/proc/net/ipv6_route").unwrap()
    );
    let (h_addr, h_route) = v6_state(&host_v6, dev);
    t.row(
        "A's router advertisement configures the host's bridge",
        "no address from A's prefix on the bridge",
        format!("address {h_addr}, default route {h_route}"),
        !h_addr && !h_route,
    );
    let b_ll_ok = in_b.stdout.contains(&b.ll_hex);
    t.row(
        "B's link-local address is the EUI-64 of the MAC warren set",
        "fe80::<EUI-64> on eth0 (the filter's allowed source)",
        format!("{} present: {b_ll_ok}", b.ll),
        b_ll_ok,
    );

    // Halt removes A's chains, gc the table with the bridge.
    env.ok(&["halt", "a"]);
    let left = filter::filtered_veths(&br.name).unwrap();
    t.row(
        "halt leaves the zone's filter behind",
        "A's chains gone, B's kept",
        format!("filtered {left:?}"),
        !left.contains(&a.veth) && left.contains(&b.veth),
    );
    env.ok(&["halt", "b"]);
    env.ok(&["gc"]);
    let table = filter::table_exists(&br.name).unwrap();
    t.row(
        "gc leaves the bridge's nftables table behind",
        "table gone with the bridge",
        format!(
            "table {}: {table}, bridge: {}",
            filter::table_name(&br.name),
            std::path::Path::new("/sys/class/net").join(dev).exists()
        ),
        !table,
    );
    t.finish();
}

#[test]
fn isolated_zones_reach_only_the_host() {
    common::require_root();
    let br = BridgeGuard::new("i");
    let env = Env::new();
    make(
        &env,
        "c",
        &bridged(&br.name, "10.251.8.0/24", &["net-isolated=true"]),
    );
    make(&env, "d", &bridged(&br.name, "10.251.8.0/24", &[]));
    make(&env, "e", &bridged(&br.name, "10.251.8.0/24", &[]));
    env.ok(&["boot", "c", "d", "e"]);
    let (c, d, e) = (zone(&env, "c"), zone(&env, "d"), zone(&env, "e"));
    let gw = Ipv4Addr::new(10, 251, 8, 1);
    let mut t = Table { rows: Vec::new() };

    let (sock, port) = host_listener(gw);
    let port_s = port.to_string();
    py(&env, "c", &["udp", &gw.to_string(), &port_s, "WMKg1"]);
    let got = received(&sock);
    t.row(
        "isolated C sends to the gateway",
        "delivered",
        format!("host got {got:?}"),
        got.iter().any(|g| g == "WMKg1"),
    );

    let in_d = sniff(&env, "d", 60);
    py(&env, "c", &["udp", &d.ip.to_string(), "9", "WMKi1"]);
    py(&env, "e", &["udp", &d.ip.to_string(), "9", "WMKp1"]);
    let marks = seen(&env, Some("e"), d.ip, in_d);
    t.row(
        "isolated C sends to D",
        "D sees nothing",
        format!("D saw {marks:?}"),
        !marks.iter().any(|m| m == "WMKi1"),
    );
    t.row(
        "E (not isolated) sends to D",
        "D receives it",
        format!("D saw {marks:?}"),
        marks.iter().any(|m| m == "WMKp1"),
    );
    let in_c = sniff(&env, "c", 60);
    py(&env, "d", &["udp", &c.ip.to_string(), "9", "WMKi2"]);
    let marks = seen(&env, None, c.ip, in_c);
    t.row(
        "D sends to isolated C",
        "C sees nothing",
        format!("C saw {marks:?}"),
        !marks.iter().any(|m| m == "WMKi2"),
    );
    let chains = filter::filtered_veths(&br.name).unwrap();
    t.row(
        "isolation without its chain",
        "C, D and E filtered",
        format!("{chains:?}"),
        [&c.veth, &d.veth, &e.veth]
            .iter()
            .all(|v| chains.contains(v)),
    );
    t.finish();
}

/// A zone that dies without a halt (its init killed) leaves chains that `gc` removes,
/// with the table once the bridge is unused.
#[test]
fn gc_removes_the_filter_of_a_zone_that_died() {
    common::require_root();
    let br = BridgeGuard::new("g");
    let env = Env::new();
    make(&env, "f", &bridged(&br.name, "10.251.9.0/24", &[]));
    env.ok(&["boot", "f"]);
    let f = zone(&env, "f");
    assert!(filter::filtered_veths(&br.name).unwrap().contains(&f.veth));
    let pid = env.init_pid("f");
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    for _ in 0..50 {
        if !common::alive(pid) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = env.ok(&["gc"]);
    let left = filter::filtered_veths(&br.name).unwrap();
    let table = filter::table_exists(&br.name).unwrap();
    assert!(
        left.is_empty() && !table,
        "class 7: after gc, chains {left:?} and table present {table} remain ({})",
        out.stdout
    );
}

/// `warren boot` killed right after the spawn (the filter and the veth exist, the
/// record says the boot never finished): `gc` reconciles the zone and removes its
/// chains, the table and the bridge.
#[test]
fn gc_removes_the_filter_of_a_crashed_boot() {
    use std::os::unix::process::ExitStatusExt;
    common::require_root();
    let br = BridgeGuard::new("k");
    let env = Env::new();
    make(&env, "k", &bridged(&br.name, "10.251.11.0/24", &[]));
    let out = env
        .cmd()
        .args(["boot", "k"])
        .env(warren::fault::ENV, "boot.after-spawn")
        .output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(9),
        "warren boot was not killed at boot.after-spawn: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let veth = warren::net::veth_name(&warren::layout::Layout::new(env.root()), "k");
    assert!(
        filter::filtered_veths(&br.name).unwrap().contains(&veth),
        "the crashed boot had installed no filter for {veth}"
    );
    let gc = env.ok(&["gc"]);
    let left = filter::filtered_veths(&br.name).unwrap();
    let table = filter::table_exists(&br.name).unwrap();
    assert!(
        left.is_empty() && !table,
        "class 7: after gc, chains {left:?} and table present {table} remain ({})",
        gc.stdout
    );
    assert_eq!(env.state("k"), "installed");
}
