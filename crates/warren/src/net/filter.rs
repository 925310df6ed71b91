//! The bridge filter: what a zone on a warren bridge may send (issue 14, class 7).
//!
//! A zone's root keeps CAP_NET_RAW and CAP_NET_ADMIN in its own network namespace, so
//! it can forge any frame on its veth. The host end of that veth (`wz<hash>`) is the
//! one place the host sees those frames before the bridge forwards or delivers them,
//! so warren filters there with the kernel's own mechanism, as Incus's
//! `security.mac_filtering` / `ipv4_filtering` / `ipv6_filtering` do: an nftables
//! table of the `bridge` family per bridge (`warren-<bridge>`), and per zone one base
//! chain `z-<veth>` on the bridge's prerouting hook whose every rule starts with
//! `iifname "<veth>"`. A frame from the zone is dropped when
//!
//! - its source MAC is not the zone's (warren sets `eth0`'s MAC at creation, derived
//!   from the veth name), or its ether type is not ARP, IPv4 or IPv6 (VLAN tags and
//!   other protocols would carry a second, unfiltered header);
//! - it is ARP whose sender MAC or sender address is not the zone's (forged replies,
//!   gratuitous ARP for another zone's address);
//! - it is IPv4 from another source than the zone's lease, an ICMP redirect, or UDP
//!   from port 67 (a DHCP server);
//! - it is IPv6 from another source than the zone's link-local address (EUI-64 of its
//!   MAC) or `::` (duplicate address detection: only neighbour solicitations for its
//!   own addresses, and MLD reports), a router advertisement, an ICMPv6 redirect, a
//!   neighbour advertisement whose target is not the zone's, or UDP from port 547 (a
//!   DHCPv6 server).
//!
//! With `net-isolated = true` the zone also gets `i-<veth>` on the forward hook:
//! nothing is bridged between it and any other `wz*` port, either way; the bridge
//! itself (the host, the gateway) stays reachable.
//!
//! Each zone's chains are added in one transaction before its veth exists (so no frame
//! ever passes unfiltered) and deleted in one at halt; deleting a base chain deletes its
//! rules. `warren gc` deletes chains whose zone holds no lease and the table with the
//! bridge. The rules are built here as plain data ([`zone_rules`]) and encoded by
//! [`super::nft`].
//!
//! Cost: one base chain per zone on the hook, so a frame is compared against the
//! `iifname` of every zone on its bridge (a few ns each; a verdict map keyed on the
//! interface would make it constant, at the price of named sets).

use std::net::{Ipv4Addr, Ipv6Addr};

use super::nft::PRIORITY_FILTER;
use super::nft::{Base, Chain, Change, Expr, MetaKey, Nft, Op, HOOK_FORWARD, HOOK_PREROUTING};
use crate::layout::fnv1a;

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

/// What a zone may send as: its veth, MAC and addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub veth: String,
    pub mac: [u8; 6],
    pub ipv4: Ipv4Addr,
    /// Its IPv6 addresses: the link-local one first.
    pub ipv6: Vec<Ipv6Addr>,
    pub isolated: bool,
}

impl Identity {
    pub fn new(veth: &str, ipv4: Ipv4Addr, isolated: bool) -> Identity {
        let mac = zone_mac(veth);
        Identity {
            veth: veth.to_string(),
            mac,
            ipv4,
            ipv6: vec![link_local(mac)],
            isolated,
        }
    }
}

/// The zone's `eth0` MAC: locally administered, unicast, from a hash of its veth name
/// (46 bits, so two zones of a bridge practically never collide).
pub fn zone_mac(veth: &str) -> [u8; 6] {
    let h = fnv1a(veth.as_bytes()).to_be_bytes();
    [(h[2] & 0xfc) | 0x02, h[3], h[4], h[5], h[6], h[7]]
}

/// The EUI-64 link-local address the kernel derives from `mac`.
pub fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    Ipv6Addr::from([
        0xfe,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}

/// The nftables table of `bridge`.
pub fn table_name(bridge: &str) -> String {
    format!("warren-{bridge}")
}

/// The zone's prerouting chain.
pub fn chain_name(veth: &str) -> String {
    format!("z-{veth}")
}

/// The zone's forward chain (`net-isolated`).
pub fn isolation_chain_name(veth: &str) -> String {
    format!("i-{veth}")
}

/// The veth a chain of ours belongs to, if `chain` is one.
pub fn chain_veth(chain: &str) -> Option<&str> {
    chain
        .strip_prefix("z-")
        .or_else(|| chain.strip_prefix("i-"))
        .filter(|v| v.starts_with("wz"))
}

fn ifname(name: &str) -> Vec<u8> {
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

/// The zone's prerouting rules, each ending in drop (pure; unit-tested).
pub fn zone_rules(id: &Identity) -> Vec<Vec<Expr>> {
    let from_zone = || {
        vec![
            Expr::Meta(MetaKey::IifName),
            Expr::Cmp(Op::Eq, ifname(&id.veth)),
        ]
    };
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
        .map(|p| {
            let mut r = from_zone();
            r.extend(p);
            r.push(Expr::Drop);
            r
        })
        .collect()
}

/// `net-isolated`: drop what the bridge would forward between the zone and another
/// zone's port (pure).
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

fn is_enoent(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(warren_sys::libc::ENOENT)
}

/// The bridge filter's effects, on one nf_tables socket.
///
/// Deleted chains are freed by the kernel after an RCU grace period, and closing an
/// nf_tables socket waits for that work (about 12 ms here). So a command keeps one
/// `Filter` open across all it does, and halt deletes the chains *before* the veth,
/// whose deletion waits for grace periods of its own: the two waits overlap and the
/// close finds nothing left to wait for. Every change asks before it deletes, since
/// a transaction that fails (a missing chain) also costs a grace period.
pub struct Filter {
    nft: Nft,
}

impl Filter {
    pub fn open() -> std::io::Result<Filter> {
        Ok(Filter { nft: Nft::open()? })
    }

    /// Install the zone's chains on `bridge`'s table (creating the table), replacing
    /// any left from an earlier boot: two lookups, then the new chains with all their
    /// rules in one transaction, whatever the number of zones on the bridge.
    pub fn install(&mut self, bridge: &str, id: &Identity) -> std::io::Result<()> {
        let table = table_name(bridge);
        self.remove(bridge, &id.veth)?;
        let pre = Chain {
            name: chain_name(&id.veth),
            hook: HOOK_PREROUTING,
            priority: PRIORITY_FILTER,
        };
        let fwd = Chain {
            name: isolation_chain_name(&id.veth),
            hook: HOOK_FORWARD,
            priority: PRIORITY_FILTER,
        };
        let rules = zone_rules(id);
        let iso = isolation_rules(&id.veth);
        let mut changes = vec![Change::AddTable, Change::AddChain(&pre)];
        changes.extend(rules.iter().map(|r| Change::AddRule(&pre.name, r)));
        if id.isolated {
            changes.push(Change::AddChain(&fwd));
            changes.extend(iso.iter().map(|r| Change::AddRule(&fwd.name, r)));
        }
        self.nft.apply(&table, &changes)
    }

    /// Delete the zone's chains (and so their rules) from `bridge`'s table, in one
    /// transaction; nothing to do if they (or the table) are gone.
    pub fn remove(&mut self, bridge: &str, veth: &str) -> std::io::Result<()> {
        let table = table_name(bridge);
        let names = [chain_name(veth), isolation_chain_name(veth)];
        let mut gone = Vec::new();
        for name in &names {
            if self.nft.chain_exists(&table, name)? {
                gone.push(Change::DeleteChain(name));
            }
        }
        self.nft.apply(&table, &gone)
    }

    /// The veths that have chains in `bridge`'s table.
    pub fn filtered_veths(&mut self, bridge: &str) -> std::io::Result<Vec<String>> {
        let mut v: Vec<String> = self
            .nft
            .chains(&table_name(bridge))?
            .iter()
            .filter_map(|c| chain_veth(c).map(str::to_string))
            .collect();
        v.sort();
        v.dedup();
        Ok(v)
    }

    pub fn table_exists(&mut self, bridge: &str) -> std::io::Result<bool> {
        self.nft.table_exists(&table_name(bridge))
    }

    /// Delete `bridge`'s table with everything in it; `Ok(false)` if there was none.
    pub fn remove_table(&mut self, bridge: &str) -> std::io::Result<bool> {
        let table = table_name(bridge);
        if !self.nft.table_exists(&table)? {
            return Ok(false);
        }
        match self.nft.apply(&table, &[Change::DeleteTable]) {
            Ok(()) => Ok(true),
            Err(e) if is_enoent(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// [`Filter::remove`] on a socket of its own (tests, one-off cleanups).
pub fn remove(bridge: &str, veth: &str) -> std::io::Result<()> {
    Filter::open()?.remove(bridge, veth)
}

/// [`Filter::filtered_veths`] on a socket of its own.
pub fn filtered_veths(bridge: &str) -> std::io::Result<Vec<String>> {
    Filter::open()?.filtered_veths(bridge)
}

/// [`Filter::table_exists`] on a socket of its own.
pub fn table_exists(bridge: &str) -> std::io::Result<bool> {
    Filter::open()?.table_exists(bridge)
}

/// [`Filter::remove_table`] on a socket of its own.
pub fn remove_table(bridge: &str) -> std::io::Result<bool> {
    Filter::open()?.remove_table(bridge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_is_local_unicast_and_link_local_is_its_eui64() {
        let m = zone_mac("wz0123456789ab");
        assert_eq!(m[0] & 0x03, 0x02, "locally administered, unicast: {m:02x?}");
        assert_ne!(m, zone_mac("wz0123456789ac"));
        let ll = link_local([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(ll, "fe80::11:22ff:fe33:4455".parse::<Ipv6Addr>().unwrap());
    }

    #[test]
    fn every_rule_is_keyed_on_the_veth_and_drops() {
        let id = Identity::new("wz0123456789ab", Ipv4Addr::new(10, 9, 0, 2), false);
        let rules = zone_rules(&id);
        assert_eq!(rules.len(), 15);
        for r in &rules {
            assert_eq!(r[0], Expr::Meta(MetaKey::IifName));
            assert_eq!(r[1], Expr::Cmp(Op::Eq, ifname("wz0123456789ab")));
            assert_eq!(r.last(), Some(&Expr::Drop));
        }
        // The IPv4 source rule lets exactly the lease through.
        let v4 = rules
            .iter()
            .find(|r| r.contains(&load(Base::Network, 12, 4)))
            .unwrap();
        assert!(v4.contains(&Expr::Cmp(Op::Ne, vec![10, 9, 0, 2])));
        // The router-advertisement rule matches type 134 of ICMPv6.
        assert!(rules
            .iter()
            .any(|r| r.contains(&Expr::Cmp(Op::Eq, vec![58]))
                && r.contains(&Expr::Cmp(Op::Eq, vec![134]))));
        // DHCP server ports.
        for port in [67u16, 547] {
            assert!(rules
                .iter()
                .any(|r| r.contains(&Expr::Cmp(Op::Eq, port.to_be_bytes().to_vec()))));
        }
    }

    #[test]
    fn chain_names_map_back_to_veths() {
        assert_eq!(
            chain_veth(&chain_name("wz0123456789ab")),
            Some("wz0123456789ab")
        );
        assert_eq!(
            chain_veth(&isolation_chain_name("wz0123456789ab")),
            Some("wz0123456789ab")
        );
        assert_eq!(chain_veth("forward"), None);
        assert_eq!(isolation_rules("wz0123456789ab").len(), 2);
    }
}
