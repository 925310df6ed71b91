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
/// as `stats::cpu_ticks` and [`CpuReading::ticks`] give them), % of all CPUs; 0 when
/// either is missing or no time passed.
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

/// The most task groups [`CpuUse::top`] lists.
pub const TOP: usize = 8;

/// Who used the host's CPUs over the idle window: /proc/stat's kinds of time, and the
/// tasks that used the most (the seed's "2 % CPU" row, taken apart).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CpuUse {
    /// % of all CPUs per kind of /proc/stat's "cpu" line: user, nice, system, iowait,
    /// irq, softirq, steal (idle left out).
    pub kinds_pct: Vec<(String, f64)>,
    /// The groups of tasks that used the most CPU, largest first, at most [`TOP`].
    pub top: Vec<TaskGroup>,
    /// CPU of all tasks counted, % of one CPU (the rest of the busy time was spent
    /// in interrupts, or by tasks that started and ended within the window).
    pub tasks_pct: f64,
}

/// Tasks of one name over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskGroup {
    /// A process's command name; a kernel thread's name up to its CPU or instance
    /// ("kworker", "ksoftirqd"), with the workqueue it ran last in parentheses.
    pub name: String,
    /// Kernel threads (PF_KTHREAD).
    pub kernel: bool,
    /// How many tasks of this name used any CPU in the window.
    pub tasks: u64,
    /// % of one CPU.
    pub cpu_pct: f64,
}

/// One reading of what [`CpuUse`] compares: /proc/stat's "cpu" line and every task.
#[derive(Debug, Clone, Default)]
pub struct CpuReading {
    kinds: Vec<u64>,
    tasks: std::collections::HashMap<i32, Task>,
}

/// One process (with its threads) or kernel thread, from /proc/<pid>/stat.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub name: String,
    /// PF_KTHREAD.
    pub kernel: bool,
    /// utime + stime, ticks.
    pub ticks: u64,
    /// Start time, ticks after boot: a pid reused within the window is another task.
    pub start: u64,
}

impl CpuReading {
    /// (total, idle) ticks of the host at this reading, for [`busy_pct`].
    pub fn ticks(&self) -> Option<(u64, u64)> {
        crate::stats::ticks_of(&self.kinds)
    }
}

/// /proc/<pid>/stat text as a [`Task`].
pub fn parse_task(text: &str) -> Option<Task> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // rest[0] is field 3 (state): flags (field 9) is rest[6], utime and stime rest[11..13].
    const PF_KTHREAD: u64 = 0x0020_0000;
    let flags: u64 = rest.get(6)?.parse().ok()?;
    Some(Task {
        name,
        kernel: flags & PF_KTHREAD != 0,
        ticks: crate::stats::parse_cpu_ticks(text)?,
        start: crate::stats::parse_stat(text)?.1,
    })
}

/// A task's group name: a kernel thread's name up to "/" ("kworker/u8:3-events" →
/// "kworker (events)", "ksoftirqd/1" → "ksoftirqd"); a process's command name as it is.
pub fn group_name(name: &str, kernel: bool) -> String {
    if !kernel {
        return name.to_string();
    }
    match name.split_once('/') {
        None => name.to_string(),
        Some((base, rest)) => match rest.split_once('-') {
            Some((_, wq)) if !wq.is_empty() => format!("{base} ({wq})"),
            _ => base.to_string(),
        },
    }
}

/// Read /proc/stat's "cpu" line and every task of the host.
pub fn read_cpu(proc_root: &Path) -> CpuReading {
    let kinds = crate::stats::cpu_kinds(proc_root).unwrap_or_default();
    let mut tasks = std::collections::HashMap::new();
    if let Ok(d) = std::fs::read_dir(proc_root) {
        for e in d.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let text = std::fs::read_to_string(e.path().join("stat"));
            if let Some(t) = text.ok().as_deref().and_then(parse_task) {
                tasks.insert(pid, t);
            }
        }
    }
    CpuReading { kinds, tasks }
}

/// What used the CPUs between two readings `secs` seconds apart (ticks are USER_HZ,
/// 100 a second). A task in both readings counts its difference, one that started in
/// between all of its time; processes are counted with all their threads.
pub fn cpu_use(before: &CpuReading, after: &CpuReading, secs: f64) -> CpuUse {
    const KINDS: [&str; 8] = [
        "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
    ];
    let total: u64 = after
        .kinds
        .iter()
        .zip(before.kinds.iter().chain(std::iter::repeat(&0)))
        .map(|(a, b)| a.saturating_sub(*b))
        .sum();
    let kinds_pct = KINDS
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .filter_map(|(i, k)| {
            let d = after.kinds.get(i)?.saturating_sub(*before.kinds.get(i)?);
            (total > 0).then(|| (k.to_string(), d as f64 / total as f64 * 100.0))
        })
        .collect();
    let mut groups: std::collections::BTreeMap<(String, bool), (u64, u64)> = Default::default();
    for (pid, t) in &after.tasks {
        let was = before
            .tasks
            .get(pid)
            .filter(|b| b.start == t.start)
            .map_or(0, |b| b.ticks);
        let d = t.ticks.saturating_sub(was);
        if d == 0 {
            continue;
        }
        let g = groups
            .entry((group_name(&t.name, t.kernel), t.kernel))
            .or_default();
        g.0 += 1;
        g.1 += d;
    }
    let pct = |ticks: u64| ticks as f64 / (secs.max(1e-3) * 100.0) * 100.0;
    let tasks_pct = pct(groups.values().map(|g| g.1).sum());
    let mut top: Vec<TaskGroup> = groups
        .into_iter()
        .map(|((name, kernel), (tasks, ticks))| TaskGroup {
            name,
            kernel,
            tasks,
            cpu_pct: pct(ticks),
        })
        .collect();
    top.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct).then(a.name.cmp(&b.name)));
    top.truncate(TOP);
    CpuUse {
        kinds_pct,
        top,
        tasks_pct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str, kernel: bool, ticks: u64, start: u64) -> Task {
        Task {
            name: name.into(),
            kernel,
            ticks,
            start,
        }
    }

    #[test]
    fn a_task_is_named_flagged_and_timed_after_a_hostile_name() {
        // Field 9 (flags) 0x00208040 has PF_KTHREAD; utime 7 + stime 5.
        let k = "7 (kworker/u8:3-ext4-rsv) I 2 0 0 0 -1 2129984 0 0 0 0 7 5 0 0 20 0 1 0 9";
        assert_eq!(
            parse_task(k),
            Some(task("kworker/u8:3-ext4-rsv", true, 12, 9))
        );
        let p = "42 (a) b) S 1 42 42 0 -1 4194560 100 0 0 0 3 4 0 0 20 0 1 0 99";
        assert_eq!(parse_task(p), Some(task("a) b", false, 7, 99)));
        assert_eq!(parse_task("42 (short) S 1"), None);
        assert_eq!(
            group_name("kworker/u8:3-ext4-rsv", true),
            "kworker (ext4-rsv)"
        );
        assert_eq!(group_name("ksoftirqd/1", true), "ksoftirqd");
        assert_eq!(group_name("kworker/1:2", true), "kworker");
        assert_eq!(group_name("kswapd0", true), "kswapd0");
        assert_eq!(group_name("a/b-c", false), "a/b-c");
    }

    #[test]
    fn cpu_use_counts_the_window_by_kind_and_by_task_group() {
        let before = CpuReading {
            kinds: vec![100, 0, 100, 1000, 0, 0, 0, 0],
            tasks: [
                (1, task("init", false, 50, 1)),
                (7, task("kworker/0:1-events", true, 10, 2)),
                (8, task("kworker/1:1", true, 10, 2)),
                (9, task("sleeper", false, 5, 3)),
                (11, task("gone-and-reused", false, 500, 4)),
            ]
            .into_iter()
            .collect(),
        };
        // 10 s on 2 CPUs = 2,000 ticks: 200 user, 100 system, 1,600 idle, 100 softirq.
        let after = CpuReading {
            kinds: vec![300, 0, 200, 2600, 0, 0, 100, 0],
            tasks: [
                (1, task("init", false, 150, 1)),
                (7, task("kworker/0:1-mm_percpu_wq", true, 30, 2)),
                (8, task("kworker/1:1-mm_percpu_wq", true, 40, 2)),
                (9, task("sleeper", false, 5, 3)),
                (10, task("new", false, 15, 50)),
                (11, task("reused", false, 5, 60)),
            ]
            .into_iter()
            .collect(),
        };
        let u = cpu_use(&before, &after, 10.0);
        let kind = |k: &str| u.kinds_pct.iter().find(|x| x.0 == k).unwrap().1;
        assert_eq!(
            (kind("user"), kind("system"), kind("softirq")),
            (10.0, 5.0, 5.0)
        );
        assert!(u.kinds_pct.iter().all(|x| x.0 != "idle"));
        let top: Vec<(&str, bool, u64, f64)> = u
            .top
            .iter()
            .map(|g| (g.name.as_str(), g.kernel, g.tasks, g.cpu_pct))
            .collect();
        assert_eq!(
            top,
            [
                ("init", false, 1, 10.0),
                ("kworker (mm_percpu_wq)", true, 2, 5.0),
                ("new", false, 1, 1.5),
                ("reused", false, 1, 0.5)
            ]
        );
        // 170 ticks = 1.7 s of CPU in 10 s.
        assert!((u.tasks_pct - 17.0).abs() < 1e-9, "{u:?}");
    }

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
