//! Readers of /proc and /sys (roots passed in, so tests use fixture trees).

use std::collections::BTreeMap;
use std::path::Path;

/// Parse /proc/<pid>/stat text: (state char, start time in ticks).
pub fn parse_stat(text: &str) -> Option<(char, u64)> {
    // The command name (field 2) may hold spaces and ')'; fields resume after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); field 22 (starttime) is rest[19].
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// CPU ticks (utime + stime, fields 14 and 15) from /proc/<pid>/stat text.
pub fn parse_cpu_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// CPU time of the processes `pids`, in ns (USER_HZ is 100 on Linux); a process that
/// is gone counts as 0.
pub fn procs_cpu_ns<P: std::fmt::Display>(proc_root: &Path, pids: &[P]) -> u64 {
    pids.iter()
        .filter_map(|pid| {
            let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat"));
            parse_cpu_ticks(&text.ok()?)
        })
        .sum::<u64>()
        * 10_000_000
}

/// The start time of a live (non-zombie) process, or `None` if it is gone or a zombie.
pub fn proc_start_time(proc_root: &Path, pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    match parse_stat(&text)? {
        ('Z' | 'X', _) => None,
        (_, start) => Some(start),
    }
}

/// The parent of process `pid`, from its `stat` (LXC's monitor is its container's
/// parent; a pipeline's workers are its children).
pub fn ppid(proc_root: &Path, pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    s.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The kernel's boot id: changes at every host boot.
pub fn boot_id(proc_root: &Path) -> String {
    std::fs::read_to_string(proc_root.join("sys/kernel/random/boot_id"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// /proc/meminfo as bytes per key.
pub fn meminfo(proc_root: &Path) -> BTreeMap<String, u64> {
    parse_meminfo(&std::fs::read_to_string(proc_root.join("meminfo")).unwrap_or_default())
}

pub fn parse_meminfo(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let mut parts = v.split_whitespace();
            let n: u64 = parts.next()?.parse().ok()?;
            let mult = if parts.next() == Some("kB") { 1024 } else { 1 };
            Some((k.trim().to_string(), n * mult))
        })
        .collect()
}

/// The host's online CPUs.
pub fn online_cpus(sys_root: &Path) -> Vec<u32> {
    std::fs::read_to_string(sys_root.join("devices/system/cpu/online"))
        .ok()
        .and_then(|s| crate::config::parse_cpu_list(&s))
        .unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get() as u32)).collect()
        })
}

/// Total CPU time of the host in clock ticks (user..steal from /proc/stat's "cpu" line)
/// and the idle part of it.
pub fn cpu_ticks(proc_root: &Path) -> Option<(u64, u64)> {
    ticks_of(&cpu_kinds(proc_root)?)
}

/// /proc/stat's "cpu" line: the host's ticks of user, nice, system, idle, iowait, irq,
/// softirq and steal time, in that order.
pub fn cpu_kinds(proc_root: &Path) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(proc_root.join("stat")).ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    Some(
        line.split_whitespace()
            .skip(1)
            .take(8)
            .filter_map(|x| x.parse().ok())
            .collect(),
    )
}

/// (total, idle + iowait) of [`cpu_kinds`]' ticks.
pub fn ticks_of(kinds: &[u64]) -> Option<(u64, u64)> {
    let idle = kinds.get(3)? + kinds.get(4).unwrap_or(&0);
    Some((kinds.iter().sum(), idle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_hostile_command_name() {
        let text = "42 (a) b) c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 50 18446744073709551615";
        assert_eq!(parse_stat(text), Some(('S', 123456)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn meminfo_in_bytes() {
        let m = parse_meminfo(
            "MemTotal:       24000000 kB\nMemAvailable:   1000 kB\nHugePages_Total:       0\n",
        );
        assert_eq!(m["MemTotal"], 24_000_000 * 1024);
        assert_eq!(m["MemAvailable"], 1_024_000);
        assert_eq!(m["HugePages_Total"], 0);
    }

    #[test]
    fn own_process_is_alive() {
        let me = std::process::id() as i32;
        assert!(proc_start_time(Path::new("/proc"), me).is_some());
        assert!(!boot_id(Path::new("/proc")).is_empty());
    }

    #[test]
    fn cpu_ticks_are_utime_plus_stime_after_the_last_paren() {
        let stat = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0 99 1 2";
        assert_eq!(parse_cpu_ticks(stat), Some(12));
        assert_eq!(parse_cpu_ticks("42 (short) S 1"), None);
    }
}
