//! Address leases: one JSON file per bridge, `<root>/net/<bridge>.json`, changed only
//! under the state-root-wide lock `locks/net-ipam.lock` and written atomically, so
//! concurrent `warren boot` processes never hand out one address twice.
//!
//! A lease names its zone. It is freed when the zone halts or its boot fails; a lease
//! whose zone is not running any more (crash, kill -9, host reboot) is *stale* and is
//! reclaimed lazily: when its address is wanted (pinned by another zone, or the subnet
//! is full), by the zone's own next command (`reconcile`), and by `warren gc`. Checking
//! every lease at every boot would make N boots cost O(N²) file reads.
//!
//! The file records the boot id: after a host reboot every lease is stale at once.

use std::collections::{BTreeMap, HashSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::subnet::Subnet;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::atomic_write;
use crate::layout::Layout;

pub const VERSION: u32 = 1;

/// `<root>/net/<bridge>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BridgeRecord {
    pub version: u32,
    pub bridge: String,
    pub subnet: Subnet,
    /// The host's boot id when these leases were made.
    pub boot_id: String,
    /// Whether warren created the bridge (then `warren gc` may remove it when unused).
    #[serde(default)]
    pub created: bool,
    /// zone name → its address.
    #[serde(default)]
    pub leases: BTreeMap<String, Ipv4Addr>,
}

impl BridgeRecord {
    pub fn new(bridge: &str, subnet: Subnet, boot_id: &str) -> BridgeRecord {
        BridgeRecord {
            version: VERSION,
            bridge: bridge.to_string(),
            subnet,
            boot_id: boot_id.to_string(),
            created: false,
            leases: BTreeMap::new(),
        }
    }

    /// The zone holding `addr`, if any.
    pub fn holder(&self, addr: Ipv4Addr) -> Option<&str> {
        self.leases
            .iter()
            .find(|(_, a)| **a == addr)
            .map(|(z, _)| z.as_str())
    }
}

/// Why no address could be chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The pinned address is leased to another zone.
    Taken { addr: Ipv4Addr, by: String },
    /// Every zone address of the subnet is leased.
    Full { capacity: u32 },
}

/// Pick `zone`'s address (pure): its pinned one, else the one it already holds, else
/// the lowest free one.
pub fn choose(
    rec: &BridgeRecord,
    zone: &str,
    pinned: Option<Ipv4Addr>,
) -> std::result::Result<Ipv4Addr, Refusal> {
    if let Some(addr) = pinned {
        return match rec.holder(addr) {
            Some(by) if by != zone => Err(Refusal::Taken {
                addr,
                by: by.to_string(),
            }),
            _ => Ok(addr),
        };
    }
    if let Some(a) = rec.leases.get(zone) {
        if rec.subnet.zone_address_problem(*a).is_none() {
            return Ok(*a);
        }
    }
    let used: HashSet<Ipv4Addr> = rec.leases.values().copied().collect();
    rec.subnet
        .zone_addresses()
        .find(|a| !used.contains(a))
        .ok_or(Refusal::Full {
            capacity: rec.subnet.zone_capacity(),
        })
}

pub fn dir(layout: &Layout) -> PathBuf {
    layout.root().join("net")
}

pub fn path(layout: &Layout, bridge: &str) -> PathBuf {
    dir(layout).join(format!("{bridge}.json"))
}

/// Load one record; `None` if there is none.
pub fn load(path: &Path) -> Result<Option<BridgeRecord>> {
    match crate::fsutil::read_bounded(path, crate::fsutil::MAX_SMALL_FILE) {
        Ok(bytes) => crate::state::parse_json(path, &bytes).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).ctx(|| format!("reading {}", path.display())),
    }
}

/// Every record in the state root.
pub fn load_all(layout: &Layout) -> Result<Vec<BridgeRecord>> {
    let d = dir(layout);
    let entries = match std::fs::read_dir(&d) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).ctx(|| format!("reading {}", d.display())),
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        if let Some(r) = load(&p)? {
            out.push(r);
        }
    }
    out.sort_by(|a, b| a.bridge.cmp(&b.bridge));
    Ok(out)
}

/// Write one record (atomic; not fsync'd: leases die with the host, see the boot id).
pub fn save(layout: &Layout, rec: &BridgeRecord) -> Result<()> {
    let d = dir(layout);
    std::fs::create_dir_all(&d).ctx(|| format!("creating {}", d.display()))?;
    let p = path(layout, &rec.bridge);
    let json = serde_json::to_vec_pretty(rec).expect("a bridge record serialises");
    atomic_write(&p, &json, false).ctx(|| format!("writing {}", p.display()))
}

/// Remove one record.
pub fn remove(layout: &Layout, bridge: &str) -> Result<()> {
    let p = path(layout, bridge);
    match std::fs::remove_file(&p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).ctx(|| format!("removing {}", p.display()))
        }
        _ => Ok(()),
    }
}

/// A refusal as the error a user reads.
pub fn refusal_error(zone: &str, rec: &BridgeRecord, r: Refusal) -> Error {
    match r {
        Refusal::Taken { addr, by } => Error::config(
            zone,
            format!(
                "net-address {addr} is already in use by running zone '{by}' on bridge {}; pin another address or unset net-address to get a free one",
                rec.bridge
            ),
        ),
        Refusal::Full { capacity } => Error::config(
            zone,
            format!(
                "net-subnet {} has no free address: it holds {capacity} zone(s) and all are running on bridge {}; set a larger net-subnet (for every zone on that bridge) or put this zone on another net-bridge with its own net-subnet",
                rec.subnet, rec.bridge
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(subnet: &str) -> BridgeRecord {
        BridgeRecord::new("wt0", subnet.parse().unwrap(), "b1")
    }

    #[test]
    fn lowest_free_then_reuse() {
        let mut r = rec("10.9.0.0/29");
        let a = choose(&r, "a", None).unwrap();
        assert_eq!(a, Ipv4Addr::new(10, 9, 0, 2));
        r.leases.insert("a".into(), a);
        assert_eq!(choose(&r, "b", None).unwrap(), Ipv4Addr::new(10, 9, 0, 3));
        assert_eq!(choose(&r, "a", None).unwrap(), a, "a zone keeps its lease");
        r.leases.remove("a");
        r.leases.insert("c".into(), Ipv4Addr::new(10, 9, 0, 3));
        assert_eq!(
            choose(&r, "b", None).unwrap(),
            a,
            "freed addresses are reused"
        );
    }

    #[test]
    fn pinned_and_full() {
        let mut r = rec("10.9.0.0/30");
        assert_eq!(r.subnet.zone_capacity(), 1);
        r.leases.insert("a".into(), Ipv4Addr::new(10, 9, 0, 2));
        assert_eq!(choose(&r, "b", None), Err(Refusal::Full { capacity: 1 }));
        assert_eq!(
            choose(&r, "b", Some(Ipv4Addr::new(10, 9, 0, 2))),
            Err(Refusal::Taken {
                addr: Ipv4Addr::new(10, 9, 0, 2),
                by: "a".into()
            })
        );
        assert_eq!(
            choose(&r, "a", Some(Ipv4Addr::new(10, 9, 0, 2))),
            Ok(Ipv4Addr::new(10, 9, 0, 2))
        );
        let e = refusal_error("b", &r, Refusal::Full { capacity: 1 }).to_string();
        assert!(
            e.starts_with("zone 'b': net-subnet 10.9.0.0/30 has no free address"),
            "{e}"
        );
    }

    #[test]
    fn records_round_trip() {
        let mut r = rec("10.9.0.0/24");
        r.leases.insert("a".into(), Ipv4Addr::new(10, 9, 0, 7));
        let json = serde_json::to_vec(&r).unwrap();
        let back: BridgeRecord = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, r);
    }
}
