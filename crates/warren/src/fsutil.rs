//! File helpers: atomic writes, copying a tree exactly (reflinks, xattrs, devices,
//! ownership), and measuring disk use. Nothing here follows a symlink it finds in a tree.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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

/// Copy the tree at `src` to `dst` (which must not exist), preserving file types,
/// modes, owners, times and extended attributes (overlayfs keeps whiteouts and opaque
/// markers in them). Regular files are reflinked where the filesystem can, else copied.
/// Symlinks are copied as links, never followed.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(src)?;
    copy_entry(src, dst, &meta)?;
    Ok(())
}

fn copy_entry(src: &Path, dst: &Path, meta: &fs::Metadata) -> io::Result<()> {
    let ft = meta.file_type();
    if ft.is_dir() {
        fs::create_dir(dst)?;
        for entry in fs::read_dir(src)? {
            let entry = entry?;
            let m = entry.metadata()?; // DirEntry::metadata does not follow symlinks
            copy_entry(&entry.path(), &dst.join(entry.file_name()), &m)?;
        }
    } else if ft.is_symlink() {
        symlink(fs::read_link(src)?, dst)?;
    } else if ft.is_file() {
        copy_file(src, dst, meta)?;
    } else if ft.is_char_device() || ft.is_block_device() || ft.is_fifo() || ft.is_socket() {
        warren_sys::fs::mknod(dst, meta.mode(), meta.rdev())?;
    }
    copy_xattrs(src, dst)?;
    warren_sys::fs::lchown(dst, meta.uid(), meta.gid())?;
    if !ft.is_symlink() {
        fs::set_permissions(dst, fs::Permissions::from_mode(meta.mode() & 0o7777))?;
    }
    warren_sys::fs::lutimes(
        dst,
        (meta.atime(), meta.atime_nsec()),
        (meta.mtime(), meta.mtime_nsec()),
    )
}

fn copy_file(src: &Path, dst: &Path, meta: &fs::Metadata) -> io::Result<()> {
    let mut from = OpenOptions::new()
        .read(true)
        .custom_flags(warren_sys::libc::O_NOFOLLOW)
        .open(src)?;
    let mut to = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(meta.mode() & 0o777)
        .open(dst)?;
    if meta.len() == 0 || warren_sys::fs::reflink(&from, &to).is_ok() {
        return Ok(());
    }
    // std::io::copy uses copy_file_range, which shares extents where it can.
    io::copy(&mut from, &mut to)?;
    Ok(())
}

fn copy_xattrs(src: &Path, dst: &Path) -> io::Result<()> {
    for name in warren_sys::fs::llistxattr(src)? {
        let value = warren_sys::fs::lgetxattr(src, &name)?;
        warren_sys::fs::lsetxattr(dst, &name, &value)?;
    }
    Ok(())
}

/// Bytes of disk allocated to the tree at `path` (st_blocks × 512, each inode once,
/// not crossing into other filesystems, not following symlinks).
pub fn disk_usage(path: &Path) -> io::Result<u64> {
    let meta = fs::symlink_metadata(path)?;
    let dev = meta.dev();
    let mut total = 0;
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![(path.to_path_buf(), meta)];
    while let Some((p, m)) = stack.pop() {
        if m.dev() != dev {
            continue;
        }
        if m.nlink() > 1 && !m.is_dir() && !seen.insert(m.ino()) {
            continue;
        }
        total += m.blocks() * 512;
        if m.is_dir() {
            for entry in fs::read_dir(&p)? {
                let entry = entry?;
                stack.push((entry.path(), entry.metadata()?));
            }
        }
    }
    Ok(total)
}

/// Remove a tree if it exists (never following symlinks out of it).
pub fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
    }
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
