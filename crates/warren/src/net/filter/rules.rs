//! The bridge filter's rules as plain data (pure; unit-tested): what a zone may send
//! ([`zone_rules`]) and, with `net-isolated`, what may not be bridged to or from it
//! ([`isolation_rules`]). Encoded by [`super::super::nft`].

use std::net::Ipv6Addr;

use super::super::nft::{Base, Expr, MetaKey, Op};
use super::Identity;

const ETH_P_IP: u16 = 0x0800;
const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IPV6: u16 = 0x86dd;
const IPPROTO_ICMP: u8 = 1;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_ICMPV6: u8 = 58;
const ICMP_REDIRECT: u8 = 5;
const ND_ROUTER_ADVERT: u8 = 134;
const ND_NEIGHBOR_SOLICIT: u8 = 135;
const ND_NEIGHBOR_ADVERT: u8 = 136;
const ND_REDIRECT: u8 = 137;
const MLD2_REPORT: u8 = 143;
const DHCP_SERVER_PORT: u16 = 67;
const DHCPV6_SERVER_PORT: u16 = 547;

/// An interface name as `meta iifname` loads it: 16 bytes, zero-padded.
pub fn ifname(name: &str) -> Vec<u8> {
    let mut v = name.as_bytes().to_vec();
    v.resize(16, 0);
    v
}

fn load(base: Base, offset: u32, len: u32) -> Expr {
    Expr::Payload { base, offset, len }
}

fn ether_type(t: u16) -> [Expr; 2] {
    [
        load(Base::Link, 12, 2),
        Expr::Cmp(Op::Eq, t.to_be_bytes().to_vec()),
    ]
}

fn l4(proto: u8) -> [Expr; 2] {
    [Expr::Meta(MetaKey::L4Proto), Expr::Cmp(Op::Eq, vec![proto])]
}

/// Byte 0 of the transport header (the ICMP / ICMPv6 type) equals `t`.
fn icmp_type(t: u8) -> [Expr; 2] {
    [load(Base::Transport, 0, 1), Expr::Cmp(Op::Eq, vec![t])]
}

fn udp_sport(port: u16) -> [Expr; 2] {
    [
        load(Base::Transport, 0, 2),
        Expr::Cmp(Op::Eq, port.to_be_bytes().to_vec()),
    ]
}

/// "value not in `allowed`": one `!=` per allowed value after one load.
fn none_of(loaded: Expr, allowed: &[Vec<u8>]) -> Vec<Expr> {
    let mut v = vec![loaded];
    v.extend(allowed.iter().map(|a| Expr::Cmp(Op::Ne, a.clone())));
    v
}

/// The rules of the zone's chain `z-<veth>`, each ending in drop (pure;
/// unit-tested). Only the zone's frames get there (the `zones` map is keyed on its
/// veth), so they do not match the interface again.
pub fn zone_rules(id: &Identity) -> Vec<Vec<Expr>> {
    let v6: Vec<Vec<u8>> = id.ipv6.iter().map(|a| a.octets().to_vec()).collect();
    let mut v6_or_any = v6.clone();
    v6_or_any.push(Ipv6Addr::UNSPECIFIED.octets().to_vec());
    let unspecified = Ipv6Addr::UNSPECIFIED.octets().to_vec();
    let mac = id.mac.to_vec();
    let v4 = id.ipv4.octets().to_vec();
    let parts: Vec<Vec<Expr>> = vec![
        // Source MAC.
        none_of(load(Base::Link, 6, 6), std::slice::from_ref(&mac)),
        // Only ARP, IPv4 and IPv6.
        none_of(
            load(Base::Link, 12, 2),
            &[
                ETH_P_ARP.to_be_bytes().to_vec(),
                ETH_P_IP.to_be_bytes().to_vec(),
                ETH_P_IPV6.to_be_bytes().to_vec(),
            ],
        ),
        // ARP: sender hardware and protocol address.
        [
            ether_type(ETH_P_ARP).to_vec(),
            none_of(load(Base::Network, 8, 6), &[mac]),
        ]
        .concat(),
        [
            ether_type(ETH_P_ARP).to_vec(),
            none_of(load(Base::Network, 14, 4), std::slice::from_ref(&v4)),
        ]
        .concat(),
        // IPv4: source address, redirects, DHCP servers.
        [
            ether_type(ETH_P_IP).to_vec(),
            none_of(load(Base::Network, 12, 4), &[v4]),
        ]
        .concat(),
        [
            ether_type(ETH_P_IP).to_vec(),
            l4(IPPROTO_ICMP).to_vec(),
            icmp_type(ICMP_REDIRECT).to_vec(),
        ]
        .concat(),
        [
            ether_type(ETH_P_IP).to_vec(),
            l4(IPPROTO_UDP).to_vec(),
            udp_sport(DHCP_SERVER_PORT).to_vec(),
        ]
        .concat(),
        // IPv6: source address; `::` only for DAD and MLD.
        [
            ether_type(ETH_P_IPV6).to_vec(),
            none_of(load(Base::Network, 8, 16), &v6_or_any),
        ]
        .concat(),
        [
            ether_type(ETH_P_IPV6).to_vec(),
            vec![
                load(Base::Network, 8, 16),
                Expr::Cmp(Op::Eq, unspecified.clone()),
            ],
            vec![
                Expr::Meta(MetaKey::L4Proto),
                Expr::Cmp(Op::Ne, vec![IPPROTO_ICMPV6]),
            ],
        ]
        .concat(),
        [
            ether_type(ETH_P_IPV6).to_vec(),
            vec![load(Base::Network, 8, 16), Expr::Cmp(Op::Eq, unspecified)],
            l4(IPPROTO_ICMPV6).to_vec(),
            none_of(
                load(Base::Transport, 0, 1),
                &[vec![ND_NEIGHBOR_SOLICIT], vec![MLD2_REPORT]],
            ),
        ]
        .concat(),
        // Router advertisements and redirects.
        [
            ether_type(ETH_P_IPV6).to_vec(),
            l4(IPPROTO_ICMPV6).to_vec(),
            icmp_type(ND_ROUTER_ADVERT).to_vec(),
        ]
        .concat(),
        [
            ether_type(ETH_P_IPV6).to_vec(),
            l4(IPPROTO_ICMPV6).to_vec(),
            icmp_type(ND_REDIRECT).to_vec(),
        ]
        .concat(),
        // Neighbour advertisements only for the zone's own addresses.
        [
            ether_type(ETH_P_IPV6).to_vec(),
            l4(IPPROTO_ICMPV6).to_vec(),
            icmp_type(ND_NEIGHBOR_ADVERT).to_vec(),
            none_of(load(Base::Transport, 8, 16), &v6),
        ]
        .concat(),
        // Duplicate address detection (a solicitation from `::`) only for its own
        // addresses: one for another zone's address would make that zone give it up.
        [
            ether_type(ETH_P_IPV6).to_vec(),
            vec![
                load(Base::Network, 8, 16),
                Expr::Cmp(Op::Eq, Ipv6Addr::UNSPECIFIED.octets().to_vec()),
            ],
            l4(IPPROTO_ICMPV6).to_vec(),
            icmp_type(ND_NEIGHBOR_SOLICIT).to_vec(),
            none_of(load(Base::Transport, 8, 16), &v6),
        ]
        .concat(),
        [
            ether_type(ETH_P_IPV6).to_vec(),
            l4(IPPROTO_UDP).to_vec(),
            udp_sport(DHCPV6_SERVER_PORT).to_vec(),
        ]
        .concat(),
    ];
    parts
        .into_iter()
        .map(|mut r| {
            r.push(Expr::Drop);
            r
        })
        .collect()
}

/// The rules of `i-<veth>` (`net-isolated`): drop what the bridge would forward
/// between the zone and another zone's port, either way (pure). The chain is reached
/// from both forward maps, so each rule names both ends.
pub fn isolation_rules(veth: &str) -> Vec<Vec<Expr>> {
    let zone_port = b"wz".to_vec();
    vec![
        vec![
            Expr::Meta(MetaKey::IifName),
            Expr::Cmp(Op::Eq, ifname(veth)),
            Expr::Meta(MetaKey::OifName),
            Expr::Cmp(Op::Eq, zone_port.clone()),
            Expr::Drop,
        ],
        vec![
            Expr::Meta(MetaKey::OifName),
            Expr::Cmp(Op::Eq, ifname(veth)),
            Expr::Meta(MetaKey::IifName),
            Expr::Cmp(Op::Eq, zone_port),
            Expr::Drop,
        ],
    ]
}
