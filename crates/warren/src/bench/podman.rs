//! The podman column of `warren bench density --compare podman`: the same steps with
//! podman containers from a local image made of the bench's busybox template root
//! (`podman import`, no registry), no network (`--network none`: loopback only),
//! `/bin/sleep` as the container's process. The image leaves out the template's
//! /etc/hostname link (into /proc, which runc will not mount over); podman provides
//! the file.
//!
//! podman's state stays out of the host's: `--root`, `--runroot` and `--tmpdir` are
//! private directories in the bench's scratch dir (never /var/lib/containers), with
//! `--storage-driver overlay` (vfs if overlay does not work) and `--events-backend
//! none`. The OCI runtime is the first of runc and crun that runs a probe container
//! (crun 1.8 refuses hybrid cgroup hosts); results.json says which (`runtime`).
//!
//! Cgroups: `--cgroup-manager cgroupfs --cgroup-parent <own>/wbench-podman-<pid>`,
//! where `<own>` is this process's memory cgroup. podman takes one parent path for
//! every hierarchy, so the bench first checks that the path lies beneath its own
//! cgroup in each of them; every container's init and its conmon are then checked in
//! `/proc/<pid>/cgroup` (each line either this process's own cgroup, where conmon
//! stays in the hierarchies podman does not move it in, or beneath the parent). If
//! anything lands elsewhere the run's containers are removed at once and podman is
//! reported as unavailable with the reason.
//!
//! podman's default rlimits (nofile and nproc 1048576) are above the bench's hard
//! limits, and without CAP_SYS_RESOURCE the runtime cannot set them, so containers get
//! `--ulimit nofile=1024:1024 --ulimit nproc=4096:4096`.
//!
//! Per container podman leaves one host process besides the container's own, conmon;
//! its memory and CPU count in podman's figures. "clone" is `podman create`, "boot"
//! `podman start`, "halt" `podman stop -t 0`, "delete" `podman rm`. Disk per container
//! is what the private store and runroot grew by, over the containers.
//!
//! The steps run through the bench's one measured loop ([`super::system`]) and its one
//! command wrapper ([`super::command`]); the cgroup rule and the removal of the run's
//! cgroups are [`super::cgroups`]'.
//!
//! Everything is undone also on failure or panic ([`Podman`]'s and [`Store`]'s drop): containers
//! removed, then any process still in a cgroup beneath the parent (conmon, podman's
//! cleanup command: only this run's can be there) killed, the cgroup directories and
//! the ancestors podman made for them removed, the image removed, mounts under the
//! private directory unmounted, the directory deleted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::cgroups::{
    check_pids, collect_dirs, own_hierarchies, placed, remove_dirs, Hier, Misplaced,
};
use super::command;
use super::system::{which, Cpu, Failure, Needs, System, Verbs};
use crate::fsutil::disk_usage;
use crate::measure::Progress;

const IMAGE: &str = "localhost/warren-bench-busybox:latest";
const ULIMITS: [&str; 4] = [
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=4096:4096",
];

/// podman's private store and the cgroups of this run; all removed on drop.
struct Store {
    dir: PathBuf,
    driver: String,
    runtime: String,
    /// The cgroup parent, as /proc/<pid>/cgroup shows it.
    parent: String,
    hiers: Vec<Hier>,
    /// Ancestors of the parent's directories that did not exist before the run.
    made: Vec<PathBuf>,
}

impl Store {
    fn cmd(&self) -> Command {
        let mut c = Command::new("podman");
        c.arg("--root")
            .arg(self.dir.join("root"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .arg("--tmpdir")
            .arg(self.dir.join("tmp"))
            .args(["--storage-driver", &self.driver])
            .args(["--cgroup-manager", "cgroupfs", "--events-backend", "none"])
            .args(["--runtime", &self.runtime]);
        c
    }

    /// Run `podman ARGS`; its stdout.
    fn podman(&self, args: &[&str]) -> Result<String, Failure> {
        let mut c = self.cmd();
        c.args(args);
        command::run(c, &self.dir)
    }

    /// `podman run -d`/`create` arguments shared by every container.
    fn container_args<'a>(&'a self, name: &'a str) -> Vec<&'a str> {
        let mut v = vec!["--name", name, "--network", "none", "--cgroup-parent"];
        v.push(&self.parent);
        v.extend(ULIMITS);
        v.extend([IMAGE, "/bin/sleep", "1000000"]);
        v
    }

    /// Record which ancestors of the parent's directories do not exist yet.
    fn note_ancestors(&mut self) {
        for h in &self.hiers {
            let mut p = self.parent.clone();
            while let Some((up, _)) = p.rsplit_once('/') {
                p = up.to_string();
                if p.is_empty() || p.len() <= h.own_path.trim_end_matches('/').len() {
                    break;
                }
                let d = h.dir_of(&p);
                if !d.exists() && !self.made.contains(&d) {
                    self.made.push(d);
                }
            }
        }
    }

    /// Every line of a process's /proc/<pid>/cgroup is this process's own cgroup or
    /// beneath the parent.
    fn check(&self, proc_cgroup: &str) -> Result<(), Misplaced> {
        let want = format!("{}/", self.parent);
        placed(proc_cgroup, &self.hiers, true, &|_| want.clone())
    }

    /// Kill what is left in the parent's cgroups (only this run's processes can be
    /// there), remove them deepest first, then the ancestors podman made.
    fn remove_cgroups(&self) {
        let mut dirs = Vec::new();
        for h in &self.hiers {
            collect_dirs(&h.dir_of(&self.parent), &mut dirs);
        }
        // Give podman's cleanup command a second to finish on its own.
        remove_dirs(dirs, Duration::from_secs(1));
        let mut made = self.made.clone();
        made.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in made {
            let _ = std::fs::remove_dir(d);
        }
    }

    /// Unmount everything under the private directory (deepest first) and delete it.
    fn remove_dir(&self) {
        let needle = format!("{}/", self.dir.display());
        let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
            .filter(|m| m.starts_with(&needle) || *m == needle.trim_end_matches('/'))
            .collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounts {
            let _ = Command::new("umount").args(["-l", &m]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// Remove every container, the image, the cgroups, the mounts and the files.
    fn wipe(&self) {
        if self.dir.join("root").exists() {
            let _ = self.podman(&["rm", "-af", "-t", "0"]);
            let _ = self.podman(&["rmi", "-af"]);
        }
        self.remove_cgroups();
        self.remove_dir();
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.wipe();
    }
}

/// Make the private store with `driver`, import the image and find a runtime that
/// runs a probe container. Err: why not (the store is wiped).
fn open_store(
    dir: &Path,
    rootfs: &Path,
    driver: &str,
    parent: &str,
    hiers: &[Hier],
) -> Result<Store, Failure> {
    let mut store = Store {
        dir: dir.to_path_buf(),
        driver: driver.into(),
        runtime: "runc".into(),
        parent: parent.into(),
        hiers: hiers.to_vec(),
        made: Vec::new(),
    };
    store.note_ancestors();
    for d in ["root", "run", "tmp"] {
        let d = dir.join(d);
        std::fs::create_dir_all(&d).map_err(Failure::io(&d))?;
    }
    // `podman import` from a tarball of the busybox root, without /etc/hostname: the
    // template links it to /proc/sys/kernel/hostname, and runc refuses to bind-mount
    // podman's hostname file over a path that resolves into /proc.
    let tarball = dir.join("busybox.tar");
    let mut tar = Command::new("tar");
    tar.arg("-C")
        .arg(rootfs)
        .args(["--exclude=./etc/hostname", "-cf"])
        .arg(&tarball)
        .arg(".");
    command::run(tar, dir)?;
    store.podman(&["import", &tarball.to_string_lossy(), IMAGE])?;
    let _ = std::fs::remove_file(&tarball);
    let mut errors = Vec::new();
    for rt in ["runc", "crun"] {
        if which(rt).is_none() {
            errors.push(format!("{rt}: not installed"));
            continue;
        }
        store.runtime = rt.into();
        let mut args = vec!["run", "--rm"];
        let name = format!("probe-{rt}");
        let mut c = store.container_args(&name);
        // The probe exits at once.
        c.pop();
        c.push("0");
        args.extend(c);
        match store.podman(&args) {
            Ok(_) => return Ok(store),
            Err(e) => {
                errors.push(format!("{rt}: {e}"));
                let _ = store.podman(&["rm", "-f", "-t", "0", &name]);
            }
        }
    }
    Err(errors.join("; ").into())
}

/// What podman needs on the host.
pub const NEEDS: Needs = Needs {
    command: "podman",
    package: "podman",
};

/// podman as a compared system: its private store under `scratch`, the image from
/// `rootfs`.
pub fn open(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    progress: &mut dyn Progress,
) -> Result<Box<dyn System>, Failure> {
    Ok(Box::new(Podman::open(
        scratch, rootfs, proc_root, progress,
    )?))
}

/// podman with its private store, and one step's containers.
struct Podman {
    store: Store,
    proc_root: PathBuf,
    names: Vec<String>,
    /// Containers podman may hold, by name (removed by cleanup).
    live: Vec<String>,
    /// Every container's init and its conmon.
    pids: Vec<i32>,
    /// The store's size when the step began.
    disk0: u64,
}

impl Podman {
    /// Check the root and the cgroup parent, then make the private store with the
    /// first driver and runtime that work.
    fn open(
        scratch: &Path,
        rootfs: &Path,
        proc_root: &Path,
        progress: &mut dyn Progress,
    ) -> Result<Podman, Failure> {
        if std::fs::symlink_metadata(rootfs.join("bin/sleep")).is_err() {
            return Err(Failure::NotInRoot {
                root: rootfs.to_path_buf(),
                what: "bin/sleep",
            });
        }
        let hiers = own_hierarchies(proc_root)?;
        let own = crate::oci::cgroup::own_path(proc_root);
        let parent = format!(
            "{}/wbench-podman-{}",
            own.trim_end_matches('/'),
            std::process::id()
        );
        // One parent path for every hierarchy: it must be beneath this process's cgroup in each.
        for h in &hiers {
            let base = h.own_path.trim_end_matches('/');
            if !parent.starts_with(&format!("{base}/")) {
                return Err(Failure::Rule(format!(
                    "podman takes one --cgroup-parent for every hierarchy, and {parent} is not beneath this process's cgroup {} in hierarchy '{}'",
                    h.own_path, h.key
                )));
            }
        }
        let dir = scratch.join("podman");
        let mut tried = Vec::new();
        for driver in ["overlay", "vfs"] {
            progress.phase(&format!("podman import ({driver})"), 1);
            match open_store(&dir, rootfs, driver, &parent, &hiers) {
                Ok(store) => {
                    return Ok(Podman {
                        store,
                        proc_root: proc_root.to_path_buf(),
                        names: Vec::new(),
                        live: Vec::new(),
                        pids: Vec::new(),
                        disk0: 0,
                    })
                }
                Err(e) => tried.push(format!("{driver}: {e}")),
            }
        }
        Err(format!(
            "no podman storage driver and runtime worked: {}",
            tried.join(" | ")
        )
        .into())
    }

    fn store_size(&self) -> u64 {
        disk_usage(&self.store.dir.join("root")).unwrap_or(0)
            + disk_usage(&self.store.dir.join("run")).unwrap_or(0)
    }
}

impl System for Podman {
    fn name(&self) -> &str {
        "podman"
    }

    fn verbs(&self) -> Verbs {
        Verbs {
            clone: "create",
            boot: "start",
            halt: "stop",
            delete: "rm",
        }
    }

    fn prepare(&mut self, n: usize) -> Result<(), Failure> {
        self.names = (1..=n).map(|i| format!("c{i:05}")).collect();
        self.disk0 = self.store_size();
        Ok(())
    }

    fn create(&mut self, i: usize) -> Result<(), Failure> {
        let name = &self.names[i];
        let mut args = vec!["create"];
        args.extend(self.store.container_args(name));
        self.store.podman(&args)?;
        self.live.push(name.clone());
        Ok(())
    }

    fn start(&mut self, i: usize) -> Result<(), Failure> {
        self.store.podman(&["start", &self.names[i]]).map(drop)
    }

    fn started(&mut self, i: usize) -> Result<(), Failure> {
        let name = &self.names[i];
        let format = "{{.State.Pid}} {{.State.ConmonPid}}";
        let out = self.store.podman(&["inspect", "--format", format, name])?;
        let ps: Vec<i32> = out
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .filter(|p| *p > 0)
            .collect();
        let [pid, conmon] = ps[..] else {
            return Err(format!("podman inspect {name}: no pids after start ({out})").into());
        };
        // The rule, checked for every container and its conmon.
        let procs = [("container", pid), ("conmon", conmon)];
        check_pids(&self.proc_root, name, &procs, &|cg| self.store.check(cg))?;
        self.pids.extend([pid, conmon]);
        Ok(())
    }

    fn cpu(&self) -> Cpu<'_> {
        Cpu::Pids(&self.pids)
    }

    fn disk_bytes(&self) -> u64 {
        self.store_size().saturating_sub(self.disk0)
    }

    fn stop(&mut self, i: usize) -> Result<(), Failure> {
        self.store
            .podman(&["stop", "-t", "0", &self.names[i]])
            .map(drop)
    }

    fn delete(&mut self, i: usize) -> Result<(), Failure> {
        let name = &self.names[i];
        self.store.podman(&["rm", name])?;
        self.live.retain(|x| x != name);
        Ok(())
    }

    fn cleanup(&mut self) -> Result<(), Failure> {
        for name in std::mem::take(&mut self.live) {
            let _ = self.store.podman(&["rm", "-f", "-t", "0", &name]);
        }
        self.pids.clear();
        Ok(())
    }

    fn note(&self) -> String {
        let version = Command::new("podman")
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        format!(
            "{version} with runtime {} and storage driver {}, image imported from the busybox root (no registry), /bin/sleep, --network none; private --root/--runroot/--tmpdir in the scratch dir; --cgroup-manager cgroupfs --cgroup-parent {} beneath the bench's own cgroup (checked in /proc/<pid>/cgroup of every container and conmon); {}; one conmon process per container, counted; 'clone' is podman create, 'boot' podman start, 'halt' podman stop -t 0, 'delete' podman rm",
            self.store.runtime,
            self.store.driver,
            self.store.parent,
            ULIMITS.join(" "),
        )
    }

    fn runtime(&self) -> Option<String> {
        Some(self.store.runtime.clone())
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        // The containers first; the store (its cgroups, mounts, files) after, as a field.
        let _ = self.cleanup();
    }
}

#[cfg(test)]
mod tests {
    use super::super::cgroups::hierarchies;
    use super::*;

    #[test]
    fn check_accepts_own_or_beneath_parent_only() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
31 25 0:27 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd
36 25 0:32 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
";
        let own = "9:name=systemd:/\n4:memory:/p/abc\n0::/\n";
        let hiers = hierarchies(mountinfo, own);
        let s = Store {
            dir: PathBuf::from("/nonexistent-warren-test"),
            driver: "vfs".into(),
            runtime: "runc".into(),
            parent: "/p/abc/wbench-podman-7".into(),
            hiers,
            made: Vec::new(),
        };
        // conmon: moved in memory, left in its own cgroup elsewhere.
        assert!(s
            .check("9:name=systemd:/\n4:memory:/p/abc/wbench-podman-7/conmon\n0::/\n")
            .is_ok());
        assert!(s
            .check("4:memory:/p/abc/wbench-podman-7/libpod-1\n0::/p/abc/wbench-podman-7/libpod-1\n")
            .is_ok());
        assert!(s.check("4:memory:/machine.slice/libpod-1\n").is_err());
        assert!(s.check("0::/other\n").is_err());
        assert_eq!(
            s.hiers[2].dir_of("/p/abc/x"),
            Path::new("/sys/fs/cgroup/memory/p/abc/x")
        );
        std::mem::forget(s);
    }
}
