//! warren's zonecfg: a zone's config, its TOML form and its validation.
//!
//! The TOML file, `--set key=value` flags and (later) API JSON all become the same
//! [`ZoneConfig`]. Keys are dotted paths (`memory.max` is `max` in a `[memory]` table);
//! [`KEYS`] is the one registry of them, with a parser each, so an unknown key or a bad
//! value is refused with the key's name and an example of a good value.
//!
//! Everything here is pure: host facts (online CPUs) are passed in.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::names;
use crate::net::subnet::{ifname_problem, Subnet, DEFAULT_BRIDGE, DEFAULT_SUBNET};

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

/// Parse a CPU list as the kernel writes them ("0-3,6"); `None` if malformed.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',') {
        let part = part.trim();
        if part.is_empty() {
            return None;
        }
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b || b > 8191 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => {
                let a: u32 = part.parse().ok()?;
                if a > 8191 {
                    return None;
                }
                cpus.push(a);
            }
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// Parse a size: an integer of bytes, or a number with K, M, G or T (powers of 1024,
/// optionally followed by "i", "B" or "iB"). `None` if malformed or too large.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(digits_end);
    if num.is_empty() {
        return None;
    }
    let unit = unit.trim();
    let unit = unit
        .strip_suffix("iB")
        .or_else(|| unit.strip_suffix('B'))
        .or_else(|| unit.strip_suffix('i'))
        .unwrap_or(unit);
    let mult: u64 = match unit {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        "T" | "t" => 1 << 40,
        _ => return None,
    };
    let value = if num.contains('.') {
        let f: f64 = num.parse().ok()?;
        let v = f * mult as f64;
        if !v.is_finite() || v >= (1u64 << 62) as f64 {
            return None;
        }
        v as u64
    } else {
        num.parse::<u64>().ok()?.checked_mul(mult)?
    };
    // Cgroup files take a signed 64-bit value; stay well inside it.
    (value < (1u64 << 62)).then_some(value)
}

/// Format a size the way a person writes it in a config ("512M").
pub fn format_size(bytes: u64) -> String {
    for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] {
        if bytes >= (1 << shift) && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// One config key: its dotted name, a one-line description and an example value.
pub struct Key {
    pub name: &'static str,
    pub help: &'static str,
    pub example: &'static str,
    apply: fn(&mut ZoneConfig, &toml::Value) -> std::result::Result<(), String>,
}

/// Every key warren's zonecfg accepts.
pub static KEYS: &[Key] = &[
    Key {
        name: "userns",
        help: "run the zone in its own user namespace, its root mapped to 65536 unprivileged host ids (default true; false keeps host ids, see docs/isolation.md)",
        example: "false",
        apply: |c, v| {
            c.userns = want_bool(v)?;
            Ok(())
        },
    },
    Key {
        name: "userns-base",
        help: "pin the first host id of the zone's 65536 (default: allocated from 1073741824 on, never overlapping another zone's)",
        example: "1073741824",
        apply: |c, v| {
            let n = want_int(v, 0, u32::MAX as u64)? as u32;
            if let Some(p) = crate::idmap::base_problem(n) {
                return Err(p);
            }
            c.userns_base = Some(n);
            Ok(())
        },
    },
    Key {
        name: "disk.max",
        help: "cap on what the zone writes (its private layer); writes past it fail with ENOSPC (see 'warren info' for the mechanism)",
        example: "\"1G\"",
        apply: |c, v| {
            let n = want_size(v)?;
            if n < crate::quota::MIN_SIZE {
                return Err(format!(
                    "{}: at least {} is needed for the filesystem that holds the zone's writes",
                    short(v),
                    format_size(crate::quota::MIN_SIZE)
                ));
            }
            c.disk_max = Some(n);
            Ok(())
        },
    },
    Key {
        name: "rlimit.as",
        help: "RLIMIT_AS for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "as", v),
    },
    Key {
        name: "rlimit.core",
        help: "RLIMIT_CORE for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "core", v),
    },
    Key {
        name: "rlimit.cpu",
        help: "RLIMIT_CPU for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "cpu", v),
    },
    Key {
        name: "rlimit.data",
        help: "RLIMIT_DATA for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "data", v),
    },
    Key {
        name: "rlimit.fsize",
        help: "RLIMIT_FSIZE for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "fsize", v),
    },
    Key {
        name: "rlimit.locks",
        help: "RLIMIT_LOCKS for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "locks", v),
    },
    Key {
        name: "rlimit.memlock",
        help: "RLIMIT_MEMLOCK for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "memlock", v),
    },
    Key {
        name: "rlimit.msgqueue",
        help: "RLIMIT_MSGQUEUE for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "msgqueue", v),
    },
    Key {
        name: "rlimit.nice",
        help: "RLIMIT_NICE for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "nice", v),
    },
    Key {
        name: "rlimit.nofile",
        help: "RLIMIT_NOFILE for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"1024:4096\"",
        apply: |c, v| set_rlimit(c, "nofile", v),
    },
    Key {
        name: "rlimit.nproc",
        help: "RLIMIT_NPROC for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "nproc", v),
    },
    Key {
        name: "rlimit.rtprio",
        help: "RLIMIT_RTPRIO for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "rtprio", v),
    },
    Key {
        name: "rlimit.rttime",
        help: "RLIMIT_RTTIME for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "rttime", v),
    },
    Key {
        name: "rlimit.sigpending",
        help: "RLIMIT_SIGPENDING for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "sigpending", v),
    },
    Key {
        name: "rlimit.stack",
        help: "RLIMIT_STACK for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "stack", v),
    },
    Key {
        name: "caps.add",
        help: "capabilities the zone's root keeps on top of the default set (docs/isolation.md)",
        example: "[\"CAP_SYS_NICE\"]",
        apply: |c, v| {
            c.caps_add = want_caps(v)?;
            Ok(())
        },
    },
    Key {
        name: "caps.drop",
        help: "capabilities removed from the default set",
        example: "[\"CAP_NET_RAW\"]",
        apply: |c, v| {
            c.caps_drop = want_caps(v)?;
            Ok(())
        },
    },
    Key {
        name: "seccomp.deny",
        help: "syscalls denied (EPERM) on top of the default seccomp filter",
        example: "[\"io_uring_setup\"]",
        apply: |c, v| {
            let mut out = Vec::new();
            for s in want_names(v, "syscall names such as [\"io_uring_setup\"]")? {
                if crate::isolation::seccomp::number(&s).is_none() {
                    return Err(format!(
                        "{s:?} is not a syscall warren knows; known: {}",
                        crate::isolation::seccomp::TABLE
                            .iter()
                            .map(|(n, _)| *n)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                out.push(s);
            }
            c.seccomp_deny = out;
            Ok(())
        },
    },
    Key {
        name: "template",
        help: "the template the zone's root is made from",
        example: "\"host\"",
        apply: |c, v| {
            let s = want_str(v, "a template name such as \"host\"")?;
            if let Some(p) = names::problem(s) {
                return Err(format!("{s:?} is not a template name: {p}"));
            }
            c.template = s.to_string();
            Ok(())
        },
    },
    Key {
        name: "brand",
        help: "how the zone runs: native (namespaces + cgroups)",
        example: "\"native\"",
        apply: |c, v| match want_str(v, "\"native\"")? {
            "native" => {
                c.brand = Brand::Native;
                Ok(())
            }
            "microvm" => Err("\"microvm\" is not available yet; use \"native\"".into()),
            other => Err(format!("{other:?}: expected \"native\"")),
        },
    },
    Key {
        name: "net",
        help: "network: none (own namespace, loopback only), host (share the host's) or bridge (own namespace, eth0 on a host bridge)",
        example: "\"bridge\"",
        apply: |c, v| match want_str(v, "\"none\", \"host\" or \"bridge\"")? {
            "none" => {
                c.net = NetMode::None;
                Ok(())
            }
            "host" => {
                c.net = NetMode::Host;
                Ok(())
            }
            "bridge" => {
                c.net = NetMode::Bridge;
                Ok(())
            }
            other => Err(format!(
                "{other:?}: expected \"none\", \"host\" or \"bridge\""
            )),
        },
    },
    Key {
        name: "net-bridge",
        help: "net = \"bridge\": the host bridge to attach to, created on first use (default warren0)",
        example: "\"warren0\"",
        apply: |c, v| {
            let s = want_str(v, "a bridge name such as \"warren0\"")?;
            if let Some(p) = ifname_problem(s) {
                return Err(format!("{s:?}: {p}"));
            }
            c.net_bridge = Some(s.to_string());
            Ok(())
        },
    },
    Key {
        name: "net-subnet",
        help: "net = \"bridge\": the IPv4 subnet of the bridge; .1 is the bridge and gateway (default 10.231.0.0/16)",
        example: "\"10.231.0.0/16\"",
        apply: |c, v| {
            let s = want_str(v, "an IPv4 subnet such as \"10.231.0.0/16\"")?;
            c.net_subnet = Some(s.parse()?);
            Ok(())
        },
    },
    Key {
        name: "net-address",
        help: "net = \"bridge\": pin the zone's IPv4 address (default: the lowest free one)",
        example: "\"10.231.0.10\"",
        apply: |c, v| {
            let s = want_str(v, "an IPv4 address such as \"10.231.0.10\"")?;
            let a: Ipv4Addr = s
                .parse()
                .map_err(|_| format!("{s:?}: expected an IPv4 address such as \"10.231.0.10\""))?;
            c.net_address = Some(a);
            Ok(())
        },
    },
    Key {
        name: "hostname",
        help: "the hostname inside the zone (default: the zone's name)",
        example: "\"web1\"",
        apply: |c, v| {
            let s = want_str(v, "a hostname such as \"web1\"")?;
            let ok = !s.is_empty()
                && s.len() <= 64
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            if !ok {
                return Err(format!(
                    "{s:?}: expected 1-64 characters of letters, digits, '-' and '.'"
                ));
            }
            c.hostname = Some(s.to_string());
            Ok(())
        },
    },
    Key {
        name: "init",
        help:
            "PID 1: a command (string for /bin/sh -c, or an argv array); default: warren's own init",
        example: "[\"/bin/sleep\", \"infinity\"]",
        apply: |c, v| {
            let cmd = want_command(v)?;
            if let Command::Argv(argv) = &cmd {
                if !argv[0].starts_with('/') {
                    return Err(format!(
                        "{:?}: the program must be an absolute path inside the zone",
                        argv[0]
                    ));
                }
            }
            c.init = Some(cmd);
            Ok(())
        },
    },
    Key {
        name: "services",
        help: "commands warren's init starts at boot (strings for /bin/sh -c, or argv arrays)",
        example: "[\"sleep infinity\"]",
        apply: |c, v| {
            let toml::Value::Array(items) = v else {
                return Err(format!("{}: expected an array of commands", short(v)));
            };
            c.services = items.iter().map(want_command).collect::<Result<_, _>>()?;
            Ok(())
        },
    },
    Key {
        name: "autoboot",
        help: "boot the zone with 'warren boot --autoboot' at host start",
        example: "true",
        apply: |c, v| {
            c.autoboot = want_bool(v)?;
            Ok(())
        },
    },
    Key {
        name: "priority",
        help: "eviction order under memory pressure: critical, normal or best-effort",
        example: "\"normal\"",
        apply: |c, v| {
            c.priority = match want_str(v, "critical, normal or best-effort")? {
                "critical" => Priority::Critical,
                "normal" => Priority::Normal,
                "best-effort" => Priority::BestEffort,
                other => {
                    return Err(format!(
                        "{other:?}: expected \"critical\", \"normal\" or \"best-effort\""
                    ))
                }
            };
            Ok(())
        },
    },
    Key {
        name: "stop-timeout",
        help: "seconds halt waits for a graceful stop before killing (default 10)",
        example: "10",
        apply: |c, v| {
            c.stop_timeout = Some(want_int(v, 0, 3600)?);
            Ok(())
        },
    },
    Key {
        name: "max-processes",
        help: "most processes in the zone (the pids controller, unless max-threads is set)",
        example: "100",
        apply: |c, v| {
            c.limits.max_processes = Some(want_int(v, 1, 4_194_304)?);
            Ok(())
        },
    },
    Key {
        name: "max-threads",
        help: "most tasks (threads, counting each process's main thread) in the zone",
        example: "1000",
        apply: |c, v| {
            c.limits.max_threads = Some(want_int(v, 1, 4_194_304)?);
            Ok(())
        },
    },
    Key {
        name: "memory.max",
        help: "memory cap (RAM); past it the zone's own processes are reclaimed or OOM-killed",
        example: "\"512M\"",
        apply: |c, v| {
            let n = want_size(v)?;
            if n < 4 << 20 {
                return Err(format!(
                    "{}: at least 4M is needed for a zone to start",
                    short(v)
                ));
            }
            c.limits.memory_max = Some(n);
            Ok(())
        },
    },
    Key {
        name: "memory.swap",
        help: "swap the zone may use on top of memory.max",
        example: "\"256M\"",
        apply: |c, v| {
            c.limits.memory_swap = Some(want_size(v)?);
            Ok(())
        },
    },
    Key {
        name: "memory.request",
        help: "guaranteed memory (v1 soft limit, v2 memory.low); also sets the zone's share of host swap unless memory.swap is set",
        example: "\"128M\"",
        apply: |c, v| {
            c.limits.memory_request = Some(want_size(v)?);
            Ok(())
        },
    },
    Key {
        name: "cpu.shares",
        help: "relative CPU weight, cgroup v1 scale (2-262144, default 1024)",
        example: "1024",
        apply: |c, v| {
            c.limits.cpu_shares = Some(want_int(v, 2, 262_144)?);
            Ok(())
        },
    },
    Key {
        name: "cpu.weight",
        help: "relative CPU weight, cgroup v2 scale (1-10000, default 100)",
        example: "100",
        apply: |c, v| {
            c.limits.cpu_weight = Some(want_int(v, 1, 10_000)?);
            Ok(())
        },
    },
    Key {
        name: "cpu.max",
        help: "CPU cap in CPUs, e.g. 0.5 for half of one CPU",
        example: "0.5",
        apply: |c, v| {
            let f = match v {
                toml::Value::Float(f) => *f,
                toml::Value::Integer(i) => *i as f64,
                toml::Value::String(s) => s
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| format!("{s:?}: expected a number of CPUs such as 0.5 or 2"))?,
                other => {
                    return Err(format!(
                        "{}: expected a number of CPUs such as 0.5 or 2",
                        short(other)
                    ))
                }
            };
            if !(0.01..=4096.0).contains(&f) || !f.is_finite() {
                return Err(format!("{f}: expected between 0.01 and 4096 CPUs"));
            }
            c.limits.cpu_max = Some(f);
            Ok(())
        },
    },
    Key {
        name: "cpuset",
        help: "the CPUs the zone may run on, e.g. \"0-1\" or \"0,2\"",
        example: "\"0-1\"",
        apply: |c, v| {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                other => {
                    return Err(format!(
                        "{}: expected a CPU list such as \"0-1\"",
                        short(other)
                    ))
                }
            };
            let cpus = parse_cpu_list(&s)
                .ok_or_else(|| format!("{s:?}: expected a CPU list such as \"0-1\" or \"0,2\""))?;
            c.limits.cpuset = Some(CpuSet(cpus));
            Ok(())
        },
    },
];

fn set_rlimit(c: &mut ZoneConfig, name: &str, v: &toml::Value) -> std::result::Result<(), String> {
    let text = match v {
        toml::Value::Integer(i) if *i >= 0 => i.to_string(),
        toml::Value::String(s) => s.clone(),
        other => {
            return Err(format!(
                "{}: expected a number, \"soft:hard\" or \"unlimited\"",
                short(other)
            ))
        }
    };
    let l = crate::isolation::rlimits::parse(&text).ok_or_else(|| {
        format!("{text:?}: expected a number, \"soft:hard\" (soft at most hard) or \"unlimited\"")
    })?;
    c.rlimits.insert(name.to_string(), l);
    Ok(())
}

fn short(v: &toml::Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!("{}…", &s[..s.floor_char_boundary(40)])
    } else {
        s
    }
}

fn want_str<'a>(v: &'a toml::Value, what: &str) -> std::result::Result<&'a str, String> {
    v.as_str()
        .ok_or_else(|| format!("{}: expected {what}", short(v)))
}

/// A list of names: a TOML array of strings, or one string of comma-separated names.
fn want_names(v: &toml::Value, what: &str) -> std::result::Result<Vec<String>, String> {
    let items: Vec<String> = match v {
        toml::Value::String(s) => s.split(',').map(|x| x.trim().to_string()).collect(),
        toml::Value::Array(a) => a
            .iter()
            .map(|x| want_str(x, what).map(str::to_string))
            .collect::<std::result::Result<_, _>>()?,
        other => return Err(format!("{}: expected {what}", short(other))),
    };
    Ok(items.into_iter().filter(|s| !s.is_empty()).collect())
}

/// Capability names, canonicalised (`sys_nice` → `CAP_SYS_NICE`).
fn want_caps(v: &toml::Value) -> std::result::Result<Vec<String>, String> {
    want_names(v, "capability names such as [\"CAP_SYS_NICE\"]")?
        .iter()
        .map(|n| {
            crate::isolation::caps::canonical(n)
                .map(str::to_string)
                .ok_or_else(|| {
                    format!(
                        "{n:?} is not a capability; known: {}",
                        crate::isolation::caps::NAMES.join(", ")
                    )
                })
        })
        .collect()
}

fn want_bool(v: &toml::Value) -> std::result::Result<bool, String> {
    match v {
        toml::Value::Boolean(b) => Ok(*b),
        toml::Value::String(s) if s == "true" || s == "false" => Ok(s == "true"),
        other => Err(format!("{}: expected true or false", short(other))),
    }
}

fn want_int(v: &toml::Value, min: u64, max: u64) -> std::result::Result<u64, String> {
    let n = match v {
        toml::Value::Integer(i) => *i as i128,
        toml::Value::String(s) => s
            .trim()
            .parse::<i128>()
            .map_err(|_| format!("{s:?}: expected a whole number from {min} to {max}"))?,
        other => {
            return Err(format!(
                "{}: expected a whole number from {min} to {max}",
                short(other)
            ))
        }
    };
    if n < min as i128 || n > max as i128 {
        return Err(format!("{n}: expected a whole number from {min} to {max}"));
    }
    Ok(n as u64)
}

fn want_size(v: &toml::Value) -> std::result::Result<u64, String> {
    let parsed = match v {
        toml::Value::Integer(i) if *i >= 0 => parse_size(&i.to_string()),
        toml::Value::String(s) => parse_size(s),
        _ => None,
    };
    parsed.ok_or_else(|| format!("{}: expected a size such as 512M or 2G", short(v)))
}

fn want_command(v: &toml::Value) -> std::result::Result<Command, String> {
    match v {
        toml::Value::String(s) if !s.trim().is_empty() => Ok(Command::Shell(s.clone())),
        toml::Value::Array(items) if !items.is_empty() => {
            let argv = items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("{}: expected an array of strings", short(v)))?;
            if argv.iter().any(|a| a.contains('\0')) {
                return Err("a command may not contain NUL bytes".into());
            }
            Ok(Command::Argv(argv))
        }
        other => Err(format!(
            "{}: expected a command string or a non-empty array of strings",
            short(other)
        )),
    }
}

/// Flatten a TOML table into dotted keys; tables nest, everything else is a leaf.
fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<(String, toml::Value)>) {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => flatten(&key, t, out),
            other => out.push((key, other.clone())),
        }
    }
}

fn find_key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The closest known key to `name`, for "did you mean".
fn suggest(name: &str) -> Option<&'static str> {
    KEYS.iter()
        .map(|k| (edit_distance(k.name, name), k.name))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, n)| n)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn unknown_key(name: &str) -> String {
    match suggest(name) {
        Some(s) => {
            format!("unknown config key '{name}' (did you mean '{s}'?); see 'warren config keys'")
        }
        None => format!("unknown config key '{name}'; see 'warren config keys' for the list"),
    }
}

/// Parse and validate a config table for zone `zone`.
pub fn from_table(zone: &str, table: &toml::Table) -> Result<ZoneConfig> {
    let mut entries = Vec::new();
    flatten("", table, &mut entries);
    let mut cfg = ZoneConfig::new("host");
    let mut has_template = false;
    for (name, value) in &entries {
        let key = find_key(name).ok_or_else(|| Error::config(zone, unknown_key(name)))?;
        (key.apply)(&mut cfg, value).map_err(|m| Error::config(zone, format!("{name} {m}")))?;
        has_template |= name == "template";
    }
    if !has_template {
        return Err(Error::config(
            zone,
            "template is missing; add template = \"host\" (or another from 'warren template list')",
        ));
    }
    check_consistency(zone, &cfg)?;
    Ok(cfg)
}

/// Rules that involve several keys.
fn check_consistency(zone: &str, c: &ZoneConfig) -> Result<()> {
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
                format!("max-threads {t} is below max-processes {p}; every process has at least one thread, so raise max-threads"),
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
fn check_net(zone: &str, c: &ZoneConfig) -> Result<()> {
    if c.net != NetMode::Bridge {
        let set: Vec<&str> = [
            ("net-bridge", c.net_bridge.is_some()),
            ("net-subnet", c.net_subnet.is_some()),
            ("net-address", c.net_address.is_some()),
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

/// Parse a config file's text.
pub fn parse(zone: &str, text: &str) -> Result<ZoneConfig> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        Error::config(
            zone,
            format!("config is not valid TOML: {}", e.message().trim()),
        )
    })?;
    from_table(zone, &table)
}

/// Interpret a `--set` value: TOML syntax if it parses (numbers, booleans, arrays,
/// quoted strings), else the raw text as a string ("512M", "0-1").
pub fn set_value(raw: &str) -> toml::Value {
    if let Ok(t) = format!("v = {raw}").parse::<toml::Table>() {
        if let Some(v) = t.get("v") {
            return v.clone();
        }
    }
    toml::Value::String(raw.to_string())
}

/// Set dotted `key` to `value` in `table` (creating sub-tables).
pub fn set_in_table(
    zone: &str,
    table: &mut toml::Table,
    key: &str,
    value: toml::Value,
) -> Result<()> {
    if find_key(key).is_none() {
        return Err(Error::config(zone, unknown_key(key)));
    }
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().expect("split yields at least one part");
    let mut t = table;
    for p in parts {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = match entry {
            toml::Value::Table(t) => t,
            _ => {
                return Err(Error::config(
                    zone,
                    format!("config key '{p}' is not a table"),
                ))
            }
        };
    }
    t.insert(last.to_string(), value);
    Ok(())
}

/// Remove dotted `key` from `table`.
pub fn unset_in_table(zone: &str, table: &mut toml::Table, key: &str) -> Result<()> {
    if find_key(key).is_none() {
        return Err(Error::config(zone, unknown_key(key)));
    }
    if key == "template" {
        return Err(Error::config(
            zone,
            "template cannot be unset; set another one instead",
        ));
    }
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().expect("split yields at least one part");
    let mut t = table;
    for p in parts {
        match t.get_mut(p) {
            Some(toml::Value::Table(inner)) => t = inner,
            _ => return Ok(()),
        }
    }
    t.remove(last);
    Ok(())
}

/// Parse `key=value` pairs from the command line.
pub fn parse_assignment(zone: &str, s: &str) -> Result<(String, toml::Value)> {
    let (k, v) = s.split_once('=').ok_or_else(|| {
        Error::config(
            zone,
            format!("--set {s:?}: expected key=value, e.g. memory.max=512M"),
        )
    })?;
    Ok((k.trim().to_string(), set_value(v.trim())))
}

/// The config as a TOML table (what `config.toml` holds).
pub fn to_table(c: &ZoneConfig) -> toml::Table {
    let mut t = toml::Table::new();
    let mut put = |k: &str, v: toml::Value| {
        set_in_table("", &mut t, k, v).expect("registered key");
    };
    put("template", c.template.clone().into());
    if c.brand != Brand::Native {
        put("brand", "native".into());
    }
    put("net", c.net.as_str().into());
    if let Some(b) = &c.net_bridge {
        put("net-bridge", b.clone().into());
    }
    if let Some(s) = &c.net_subnet {
        put("net-subnet", s.to_string().into());
    }
    if let Some(a) = &c.net_address {
        put("net-address", a.to_string().into());
    }
    if let Some(h) = &c.hostname {
        put("hostname", h.clone().into());
    }
    let list = |v: &[String]| toml::Value::Array(v.iter().cloned().map(Into::into).collect());
    if !c.caps_add.is_empty() {
        put("caps.add", list(&c.caps_add));
    }
    if !c.caps_drop.is_empty() {
        put("caps.drop", list(&c.caps_drop));
    }
    if !c.seccomp_deny.is_empty() {
        put("seccomp.deny", list(&c.seccomp_deny));
    }
    let cmd = |c: &Command| match c {
        Command::Shell(s) => toml::Value::String(s.clone()),
        Command::Argv(v) => toml::Value::Array(v.iter().cloned().map(Into::into).collect()),
    };
    if let Some(i) = &c.init {
        put("init", cmd(i));
    }
    if !c.services.is_empty() {
        put(
            "services",
            toml::Value::Array(c.services.iter().map(cmd).collect()),
        );
    }
    if c.autoboot {
        put("autoboot", true.into());
    }
    if c.priority != Priority::Normal {
        put(
            "priority",
            match c.priority {
                Priority::Critical => "critical",
                Priority::Normal => "normal",
                Priority::BestEffort => "best-effort",
            }
            .into(),
        );
    }
    let int = |n: u64| toml::Value::Integer(n as i64);
    if let Some(s) = c.stop_timeout {
        put("stop-timeout", int(s));
    }
    let l = &c.limits;
    if let Some(n) = l.max_processes {
        put("max-processes", int(n));
    }
    if let Some(n) = l.max_threads {
        put("max-threads", int(n));
    }
    if let Some(n) = l.memory_max {
        put("memory.max", format_size(n).into());
    }
    if let Some(n) = l.memory_swap {
        put("memory.swap", format_size(n).into());
    }
    if let Some(n) = l.memory_request {
        put("memory.request", format_size(n).into());
    }
    if let Some(n) = l.cpu_shares {
        put("cpu.shares", int(n));
    }
    if let Some(n) = l.cpu_weight {
        put("cpu.weight", int(n));
    }
    if let Some(f) = l.cpu_max {
        put("cpu.max", toml::Value::Float(f));
    }
    if let Some(cs) = &l.cpuset {
        put("cpuset", cs.to_string().into());
    }
    if !c.userns {
        put("userns", false.into());
    }
    if let Some(b) = c.userns_base {
        put("userns-base", int(u64::from(b)));
    }
    for (name, l) in &c.rlimits {
        put(
            &format!("rlimit.{name}"),
            crate::isolation::rlimits::format(*l).into(),
        );
    }
    if let Some(n) = c.disk_max {
        put("disk.max", format_size(n).into());
    }
    t
}

/// The config file's text.
pub fn to_toml(c: &ZoneConfig) -> String {
    toml::to_string(&to_table(c)).expect("a table always serialises")
}

/// `warren config keys`: name, example, help.
pub fn key_help() -> BTreeMap<&'static str, (&'static str, &'static str)> {
    KEYS.iter().map(|k| (k.name, (k.example, k.help))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<ZoneConfig> {
        parse("web1", text)
    }

    #[test]
    fn full_config_round_trips() {
        let text = r#"
template = "host"
net = "host"
hostname = "w1.example"
services = ["sleep infinity", ["/bin/true"]]
autoboot = true
priority = "best-effort"
stop-timeout = 3
max-processes = 20
max-threads = 40
cpuset = "0-1"
[memory]
max = "512M"
swap = "1G"
request = "128M"
[cpu]
weight = 200
max = 0.5
"#;
        let c = p(text).unwrap();
        assert_eq!(c.limits.memory_max, Some(512 << 20));
        assert_eq!(c.limits.memory_swap, Some(1 << 30));
        assert_eq!(c.limits.memory_request, Some(128 << 20));
        assert_eq!(c.limits.pids_max(), Some(40));
        assert_eq!(c.limits.cpu_max, Some(0.5));
        assert_eq!(c.limits.cpuset, Some(CpuSet(vec![0, 1])));
        assert_eq!(c.services.len(), 2);
        let again = p(&to_toml(&c)).unwrap();
        assert_eq!(c, again);
    }

    #[test]
    fn memory_request_is_checked_against_max() {
        let e = p("template = \"host\"\n[memory]\nmax = \"64M\"\nrequest = \"128M\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("memory.request 128M is above memory.max 64M") && e.contains("lower"),
            "{e}"
        );
        let e = p("template = \"host\"\nmemory.request = \"lots\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("memory.request \"lots\": expected a size"),
            "{e}"
        );
        // A request without a cap is allowed: a guarantee, no limit.
        let c = p("template = \"host\"\nmemory.request = \"32M\"").unwrap();
        assert_eq!(c.limits.memory_request, Some(32 << 20));
    }

    #[test]
    fn swap_allowance_is_proportional_to_the_request() {
        let gib = 1u64 << 30;
        let mut l = Limits {
            memory_max: Some(2 * gib),
            memory_request: Some(gib),
            ..Limits::default()
        };
        // 1 GiB of 16 GiB RAM gets 1/16 of 8 GiB swap.
        assert_eq!(swap_allowance(&l, 16 * gib, 8 * gib), Some(512 << 20));
        assert_eq!(
            l.with_swap_allowance(16 * gib, 8 * gib).swap_allowance,
            Some(512 << 20)
        );
        assert_eq!(swap_allowance(&l, 16 * gib, 0), None, "no host swap");
        l.memory_swap = Some(0);
        assert_eq!(swap_allowance(&l, 16 * gib, 8 * gib), None, "explicit wins");
        l.memory_swap = None;
        l.memory_max = None;
        assert_eq!(swap_allowance(&l, 16 * gib, 8 * gib), None, "no cap");
        l.memory_max = Some(2 * gib);
        l.memory_request = None;
        assert_eq!(swap_allowance(&l, 16 * gib, 8 * gib), None, "no request");
    }

    #[test]
    fn bad_size_names_field_and_fix() {
        let e = p("template = \"host\"\nmemory.max = \"12X\"")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "zone 'web1': memory.max \"12X\": expected a size such as 512M or 2G"
        );
    }

    #[test]
    fn unknown_key_suggests() {
        let e = p("template = \"host\"\n[memory]\nmaxx = \"1G\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown config key 'memory.maxx'"), "{e}");
        assert!(e.contains("did you mean 'memory.max'"), "{e}");
    }

    #[test]
    fn wrong_types_and_ranges() {
        for (text, needle) in [
            (
                "max-processes = \"many\"",
                "max-processes \"many\": expected a whole number",
            ),
            (
                "max-processes = 0",
                "max-processes 0: expected a whole number from 1",
            ),
            (
                "max-processes = 99999999999",
                "expected a whole number from 1 to 4194304",
            ),
            ("cpu.max = 0", "cpu.max 0: expected between 0.01"),
            (
                "cpu.max = \"half\"",
                "cpu.max \"half\": expected a number of CPUs",
            ),
            ("cpuset = \"3-1\"", "cpuset \"3-1\": expected a CPU list"),
            (
                "net = \"bridged\"",
                "net \"bridged\": expected \"none\", \"host\" or \"bridge\"",
            ),
            ("memory.max = \"1K\"", "at least 4M"),
            ("memory.max = \"99999999T\"", "expected a size"),
            ("autoboot = 3", "autoboot 3: expected true or false"),
            ("init = [\"sleep\"]", "must be an absolute path"),
            ("services = \"x\"", "expected an array of commands"),
            ("priority = \"high\"", "expected \"critical\""),
            (
                "net = \"bridge\"\nnet-subnet = \"10.1.0.0/31\"",
                "net-subnet \"10.1.0.0/31\": the prefix length must be from /8 to /30",
            ),
            (
                "net = \"bridge\"\nnet-address = \"10.1.0.300\"",
                "expected an IPv4 address",
            ),
            (
                "net = \"bridge\"\nnet-bridge = \"a b\"",
                "net-bridge \"a b\": use letters",
            ),
        ] {
            let e = p(&format!("template = \"host\"\n{text}"))
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn cross_field_rules() {
        for (text, needle) in [
            ("cpu.shares = 100\ncpu.weight = 100", "set one of them"),
            ("memory.swap = \"1G\"", "without memory.max"),
            ("max-processes = 10\nmax-threads = 5", "below max-processes"),
            ("init = \"sleep 1\"\nservices = [\"x\"]", "drop one of them"),
        ] {
            let e = p(&format!("template = \"host\"\n{text}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
        let e = p("template = \"host\"\nnet-subnet = \"10.5.0.0/24\"")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "zone 'web1': net-subnet apply only to net = \"bridge\", but net is \"none\"; set net = \"bridge\" or unset them"
        );
        let e = p("template = \"host\"\nnet = \"bridge\"\nnet-subnet = \"10.5.0.0/24\"\nnet-address = \"10.6.0.9\"")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "zone 'web1': net-address 10.6.0.9 cannot be used in net-subnet 10.5.0.0/24: it is outside the subnet; pick an address from 10.5.0.2 to 10.5.0.254 or change net-subnet"
        );
        let e = p("template = \"host\"\nnet = \"bridge\"\nnet-address = \"10.231.0.1\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the default net-subnet 10.231.0.0/16: it is the gateway"),
            "{e}"
        );
        let c = p("template = \"host\"\nnet = \"bridge\"\nnet-bridge = \"wt0\"\nnet-subnet = \"10.5.0.0/24\"\nnet-address = \"10.5.0.9\"").unwrap();
        assert_eq!(c.bridge(), "wt0");
        assert_eq!(p(&to_toml(&c)).unwrap(), c);
        let e = p("template = \"../x\"").unwrap_err().to_string();
        assert!(e.contains("not a template name"), "{e}");
        let e = p("net = \"none\"").unwrap_err().to_string();
        assert!(e.contains("template is missing"), "{e}");
        let e = p("template = ").unwrap_err().to_string();
        assert!(e.contains("not valid TOML"), "{e}");
    }

    #[test]
    fn host_checks() {
        let c = p("template = \"host\"\ncpuset = \"0,5\"").unwrap();
        let e = check_host("web1", &c, &[0, 1]).unwrap_err().to_string();
        assert!(
            e.contains("names CPU 5") && e.contains("online: 0-1"),
            "{e}"
        );
        let c = p("template = \"host\"\ncpu.max = 4").unwrap();
        assert!(check_host("web1", &c, &[0, 1]).is_err());
        let c = p("template = \"host\"\ncpu.max = 1.5\ncpuset = \"1\"").unwrap();
        check_host("web1", &c, &[0, 1]).unwrap();
    }

    #[test]
    fn caps_and_seccomp_keys_are_validated() {
        let mut t = to_table(&ZoneConfig::new("host"));
        set_in_table("z", &mut t, "caps.add", set_value("sys_nice,CAP_IPC_LOCK")).unwrap();
        set_in_table("z", &mut t, "caps.drop", set_value("[\"CAP_NET_RAW\"]")).unwrap();
        set_in_table("z", &mut t, "seccomp.deny", set_value("io_uring_setup")).unwrap();
        let c = from_table("z", &t).unwrap();
        assert_eq!(c.caps_add, ["CAP_SYS_NICE", "CAP_IPC_LOCK"]);
        assert_eq!(c.caps_drop, ["CAP_NET_RAW"]);
        assert_eq!(c.seccomp_deny, ["io_uring_setup"]);
        // Round trip through config.toml.
        assert_eq!(from_table("z", &to_table(&c)).unwrap(), c);
        let mut bad = t.clone();
        set_in_table("z", &mut bad, "caps.add", set_value("CAP_FLY")).unwrap();
        let e = from_table("z", &bad).unwrap_err().to_string();
        assert!(e.contains("not a capability"), "{e}");
        let mut bad = t.clone();
        set_in_table("z", &mut bad, "seccomp.deny", set_value("no_such_call")).unwrap();
        let e = from_table("z", &bad).unwrap_err().to_string();
        assert!(e.contains("not a syscall"), "{e}");
        let mut bad = t;
        set_in_table("z", &mut bad, "caps.drop", set_value("SYS_NICE")).unwrap();
        let e = from_table("z", &bad).unwrap_err().to_string();
        assert!(e.contains("both caps.add and caps.drop"), "{e}");
    }

    #[test]
    fn set_values_take_toml_or_text() {
        assert_eq!(set_value("20"), toml::Value::Integer(20));
        assert_eq!(set_value("0.5"), toml::Value::Float(0.5));
        assert_eq!(set_value("512M"), toml::Value::String("512M".into()));
        assert_eq!(set_value("0-1"), toml::Value::String("0-1".into()));
        assert_eq!(set_value("\"x y\""), toml::Value::String("x y".into()));
        let mut t = to_table(&ZoneConfig::new("host"));
        set_in_table("z", &mut t, "memory.max", set_value("1G")).unwrap();
        set_in_table("z", &mut t, "max-processes", set_value("20")).unwrap();
        let c = from_table("z", &t).unwrap();
        assert_eq!(c.limits.memory_max, Some(1 << 30));
        unset_in_table("z", &mut t, "memory.max").unwrap();
        assert_eq!(from_table("z", &t).unwrap().limits.memory_max, None);
        assert!(set_in_table("z", &mut t, "memroy.max", set_value("1")).is_err());
    }

    #[test]
    fn sizes_and_cpu_lists() {
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("1.5G"), Some(3 << 29));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("12X"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("M"), None);
        assert_eq!(format_size(512 << 20), "512M");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(parse_cpu_list("0-2,5,5"), Some(vec![0, 1, 2, 5]));
        assert_eq!(parse_cpu_list("0,,1"), None);
        assert_eq!(CpuSet(vec![0, 1, 2, 5, 7, 8]).to_string(), "0-2,5,7-8");
    }

    #[test]
    fn userns_rlimit_and_disk_keys_round_trip() {
        let c = p("template = \"host\"\nuserns = false\n[rlimit]\nnofile = \"1024:4096\"\ncore = 0\n[disk]\nmax = \"64M\"").unwrap();
        assert!(!c.userns);
        assert_eq!(
            c.rlimits.get("nofile"),
            Some(&crate::isolation::rlimits::Limit {
                soft: 1024,
                hard: 4096
            })
        );
        assert_eq!(c.disk_max, Some(64 << 20));
        let back = from_table("z", &to_table(&c)).unwrap();
        assert_eq!(back, c);
        let d = p("template = \"host\"").unwrap();
        assert!(d.userns, "user namespaces are the default");
        let pinned = p("template = \"host\"\nuserns-base = 2000000000").unwrap();
        assert_eq!(from_table("z", &to_table(&pinned)).unwrap(), pinned);
    }

    #[test]
    fn bad_userns_rlimit_and_disk_values_name_the_key() {
        for (text, want) in [
            (
                "userns-base = 1000",
                "userns-base 1000 would map host ids below 65536",
            ),
            (
                "userns = false\nuserns-base = 2000000000",
                "userns-base is set but userns = false",
            ),
            (
                "rlimit.nofile = \"20:10\"",
                "rlimit.nofile \"20:10\": expected",
            ),
            ("rlimit.bogus = 1", "unknown config key 'rlimit.bogus'"),
            ("disk.max = \"1M\"", "disk.max \"1M\": at least 16M"),
        ] {
            let e = p(&format!("template = \"host\"\n{text}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
            assert!(e.starts_with("zone 'web1'"), "{e}");
        }
    }

    #[test]
    fn privileges_the_host_cannot_grant_are_refused() {
        let c = p("template = \"host\"\ncaps.add = [\"CAP_SYS_MODULE\"]\nrlimit.nofile = 100000")
            .unwrap();
        let all = HostPrivileges {
            cap_bounding: u64::MAX,
            hard_limits: BTreeMap::new(),
        };
        check_privileges("web1", &c, &all).unwrap();
        let no_module = HostPrivileges {
            cap_bounding: !crate::isolation::caps::bit("CAP_SYS_MODULE"),
            hard_limits: BTreeMap::new(),
        };
        let e = check_privileges("web1", &c, &no_module)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("zone 'web1'") && e.contains("caps.add CAP_SYS_MODULE"),
            "{e}"
        );
        assert!(e.contains("remove it from caps.add"), "{e}");
        let low = HostPrivileges {
            cap_bounding: u64::MAX,
            hard_limits: [("nofile".to_string(), 20000)].into_iter().collect(),
        };
        let e = check_privileges("web1", &c, &low).unwrap_err().to_string();
        assert!(e.contains("rlimit.nofile hard limit 100000"), "{e}");
        assert!(e.contains("use at most 20000"), "{e}");
    }
}
