//! The one registry of config keys, with a parser each, its default and whether it
//! changes live. How an unknown key is answered is in `suggest`.

use super::*;

/// One config key: its dotted name, a one-line description and an example value.
pub struct Key {
    pub name: &'static str,
    pub help: &'static str,
    pub example: &'static str,
    /// The value a zone gets when neither its config nor a profile sets the key.
    pub default: &'static str,
    /// Whether a running zone's limit can change without a reboot (the cgroup file is
    /// written live); the others take effect at the next boot.
    pub live: bool,
    pub(super) apply: fn(&mut ZoneConfig, &toml::Value) -> std::result::Result<(), String>,
}

/// Every key warren's zonecfg accepts.
pub static KEYS: &[Key] = &[
    Key {
        name: "userns",
        default: "true",
        live: false,
        help: "run the zone in its own user namespace, its root mapped to 65536 unprivileged host ids (default true; false keeps host ids, see docs/isolation.md)",
        example: "false",
        apply: |c, v| {
            c.userns = want_bool(v)?;
            Ok(())
        },
    },
    Key {
        name: "userns-base",
        default: "allocated",
        live: false,
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
        default: "none",
        live: false,
        help: "cap on what the zone writes (its private layer); writes past it fail with ENOSPC (see 'warren info' for the mechanism)",
        example: "\"1G\"",
        apply: |c, v| {
            if is_unlimited(v) {
                c.disk_max = None;
                return Ok(());
            }
            let n = want_size(v)?;
            if n < crate::quota::MIN_SIZE {
                return Err(format!(
                    "{}: at least {} is needed for the filesystem that holds the zone's writes; give a size such as \"1G\"",
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
        default: "the host's",
        live: false,
        help: "RLIMIT_AS for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "as", v),
    },
    Key {
        name: "rlimit.core",
        default: "the host's",
        live: false,
        help: "RLIMIT_CORE for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "core", v),
    },
    Key {
        name: "rlimit.cpu",
        default: "the host's",
        live: false,
        help: "RLIMIT_CPU for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "cpu", v),
    },
    Key {
        name: "rlimit.data",
        default: "the host's",
        live: false,
        help: "RLIMIT_DATA for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "data", v),
    },
    Key {
        name: "rlimit.fsize",
        default: "the host's",
        live: false,
        help: "RLIMIT_FSIZE for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "fsize", v),
    },
    Key {
        name: "rlimit.locks",
        default: "the host's",
        live: false,
        help: "RLIMIT_LOCKS for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "locks", v),
    },
    Key {
        name: "rlimit.memlock",
        default: "the host's",
        live: false,
        help: "RLIMIT_MEMLOCK for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "memlock", v),
    },
    Key {
        name: "rlimit.msgqueue",
        default: "the host's",
        live: false,
        help: "RLIMIT_MSGQUEUE for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "msgqueue", v),
    },
    Key {
        name: "rlimit.nice",
        default: "the host's",
        live: false,
        help: "RLIMIT_NICE for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "nice", v),
    },
    Key {
        name: "rlimit.nofile",
        default: "the host's",
        live: false,
        help: "RLIMIT_NOFILE for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"1024:4096\"",
        apply: |c, v| set_rlimit(c, "nofile", v),
    },
    Key {
        name: "rlimit.nproc",
        default: "the host's",
        live: false,
        help: "RLIMIT_NPROC for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "nproc", v),
    },
    Key {
        name: "rlimit.rtprio",
        default: "the host's",
        live: false,
        help: "RLIMIT_RTPRIO for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "rtprio", v),
    },
    Key {
        name: "rlimit.rttime",
        default: "the host's",
        live: false,
        help: "RLIMIT_RTTIME for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "rttime", v),
    },
    Key {
        name: "rlimit.sigpending",
        default: "the host's",
        live: false,
        help: "RLIMIT_SIGPENDING for every process of the zone: N, \"soft:hard\" or \"unlimited\"",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "sigpending", v),
    },
    Key {
        name: "rlimit.stack",
        default: "the host's",
        live: false,
        help: "RLIMIT_STACK for every process of the zone: N, \"soft:hard\" or \"unlimited\" (warren-init starts each service from a ~46 KiB frame: below 64 KiB services die of SIGSEGV before their exec)",
        example: "\"unlimited\"",
        apply: |c, v| set_rlimit(c, "stack", v),
    },
    Key {
        name: "caps.add",
        default: "[]",
        live: false,
        help: "capabilities the zone's root keeps on top of the default set (docs/isolation.md)",
        example: "[\"CAP_SYS_NICE\"]",
        apply: |c, v| {
            c.caps_add = want_caps(v)?;
            Ok(())
        },
    },
    Key {
        name: "caps.drop",
        default: "[]",
        live: false,
        help: "capabilities removed from the default set",
        example: "[\"CAP_NET_RAW\"]",
        apply: |c, v| {
            c.caps_drop = want_caps(v)?;
            Ok(())
        },
    },
    Key {
        name: "seccomp.deny",
        default: "[]",
        live: false,
        help: "syscalls denied (EPERM) on top of the default seccomp filter",
        example: "[\"io_uring_setup\"]",
        apply: |c, v| {
            let mut out = Vec::new();
            for s in want_names(v, "syscall names such as [\"io_uring_setup\"]")? {
                if crate::isolation::seccomp::number(&s).is_none() {
                    return Err(format!(
                        "{s:?} is not a syscall of x86_64; use a name from asm/unistd_64.h such as \"io_uring_setup\""
                    ));
                }
                out.push(s);
            }
            c.seccomp_deny = out;
            Ok(())
        },
    },
    Key {
        name: "env",
        default: "[]",
        live: false,
        help: "the zone's default environment, KEY=VALUE strings given to its init, its services and every login ('warren login -e' overrides them)",
        example: "[\"LANG=C.UTF-8\"]",
        apply: |c, v| {
            c.env = want_env(v)?;
            Ok(())
        },
    },
    Key {
        name: "template",
        default: "\"host\"",
        live: false,
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
        default: "\"native\"",
        live: false,
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
        default: "\"none\"",
        live: false,
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
        default: "\"warren0\"",
        live: false,
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
        default: "\"10.231.0.0/16\"",
        live: false,
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
        default: "lowest free",
        live: false,
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
        name: "net-isolated",
        default: "false",
        live: false,
        help: "net = \"bridge\": no traffic bridged between this zone and any other zone, either way; the host and gateway stay reachable (default false)",
        example: "true",
        apply: |c, v| {
            c.net_isolated = want_bool(v)?;
            Ok(())
        },
    },
    Key {
        name: "hostname",
        default: "the zone's name",
        live: false,
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
        default: "warren's init",
        live: false,
        help:
            "PID 1: a command (string for /bin/sh -c, or an argv array); default: warren's own init",
        example: "[\"/bin/sleep\", \"infinity\"]",
        apply: |c, v| {
            let cmd = want_command(v)?;
            if let Command::Argv(argv) = &cmd {
                if !argv[0].starts_with('/') {
                    return Err(format!(
                        "{:?}: the program must be an absolute path inside the zone, such as \"/bin/sleep\"",
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
        default: "[]",
        live: false,
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
        default: "false",
        live: false,
        help: "boot the zone with 'warren boot --autoboot' at host start",
        example: "true",
        apply: |c, v| {
            c.autoboot = want_bool(v)?;
            Ok(())
        },
    },
    Key {
        name: "proc-views",
        default: "when lxcfs is mounted",
        live: false,
        help: "the zone's /proc/meminfo, cpuinfo, stat, uptime, loadavg… show its own limits and usage, from the host's lxcfs (default: when lxcfs is mounted, see 'warren info'; true: boot fails without it; false: the host's values; docs/proc-views.md)",
        example: "false",
        apply: |c, v| {
            c.proc_views = Some(want_bool(v)?);
            Ok(())
        },
    },
    Key {
        name: "priority",
        default: "\"normal\"",
        live: false,
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
        default: "10",
        live: false,
        help: "seconds halt waits for a graceful stop before killing (default 10)",
        example: "10",
        apply: |c, v| {
            c.stop_timeout = Some(want_int(v, 0, 3600)?);
            Ok(())
        },
    },
    Key {
        name: "max-processes",
        default: "1024",
        live: true,
        help: "most processes in the zone (the pids controller, unless max-threads is set; default 1024, or the default profile's; \"max\" for none)",
        example: "100",
        apply: |c, v| {
            c.limits.max_processes = Some(want_int_or_max(v, 1, 4_194_304)?);
            Ok(())
        },
    },
    Key {
        name: "max-threads",
        default: "none",
        live: true,
        help: "most tasks (threads, counting each process's main thread) in the zone (\"max\" for none)",
        example: "1000",
        apply: |c, v| {
            c.limits.max_threads = Some(want_int_or_max(v, 1, 4_194_304)?);
            Ok(())
        },
    },
    Key {
        name: "memory.max",
        default: "\"512M\"",
        live: true,
        help: "memory cap (RAM); past it the zone's own processes are reclaimed or OOM-killed (default 512M, or the default profile's; \"max\" for none)",
        example: "\"512M\"",
        apply: |c, v| {
            let n = want_size_or_max(v)?;
            if n < 4 << 20 {
                return Err(format!(
                    "{}: at least 4M is needed for a zone to start; give a size such as \"512M\"",
                    short(v)
                ));
            }
            c.limits.memory_max = Some(n);
            Ok(())
        },
    },
    Key {
        name: "memory.swap",
        default: "none",
        live: true,
        help: "swap the zone may use on top of memory.max (\"max\": as much as the host has)",
        example: "\"256M\"",
        apply: |c, v| {
            c.limits.memory_swap = Some(want_size_or_max(v)?);
            Ok(())
        },
    },
    Key {
        name: "memory.request",
        default: "none",
        live: true,
        help: "guaranteed memory (v1 soft limit, v2 memory.low); also sets the zone's share of host swap unless memory.swap is set",
        example: "\"128M\"",
        apply: |c, v| {
            c.limits.memory_request = Some(want_size(v)?);
            Ok(())
        },
    },
    Key {
        name: "suspend-after",
        default: "none",
        live: false,
        help: "the agent ('warren agent') suspends the zone after this long without CPU or network activity (docs/suspend.md)",
        example: "\"10m\"",
        apply: |c, v| {
            c.suspend_after = Some(want_duration(v)?);
            Ok(())
        },
    },
    Key {
        name: "memory.merge",
        default: "false",
        live: false,
        help: "let KSM merge the zone's identical memory pages, also with other zones that merge (PR_SET_MEMORY_MERGE in warren-init; needs ksmd running, /sys/kernel/mm/ksm/run = 1). Merging crosses tenants: timing side channels can tell what another zone holds",
        example: "true",
        apply: |c, v| {
            c.memory_merge = want_bool(v)?;
            Ok(())
        },
    },
    Key {
        name: "cpu.shares",
        default: "1024",
        live: true,
        help: "relative CPU weight, cgroup v1 scale (2-262144, default 1024)",
        example: "1024",
        apply: |c, v| {
            c.limits.cpu_shares = Some(want_int(v, 2, 262_144)?);
            Ok(())
        },
    },
    Key {
        name: "cpu.weight",
        default: "100",
        live: true,
        help: "relative CPU weight, cgroup v2 scale (1-10000, default 100)",
        example: "100",
        apply: |c, v| {
            c.limits.cpu_weight = Some(want_int(v, 1, 10_000)?);
            Ok(())
        },
    },
    Key {
        name: "cpu.max",
        default: "none",
        live: true,
        help: "CPU cap in CPUs, e.g. 0.5 for half of one CPU (\"max\": no cap)",
        example: "0.5",
        apply: |c, v| {
            if is_unlimited(v) {
                c.limits.cpu_max = None;
                return Ok(());
            }
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
        default: "all CPUs",
        live: true,
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

pub(super) fn set_rlimit(
    c: &mut ZoneConfig,
    name: &str,
    v: &toml::Value,
) -> std::result::Result<(), String> {
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

/// Flatten a TOML table into dotted keys; tables nest, everything else is a leaf.
pub(super) fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<(String, toml::Value)>) {
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

/// A table's leaves as dotted keys (either TOML spelling of a key gives one name).
pub fn flatten_table(table: &toml::Table, out: &mut Vec<(String, toml::Value)>) {
    flatten("", table, out)
}

pub(super) fn find_key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// `warren config keys`: every key in name order.
pub fn keys_sorted() -> Vec<&'static Key> {
    let mut v: Vec<&'static Key> = KEYS.iter().collect();
    v.sort_by_key(|k| k.name);
    v
}

/// The registered key named `name`, if any.
pub fn key(name: &str) -> Option<&'static Key> {
    find_key(name)
}
