//! A `disk.max` layer for export and import: the zone's (or snapshot's) ext4 image
//! mounted at its mount point in a private mount namespace of this process (never on
//! the host's), so its `upper/` can be packed or filled; written back and unmounted
//! before the image is synced and renamed into place.

use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::quota::DiskMount;
use warren_sys::libc;

/// The image, mounted; unmounted (lazily) if dropped without [`Mounted::finish`].
pub struct Mounted {
    disk: DiskMount,
    dev: Option<warren_sys::loopdev::LoopDevice>,
    mounted: bool,
}

/// Mount the image of the zone or snapshot directory `dir` (which must have one),
/// read-only when only read (export: not even access times change).
pub fn mount(zone: &str, dir: &Path, readonly: bool) -> Result<Mounted> {
    let disk = DiskMount::of(dir).ok_or_else(|| Error::Corrupt {
        path: dir.join("disk.img"),
        message: "the disk.max image is missing".into(),
    })?;
    let what = |w: &str| format!("zone '{zone}': {w} (its disk.max image)");
    crate::fsutil::private_mount_namespace().map_err(|(step, e)| Error::Io {
        context: what(step),
        source: e,
    })?;
    let image = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags_nofollow()
        .open(&disk.image)
        .ctx(|| what(&format!("opening {}", disk.image.display())))?;
    let dev = warren_sys::loopdev::attach(&image).ctx(|| what("attaching a loop device"))?;
    warren_sys::fs::mount(
        Some(&dev.path),
        &disk.mountpoint,
        Some("ext4"),
        libc::MS_NOSUID | libc::MS_NODEV | if readonly { libc::MS_RDONLY } else { 0 },
        None,
    )
    .ctx(|| what("mounting"))?;
    Ok(Mounted {
        disk,
        dev: Some(dev),
        mounted: true,
    })
}

trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::custom_flags(self, libc::O_NOFOLLOW | libc::O_CLOEXEC)
    }
}

impl Mounted {
    /// The layer inside the image.
    pub fn upper(&self) -> PathBuf {
        self.disk.upper()
    }

    /// Write everything back to the image and unmount it (import).
    pub fn finish(mut self) -> Result<()> {
        let mp = self.disk.mountpoint.clone();
        let f = std::fs::File::open(&mp).ctx(|| format!("opening {}", mp.display()))?;
        warren_sys::fs::syncfs(&f).ctx(|| format!("syncing {}", mp.display()))?;
        drop(f);
        warren_sys::fs::umount2(&mp, 0).ctx(|| format!("unmounting {}", mp.display()))?;
        self.mounted = false;
        self.dev = None;
        Ok(())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.mounted {
            let _ = warren_sys::fs::umount2(&self.disk.mountpoint, libc::MNT_DETACH);
        }
    }
}
