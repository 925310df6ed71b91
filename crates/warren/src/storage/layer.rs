//! The one extractor of tar streams into a template's root: `--from-tar` (one stream)
//! and `--from-oci` (each image layer in order, with whiteouts).
//!
//! The stream is hostile (docs/images.md, "Hostile images"). Every entry is written
//! descriptor-relative inside the root, never through a symlink:
//!
//! - names are plain relative paths: an absolute name or a `..` component refuses the
//!   whole stream;
//! - the entry's parent directories are opened one name at a time with `O_NOFOLLOW |
//!   O_DIRECTORY` from the root's descriptor, so a symlink an earlier entry or layer
//!   made (`lib -> /`, `lib -> ../..`) refuses the stream instead of being followed;
//!   missing parents are made as directories;
//! - symlinks are stored as text, never resolved; hard links must name an entry
//!   already inside the root, reached the same way;
//! - device nodes are dropped (counted) or kept, per [`Rules`]; FIFOs are kept;
//! - owners and modes (set-id bits included) are kept as the image has them: the
//!   template is reachable by root only and zones run with `no_new_privs`
//!   (docs/isolation.md); extended attributes are kept in the `user.` namespace and
//!   `security.capability`, dropped otherwise (`trusted.overlay.*` would steer the
//!   zone's overlay);
//! - with [`Rules::whiteouts`], `.wh.NAME` removes `NAME` and `.wh..wh..opq` empties
//!   its directory of what earlier layers put there (the OCI image-layer rules).

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;
use tar::EntryType;
use warren_sys::libc;
use warren_sys::tree;

/// What a stream may do besides making files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Honour OCI whiteouts (`.wh.NAME`, `.wh..wh..opq`); otherwise they are files.
    pub whiteouts: bool,
    /// Make character and block device nodes (else they are dropped and counted).
    pub keep_devices: bool,
}

/// What an extraction made.
#[derive(Debug, Default, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Applied {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub hardlinks: u64,
    pub whiteouts: u64,
    /// Device nodes left out ([`Rules::keep_devices`] false).
    pub devices_dropped: u64,
    /// Extended attributes left out (namespaces other than `user.` and
    /// `security.capability`).
    pub xattrs_dropped: u64,
    pub bytes: u64,
}

impl Applied {
    pub fn add(&mut self, o: &Applied) {
        self.files += o.files;
        self.dirs += o.dirs;
        self.symlinks += o.symlinks;
        self.hardlinks += o.hardlinks;
        self.whiteouts += o.whiteouts;
        self.devices_dropped += o.devices_dropped;
        self.xattrs_dropped += o.xattrs_dropped;
        self.bytes += o.bytes;
    }
}

/// Why an entry was refused (the caller names the stream: `--from-tar FILE`,
/// `layer 2 of 3 (sha256:…)`).
fn refused(entry: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("entry {:?}: {why}", entry.display().to_string()),
    )
}

/// `rel` as plain names (a leading `./` and `.` components dropped); `None` for an
/// absolute name or one with `..`. The root itself is the empty list.
pub fn plain(rel: &Path) -> Option<Vec<OsString>> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n.to_os_string()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

const WHITEOUT: &[u8] = b".wh.";
const OPAQUE: &[u8] = b".wh..wh..opq";

/// The kernel's `dev_t` of `major:minor` (glibc's `makedev`).
fn makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xffff_f000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0xff)
}

/// One extraction into the root held by `root`.
struct Extractor<'a> {
    root: BorrowedFd<'a>,
    rules: Rules,
    /// Paths this stream made (an opaque marker keeps them, removes the rest).
    made: HashSet<PathBuf>,
    /// The last parent opened, by its names (entries come directory by directory).
    cached: Option<(Vec<OsString>, OwnedFd)>,
    n: Applied,
}

impl Extractor<'_> {
    /// Open (making what is missing, if `create`) the directory at `names` beneath the
    /// root, one name at a time and never through a symlink.
    fn open_dir(&mut self, names: &[OsString], create: bool, entry: &Path) -> io::Result<OwnedFd> {
        if let Some((p, fd)) = &self.cached {
            if p == names {
                return fd.try_clone();
            }
        }
        let mut dir = tree::open_at(self.root, OsStr::new("."), libc::O_PATH, 0)?;
        for (i, n) in names.iter().enumerate() {
            let flags = libc::O_PATH | libc::O_DIRECTORY;
            dir = match tree::open_at(dir.as_fd(), n, flags, 0) {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                    tree::mkdir_at(dir.as_fd(), n, 0o755)?;
                    // Made by this stream: an opaque marker in its parent keeps it.
                    self.made.insert(names[..=i].iter().collect());
                    tree::open_at(dir.as_fd(), n, flags, 0)?
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
                    let at: PathBuf = names[..=i].iter().collect();
                    return Err(refused(
                        entry,
                        format_args!(
                            "{} is a symlink or not a directory; an image may not write through a link, fix the image",
                            at.display()
                        ),
                    ));
                }
                Err(e) => return Err(e),
            };
        }
        self.cached = Some((names.to_vec(), dir.try_clone()?));
        Ok(dir)
    }

    /// Remove whatever is at `name` in `dir` (a whole tree for a directory).
    fn remove(&mut self, dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
        match tree::stat_at(dir, name) {
            Ok(st) if st.is_dir() => {
                self.cached = None;
                crate::treeops::remove_tree(&tree::fd_path(dir, name)?)
            }
            Ok(_) => tree::unlink_at(dir, name, false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn entry<R: Read>(&mut self, mut e: tar::Entry<'_, R>) -> io::Result<()> {
        let path = e.path()?.into_owned();
        let names = plain(&path).ok_or_else(|| {
            refused(
                &path,
                "an absolute name or one with '..' (it would leave the root)",
            )
        })?;
        let kind = e.header().entry_type();
        let Some((name, parents)) = names.split_last() else {
            return Ok(()); // the root itself ("./") keeps warren's owner and mode
        };
        if matches!(kind, EntryType::XGlobalHeader | EntryType::XHeader) {
            return Ok(());
        }
        let dir = self.open_dir(parents, true, &path)?;
        let bytes = name.as_bytes();
        if self.rules.whiteouts && bytes.starts_with(WHITEOUT) {
            self.n.whiteouts += 1;
            if bytes == OPAQUE {
                return self.opaque(dir.as_fd(), parents);
            }
            let hidden = OsStr::from_bytes(&bytes[WHITEOUT.len()..]);
            if hidden.is_empty() || hidden == "." || hidden == ".." {
                return Err(refused(&path, "a whiteout of no name"));
            }
            return self.remove(dir.as_fd(), hidden);
        }
        let full: PathBuf = names.iter().collect();
        let existing = tree::stat_at(dir.as_fd(), name).ok();
        match (&existing, kind) {
            // A directory over a directory: merged, its metadata updated below.
            (Some(st), EntryType::Directory) if st.is_dir() => {}
            (Some(_), _) => self.remove(dir.as_fd(), name)?,
            (None, _) => {}
        }
        let h = e.header();
        let mode = h.mode()? & 0o7777;
        let (uid, gid) = (h.uid()? as u32, h.gid()? as u32);
        let mtime = h.mtime().unwrap_or(0) as i64;
        match kind {
            EntryType::Directory => {
                if existing.as_ref().is_none_or(|st| !st.is_dir()) {
                    tree::mkdir_at(dir.as_fd(), name, 0o700)?;
                }
                self.n.dirs += 1;
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
                let mut f = File::from(tree::open_at(dir.as_fd(), name, flags, 0o600)?);
                self.n.bytes += io::copy(&mut e, &mut f)?;
                self.n.files += 1;
            }
            EntryType::Symlink => {
                let target = e
                    .link_name()?
                    .ok_or_else(|| refused(&path, "a symlink without a target"))?;
                tree::symlink_at(target.as_os_str(), dir.as_fd(), name)?;
                self.n.symlinks += 1;
            }
            EntryType::Link => {
                let target = e.link_name()?.map(|t| t.into_owned());
                let tnames = target.as_deref().and_then(plain).filter(|t| !t.is_empty());
                let Some((tname, tparents)) = tnames.as_ref().and_then(|t| t.split_last()) else {
                    return Err(refused(
                        &path,
                        "a hard link to an absolute name or one with '..'; hard links must stay inside the image",
                    ));
                };
                let tdir = self.open_dir(tparents, false, &path)?;
                tree::link_at(tdir.as_fd(), tname, dir.as_fd(), name).map_err(|err| {
                    refused(
                        &path,
                        format_args!("hard link to {:?}: {err}", target.unwrap_or_default()),
                    )
                })?;
                self.n.hardlinks += 1;
                self.made.insert(full);
                return Ok(()); // the inode keeps the metadata of its first name
            }
            EntryType::Char | EntryType::Block if !self.rules.keep_devices => {
                self.n.devices_dropped += 1;
                return Ok(());
            }
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                // A FIFO's device fields mean nothing (and are often left blank).
                let (major, minor) = if kind == EntryType::Fifo {
                    (0, 0)
                } else {
                    (
                        h.device_major()?.unwrap_or(0),
                        h.device_minor()?.unwrap_or(0),
                    )
                };
                let t = match kind {
                    EntryType::Char => libc::S_IFCHR,
                    EntryType::Block => libc::S_IFBLK,
                    _ => libc::S_IFIFO,
                };
                let dev = makedev(u64::from(major), u64::from(minor));
                tree::mknod_at(dir.as_fd(), name, t | 0o600, dev)?;
            }
            other => {
                return Err(refused(
                    &path,
                    format_args!("entry type {other:?} is not part of a root filesystem"),
                ))
            }
        }
        tree::chown_at(dir.as_fd(), name, uid, gid)?;
        if kind != EntryType::Symlink {
            tree::chmod_at(dir.as_fd(), name, mode)?;
        }
        self.xattrs(&mut e, dir.as_fd(), name)?;
        if kind != EntryType::Directory {
            tree::utimes_at(dir.as_fd(), name, (mtime, 0), (mtime, 0))?;
        }
        self.made.insert(full);
        Ok(())
    }

    /// The entry's `SCHILY.xattr.*` records: `user.*` and `security.capability` set
    /// (after the chown, which clears a capability), the rest dropped.
    fn xattrs<R: Read>(
        &mut self,
        e: &mut tar::Entry<'_, R>,
        dir: BorrowedFd<'_>,
        name: &OsStr,
    ) -> io::Result<()> {
        let Some(exts) = e.pax_extensions()? else {
            return Ok(());
        };
        let mut wanted = Vec::new();
        for ext in exts {
            let ext = ext?;
            let Some(key) = ext.key_bytes().strip_prefix(b"SCHILY.xattr.") else {
                continue;
            };
            if key.starts_with(b"user.") || key == b"security.capability" {
                wanted.push((key.to_vec(), ext.value_bytes().to_vec()));
            } else {
                self.n.xattrs_dropped += 1;
            }
        }
        for (k, v) in wanted {
            warren_sys::fs::lsetxattr(&tree::fd_path(dir, name)?, &k, &v)?;
        }
        Ok(())
    }

    /// `.wh..wh..opq` in the directory at `parents`: remove its entries that this
    /// stream did not make.
    fn opaque(&mut self, dir: BorrowedFd<'_>, parents: &[OsString]) -> io::Result<()> {
        let base: PathBuf = parents.iter().collect();
        let listing = tree::open_at(dir, OsStr::new("."), libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        for n in tree::read_names(listing.as_fd())? {
            if !self.made.contains(&base.join(&n)) {
                self.remove(dir, &n)?;
            }
        }
        Ok(())
    }
}

/// Unpack the tar stream `input` into the directory held by `root` under `rules`.
/// The stream is read to its end.
pub fn apply(root: BorrowedFd<'_>, mut input: impl Read, rules: Rules) -> io::Result<Applied> {
    let mut x = Extractor {
        root,
        rules,
        made: HashSet::new(),
        cached: None,
        n: Applied::default(),
    };
    {
        let mut archive = tar::Archive::new(&mut input);
        for entry in archive.entries()? {
            x.entry(entry?)?;
        }
    }
    // Past the end-of-archive blocks: read what is left, so that a digest over the
    // whole stream is complete.
    io::copy(&mut input, &mut io::sink())?;
    Ok(x.n)
}

/// The decompressor for a layer's bytes: by media type, or by magic number where the
/// format does not say (docker-archive).
pub fn decompress<'r>(media: &str, mut r: impl Read + 'r) -> io::Result<Box<dyn Read + 'r>> {
    let plain = media.ends_with(".tar")
        || media.ends_with("tar.diff")
        || media.ends_with(".rootfs.diff.tar");
    let gz = media.ends_with("+gzip") || media.ends_with(".tar.gzip");
    let zst = media.ends_with("+zstd");
    if !(media.is_empty() || plain || gz || zst) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "media type {media:?} is not a layer warren can apply (tar, tar+gzip, tar+zstd)"
            ),
        ));
    }
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut head[got..])? {
            0 => break,
            n => got += n,
        }
    }
    let r = io::Cursor::new(head[..got].to_vec()).chain(r);
    let is_gz = head[..2] == [0x1f, 0x8b];
    let is_zst = head == [0x28, 0xb5, 0x2f, 0xfd];
    if gz || (media.is_empty() && is_gz) {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(r)))
    } else if zst || (media.is_empty() && is_zst) {
        // The same zstd decoder as `warren import` (zone/archive.rs).
        let d = zstd::Decoder::new(r)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("zstd: {e}")))?;
        Ok(Box::new(d))
    } else {
        Ok(Box::new(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    type Raw<'a> = (&'a str, EntryType, &'a str, &'a [u8]);

    fn raw_tar(entries: &[Raw<'_>]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, link, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o755);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            if *kind == EntryType::Char {
                h.set_device_major(1).unwrap();
                h.set_device_minor(3).unwrap();
            }
            let old = h.as_old_mut();
            old.name[..name.len()].copy_from_slice(name.as_bytes());
            old.linkname[..link.len()].copy_from_slice(link.as_bytes());
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    const OCI: Rules = Rules {
        whiteouts: true,
        keep_devices: false,
    };

    fn run(root: &Path, entries: &[Raw<'_>]) -> io::Result<Applied> {
        let fd = tree::open_dir(root).unwrap();
        apply(fd.as_fd(), &raw_tar(entries)[..], OCI)
    }

    #[test]
    fn layers_whiteouts_and_opaque_dirs() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        fs::create_dir(&root).unwrap();
        run(
            &root,
            &[
                ("a/", EntryType::Directory, "", b""),
                ("a/old", EntryType::Regular, "", b"1"),
                ("b/", EntryType::Directory, "", b""),
                ("b/x", EntryType::Regular, "", b"2"),
                ("gone", EntryType::Regular, "", b"3"),
                ("h1", EntryType::Regular, "", b"hl"),
            ],
        )
        .unwrap();
        let n = run(
            &root,
            &[
                ("./a/new", EntryType::Regular, "", b"4"),
                ("a/.wh..wh..opq", EntryType::Regular, "", b""),
                (".wh.gone", EntryType::Regular, "", b""),
                ("b/.wh.x", EntryType::Regular, "", b""),
                ("h2", EntryType::Link, "h1", b""),
                ("null", EntryType::Char, "", b""),
            ],
        )
        .unwrap();
        assert_eq!((n.whiteouts, n.hardlinks, n.devices_dropped), (3, 1, 1));
        assert!(root.join("a/new").exists() && !root.join("a/old").exists());
        assert!(!root.join("gone").exists() && !root.join("b/x").exists());
        assert!(root.join("b").is_dir() && !root.join("null").exists());
        use std::os::unix::fs::MetadataExt;
        assert_eq!(fs::metadata(root.join("h2")).unwrap().nlink(), 2);
    }

    #[test]
    fn nothing_escapes() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        let out = d.path().join("out");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&out).unwrap();
        let o = out.to_str().unwrap();
        // Each refused with its reason (not with some other error on the way).
        for (why, entries) in [
            (
                "would leave the root",
                vec![("../out/x", EntryType::Regular, "", &b"x"[..])],
            ),
            (
                "would leave the root",
                vec![("/tmp/x", EntryType::Regular, "", &b"x"[..])],
            ),
            (
                "l is a symlink",
                vec![
                    ("l", EntryType::Symlink, o, &b""[..]),
                    ("l/x", EntryType::Regular, "", &b"x"[..]),
                ],
            ),
            (
                "r is a symlink",
                vec![
                    ("r", EntryType::Symlink, "../out", &b""[..]),
                    ("r/x", EntryType::Regular, "", &b"x"[..]),
                ],
            ),
            (
                "a whiteout of no name",
                vec![(".wh...", EntryType::Regular, "", &b""[..])],
            ),
            (
                "hard links must stay inside",
                vec![("h", EntryType::Link, "../out/y", &b""[..])],
            ),
        ] {
            let e = run(&root, &entries).unwrap_err().to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
        assert_eq!(fs::read_dir(&out).unwrap().count(), 0);
    }
}
