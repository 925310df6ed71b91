//! The one registry of config keys, with a parser each, and how an unknown key is
//! answered (the nearest known one).

use super::*;

/// One config key: its dotted name, a one-line description and an example value.
pub struct Key {
    pub name: &'static str,
    pub help: &'static str,
    pub example: &'static str,
    pub(super) apply: fn(&mut ZoneConfig, &toml::Value) -> std::result::Result<(), String>,
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
        name: "net-isolated",
        help: "net = \"bridge\": no traffic bridged between this zone and any other zone, either way; the host and gateway stay reachable (default false)",
        example: "true",
        apply: |c, v| {
            c.net_isolated = want_bool(v)?;
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
        name: "proc-views",
        help: "the zone's /proc/meminfo, cpuinfo, stat, uptime, loadavg… show its own limits and usage, from the host's lxcfs (default: when lxcfs is mounted, see 'warren info'; true: boot fails without it; false: the host's values; docs/proc-views.md)",
        example: "false",
        apply: |c, v| {
            c.proc_views = Some(want_bool(v)?);
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
        help: "most processes in the zone (the pids controller, unless max-threads is set; default 1024, or the host's defaults.toml)",
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
        help: "memory cap (RAM); past it the zone's own processes are reclaimed or OOM-killed (default 512M, or the host's defaults.toml)",
        example: "\"512M\"",
        apply: |c, v| {
            let n = want_size(v)?;
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

pub(super) fn find_key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The closest known key to `name`, for "did you mean".
pub(super) fn suggest(name: &str) -> Option<&'static str> {
    KEYS.iter()
        .map(|k| (edit_distance(k.name, name), k.name))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, n)| n)
}

pub(super) fn edit_distance(a: &str, b: &str) -> usize {
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

pub(super) fn unknown_key(name: &str) -> String {
    match suggest(name) {
        Some(s) => {
            format!("unknown config key '{name}' (did you mean '{s}'?); see 'warren config keys'")
        }
        None => format!("unknown config key '{name}'; see 'warren config keys' for the list"),
    }
}

/// `warren config keys`: name, example, help.
pub fn key_help() -> BTreeMap<&'static str, (&'static str, &'static str)> {
    KEYS.iter().map(|k| (k.name, (k.example, k.help))).collect()
}
