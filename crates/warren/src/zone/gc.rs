//! `warren gc`: remove what interrupted commands left behind.
//!
//! - every temporary name warren makes, in every directory of the state root it makes
//!   them in (the root, `zones/`, `templates/`, each zone's and template's directory,
//!   `locks/`, `userns/`, `net/`, `swap/`), once the process named in it is gone:
//!   `.new-<name>-<pid>-<nanos>` (half-built zones and templates),
//!   `.del-<name>-<pid>-<nanos>` (half-deleted ones), `.disk-img-<pid>-<nanos>` and
//!   `.disk-stage-<pid>-<nanos>` (a `disk.max` image being made) and the temp files
//!   of atomic writes, `.<file>.tmp-<pid>` ([`TEMP_PREFIXES`], [`owner_pid`]); in a
//!   zone's `snapshots/` too (a snapshot being taken or deleted), and a zone's
//!   `.new-restore-*` (a restore's staging copy, or the old layer it replaced). Zone
//!   and template trees (a zone's `upper/` or `root/`) are never searched: a tenant
//!   could put any name there;
//! - stale runtime records (init gone, host rebooted, a boot that never finished, a
//!   torn file) and interrupted halts, repaired under the zone's lock;
//! - cgroups in this state root's group that no zone's runtime record claims;
//! - lock files of zones and templates that no longer exist;
//! - address leases of zones that are not running, veths they left on warren's
//!   bridges, and bridges warren created that no zone uses any more (`net::gc`);
//! - id ranges of zones that are gone, and every zone's recorded range re-recorded
//!   in `userns/` and checked against the others (`idmap::reconcile`).
//!
//! One damaged file never stops the sweep: whatever gc cannot read (a garbled lease
//! file or manifest, `userns/` replaced by a file, a lock path replaced by a
//! directory) is reported in [`GcReport::damaged`] with its remedy, and gc goes on.
//! Zone roots are never mounted on the host, so there are no mounts to collect.
//! Interrupted installs and uninstalls are left `incomplete` and reported: finishing
//! or discarding one is the operator's choice (`warren install` / `warren uninstall`).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::lifecycle::{cgroup_claim, CgroupClaim};
use super::{load, reconcile, Context};
use crate::error::{Error, IoContext, Result};
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
    /// What gc could not read or collect, each with its remedy; gc went on past it.
    pub damaged: Vec<String>,
    /// Zones busy with another command (their lock held), with the holder: not waited for.
    pub skipped: Vec<String>,
    /// Records put right (an id range re-recorded from the zone's own state).
    pub repaired: Vec<String>,
}

/// The prefixes of warren's temporary directory and file names that carry the
/// creating process's pid as their second-to-last `-` field.
pub const TEMP_PREFIXES: &[&str] = &[".new-", ".del-", ".disk-img-", ".disk-stage-"];

/// The pid embedded in a temporary name: `<prefix><name>-<pid>-<nanos>` for the
/// [`TEMP_PREFIXES`], or `.<file>.tmp-<pid>`.
pub fn owner_pid(file_name: &str) -> Option<i32> {
    if let Some((head, pid)) = file_name.rsplit_once(".tmp-") {
        return head.starts_with('.').then(|| pid.parse().ok()).flatten();
    }
    let rest = TEMP_PREFIXES
        .iter()
        .find_map(|p| file_name.strip_prefix(p))?;
    let mut parts = rest.rsplitn(3, '-');
    let nanos = parts.next()?;
    let pid = parts.next()?;
    u64::from_str_radix(nanos, 16).ok()?;
    pid.parse().ok()
}

fn pid_alive(ctx: &Context, pid: i32) -> bool {
    stats::proc_start_time(&ctx.host.proc, pid).is_some()
}

/// Remove a leftover directory (or file), deleting any btrfs subvolume in it first:
/// its own, its `root/`, and its snapshots' `root/` (a zone's `snapshots/<name>/root`,
/// or a snapshot's own `root/` when `path` is a snapshot).
pub(in crate::zone) fn remove_leftover(path: &Path) -> Result<()> {
    let snaps = fs::read_dir(super::snapshot::dir_of(path))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("root"));
    let subs: Vec<PathBuf> = snaps
        .chain([path.join("root"), path.to_path_buf()])
        .collect();
    for sub in subs {
        if warren_sys::fs::is_btrfs_subvol(&sub) {
            warren_sys::fs::btrfs_subvol_delete(&sub)
                .ctx(|| format!("deleting btrfs subvolume {}", sub.display()))?;
        }
    }
    remove_tree(path).ctx(|| format!("removing {}", path.display()))
}

/// Record a failure of one part of gc and go on.
fn note<T>(report: &mut GcReport, r: Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            report.damaged.push(e.to_string());
            None
        }
    }
}

fn sweep_temp(ctx: &Context, dir: &Path, report: &mut GcReport) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
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
        if note(report, remove_leftover(&path)).is_some() {
            report.removed.push(path.display().to_string());
        }
    }
}

/// Names of the template directories (valid names only), whatever their manifests say.
fn template_names(ctx: &Context) -> Vec<String> {
    let Ok(entries) = fs::read_dir(ctx.layout.templates()) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| names::problem(n).is_none())
        .collect();
    out.sort();
    out
}

/// Run gc over the whole state root. Fails only when it cannot run at all (not
/// root); everything else it cannot do is in [`GcReport::damaged`].
pub fn gc(ctx: &Context) -> Result<GcReport> {
    ctx.require_root()?;
    let mut report = GcReport::default();
    let layout = &ctx.layout;
    let root = layout.root();
    for dir in [
        root.to_path_buf(),
        layout.zones(),
        layout.templates(),
        layout.locks(),
        root.join("userns"),
        root.join("net"),
        root.join("swap"),
    ] {
        sweep_temp(ctx, &dir, &mut report);
    }
    let templates = template_names(ctx);
    for t in &templates {
        sweep_temp(ctx, &layout.template_dir(t), &mut report);
        match crate::storage::template::load(layout, t) {
            Ok(_) => {}
            Err(crate::error::Error::NoSuchTemplate(_)) => report.damaged.push(format!(
                "template '{t}': {} is missing (an interrupted or damaged template); remove it with 'warren template delete {t}' and create it again",
                layout.template_dir(t).join("template.toml").display()
            )),
            Err(e) => report.damaged.push(format!("template '{t}': {e}")),
        }
    }

    let zones = note(&mut report, super::names_in(layout)).unwrap_or_default();
    for name in &zones {
        sweep_temp(ctx, &layout.zone_dir(name), &mut report);
        // Half-made and half-deleted snapshots (`snapshots/.new-*`, `.del-*`).
        sweep_temp(
            ctx,
            &super::snapshot::dir_of(&layout.zone_dir(name)),
            &mut report,
        );
        if let Err(e) = gc_zone(ctx, name, &mut report) {
            report.damaged.push(format!("zone '{name}': {e}"));
        }
    }

    let live = |name: &str, addr| ctx.lease_is_live(name, addr);
    let net = crate::net::gc(&ctx.layout, &ctx.host, ctx.boot_id(), &live);
    if let Some(removed) = note(&mut report, net) {
        report.removed.extend(removed);
    }
    sweep_cgroups(ctx, &zones, &mut report);
    // Id ranges of zones that vanished (a delete killed between removing the zone and
    // freeing its range), and entries a zone's record no longer names (an install or
    // clone interrupted after its allocation, then made again). A zone whose lock is
    // held is being made right now (a clone allocates before its directory is renamed
    // into place): its entries stay.
    let held = |z: &str| {
        use crate::idmap::Held;
        let dir = layout.zone_dir(z);
        if names::problem(z).is_some() {
            return if dir.exists() { Held::Keep } else { Held::Gone };
        }
        match lock::try_exclusive_path(&layout.lock_file("zone", z)) {
            Ok(Some(_idle)) if !dir.exists() => Held::Gone,
            Ok(Some(_idle)) => match crate::state::load_lifecycle(&dir) {
                Ok(Some(lc)) => Held::Records(lc.idmap),
                _ => Held::Keep,
            },
            Ok(None) | Err(_) => Held::Keep,
        }
    };
    if let Some(freed) = note(&mut report, crate::idmap::gc(layout, &held)) {
        for f in freed {
            report.removed.push(match f.gone {
                true => format!(
                    "zone '{}': user namespace id range (the zone is gone)",
                    f.zone
                ),
                false => format!(
                    "zone '{}': user namespace id range {}-{} that its state.json does not name (left by an interrupted install or clone)",
                    f.zone,
                    f.range.base,
                    f.range.last()
                ),
            });
        }
    }
    let idmap = crate::idmap::reconcile(ctx, &zones);
    if let Some(found) = note(&mut report, idmap) {
        report.repaired.extend(found.rerecorded);
        report.damaged.extend(found.conflicts);
    }
    sweep_locks(ctx, &zones, &templates, &mut report);
    if let Some(bases) = note(&mut report, crate::idmap::running::sweep(&ctx.host)) {
        for b in bases {
            report.removed.push(format!(
                "stale claim of host id range {b} in {} (its zone no longer runs)",
                ctx.host.run.join("userns").display()
            ));
        }
    }
    Ok(report)
}

/// One zone's part: stale records, interrupted halts, incomplete installs. A zone
/// whose lock is held is busy with another command, which repairs it itself: gc never
/// waits for it (so gc, and the autoboot unit that runs it, cannot hang on a stuck
/// holder) and reports who holds it.
fn gc_zone(ctx: &Context, name: &str, report: &mut GcReport) -> Result<()> {
    let path = ctx.layout.lock_file("zone", name);
    let Some(_lock) = lock::try_exclusive_path(&path)? else {
        let holders = lock::holders(&ctx.host.proc, &path);
        report.skipped.push(format!(
            "zone '{name}': its lock is held by {}; run 'warren gc' again once that command is done",
            lock::describe(&holders)
        ));
        return Ok(());
    };
    let mut z = match load(ctx, name) {
        Ok(z) => z,
        Err(e) => {
            report.incomplete.push(format!("{name}: {e}"));
            // Whatever it runs cannot be told apart from a leftover: its cgroups are
            // left to the operator ('warren delete --force' stops them by name).
            return Ok(());
        }
    };
    let had_runtime = z.runtime.is_some() || z.torn_runtime.is_some();
    reconcile(ctx, &mut z)?;
    if had_runtime && z.runtime.is_none() {
        report.removed.push(format!(
            "zone '{name}': stale runtime record and its cgroups"
        ));
    }
    if z.state(ctx) == ZoneState::ShuttingDown {
        let halted = super::lifecycle::halt_locked(
            ctx,
            &mut z,
            Some(Duration::from_secs(5)),
            "its interrupted halt finished",
        )?;
        report
            .removed
            .push(format!("zone '{name}': finished an interrupted halt"));
        for w in halted.warnings {
            report.removed.push(format!("zone '{name}': {w}"));
        }
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
    Ok(())
}

/// Cgroups under this root's group that no live zone claims. A zone whose lock or
/// files cannot be read keeps its cgroups (they may be running; reported).
fn sweep_cgroups(ctx: &Context, zones: &[String], report: &mut GcReport) {
    let Some((driver, _)) = note(report, ctx.cgroups()) else {
        return;
    };
    for (_, group) in driver.parents() {
        // On v2 zones sit in buckets of the group (see cgroups::v2): swept first, so
        // the group can go after them.
        let buckets = sweep_zone_cgroups(ctx, &**driver, &group, zones, report);
        for bucket in buckets {
            sweep_zone_cgroups(ctx, &**driver, &bucket, zones, report);
            if fs::remove_dir(&bucket).is_ok() {
                report.removed.push(format!("cgroup {}", bucket.display()));
            }
        }
        if fs::remove_dir(&group).is_ok() {
            report.removed.push(format!("cgroup {}", group.display()));
        }
    }
}

/// Remove the zone cgroups in `dir` that no live zone claims; returns the v2 buckets
/// found there instead.
fn sweep_zone_cgroups(
    ctx: &Context,
    driver: &dyn crate::cgroups::CgroupDriver,
    dir: &Path,
    zones: &[String],
    report: &mut GcReport,
) -> Vec<PathBuf> {
    let mut buckets = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return buckets;
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
        // A zone's own directory goes only while its lock is held and it does not run
        // in it; a zone busy with another command (never waited for) or with
        // unreadable files (reported above) keeps it.
        let _held = if zones.contains(&name) {
            match cgroup_claim(ctx, &name) {
                CgroupClaim::Free(lock) => Some(lock),
                CgroupClaim::Running { lock, dirs } if !dirs.contains(&path) => Some(lock),
                CgroupClaim::Running { .. } | CgroupClaim::Unknown(_) => continue,
            }
        } else {
            None
        };
        let set = crate::cgroups::CgroupSet {
            version: driver.version(),
            dirs: vec![(String::new(), path.clone())],
        };
        let done = set
            .kill_all(Duration::from_secs(5))
            .and_then(|_| set.remove(Duration::from_secs(5)))
            .map_err(Error::from);
        if note(report, done).is_some() {
            report.removed.push(format!("cgroup {}", path.display()));
        }
    }
    buckets
}

/// Lock files of objects that no longer exist (taken first, so no holder is robbed).
fn sweep_locks(ctx: &Context, zones: &[String], templates: &[String], report: &mut GcReport) {
    let dir = ctx.layout.locks();
    let Ok(entries) = fs::read_dir(&dir) else {
        return;
    };
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
        match lock::try_exclusive_path(&path) {
            Ok(Some(_held)) => {
                let removed = fs::remove_file(&path).ctx(|| format!("removing {}", path.display()));
                if note(report, removed).is_some() {
                    report.removed.push(path.display().to_string());
                }
            }
            Ok(None) => {}
            Err(e) => report.damaged.push(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pids_from_temporary_names() {
        assert_eq!(owner_pid(".new-web-1-123-abc"), Some(123));
        assert_eq!(owner_pid(".del-a-b-c-77-1f"), Some(77));
        assert_eq!(owner_pid(".state.json.tmp-4242"), Some(4242));
        assert_eq!(owner_pid(".1073741824-web1.tmp-99"), Some(99));
        assert_eq!(owner_pid(".br0.json.tmp-12"), Some(12));
        assert_eq!(owner_pid(".disk-img-321-1a2b"), Some(321));
        assert_eq!(owner_pid(".disk-stage-322-ff"), Some(322));
        assert_eq!(owner_pid("web1"), None);
        assert_eq!(owner_pid(".new-x"), None);
        assert_eq!(owner_pid(".new-x-12-nothex"), None);
        assert_eq!(owner_pid("a.tmp-12"), None);
    }
}
