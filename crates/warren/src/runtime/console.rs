//! A zone's console: what its init writes, and `/dev/console` inside it.
//!
//! The console is a file in the zone's **own storage beside its root**
//! (`zones/<name>/console.live`, or the root of its `disk.max` image), opened by the
//! child before the root is mounted over that directory (so no path inside the zone
//! reaches it), given to the zone's root, kept as init's stdout and stderr and bound on
//! the shared /dev's `console` mount point. It makes no superblock: every superblock
//! registers a shrinker and every memory cgroup on the host keeps state for every
//! shrinker id, so a tmpfs per zone costs O(zones²) kernel memory (docs/scaling.md).
//!
//! Its bound is the zone's disk: with `disk.max` it is on the zone's image, so the cap
//! holds for it as for the zone's own files (the escape of docs/isolation.md, class 6,
//! stays closed); without `disk.max` nothing bounds the zone's root either, and the
//! console adds no way to fill the host's disk that the zone's root did not have. Each
//! boot truncates it. No helper process: nothing reads it while the zone runs.
//!
//! The host keeps a copy in `zones/<name>/console.log`: `halt` opens the live file
//! through init's stdout before it stops the zone and saves it when the zone is gone
//! (so the shutdown messages are in it); a boot whose init dies at once saves it too
//! (`boot` opens it the same way while the child waits for its go). The previous copy
//! is rotated to `console.log.1`. Both are at most [`CONSOLE_MAX`]: the last bytes.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use warren_sys::libc;

use crate::error::{IoContext, Result};
use crate::state::InitId;

/// The cap on a zone's saved console (its last bytes are kept).
pub const CONSOLE_MAX: u64 = 1 << 20;
/// The live console's name in the zone's own storage (`runtime::spec::private_storage`).
pub const FILE: &str = "console.live";

/// The live console of the zone whose init is `init`, through init's stdout, if it is
/// still the console (a regular file named [`FILE`]; opened without blocking).
pub fn open_live(proc_root: &Path, init: InitId) -> Option<File> {
    open_stdout(proc_root, init.pid)
}

/// The console through the stdout of process `pid` (a zone's init, also while it
/// waits for its go in `boot`: it points its stdout at the console before its sync
/// point), as [`open_live`].
pub fn open_stdout(proc_root: &Path, pid: i32) -> Option<File> {
    let link = proc_root.join(pid.to_string()).join("fd/1");
    let target = std::fs::read_link(&link).ok()?;
    if !target.ends_with(FILE) {
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

/// Save the console `from` as `to` (its last [`CONSOLE_MAX`] bytes at most), the previous copy
/// kept as `to.1`; atomic (temp file, fsync, rename).
pub fn save(from: &File, to: &Path) -> Result<()> {
    let mut text = Vec::new();
    let mut reader = from;
    use std::io::Seek;
    // The last CONSOLE_MAX bytes: the shutdown messages are at the end.
    let len = from
        .metadata()
        .ctx(|| "reading the console's size".to_string())?
        .len();
    (&mut reader)
        .seek(std::io::SeekFrom::Start(len.saturating_sub(CONSOLE_MAX)))
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
