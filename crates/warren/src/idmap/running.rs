//! The host-wide registry of running zones' id ranges, shared by every state root:
//! `<run>/userns/<base>` (`/run/warren`, a tmpfs: empty after a reboot, when no zone
//! runs), one small file per running range naming its state root, zone and the process
//! that claimed it (warren, while it boots the zone).
//!
//! A state root's own index (`<root>/userns/`) keeps its zones apart; this keeps the
//! *running* zones of all roots apart: a boot claims its range here first, under one
//! host-wide lock, and is refused while a live zone of another root (or another zone
//! of this one) holds it; halt releases it. A claim is live while the warren that made
//! it runs (a boot in progress) or while the zone's own runtime record names a live
//! init (the zone runs: that record is the truth, so the claim needs no update after
//! the boot); otherwise it is stale and taken over, so a crash never blocks a range.
//! Cost: one lock, one small read and one small write per boot (in place: every
//! reader holds the lock too), one unlink per halt: O(1), on a tmpfs.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::IdRange;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{read_text_bounded, MAX_SMALL_FILE};
use crate::layout::{HostPaths, Layout};

/// One claim: who runs a range, and the process whose life is the claim's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub root: PathBuf,
    pub zone: String,
    pub pid: i32,
    pub start_time: u64,
}

fn dir(host: &HostPaths) -> PathBuf {
    host.run.join("userns")
}

fn entry(host: &HostPaths, r: IdRange) -> PathBuf {
    dir(host).join(r.base.to_string())
}

/// The registry's lock (flock on `<run>/userns/.lock`), held while a claim is
/// checked and written.
fn lock(host: &HostPaths) -> Result<fs::File> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let d = dir(host);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&d)
        .ctx(|| format!("creating {}", d.display()))?;
    let path = d.join(".lock");
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(warren_sys::libc::O_NOFOLLOW)
        .open(&path)
        .ctx(|| format!("opening {}", path.display()))?;
    f.lock().ctx(|| format!("locking {}", path.display()))?;
    Ok(f)
}

/// Whether `c` is live: the warren that made it still runs (a boot in progress), or
/// the zone's own runtime record names a live init (the zone runs).
fn live(host: &HostPaths, c: &Claim) -> bool {
    let alive =
        |pid: i32, start: u64| crate::stats::proc_start_time(&host.proc, pid) == Some(start);
    if alive(c.pid, c.start_time) {
        return true;
    }
    let record = c.root.join("zones").join(&c.zone);
    matches!(
        crate::state::load_runtime(&record),
        Ok(Some(rt)) if rt.init.is_some_and(|i| alive(i.pid, i.start_time))
    )
}

fn read(path: &Path) -> Option<Claim> {
    let text = read_text_bounded(path, MAX_SMALL_FILE).ok()?;
    serde_json::from_str(&text).ok()
}

/// Claim range `r` for `zone` of `layout`'s root. Refused while a live claim of
/// another zone holds it.
pub fn claim(host: &HostPaths, layout: &Layout, zone: &str, r: IdRange) -> Result<()> {
    let _lock = lock(host)?;
    let path = entry(host, r);
    let root = layout.root().to_path_buf();
    if let Some(other) = read(&path) {
        let same = other.root == root && other.zone == zone;
        if !same && live(host, &other) {
            return Err(Error::Refused(format!(
                "zone '{zone}': its host id range {}-{} is in use by running zone '{}' of state root {}; two zones must never share host ids: halt that zone first, or give '{zone}' a free range ('warren config set {zone} userns-base=N', or unset userns-base to have one allocated)",
                r.base,
                r.last(),
                other.zone,
                other.root.display()
            )));
        }
    }
    let me = std::process::id() as i32;
    let start_time = crate::stats::proc_start_time(&host.proc, me).unwrap_or(0);
    write(
        &path,
        &Claim {
            root,
            zone: zone.to_string(),
            pid: me,
            start_time,
        },
    )
}

/// The bases claimed now (names of the registry; a stale claim is skipped too, which
/// costs one range, not a correctness).
pub fn claimed(host: &HostPaths) -> Vec<u32> {
    fs::read_dir(dir(host))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a claim names `base` now (a stat; stale or live). The registry is keyed by
/// base, as [`claim`]'s check is: an allocation checks its aligned candidate here
/// instead of listing every claim on the host ([`super::allocate`]).
pub fn is_claimed(host: &HostPaths, base: u32) -> bool {
    entry(host, IdRange::new(base)).symlink_metadata().is_ok()
}

/// Remove every stale claim (its warren gone and its zone not running), whichever
/// state root made it: a stale claim blocks nothing, but would stay on /run until
/// reboot. Returns the bases removed.
pub fn sweep(host: &HostPaths) -> Result<Vec<u32>> {
    if !dir(host).is_dir() {
        return Ok(Vec::new());
    }
    let _lock = lock(host)?;
    let mut removed = Vec::new();
    for base in claimed(host) {
        let path = dir(host).join(base.to_string());
        let stale = read(&path).is_none_or(|c| !live(host, &c));
        if stale && fs::remove_file(&path).is_ok() {
            removed.push(base);
        }
    }
    Ok(removed)
}

/// Drop the zone's claim (halt, a failed boot). Only its own: a claim another zone
/// took over meanwhile stays.
pub fn release(host: &HostPaths, layout: &Layout, zone: &str, r: IdRange) -> Result<()> {
    let _lock = lock(host)?;
    let path = entry(host, r);
    match read(&path) {
        Some(c) if c.root == layout.root() && c.zone == zone => {
            fs::remove_file(&path).ctx(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Written in place: readers hold the registry's lock too, so none sees a partial
/// file; a torn one (a crash mid-write) reads as no claim. A tmpfs: nothing to fsync
/// (nothing runs after a reboot).
fn write(path: &Path, c: &Claim) -> Result<()> {
    let text = serde_json::to_string(c).expect("a claim serializes");
    fs::write(path, text).ctx(|| format!("writing {}", path.display()))
}
