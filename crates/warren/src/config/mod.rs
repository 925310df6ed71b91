//! warren's zonecfg: a zone's config, its TOML form and its validation.
//!
//! The TOML file, `--set key=value` flags and (later) API JSON all become the same
//! [`ZoneConfig`]. Keys are dotted paths (`memory.max` is `max` in a `[memory]` table);
//! [`KEYS`] is the one registry of them, with a parser each, so an unknown key or a bad
//! value is refused with the key's name and an example of a good value.
//!
//! Everything here is pure: host facts (online CPUs) are passed in.
//!
//! Laid out by idea: the types are here; [`keys`] is the registry, [`suggest`] answers
//! an unknown key, [`values`] the value parsers, [`toml_form`] the file and `--set`
//! forms, [`check`] the rules that involve several keys or the host, [`defaults`] the
//! host's default limits (the `default` profile's caps).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::names;
use crate::net::subnet::{ifname_problem, Subnet, DEFAULT_BRIDGE, DEFAULT_SUBNET};

mod check;
mod defaults;
mod keys;
mod suggest;
mod toml_form;
mod values;

pub use check::*;
pub use defaults::*;
pub use keys::*;
pub use suggest::*;
pub use toml_form::*;
pub use values::*;

/// How a zone runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Brand {
    /// Namespaces and cgroups on the host kernel.
    #[default]
    Native,
}

/// The zone's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum NetMode {
    /// Its own network namespace with only loopback.
    #[default]
    None,
    /// The host's network stack, shared.
    Host,
    /// Its own network namespace with `eth0`, one end of a veth pair whose other end
    /// is a port of a host bridge; an address from the bridge's subnet.
    Bridge,
}

impl NetMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetMode::None => "none",
            NetMode::Host => "host",
            NetMode::Bridge => "bridge",
        }
    }
}

/// The order of eviction under memory pressure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Priority {
    BestEffort,
    #[default]
    Normal,
    Critical,
}

/// A command: a string run by `/bin/sh -c`, or an argv run directly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Command {
    Shell(String),
    Argv(Vec<String>),
}

impl Command {
    /// The argv to execute.
    pub fn argv(&self) -> Vec<String> {
        match self {
            Command::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
            Command::Argv(v) => v.clone(),
        }
    }
}

/// Resource controls. `None` means "no limit".
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Limits {
    pub max_processes: Option<u64>,
    pub max_threads: Option<u64>,
    pub memory_max: Option<u64>,
    pub memory_swap: Option<u64>,
    /// Guaranteed memory: v1 memory.soft_limit_in_bytes, v2 memory.low. It also sets the
    /// zone's share of host swap when `memory.swap` is not given ([`swap_allowance`]).
    pub memory_request: Option<u64>,
    /// Swap derived at boot from `memory_request` and the host's RAM and swap (not a
    /// config key; see [`Limits::with_swap_allowance`]). Written only where the kernel
    /// accounts swap per cgroup.
    #[serde(skip)]
    pub swap_allowance: Option<u64>,
    pub cpu_shares: Option<u64>,
    pub cpu_weight: Option<u64>,
    /// A cap in CPUs, e.g. 0.5.
    pub cpu_max: Option<f64>,
    pub cpuset: Option<CpuSet>,
    /// The CFS period the cap is enforced over, in microseconds (default
    /// `cgroups::CPU_PERIOD_US`; an OCI `cpu.period` is kept as given).
    #[serde(skip)]
    pub cpu_period_us: Option<u64>,
    /// OCI `memory.swappiness` (v1 only: cgroup v2 has no per-cgroup swappiness).
    #[serde(skip)]
    pub memory_swappiness: Option<u64>,
    /// OCI `memory.disableOOMKiller` (v1 `memory.oom_control`; v2 has no such switch).
    #[serde(skip)]
    pub oom_kill_disable: bool,
}

/// A zone's share of host swap when it sets `memory.request` but not `memory.swap`,
/// as the kubelet's LimitedSwap: `request / MemTotal × SwapTotal`. `None` without a
/// request, without `memory.max` (swap is allowed on top of it) or without host swap.
pub fn swap_allowance(limits: &Limits, mem_total: u64, swap_total: u64) -> Option<u64> {
    if limits.memory_swap.is_some() || limits.memory_max.is_none() {
        return None;
    }
    let request = limits.memory_request?;
    if mem_total == 0 || swap_total == 0 {
        return None;
    }
    let share = (request as u128 * swap_total as u128 / mem_total as u128) as u64;
    Some(share)
}

impl Limits {
    /// These limits with [`Limits::swap_allowance`] filled from the host's RAM and swap.
    pub fn with_swap_allowance(&self, mem_total: u64, swap_total: u64) -> Limits {
        Limits {
            swap_allowance: swap_allowance(self, mem_total, swap_total),
            ..self.clone()
        }
    }

    /// The value for the pids controller: the kernel counts tasks (threads), so
    /// `max-threads` wins when set, else `max-processes`.
    pub fn pids_max(&self) -> Option<u64> {
        self.max_threads.or(self.max_processes)
    }
}

/// A validated zone config.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ZoneConfig {
    pub template: String,
    pub brand: Brand,
    pub net: NetMode,
    /// `net = "bridge"`: the host bridge (default `warren0`).
    pub net_bridge: Option<String>,
    /// `net = "bridge"`: the subnet addresses come from (default 10.231.0.0/16).
    pub net_subnet: Option<Subnet>,
    /// `net = "bridge"`: a pinned address (default: the lowest free one).
    pub net_address: Option<Ipv4Addr>,
    /// `net = "bridge"`: nothing is bridged between this zone and other zones (the
    /// host and the gateway stay reachable).
    pub net_isolated: bool,
    pub hostname: Option<String>,
    pub init: Option<Command>,
    pub services: Vec<Command>,
    pub autoboot: bool,
    pub priority: Priority,
    /// Seconds `halt` waits for a graceful stop before killing.
    pub stop_timeout: Option<u64>,
    pub limits: Limits,
    /// Capabilities kept on top of the default set (canonical names, `CAP_…`).
    pub caps_add: Vec<String>,
    /// Capabilities dropped from the default set.
    pub caps_drop: Vec<String>,
    /// Syscalls denied on top of the default seccomp filter.
    pub seccomp_deny: Vec<String>,
    /// Run the zone in its own user namespace (default): its root is uid 0 inside and
    /// an unprivileged host id outside (see `idmap`).
    pub userns: bool,
    /// A pinned first host id of the zone's range (default: allocated).
    pub userns_base: Option<u32>,
    /// Resource limits by name (`nofile`, see `isolation::rlimits`).
    pub rlimits: BTreeMap<String, crate::isolation::rlimits::Limit>,
    /// The cap on the zone's private layer (its writes), in bytes.
    pub disk_max: Option<u64>,
    /// `proc-views`: bind lxcfs's views of /proc over the zone's (docs/proc-views.md).
    /// `None`: when the host has them (`defaults.toml`, lxcfs mounted); `Some(true)`:
    /// required, the boot fails without them; `Some(false)`: never.
    pub proc_views: Option<bool>,
    /// `memory.merge`: KSM may merge the zone's identical anonymous pages, with each other
    /// and with other merging zones' (warren-init sets PR_SET_MEMORY_MERGE; docs/suspend.md,
    /// "KSM"). Off by default: merging crosses tenants (timing side channels).
    pub memory_merge: bool,
    /// `suspend-after`: the agent suspends the zone after this many seconds without CPU
    /// or network activity (docs/suspend.md, "Idle zones").
    pub suspend_after: Option<u64>,
    /// The zone's default environment (`KEY=VALUE`), given to its init (and so its
    /// services) and to every login, where `-e` overrides it.
    pub env: Vec<String>,
}

impl ZoneConfig {
    /// The defaults for a new zone made from `template`.
    pub fn new(template: &str) -> ZoneConfig {
        ZoneConfig {
            template: template.to_string(),
            brand: Brand::Native,
            net: NetMode::None,
            net_bridge: None,
            net_subnet: None,
            net_address: None,
            net_isolated: false,
            hostname: None,
            init: None,
            services: Vec::new(),
            autoboot: false,
            priority: Priority::Normal,
            stop_timeout: None,
            limits: Limits::default(),
            caps_add: Vec::new(),
            caps_drop: Vec::new(),
            seccomp_deny: Vec::new(),
            userns: true,
            userns_base: None,
            rlimits: BTreeMap::new(),
            disk_max: None,
            proc_views: None,
            memory_merge: false,
            suspend_after: None,
            env: Vec::new(),
        }
    }

    /// The bridge a `net = "bridge"` zone attaches to.
    pub fn bridge(&self) -> &str {
        self.net_bridge.as_deref().unwrap_or(DEFAULT_BRIDGE)
    }

    /// The subnet a `net = "bridge"` zone's address comes from.
    pub fn subnet(&self) -> Subnet {
        self.net_subnet.unwrap_or(DEFAULT_SUBNET)
    }

    /// The hostname inside the zone.
    pub fn hostname_or<'a>(&'a self, zone: &'a str) -> &'a str {
        self.hostname.as_deref().unwrap_or(zone)
    }
}

/// A set of CPUs, e.g. "0-3,6".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub struct CpuSet(pub Vec<u32>);

impl From<CpuSet> for String {
    fn from(c: CpuSet) -> String {
        c.to_string()
    }
}

impl std::fmt::Display for CpuSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = String::new();
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                let _ = write!(out, "{start}");
            } else {
                let _ = write!(out, "{start}-{end}");
            }
            i += 1;
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests;
