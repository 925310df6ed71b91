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
//! The freezer itself is `cgroups::freeze`, shared with `warren suspend`: v2's
//! `cgroup.freeze`; on v1 the zone's freezer directory is made and joined at the first
//! freeze of a run (`CgroupDriver::join_freezer`) and recorded in the zone's
//! `runtime.json`, so halt kills and removes it with the others. A zone the kernel
//! already holds frozen (suspended, or an OCI-style pause) is copied as it is and left
//! frozen.

use super::{Context, Zone};
use crate::cgroups::freeze::FREEZE_TIMEOUT;
use crate::error::{Error, IoContext, Result};

/// Run `f` with the running zone `z` frozen; thaw it afterwards whatever `f` returns.
/// A zone without a live runtime record runs `f` as it is (nothing to freeze).
pub fn with_frozen<T>(ctx: &Context, z: &mut Zone, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let Some(rt) = z.runtime.as_mut() else {
        return f();
    };
    let name = z.name.clone();
    if !rt.cgroups.has_freezer() {
        let (driver, _) = ctx.cgroups()?;
        rt.cgroups = driver.join_freezer(&name, &rt.cgroups).map_err(|e| {
            Error::Unsupported(format!(
                "zone '{name}': cannot stop it while copying: {e}; or halt the zone first"
            ))
        })?;
        crate::state::save_runtime(&z.dir, rt)?;
    }
    let set = rt.cgroups.clone();
    let init = rt.init;
    // Already held frozen (suspended): copy it as it is, and leave it so.
    let thaw = !set.is_frozen();
    set.set_frozen(true, FREEZE_TIMEOUT)
        .map_err(|e| Error::Refused(format!("zone '{name}': freezing it for the copy: {e}")))?;
    let result = match init {
        // A disk.max zone's layer is an ext4 mounted only in the zone: its dirty
        // pages reach the image file only when written back, so write them back now
        // (the zone is frozen: nothing new is dirtied meanwhile).
        Some(i) if crate::quota::image(&z.dir).is_some() => {
            sync_zone_fs(ctx, &name, i).and_then(|()| f())
        }
        _ => f(),
    };
    let thawed = match thaw {
        true => set
            .set_frozen(false, FREEZE_TIMEOUT)
            .map_err(|e| Error::Refused(format!("zone '{name}': thawing it after the copy: {e}"))),
        false => Ok(()),
    };
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
