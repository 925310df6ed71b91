//! Freezing a running zone while its private layer is copied (snapshot, clone of a
//! running zone, export): every process of the zone is stopped by the kernel's
//! freezer, the copy is made, and the zone is thawed, also when the copy fails.
//!
//! What a copy made this way holds is *crash-consistent*: the files as they were at
//! one instant, as after a power cut. Data a program keeps in its own memory and has
//! not written is not in it; what it wrote (to the page cache) is, since the copy reads
//! through the same cache. Databases recover from it as from a crash. A `disk.max`
//! zone's layer is an ext4 image mounted only in the zone, whose dirty pages are not
//! yet in the image file: its filesystem is synced (`syncfs`) once frozen.
//!
//! cgroup v2: the zone's directory has `cgroup.freeze`. cgroup v1: zones are not made
//! in the freezer hierarchy (a cgroup per zone costs memory for every zone, and only a
//! snapshot needs it), so the first freeze of a run makes the zone's freezer directory
//! beneath warren's own (in its group, as every zone cgroup), moves the zone's
//! processes there (repeating until a pass finds none left behind, as a fork during
//! the move leaves the child where its parent was), and records it in the zone's
//! `runtime.json`, so halt kills and removes it with the others.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Context, Zone};
use crate::cgroups::{CgroupSet, CgroupVersion};
use crate::error::{Error, IoContext, Result};

/// How long the kernel may take to stop (or restart) every task.
const SETTLE: Duration = Duration::from_secs(10);

/// Run `f` with the running zone `z` frozen; thaw it afterwards whatever `f` returns.
/// A zone without a live runtime record runs `f` as it is (nothing to freeze).
pub fn with_frozen<T>(ctx: &Context, z: &mut Zone, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let Some(rt) = z.runtime.as_mut() else {
        return f();
    };
    if rt.cgroups.version == CgroupVersion::V1 && rt.cgroups.dir_with("freezer").is_none() {
        rt.cgroups = join_v1_freezer(ctx, &z.name, &rt.cgroups)?;
        crate::state::save_runtime(&z.dir, rt)?;
    }
    let set = rt.cgroups.clone();
    let init = rt.init;
    set_frozen(&z.name, &set, true)?;
    let result = match init {
        // A disk.max zone's layer is an ext4 mounted only in the zone: its dirty
        // pages reach the image file only when written back, so write them back now
        // (the zone is frozen: nothing new is dirtied meanwhile).
        Some(i) if crate::quota::image(&z.dir).is_some() => {
            sync_zone_fs(ctx, &z.name, i).and_then(|()| f())
        }
        _ => f(),
    };
    let thawed = set_frozen(&z.name, &set, false);
    match (result, thawed) {
        (Ok(v), Ok(())) => Ok(v),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), thawed) => Err(e.with_cleanup(thawed.err())),
    }
}

/// syncfs on the running zone's root (its overlay: overlayfs syncs its upper layer's
/// filesystem, the zone's disk.max ext4), opened through its init's
/// `/proc/<pid>/root`, checked to be the recorded init (its start time).
fn sync_zone_fs(ctx: &Context, zone: &str, init: crate::state::InitId) -> Result<()> {
    let root = ctx.host.proc.join(init.pid.to_string()).join("root");
    let f =
        std::fs::File::open(&root).ctx(|| format!("zone '{zone}': opening {}", root.display()))?;
    if crate::stats::proc_start_time(&ctx.host.proc, init.pid) != Some(init.start_time) {
        return Err(Error::Refused(format!(
            "zone '{zone}': its init {} ended while being synced; retry (the zone has stopped)",
            init.pid
        )));
    }
    warren_sys::fs::syncfs(&f)
        .ctx(|| format!("zone '{zone}': syncing its filesystem before the copy"))
}

/// The directory, file and the frozen/thawed values of `set`'s freezer.
fn freezer(set: &CgroupSet) -> Option<(PathBuf, &'static str, &'static str, &'static str)> {
    match set.version {
        CgroupVersion::V1 => set
            .dir_with("freezer")
            .map(|d| (d.to_path_buf(), "freezer.state", "FROZEN", "THAWED")),
        CgroupVersion::V2 => set
            .dirs
            .first()
            .map(|(_, d)| (d.clone(), "cgroup.freeze", "1", "0")),
    }
}

/// Whether the kernel reports the freezer of `dir` settled in the wanted state.
fn settled(version: CgroupVersion, dir: &Path, want_frozen: bool) -> bool {
    match version {
        CgroupVersion::V1 => std::fs::read_to_string(dir.join("freezer.state"))
            .is_ok_and(|s| s.trim() == if want_frozen { "FROZEN" } else { "THAWED" }),
        CgroupVersion::V2 => std::fs::read_to_string(dir.join("cgroup.events")).is_ok_and(|s| {
            s.lines()
                .any(|l| l == if want_frozen { "frozen 1" } else { "frozen 0" })
        }),
    }
}

fn set_frozen(zone: &str, set: &CgroupSet, on: bool) -> Result<()> {
    let (dir, file, frozen, thawed) = freezer(set).ok_or_else(|| {
        Error::Unsupported(format!(
            "zone '{zone}': it has no freezer cgroup to stop it while copying; mount the v1 freezer hierarchy under /sys/fs/cgroup, or halt the zone first"
        ))
    })?;
    let want = if on { frozen } else { thawed };
    let path = dir.join(file);
    let deadline = Instant::now() + SETTLE;
    loop {
        std::fs::write(&path, want)
            .ctx(|| format!("zone '{zone}': writing {want} to {}", path.display()))?;
        if settled(set.version, &dir, on) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Refused(format!(
                "zone '{zone}': {} did not settle to {want} in {}s; a process may be stuck in the kernel (D state): halt the zone and retry",
                path.display(),
                SETTLE.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// cgroup v1: make the zone's directory in the freezer hierarchy and move its
/// processes there; the set extended with it.
fn join_v1_freezer(ctx: &Context, zone: &str, set: &CgroupSet) -> Result<CgroupSet> {
    let (driver, _) = ctx.cgroups()?;
    let (ctrls, parent) = driver
        .parents()
        .into_iter()
        .find(|(c, _)| c.split(',').any(|x| x == "freezer"))
        .ok_or_else(|| {
            Error::Unsupported(format!(
                "zone '{zone}': cgroup v1 without a freezer hierarchy cannot stop the zone while copying; mount it (mount -t cgroup -o freezer cgroup /sys/fs/cgroup/freezer) or halt the zone first"
            ))
        })?;
    let dir = parent.join(zone);
    crate::cgroups::make_group_and_zone(&parent, &dir, || Ok(()))?;
    let mut out = set.clone();
    out.dirs.push((ctrls, dir.clone()));
    let procs = dir.join("cgroup.procs");
    for _ in 0..100 {
        let moved =
            std::fs::read_to_string(&procs).ctx(|| format!("reading {}", procs.display()))?;
        let moved: Vec<i32> = moved
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        let left: Vec<i32> = set
            .pids()?
            .into_iter()
            .filter(|p| !moved.contains(p))
            .collect();
        if left.is_empty() {
            return Ok(out);
        }
        for pid in left {
            match std::fs::write(&procs, pid.to_string()) {
                // Exited meanwhile: nothing to move.
                Err(e) if e.raw_os_error() == Some(warren_sys::libc::ESRCH) => {}
                r => r.ctx(|| format!("zone '{zone}': moving pid {pid} to {}", dir.display()))?,
            }
        }
    }
    Err(Error::Refused(format!(
        "zone '{zone}': its processes kept forking while being moved to {}; retry, or halt the zone first",
        dir.display()
    )))
}
