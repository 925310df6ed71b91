//! The LXC column of `warren bench density --compare lxc`: the same steps with LXC
//! system containers on a busybox root (the bench's busybox template, mounted
//! read-only by LXC and shared by every container), no network
//! (`lxc.net.0.type = empty`: a network namespace with loopback only, as warren's
//! `net = "none"`), `/bin/sleep` as the container's init, no ttys.
//!
//! LXC state stays out of the host's: the lxcpath (container configs, logs) is a
//! private directory in the bench's scratch dir, never /var/lib/lxc. Cgroups: with
//! `lxc.cgroup.relative = 1` LXC does not escape to the root cgroup, and the
//! `lxc.cgroup.dir.*` keys put the container, its monitor and the monitor's pivot
//! under one directory of this run, `wbench-<pid>`, beneath this process's own cgroup
//! in every hierarchy (v1 controllers, named v1 hierarchies and the v2 one). The
//! bench checks that in `/proc/<pid>/cgroup` of every started container and of its
//! monitor; if LXC put anything elsewhere the column is reported as unavailable with
//! the reason, and the run's containers are stopped at once.
//!
//! Per container LXC runs one host process besides the container's own, the
//! `[lxc monitor]`; its memory and CPU count in LXC's figures.
//!
//! "clone" is writing the container's config (the root is shared, as for crun);
//! "boot" is `lxc-start -d` (returns once the container runs); "halt" is
//! `lxc-stop -k`; "delete" removes the container's directory. `lxc-destroy` is never
//! used: with a `dir:` root it would delete the shared busybox root.
//!
//! Everything is undone when a step ends, also on failure ([`Fleet`]'s drop): the
//! containers are stopped, their cgroup directories removed (deepest first; a process
//! still in one is killed first: it can only be one of this run's), the lxcpath and
//! LXC's lock directory for it (`/run/lxc/lock/<lxcpath>`) deleted.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::crun::which;
use super::{Failure, Options, Step, SystemRun};
use crate::fsutil::disk_usage;
use crate::measure::{mem_per_zone, mem_sample, ms, summarize, Progress};
use crate::stats::procs_cpu_ns;

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
    for line in mountinfo.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        if pre.len() < 5 || post.len() < 3 {
            continue;
        }
        let key = match post[0] {
            "cgroup2" => String::new(),
            "cgroup" => key_of(
                &post[2]
                    .split(',')
                    .filter(|o| {
                        !matches!(*o, "rw" | "ro" | "clone_children" | "noprefix" | "xattr")
                            && !o.starts_with("release_agent=")
                    })
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            _ => continue,
        };
        let Some((_, path)) = own.iter().find(|(k, _)| *k == key) else {
            continue;
        };
        if out.iter().any(|h: &Hier| h.key == key) {
            continue;
        }
        let root = pre[3];
        let rel = path
            .strip_prefix(root)
            .unwrap_or(path)
            .trim_start_matches('/');
        out.push(Hier {
            key,
            own: Path::new(pre[4]).join(rel),
            own_path: path.clone(),
            mount: PathBuf::from(pre[4]),
            root: root.to_string(),
        });
    }
    out
}

/// Whether every line of a process's /proc/<pid>/cgroup lies beneath `<own>/<dir>/`
/// in its hierarchy. Err: the first line that does not.
pub fn beneath(proc_cgroup: &str, hiers: &[Hier], dir: &str) -> Result<(), String> {
    for l in proc_cgroup.lines() {
        let mut p = l.splitn(3, ':');
        let (_, k, path) = (p.next(), p.next().unwrap_or(""), p.next().unwrap_or(""));
        let key = key_of(k);
        let Some(h) = hiers.iter().find(|h| h.key == key) else {
            continue;
        };
        let want = format!("{}/{dir}/", h.own_path.trim_end_matches('/'));
        if !path.starts_with(&want) {
            return Err(format!("'{l}' is not beneath {want}"));
        }
    }
    Ok(())
}

/// The config of one container.
pub fn config(name: &str, rootfs: &Path, cgroup_dir: &str) -> String {
    format!(
        "lxc.uts.name = {name}
lxc.rootfs.path = dir:{}
lxc.rootfs.options = ro
lxc.net.0.type = empty
lxc.cgroup.relative = 1
lxc.cgroup.dir.container = {cgroup_dir}/{name}
lxc.cgroup.dir.monitor = {cgroup_dir}/m-{name}
lxc.cgroup.dir.monitor.pivot = {cgroup_dir}/pivot
lxc.init.cmd = /bin/sleep 1000000
lxc.mount.auto = proc:mixed sys:ro
lxc.autodev = 1
lxc.tty.max = 0
lxc.pty.max = 0
lxc.console.path = none
",
        rootfs.display()
    )
}

/// The containers of one run; stopped and removed on drop, with their cgroups.
struct Fleet {
    lxcpath: PathBuf,
    cgroup_dir: String,
    hiers: Vec<Hier>,
    started: Vec<String>,
}

impl Fleet {
    fn lxc(&self, prog: &str, name: &str, extra: &[&str]) -> Result<f64, String> {
        let log = self.lxcpath.join(format!("{name}.log"));
        let t = Instant::now();
        let out = Command::new(prog)
            .arg("-P")
            .arg(&self.lxcpath)
            .args(["-n", name])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("running {prog}: {e}"))?;
        let took = ms(t.elapsed());
        if !out.status.success() {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(3).collect();
            return Err(format!(
                "{prog} {name}: {} {}",
                String::from_utf8_lossy(&out.stderr).trim(),
                tail.join(" / ")
            ));
        }
        Ok(took)
    }

    fn pid(&self, name: &str) -> Option<i32> {
        let out = Command::new("lxc-info")
            .arg("-P")
            .arg(&self.lxcpath)
            .args(["-n", name, "-p", "-H"])
            .stderr(Stdio::null())
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    }

    /// Remove this run's cgroup directories, deepest first.
    fn remove_cgroups(&self) {
        for h in &self.hiers {
            let top = h.own.join(&self.cgroup_dir);
            let mut dirs = Vec::new();
            collect_dirs(&top, &mut dirs);
            // Deepest first: a child path is longer than its parent's.
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            for d in dirs {
                for _ in 0..100 {
                    let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
                    if procs.trim().is_empty() {
                        break;
                    }
                    // Only this run's containers and monitors can be in these cgroups.
                    for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                for _ in 0..100 {
                    if std::fs::remove_dir(&d).is_ok() || !d.exists() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

pub(crate) fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
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

impl Drop for Fleet {
    fn drop(&mut self) {
        for name in std::mem::take(&mut self.started) {
            let _ = self.lxc("lxc-stop", &name, &["-k"]);
        }
        self.remove_cgroups();
        let _ = std::fs::remove_dir_all(&self.lxcpath);
        // LXC's lock files for this lxcpath: /run/lxc/lock/<lxcpath without the leading '/'>.
        let lock_root = Path::new("/run/lxc/lock");
        let rel = self.lxcpath.strip_prefix("/").unwrap_or(&self.lxcpath);
        let _ = std::fs::remove_dir_all(lock_root.join(rel));
        let mut p = lock_root.join(rel);
        while p.pop() && p.starts_with(lock_root) && p != lock_root {
            if std::fs::remove_dir(&p).is_err() {
                break;
            }
        }
    }
}

pub(crate) fn ppid(proc_root: &Path, pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    s.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Run every step with LXC under `scratch`, from `rootfs`.
pub fn run(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    opts: &Options,
    progress: &mut dyn Progress,
) -> SystemRun {
    let mut sys = SystemRun {
        runtime: None,
        name: "lxc".into(),
        status: "ok".into(),
        note: String::new(),
        steps: Vec::new(),
    };
    if which("lxc-start").is_none() {
        sys.status = "not installed".into();
        sys.note = "not installed; the bench installs nothing: apt-get install lxc".into();
        return sys;
    }
    match run_steps(scratch, rootfs, proc_root, opts, progress, &mut sys.steps) {
        Ok(note) => sys.note = note,
        Err(Failure::Rule(e)) => {
            sys.status = "unavailable".into();
            sys.note = format!("LXC did not keep its cgroups beneath the bench's own cgroup, so it was stopped and is not measured: {e}");
            sys.steps.clear();
        }
        Err(Failure::Other(e)) => {
            sys.status = "failed".into();
            sys.note = e;
        }
    }
    sys
}

fn run_steps(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    opts: &Options,
    progress: &mut dyn Progress,
    steps: &mut Vec<Step>,
) -> Result<String, Failure> {
    for d in ["bin/sleep", "dev", "proc", "sys"] {
        if std::fs::symlink_metadata(rootfs.join(d)).is_err() {
            return Err(format!("{}: no /{d} in the busybox root", rootfs.display()).into());
        }
    }
    let read = |f: &str| std::fs::read_to_string(proc_root.join(f)).unwrap_or_default();
    let hiers = hierarchies(&read("self/mountinfo"), &read("self/cgroup"));
    if hiers.is_empty() {
        return Err(Failure::Rule(
            "no cgroup hierarchy found in /proc/self/mountinfo".into(),
        ));
    }
    let cgroup_dir = format!("wbench-{}", std::process::id());
    for &n in &opts.steps {
        let started = Instant::now();
        let lxcpath = scratch.join(format!("lxc-{n}"));
        let io = |e: std::io::Error| format!("{}: {e}", lxcpath.display());
        std::fs::create_dir_all(&lxcpath).map_err(io)?;
        let mut fleet = Fleet {
            lxcpath: lxcpath.clone(),
            cgroup_dir: cgroup_dir.clone(),
            hiers: hiers.clone(),
            started: Vec::new(),
        };
        let names: Vec<String> = (1..=n).map(|i| format!("c{i:05}")).collect();

        progress.phase(&format!("lxc N={n} config"), n as u64);
        let mut clone_ms = Vec::new();
        for name in &names {
            let t = Instant::now();
            let d = lxcpath.join(name);
            std::fs::create_dir_all(&d).map_err(io)?;
            std::fs::write(d.join("config"), config(name, rootfs, &cgroup_dir)).map_err(io)?;
            clone_ms.push(ms(t.elapsed()));
            progress.step();
        }
        std::thread::sleep(Duration::from_millis(500));
        let before = mem_sample(proc_root);
        progress.phase(&format!("lxc N={n} start"), n as u64);
        let mut boot_ms = Vec::new();
        let mut pids = Vec::new();
        for name in &names {
            fleet.started.push(name.clone());
            let log = lxcpath.join(format!("{name}.log"));
            let log = log.to_string_lossy();
            boot_ms.push(fleet.lxc("lxc-start", name, &["-d", "-o", &log, "-l", "WARN"])?);
            let pid = fleet
                .pid(name)
                .ok_or_else(|| format!("lxc-info {name}: no pid after lxc-start"))?;
            // The rule, checked for every container and its monitor.
            for (what, p) in [("container", Some(pid)), ("monitor", ppid(proc_root, pid))] {
                let Some(p) = p else { continue };
                let cg = read(&format!("{p}/cgroup"));
                beneath(&cg, &hiers, &cgroup_dir)
                    .map_err(|e| Failure::Rule(format!("{name}'s {what} (pid {p}): {e}")))?;
            }
            pids.push(pid);
            if let Some(m) = ppid(proc_root, pid) {
                pids.push(m);
            }
            progress.step();
        }
        let secs = opts.idle.as_secs().max(1);
        progress.phase(&format!("lxc N={n} idle"), secs);
        let cpu0 = procs_cpu_ns(proc_root, &pids);
        let t_idle = Instant::now();
        for _ in 0..secs {
            std::thread::sleep(opts.idle / secs as u32);
            progress.step();
        }
        let cpu1 = procs_cpu_ns(proc_root, &pids);
        let idle_cpu_pct =
            cpu1.saturating_sub(cpu0) as f64 / t_idle.elapsed().as_nanos() as f64 * 100.0;
        let after = mem_sample(proc_root);
        let disk: u64 = names
            .iter()
            .map(|name| disk_usage(&lxcpath.join(name)).unwrap_or(0))
            .sum();

        progress.phase(&format!("lxc N={n} stop"), n as u64);
        let mut halt_ms = Vec::new();
        for name in &names {
            halt_ms.push(fleet.lxc("lxc-stop", name, &["-k"])?);
            fleet.started.retain(|x| x != name);
            progress.step();
        }
        progress.phase(&format!("lxc N={n} delete"), n as u64);
        let mut delete_ms = Vec::new();
        for name in &names {
            let t = Instant::now();
            std::fs::remove_dir_all(lxcpath.join(name)).map_err(io)?;
            delete_ms.push(ms(t.elapsed()));
            progress.step();
        }
        drop(fleet);
        steps.push(Step {
            zones: n,
            clone_ms: summarize(&clone_ms),
            boot_ms: summarize(&boot_ms),
            total_s: started.elapsed().as_secs_f64(),
            mem_per_zone: mem_per_zone(&before, &after, n),
            disk_per_zone_kib: disk as f64 / n as f64 / 1024.0,
            idle_cpu_pct,
            halt_ms: summarize(&halt_ms),
            delete_ms: summarize(&delete_ms),
        });
    }
    Ok(format!(
        "LXC {}, busybox root shared read-only (lxc.rootfs.options = ro), /bin/sleep as init, lxc.net.0.type = empty, autodev, no ttys; private lxcpath; cgroups with lxc.cgroup.relative = 1 under {cgroup_dir}/ beneath the bench's own cgroup (checked in /proc/<pid>/cgroup of every container and monitor); one [lxc monitor] process per container, counted; 'clone' is writing the config, 'boot' lxc-start -d, 'halt' lxc-stop -k, 'delete' removing the config dir",
        lxc_version()
    ))
}

fn lxc_version() -> String {
    Command::new("lxc-start")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
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
        assert!(beneath(&bad, &h, "wb").unwrap_err().contains("memory"));
        // Sitting in the bench dir itself (not beneath it) is not enough.
        assert!(beneath("8:pids:/wb\n", &h, "wb").is_err());
    }

    #[test]
    fn config_keeps_lxc_in_its_place() {
        let c = config("c00001", Path::new("/r/templates/bb/root"), "wbench-7");
        for want in [
            "lxc.cgroup.relative = 1",
            "lxc.cgroup.dir.container = wbench-7/c00001",
            "lxc.cgroup.dir.monitor = wbench-7/m-c00001",
            "lxc.cgroup.dir.monitor.pivot = wbench-7/pivot",
            "lxc.net.0.type = empty",
            "lxc.rootfs.path = dir:/r/templates/bb/root",
            "lxc.rootfs.options = ro",
        ] {
            assert!(c.contains(want), "{want}");
        }
    }
}
