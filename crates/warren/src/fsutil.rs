//! File helpers: atomic writes, directories with a mode, unique names; the tree
//! operations (copy, remove, measure) are [`crate::treeops`], re-exported here.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
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
