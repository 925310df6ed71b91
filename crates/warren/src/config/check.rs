//! Rules that involve several keys, the host's CPUs or its privileges.

use super::*;

/// Rules that involve several keys.
pub(super) fn check_consistency(zone: &str, c: &ZoneConfig) -> Result<()> {
    let l = &c.limits;
    if l.cpu_shares.is_some() && l.cpu_weight.is_some() {
        return Err(Error::config(
            zone,
            "cpu.shares and cpu.weight are both set; set one of them (they are two scales of the same weight)",
        ));
    }
    if l.memory_swap.is_some() && l.memory_max.is_none() {
        return Err(Error::config(
            zone,
            "memory.swap is set without memory.max; set memory.max too (swap is allowed on top of it)",
        ));
    }
    if let (Some(r), Some(m)) = (l.memory_request, l.memory_max) {
        if r > m {
            return Err(Error::config(
                zone,
                format!(
                    "memory.request {} is above memory.max {}; a zone cannot be guaranteed more than its cap, so lower memory.request or raise memory.max",
                    format_size(r),
                    format_size(m)
                ),
            ));
        }
    }
    if let (Some(p), Some(t)) = (l.max_processes, l.max_threads) {
        if t < p {
            return Err(Error::config(
                zone,
                format!(
                    "max-threads {t} is below max-processes {}; every process has at least one thread, so raise max-threads",
                    limit_text(p)
                ),
            ));
        }
    }
    if c.init.is_some() && !c.services.is_empty() {
        return Err(Error::config(
            zone,
            "services are run by warren's own init, but init is set to another program; drop one of them",
        ));
    }
    check_net(zone, c)?;
    if !c.userns && c.userns_base.is_some() {
        return Err(Error::config(
            zone,
            "userns-base is set but userns = false; unset userns-base or set userns = true",
        ));
    }
    if let Some(both) = c.caps_add.iter().find(|a| c.caps_drop.contains(a)) {
        return Err(Error::config(
            zone,
            format!("{both} is in both caps.add and caps.drop; keep it in one of them"),
        ));
    }
    if let Some(cs) = &l.cpuset {
        if cs.0.is_empty() {
            return Err(Error::config(
                zone,
                "cpuset is empty; name at least one CPU",
            ));
        }
    }
    Ok(())
}

/// The `net-*` keys: only with `net = "bridge"`, and a pinned address must fit.
pub(super) fn check_net(zone: &str, c: &ZoneConfig) -> Result<()> {
    if c.net != NetMode::Bridge {
        let set: Vec<&str> = [
            ("net-bridge", c.net_bridge.is_some()),
            ("net-subnet", c.net_subnet.is_some()),
            ("net-address", c.net_address.is_some()),
            ("net-isolated", c.net_isolated),
        ]
        .iter()
        .filter(|(_, on)| *on)
        .map(|(k, _)| *k)
        .collect();
        if !set.is_empty() {
            return Err(Error::config(
                zone,
                format!(
                    "{} apply only to net = \"bridge\", but net is \"{}\"; set net = \"bridge\" or unset them",
                    set.join(", "),
                    c.net.as_str()
                ),
            ));
        }
        return Ok(());
    }
    if let Some(a) = c.net_address {
        let subnet = c.subnet();
        if let Some(why) = subnet.zone_address_problem(a) {
            let whose = if c.net_subnet.is_some() {
                "net-subnet"
            } else {
                "the default net-subnet"
            };
            return Err(Error::config(
                zone,
                format!(
                    "net-address {a} cannot be used in {whose} {subnet}: {why}; pick an address from {} to {} or change net-subnet",
                    subnet.zone_addresses().next().expect("a /30 holds one zone"),
                    subnet.zone_addresses().last().expect("a /30 holds one zone"),
                ),
            ));
        }
    }
    Ok(())
}

/// Checks against the host this zone will run on: `online` is the host's online CPU list.
pub fn check_host(zone: &str, c: &ZoneConfig, online: &[u32]) -> Result<()> {
    if let Some(cs) = &c.limits.cpuset {
        if let Some(bad) = cs.0.iter().find(|cpu| !online.contains(cpu)) {
            return Err(Error::config(
                zone,
                format!(
                    "cpuset \"{cs}\" names CPU {bad}, which this host does not have online (online: {}); pick CPUs from that list",
                    CpuSet(online.to_vec())
                ),
            ));
        }
    }
    if let Some(m) = c.limits.cpu_max {
        if m > online.len() as f64 {
            return Err(Error::config(
                zone,
                format!(
                    "cpu.max {m} is more than the {} CPU(s) this host has; use at most {}",
                    online.len(),
                    online.len()
                ),
            ));
        }
    }
    Ok(())
}

/// What the host can grant, for [`check_privileges`].
#[derive(Debug, Clone)]
pub struct HostPrivileges {
    /// warren's own capability bounding set (`CapBnd` of /proc/self/status).
    pub cap_bounding: u64,
    /// warren's own hard limit of a resource (by config name), if known.
    pub hard_limits: BTreeMap<String, u64>,
}

/// Refuse what the host cannot grant: a capability outside warren's bounding set
/// (no process warren starts can ever hold it) and a hard rlimit above warren's own
/// (raising one needs CAP_SYS_RESOURCE in the host's user namespace). Pure.
pub fn check_privileges(zone: &str, c: &ZoneConfig, host: &HostPrivileges) -> Result<()> {
    for cap in &c.caps_add {
        if host.cap_bounding & crate::isolation::caps::bit(cap) == 0 {
            return Err(Error::config(
                zone,
                format!(
                    "caps.add {cap}: this host cannot grant it (it is not in warren's capability bounding set, CapBnd {:016x}); remove it from caps.add or run warren where the bounding set includes it",
                    host.cap_bounding
                ),
            ));
        }
    }
    for (name, l) in &c.rlimits {
        if let Some(&max) = host.hard_limits.get(name) {
            if l.hard > max {
                return Err(Error::config(
                    zone,
                    format!(
                        "rlimit.{name} hard limit {} is above warren's own hard limit {} and raising it needs CAP_SYS_RESOURCE, which warren lacks here; use at most {}",
                        crate::isolation::rlimits::format(crate::isolation::rlimits::Limit { soft: l.hard, hard: l.hard }),
                        crate::isolation::rlimits::format(crate::isolation::rlimits::Limit { soft: max, hard: max }),
                        crate::isolation::rlimits::format(crate::isolation::rlimits::Limit { soft: max, hard: max }),
                    ),
                ));
            }
        }
    }
    Ok(())
}
