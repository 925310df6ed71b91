//! "Did you mean": the known key an unknown one most likely means, by meaning (a table
//! of the names people bring from cgroup files, other runtimes and zonecfg) and then
//! by spelling.

use super::*;

/// Names people reach for from cgroup files, other runtimes and zonecfg, and the key
/// each means here: "did you mean" by meaning where spelling is too far off.
pub(super) const SYNONYMS: &[(&str, &str)] = &[
    ("mem.max", "memory.max"),
    ("mem", "memory.max"),
    ("memory", "memory.max"),
    ("memory.limit", "memory.max"),
    ("memory.limit_in_bytes", "memory.max"),
    ("ram", "memory.max"),
    ("capped-memory", "memory.max"),
    ("pids.max", "max-processes"),
    ("pids", "max-processes"),
    ("pids-limit", "max-processes"),
    ("procs", "max-processes"),
    ("processes", "max-processes"),
    ("max-procs", "max-processes"),
    ("threads", "max-threads"),
    ("max-lwps", "max-threads"),
    ("tasks", "max-threads"),
    ("tasksmax", "max-threads"),
    ("swap", "memory.swap"),
    ("mem.swap", "memory.swap"),
    ("memory.swap.max", "memory.swap"),
    ("memory.low", "memory.request"),
    ("memory.min", "memory.request"),
    ("memory.reservation", "memory.request"),
    ("mem.request", "memory.request"),
    ("cpus", "cpu.max"),
    ("cpu", "cpu.max"),
    ("cpu.quota", "cpu.max"),
    ("cpu.limit", "cpu.max"),
    ("capped-cpu", "cpu.max"),
    ("cpuset.cpus", "cpuset"),
    ("cpu.cpus", "cpuset"),
    ("pinning", "cpuset"),
    ("shares", "cpu.shares"),
    ("weight", "cpu.weight"),
    ("disk", "disk.max"),
    ("disk.quota", "disk.max"),
    ("quota", "disk.max"),
    ("nofile", "rlimit.nofile"),
    ("ulimit", "rlimit.nofile"),
    ("ip", "net-address"),
    ("address", "net-address"),
    ("bridge", "net-bridge"),
    ("subnet", "net-subnet"),
    ("network", "net"),
    ("entrypoint", "init"),
    ("command", "init"),
    ("cap-add", "caps.add"),
    ("cap-drop", "caps.drop"),
    ("capabilities", "caps.add"),
    ("syscalls", "seccomp.deny"),
    ("timeout", "stop-timeout"),
    ("eviction", "priority"),
    ("class", "priority"),
];

/// The known key `name` most likely means, for "did you mean": a synonym by meaning
/// (any case; `_`, `.` and `-` alike), else the nearest spelling within 3 edits.
pub fn suggest(name: &str) -> Option<&'static str> {
    let loose = |s: &str| s.trim().to_ascii_lowercase().replace(['_', '.'], "-");
    let norm = name.trim().to_ascii_lowercase().replace('_', "-");
    if let Some((_, k)) = SYNONYMS.iter().find(|(s, _)| loose(s) == loose(name)) {
        return Some(k);
    }
    KEYS.iter()
        .map(|k| (edit_distance(k.name, name), k.name))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, n)| n)
        .or_else(|| {
            KEYS.iter()
                .map(|k| (edit_distance(k.name, &norm), k.name))
                .filter(|(d, _)| *d <= 3)
                .min()
                .map(|(_, n)| n)
        })
}

pub fn edit_distance(a: &str, b: &str) -> usize {
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

pub fn unknown_key(name: &str) -> String {
    match suggest(name) {
        Some(s) => {
            format!("unknown config key '{name}' (did you mean '{s}'?); see 'warren config keys'")
        }
        None => format!("unknown config key '{name}'; see 'warren config keys' for the list"),
    }
}
