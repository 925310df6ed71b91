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
//! The steps run through the bench's one measured loop ([`super::system`]) and its one
//! command wrapper ([`super::command`]); the cgroup rule and the removal of the run's
//! cgroups are [`super::cgroups`]'.
//!
//! Everything is undone when a step ends, also on failure or panic ([`Lxc`]'s drop): the
//! containers are stopped, their cgroup directories removed (deepest first; a process
//! still in one is killed first: it can only be one of this run's), the lxcpath and
//! LXC's lock directory for it (`/run/lxc/lock/<lxcpath>`) deleted.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::cgroups::{check_pids, collect_dirs, own_hierarchies, remove_dirs, Hier};
use super::command;
use super::system::{Cpu, Failure, Needs, System, Verbs};
use crate::fsutil::disk_usage;
use crate::measure::Progress;
use crate::stats::ppid;

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

/// LXC under the bench's scratch dir, with one step's containers; everything removed
/// by [`System::cleanup`] and on drop.
struct Lxc {
    scratch: PathBuf,
    rootfs: PathBuf,
    proc_root: PathBuf,
    hiers: Vec<Hier>,
    /// `wbench-<pid>`: the run's cgroup directory beneath the bench's own.
    cgroup_dir: String,
    /// The step's private lxcpath.
    lxcpath: PathBuf,
    names: Vec<String>,
    /// Containers that may be running.
    started: Vec<String>,
    /// Every container's init and its monitor.
    pids: Vec<i32>,
}

impl Lxc {
    fn open(scratch: &Path, rootfs: &Path, proc_root: &Path) -> Result<Lxc, Failure> {
        for d in ["bin/sleep", "dev", "proc", "sys"] {
            if std::fs::symlink_metadata(rootfs.join(d)).is_err() {
                return Err(Failure::NotInRoot {
                    root: rootfs.to_path_buf(),
                    what: d,
                });
            }
        }
        Ok(Lxc {
            scratch: scratch.to_path_buf(),
            rootfs: rootfs.to_path_buf(),
            proc_root: proc_root.to_path_buf(),
            hiers: own_hierarchies(proc_root)?,
            cgroup_dir: format!("wbench-{}", std::process::id()),
            lxcpath: scratch.join("lxc"),
            names: Vec::new(),
            started: Vec::new(),
            pids: Vec::new(),
        })
    }

    /// Run `PROG -P LXCPATH -n NAME EXTRA`; an error ends with the container log's tail.
    fn lxc(&self, prog: &str, name: &str, extra: &[&str]) -> Result<String, Failure> {
        let mut c = Command::new(prog);
        c.arg("-P")
            .arg(&self.lxcpath)
            .args(["-n", name])
            .args(extra);
        command::run(c, &self.scratch).map_err(|e| match e {
            Failure::Command {
                command,
                status,
                stderr,
            } => {
                let log = std::fs::read_to_string(self.lxcpath.join(format!("{name}.log")))
                    .unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(3).collect();
                Failure::Command {
                    command,
                    status,
                    stderr: format!("{stderr} {}", tail.join(" / ")),
                }
            }
            other => other,
        })
    }
}

impl System for Lxc {
    fn name(&self) -> &str {
        "lxc"
    }

    fn verbs(&self) -> Verbs {
        Verbs {
            clone: "config",
            boot: "start",
            halt: "stop",
            delete: "delete",
        }
    }

    fn prepare(&mut self, n: usize) -> Result<(), Failure> {
        self.lxcpath = self.scratch.join(format!("lxc-{n}"));
        std::fs::create_dir_all(&self.lxcpath).map_err(Failure::io(&self.lxcpath))?;
        self.names = (1..=n).map(|i| format!("c{i:05}")).collect();
        Ok(())
    }

    fn create(&mut self, i: usize) -> Result<(), Failure> {
        let name = &self.names[i];
        let d = self.lxcpath.join(name);
        std::fs::create_dir_all(&d).map_err(Failure::io(&d))?;
        std::fs::write(
            d.join("config"),
            config(name, &self.rootfs, &self.cgroup_dir),
        )
        .map_err(Failure::io(&d))
    }

    fn start(&mut self, i: usize) -> Result<(), Failure> {
        let name = self.names[i].clone();
        self.started.push(name.clone());
        let log = self.lxcpath.join(format!("{name}.log"));
        let log = log.to_string_lossy();
        self.lxc("lxc-start", &name, &["-d", "-o", &log, "-l", "WARN"])
            .map(drop)
    }

    fn started(&mut self, i: usize) -> Result<(), Failure> {
        let name = &self.names[i];
        let pid: i32 = self
            .lxc("lxc-info", name, &["-p", "-H"])?
            .parse()
            .map_err(|_| format!("lxc-info {name}: no pid after lxc-start"))?;
        let mut procs = vec![("container", pid)];
        if let Some(m) = ppid(&self.proc_root, pid) {
            procs.push(("monitor", m));
        }
        // The rule, checked for every container and its monitor.
        let (hiers, dir) = (&self.hiers, &self.cgroup_dir);
        check_pids(&self.proc_root, name, &procs, &|cg| {
            super::cgroups::beneath(cg, hiers, dir)
        })?;
        self.pids.extend(procs.iter().map(|(_, p)| *p));
        Ok(())
    }

    fn cpu(&self) -> Cpu<'_> {
        Cpu::Pids(&self.pids)
    }

    fn disk_bytes(&self) -> u64 {
        self.names
            .iter()
            .map(|name| disk_usage(&self.lxcpath.join(name)).unwrap_or(0))
            .sum()
    }

    fn stop(&mut self, i: usize) -> Result<(), Failure> {
        let name = self.names[i].clone();
        self.lxc("lxc-stop", &name, &["-k"])?;
        self.started.retain(|x| *x != name);
        Ok(())
    }

    fn delete(&mut self, i: usize) -> Result<(), Failure> {
        let d = self.lxcpath.join(&self.names[i]);
        std::fs::remove_dir_all(&d).map_err(Failure::io(&d))
    }

    fn cleanup(&mut self) -> Result<(), Failure> {
        for name in std::mem::take(&mut self.started) {
            let _ = self.lxc("lxc-stop", &name, &["-k"]);
        }
        self.pids.clear();
        let mut dirs = Vec::new();
        for h in &self.hiers {
            collect_dirs(&h.own.join(&self.cgroup_dir), &mut dirs);
        }
        remove_dirs(dirs, std::time::Duration::ZERO);
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
        Ok(())
    }

    fn note(&self) -> String {
        format!(
            "LXC {}, busybox root shared read-only (lxc.rootfs.options = ro), /bin/sleep as init, lxc.net.0.type = empty, autodev, no ttys; private lxcpath; cgroups with lxc.cgroup.relative = 1 under {}/ beneath the bench's own cgroup (checked in /proc/<pid>/cgroup of every container and monitor); one [lxc monitor] process per container, counted; 'clone' is writing the config, 'boot' lxc-start -d, 'halt' lxc-stop -k, 'delete' removing the config dir",
            lxc_version(),
            self.cgroup_dir
        )
    }
}

impl Drop for Lxc {
    fn drop(&mut self) {
        let _ = self.cleanup();
    }
}

/// What LXC needs on the host.
pub const NEEDS: Needs = Needs {
    command: "lxc-start",
    package: "lxc",
};

/// LXC as a compared system, under `scratch`, from `rootfs`.
pub fn open(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    _: &mut dyn Progress,
) -> Result<Box<dyn System>, Failure> {
    Ok(Box::new(Lxc::open(scratch, rootfs, proc_root)?))
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
