//! What runs while a step's containers sit idle, as the seed's density study counted
//! it: processes and threads (LWPs) on the whole host and the containers' own, the
//! inotify instances and watches the containers hold (what `warren doctor` plans with),
//! and how busy the host's CPUs were over the idle window. Readers of an injected
//! /proc; the arithmetic is pure and unit-tested.
//!
//! The host counts include kernel threads (Solaris counted its system processes too).
//! The containers' own are their processes: for warren's zones everything in their
//! cgroups (`cgroup.procs`), for systems measured by pid the pids they name (container
//! processes and helpers); threads are each process's `num_threads`.

use std::path::Path;

use serde::Serialize;

use super::system::Cpu;

/// One count of what runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Census {
    /// Processes on the host (/proc's numeric entries, kernel threads included).
    pub host_processes: u64,
    /// Threads on the host (/proc/loadavg's task total, kernel threads included).
    pub host_threads: u64,
    /// The containers' own processes.
    pub zone_processes: u64,
    /// Their threads, each process's main thread included.
    pub zone_threads: u64,
    /// inotify instances their processes hold (descriptors on `anon_inode:inotify`).
    pub zone_inotify_instances: u64,
    /// Watches on those instances (`inotify wd:` lines of their fdinfo).
    pub zone_inotify_watches: u64,
}

/// `num_threads` (field 20) from /proc/<pid>/stat text.
pub fn parse_num_threads(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    // rest's first field is field 3 (state): field 20 is the 18th.
    rest.split_whitespace().nth(17)?.parse().ok()
}

/// Processes on the host: numeric entries of /proc.
pub fn host_processes(proc_root: &Path) -> u64 {
    std::fs::read_dir(proc_root).map_or(0, |d| {
        d.flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())
            })
            .count() as u64
    })
}

/// inotify instances and watches a process holds; (0, 0) when it is gone.
fn inotify_of(proc_root: &Path, pid: i32) -> (u64, u64) {
    let dir = proc_root.join(pid.to_string());
    let Ok(fds) = std::fs::read_dir(dir.join("fd")) else {
        return (0, 0);
    };
    let (mut instances, mut watches) = (0, 0);
    for fd in fds.flatten() {
        let is_inotify =
            std::fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == "anon_inode:inotify");
        if is_inotify {
            instances += 1;
            let info = std::fs::read_to_string(dir.join("fdinfo").join(fd.file_name()));
            watches += info.map_or(0, |t| {
                t.lines().filter(|l| l.starts_with("inotify wd:")).count() as u64
            });
        }
    }
    (instances, watches)
}

/// Count what runs now: the whole host, and the containers `cpu` names.
pub fn take(proc_root: &Path, cpu: &Cpu) -> Census {
    let pids: Vec<i32> = match cpu {
        Cpu::Pids(p) => p.to_vec(),
        Cpu::Cgroups(sets) => sets
            .iter()
            .flat_map(|s| s.pids().unwrap_or_default())
            .collect(),
    };
    let mut c = Census {
        host_processes: host_processes(proc_root),
        host_threads: crate::doctor::snapshot::read_tasks(proc_root).unwrap_or(0),
        ..Census::default()
    };
    for pid in pids {
        let stat = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat"));
        let Some(threads) = stat.ok().as_deref().and_then(parse_num_threads) else {
            continue; // gone meanwhile
        };
        c.zone_processes += 1;
        c.zone_threads += threads;
        let (i, w) = inotify_of(proc_root, pid);
        c.zone_inotify_instances += i;
        c.zone_inotify_watches += w;
    }
    c
}

/// How busy the host's CPUs were between two /proc/stat readings ((total, idle) ticks,
/// as `stats::cpu_ticks` gives them), % of all CPUs; 0 when either is missing or no
/// time passed.
pub fn busy_pct(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> f64 {
    let (Some((t0, i0)), Some((t1, i1))) = (before, after) else {
        return 0.0;
    };
    let total = t1.saturating_sub(t0);
    if total == 0 {
        return 0.0;
    }
    let idle = i1.saturating_sub(i0).min(total);
    (total - idle) as f64 / total as f64 * 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num_threads_is_field_20_after_a_hostile_name() {
        let stat = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 3 0 99 1 2";
        assert_eq!(parse_num_threads(stat), Some(3));
        assert_eq!(parse_num_threads("42 (short) S 1"), None);
    }

    #[test]
    fn busy_is_the_part_of_the_ticks_that_was_not_idle() {
        assert_eq!(busy_pct(Some((1000, 900)), Some((1200, 1050))), 25.0);
        assert_eq!(busy_pct(Some((1000, 900)), Some((1000, 900))), 0.0);
        assert_eq!(busy_pct(None, Some((1, 1))), 0.0);
        // A counter that went backwards (idle above total) is clamped to idle.
        assert_eq!(busy_pct(Some((0, 0)), Some((10, 20))), 0.0);
    }

    #[test]
    fn this_process_is_counted_with_its_threads() {
        let me = std::process::id() as i32;
        let c = take(Path::new("/proc"), &Cpu::Pids(&[me, i32::MAX]));
        assert_eq!(c.zone_processes, 1, "the missing pid is not counted");
        assert!(c.zone_threads >= 1);
        assert!(c.host_processes >= 1 && c.host_threads >= 1);
    }

    /// A process holding one inotify instance with two watches (python3's ctypes: this
    /// crate has no unsafe code to call inotify_init itself).
    #[test]
    fn inotify_instances_and_watches_are_counted() {
        use std::io::BufRead;
        let script = "import ctypes,sys,time\n\
            l=ctypes.CDLL(None)\n\
            fd=l.inotify_init()\n\
            a=l.inotify_add_watch(fd,b'/',2)\n\
            b=l.inotify_add_watch(fd,b'/tmp',2)\n\
            print(fd,a,b,flush=True)\n\
            sys.stdin.read()\n";
        let mut child = match std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => panic!("python3 is needed for this test (scripts/test.sh installs it): {e}"),
        };
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pid = child.id() as i32;
        let c = take(Path::new("/proc"), &Cpu::Pids(&[pid]));
        drop(child.stdin.take()); // EOF: it exits
        let _ = child.wait();
        assert!(!line.starts_with("-1"), "inotify_init failed: {line}");
        assert_eq!(
            (c.zone_inotify_instances, c.zone_inotify_watches),
            (1, 2),
            "{line}"
        );
    }
}
