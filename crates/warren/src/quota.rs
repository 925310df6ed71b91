//! Per-zone disk quota (`disk.max`): the zone's private upper layer lives in a sparse
//! ext4 image of exactly `disk.max` bytes, attached to a loop device and mounted
//! inside the zone's own mount namespace at boot.
//!
//! Why this mechanism: the state root here (and on most hosts) is ext4 without the
//! `quota`/`project` features and mounted without `prjquota`, so project quotas are
//! not available without reformatting or remounting the host's filesystem; btrfs
//! qgroups need a btrfs state root. A loop-backed image works on any filesystem that
//! holds sparse files, needs nothing of the host's mounts, and fails a writer with
//! ENOSPC at the cap. Its costs: `mkfs.ext4` at install (tens of ms), a loop device
//! and an ext4 mount per booted capped zone (only those: zones without `disk.max`
//! keep plain directories), and the image's metadata (about 4% of a small image).
//!
//! Layout: `<zone>/disk.img` (the image; its `user.warren.owner` xattr records the
//! host id that owns `upper/` inside) and `<zone>/disk/` (its mount point inside the
//! zone's namespace). The boot's parent mounts the image as a detached mount and the
//! child attaches it: the child may already be in the zone's devices cgroup, which
//! denies the loop device (tests/abuse.rs `disk_max_zone_boots_every_time`). The loop device is attached with autoclear: the kernel detaches
//! it when the zone's mount namespace (the last user) goes away, so halt has nothing
//! to undo and a crash leaves no device behind.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, IoContext, Result};
use crate::fsutil::{mkdir_mode, remove_tree, sync_dir, unique_suffix};

/// The smallest `disk.max`: the capped filesystem needs room for its own metadata.
pub const MIN_SIZE: u64 = 16 << 20;

/// The image file in a zone directory.
pub const IMAGE: &str = "disk.img";
/// Its mount point in a zone directory.
pub const MOUNTPOINT: &str = "disk";
const OWNER_XATTR: &[u8] = b"user.warren.owner";

/// How `disk.max` is enforced on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// A sparse ext4 image per capped zone on a loop device.
    LoopExt4 { mkfs: PathBuf },
    /// Not available, and why.
    Unavailable(String),
}

impl Mechanism {
    pub fn describe(&self) -> String {
        match self {
            Mechanism::LoopExt4 { mkfs } => format!(
                "loop-ext4: each zone with disk.max gets a sparse ext4 image of that size for its writes ({})",
                mkfs.display()
            ),
            Mechanism::Unavailable(why) => format!("unavailable: {why}"),
        }
    }
}

/// Find what this host offers (three small checks).
pub fn probe(proc_root: &Path) -> Mechanism {
    let Some(mkfs) = ["/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
    else {
        return Mechanism::Unavailable(
            "mkfs.ext4 is missing; install e2fsprogs (apt-get install e2fsprogs)".into(),
        );
    };
    if !Path::new("/dev/loop-control").exists() {
        return Mechanism::Unavailable(
            "/dev/loop-control is missing; load the loop module (modprobe loop)".into(),
        );
    }
    let filesystems = fs::read_to_string(proc_root.join("filesystems")).unwrap_or_default();
    if !filesystems
        .lines()
        .any(|l| l.split_whitespace().last() == Some("ext4"))
    {
        return Mechanism::Unavailable("the kernel has no ext4".into());
    }
    Mechanism::LoopExt4 { mkfs }
}

/// The image of the zone in `zone_dir`, if it has one.
pub fn image(zone_dir: &Path) -> Option<PathBuf> {
    let p = zone_dir.join(IMAGE);
    p.is_file().then_some(p)
}

/// The image's size (its cap).
pub fn image_size(image: &Path) -> Result<u64> {
    Ok(fs::metadata(image)
        .ctx(|| format!("reading {}", image.display()))?
        .len())
}

/// The host id that owns `upper/` in the image (recorded on the image).
pub fn image_owner(image: &Path) -> Option<u32> {
    let v = warren_sys::fs::lgetxattr(image, OWNER_XATTR).ok()?;
    String::from_utf8(v).ok()?.parse().ok()
}

fn set_image_owner(image: &Path, owner: u32) -> Result<()> {
    warren_sys::fs::lsetxattr(image, OWNER_XATTR, owner.to_string().as_bytes())
        .ctx(|| format!("recording the owner on {}", image.display()))
}

/// What the boot mounts before the overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskMount {
    pub image: PathBuf,
    pub mountpoint: PathBuf,
}

impl DiskMount {
    pub fn of(zone_dir: &Path) -> Option<DiskMount> {
        image(zone_dir).map(|image| DiskMount {
            image,
            mountpoint: zone_dir.join(MOUNTPOINT),
        })
    }
    pub fn upper(&self) -> PathBuf {
        self.mountpoint.join("upper")
    }
    pub fn work(&self) -> PathBuf {
        self.mountpoint.join("work")
    }
}

/// Give the zone in `zone_dir` a capped private layer: an image of `size` bytes
/// holding an empty `upper/` owned by host id `owner` (uid and gid) and `work/`.
/// Atomic: built beside, renamed into place last.
pub fn create_image(zone: &str, zone_dir: &Path, size: u64, owner: u32) -> Result<()> {
    let mkfs = match probe(Path::new("/proc")) {
        Mechanism::LoopExt4 { mkfs } => mkfs,
        Mechanism::Unavailable(why) => {
            return Err(Error::Unsupported(format!(
                "zone '{zone}': disk.max cannot be enforced here: {why}; or unset disk.max"
            )))
        }
    };
    let stage = zone_dir.join(format!(".disk-stage-{}", unique_suffix()));
    let tmp = zone_dir.join(format!(".disk-img-{}", unique_suffix()));
    let result = (|| {
        mkdir_mode(&stage, 0o700).ctx(|| format!("creating {}", stage.display()))?;
        let upper = stage.join("upper");
        mkdir_mode(&upper, 0o755).ctx(|| format!("creating {}", upper.display()))?;
        mkdir_mode(&stage.join("work"), 0o700).ctx(|| format!("creating {}", stage.display()))?;
        warren_sys::fs::lchown(&upper, owner, owner)
            .ctx(|| format!("giving {} to host id {owner}", upper.display()))?;
        let f = File::create(&tmp).ctx(|| format!("creating {}", tmp.display()))?;
        f.set_len(size)
            .ctx(|| format!("sizing {} to {size} bytes", tmp.display()))?;
        drop(f);
        // -m 0: no blocks reserved for root, so the cap is the zone's whole size.
        let out = Command::new(&mkfs)
            .args(["-q", "-F", "-m", "0", "-E", "nodiscard", "-d"])
            .arg(&stage)
            .arg(&tmp)
            .output()
            .ctx(|| format!("zone '{zone}': running {}", mkfs.display()))?;
        if !out.status.success() {
            return Err(Error::Refused(format!(
                "zone '{zone}': {} failed for disk.max {size}: {}",
                mkfs.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        set_image_owner(&tmp, owner)?;
        crate::fault::point("install.after-disk-image");
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .ctx(|| format!("syncing {}", tmp.display()))?;
        let mp = zone_dir.join(MOUNTPOINT);
        if !mp.exists() {
            mkdir_mode(&mp, 0o755).ctx(|| format!("creating {}", mp.display()))?;
        }
        let img = zone_dir.join(IMAGE);
        fs::rename(&tmp, &img)
            .ctx(|| format!("renaming {} to {}", tmp.display(), img.display()))?;
        sync_dir(zone_dir).ctx(|| format!("syncing {}", zone_dir.display()))
    })();
    let _ = remove_tree(&stage);
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Remove the zone's image and mount point (uninstall). Safe to repeat.
pub fn remove_image(zone_dir: &Path) -> Result<()> {
    let img = zone_dir.join(IMAGE);
    match fs::remove_file(&img) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).ctx(|| format!("removing {}", img.display())),
    }
    let mp = zone_dir.join(MOUNTPOINT);
    if mp.exists() {
        fs::remove_dir(&mp).ctx(|| format!("removing {}", mp.display()))?;
    }
    Ok(())
}

/// Copy `src_dir`'s image into `dst_dir` (a clone), keeping it sparse.
pub fn copy_image(src_dir: &Path, dst_dir: &Path) -> Result<()> {
    let (src, dst) = (src_dir.join(IMAGE), dst_dir.join(IMAGE));
    let out = Command::new("cp")
        .args(["--sparse=always", "--reflink=auto", "--preserve=xattr"])
        .arg(&src)
        .arg(&dst)
        .output()
        .ctx(|| format!("copying {}", src.display()))?;
    if !out.status.success() {
        return Err(Error::Refused(format!(
            "copying {} to {}: {}",
            src.display(),
            dst.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    File::open(&dst)
        .and_then(|f| f.sync_all())
        .ctx(|| format!("syncing {}", dst.display()))?;
    let mp = dst_dir.join(MOUNTPOINT);
    mkdir_mode(&mp, 0o755).ctx(|| format!("creating {}", mp.display()))
}

/// Re-own the image's `upper/` to host id range `to` if it is owned by another one:
/// mounts the image in a private mount namespace of a forked helper (nothing is
/// mounted in the host's namespace) and runs `idmap::shift_tree` there.
pub fn shift_image(zone: &str, zone_dir: &Path, to: crate::idmap::IdRange) -> Result<()> {
    let Some(d) = DiskMount::of(zone_dir) else {
        return Ok(());
    };
    let from = image_owner(&d.image).unwrap_or(0);
    if from == to.base {
        return Ok(());
    }
    let from = crate::idmap::IdRange::new(if from < crate::idmap::RANGE { 0 } else { from });
    let image = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&d.image)
        .ctx(|| format!("opening {}", d.image.display()))?;
    let dev = warren_sys::loopdev::attach(&image).ctx(|| {
        format!(
            "zone '{zone}': attaching {} to a loop device",
            d.image.display()
        )
    })?;
    // The helper holds none of warren's descriptors (so no zone lock) and dies with it.
    let pid = warren_sys::proc::fork_helper().ctx(|| "fork".to_string())?;
    if pid == 0 {
        let r = (|| -> std::io::Result<()> {
            warren_sys::loopdev::unshare(warren_sys::libc::CLONE_NEWNS)?;
            warren_sys::fs::mount(
                None,
                Path::new("/"),
                None,
                warren_sys::libc::MS_REC | warren_sys::libc::MS_PRIVATE,
                None,
            )?;
            warren_sys::fs::mount(
                Some(&dev.path),
                &d.mountpoint,
                Some("ext4"),
                warren_sys::libc::MS_NOSUID | warren_sys::libc::MS_NODEV,
                None,
            )?;
            crate::idmap::shift_tree(&d.upper(), from, to)?;
            Ok(())
        })();
        if let Err(e) = &r {
            eprintln!(
                "warren: zone '{zone}': re-owning the layer in {}: {e}",
                d.image.display()
            );
        }
        warren_sys::exit_now(i32::from(r.is_err()));
    }
    let status = warren_sys::proc::waitpid_blocking(pid).ctx(|| "waiting for the helper".into())?;
    drop(dev);
    if status.code() != 0 {
        return Err(Error::Refused(format!(
            "zone '{zone}': re-owning its capped layer {} from host ids {} to {} failed (see above)",
            d.image.display(),
            from.base,
            to.base
        )));
    }
    set_image_owner(&d.image, to.base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_names_the_mechanism_or_the_missing_piece() {
        let d = std::env::temp_dir().join(format!("warren-quota-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("filesystems"), "nodev\tproc\n").unwrap();
        match probe(&d) {
            Mechanism::Unavailable(why) => assert!(
                why.contains("mkfs.ext4") || why.contains("loop") || why.contains("ext4"),
                "{why}"
            ),
            other => panic!("a kernel without ext4 cannot hold the image: {other:?}"),
        }
        fs::write(d.join("filesystems"), "nodev\tproc\n\text4\n").unwrap();
        let m = probe(&d);
        // This machine has mkfs.ext4 and loop devices (the test suite's requirement).
        assert!(matches!(m, Mechanism::LoopExt4 { .. }), "{m:?}");
        assert!(m.describe().starts_with("loop-ext4"));
        fs::remove_dir_all(&d).unwrap();
    }
}
