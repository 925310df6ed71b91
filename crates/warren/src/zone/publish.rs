//! `warren template create NAME --from-zone ZONE`: a halted zone's merged root (its
//! template with its private layer on top) becomes a new template, which keeps the
//! source template's kind and host binds (a zone of the `host` template publishes a
//! template that still shares the host's read-only /usr).
//!
//! - btrfs: a snapshot of the zone's root subvolume (copy-on-write, instant);
//! - copy: a copy of the zone's root (reflinked where the filesystem can);
//! - overlay: the zone's layer and its template mounted as a read-only overlay
//!   (`lowerdir=upper:template`, so whiteouts and opaque directories are honoured by
//!   the kernel) in a private mount namespace of this process, never on the host,
//!   and copied from there. Owners move from the zone's id range back to host ids.
//!
//! Built in `templates/.new-*` and renamed into place, as every template.

use std::fs;
use std::path::Path;

use super::lifecycle::{load_locked, zone_lock};
use super::Context;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{atomic_write, mkdir_mode, sync_dir, unique_suffix};
use crate::idmap::IdRange;
use crate::state::ZoneState;
use crate::storage::template::{self, Manifest};
use crate::storage::BackendKind;
use crate::treeops::{copy_tree, Shift};
use crate::{lock, names};
use warren_sys::libc;

/// Make template `name` from the halted zone `zone`.
pub fn publish(ctx: &Context, name: &str, zone: &str) -> Result<Manifest> {
    ctx.require_root()?;
    names::template(name)?;
    let _zlock = zone_lock(ctx, zone)?;
    let z = load_locked(ctx, zone)?;
    let st = z.state(ctx);
    if st != ZoneState::Installed {
        return Err(Error::WrongState {
            zone: zone.into(),
            state: st,
            remedy: format!("publishing needs it installed and halted; run 'warren halt {zone}' first (or snapshot it and clone the snapshot)"),
        });
    }
    if crate::quota::image(&z.dir).is_some() {
        return Err(Error::Unsupported(format!(
            "zone '{zone}': its private layer is in a disk.max image, which publish does not read; publish a zone without disk.max"
        )));
    }
    let kind = z.lifecycle.backend.ok_or_else(|| Error::Corrupt {
        path: crate::state::state_path(&z.dir),
        message: "an installed zone without a storage backend".into(),
    })?;
    let _slock = lock::shared(&ctx.layout, "template", &z.config.template)?;
    let base = template::load(&ctx.layout, &z.config.template)?;
    let _tlock = lock::exclusive(&ctx.layout, "template", name)?;
    let final_dir = ctx.layout.template_dir(name);
    if final_dir.exists() {
        return Err(Error::TemplateExists(name.into()));
    }
    let templates = ctx.layout.templates();
    let tmp = templates.join(format!(".new-{name}-{}", unique_suffix()));
    let troot = template::root_of(&ctx.layout, &z.config.template);
    let result = (|| {
        mkdir_mode(&tmp, 0o755).ctx(|| format!("creating {}", tmp.display()))?;
        let root = tmp.join("root");
        match kind {
            BackendKind::Btrfs => {
                let src = z.dir.join("root");
                warren_sys::fs::btrfs_snapshot(&src, &root)
                    .ctx(|| format!("snapshotting {} to {}", src.display(), root.display()))?
            }
            BackendKind::Copy => {
                let src = z.dir.join("root");
                copy_tree(&src, &root, None)
                    .ctx(|| format!("copying {} to {}", src.display(), root.display()))?
            }
            BackendKind::Overlay => {
                let upper = z.dir.join("upper");
                let shift = z.lifecycle.idmap.map(|r| Shift {
                    from: r,
                    to: IdRange::new(0),
                });
                merged_copy(zone, &upper, &troot, &tmp.join("merged"), &root, shift)?
            }
        }
        let manifest = Manifest {
            name: name.into(),
            kind: base.kind,
            source: Some(format!("zone {zone} (template {})", base.name)),
            backend: base.backend,
            created_ms: super::now_ms(),
            binds: base.binds.clone(),
            // An image template's defaults (its command, env, user) carry over.
            image: base.image.clone(),
        };
        let text = toml::to_string(&manifest).expect("manifest serialises");
        atomic_write(&tmp.join("template.toml"), text.as_bytes(), true)
            .ctx(|| format!("writing {}/template.toml", tmp.display()))?;
        fs::rename(&tmp, &final_dir)
            .ctx(|| format!("renaming {} to {}", tmp.display(), final_dir.display()))?;
        sync_dir(&templates).ctx(|| format!("syncing {}", templates.display()))?;
        Ok(manifest)
    })();
    if result.is_err() && tmp.exists() {
        let cleanup = super::gc::remove_leftover(&tmp);
        return result.map_err(|e: Error| e.with_cleanup(cleanup.err()));
    }
    crate::journal::note(
        &ctx.layout,
        crate::journal::EventType::Lifecycle,
        "published",
        zone,
        serde_json::json!({ "template": name }),
    );
    result
}

/// Mount `upper` over `lower` read-only at `at` in a private mount namespace of this
/// process and copy the merged tree to `dst`.
fn merged_copy(
    zone: &str,
    upper: &Path,
    lower: &Path,
    at: &Path,
    dst: &Path,
    shift: Option<Shift>,
) -> Result<()> {
    let what = |w: &str| format!("zone '{zone}': {w} (to publish it)");
    mkdir_mode(at, 0o700).ctx(|| format!("creating {}", at.display()))?;
    crate::fsutil::private_mount_namespace().map_err(|(step, e)| Error::Io {
        context: what(step),
        source: e,
    })?;
    for p in [upper, lower] {
        if p.to_string_lossy().contains([',', ':', '\\']) {
            return Err(Error::Invalid(format!(
                "path {} contains ',', ':' or '\\', which overlayfs options cannot carry; use a state root without them",
                p.display()
            )));
        }
    }
    let opts = format!("lowerdir={}:{}", upper.display(), lower.display());
    warren_sys::fs::mount(
        Some(Path::new("overlay")),
        at,
        Some("overlay"),
        libc::MS_RDONLY | libc::MS_NODEV | libc::MS_NOSUID,
        Some(&opts),
    )
    .ctx(|| what("mounting its layer over its template"))?;
    let copied = copy_tree(at, dst, shift)
        .ctx(|| what(&format!("copying its merged root to {}", dst.display())));
    let unmounted = warren_sys::fs::umount2(at, libc::MNT_DETACH).ctx(|| what("unmounting"));
    let removed = fs::remove_dir(at).ctx(|| format!("removing {}", at.display()));
    copied.and(unmounted).and(removed)
}
