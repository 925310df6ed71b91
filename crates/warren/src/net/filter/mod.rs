//! The bridge filter: what a zone on a warren bridge may send (issue 14, class 7).
//!
//! A zone's root keeps CAP_NET_RAW and CAP_NET_ADMIN in its own network namespace, so
//! it can forge any frame on its veth. The host end of that veth (`wz<hash>`) is the
//! one place the host sees those frames before the bridge forwards or delivers them,
//! so warren filters there with the kernel's own mechanism, as Incus's
//! `security.mac_filtering` / `ipv4_filtering` / `ipv6_filtering` do: an nftables
//! table of the `bridge` family per bridge, `warren-<bridge>`:
//!
//! ```text
//! map zones         { ifname : verdict }   "wz…" : jump z-wz…      (every zone)
//! map isolated-in   { ifname : verdict }   "wz…" : jump i-wz…      (net-isolated)
//! map isolated-out  { ifname : verdict }   "wz…" : jump i-wz…
//! chain prerouting  (hook prerouting, priority -200)  iifname vmap @zones
//! chain forward     (hook forward, priority -200)     iifname vmap @isolated-in
//!                                                     oifname vmap @isolated-out
//! chain z-wz…       the zone's rules ([`rules::zone_rules`])
//! chain i-wz…       its isolation rules ([`rules::isolation_rules`])
//! ```
//!
//! A frame from a zone is dropped when
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
//! With `net-isolated = true` nothing is bridged between the zone and any other `wz*`
//! port, either way; the bridge itself (the host, the gateway) stays reachable.
//!
//! A zone's chains and map elements are added in one transaction before its veth
//! exists (so no frame ever passes unfiltered) and deleted in one at halt. The table,
//! its maps and base chains are made by the first zone's transaction. `warren gc`
//! deletes what belongs to zones that hold no lease, and the table with the bridge.
//! Per frame the cost is one hash lookup, whatever the number of zones on the bridge.

mod rules;

use std::net::{Ipv4Addr, Ipv6Addr};

use super::nft::PRIORITY_FILTER;
use super::nft::{Chain, Change, Expr, Map, MetaKey, Nft, HOOK_FORWARD, HOOK_PREROUTING};
use crate::layout::fnv1a;
pub use rules::{ifname, isolation_rules, zone_rules};

/// The map from a zone's veth to its chain.
pub const MAP_ZONES: &str = "zones";
/// The maps from an isolated zone's veth (as input, as output port) to its isolation chain.
pub const MAP_ISOLATED_IN: &str = "isolated-in";
pub const MAP_ISOLATED_OUT: &str = "isolated-out";

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

/// The zone's chain, reached through the `zones` map.
pub fn chain_name(veth: &str) -> String {
    format!("z-{veth}")
}

/// The zone's isolation chain (`net-isolated`), reached through the forward maps.
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

fn is_enoent(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(warren_sys::libc::ENOENT)
}

fn is_eexist(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(warren_sys::libc::EEXIST)
}

/// The maps and base chains of a bridge's table, made with it (pure).
struct Skeleton {
    maps: [Map; 3],
    prerouting: Chain,
    forward: Chain,
    dispatch: Vec<Expr>,
    isolate_in: Vec<Expr>,
    isolate_out: Vec<Expr>,
}

impl Skeleton {
    fn new() -> Skeleton {
        let map = |name: &str, id| Map {
            name: name.to_string(),
            id,
        };
        Skeleton {
            maps: [
                map(MAP_ZONES, 1),
                map(MAP_ISOLATED_IN, 2),
                map(MAP_ISOLATED_OUT, 3),
            ],
            prerouting: Chain {
                name: "prerouting".into(),
                hook: Some((HOOK_PREROUTING, PRIORITY_FILTER)),
            },
            forward: Chain {
                name: "forward".into(),
                hook: Some((HOOK_FORWARD, PRIORITY_FILTER)),
            },
            dispatch: vec![Expr::Meta(MetaKey::IifName), Expr::Map(MAP_ZONES.into())],
            isolate_in: vec![
                Expr::Meta(MetaKey::IifName),
                Expr::Map(MAP_ISOLATED_IN.into()),
            ],
            isolate_out: vec![
                Expr::Meta(MetaKey::OifName),
                Expr::Map(MAP_ISOLATED_OUT.into()),
            ],
        }
    }

    fn changes(&self) -> Vec<Change<'_>> {
        let mut c = vec![Change::CreateTable];
        c.extend(self.maps.iter().map(Change::AddMap));
        c.push(Change::AddChain(&self.prerouting));
        c.push(Change::AddRule(&self.prerouting.name, &self.dispatch));
        c.push(Change::AddChain(&self.forward));
        c.push(Change::AddRule(&self.forward.name, &self.isolate_in));
        c.push(Change::AddRule(&self.forward.name, &self.isolate_out));
        c
    }
}

/// A zone's chains, rules and map elements, owned so that [`Change`]s can borrow them.
struct ZoneParts {
    key: Vec<u8>,
    chain: Chain,
    rules: Vec<Vec<Expr>>,
    iso_chain: Chain,
    iso_rules: Vec<Vec<Expr>>,
    isolated: bool,
}

impl ZoneParts {
    fn new(id: &Identity) -> ZoneParts {
        ZoneParts {
            key: ifname(&id.veth),
            chain: Chain {
                name: chain_name(&id.veth),
                hook: None,
            },
            rules: zone_rules(id),
            iso_chain: Chain {
                name: isolation_chain_name(&id.veth),
                hook: None,
            },
            iso_rules: isolation_rules(&id.veth),
            isolated: id.isolated,
        }
    }

    fn changes(&self) -> Vec<Change<'_>> {
        let mut c = vec![Change::AddChain(&self.chain)];
        c.extend(
            self.rules
                .iter()
                .map(|r| Change::AddRule(&self.chain.name, r)),
        );
        c.push(Change::AddJump {
            map: MAP_ZONES,
            key: &self.key,
            chain: &self.chain.name,
        });
        if self.isolated {
            c.push(Change::AddChain(&self.iso_chain));
            c.extend(
                self.iso_rules
                    .iter()
                    .map(|r| Change::AddRule(&self.iso_chain.name, r)),
            );
            for map in [MAP_ISOLATED_IN, MAP_ISOLATED_OUT] {
                c.push(Change::AddJump {
                    map,
                    key: &self.key,
                    chain: &self.iso_chain.name,
                });
            }
        }
        c
    }
}

/// The changes that install a zone, for tests of their shape (pure).
#[cfg(test)]
fn zone_changes(id: &Identity) -> Vec<Change<'static>> {
    let parts: &'static ZoneParts = Box::leak(Box::new(ZoneParts::new(id)));
    parts.changes()
}

/// The bridge filter's effects, on one nf_tables socket.
///
/// Deleted chains are freed by the kernel after an RCU grace period, and closing an
/// nf_tables socket waits for that work (7–13 ms here). So a command keeps one
/// `Filter` open across all it does, and halt deletes the chains *before* the veth, so
/// that the waits overlap where the veth's deletion waits too. Every change asks before
/// it deletes, since a transaction that fails (a missing chain) also costs a grace
/// period.
pub struct Filter {
    nft: Nft,
}

impl Filter {
    pub fn open() -> std::io::Result<Filter> {
        Ok(Filter { nft: Nft::open()? })
    }

    /// Install the zone's chains and map elements on `bridge`'s table, replacing any
    /// left from an earlier boot; the first zone of a bridge also makes the table, its
    /// maps and base chains, in the same transaction. A few lookups and one
    /// transaction, whatever the number of zones on the bridge.
    pub fn install(&mut self, bridge: &str, id: &Identity) -> std::io::Result<()> {
        let table = table_name(bridge);
        let exists = self.nft.table_exists(&table)?;
        if exists {
            self.remove(bridge, &id.veth)?;
        }
        let parts = ZoneParts::new(id);
        let skeleton = Skeleton::new();
        let mut changes = if exists {
            Vec::new()
        } else {
            skeleton.changes()
        };
        changes.extend(parts.changes());
        match self.nft.apply(&table, &changes) {
            // Another boot made the table in the meantime: add only the zone.
            Err(e) if !exists && is_eexist(&e) => self.nft.apply(&table, &parts.changes()),
            other => other,
        }
    }

    /// Delete the zone's map elements and chains (and so their rules) from `bridge`'s
    /// table, in one transaction; nothing to do if they (or the table) are gone.
    pub fn remove(&mut self, bridge: &str, veth: &str) -> std::io::Result<()> {
        let table = table_name(bridge);
        let key = ifname(veth);
        let (chain, iso) = (chain_name(veth), isolation_chain_name(veth));
        let mut gone = Vec::new();
        // A chain and its elements are always added and deleted together.
        if self.nft.chain_exists(&table, &chain)? {
            gone.push(Change::DeleteKey {
                map: MAP_ZONES,
                key: &key,
            });
            gone.push(Change::DeleteChain(&chain));
        }
        if self.nft.chain_exists(&table, &iso)? {
            for map in [MAP_ISOLATED_IN, MAP_ISOLATED_OUT] {
                gone.push(Change::DeleteKey { map, key: &key });
            }
            gone.push(Change::DeleteChain(&iso));
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
    use super::rules::*;
    use super::*;
    use crate::net::nft::{Base, Op};

    #[test]
    fn mac_is_local_unicast_and_link_local_is_its_eui64() {
        let m = zone_mac("wz0123456789ab");
        assert_eq!(m[0] & 0x03, 0x02, "locally administered, unicast: {m:02x?}");
        assert_ne!(m, zone_mac("wz0123456789ac"));
        let ll = link_local([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(ll, "fe80::11:22ff:fe33:4455".parse::<Ipv6Addr>().unwrap());
    }

    #[test]
    fn every_rule_drops_and_the_chain_is_reached_only_for_the_veth() {
        let id = Identity::new("wz0123456789ab", Ipv4Addr::new(10, 9, 0, 2), false);
        let rules = zone_rules(&id);
        assert_eq!(rules.len(), 15);
        for r in &rules {
            assert_eq!(r.last(), Some(&Expr::Drop));
            assert_eq!(r.iter().filter(|e| **e == Expr::Drop).count(), 1);
        }
        let jump = zone_changes(&id);
        assert!(jump.iter().any(
            |c| matches!(c, Change::AddJump { map: MAP_ZONES, key, chain }
            if *key == ifname("wz0123456789ab").as_slice() && *chain == "z-wz0123456789ab")
        ));
        // The IPv4 source rule lets exactly the lease through.
        let v4 = rules
            .iter()
            .find(|r| {
                r.contains(&Expr::Payload {
                    base: Base::Network,
                    offset: 12,
                    len: 4,
                })
            })
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
    fn an_isolated_zone_is_in_both_forward_maps() {
        let id = Identity::new("wz0123456789ab", Ipv4Addr::new(10, 9, 0, 2), true);
        let maps: Vec<&str> = zone_changes(&id)
            .iter()
            .filter_map(|c| match c {
                Change::AddJump { map, chain, .. } => Some((*map, *chain)),
                _ => None,
            })
            .map(|(m, _)| m)
            .collect();
        assert_eq!(maps, [MAP_ZONES, MAP_ISOLATED_IN, MAP_ISOLATED_OUT]);
        let plain = Identity::new("wz0123456789ab", Ipv4Addr::new(10, 9, 0, 2), false);
        assert_eq!(
            zone_changes(&plain)
                .iter()
                .filter(|c| matches!(c, Change::AddJump { .. }))
                .count(),
            1
        );
        // The table's own parts: three maps, two base chains, three dispatch rules.
        let sk = Skeleton::new();
        let c = sk.changes();
        assert_eq!(c[0], Change::CreateTable);
        assert_eq!(
            c.iter().filter(|x| matches!(x, Change::AddMap(_))).count(),
            3
        );
        assert_eq!(
            c.iter()
                .filter(|x| matches!(x, Change::AddRule(..)))
                .count(),
            3
        );
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
