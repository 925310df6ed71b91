//! The bench's cgroup rule for the systems it compares: every cgroup a compared
//! system makes lies beneath the bench's own cgroup, in every hierarchy (v1
//! controllers, named v1 hierarchies such as name=systemd, and the v2 one), checked in
//! `/proc/<pid>/cgroup` of every started container and of its helper (LXC's monitor,
//! podman's conmon); and the removal of the directories a run made, deepest first,
//! killing what is left in them (only the run's own processes can be there).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::system::Failure;

/// One cgroup hierarchy: its key (sorted controllers and `name=` of v1, "" for v2)
/// and the directory of this process's own cgroup in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hier {
    pub key: String,
    pub own: PathBuf,
    /// This process's cgroup path inside the hierarchy, e.g. "/" or "/a/b".
    pub own_path: String,
    /// Where the hierarchy is mounted, and the cgroup path its mount shows.
    pub mount: PathBuf,
    pub root: String,
}

impl Hier {
    /// The directory of cgroup `path` (as /proc/<pid>/cgroup shows it) in this hierarchy.
    pub fn dir_of(&self, path: &str) -> PathBuf {
        let rel = path.strip_prefix(self.root.as_str()).unwrap_or(path);
        self.mount.join(rel.trim_start_matches('/'))
    }
}

fn key_of(list: &str) -> String {
    let mut v: Vec<&str> = list.split(',').filter(|c| !c.is_empty()).collect();
    v.sort_unstable();
    v.join(",")
}

/// Every mounted hierarchy with this process's place in it, from mountinfo and
/// /proc/self/cgroup text. Unlike warren's own discovery, named v1 hierarchies
/// (name=systemd) count: LXC creates cgroups there too.
pub fn hierarchies(mountinfo: &str, proc_cgroup: &str) -> Vec<Hier> {
    let own: Vec<(String, String)> = proc_cgroup
        .lines()
        .filter_map(|l| {
            let mut p = l.splitn(3, ':');
            let _ = p.next()?;
            Some((key_of(p.next()?), p.next()?.to_string()))
        })
        .collect();
    let mut out = Vec::new();
    for m in crate::cgroups::parse_mountinfo_named(mountinfo) {
        let key = key_of(&m.controllers.join(","));
        let Some((_, path)) = own.iter().find(|(k, _)| *k == key) else {
            continue;
        };
        if out.iter().any(|h: &Hier| h.key == key) {
            continue;
        }
        let rel = path
            .strip_prefix(m.root.as_str())
            .unwrap_or(path)
            .trim_start_matches('/');
        out.push(Hier {
            key,
            own: m.mountpoint.join(rel),
            own_path: path.clone(),
            mount: m.mountpoint,
            root: m.root,
        });
    }
    out
}

/// A line of a process's /proc/<pid>/cgroup that is not where the rule wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misplaced {
    /// The line, as read.
    pub line: String,
    /// The path it should have started with.
    pub want: String,
    /// Whether the bench's own cgroup would also have done.
    pub own_ok: bool,
}

impl std::fmt::Display for Misplaced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = match self.own_ok {
            true => "neither the bench's own cgroup nor beneath",
            false => "not beneath",
        };
        write!(f, "'{}' is {place} {}", self.line, self.want)
    }
}

impl std::error::Error for Misplaced {}

/// Whether every line of a process's /proc/<pid>/cgroup lies beneath `<own>/<dir>/`
/// in its hierarchy (LXC). Err: the first line that does not.
pub fn beneath(proc_cgroup: &str, hiers: &[Hier], dir: &str) -> Result<(), Misplaced> {
    placed(proc_cgroup, hiers, false, &|h| {
        format!("{}/{dir}/", h.own_path.trim_end_matches('/'))
    })
}

/// Whether every line of a process's /proc/<pid>/cgroup, in a hierarchy of `hiers`,
/// starts with `under(hierarchy)`, or (with `own_ok`) is this process's own cgroup
/// there. Err: the first line that is neither.
pub fn placed(
    proc_cgroup: &str,
    hiers: &[Hier],
    own_ok: bool,
    under: &dyn Fn(&Hier) -> String,
) -> Result<(), Misplaced> {
    for l in proc_cgroup.lines() {
        let mut p = l.splitn(3, ':');
        let (_, k, path) = (p.next(), p.next().unwrap_or(""), p.next().unwrap_or(""));
        let key = key_of(k);
        let Some(h) = hiers.iter().find(|h| h.key == key) else {
            continue;
        };
        let want = under(h);
        let own = own_ok && path == h.own_path;
        if !own && !path.starts_with(&want) {
            return Err(Misplaced {
                line: l.to_string(),
                want,
                own_ok,
            });
        }
    }
    Ok(())
}

/// This process's hierarchies, read from `proc_root`. Err (the rule cannot be
/// checked): none found.
pub fn own_hierarchies(proc_root: &Path) -> Result<Vec<Hier>, Failure> {
    let read = |f: &str| std::fs::read_to_string(proc_root.join(f)).unwrap_or_default();
    let hiers = hierarchies(&read("self/mountinfo"), &read("self/cgroup"));
    if hiers.is_empty() {
        return Err(Failure::Rule(
            "no cgroup hierarchy found in /proc/self/mountinfo".into(),
        ));
    }
    Ok(hiers)
}

/// Check the rule for `pids` (what, pid) with `check`; Err names `name`, the process
/// and the line that broke it.
pub fn check_pids(
    proc_root: &Path,
    name: &str,
    pids: &[(&str, i32)],
    check: &dyn Fn(&str) -> Result<(), Misplaced>,
) -> Result<(), Failure> {
    for (what, p) in pids {
        let cg = std::fs::read_to_string(proc_root.join(p.to_string()).join("cgroup"))
            .unwrap_or_default();
        check(&cg).map_err(|e| Failure::Rule(format!("{name}'s {what} (pid {p}): {e}")))?;
    }
    Ok(())
}

/// Every directory at and below `dir`, parents after their children.
pub fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    if !dir.is_dir() {
        return;
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&e.path(), out);
            }
        }
    }
    out.push(dir.to_path_buf());
}

/// Remove cgroup directories a run made, deepest first. A process still in one after
/// `grace` (a system's own cleanup may still be finishing) is killed: only the run's
/// own containers and helpers can be in these cgroups.
pub fn remove_dirs(mut dirs: Vec<PathBuf>, grace: Duration) {
    // Deepest first: a child path is longer than its parent's.
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    let tick = Duration::from_millis(10);
    let grace_ticks = grace.as_millis() / tick.as_millis();
    for d in &dirs {
        for i in 0..grace_ticks + 200 {
            let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
            if procs.trim().is_empty() {
                break;
            }
            if i >= grace_ticks {
                for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                }
            }
            std::thread::sleep(tick);
        }
        for _ in 0..100 {
            if std::fs::remove_dir(d).is_ok() || !d.exists() {
                break;
            }
            std::thread::sleep(tick);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This VM: cgroup v1 hybrid, the bench in a nested memory cgroup.
    const MOUNTINFO: &str = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
31 25 0:27 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd
35 25 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
36 25 0:32 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
37 25 0:33 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
";
    const OWN: &str = "\
9:name=systemd:/
8:pids:/
4:memory:/process_api/abc
1:cpu,cpuacct:/
0::/
";

    #[test]
    fn hierarchies_include_named_and_v2() {
        let h = hierarchies(MOUNTINFO, OWN);
        let keys: Vec<&str> = h.iter().map(|h| h.key.as_str()).collect();
        assert_eq!(keys, ["", "name=systemd", "cpu,cpuacct", "memory", "pids"]);
        let mem = h.iter().find(|h| h.key == "memory").unwrap();
        assert_eq!(mem.own, Path::new("/sys/fs/cgroup/memory/process_api/abc"));
        assert_eq!(mem.own_path, "/process_api/abc");
    }

    #[test]
    fn beneath_checks_every_hierarchy() {
        let h = hierarchies(MOUNTINFO, OWN);
        let ok = "9:name=systemd:/wb/c1\n8:pids:/wb/c1\n4:memory:/process_api/abc/wb/c1\n1:cpu,cpuacct:/wb/c1\n0::/wb/c1\n";
        assert!(beneath(ok, &h, "wb").is_ok());
        // LXC's default without relative: the memory cgroup escapes to the root.
        let bad = ok.replace("/process_api/abc/wb/c1", "/lxc.payload.c1");
        let e = beneath(&bad, &h, "wb").unwrap_err();
        assert_eq!(e.line, "4:memory:/lxc.payload.c1");
        assert_eq!(
            e.to_string(),
            "'4:memory:/lxc.payload.c1' is not beneath /process_api/abc/wb/"
        );
        // Sitting in the bench dir itself (not beneath it) is not enough.
        assert!(beneath("8:pids:/wb\n", &h, "wb").is_err());
    }

    #[test]
    fn placed_accepts_own_only_when_told() {
        let h = hierarchies(MOUNTINFO, OWN);
        let parent = |_: &Hier| "/process_api/abc/p/".to_string();
        let conmon = "8:pids:/\n4:memory:/process_api/abc/p/conmon\n";
        assert!(placed(conmon, &h, true, &parent).is_ok());
        assert!(placed(conmon, &h, false, &parent)
            .unwrap_err()
            .line
            .contains("pids"));
        assert!(placed("4:memory:/machine.slice/x\n", &h, true, &parent).is_err());
    }

    #[test]
    fn dirs_come_children_first() {
        let top = std::env::temp_dir().join(format!("warren-bench-dirs-{}", std::process::id()));
        std::fs::create_dir_all(top.join("a/b")).unwrap();
        let mut v = Vec::new();
        collect_dirs(&top, &mut v);
        remove_dirs(v.clone(), Duration::ZERO);
        assert_eq!(v, [top.join("a/b"), top.join("a"), top.clone()]);
        assert!(!top.exists(), "removed deepest first");
    }
}
