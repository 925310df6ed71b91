//! A zone's console: what its init writes, and `/dev/console` inside it.
//!
//! The console is a file on a **tmpfs of its own, capped at [`CONSOLE_MAX`]**, made by
//! the booting parent as a detached mount (`fsopen("tmpfs")`, `size=`), attached by
//! the child at `/dev/.warren-console` (a 0700 directory of host root's) and bound
//! onto `/dev/console`. The kernel enforces the cap: past it a write or `fallocate`
//! fails with ENOSPC. Its pages are charged to the zone's memory cgroup (tmpfs charges
//! the writer), so it counts against the zone's `memory.max`, never the host's disk.
//! No helper process: nothing reads it while the zone runs.
//!
//! The host keeps a copy in `zones/<name>/console.log`: `halt` opens the live file
//! through init's stdout before it stops the zone and saves it when the zone is gone
//! (so the shutdown messages are in it); a boot whose init dies at once saves it too.
//! The previous copy is rotated to `console.log.1`. Both are at most [`CONSOLE_MAX`].

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use warren_sys::libc;

use crate::error::{IoContext, Result};
use crate::state::InitId;

/// The cap on a zone's console, live and saved.
pub const CONSOLE_MAX: u64 = 1 << 20;
/// Where the console's tmpfs is attached inside the zone's /dev.
pub const MOUNT_DIR: &str = ".warren-console";
/// The console file's name on it.
pub const FILE: &str = "console";

/// The console's detached tmpfs and the file on it (owned by the zone's root).
pub struct Console {
    pub mount: OwnedFd,
    pub file: File,
}

/// Make a zone's console: a detached tmpfs of [`CONSOLE_MAX`] bytes holding an empty
/// `console` file owned by host id `owner` (the zone's root), or root.
pub fn make(zone: &str, owner: Option<u32>) -> Result<Console> {
    use warren_sys::userns::{MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID};
    let size = CONSOLE_MAX.to_string();
    let mount = warren_sys::loopdev::mount_detached_with(
        "tmpfs",
        &[
            (b"size".as_slice(), size.as_bytes()),
            (b"nr_inodes", b"4"),
            (b"mode", b"0700"),
        ],
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
    )
    .ctx(|| format!("zone '{zone}': making its console (a {size}-byte tmpfs)"))?;
    let file = warren_sys::fs::create_in(mount.as_fd(), c"console", 0o600, owner.map(|o| (o, o)))
        .ctx(|| format!("zone '{zone}': creating its console file"))?;
    Ok(Console { mount, file })
}

/// The live console of the zone whose init is `init`, through init's stdout, if it is
/// still the console (a regular file on the console's tmpfs; opened without blocking).
pub fn open_live(proc_root: &Path, init: InitId) -> Option<File> {
    let link = proc_root.join(init.pid.to_string()).join("fd/1");
    let target = std::fs::read_link(&link).ok()?;
    if !target.ends_with(Path::new(MOUNT_DIR).join(FILE)) {
        return None;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(&link)
        .ok()?;
    let meta = f.metadata().ok()?;
    (meta.file_type().is_file() && !meta.file_type().is_fifo()).then_some(f)
}

/// Save the console `from` as `to` (at most [`CONSOLE_MAX`] bytes), the previous copy
/// kept as `to.1`; atomic (temp file, fsync, rename).
pub fn save(from: &File, to: &Path) -> Result<()> {
    let mut text = Vec::new();
    let mut reader = from;
    use std::io::Seek;
    (&mut reader)
        .seek(std::io::SeekFrom::Start(0))
        .ctx(|| "rewinding the console".to_string())?;
    reader
        .take(CONSOLE_MAX)
        .read_to_end(&mut text)
        .ctx(|| "reading the console".to_string())?;
    let old = to.with_extension("log.1");
    match std::fs::symlink_metadata(to) {
        Ok(m) if m.file_type().is_file() => {
            std::fs::rename(to, &old).ctx(|| format!("rotating {}", to.display()))?
        }
        _ => {}
    }
    let tmp = to.with_extension("log.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .ctx(|| format!("writing {}", tmp.display()))?;
    f.write_all(&text)
        .and_then(|()| f.sync_all())
        .ctx(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, to).ctx(|| format!("writing {}", to.display()))
}
