//! The tar stream of `warren cp`: packing a file or a tree (never following a symlink
//! beneath the top), and the two unpackers, one for each side.
//!
//! The zone's side unpacks as the zone's root inside the zone's namespaces, so the
//! kernel confines it; it still takes only plain relative names. The host's side
//! unpacks a stream the zone produced, so it trusts nothing in it: only regular
//! files, directories and symlinks, names beneath the one top entry expected, into a
//! fresh private directory, through the `tar` crate's checks that nothing lands
//! outside it, without owners, set-id bits or extended attributes.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;
use tar::{Builder, EntryType, Header, HeaderMode};

/// What a copy moved.
#[derive(Debug, Default, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Counts {
    pub files: u64,
    pub dirs: u64,
    pub links: u64,
    /// Entries left out: device nodes, FIFOs and sockets (out of a zone, also hard
    /// links).
    pub skipped: u64,
    pub bytes: u64,
}

/// Owner and mode given to what is packed (`--uid`, `--gid`, `--mode`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Stamp {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Applies to regular files.
    pub mode: Option<u32>,
}

/// Pack `src` (a file, or with `recursive` a tree) as `top` and what lies beneath
/// it. `src` itself is followed if it is a symlink (as cp follows its operands);
/// nothing beneath it is.
pub fn pack(
    src: &Path,
    top: &str,
    recursive: bool,
    stamp: Stamp,
    out: impl Write,
) -> io::Result<Counts> {
    let meta = fs::metadata(src)?;
    if meta.is_dir() && !recursive {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is a directory; copy it with -r", src.display()),
        ));
    }
    let mut b = Builder::new(out);
    b.follow_symlinks(false);
    let mut counts = Counts::default();
    add(&mut b, src, Path::new(top), &meta, stamp, &mut counts)?;
    b.into_inner()?.flush()?;
    Ok(counts)
}

fn add<W: Write>(
    b: &mut Builder<W>,
    path: &Path,
    name: &Path,
    meta: &fs::Metadata,
    stamp: Stamp,
    counts: &mut Counts,
) -> io::Result<()> {
    let mut h = Header::new_gnu();
    h.set_metadata_in_mode(meta, HeaderMode::Complete);
    h.set_uid(stamp.uid.map_or(u64::from(meta.uid()), u64::from));
    h.set_gid(stamp.gid.map_or(u64::from(meta.gid()), u64::from));
    let ft = meta.file_type();
    if ft.is_dir() {
        counts.dirs += 1;
        h.set_size(0);
        b.append_data(&mut h, name, io::empty())?;
        let mut names: Vec<_> = fs::read_dir(path)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<_>>()?;
        names.sort();
        for n in names {
            let child = path.join(&n);
            let m = fs::symlink_metadata(&child)?;
            add(b, &child, &name.join(&n), &m, stamp, counts)?;
        }
    } else if ft.is_file() {
        if let Some(mode) = stamp.mode {
            h.set_mode(mode);
        }
        counts.files += 1;
        counts.bytes += meta.len();
        // Opened without following a symlink swapped in since the stat.
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(warren_sys::libc::O_NOFOLLOW | warren_sys::libc::O_NONBLOCK)
            .open(path)?;
        let len = f.metadata()?.len();
        h.set_size(len);
        // Exactly `len` bytes whatever the zone does to the file meanwhile: cut if it
        // grew, padded with zeros if it was truncated — a short entry would make the
        // tenant's bytes the stream's next header.
        b.append_data(
            &mut h,
            name,
            f.take(len).chain(std::io::repeat(0)).take(len),
        )?;
    } else if ft.is_symlink() {
        counts.links += 1;
        let target = fs::read_link(path)?;
        h.set_size(0);
        b.append_link(&mut h, name, target)?;
    } else {
        counts.skipped += 1;
    }
    Ok(())
}

/// `rel` as plain names only (no root, `..` or `.` beyond a leading one).
fn plain(rel: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir if out.as_os_str().is_empty() => {}
            _ => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// The zone's side of a copy in: unpack the stream into `dir`, its top entry renamed
/// `name`, keeping owners (the ids of the stream, as the zone sees them), modes and
/// times. Runs as the zone's root in the zone's namespaces.
pub fn unpack_in_zone(input: impl Read, dir: &Path, name: &str) -> io::Result<Counts> {
    let mut archive = tar::Archive::new(input);
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(true);
    archive.set_preserve_mtime(true);
    archive.set_overwrite(true);
    let mut counts = Counts::default();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let rel = plain(&path).ok_or_else(|| bad(&path))?;
        let mut parts = rel.components();
        parts.next();
        let rest = parts.as_path();
        let target = if rest.as_os_str().is_empty() {
            dir.join(name)
        } else {
            dir.join(name).join(rest)
        };
        let kind = entry.header().entry_type();
        match kind {
            EntryType::Directory => counts.dirs += 1,
            EntryType::Symlink => counts.links += 1,
            _ => {
                counts.files += 1;
                counts.bytes += entry.header().size()?;
            }
        }
        if kind == EntryType::Directory && target.is_dir() {
            // An existing directory is merged into, keeping its own owner and mode.
            continue;
        }
        entry
            .unpack(&target)
            .map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", target.display())))?;
    }
    Ok(counts)
}

fn bad(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: not a plain relative name", path.display()),
    )
}

/// The host's side of a copy out: unpack a stream the zone produced into `tmp` (a
/// fresh directory only this process writes), where every entry must lie beneath
/// `top`. Only regular files, directories and symlinks are made; owners are the
/// caller's, modes lose their set-id bits, no extended attribute is set.
pub fn unpack_on_host(input: impl Read, tmp: &Path, top: &str) -> io::Result<Counts> {
    let mut archive = tar::Archive::new(input);
    archive.set_preserve_permissions(false);
    archive.set_preserve_ownerships(false);
    archive.set_unpack_xattrs(false);
    archive.set_preserve_mtime(true);
    archive.set_overwrite(false);
    let mut counts = Counts::default();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let rel = plain(&path).ok_or_else(|| bad(&path))?;
        if rel.components().next() != Some(Component::Normal(top.as_ref())) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not beneath {top}", path.display()),
            ));
        }
        match entry.header().entry_type() {
            EntryType::Directory => counts.dirs += 1,
            EntryType::Symlink => counts.links += 1,
            EntryType::Regular | EntryType::Continuous => {
                counts.files += 1;
                counts.bytes += entry.header().size()?;
            }
            _ => {
                counts.skipped += 1;
                continue;
            }
        }
        if !entry.unpack_in(tmp)? {
            return Err(bad(&path));
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_only() {
        assert_eq!(plain(Path::new("a/b")), Some(PathBuf::from("a/b")));
        assert_eq!(plain(Path::new("./a")), Some(PathBuf::from("a")));
        assert_eq!(plain(Path::new("a/../b")), None);
        assert_eq!(plain(Path::new("/etc/passwd")), None);
        assert_eq!(plain(Path::new("")), None);
    }

    /// A stream with an entry outside `top`, or a `..`, is refused on the host and
    /// writes nothing outside the temporary directory.
    #[test]
    fn host_unpack_refuses_names_outside_the_top() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("tmp");
        fs::create_dir(&tmp).unwrap();
        for evil in ["other/file", "top/../../escape"] {
            let mut b = Builder::new(Vec::new());
            let mut h = Header::new_gnu();
            h.set_size(1);
            h.set_mode(0o644);
            h.set_entry_type(EntryType::Regular);
            // set_path refuses `..`; write the raw name as a hostile stream would.
            h.as_old_mut().name[..evil.len()].copy_from_slice(evil.as_bytes());
            h.set_cksum();
            b.append(&h, &b"x"[..]).unwrap();
            let data = b.into_inner().unwrap();
            assert!(unpack_on_host(&data[..], &tmp, "top").is_err(), "{evil}");
        }
        assert!(!dir.path().join("escape").exists());
        assert!(fs::read_dir(&tmp).unwrap().next().is_none());
    }

    /// A symlink entry followed by an entry through it stays a link: the file is
    /// refused rather than written where the link points.
    #[test]
    fn host_unpack_does_not_write_through_a_link_it_made() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("tmp");
        let outside = dir.path().join("outside");
        fs::create_dir_all(&tmp).unwrap();
        fs::create_dir_all(&outside).unwrap();
        let mut b = Builder::new(Vec::new());
        let mut h = Header::new_gnu();
        h.set_entry_type(EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        b.append_data(&mut h, "top", io::empty()).unwrap();
        let mut h = Header::new_gnu();
        h.set_entry_type(EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "top/l", &outside).unwrap();
        let mut h = Header::new_gnu();
        h.set_entry_type(EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(1);
        b.append_data(&mut h, "top/l/planted", &b"x"[..]).unwrap();
        let data = b.into_inner().unwrap();
        assert!(unpack_on_host(&data[..], &tmp, "top").is_err());
        assert!(!outside.join("planted").exists());
    }
}
