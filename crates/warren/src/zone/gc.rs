//! `warren gc`: remove what interrupted commands left behind.
//!
//! - `.new-*` (half-built) and `.del-*` (half-deleted) zone and template directories
//!   whose creating process is gone (the pid is part of the name);
//! - stray temp files of atomic writes (`.<file>.tmp-<pid>`) whose writer is gone;
//! - stale runtime records (init gone, host rebooted, a boot that never finished) and
//!   interrupted halts, repaired under the zone's lock;
//! - cgroups in this state root's group that no zone's runtime record claims;
//! - lock files of zones and templates that no longer exist;
//! - address leases of zones that are not running, veths they left on warren's
//!   bridges, and bridges warren created that no zone uses any more (`net::gc`).
//!
//! Zone roots are never mounted on the host, so there are no mounts to collect.
//! Interrupted installs and uninstalls are left `incomplete` and reported: finishing
//! or discarding one is the operator's choice (`warren install` / `warren uninstall`).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::{load, reconcile, Context};
use crate::error::{IoContext, Result};
use crate::fsutil::remove_tree;
use crate::state::ZoneState;
use crate::{lock, names, stats};

/// What gc did.
#[derive(Debug, Default, Serialize)]
pub struct GcReport {
    /// Paths and objects removed, one line each.
    pub removed: Vec<String>,
    /// Zones left incomplete, for the operator to finish or discard.
    pub incomplete: Vec<String>,
}

/// The pid embedded in a temporary name: `.new-<name>-<pid>-<nanos>`,
/// `.del-<name>-<pid>-<nanos>` or `.<file>.tmp-<pid>`.
pub fn owner_pid(file_name: &str) -> Option<i32> {
    if let Some((_, pid)) = file_name.rsplit_once(".tmp-") {
        return pid.parse().ok();
    }
    if file_name.starts_with(".new-") || file_name.starts_with(".del-") {
        let mut parts = file_name.rsplitn(3, '-');
        let _nanos = parts.next()?;
        return parts.next()?.parse().ok();
    }
    None
}

fn pid_alive(ctx: &Context, pid: i32) -> bool {
    stats::proc_start_time(&ctx.host.proc, pid).is_some()
}

/// Remove a leftover directory, deleting any btrfs subvolume in it first.
fn remove_leftover(path: &Path) -> Result<()> {
    for sub in [path.join("root"), path.to_path_buf()] {
        if warren_sys::fs::is_btrfs_subvol(&sub) {
            warren_sys::fs::btrfs_subvol_delete(&sub)
                .ctx(|| format!("deleting btrfs subvolume {}", sub.display()))?;
        }
    }
    remove_tree(path).ctx(|| format!("removing {}", path.display()))
}

fn sweep_temp(ctx: &Context, dir: &Path, report: &mut GcReport) -> Result<()> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner_pid(&name) else {
            continue;
        };
        if pid_alive(ctx, pid) {
            continue;
        }
        let path = e.path();
        remove_leftover(&path)?;
        report.removed.push(path.display().to_string());
    }
    Ok(())
}

/// Run gc over the whole state root.
pub fn gc(ctx: &Context) -> Result<GcReport> {
    ctx.require_root()?;
    let mut report = GcReport::default();
    let layout = &ctx.layout;
    sweep_temp(ctx, &layout.zones(), &mut report)?;
    sweep_temp(ctx, &layout.templates(), &mut report)?;
    for t in crate::storage::template::list(layout)? {
        sweep_temp(ctx, &layout.template_dir(&t.name), &mut report)?;
    }

    let zones = super::names_in(layout)?;
    for name in &zones {
        let dir = layout.zone_dir(name);
        sweep_temp(ctx, &dir, &mut report)?;
        let _lock = lock::exclusive(layout, "zone", name)?;
        let mut z = match load(ctx, name) {
            Ok(z) => z,
            Err(e) => {
                report.incomplete.push(format!("{name}: {e}"));
                continue;
            }
        };
        let had_runtime = z.runtime.is_some();
        reconcile(ctx, &mut z)?;
        if had_runtime && z.runtime.is_none() {
            report.removed.push(format!(
                "zone '{name}': stale runtime record and its cgroups"
            ));
        }
        if z.state(ctx) == ZoneState::ShuttingDown {
            super::lifecycle::halt_locked(ctx, &mut z, Some(Duration::from_secs(5)))?;
            report
                .removed
                .push(format!("zone '{name}': finished an interrupted halt"));
        }
        if z.lifecycle.state == ZoneState::Incomplete {
            let op = z
                .lifecycle
                .incomplete_op
                .as_deref()
                .unwrap_or("an operation");
            report.incomplete.push(format!(
                "{name}: {op} was interrupted; run 'warren {op} {name}' to finish it or 'warren uninstall {name}' to discard it"
            ));
        }
    }

    let live = |name: &str, addr| ctx.lease_is_live(name, addr);
    report.removed.extend(crate::net::gc(
        &ctx.layout,
        &ctx.host,
        ctx.boot_id(),
        &live,
    )?);
    sweep_cgroups(ctx, &zones, &mut report)?;
    // Id ranges of zones that vanished (a delete killed between removing the zone and
    // freeing its range). A zone whose lock is held is being made right now (a clone
    // allocates before its directory is renamed into place): it counts as existing.
    let exists = |z: &str| {
        layout.zone_dir(z).exists()
            || !matches!(
                lock::try_exclusive_path(&layout.lock_file("zone", z)),
                Ok(Some(_))
            )
    };
    for z in crate::idmap::gc(layout, &exists)? {
        report.removed.push(format!(
            "zone '{z}': user namespace id range (the zone is gone)"
        ));
    }
    sweep_locks(ctx, &zones, &mut report)?;
    Ok(report)
}

/// Cgroups under this root's group that no live zone claims.
fn sweep_cgroups(ctx: &Context, zones: &[String], report: &mut GcReport) -> Result<()> {
    let (driver, _) = ctx.cgroups()?;
    for (_, group) in driver.parents() {
        // On v2 zones sit in buckets of the group (see cgroups::v2): swept first, so
        // the group can go after them.
        let buckets = sweep_zone_cgroups(ctx, &**driver, &group, zones, report)?;
        for bucket in buckets {
            sweep_zone_cgroups(ctx, &**driver, &bucket, zones, report)?;
            if fs::remove_dir(&bucket).is_ok() {
                report.removed.push(format!("cgroup {}", bucket.display()));
            }
        }
        if fs::remove_dir(&group).is_ok() {
            report.removed.push(format!("cgroup {}", group.display()));
        }
    }
    Ok(())
}

/// Remove the zone cgroups in `dir` that no live zone claims; returns the v2 buckets
/// found there instead.
fn sweep_zone_cgroups(
    ctx: &Context,
    driver: &dyn crate::cgroups::CgroupDriver,
    dir: &Path,
    zones: &[String],
    report: &mut GcReport,
) -> Result<Vec<PathBuf>> {
    let mut buckets = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(buckets);
    };
    for e in entries.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if driver.version() == crate::cgroups::CgroupVersion::V2
            && crate::cgroups::v2::is_bucket(&name)
        {
            buckets.push(path);
            continue;
        }
        let claimed = zones.contains(&name) && {
            let _lock = lock::exclusive(&ctx.layout, "zone", &name)?;
            load(ctx, &name)
                .ok()
                .and_then(|z| z.runtime)
                .is_some_and(|rt| rt.cgroups.dirs.iter().any(|(_, d)| d == &path))
        };
        if claimed {
            continue;
        }
        let set = crate::cgroups::CgroupSet {
            version: driver.version(),
            dirs: vec![(String::new(), path.clone())],
        };
        set.kill_all(Duration::from_secs(5))?;
        set.remove(Duration::from_secs(5))?;
        report.removed.push(format!("cgroup {}", path.display()));
    }
    Ok(buckets)
}

/// Lock files of objects that no longer exist (taken first, so no holder is robbed).
fn sweep_locks(ctx: &Context, zones: &[String], report: &mut GcReport) -> Result<()> {
    let dir = ctx.layout.locks();
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(());
    };
    let templates: Vec<String> = crate::storage::template::list(&ctx.layout)?
        .into_iter()
        .map(|t| t.name)
        .collect();
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(stem) = file.strip_suffix(".lock") else {
            continue;
        };
        let Some((kind, name)) = stem.split_once('-') else {
            continue;
        };
        let exists = match kind {
            "zone" => zones.iter().any(|z| z == name),
            "template" => templates.iter().any(|t| t == name),
            _ => true,
        };
        if exists || names::problem(name).is_some() {
            continue;
        }
        let path: PathBuf = e.path();
        if let Some(_held) = lock::try_exclusive_path(&path)? {
            fs::remove_file(&path).ctx(|| format!("removing {}", path.display()))?;
            report.removed.push(path.display().to_string());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pids_from_temporary_names() {
        assert_eq!(owner_pid(".new-web-1-123-abc"), Some(123));
        assert_eq!(owner_pid(".del-a-b-c-77-1f"), Some(77));
        assert_eq!(owner_pid(".state.json.tmp-4242"), Some(4242));
        assert_eq!(owner_pid("web1"), None);
        assert_eq!(owner_pid(".new-x"), None);
    }
}
