//! IPv4 subnets and interface names: parsing and arithmetic, pure.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The bridge zones attach to when `net-bridge` is not set.
pub const DEFAULT_BRIDGE: &str = "warren0";
/// The subnet zones draw addresses from when `net-subnet` is not set.
pub const DEFAULT_SUBNET: Subnet = Subnet {
    network: Ipv4Addr::new(10, 231, 0, 0),
    prefix: 16,
};

/// An IPv4 network, e.g. 10.231.0.0/16. The first host address (.1) is the bridge's,
/// the zones' default gateway; zones get the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Subnet {
    network: Ipv4Addr,
    prefix: u8,
}

impl Subnet {
    /// The smallest prefix length accepted (a /8 is 16 M addresses; more is a mistake).
    pub const MIN_PREFIX: u8 = 8;
    /// The largest: a /30 holds the gateway and one zone.
    pub const MAX_PREFIX: u8 = 30;

    pub fn network(&self) -> Ipv4Addr {
        self.network
    }
    pub fn prefix(&self) -> u8 {
        self.prefix
    }
    fn mask(&self) -> u32 {
        u32::MAX << (32 - self.prefix)
    }
    fn base(&self) -> u32 {
        u32::from(self.network)
    }
    fn broadcast(&self) -> u32 {
        self.base() | !self.mask()
    }
    /// The bridge's address and the zones' gateway: the first host address.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.base() + 1)
    }
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        u32::from(a) & self.mask() == self.base()
    }
    /// Whether two subnets share any address.
    pub fn overlaps(&self, other: &Subnet) -> bool {
        let p = self.prefix.min(other.prefix);
        let m = u32::MAX << (32 - p);
        self.base() & m == other.base() & m
    }
    /// How many zones it can hold: all host addresses but the gateway.
    pub fn zone_capacity(&self) -> u32 {
        (self.broadcast() - self.base()).saturating_sub(2)
    }
    /// Why `a` cannot be a zone's address here, if it cannot.
    pub fn zone_address_problem(&self, a: Ipv4Addr) -> Option<&'static str> {
        let v = u32::from(a);
        if !self.contains(a) {
            Some("it is outside the subnet")
        } else if v == self.base() {
            Some("it is the subnet's network address")
        } else if v == self.broadcast() {
            Some("it is the subnet's broadcast address")
        } else if a == self.gateway() {
            Some("it is the gateway (the bridge's own address)")
        } else {
            None
        }
    }
    /// Zone addresses in order: gateway + 1 up to the last before broadcast.
    pub fn zone_addresses(&self) -> impl Iterator<Item = Ipv4Addr> {
        (self.base() + 2..self.broadcast()).map(Ipv4Addr::from)
    }
}

impl fmt::Display for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl FromStr for Subnet {
    type Err = String;
    fn from_str(s: &str) -> Result<Subnet, String> {
        let example = "expected an IPv4 subnet such as \"10.231.0.0/16\"";
        let (a, p) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: {example}"))?;
        let addr: Ipv4Addr = a.parse().map_err(|_| format!("{s:?}: {example}"))?;
        let prefix: u8 = p.parse().map_err(|_| format!("{s:?}: {example}"))?;
        if !(Self::MIN_PREFIX..=Self::MAX_PREFIX).contains(&prefix) {
            return Err(format!(
                "{s:?}: the prefix length must be from /{} to /{} (a /30 holds the gateway and one zone)",
                Self::MIN_PREFIX,
                Self::MAX_PREFIX
            ));
        }
        let net = Subnet {
            network: addr,
            prefix,
        };
        if u32::from(addr) & net.mask() != u32::from(addr) {
            let fixed = Ipv4Addr::from(u32::from(addr) & net.mask());
            return Err(format!(
                "{s:?}: host bits are set; the network is \"{fixed}/{prefix}\""
            ));
        }
        Ok(net)
    }
}

impl Serialize for Subnet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Subnet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Subnet, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Why `name` cannot be a network interface (bridge) name, if it cannot: the kernel
/// takes at most 15 bytes; warren also keeps to letters, digits, '-', '_' and '.'.
pub fn ifname_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 15 {
        Some("an interface name has 1 to 15 characters")
    } else if name == "." || name == ".." {
        Some("\".\" and \"..\" are not interface names")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        Some("use letters, digits, '-', '_' and '.'")
    } else if name.starts_with("wz") {
        Some("names starting with \"wz\" are warren's per-zone veths")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_arithmetic() {
        let s: Subnet = "10.231.0.0/16".parse().unwrap();
        assert_eq!(s, DEFAULT_SUBNET);
        assert_eq!(s.to_string(), "10.231.0.0/16");
        assert_eq!(s.gateway(), Ipv4Addr::new(10, 231, 0, 1));
        assert_eq!(s.zone_capacity(), 65533);
        assert!(s.contains(Ipv4Addr::new(10, 231, 255, 254)));
        assert!(!s.contains(Ipv4Addr::new(10, 232, 0, 2)));
        let small: Subnet = "192.168.7.0/30".parse().unwrap();
        assert_eq!(small.zone_capacity(), 1);
        assert_eq!(
            small.zone_addresses().collect::<Vec<_>>(),
            vec![Ipv4Addr::new(192, 168, 7, 2)]
        );
        assert!(small
            .zone_address_problem(Ipv4Addr::new(192, 168, 7, 3))
            .unwrap()
            .contains("broadcast"));
        assert!(small
            .zone_address_problem(Ipv4Addr::new(192, 168, 7, 1))
            .unwrap()
            .contains("gateway"));
        assert!(small
            .zone_address_problem(Ipv4Addr::new(192, 168, 8, 2))
            .unwrap()
            .contains("outside"));
        assert!(s.overlaps(&"10.231.4.0/24".parse().unwrap()));
        assert!(!s.overlaps(&"10.232.0.0/16".parse().unwrap()));
    }

    #[test]
    fn bad_subnets_say_why() {
        for (text, needle) in [
            ("10.0.0.0", "expected an IPv4 subnet"),
            ("10.0.0.0/31", "from /8 to /30"),
            ("10.0.0.0/4", "from /8 to /30"),
            ("10.0.0.5/24", "network is \"10.0.0.0/24\""),
            ("10.0.0.300/24", "expected an IPv4 subnet"),
        ] {
            let e = text.parse::<Subnet>().unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn interface_names() {
        assert_eq!(ifname_problem("warren0"), None);
        assert!(ifname_problem("").is_some());
        assert!(ifname_problem("abcdefghijklmnop").is_some());
        assert!(ifname_problem("a b").is_some());
        assert!(ifname_problem("a/b").is_some());
        assert!(ifname_problem("wz1234").is_some());
    }
}
