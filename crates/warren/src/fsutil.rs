//! File helpers: atomic writes, directories with a mode, unique names; the tree
//! operations (copy, remove, measure) are [`crate::treeops`], re-exported here.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Write `data` to `path` atomically: a temp file beside it, then rename.
///
/// With `durable`, the temp file and the directory are fsync'd so the new content
/// survives a power loss. Runtime facts that a reboot invalidates anyway (a running
/// zone's init pid) skip the fsyncs: a rename alone survives a crash of warren itself.
pub fn atomic_write(path: &Path, data: &[u8], durable: bool) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .custom_flags(warren_sys::libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(data)?;
        if durable {
            f.sync_all()?;
        }
        crate::fault::point("write.after-temp");
        fs::rename(&tmp, path)?;
        if durable {
            sync_dir(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The most warren reads of a config, manifest or state file (1 MiB): far more than
/// any real one, little enough that `--config /dev/urandom` fails at once.
pub const MAX_SMALL_FILE: u64 = 1 << 20;

/// Read the file at `path`, at most `limit` bytes of it. A longer file (or a device
/// that never ends, such as /dev/urandom) is an `InvalidData` error after `limit + 1`
/// bytes, whose message says so; every file warren reads from a path a user gave or
/// from the state root goes through here (or [`read_text_bounded`]).
pub fn read_bounded(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let f = File::open(path)?;
    // Sized from the file's length: `Take` hides it from `read_to_end`, which would
    // otherwise probe with 32-byte reads (a zone's state files cost ~10 reads each,
    // and `warren list` / `warren metrics` read three per zone).
    let len = f.metadata().map(|m| m.len()).unwrap_or(0).min(limit);
    let mut buf = Vec::with_capacity(len as usize + 1);
    f.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it is larger than {} (warren reads at most that much of it)",
                crate::config::format_size(limit)
            ),
        ));
    }
    Ok(buf)
}

/// [`read_bounded`] for a text file: bytes that are not UTF-8 are an `InvalidData`
/// error naming the offset of the first bad byte.
pub fn read_text_bounded(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_bounded(path, limit)?).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it is not UTF-8 text (byte {} is invalid)",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// fsync a directory, making renames and creations inside it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Copy the tree at `src` to `dst` (which must not exist), keeping types, modes,
/// owners, times, extended attributes, hard links and holes; symlinks are copied as
/// links, never followed (see [`crate::treeops`]).
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    crate::treeops::copy_tree(src, dst, None)
}

/// Bytes of disk allocated to the tree at `path` (see [`crate::treeops::disk_usage`]).
pub fn disk_usage(path: &Path) -> io::Result<u64> {
    crate::treeops::disk_usage(path)
}

/// Remove a tree if it exists (see [`crate::treeops::remove_tree`]).
pub fn remove_tree(path: &Path) -> io::Result<()> {
    crate::treeops::remove_tree(path)
}

/// Create a directory with `mode` (not subject to the umask).
/// Move this (single-threaded) process into a mount namespace of its own with every
/// mount private, so what it mounts next (a halted zone's root, a disk.max image)
/// reaches no other process and goes when it exits. The error says which step failed.
pub fn private_mount_namespace() -> Result<(), (&'static str, io::Error)> {
    warren_sys::loopdev::unshare(warren_sys::libc::CLONE_NEWNS)
        .map_err(|e| ("making a private mount namespace", e))?;
    warren_sys::fs::mount(
        None,
        Path::new("/"),
        None,
        warren_sys::libc::MS_REC | warren_sys::libc::MS_PRIVATE,
        None,
    )
    .map_err(|e| ("making / private", e))
}

pub fn mkdir_mode(path: &Path, mode: u32) -> io::Result<()> {
    fs::create_dir(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

/// A unique suffix for temporary names: pid and a nanosecond clock reading.
pub fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{}-{nanos:x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    #[test]
    fn bounded_reads_stop_at_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        fs::write(&p, b"12345").unwrap();
        assert_eq!(read_bounded(&p, 5).unwrap(), b"12345");
        let e = read_bounded(&p, 4).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("larger than"), "{e}");
        fs::write(&p, b"ok\xff").unwrap();
        let e = read_text_bounded(&p, 100).unwrap_err();
        assert!(e.to_string().contains("byte 2 is invalid"), "{e}");
        let t = std::time::Instant::now();
        assert!(read_bounded(Path::new("/dev/urandom"), MAX_SMALL_FILE).is_err());
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn atomic_write_replaces_content() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.json");
        atomic_write(&p, b"one", true).unwrap();
        atomic_write(&p, b"two", false).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temp file left behind");
    }

    #[test]
    fn copy_tree_keeps_types_modes_and_links() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::write(src.join("sub/file"), b"data").unwrap();
        fs::set_permissions(src.join("sub/file"), fs::Permissions::from_mode(0o640)).unwrap();
        symlink("/etc/passwd", src.join("link")).unwrap();
        symlink("../nowhere", src.join("dangling")).unwrap();
        let dst = d.path().join("dst");
        copy_tree(&src, &dst).unwrap();
        assert_eq!(fs::read(dst.join("sub/file")).unwrap(), b"data");
        let m = fs::metadata(dst.join("sub/file")).unwrap();
        assert_eq!(m.mode() & 0o777, 0o640);
        assert_eq!(
            fs::read_link(dst.join("link")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert_eq!(
            fs::read_link(dst.join("dangling")).unwrap(),
            Path::new("../nowhere")
        );
        assert!(disk_usage(&dst).unwrap() > 0);
    }
}
