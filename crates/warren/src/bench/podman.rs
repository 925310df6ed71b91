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
//! Everything is undone also on failure ([`Store`]'s and [`Fleet`]'s drop): containers
//! removed, then any process still in a cgroup beneath the parent (conmon, podman's
//! cleanup command: only this run's can be there) killed, the cgroup directories and
//! the ancestors podman made for them removed, the image removed, mounts under the
//! private directory unmounted, the directory deleted.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::crun::which;
use super::lxc::{collect_dirs, hierarchies, Hier};
use super::{Failure, Options, Step, SystemRun};
use crate::fsutil::disk_usage;
use crate::measure::{mem_per_zone, mem_sample, ms, summarize, Progress};
use crate::stats::procs_cpu_ns;

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

    /// Run `podman ARGS`: its time in ms and its stdout. Output goes to a file (never a
    /// pipe: conmon could hold it open).
    fn podman(&self, args: &[&str]) -> Result<(f64, String), String> {
        let log = self.dir.join("podman.log");
        let f = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = self.dir.join("podman.err");
        let f2 = File::create(&err).map_err(|e| format!("{}: {e}", err.display()))?;
        let t = Instant::now();
        let st = self
            .cmd()
            .args(args)
            .stdin(Stdio::null())
            .stdout(f)
            .stderr(f2)
            .status()
            .map_err(|e| format!("running podman: {e}"))?;
        let took = ms(t.elapsed());
        let out = std::fs::read_to_string(&log).unwrap_or_default();
        if !st.success() {
            let msg = std::fs::read_to_string(&err).unwrap_or_default();
            return Err(format!("podman {}: {}", args.join(" "), msg.trim()));
        }
        Ok((took, out.trim().to_string()))
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
    fn check(&self, proc_cgroup: &str) -> Result<(), String> {
        let want = format!("{}/", self.parent);
        for l in proc_cgroup.lines() {
            let mut p = l.splitn(3, ':');
            let (_, k, path) = (p.next(), p.next().unwrap_or(""), p.next().unwrap_or(""));
            let mut ctrls: Vec<&str> = k.split(',').filter(|c| !c.is_empty()).collect();
            ctrls.sort_unstable();
            let Some(h) = self.hiers.iter().find(|h| h.key == ctrls.join(",")) else {
                continue;
            };
            if path != h.own_path && !path.starts_with(&want) {
                return Err(format!(
                    "'{l}' is neither the bench's own cgroup nor beneath {want}"
                ));
            }
        }
        Ok(())
    }

    /// Kill what is left in the parent's cgroups (only this run's processes can be
    /// there), remove them deepest first, then the ancestors podman made.
    fn remove_cgroups(&self) {
        let mut dirs = Vec::new();
        for h in &self.hiers {
            collect_dirs(&h.dir_of(&self.parent), &mut dirs);
        }
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in &dirs {
            for i in 0..300 {
                let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
                if procs.trim().is_empty() {
                    break;
                }
                // Give podman's cleanup command a second to finish on its own.
                if i >= 100 {
                    for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            for _ in 0..100 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
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

/// The containers of one step; removed on drop.
struct Fleet<'a> {
    store: &'a Store,
    ids: Vec<String>,
}

impl Drop for Fleet<'_> {
    fn drop(&mut self) {
        for id in std::mem::take(&mut self.ids) {
            let _ = self.store.podman(&["rm", "-f", "-t", "0", &id]);
        }
    }
}

/// Run every step with podman under `scratch`, from `rootfs`.
pub fn run(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    opts: &Options,
    progress: &mut dyn Progress,
) -> SystemRun {
    let mut sys = SystemRun {
        name: "podman".into(),
        status: "ok".into(),
        note: String::new(),
        runtime: None,
        steps: Vec::new(),
    };
    if which("podman").is_none() {
        sys.status = "not installed".into();
        sys.note = "not installed; the bench installs nothing: apt-get install podman".into();
        return sys;
    }
    match run_steps(scratch, rootfs, proc_root, opts, progress, &mut sys) {
        Ok(note) => sys.note = note,
        Err(Failure::Rule(e)) => {
            sys.status = "unavailable".into();
            sys.note = format!("podman did not keep its cgroups beneath the bench's own cgroup, so its containers were removed and it is not measured: {e}");
            sys.steps.clear();
        }
        Err(Failure::Other(e)) => {
            sys.status = "failed".into();
            sys.note = e;
        }
    }
    sys
}

/// Make the private store with `driver`, import the image and find a runtime that
/// runs a probe container. Err: why not (the store is wiped).
fn open_store(
    dir: &Path,
    rootfs: &Path,
    driver: &str,
    parent: &str,
    hiers: &[Hier],
) -> Result<Store, String> {
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
        std::fs::create_dir_all(dir.join(d)).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    // `podman import` from a tarball of the busybox root, without /etc/hostname: the
    // template links it to /proc/sys/kernel/hostname, and runc refuses to bind-mount
    // podman's hostname file over a path that resolves into /proc.
    let tarball = dir.join("busybox.tar");
    let st = Command::new("tar")
        .arg("-C")
        .arg(rootfs)
        .args(["--exclude=./etc/hostname", "-cf"])
        .arg(&tarball)
        .arg(".")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("running tar: {e}"))?;
    if !st.success() {
        return Err(format!("tar of {} failed", rootfs.display()));
    }
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
    Err(errors.join("; "))
}

fn run_steps(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    opts: &Options,
    progress: &mut dyn Progress,
    sys: &mut SystemRun,
) -> Result<String, Failure> {
    for d in ["bin/sleep"] {
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
    let mut store = None;
    for driver in ["overlay", "vfs"] {
        progress.phase(&format!("podman import ({driver})"), 1);
        match open_store(&dir, rootfs, driver, &parent, &hiers) {
            Ok(s) => {
                store = Some(s);
                break;
            }
            Err(e) => tried.push(format!("{driver}: {e}")),
        }
    }
    let Some(store) = store else {
        return Err(format!(
            "no podman storage driver and runtime worked: {}",
            tried.join(" | ")
        )
        .into());
    };
    sys.runtime = Some(store.runtime.clone());
    let store_size = || {
        disk_usage(&store.dir.join("root")).unwrap_or(0)
            + disk_usage(&store.dir.join("run")).unwrap_or(0)
    };

    for &n in &opts.steps {
        let started = Instant::now();
        let mut fleet = Fleet {
            store: &store,
            ids: Vec::new(),
        };
        let names: Vec<String> = (1..=n).map(|i| format!("c{i:05}")).collect();
        let disk0 = store_size();

        progress.phase(&format!("podman N={n} create"), n as u64);
        let mut clone_ms = Vec::new();
        for name in &names {
            let mut args = vec!["create"];
            args.extend(store.container_args(name));
            let (t, id) = store.podman(&args)?;
            let id = id.lines().last().unwrap_or(name).to_string();
            fleet.ids.push(id);
            clone_ms.push(t);
            progress.step();
        }
        std::thread::sleep(Duration::from_millis(500));
        let before = mem_sample(proc_root);
        progress.phase(&format!("podman N={n} start"), n as u64);
        let mut boot_ms = Vec::new();
        let mut pids = Vec::new();
        for name in &names {
            let (t, _) = store.podman(&["start", name])?;
            boot_ms.push(t);
            let (_, out) = store.podman(&[
                "inspect",
                "--format",
                "{{.State.Pid}} {{.State.ConmonPid}}",
                name,
            ])?;
            let ps: Vec<i32> = out
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .filter(|p| *p > 0)
                .collect();
            if ps.len() != 2 {
                return Err(format!("podman inspect {name}: no pids after start ({out})").into());
            }
            // The rule, checked for every container and its conmon.
            for (what, p) in [("container", ps[0]), ("conmon", ps[1])] {
                let cg = read(&format!("{p}/cgroup"));
                store
                    .check(&cg)
                    .map_err(|e| Failure::Rule(format!("{name}'s {what} (pid {p}): {e}")))?;
            }
            pids.extend(ps);
            progress.step();
        }
        let secs = opts.idle.as_secs().max(1);
        progress.phase(&format!("podman N={n} idle"), secs);
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
        let disk = store_size().saturating_sub(disk0);

        progress.phase(&format!("podman N={n} stop"), n as u64);
        let mut halt_ms = Vec::new();
        for name in &names {
            halt_ms.push(store.podman(&["stop", "-t", "0", name])?.0);
            progress.step();
        }
        progress.phase(&format!("podman N={n} rm"), n as u64);
        let mut delete_ms = Vec::new();
        for (name, id) in names.iter().zip(fleet.ids.clone()) {
            delete_ms.push(store.podman(&["rm", name])?.0);
            fleet.ids.retain(|x| *x != id);
            progress.step();
        }
        drop(fleet);
        sys.steps.push(Step {
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
    let version = Command::new("podman")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let note = format!(
        "{version} with runtime {} and storage driver {}, image imported from the busybox root (no registry), /bin/sleep, --network none; private --root/--runroot/--tmpdir in the scratch dir; --cgroup-manager cgroupfs --cgroup-parent {parent} beneath the bench's own cgroup (checked in /proc/<pid>/cgroup of every container and conmon); {}; one conmon process per container, counted; 'clone' is podman create, 'boot' podman start, 'halt' podman stop -t 0, 'delete' podman rm",
        store.runtime,
        store.driver,
        ULIMITS.join(" "),
    );
    drop(store);
    Ok(note)
}

#[cfg(test)]
mod tests {
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
