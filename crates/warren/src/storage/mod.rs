//! Storage: templates and the copy-on-write backends that make zone roots from them.
//!
//! A backend owns a zone's private layer on the host and says how to assemble the
//! zone's root at boot ([`RootMount`]); the mount itself happens inside the zone's own
//! mount namespace (see `runtime`), so zone roots never appear in the host's mount
//! table and no host-side unmount is ever needed.
//!
//! - `overlay` (default): the template is the shared read-only lower layer; each zone
//!   owns an `upper/` and `work/` directory. An untouched zone costs a few inodes.
//! - `btrfs` (state root on btrfs): templates are subvolumes, zones are snapshots.
//! - `copy` (fallback): a full copy of the template, reflinked where the filesystem can.
//!
//! The choice is made by probing the state root's filesystem and recorded per zone.

pub mod image_config;
pub mod layer;
pub mod oci_archive;
pub mod oci_image;
pub mod template;

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::fsutil::{copy_tree, mkdir_mode, remove_tree};
use crate::treeops::Shift;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Overlay,
    Btrfs,
    Copy,
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BackendKind::Overlay => "overlay",
            BackendKind::Btrfs => "btrfs",
            BackendKind::Copy => "copy",
        })
    }
}

/// How the zone's root is assembled at boot, inside its mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootMount {
    /// overlay with `lower` (the template) under `upper`/`work`, mounted at `target`.
    Overlay {
        lower: PathBuf,
        upper: PathBuf,
        work: PathBuf,
        target: PathBuf,
    },
    /// `source` bind-mounted onto itself (it must be a mount point for pivot_root).
    Bind { source: PathBuf },
}

impl RootMount {
    /// Where the root is once mounted.
    pub fn target(&self) -> &Path {
        match self {
            RootMount::Overlay { target, .. } => target,
            RootMount::Bind { source } => source,
        }
    }
}

/// A copy-on-write backend.
pub trait Backend {
    fn kind(&self) -> BackendKind;
    /// Make an empty template root directory (a subvolume on btrfs).
    fn new_template_root(&self, path: &Path) -> Result<()>;
    /// Remove a template root.
    fn remove_template_root(&self, path: &Path) -> Result<()>;
    /// Give the zone in `zone_dir` its private layer made from `template_root`.
    fn install(&self, template_root: &Path, zone_dir: &Path) -> Result<()>;
    /// Give `dst_dir` a copy of `src_dir`'s private layer (the template stays shared),
    /// keeping holes and hard links. `shift` moves the owners of a layer that belongs
    /// to the source's id range (overlay's upper) to the clone's; the other backends'
    /// roots keep host ids (their zones see them through an idmapped mount).
    fn clone_zone(&self, src_dir: &Path, dst_dir: &Path, shift: Option<Shift>) -> Result<()>;
    /// Remove the zone's private layer.
    fn uninstall(&self, zone_dir: &Path) -> Result<()>;
    /// How to assemble the root at boot.
    fn root_mount(&self, template_root: &Path, zone_dir: &Path) -> RootMount;
    /// The directory holding the zone's private data (for disk accounting).
    fn private_dir(&self, zone_dir: &Path) -> PathBuf;
}

/// The backend for `kind`.
pub fn backend(kind: BackendKind) -> &'static dyn Backend {
    match kind {
        BackendKind::Overlay => &Overlay,
        BackendKind::Btrfs => &Btrfs,
        BackendKind::Copy => &Copy,
    }
}

/// Choose a backend for a state root: `WARREN_STORAGE` if set, else btrfs on btrfs,
/// overlay where the kernel has it, copy otherwise. Returns the choice and why.
pub fn choose(root: &Path, proc_root: &Path) -> Result<(BackendKind, String)> {
    if let Ok(v) = std::env::var("WARREN_STORAGE") {
        let kind = match v.as_str() {
            "overlay" => BackendKind::Overlay,
            "btrfs" => BackendKind::Btrfs,
            "copy" => BackendKind::Copy,
            other => {
                return Err(Error::Invalid(format!(
                    "WARREN_STORAGE={other:?}: expected overlay, btrfs or copy"
                )))
            }
        };
        if kind == BackendKind::Btrfs && !on_btrfs(root) {
            return Err(Error::Unsupported(format!(
                "WARREN_STORAGE=btrfs but the state root {} is not on btrfs; unset WARREN_STORAGE, or give a root on btrfs with --root",
                root.display()
            )));
        }
        return Ok((kind, "forced by WARREN_STORAGE".into()));
    }
    let filesystems = fs::read_to_string(proc_root.join("filesystems")).unwrap_or_default();
    Ok(decide(on_btrfs(root), fs_magic_name(root), &filesystems))
}

fn on_btrfs(root: &Path) -> bool {
    matches!(
        warren_sys::fs::fs_magic(existing_ancestor(root)),
        Ok(warren_sys::fs::BTRFS_MAGIC)
    )
}

fn fs_magic_name(root: &Path) -> &'static str {
    match warren_sys::fs::fs_magic(existing_ancestor(root)) {
        Ok(warren_sys::fs::EXT4_MAGIC) => "ext4",
        Ok(warren_sys::fs::XFS_MAGIC) => "xfs",
        Ok(warren_sys::fs::TMPFS_MAGIC) => "tmpfs",
        Ok(warren_sys::fs::BTRFS_MAGIC) => "btrfs",
        Ok(warren_sys::fs::OVERLAYFS_MAGIC) => "overlayfs",
        _ => "another filesystem",
    }
}

fn existing_ancestor(p: &Path) -> &Path {
    p.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"))
}

/// The pure part of [`choose`].
pub fn decide(on_btrfs: bool, fs_name: &str, proc_filesystems: &str) -> (BackendKind, String) {
    let has_overlay = proc_filesystems
        .lines()
        .any(|l| l.split_whitespace().last() == Some("overlay"));
    if on_btrfs {
        return (
            BackendKind::Btrfs,
            "the state root is on btrfs: templates are subvolumes, zones are snapshots".into(),
        );
    }
    if fs_name == "overlayfs" {
        return (
            BackendKind::Copy,
            "the state root is itself on overlayfs, which cannot be an overlay upper layer".into(),
        );
    }
    if has_overlay {
        return (
            BackendKind::Overlay,
            format!("overlayfs is available and the state root is on {fs_name}: zones share the template as a read-only lower layer"),
        );
    }
    (
        BackendKind::Copy,
        "the kernel has neither overlayfs nor btrfs here: each zone gets a (reflinked where possible) copy".into(),
    )
}

struct Overlay;
struct Btrfs;
struct Copy;

fn new_dir(path: &Path, mode: u32) -> Result<()> {
    mkdir_mode(path, mode).ctx(|| format!("creating {}", path.display()))
}

impl Backend for Overlay {
    fn kind(&self) -> BackendKind {
        BackendKind::Overlay
    }
    fn new_template_root(&self, path: &Path) -> Result<()> {
        new_dir(path, 0o755)
    }
    fn remove_template_root(&self, path: &Path) -> Result<()> {
        remove_tree(path).ctx(|| format!("removing {}", path.display()))
    }
    fn install(&self, _template_root: &Path, zone_dir: &Path) -> Result<()> {
        for (d, mode) in [("upper", 0o755), ("work", 0o700)] {
            let p = zone_dir.join(d);
            if !p.exists() {
                new_dir(&p, mode)?;
            }
        }
        Ok(())
    }
    fn clone_zone(&self, src_dir: &Path, dst_dir: &Path, shift: Option<Shift>) -> Result<()> {
        let (src, dst) = (src_dir.join("upper"), dst_dir.join("upper"));
        crate::treeops::copy_tree(&src, &dst, shift)
            .ctx(|| format!("copying {} to {}", src.display(), dst.display()))?;
        new_dir(&dst_dir.join("work"), 0o700)
    }
    fn uninstall(&self, zone_dir: &Path) -> Result<()> {
        for d in ["upper", "work"] {
            let p = zone_dir.join(d);
            remove_tree(&p).ctx(|| format!("removing {}", p.display()))?;
        }
        Ok(())
    }
    fn root_mount(&self, template_root: &Path, zone_dir: &Path) -> RootMount {
        // The overlay is mounted over the zone directory itself, inside the zone's mount
        // namespace: no extra mount-point directory per zone, nothing on the host.
        RootMount::Overlay {
            lower: template_root.to_path_buf(),
            upper: zone_dir.join("upper"),
            work: zone_dir.join("work"),
            target: zone_dir.to_path_buf(),
        }
    }
    fn private_dir(&self, zone_dir: &Path) -> PathBuf {
        zone_dir.join("upper")
    }
}

impl Backend for Btrfs {
    fn kind(&self) -> BackendKind {
        BackendKind::Btrfs
    }
    fn new_template_root(&self, path: &Path) -> Result<()> {
        warren_sys::fs::btrfs_subvol_create(path)
            .ctx(|| format!("creating btrfs subvolume {}", path.display()))
    }
    fn remove_template_root(&self, path: &Path) -> Result<()> {
        delete_subvol_or_tree(path)
    }
    fn install(&self, template_root: &Path, zone_dir: &Path) -> Result<()> {
        let root = zone_dir.join("root");
        delete_subvol_or_tree(&root)?;
        warren_sys::fs::btrfs_snapshot(template_root, &root).ctx(|| {
            format!(
                "snapshotting {} to {}",
                template_root.display(),
                root.display()
            )
        })
    }
    fn clone_zone(&self, src_dir: &Path, dst_dir: &Path, _: Option<Shift>) -> Result<()> {
        let (src, dst) = (src_dir.join("root"), dst_dir.join("root"));
        warren_sys::fs::btrfs_snapshot(&src, &dst)
            .ctx(|| format!("snapshotting {} to {}", src.display(), dst.display()))
    }
    fn uninstall(&self, zone_dir: &Path) -> Result<()> {
        delete_subvol_or_tree(&zone_dir.join("root"))
    }
    fn root_mount(&self, _template_root: &Path, zone_dir: &Path) -> RootMount {
        RootMount::Bind {
            source: zone_dir.join("root"),
        }
    }
    fn private_dir(&self, zone_dir: &Path) -> PathBuf {
        zone_dir.join("root")
    }
}

fn delete_subvol_or_tree(path: &Path) -> Result<()> {
    if warren_sys::fs::is_btrfs_subvol(path) {
        warren_sys::fs::btrfs_subvol_delete(path)
            .ctx(|| format!("deleting btrfs subvolume {}", path.display()))
    } else {
        remove_tree(path).ctx(|| format!("removing {}", path.display()))
    }
}

impl Backend for Copy {
    fn kind(&self) -> BackendKind {
        BackendKind::Copy
    }
    fn new_template_root(&self, path: &Path) -> Result<()> {
        new_dir(path, 0o755)
    }
    fn remove_template_root(&self, path: &Path) -> Result<()> {
        remove_tree(path).ctx(|| format!("removing {}", path.display()))
    }
    fn install(&self, template_root: &Path, zone_dir: &Path) -> Result<()> {
        let root = zone_dir.join("root");
        remove_tree(&root).ctx(|| format!("removing {}", root.display()))?;
        copy_tree(template_root, &root)
            .ctx(|| format!("copying {} to {}", template_root.display(), root.display()))
    }
    fn clone_zone(&self, src_dir: &Path, dst_dir: &Path, _: Option<Shift>) -> Result<()> {
        let (src, dst) = (src_dir.join("root"), dst_dir.join("root"));
        copy_tree(&src, &dst).ctx(|| format!("copying {} to {}", src.display(), dst.display()))
    }
    fn uninstall(&self, zone_dir: &Path) -> Result<()> {
        let root = zone_dir.join("root");
        remove_tree(&root).ctx(|| format!("removing {}", root.display()))
    }
    fn root_mount(&self, _template_root: &Path, zone_dir: &Path) -> RootMount {
        RootMount::Bind {
            source: zone_dir.join("root"),
        }
    }
    fn private_dir(&self, zone_dir: &Path) -> PathBuf {
        zone_dir.join("root")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_choice() {
        let fs = "nodev\tproc\n\text4\nnodev\toverlay\n";
        assert_eq!(decide(true, "btrfs", fs).0, BackendKind::Btrfs);
        assert_eq!(decide(false, "ext4", fs).0, BackendKind::Overlay);
        assert!(decide(false, "ext4", fs).1.contains("ext4"));
        assert_eq!(decide(false, "overlayfs", fs).0, BackendKind::Copy);
        assert_eq!(decide(false, "ext4", "nodev\tproc\n").0, BackendKind::Copy);
    }

    #[test]
    fn overlay_clone_copies_only_the_private_layer() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        fs::create_dir(&a).unwrap();
        fs::create_dir(&b).unwrap();
        let o = backend(BackendKind::Overlay);
        o.install(t.path(), &a).unwrap();
        fs::write(a.join("upper/file"), b"private").unwrap();
        o.clone_zone(&a, &b, None).unwrap();
        assert_eq!(fs::read(b.join("upper/file")).unwrap(), b"private");
        assert!(b.join("work").is_dir());
        o.uninstall(&a).unwrap();
        assert!(!a.join("upper").exists() && b.join("upper/file").exists());
    }
}
