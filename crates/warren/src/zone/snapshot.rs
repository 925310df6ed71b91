//! Snapshots: a named copy of a zone's private layer, kept beside it, to restore
//! later, clone from, or export.
//!
//! ```text
//! <zone>/snapshots/<name>/snapshot.json     what it is (SnapshotMeta)
//! <zone>/snapshots/<name>/upper/, work/     overlay: the private layer, copied
//! <zone>/snapshots/<name>/root              btrfs: a snapshot of the zone's subvolume
//!                                           copy: a copy of the zone's root
//! <zone>/snapshots/<name>/disk.img          disk.max: the capped image, copied
//! ```
//!
//! Every copy is the backend's own clone of the layer (`Backend::clone_zone`):
//! reflinked where the filesystem has it (FICLONE), else a hard-link-preserving,
//! sparse copy; a btrfs subvolume snapshot on btrfs. All of it runs through the
//! descriptor-relative tree operations (`treeops`): nothing a tenant put in its layer
//! (a symlink, a deep tree) makes warren leave it. The template is shared, not
//! copied: a snapshot records its name, and the template cannot be deleted while
//! the zone uses it.
//!
//! A running zone is frozen while its layer is copied (`freeze`), so the snapshot is
//! crash-consistent. A snapshot is built under `snapshots/.new-*` and renamed into
//! place; a restore builds the new layer in `<zone>/.new-restore-*` and swaps it with
//! the zone's in one `renameat2(RENAME_EXCHANGE)`, so the zone has either its old
//! layer or the snapshot's, never neither; the old one is then removed. What an
//! interrupted command leaves (`.new-*`, `.del-*`) is removed by `warren gc`.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::lifecycle::{load_locked, zone_lock};
use super::{load, Context, Zone};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{atomic_write, disk_usage, mkdir_mode, remove_tree, sync_dir, unique_suffix};
use crate::idmap::IdRange;
use crate::state::{self, ZoneState};
use crate::storage::{backend, BackendKind};
use crate::{fault, names};

const META: &str = "snapshot.json";

/// `<zone>/snapshots`.
pub fn dir_of(zone_dir: &Path) -> PathBuf {
    zone_dir.join("snapshots")
}

/// `snapshots/<name>/snapshot.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotMeta {
    pub name: String,
    pub zone: String,
    pub created_ms: u64,
    pub backend: BackendKind,
    pub template: String,
    /// Taken while the zone ran (frozen for the copy: crash-consistent).
    pub taken_running: bool,
    /// The id range that owns the layer (a user-namespaced overlay zone's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idmap: Option<IdRange>,
}

/// One row of `snapshot list`; its JSON form is the API object.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotInfo {
    #[serde(flatten)]
    pub meta: SnapshotMeta,
    /// Disk allocated to it (st_blocks; on btrfs, extents shared with the zone count).
    pub size_bytes: u64,
}

/// The default name of a snapshot: the UTC time, `YYYYMMDD-HHMMSS`.
fn default_name() -> String {
    let secs = super::now_ms() / 1000;
    let (y, mo, d, h, mi, s) = crate::clock::civil(secs);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

fn check_name(zone: &str, name: &str) -> Result<()> {
    match names::problem(name) {
        None => Ok(()),
        Some(reason) => Err(Error::Invalid(format!(
            "zone '{zone}': snapshot name {name:?} is invalid: {reason}; use 1 to 63 characters of a-z, 0-9 and '-', starting with a letter or digit"
        ))),
    }
}

fn backend_of(z: &Zone) -> Result<BackendKind> {
    z.lifecycle.backend.ok_or_else(|| Error::Corrupt {
        path: state::state_path(&z.dir),
        message: "an installed zone without a storage backend".into(),
    })
}

/// Copy the private layer of the zone (or snapshot) directory `from` into the new
/// directory `to`: the backend's clone, and the `disk.max` image if there is one.
pub(crate) fn copy_private(kind: BackendKind, from: &Path, to: &Path) -> Result<()> {
    backend(kind).clone_zone(from, to, None)?;
    if crate::quota::image(from).is_some() {
        crate::quota::copy_image(from, to)?;
    }
    Ok(())
}

/// Remove a directory holding a private layer (a snapshot, a restore's staging).
pub(crate) fn remove_layer(kind: BackendKind, dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    backend(kind).uninstall(dir)?;
    crate::quota::remove_image(dir)?;
    remove_tree(dir).ctx(|| format!("removing {}", dir.display()))
}

/// Remove every snapshot of the zone in `zone_dir` (uninstall: they are copies of
/// the layer being removed).
pub(crate) fn remove_all(kind: BackendKind, zone_dir: &Path) -> Result<()> {
    let dir = dir_of(zone_dir);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(());
    };
    for e in entries {
        let e = e.ctx(|| format!("reading {}", dir.display()))?;
        remove_layer(kind, &e.path())?;
    }
    remove_tree(&dir).ctx(|| format!("removing {}", dir.display()))
}

/// The directory of zone `z`'s snapshot `name`, which must exist.
pub(crate) fn existing(z: &Zone, name: &str) -> Result<(PathBuf, SnapshotMeta)> {
    check_name(&z.name, name)?;
    let dir = dir_of(&z.dir).join(name);
    if !dir.is_dir() {
        return Err(Error::NoSuchSnapshot {
            zone: z.name.clone(),
            name: name.into(),
        });
    }
    let meta = read_meta(&dir)?;
    Ok((dir, meta))
}

fn read_meta(dir: &Path) -> Result<SnapshotMeta> {
    let path = dir.join(META);
    let bytes = crate::fsutil::read_bounded(&path, crate::fsutil::MAX_SMALL_FILE)
        .ctx(|| format!("reading {}", path.display()))?;
    state::parse_json(&path, &bytes)
}

/// `warren snapshot create ZONE [NAME]`: of an installed or running zone.
pub fn create(ctx: &Context, zone: &str, name: Option<&str>) -> Result<SnapshotInfo> {
    ctx.require_root()?;
    let name = name.map(str::to_string).unwrap_or_else(default_name);
    check_name(zone, &name)?;
    let _lock = zone_lock(ctx, zone)?;
    let mut z = load_locked(ctx, zone)?;
    let st = z.state(ctx);
    if !matches!(st, ZoneState::Installed | ZoneState::Running) {
        return Err(Error::WrongState {
            zone: zone.into(),
            state: st,
            remedy: "a snapshot needs it installed or running (install it first, or wait for its boot or halt to finish)".into(),
        });
    }
    let kind = backend_of(&z)?;
    let snaps = dir_of(&z.dir);
    if !snaps.is_dir() {
        mkdir_mode(&snaps, 0o700).ctx(|| format!("creating {}", snaps.display()))?;
    }
    let dst = snaps.join(&name);
    if dst.exists() {
        return Err(Error::SnapshotExists {
            zone: zone.into(),
            name,
        });
    }
    let tmp = snaps.join(format!(".new-{name}-{}", unique_suffix()));
    let meta = SnapshotMeta {
        name: name.clone(),
        zone: zone.into(),
        created_ms: super::now_ms(),
        backend: kind,
        template: z.config.template.clone(),
        taken_running: st == ZoneState::Running,
        idmap: z.lifecycle.idmap,
    };
    let zone_dir = z.dir.clone();
    let result = (|| {
        mkdir_mode(&tmp, 0o700).ctx(|| format!("creating {}", tmp.display()))?;
        super::freeze::with_frozen(ctx, &mut z, || copy_private(kind, &zone_dir, &tmp))?;
        fault::point("snapshot.after-copy");
        let text = serde_json::to_vec_pretty(&meta).expect("meta serialises");
        atomic_write(&tmp.join(META), &text, false)
            .ctx(|| format!("writing {}", tmp.join(META).display()))?;
        // The copy and its record reach the disk together before the name appears.
        super::archive_tree::sync_tree(&tmp).ctx(|| format!("syncing {}", tmp.display()))?;
        fs::rename(&tmp, &dst)
            .ctx(|| format!("renaming {} to {}", tmp.display(), dst.display()))?;
        sync_dir(&snaps).ctx(|| format!("syncing {}", snaps.display()))
    })();
    if let Err(e) = result {
        return Err(e.with_cleanup(remove_layer(kind, &tmp).err()));
    }
    journal(ctx, "snapshot-created", zone, &name);
    Ok(SnapshotInfo {
        size_bytes: disk_usage(&dst).unwrap_or(0),
        meta,
    })
}

/// `warren snapshot list [ZONE]`: the snapshots of one zone or of all, by zone and
/// time. A snapshot whose record cannot be read is left out of all-zone lists and an
/// error for one zone's.
pub fn list(ctx: &Context, zone: Option<&str>) -> Result<Vec<SnapshotInfo>> {
    let zones = match zone {
        Some(z) => {
            names::zone(z)?;
            if !ctx.layout.zone_dir(z).is_dir() {
                return Err(Error::NoSuchZone(z.into()));
            }
            vec![z.to_string()]
        }
        None => super::names_in(&ctx.layout)?,
    };
    let mut out = Vec::new();
    for z in zones {
        let dir = dir_of(&ctx.layout.zone_dir(&z));
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if names::problem(&n).is_some() {
                continue;
            }
            match read_meta(&e.path()) {
                Ok(meta) => out.push(SnapshotInfo {
                    size_bytes: disk_usage(&e.path()).unwrap_or(0),
                    meta,
                }),
                Err(err) if zone.is_some() => return Err(err),
                Err(_) => {}
            }
        }
    }
    out.sort_by(|a, b| {
        (&a.meta.zone, a.meta.created_ms, &a.meta.name).cmp(&(
            &b.meta.zone,
            b.meta.created_ms,
            &b.meta.name,
        ))
    });
    Ok(out)
}

/// `warren snapshot restore ZONE NAME`: the halted zone's layer becomes a copy of the
/// snapshot's (which stays, to restore again).
pub fn restore(ctx: &Context, zone: &str, name: &str) -> Result<()> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, zone)?;
    let z = load_locked(ctx, zone)?;
    let st = z.state(ctx);
    if st != ZoneState::Installed {
        return Err(Error::WrongState {
            zone: zone.into(),
            state: st,
            remedy: format!(
                "a restore needs it installed and halted; run 'warren halt {zone}' first"
            ),
        });
    }
    let kind = backend_of(&z)?;
    let (snap, meta) = existing(&z, name)?;
    if meta.backend != kind {
        return Err(Error::Invalid(format!(
            "zone '{zone}': snapshot '{name}' was taken on the {} backend but the zone is on {}; clone it instead ('warren clone --snapshot {name} {zone} NEW')",
            meta.backend, kind
        )));
    }
    let has_image = crate::quota::image(&z.dir).is_some();
    if has_image != crate::quota::image(&snap).is_some() {
        return Err(Error::Invalid(format!(
            "zone '{zone}': snapshot '{name}' was taken {} disk.max and the zone is {} it now; set disk.max back as it was, then restore",
            if has_image { "without" } else { "with" },
            if has_image { "with" } else { "without" },
        )));
    }
    let stage = z.dir.join(format!(".new-restore-{}", unique_suffix()));
    let result: Result<()> = (|| {
        mkdir_mode(&stage, 0o700).ctx(|| format!("creating {}", stage.display()))?;
        copy_private(kind, &snap, &stage)?;
        super::archive_tree::sync_tree(&stage).ctx(|| format!("syncing {}", stage.display()))?;
        fault::point("restore.after-copy");
        // The data first: from here on the zone holds the snapshot's layer.
        let items: &[&str] = match (has_image, kind) {
            (true, _) => &["disk.img", "upper", "work"],
            (false, BackendKind::Overlay) => &["upper", "work"],
            (false, BackendKind::Btrfs | BackendKind::Copy) => &["root"],
        };
        for item in items {
            let (new, cur) = (stage.join(item), z.dir.join(item));
            if !new.exists() {
                continue;
            }
            let swapped = if cur.symlink_metadata().is_ok() {
                warren_sys::fs::rename_exchange(&new, &cur)
            } else {
                fs::rename(&new, &cur)
            };
            swapped.ctx(|| {
                format!(
                    "zone '{zone}': putting {} in place of {}",
                    new.display(),
                    cur.display()
                )
            })?;
        }
        sync_dir(&z.dir).ctx(|| format!("syncing {}", z.dir.display()))?;
        fault::point("restore.after-swap");
        Ok(())
    })();
    // The staging directory now holds the old layer (or a partial copy): remove it.
    let cleanup = remove_layer(kind, &stage);
    match result {
        Err(e) => return Err(e.with_cleanup(cleanup.err())),
        Ok(()) => cleanup?,
    }
    journal(ctx, "snapshot-restored", zone, name);
    Ok(())
}

/// `warren snapshot delete ZONE NAME`.
pub fn delete(ctx: &Context, zone: &str, name: &str) -> Result<()> {
    ctx.require_root()?;
    let _lock = zone_lock(ctx, zone)?;
    let z = load(ctx, zone)?;
    let (snap, meta) = existing(&z, name)?;
    let trash = dir_of(&z.dir).join(format!(".del-{name}-{}", unique_suffix()));
    fs::rename(&snap, &trash).ctx(|| format!("renaming {}", snap.display()))?;
    fault::point("snapshot.delete-after-rename");
    remove_layer(meta.backend, &trash)?;
    journal(ctx, "snapshot-deleted", zone, name);
    Ok(())
}

fn journal(ctx: &Context, action: &str, zone: &str, name: &str) {
    crate::journal::note(
        &ctx.layout,
        crate::journal::EventType::Lifecycle,
        action,
        zone,
        serde_json::json!({ "snapshot": name }),
    );
}
