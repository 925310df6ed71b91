//! Per-object locks: `flock(2)` on a file under `<root>/locks/`. Commands on the same
//! zone serialise; a lock is released when its holder exits, even by SIGKILL.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::error::{IoContext, Result};
use crate::layout::Layout;

/// A held lock; released on drop.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

/// Lock files are root's alone (0600, in a 0700 directory): a host user who could open
/// one could `flock` it and block warren forever.
fn open(path: &Path) -> Result<File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let opts = || {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(warren_sys::libc::O_NOFOLLOW)
            .open(path)
    };
    let file = match opts() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).ctx(|| format!("creating {}", dir.display()))?;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    .ctx(|| format!("restricting {} to root", dir.display()))?;
            }
            opts()
        }
        other => other,
    };
    let file = file.ctx(|| format!("opening lock file {}", path.display()))?;
    // A lock file made by an older warren (0644) is tightened on first use.
    let meta = file
        .metadata()
        .ctx(|| format!("reading lock file {}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .ctx(|| format!("restricting lock file {} to root", path.display()))?;
    }
    Ok(file)
}

/// Take the exclusive lock of `kind`/`name`, waiting for other holders.
pub fn exclusive(layout: &Layout, kind: &str, name: &str) -> Result<Lock> {
    let path = layout.lock_file(kind, name);
    let file = open(&path)?;
    file.lock().ctx(|| format!("locking {}", path.display()))?;
    Ok(Lock { _file: file })
}

/// Take the shared lock of `kind`/`name` (readers, e.g. the source of a clone).
pub fn shared(layout: &Layout, kind: &str, name: &str) -> Result<Lock> {
    let path = layout.lock_file(kind, name);
    let file = open(&path)?;
    file.lock_shared()
        .ctx(|| format!("locking {}", path.display()))?;
    Ok(Lock { _file: file })
}

/// Take the exclusive lock on the lock file `path` if nobody holds it; `None` if held.
pub fn try_exclusive_path(path: &Path) -> Result<Option<Lock>> {
    let file = open(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(Lock { _file: file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).ctx(|| format!("locking {}", path.display()))
        }
    }
}
