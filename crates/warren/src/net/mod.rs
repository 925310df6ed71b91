//! Zone networking for `net = "bridge"`: an exclusive IP stack per zone, joined to a
//! host bridge by a veth pair, configured over rtnetlink (never by running `ip`).
//!
//! ```text
//!  host netns                                 zone netns (one per zone)
//!  warren0 (bridge, 10.231.0.1/16, up)
//!    ├── wz<hash>  (veth, up)  <── pair ──>   eth0 10.231.0.2/16, up
//!    └── wz<hash>                             default via 10.231.0.1
//! ```
//!
//! A bridged boot, in order (see `zone::boot` and `runtime::boot`):
//! 1. [`lease`] (host, before the clone, under the `net-ipam` lock): pick the zone's
//!    address ([`ipam`]), check the kernel limits that would stop it (bridge ports,
//!    the neighbour table), make sure the bridge exists, is up and holds the gateway
//!    address (.1), and record the lease. The result, a [`NetRuntime`], goes into
//!    `runtime.json` before the zone exists, so a crash from here on is reconciled.
//! 2. The clone creates the zone's network namespace; the child brings `lo` up and
//!    walks its mount steps, then blocks at its sync point (`Sync(ROOT_BUILT)`)
//!    before it joins the user namespace and execs.
//! 3. [`attach`] (host, right after the clone, while the child works): the zone's
//!    bridge filter goes in first ([`filter`]: nftables chains keyed on the host veth,
//!    so a zone sends only as itself and never as a router), then one
//!    RTM_NEWLINK creates the veth pair with the host end enslaved to the bridge
//!    and the peer created directly in the zone's namespace (by the child's pid) as
//!    `eth0`; the host end's IPv6 is turned off (a bridge port needs no addresses, and
//!    each one's routes would make every boot walk all the others') and it goes up;
//!    then, on a netlink socket opened inside the zone's namespace, `eth0` gets
//!    its address, goes up, and gets the default route via the bridge. When the child
//!    reaches its sync point, the parent opens its console and writes the go byte,
//!    and the child execs init, with the network ready.
//! 4. Halt (or a failed boot, or a stale record found later): [`release`] deletes the
//!    host end (which deletes the pair; the kernel would do so anyway when the
//!    namespace dies, but asynchronously), then the zone's filter chains, and frees
//!    the lease.
//!
//! The bridge is shared by all zones on it and stays after the last zone halts (a
//! bridge costs nothing idle and booting does not churn it); `warren gc` removes a
//! bridge warren created, and its filter table, once no zone holds a lease on it. A
//! bridge warren creates does not accept IPv6 router advertisements
//! ([`BRIDGE_SYSCTLS`]). A bridge serves one subnet;
//! a bridge name belongs to one state root.
//!
//! Kernel limits are checked, never raised: a bridge takes at most 1023 ports
//! (BR_MAX_PORTS is 1024, port 0 reserved), and the neighbour (ARP) table, shared by all
//! network namespaces, holds at most `net.ipv4.neigh.default.gc_thresh3` entries;
//! the host needs one per zone it talks to.

pub mod filter;
pub mod ipam;
pub mod netlink;
pub mod nft;
pub mod subnet;

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::ZoneConfig;
use crate::error::{Error, IoContext, Result};
use crate::layout::{fnv1a, HostPaths, Layout};
use crate::lock;
use ipam::BridgeRecord;
use netlink::Netlink;
use subnet::Subnet;

/// The name of the zone's end of its veth pair.
pub const ZONE_IFNAME: &str = "eth0";

/// Ports a Linux bridge can have: BR_MAX_PORTS (1024) less the reserved port 0.
pub const BRIDGE_MAX_PORTS: usize = 1023;

/// A bridged zone's network while it is booted (part of `runtime.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetRuntime {
    pub bridge: String,
    pub subnet: Subnet,
    pub address: Ipv4Addr,
    /// The host end of the veth pair.
    pub veth: String,
    /// `net-isolated`: no traffic bridged to or from other zones.
    #[serde(default)]
    pub isolated: bool,
}

impl NetRuntime {
    pub fn gateway(&self) -> Ipv4Addr {
        self.subnet.gateway()
    }

    /// What the zone may send as (its MAC, addresses), for the bridge filter.
    pub fn identity(&self) -> filter::Identity {
        filter::Identity::new(&self.veth, self.address, self.isolated)
    }
}

/// The host-side veth name of `zone` in this state root: "wz" + 12 hex digits of a
/// hash of root and zone (interface names have at most 15 bytes). Stable, so halt and
/// gc can find it, and distinct between state roots sharing a host.
pub fn veth_name(layout: &Layout, zone: &str) -> String {
    let mut key = layout.root().as_os_str().as_encoded_bytes().to_vec();
    key.push(b'/');
    key.extend_from_slice(zone.as_bytes());
    format!("wz{:012x}", fnv1a(&key) & 0xffff_ffff_ffff)
}

/// Whether the zone holding a lease is still up; supplied by the zone layer, which
/// knows how to read a zone's runtime record (without blocking on its lock).
pub type IsLive<'a> = &'a dyn Fn(&str, Ipv4Addr) -> bool;

fn nl_err<'a>(zone: &'a str, what: &str) -> impl FnOnce() -> String + 'a {
    let what = what.to_string();
    move || format!("zone '{zone}': {what}")
}

/// The bridge's port names (from sysfs).
pub fn bridge_ports(host: &HostPaths, bridge: &str) -> Vec<String> {
    let dir = host.sys.join("class/net").join(bridge).join("brif");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `net.ipv4.neigh.default.gc_thresh3`, if readable.
pub fn neigh_gc_thresh3(host: &HostPaths) -> Option<usize> {
    std::fs::read_to_string(host.proc.join("sys/net/ipv4/neigh/default/gc_thresh3"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Refuse a boot that a kernel limit would break (pure: counts passed in).
pub fn check_limits(
    zone: &str,
    bridge: &str,
    ports: usize,
    bridged_zones: usize,
    gc_thresh3: Option<usize>,
) -> Result<()> {
    if ports >= BRIDGE_MAX_PORTS {
        return Err(Error::Unsupported(format!(
            "zone '{zone}': bridge {bridge} already has {ports} ports, the kernel's limit (BR_MAX_PORTS = 1024, less port 0); put further zones on another bridge with its own subnet, e.g. --set net-bridge=warren1 --set net-subnet=10.232.0.0/16"
        )));
    }
    if let Some(max) = gc_thresh3 {
        if bridged_zones + 1 > max {
            return Err(Error::Unsupported(format!(
                "zone '{zone}': {} bridged zones would exceed net.ipv4.neigh.default.gc_thresh3 = {max}, the kernel's limit on neighbour (ARP) entries shared by all namespaces (the host needs one per zone it talks to); raise it, e.g. sysctl -w net.ipv4.neigh.default.gc_thresh3={}, and gc_thresh2 with it",
                bridged_zones + 1,
                (bridged_zones + 1).next_power_of_two() * 2
            )));
        }
    }
    Ok(())
}

/// Step 1 of a bridged boot: choose and record `zone`'s address and make sure its
/// bridge is ready. Under the state root's `net-ipam` lock.
pub fn lease(
    layout: &Layout,
    host: &HostPaths,
    boot_id: &str,
    zone: &str,
    cfg: &ZoneConfig,
    is_live: IsLive<'_>,
) -> Result<NetRuntime> {
    let bridge = cfg.bridge();
    let subnet = cfg.subnet();
    let _lock = lock::exclusive(layout, "net", "ipam")?;
    let all = ipam::load_all(layout)?;
    let mut rec = all
        .iter()
        .find(|r| r.bridge == bridge)
        .cloned()
        .filter(|r| r.boot_id == boot_id)
        .unwrap_or_else(|| {
            let mut fresh = BridgeRecord::new(bridge, subnet, boot_id);
            fresh.created = all.iter().any(|r| r.bridge == bridge && r.created);
            fresh
        });
    // This zone is booting under its lock, so an old lease of its own is stale: keep
    // its address if it still fits (stable addresses across reboots), else drop it.
    let own_old = rec.leases.remove(zone);
    let old_subnet = (rec.subnet != subnet).then_some(rec.subnet);
    if old_subnet.is_some() {
        rec.leases.retain(|z, a| is_live(z, *a));
        if !rec.leases.is_empty() {
            let users: Vec<&str> = rec.leases.keys().map(String::as_str).collect();
            return Err(Error::config(
                zone,
                format!(
                    "net-subnet {subnet} differs from {}, which bridge {bridge} serves for running zone(s) {}; use net-subnet = \"{}\" or another net-bridge",
                    rec.subnet,
                    users.join(", "),
                    rec.subnet
                ),
            ));
        }
        rec.subnet = subnet;
    } else if let Some(a) = own_old {
        rec.leases.insert(zone.to_string(), a);
    }
    for other in all
        .iter()
        .filter(|r| r.bridge != bridge && r.boot_id == boot_id && !r.leases.is_empty())
    {
        if other.subnet.overlaps(&subnet) {
            return Err(Error::config(
                zone,
                format!(
                    "net-subnet {subnet} overlaps {} of bridge {}, which has running zones; give each bridge its own subnet",
                    other.subnet, other.bridge
                ),
            ));
        }
    }
    let address = match ipam::choose(&rec, zone, cfg.net_address) {
        Ok(a) => a,
        Err(_) => {
            // Reclaim stale leases (zones that died without halting) and try again.
            rec.leases.retain(|z, a| is_live(z, *a));
            ipam::choose(&rec, zone, cfg.net_address)
                .map_err(|r| ipam::refusal_error(zone, &rec, r))?
        }
    };
    let bridged: usize = all
        .iter()
        .filter(|r| r.bridge != bridge && r.boot_id == boot_id)
        .map(|r| r.leases.len())
        .sum::<usize>()
        + rec.leases.len()
        - usize::from(rec.leases.contains_key(zone));
    check_limits(
        zone,
        bridge,
        bridge_ports(host, bridge).len(),
        bridged,
        neigh_gc_thresh3(host),
    )?;

    let mut nl = Netlink::open().ctx(nl_err(zone, "opening a netlink socket"))?;
    let created = ensure_bridge(&mut nl, zone, bridge, subnet, old_subnet)?;
    rec.created |= created;
    if rec.created {
        refuse_router_advertisements(host, zone, bridge)?;
    }
    rec.leases.insert(zone.to_string(), address);
    ipam::save(layout, &rec)?;
    Ok(NetRuntime {
        bridge: bridge.to_string(),
        subnet,
        address,
        veth: veth_name(layout, zone),
        isolated: cfg.net_isolated,
    })
}

/// The IPv6 sysctls warren sets on a bridge it created: a zone must not be able to
/// configure the host's addresses or routes by advertising itself as a router.
pub const BRIDGE_SYSCTLS: [(&str, &str); 2] = [("accept_ra", "0"), ("autoconf", "0")];

/// Set [`BRIDGE_SYSCTLS`] on `bridge` (nothing to do without IPv6 on the host).
fn refuse_router_advertisements(host: &HostPaths, zone: &str, bridge: &str) -> Result<()> {
    let dir = host.proc.join("sys/net/ipv6/conf").join(bridge);
    if !dir.is_dir() {
        return Ok(());
    }
    for (knob, value) in BRIDGE_SYSCTLS {
        let path = dir.join(knob);
        if std::fs::read_to_string(&path).is_ok_and(|v| v.trim() == value) {
            continue;
        }
        std::fs::write(&path, value).ctx(|| {
            format!(
                "zone '{zone}': setting net.ipv6.conf.{bridge}.{knob} = {value} on warren's bridge (so zones cannot configure the host's IPv6 by router advertisements)"
            )
        })?;
    }
    Ok(())
}

/// Create the bridge if missing; give it the gateway address; set it up. Returns
/// whether it was created.
fn ensure_bridge(
    nl: &mut Netlink,
    zone: &str,
    bridge: &str,
    subnet: Subnet,
    old_subnet: Option<Subnet>,
) -> Result<bool> {
    let mut created = false;
    let link = match nl
        .link(bridge)
        .ctx(nl_err(zone, &format!("looking up bridge {bridge}")))?
    {
        Some(l) => l,
        None => {
            created = nl
                .create_bridge(bridge)
                .ctx(nl_err(zone, &format!("creating bridge {bridge}")))?;
            nl.link(bridge)
                .ctx(nl_err(zone, &format!("looking up bridge {bridge}")))?
                .ok_or_else(|| Error::Io {
                    context: format!(
                        "zone '{zone}': bridge {bridge} vanished right after its creation"
                    ),
                    source: std::io::Error::from(std::io::ErrorKind::NotFound),
                })?
        }
    };
    if link.kind.as_deref() != Some("bridge") {
        return Err(Error::config(
            zone,
            format!(
                "net-bridge {bridge}: the host has a network interface of that name that is not a bridge ({}); pick another net-bridge",
                link.kind.as_deref().unwrap_or("no link kind")
            ),
        ));
    }
    if let Some(old) = old_subnet {
        nl.delete_address(link.index, old.gateway(), old.prefix())
            .ctx(nl_err(
                zone,
                &format!("removing {} from bridge {bridge}", old.gateway()),
            ))?;
    }
    nl.add_address(link.index, subnet.gateway(), subnet.prefix())
        .ctx(nl_err(
            zone,
            &format!(
                "giving bridge {bridge} the address {}/{}",
                subnet.gateway(),
                subnet.prefix()
            ),
        ))?;
    if !link.up {
        nl.set_up(link.index)
            .ctx(nl_err(zone, &format!("setting bridge {bridge} up")))?;
    }
    Ok(created)
}

/// `/proc/sys/net/ipv6/conf/<link>/disable_ipv6` of a host link.
fn ipv6_conf(link: &str) -> std::path::PathBuf {
    Path::new("/proc/sys/net/ipv6/conf")
        .join(link)
        .join("disable_ipv6")
}

/// Turn IPv6 off on host link `link` (named by warren). A kernel without IPv6 (no
/// `/proc/sys/net/ipv6`) has nothing to turn off.
fn disable_ipv6(link: &str) -> std::io::Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .open(ipv6_conf(link))
    {
        Ok(mut f) => std::io::Write::write_all(&mut f, b"1"),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && !Path::new("/proc/sys/net/ipv6").exists() =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Step 3 of a bridged boot, run in the parent right after the clone: the veth pair,
/// then `eth0`'s address, link state and default route inside the zone's namespace.
pub fn attach(zone: &str, net: &NetRuntime, ns: &File) -> Result<()> {
    let mut host = Netlink::open().ctx(nl_err(zone, "opening a netlink socket"))?;
    let bridge = host
        .link(&net.bridge)
        .ctx(nl_err(zone, &format!("looking up bridge {}", net.bridge)))?
        .ok_or_else(|| Error::Io {
            context: format!(
                "zone '{zone}': bridge {} disappeared during boot; boot again to recreate it",
                net.bridge
            ),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })?;
    let id = net.identity();
    // The filter goes in before the veth exists, so no frame ever passes unfiltered.
    let mut flt =
        filter::Filter::open().ctx(nl_err(zone, "opening an nf_tables netlink socket"))?;
    flt.install(&net.bridge, &id).ctx(nl_err(
        zone,
        &format!(
            "installing the bridge filter (nftables table {}, chain {}; needs the kernel's nf_tables with the bridge family, CONFIG_NF_TABLES_BRIDGE)",
            filter::table_name(&net.bridge),
            filter::chain_name(&net.veth)
        ),
    ))?;
    host.create_veth(&net.veth, bridge.index, ZONE_IFNAME, id.mac, ns)
        .map_err(|e| match e.raw_os_error() {
            Some(warren_sys::libc::EXFULL) => Error::Unsupported(format!(
                "zone '{zone}': bridge {} is full: a bridge takes at most {BRIDGE_MAX_PORTS} ports (the kernel's BR_MAX_PORTS); put further zones on another bridge with its own subnet (net-bridge, net-subnet)",
                net.bridge
            )),
            _ => Error::Io {
                context: format!(
                    "zone '{zone}': creating veth pair {} (host, on bridge {}) / {ZONE_IFNAME} (zone)",
                    net.veth, net.bridge
                ),
                source: e,
            },
        })?;
    // A bridge port needs no IP stack of its own: with IPv6 on, every host-side veth
    // would get a link-local address, a fe80::/64 route and an ff00::/8 route, all
    // siblings in one node of the host's IPv6 routing table, which the kernel walks
    // linearly on each add, lookup and removal — a boot cost growing with the number
    // of zones (docs/scaling.md, "Bridged boots"). Off before the link goes up.
    disable_ipv6(&net.veth).ctx(|| {
        format!(
            "zone '{zone}': turning IPv6 off on its host-side veth {} ({})",
            net.veth,
            ipv6_conf(&net.veth).display()
        )
    })?;
    host.set_up_named(&net.veth)
        .ctx(nl_err(zone, &format!("setting veth {} up", net.veth)))?;
    let mut inside = Netlink::open_in(ns).ctx(nl_err(
        zone,
        "opening a netlink socket in the zone's network namespace",
    ))?;
    let eth0 = inside
        .link(ZONE_IFNAME)
        .ctx(nl_err(zone, "looking up eth0 in the zone"))?
        .ok_or_else(|| Error::Io {
            context: format!("zone '{zone}': eth0 did not appear in the zone's network namespace"),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })?;
    inside
        .add_address(eth0.index, net.address, net.subnet.prefix())
        .ctx(nl_err(
            zone,
            &format!(
                "giving eth0 the address {}/{}",
                net.address,
                net.subnet.prefix()
            ),
        ))?;
    inside
        .set_up(eth0.index)
        .ctx(nl_err(zone, "setting eth0 up"))?;
    inside.add_default_route(net.gateway()).ctx(nl_err(
        zone,
        &format!("adding the default route via {}", net.gateway()),
    ))?;
    Ok(())
}

/// Undo a bridged boot: delete the zone's bridge filter chains and the host end of the
/// veth pair (its peer goes with it), and free the lease. Safe to repeat.
pub fn release(layout: &Layout, zone: &str, net: &NetRuntime) -> Result<()> {
    let mut nl = Netlink::open().ctx(nl_err(zone, "opening a netlink socket"))?;
    // The chains go first (the zone's processes are gone, nothing sends) so that the
    // kernel retires them while the veth's deletion waits: see `filter::Filter`.
    let mut flt =
        filter::Filter::open().ctx(nl_err(zone, "opening an nf_tables netlink socket"))?;
    flt.remove(&net.bridge, &net.veth).ctx(nl_err(
        zone,
        &format!(
            "deleting its bridge filter chains from nftables table {}",
            filter::table_name(&net.bridge)
        ),
    ))?;
    nl.delete_link(&net.veth)
        .ctx(nl_err(zone, &format!("deleting veth {}", net.veth)))?;
    drop(flt);
    let _lock = lock::exclusive(layout, "net", "ipam")?;
    if let Some(mut rec) = ipam::load(&ipam::path(layout, &net.bridge))? {
        if rec.leases.get(zone) == Some(&net.address) {
            rec.leases.remove(zone);
            ipam::save(layout, &rec)?;
        }
    }
    Ok(())
}

/// `warren gc`'s part: stale leases, stray veths on warren's bridges, filter chains of
/// zones that hold no lease, a bridge's filter table once no zone uses the bridge, and
/// bridges that warren created and no zone uses any more. Returns one line per thing removed.
pub fn gc(
    layout: &Layout,
    host: &HostPaths,
    boot_id: &str,
    is_live: IsLive<'_>,
) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let _lock = lock::exclusive(layout, "net", "ipam")?;
    let records = ipam::load_all(layout)?;
    if records.is_empty() {
        return Ok(removed);
    }
    let mut nl = Netlink::open().ctx(|| "opening a netlink socket".to_string())?;
    let mut flt =
        filter::Filter::open().ctx(|| "opening an nf_tables netlink socket".to_string())?;
    for mut rec in records {
        let before = rec.leases.clone();
        if rec.boot_id != boot_id {
            rec.leases.clear();
        }
        rec.leases.retain(|z, a| is_live(z, *a));
        for (z, a) in before.iter().filter(|(z, _)| !rec.leases.contains_key(*z)) {
            removed.push(format!("lease {a} of zone '{z}' on bridge {}", rec.bridge));
        }
        let live_veths: Vec<String> = rec.leases.keys().map(|z| veth_name(layout, z)).collect();
        let filtered = flt
            .filtered_veths(&rec.bridge)
            .ctx(|| format!("listing nftables table {}", filter::table_name(&rec.bridge)))?;
        for veth in filtered.iter().filter(|v| !live_veths.contains(v)) {
            flt.remove(&rec.bridge, veth).ctx(|| {
                format!(
                    "deleting the filter chains of {veth} from nftables table {}",
                    filter::table_name(&rec.bridge)
                )
            })?;
            removed.push(format!(
                "filter chains of {veth} in nftables table {}",
                filter::table_name(&rec.bridge)
            ));
        }
        for port in bridge_ports(host, &rec.bridge) {
            let ours = port.starts_with("wz") && port.len() == 14;
            let stray = before.keys().any(|z| veth_name(layout, z) == port);
            if ours && stray && !live_veths.contains(&port) {
                nl.delete_link(&port)
                    .ctx(|| format!("deleting veth {port}"))?;
                removed.push(format!("veth {port} on bridge {}", rec.bridge));
            }
        }
        if rec.leases.is_empty() {
            let table = filter::table_name(&rec.bridge);
            if flt
                .remove_table(&rec.bridge)
                .ctx(|| format!("deleting nftables table {table}"))?
            {
                removed.push(format!("nftables table {table}"));
            }
            // A bridge with ports it did not make (an operator's) stays, and so does
            // the record that says warren created it, for a later gc.
            let idle = bridge_ports(host, &rec.bridge).is_empty();
            if rec.created && idle {
                let deleted = nl
                    .delete_link(&rec.bridge)
                    .ctx(|| format!("deleting bridge {}", rec.bridge))?;
                if deleted {
                    removed.push(format!("bridge {}", rec.bridge));
                }
            }
            if idle || !rec.created {
                ipam::remove(layout, &rec.bridge)?;
            } else {
                rec.boot_id = boot_id.to_string();
                ipam::save(layout, &rec)?;
            }
        } else if rec.leases != before || rec.boot_id != boot_id {
            rec.boot_id = boot_id.to_string();
            ipam::save(layout, &rec)?;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn veth_names_fit_and_differ() {
        let a = veth_name(&Layout::new("/var/lib/warren"), "web1");
        let b = veth_name(&Layout::new("/tmp/x"), "web1");
        let c = veth_name(&Layout::new("/var/lib/warren"), "web2");
        assert_eq!(a.len(), 14);
        assert!(a.starts_with("wz"));
        assert!(a != b && a != c);
        assert_eq!(a, veth_name(&Layout::new("/var/lib/warren"), "web1"));
    }

    #[test]
    fn limits_name_the_kernel_knob() {
        check_limits("z", "warren0", 1022, 999, Some(1024)).unwrap();
        let e = check_limits("z", "warren0", 1023, 10, Some(1024))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("BR_MAX_PORTS") && e.contains("net-bridge=warren1"),
            "{e}"
        );
        let e = check_limits("z", "warren0", 10, 1024, Some(1024))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("net.ipv4.neigh.default.gc_thresh3 = 1024"),
            "{e}"
        );
        check_limits("z", "warren0", 10, 5000, None).unwrap();
    }
}
