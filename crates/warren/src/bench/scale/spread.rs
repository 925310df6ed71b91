//! Where each zone of an http step goes: its bridge (a Linux bridge takes at most 1,023
//! ports, `net::BRIDGE_MAX_PORTS`, so past that zones are spread over several bridges,
//! `--zones-per-bridge` each, 1,000 by default) and, with `--pin`, its CPU. Pure.
//!
//! Bridge b (from 0) is named `<bridge>` for b = 0 and `<bridge>-<b>` after, and serves
//! the b-th equal slice of `--subnet`: the smallest slice that holds the gateway and
//! `zones-per-bridge` zones (a /22 for 1,000 zones). Slices never overlap, as warren
//! requires of bridges with running zones.

use crate::net::subnet::{ifname_problem, Subnet};

/// One zone's network and CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub bridge: String,
    pub subnet: Subnet,
    /// `--pin`: the CPU the zone's cpuset holds.
    pub cpu: Option<u32>,
}

/// The prefix length of the smallest subnet holding the gateway and `zones` zones.
fn slice_prefix(zones: usize) -> u8 {
    // network + gateway + zones + broadcast addresses.
    let need = zones as u64 + 3;
    let bits = 64 - (need - 1).leading_zeros() as u8;
    32 - bits.max(2)
}

/// The placement of every zone of an N-zone step: zone i on bridge i / per_bridge,
/// and with `cpus` (pinning) on CPU cpus[i mod len]. Err: why the subnet or the bridge
/// names cannot hold them, with the fix.
pub fn place(
    n: usize,
    bridge: &str,
    subnet: &Subnet,
    per_bridge: usize,
    cpus: Option<&[u32]>,
) -> Result<Vec<Placement>, String> {
    let per_bridge = per_bridge.max(1);
    let bridges = n.div_ceil(per_bridge).max(1);
    let subnets: Vec<Subnet> = if bridges == 1 {
        vec![*subnet]
    } else {
        let prefix = slice_prefix(per_bridge);
        let slices = if prefix > subnet.prefix() {
            1u64 << (prefix - subnet.prefix())
        } else {
            1
        };
        if (bridges as u64) > slices || prefix > Subnet::MAX_PREFIX {
            return Err(format!(
                "--subnet {subnet}: {n} zones at {per_bridge} per bridge need {bridges} bridges with a /{prefix} each, and {subnet} holds {slices}; give a larger --subnet, e.g. 10.224.0.0/12"
            ));
        }
        let size = 1u32 << (32 - prefix);
        (0..bridges)
            .map(|b| {
                let net = u32::from(subnet.network()) + b as u32 * size;
                format!("{}/{prefix}", std::net::Ipv4Addr::from(net))
                    .parse::<Subnet>()
                    .map_err(|e| format!("--subnet {subnet}: slice {b}: {e}"))
            })
            .collect::<Result<_, _>>()?
    };
    if subnets[0].zone_capacity() < n.min(per_bridge) as u32 {
        return Err(format!(
            "--subnet {subnet} holds {} zones, and a bridge of this step needs {}; give a larger --subnet",
            subnets[0].zone_capacity(),
            n.min(per_bridge)
        ));
    }
    let names: Vec<String> = (0..bridges)
        .map(|b| {
            if b == 0 {
                bridge.to_string()
            } else {
                format!("{bridge}-{b}")
            }
        })
        .collect();
    if let Some((name, why)) = names.iter().find_map(|b| ifname_problem(b).map(|w| (b, w))) {
        return Err(format!(
            "--bridge {bridge}: the bridge {name} this step needs is not a valid interface name ({why}); give a shorter --bridge"
        ));
    }
    Ok((0..n)
        .map(|i| {
            let b = i / per_bridge;
            Placement {
                bridge: names[b].clone(),
                subnet: subnets[b],
                cpu: cpus.filter(|c| !c.is_empty()).map(|c| c[i % c.len()]),
            }
        })
        .collect())
}

/// The distinct bridges of a placement, in order.
pub fn bridges(p: &[Placement]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for x in p {
        if !v.contains(&x.bridge) {
            v.push(x.bridge.clone());
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(s: &str) -> Subnet {
        s.parse().unwrap()
    }

    #[test]
    fn one_bridge_up_to_the_limit() {
        let p = place(1000, "wbench1", &sub("10.237.0.0/16"), 1000, None).unwrap();
        assert_eq!(bridges(&p), ["wbench1"]);
        assert_eq!(p[999].subnet, sub("10.237.0.0/16"));
        assert!(p.iter().all(|x| x.cpu.is_none()));
    }

    /// Past 1,023 ports zones go to further bridges with their own slices of the subnet.
    #[test]
    fn past_the_bridge_port_limit_zones_spread_over_bridges() {
        let p = place(2500, "wbench1", &sub("10.237.0.0/16"), 1000, None).unwrap();
        assert_eq!(bridges(&p), ["wbench1", "wbench1-1", "wbench1-2"]);
        assert_eq!(p[0].subnet, sub("10.237.0.0/22"));
        assert_eq!(p[1000].subnet, sub("10.237.4.0/22"));
        assert_eq!(p[2499].subnet, sub("10.237.8.0/22"));
        for b in bridges(&p) {
            let n = p.iter().filter(|x| x.bridge == b).count();
            assert!(n <= crate::net::BRIDGE_MAX_PORTS, "{b}: {n}");
        }
        // No two slices overlap.
        assert!(!p[0].subnet.overlaps(&p[1000].subnet));
        // Small slices for a test: 2 zones per bridge in a /24.
        let t = place(3, "wt1h", &sub("10.250.8.0/24"), 2, None).unwrap();
        assert_eq!(bridges(&t), ["wt1h", "wt1h-1"]);
        assert_eq!(t[2].subnet, sub("10.250.8.8/29"));
        assert!(t[2].subnet.zone_capacity() >= 2);
    }

    #[test]
    fn pinning_walks_the_cpus() {
        let p = place(5, "b", &sub("10.1.0.0/24"), 1000, Some(&[0, 1])).unwrap();
        let cpus: Vec<_> = p.iter().map(|x| x.cpu.unwrap()).collect();
        assert_eq!(cpus, [0, 1, 0, 1, 0]);
    }

    #[test]
    fn a_subnet_too_small_or_a_name_too_long_is_refused() {
        let e = place(5000, "b", &sub("10.1.0.0/24"), 1000, None).unwrap_err();
        assert!(e.contains("give a larger --subnet"), "{e}");
        let e = place(10, "b", &sub("10.1.0.0/29"), 1000, None).unwrap_err();
        assert!(e.contains("holds 5 zones"), "{e}");
        let e = place(3, "abcdefghijklmno", &sub("10.1.0.0/24"), 2, None).unwrap_err();
        assert!(e.contains("give a shorter --bridge"), "{e}");
    }
}
