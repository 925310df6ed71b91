//! Cgroups: one driver trait, a v1 and a v2 implementation, chosen by probing.
//!
//! warren creates cgroups only beneath the cgroup it runs in (read per controller from
//! /proc/self/cgroup), in a group named after its state root (see
//! [`crate::layout::Layout::cgroup_group`]), one child per zone:
//! `<mount>/<own cgroup>/<group>/<zone>`. It never writes to a cgroup it did not create.
//!
//! The driver only *creates* cgroups and computes what to write; a zone's cgroups, once
//! made, are a plain [`CgroupSet`] (version + directories) recorded in the zone's
//! runtime file, so any later warren process can kill, read or remove them without
//! re-discovering anything. Both the cgroupfs mounts and /proc are injectable paths.
//!
//! What goes into the files is decided by pure functions ([`v1::writes`],
//! [`v2::writes`]) that are unit-tested with the kernel's file names and formats.

pub mod delegate;
pub mod devices;
mod discover;
pub mod freeze;
pub mod live;
pub mod place;
pub mod v1;
pub mod v2;

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use delegate::Delegation;
pub use discover::{
    discover, own_dirs, parse_mountinfo, parse_mountinfo_named, parse_proc_cgroup, CgroupMount,
    Hierarchy,
};
pub use place::{Created, Place};

use crate::config::Limits;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

impl std::fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no usable cgroup hierarchy found in {mountinfo}; mount cgroup v2 at /sys/fs/cgroup or the v1 controllers (memory, pids, cpu)")]
    NoHierarchy { mountinfo: String },
    #[error("the {controller} controller is not available ({hint})")]
    MissingController { controller: String, hint: String },
    /// The base warren runs in cannot give zones these controllers (see [`delegate`]).
    #[error("cgroup v2 controllers {missing} are not delegated to {}: {why}; {fix}", base.display(), fix = delegate::DELEGATE_FIX)]
    NotDelegated {
        missing: String,
        base: PathBuf,
        why: String,
    },
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("device rule {line:?}: expected \"a\" or \"c|b|a MAJOR|*:MINOR|* [rwm]\"")]
    BadDeviceRule { line: String },
    /// A freeze or thaw the kernel did not finish in time.
    #[error("{} is not {want} after {}s; a process of the zone may be stuck in the kernel (D state, see /proc/PID/stack): try again, or halt the zone", path.display(), freeze::FREEZE_TIMEOUT.as_secs())]
    Stuck { path: PathBuf, want: &'static str },
    #[error("{} still has processes after killing them; they may be stuck in the kernel (D state, see its cgroup.procs and /proc/PID/stack): run the command again once they exit, or reboot the host if they never do", path.display())]
    Busy { path: PathBuf },
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CgroupError + 'a {
    move |source| CgroupError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// Creates zone cgroups on one host.
pub trait CgroupDriver {
    fn version(&self) -> CgroupVersion;
    /// Controllers available to zones.
    fn controllers(&self) -> Vec<String>;
    /// The directories zone cgroups are made under, with their controllers.
    fn parents(&self) -> Vec<(String, PathBuf)>;
    /// The zones' group where memory is accounted (the memory hierarchy's on v1, the
    /// unified one on v2): where a budget for all zones is read and set.
    fn memory_parent(&self) -> Option<PathBuf> {
        self.parents()
            .into_iter()
            .find(|(c, _)| c.split(',').any(|x| x == "memory") || c.is_empty())
            .map(|(_, d)| d)
    }
    /// Create the cgroups of `zone` and apply `limits`. An existing, empty cgroup of the
    /// same name (left by a crash) is reused.
    fn create(&self, zone: &str, limits: &Limits) -> Result<CgroupSet, CgroupError> {
        self.create_at(&Place::Zone(zone.into()), limits, &CreateOptions::default())
            .map(|c| c.set)
    }
    /// Whether zones can get their controllers (v2 delegation, see [`delegate`]);
    /// `try_it` prepares it for real, as a boot would.
    fn delegation(&self, try_it: bool) -> Delegation;
    /// [`CgroupDriver::create`] at any [`Place`], with more controllers or another
    /// device list (the OCI runtime: its `linux.cgroupsPath`, freezer for
    /// pause/resume, the config's `linux.resources.devices`). Directories of a path
    /// place that exist already are joined, not made; on failure what was made is
    /// removed again.
    fn create_at(
        &self,
        place: &Place,
        limits: &Limits,
        options: &CreateOptions,
    ) -> Result<Created, CgroupError>;
    /// A running zone's `set` extended with the controllers `limits` need that it was
    /// created without (cpu, cpuset), so a live change can set them: v1 makes the
    /// zone's directory in that hierarchy and moves its processes there; v2 enables
    /// the controller above the zone's directory. The set is unchanged when nothing
    /// is missing.
    fn join_controllers(
        &self,
        zone: &str,
        set: &CgroupSet,
        limits: &Limits,
    ) -> Result<CgroupSet, CgroupError>;
    /// A running zone's `set` with a freezer (`warren suspend`): v1 makes the zone's
    /// directory in the freezer hierarchy and moves its processes there
    /// ([`freeze::join_v1`]); v2 freezes any cgroup, so the set is unchanged.
    fn join_freezer(&self, zone: &str, set: &CgroupSet) -> Result<CgroupSet, CgroupError> {
        let _ = zone;
        Ok(set.clone())
    }
}

/// What [`CgroupDriver::create_at`] adds to a zone's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateOptions {
    /// v1 hierarchies joined on top of the defaults where mounted (e.g. "freezer").
    pub extra: Vec<String>,
    /// v1 `devices.deny` / `devices.allow` writes replacing warren's own list.
    pub devices: Option<Vec<(&'static str, String)>>,
}

/// A zone's cgroups: one directory per v1 hierarchy, or one v2 directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupSet {
    pub version: CgroupVersion,
    /// (controllers, directory), e.g. ("memory", /sys/fs/cgroup/memory/warren/web1).
    pub dirs: Vec<(String, PathBuf)>,
}

fn mkdir_ok_if_exists(dir: &Path) -> Result<(), CgroupError> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(io_err("creating", dir)(e)),
        _ => Ok(()),
    }
}

/// Create the group directory (then run `init_group` on it) and the zone's directory in
/// it. A halt of the group's last other zone may remove the group between the two
/// mkdirs; then the zone's mkdir fails with ENOENT and both are made again.
pub(crate) fn make_group_and_zone(
    group: &Path,
    zone: &Path,
    init_group: impl Fn() -> Result<(), CgroupError>,
) -> Result<(), CgroupError> {
    let mut attempts = 0;
    loop {
        mkdir_ok_if_exists(group)?;
        init_group()?;
        match std::fs::create_dir(zone) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempts < 10 => attempts += 1,
            Err(e) => return Err(io_err("creating", zone)(e)),
        }
    }
}

/// Write one control file.
pub(crate) fn write_file(dir: &Path, file: &str, value: &str) -> Result<(), CgroupError> {
    let path = dir.join(file);
    std::fs::write(&path, value).map_err(io_err("writing", &path))
}

/// Move every process of `set` into `dir` (one more hierarchy's directory).
pub(crate) fn move_all(set: &CgroupSet, dir: &Path) -> Result<(), CgroupError> {
    for _ in 0..100 {
        let moved: Vec<i32> =
            read_pids(&dir.join("cgroup.procs")).map_err(io_err("reading", dir))?;
        let left: Vec<i32> = set
            .pids()?
            .into_iter()
            .filter(|p| !moved.contains(p))
            .collect();
        if left.is_empty() {
            break;
        }
        for pid in left {
            // A process that exited meanwhile (ESRCH) needs no move.
            match write_file(dir, "cgroup.procs", &pid.to_string()) {
                Err(CgroupError::Io { source, .. })
                    if source.raw_os_error() == Some(warren_sys::libc::ESRCH) => {}
                r => r?,
            }
        }
    }
    Ok(())
}

fn read_pids(path: &Path) -> io::Result<Vec<i32>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(s.lines().filter_map(|l| l.trim().parse().ok()).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

impl CgroupSet {
    /// The directory that holds `controller`'s files (v2: the one directory).
    pub fn dir_with(&self, controller: &str) -> Option<&Path> {
        match self.version {
            CgroupVersion::V2 => self.dirs.first().map(|(_, d)| d.as_path()),
            CgroupVersion::V1 => self
                .dirs
                .iter()
                .find(|(c, _)| c.split(',').any(|x| x == controller))
                .map(|(_, d)| d.as_path()),
        }
    }

    /// The directory a zone's first process is cloned into
    /// (`clone3(CLONE_INTO_CGROUP)`, see `warren_sys::spawn`), opened: the v2 directory.
    /// `None` for v1 sets (CLONE_INTO_CGROUP takes only a cgroup2 directory; their
    /// processes are migrated into every hierarchy), and when
    /// `WARREN_CLONE_INTO_CGROUP=off` asks for the migration (to measure the gain).
    pub fn clone_target(&self) -> Result<Option<std::os::fd::OwnedFd>, CgroupError> {
        let off = std::env::var_os("WARREN_CLONE_INTO_CGROUP").is_some_and(|v| v == "off");
        match (self.version, self.dirs.first()) {
            (CgroupVersion::V2, Some((_, d))) if !off => std::fs::File::open(d)
                .map(|f| Some(f.into()))
                .map_err(io_err("opening", d)),
            _ => Ok(None),
        }
    }

    /// The `cgroup.procs` files a process writes itself into to join the zone.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .map(|(_, d)| d.join("cgroup.procs"))
            .collect()
    }

    /// The files the calling process writes `0` into to join the set itself: v1's
    /// `tasks` files while it has one thread (moving that thread moves the process,
    /// without the RCU grace period of a whole-process migration, see
    /// [`CgroupSet::tasks_files`]), else the `cgroup.procs` files.
    pub fn self_join_files(&self) -> Vec<PathBuf> {
        match self.version {
            CgroupVersion::V1 if warren_sys::fds::ensure_single_threaded().is_ok() => {
                self.tasks_files()
            }
            _ => self.procs_files(),
        }
    }

    /// The `tasks` files of a v1 set: a single-threaded process writes `0` into them to
    /// join the zone by moving its one thread, which spares the RCU grace period a
    /// migration of a whole process waits for (`sandbox::cgroup_entry`). Empty on v2,
    /// whose domain cgroups have no per-thread file.
    pub fn tasks_files(&self) -> Vec<PathBuf> {
        match self.version {
            CgroupVersion::V1 => self.dirs.iter().map(|(_, d)| d.join("tasks")).collect(),
            CgroupVersion::V2 => Vec::new(),
        }
    }

    /// Processes in the zone's cgroups (host pids), deduplicated.
    pub fn pids(&self) -> Result<Vec<i32>, CgroupError> {
        let mut all = Vec::new();
        for (_, d) in &self.dirs {
            let p = d.join("cgroup.procs");
            all.extend(read_pids(&p).map_err(io_err("reading", &p))?);
        }
        all.sort_unstable();
        all.dedup();
        Ok(all)
    }

    /// SIGKILL everything in the zone's cgroups and wait until they are empty.
    pub fn kill_all(&self, timeout: Duration) -> Result<(), CgroupError> {
        let deadline = Instant::now() + timeout;
        self.thaw_for_kill();
        loop {
            if self.version == CgroupVersion::V2 {
                if let Some(d) = self.dirs.first().map(|(_, d)| d) {
                    if d.join("cgroup.kill").exists() {
                        let _ = write_file(d, "cgroup.kill", "1");
                    }
                }
            }
            let pids = self.pids()?;
            if pids.is_empty() {
                return Ok(());
            }
            for pid in pids {
                let _ = warren_sys::proc::kill(pid, warren_sys::libc::SIGKILL);
            }
            if Instant::now() >= deadline {
                let path = self.dirs[0].1.clone();
                return Err(CgroupError::Busy { path });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Remove the zone's cgroup directories (they must be empty of processes), then the
    /// group directories above them (on v2 the bucket and the group) if no other zone
    /// uses them.
    pub fn remove(&self, timeout: Duration) -> Result<(), CgroupError> {
        let deadline = Instant::now() + timeout;
        for (_, d) in self.dirs.iter().rev() {
            self.drop_charges(d);
            loop {
                match std::fs::remove_dir(d) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(e)
                        if e.raw_os_error() == Some(warren_sys::libc::EBUSY)
                            && Instant::now() < deadline =>
                    {
                        // Tasks are still exiting.
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(e) => return Err(io_err("removing", d)(e)),
                }
            }
            if let Some(group) = d.parent() {
                // Fails harmlessly (EBUSY / ENOTEMPTY) while other zones live there.
                let _ = std::fs::remove_dir(group);
                // On v2 that was the zone's bucket (see `v2`): then the group.
                let bucket = group.file_name().and_then(|n| n.to_str());
                if self.version == CgroupVersion::V2 && bucket.is_some_and(v2::is_bucket) {
                    if let Some(g) = group.parent() {
                        let _ = std::fs::remove_dir(g);
                    }
                }
            }
        }
        Ok(())
    }

    /// Reclaim the page cache still charged to an emptied memory cgroup before it is
    /// removed (see [`drop_charges`]).
    fn drop_charges(&self, dir: &Path) {
        drop_charges(self.version, dir);
    }

    /// Bytes of memory charged to the zone (v1 memory.usage_in_bytes, v2 memory.current).
    pub fn memory_bytes(&self) -> Option<u64> {
        let d = self.dir_with("memory")?;
        let file = match self.version {
            CgroupVersion::V1 => "memory.usage_in_bytes",
            CgroupVersion::V2 => "memory.current",
        };
        read_u64(&d.join(file))
    }

    /// CPU time used by the zone, in nanoseconds.
    pub fn cpu_ns(&self) -> Option<u64> {
        match self.version {
            CgroupVersion::V1 => read_u64(&self.dir_with("cpuacct")?.join("cpuacct.usage")),
            CgroupVersion::V2 => {
                let text = std::fs::read_to_string(self.dir_with("cpu")?.join("cpu.stat")).ok()?;
                text.lines()
                    .find_map(|l| l.strip_prefix("usage_usec "))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(|us| us * 1000)
            }
        }
    }

    /// Tasks in the zone now (pids.current).
    pub fn tasks(&self) -> Option<u64> {
        read_u64(&self.dir_with("pids")?.join("pids.current"))
    }

    /// OOM kills inside the zone (v1 memory.oom_control oom_kill, v2 memory.events oom_kill).
    pub fn oom_kills(&self) -> Option<u64> {
        let d = self.dir_with("memory")?;
        let file = match self.version {
            CgroupVersion::V1 => "memory.oom_control",
            CgroupVersion::V2 => "memory.events",
        };
        let text = std::fs::read_to_string(d.join(file)).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Read any control file of the zone, e.g. ("pids", "pids.max").
    pub fn read(&self, controller: &str, file: &str) -> Option<String> {
        std::fs::read_to_string(self.dir_with(controller)?.join(file))
            .ok()
            .map(|s| s.trim().to_string())
    }
}

/// Reclaim the page cache still charged to an emptied memory cgroup `dir` before it is
/// removed. Otherwise the removed cgroup lingers in the kernel as an offline
/// ("zombie") memcg until those pages are reclaimed, and each one keeps per-cgroup
/// state that grows with the host's superblocks: thousands of them made every new
/// zone cost more. Only page cache pins a removed memcg (its kernel objects are
/// reparented), so nothing is done when none is charged (or `dir` is not a memory
/// cgroup), and the reclaim asks for exactly that much:
///
/// - v1: `memory.limit_in_bytes` lowered to 0, which reclaims until a pass frees
///   nothing and then gives up (EBUSY, ignored), then set back to unlimited.
///   `memory.force_empty`, used before, retries 16 passes that free nothing while the
///   cgroup's kernel memory keeps its usage above 0, each pass walking the cgroup's
///   shrinker state (as large as the host's superblock high-water mark) at 13
///   priorities: 22 % of `halt --all`'s CPU on this VM (docs/scaling.md, "Sixth
///   pass").
/// - v2: `memory.reclaim` of the `file` bytes of memory.stat (an unsized request
///   retries the same futile passes).
///
/// Best effort: failures only mean a slower release.
pub(crate) fn drop_charges(version: CgroupVersion, dir: &Path) {
    let (key, file, value): (&str, &str, fn(u64) -> String) = match version {
        CgroupVersion::V1 => ("total_cache", "memory.limit_in_bytes", |_| "0".into()),
        CgroupVersion::V2 => ("file", "memory.reclaim", |n| n.to_string()),
    };
    let Ok(stat) = std::fs::read_to_string(dir.join("memory.stat")) else {
        return;
    };
    if let Some(&n) = parse_keyed(&stat).get(key).filter(|n| **n > 0) {
        let _ = write_file(dir, file, &value(n));
        if version == CgroupVersion::V1 {
            // Unlimited again at once: a directory left behind (a removal that fails,
            // a crash) is reused by the zone's next boot, which writes only the limits
            // its config sets.
            let _ = write_file(dir, file, "-1");
        }
    }
}

/// "key value" lines (memory.stat, cpu.stat) as a map.
pub fn parse_keyed(text: &str) -> std::collections::BTreeMap<&str, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k, v.trim().parse().ok()?))
        })
        .collect()
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// cgroup v1 cpu.shares ↔ v2 cpu.weight, as the kernel documentation and OCI runtimes
/// map them: weight = 1 + (shares - 2) × 9999 / 262142.
/// Controllers a zone with `limits` needs: memory and pids always, cpu and cpuset when
/// a limit of theirs is set (both drivers).
pub(crate) fn needed(limits: &Limits) -> Vec<&'static str> {
    let mut n = vec!["memory", "pids"];
    if limits.cpu_shares.is_some() || limits.cpu_weight.is_some() || limits.cpu_max.is_some() {
        n.push("cpu");
    }
    if limits.cpuset.is_some() {
        n.push("cpuset");
    }
    n
}

pub fn shares_to_weight(shares: u64) -> u64 {
    1 + (shares.clamp(2, 262_144) - 2) * 9999 / 262_142
}

/// The inverse of [`shares_to_weight`].
pub fn weight_to_shares(weight: u64) -> u64 {
    2 + (weight.clamp(1, 10_000) - 1) * 262_142 / 9999
}

/// CFS period used for cpu.max, in microseconds.
pub const CPU_PERIOD_US: u64 = 100_000;

/// The CFS quota for a cap of `cpus` CPUs over `period_us`.
pub fn cpu_quota_over(cpus: f64, period_us: u64) -> u64 {
    ((cpus * period_us as f64).round() as u64).max(1000)
}

/// The CFS (period, quota) of `limits`' cpu cap, if it has one.
pub fn cfs(limits: &Limits) -> Option<(u64, u64)> {
    let period = limits.cpu_period_us.unwrap_or(CPU_PERIOD_US);
    limits
        .cpu_max
        .map(|cpus| (period, cpu_quota_over(cpus, period)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memory cgroup beneath this process's own, removed at the end (also on panic).
    struct OwnMemcg(PathBuf);
    impl Drop for OwnMemcg {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    fn stat_of(dir: &Path, key: &str) -> u64 {
        let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap();
        parse_keyed(&stat)
            .get(key)
            .copied()
            .unwrap_or_else(|| panic!("no {key} in memory.stat: {stat}"))
    }

    /// A process in an emptied memory cgroup wrote 4 MiB of page cache, synced it and
    /// ended: `drop_charges` reclaims it (else the removed cgroup would linger as a
    /// zombie memcg) and leaves the limit unlimited; a cgroup with none charged is left
    /// alone.
    #[test]
    fn drop_charges_reclaims_the_page_cache_an_ended_process_left() {
        // The place `warren bench cri`'s probe makes its memory cgroups in.
        let (own, version) = crate::bench::cri::memcg::own_memory_dir(Path::new("/proc"))
            .unwrap_or_else(|e| {
                panic!("this test needs a memory cgroup it may create beneath its own: {e}")
            });
        let cg = OwnMemcg(own.join(format!("warren-drop-charges-{}", std::process::id())));
        std::fs::create_dir(&cg.0).unwrap();
        let key = if version == CgroupVersion::V1 {
            "total_cache"
        } else {
            "file"
        };
        let unlimited = || {
            version == CgroupVersion::V2
                || read_u64(&cg.0.join("memory.limit_in_bytes")).unwrap() > 1 << 40
        };
        // Nothing charged yet: nothing is written.
        drop_charges(version, &cg.0);
        assert!(unlimited(), "an empty cgroup's limit was lowered");
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("data");
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "read go; dd if=/dev/zero of={} bs=1M count=4 conv=fsync 2>/dev/null",
                file.display()
            ))
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::fs::write(cg.0.join("cgroup.procs"), child.id().to_string()).unwrap();
        {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        }
        assert!(child.wait().unwrap().success());
        let before = stat_of(&cg.0, key);
        assert!(before >= 4 << 20, "{key} {before} after writing 4 MiB");
        drop_charges(version, &cg.0);
        let after = stat_of(&cg.0, key);
        // Written back (conv=fsync): dirty pages would stay, as no memcg reclaim writes
        // them, whichever way it is asked.
        assert!(after < 256 << 10, "{key} {before} -> {after}");
        // A directory left behind would be reused by the next boot: never at limit 0.
        assert!(unlimited(), "the limit stayed lowered after the reclaim");
        std::fs::remove_dir(&cg.0).unwrap();
    }

    #[test]
    fn weight_conversions_match_the_kernel_defaults() {
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(262_144), 10_000);
        assert_eq!(weight_to_shares(1), 2);
        assert_eq!(weight_to_shares(10_000), 262_144);
        assert_eq!(cpu_quota_over(0.5, CPU_PERIOD_US), 50_000);
        assert_eq!(cpu_quota_over(2.0, CPU_PERIOD_US), 200_000);
    }
}
