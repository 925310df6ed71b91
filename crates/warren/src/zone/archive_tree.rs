//! The trees of `warren export` / `import`: packing a private layer or a template root
//! into a tar stream, unpacking one into a new directory, and the digest that tells
//! whether two templates hold the same tree.
//!
//! Packing walks with [`warren_sys::walk`] (never following a symlink, never leaving
//! the layer's filesystem) and writes every entry as it is: types (device nodes
//! included: overlayfs's whiteouts are 0/0 character devices), modes with set-id bits,
//! extended attributes (hex in PAX `WARREN.xattr` records: overlayfs's opaque markers),
//! hard links, times; owners moved by `-base` so the archive holds the zone's own ids.
//!
//! Unpacking trusts nothing in the stream: every name must be plain relative
//! components (no `..`, no absolute path, no empty name), each directory on the way is
//! opened descriptor-relative with `O_NOFOLLOW` (a symlink the archive made earlier is
//! never followed), files are created `O_EXCL`, and a hard link may only name an entry
//! already unpacked beneath the same top. Owners are moved by `+base` into the new
//! zone's range; set-id bits, file capabilities and device nodes are kept as the
//! hostile-image rules allow (docs/isolation.md: nothing below the 0700 state root is
//! reachable by host users, and zone roots are mounted `nodev`). Only some extended
//! attributes are set ([`xattr_allowed`]).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};
use tar::{Builder, EntryType, Header};
use warren_sys::libc;
use warren_sys::tree::{self, Stat};
use warren_sys::walk::{self, Entry, Visitor};

/// Moving ids: `Down(base)` on export (host → zone ids), `Up(base)` on import.
#[derive(Debug, Clone, Copy)]
pub enum Ids {
    Keep,
    Down(u32),
    Up(u32),
}

impl Ids {
    fn map(self, id: u32) -> u32 {
        match self {
            Ids::Keep => id,
            Ids::Down(b) if id >= b && id - b < crate::idmap::RANGE => id - b,
            Ids::Down(_) => id,
            Ids::Up(b) => b.saturating_add(id),
        }
    }
}

struct Packer<'a, W: Write> {
    out: &'a mut Builder<W>,
    top: PathBuf,
    ids: Ids,
    links: HashMap<(u64, u64), PathBuf>,
}

fn rel(path: &[OsString], name: &OsStr) -> PathBuf {
    let mut p: PathBuf = path.iter().collect();
    p.push(name);
    p
}

fn header_for(st: &Stat, ids: Ids) -> Header {
    let mut h = Header::new_gnu();
    h.set_mode(st.mode & 0o7777);
    h.set_uid(ids.map(st.uid).into());
    h.set_gid(ids.map(st.gid).into());
    h.set_mtime(st.mtime.0.max(0) as u64);
    h.set_size(0);
    h
}

impl<W: Write> Packer<'_, W> {
    /// The entry's PAX records: its extended attributes (those an import sets) as
    /// `WARREN.xattr` = `hex(name):hex(value)`, and a symlink's target as
    /// `WARREN.linkpath` = hex, byte for byte. Hex because the tar crate's reader splits
    /// PAX data at every newline, which binary values (a file capability, an overlayfs
    /// handle) and link targets may hold; and the header's link-name field would be
    /// normalised (`/` read back as `//`).
    fn pax(&mut self, dir: BorrowedFd<'_>, name: &OsStr, link: Option<&OsStr>) -> io::Result<()> {
        let path = tree::fd_path(dir, name)?;
        let mut pax: Vec<(&str, Vec<u8>)> = Vec::new();
        if let Some(t) = link {
            pax.push((PAX_LINK, hex(t.as_bytes()).into_bytes()));
        }
        for key in warren_sys::fs::llistxattr(&path)? {
            if !xattr_allowed(&key) {
                continue;
            }
            let value = warren_sys::fs::lgetxattr(&path, &key)?;
            pax.push((
                PAX_XATTR,
                format!("{}:{}", hex(&key), hex(&value)).into_bytes(),
            ));
        }
        if !pax.is_empty() {
            self.out
                .append_pax_extensions(pax.iter().map(|(k, v)| (*k, v.as_slice())))?;
        }
        Ok(())
    }

    fn add(&mut self, dir: BorrowedFd<'_>, name: &OsStr, st: &Stat, at: PathBuf) -> io::Result<()> {
        let path = self.top.join(&at);
        let mut h = header_for(st, self.ids);
        if st.nlink > 1 && !st.is_dir() {
            if let Some(first) = self.links.get(&(st.dev, st.ino)) {
                h.set_entry_type(EntryType::Link);
                let target = self.top.join(first);
                return self.out.append_link(&mut h, &path, &target);
            }
            self.links.insert((st.dev, st.ino), at);
        }
        let target = match st.is_symlink() {
            true => Some(tree::readlink_at(dir, name)?),
            false => None,
        };
        self.pax(dir, name, target.as_deref())?;
        match st.kind() {
            libc::S_IFDIR => {
                h.set_entry_type(EntryType::Directory);
                self.out.append_data(&mut h, &path, io::empty())
            }
            libc::S_IFREG => {
                let f = File::from(tree::open_at(dir, name, libc::O_RDONLY, 0)?);
                let now = tree::fstat(f.as_fd())?;
                if !now.same_inode(st) {
                    return Err(walk::changed(name));
                }
                h.set_entry_type(EntryType::Regular);
                h.set_size(st.size);
                self.out.append_data(&mut h, &path, f.take(st.size))
            }
            libc::S_IFLNK => {
                // The target is in the PAX `linkpath` record.
                h.set_entry_type(EntryType::Symlink);
                self.out.append_data(&mut h, &path, io::empty())
            }
            k @ (libc::S_IFCHR | libc::S_IFBLK | libc::S_IFIFO) => {
                h.set_entry_type(match k {
                    libc::S_IFCHR => EntryType::Char,
                    libc::S_IFBLK => EntryType::Block,
                    _ => EntryType::Fifo,
                });
                h.set_device_major(libc::major(st.rdev))?;
                h.set_device_minor(libc::minor(st.rdev))?;
                self.out.append_data(&mut h, &path, io::empty())
            }
            // Sockets are made by the programs that listen on them.
            _ => Ok(()),
        }
    }
}

impl<W: Write> Visitor for Packer<'_, W> {
    fn enter(&mut self, e: &Entry<'_>) -> io::Result<bool> {
        self.add(e.parent, e.name, e.stat, rel(e.path, e.name))?;
        Ok(true)
    }
}

/// Append the tree at `src` (a directory) as `top/…` to `out`, ids moved by `ids`.
pub fn pack<W: Write>(out: &mut Builder<W>, src: &Path, top: &str, ids: Ids) -> io::Result<()> {
    let dir = tree::open_dir(src)?;
    let st = tree::fstat(dir.as_fd())?;
    let mut h = header_for(&st, ids);
    h.set_entry_type(EntryType::Directory);
    out.append_data(&mut h, top, io::empty())?;
    let mut p = Packer {
        out,
        top: PathBuf::from(top),
        ids,
        links: HashMap::new(),
    };
    walk::walk(dir.as_fd(), None, &mut p)
}

const PAX_XATTR: &str = "WARREN.xattr";
const PAX_LINK: &str = "WARREN.linkpath";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &[u8]) -> io::Result<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return Err(bad("a PAX record with an odd number of hex digits"));
    }
    s.chunks(2)
        .map(|c| {
            std::str::from_utf8(c)
                .ok()
                .and_then(|c| u8::from_str_radix(c, 16).ok())
                .ok_or_else(|| bad("a PAX record that is not hex"))
        })
        .collect()
}

/// The entry's warren PAX records, decoded: (link target, [(xattr name, value)]).
type Records = (Option<Vec<u8>>, Vec<(Vec<u8>, Vec<u8>)>);

fn records<R: Read>(e: &mut tar::Entry<'_, R>) -> io::Result<Records> {
    let mut out: Records = (None, Vec::new());
    let Some(exts) = e.pax_extensions()? else {
        return Ok(out);
    };
    for ext in exts {
        let ext = ext?;
        match ext.key_bytes() {
            k if k == PAX_LINK.as_bytes() => out.0 = Some(unhex(ext.value_bytes())?),
            k if k == PAX_XATTR.as_bytes() => {
                let v = ext.value_bytes();
                let colon = v
                    .iter()
                    .position(|b| *b == b':')
                    .ok_or_else(|| bad("a malformed xattr record"))?;
                out.1.push((unhex(&v[..colon])?, unhex(&v[colon + 1..])?));
            }
            _ => {}
        }
    }
    Ok(out)
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// The plain components of an archive name; anything else is refused.
pub fn plain_components(path: &Path) -> io::Result<Vec<OsString>> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n.to_os_string()),
            Component::CurDir => {}
            _ => {
                return Err(bad(format!(
                    "entry {} is not a plain relative name (absolute, or with '..')",
                    path.display()
                )))
            }
        }
    }
    if out.is_empty() {
        return Err(bad("an entry with an empty name"));
    }
    Ok(out)
}

/// Unpacks entries beneath one new directory, descriptor-relative.
pub struct Unpacker {
    root: OwnedFd,
    /// The archive's top name for this tree (`layer`, `template/root`'s components).
    top: Vec<OsString>,
    ids: Ids,
    /// Directories' modes and owners, applied last (a read-only directory would stop
    /// its own entries).
    dirs: Vec<(Vec<OsString>, u32, u32, u32)>,
}

impl Unpacker {
    /// Unpack the entries named `top/…` into the existing, empty directory `root`
    /// (made by warren).
    pub fn new(root: &Path, top: &str, ids: Ids) -> io::Result<Unpacker> {
        Ok(Unpacker {
            root: tree::open_dir(root)?,
            top: plain_components(Path::new(top))?,
            ids,
            dirs: Vec::new(),
        })
    }

    /// Open the directory `names` (from the root), never following a symlink.
    fn open(&self, names: &[OsString]) -> io::Result<OwnedFd> {
        let mut dir = self.root.try_clone()?;
        for n in names {
            dir = tree::open_dir_at(dir.as_fd(), n).map_err(|e| {
                bad(format!(
                    "{}: a directory on the way is missing or not a directory ({e})",
                    PathBuf::from_iter(names).display()
                ))
            })?;
        }
        Ok(dir)
    }

    /// The names of `path` beneath this tree's top, if it lies there (`Some(empty)`:
    /// the top itself).
    pub fn beneath<'a>(&self, path: &'a [OsString]) -> Option<&'a [OsString]> {
        path.strip_prefix(self.top.as_slice())
    }

    /// Unpack one entry whose name relative to the root is `names` (the top itself
    /// when empty: the root directory's owner and mode).
    pub fn entry<R: Read>(
        &mut self,
        e: &mut tar::Entry<'_, R>,
        names: &[OsString],
    ) -> io::Result<()> {
        let Some((last, parents)) = names.split_last() else {
            let h = e.header();
            let (uid, gid) = (self.ids.map(h.uid()? as u32), self.ids.map(h.gid()? as u32));
            self.dirs.push((Vec::new(), h.mode()? & 0o7777, uid, gid));
            return Ok(());
        };
        let dir = self.open(parents)?;
        let h = e.header().clone();
        let (link, xattrs) = records(e)?;
        let mode = h.mode()? & 0o7777;
        let (uid, gid) = (self.ids.map(h.uid()? as u32), self.ids.map(h.gid()? as u32));
        let kind = h.entry_type();
        match kind {
            EntryType::Directory => {
                match tree::mkdir_at(dir.as_fd(), last, 0o700) {
                    Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                        tree::open_dir_at(dir.as_fd(), last)?;
                    }
                    r => r?,
                }
                self.dirs.push((names.to_vec(), mode, uid, gid));
            }
            EntryType::Regular | EntryType::Continuous => {
                let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
                let mut f = File::from(tree::open_at(dir.as_fd(), last, flags, 0o600)?);
                io::copy(e, &mut f)?;
            }
            EntryType::Symlink => {
                let target = match link {
                    Some(t) => t,
                    None => e
                        .link_name_bytes()
                        .ok_or_else(|| bad("a symlink without a target"))?
                        .into_owned(),
                };
                tree::symlink_at(OsStr::from_bytes(&target), dir.as_fd(), last)?;
            }
            EntryType::Link => {
                let target = e
                    .link_name()?
                    .ok_or_else(|| bad("a hard link without a target"))?;
                let tnames = plain_components(&target)?;
                let inside = self
                    .beneath(&tnames)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| bad("a hard link to an entry outside its own tree"))?;
                let (tlast, tparents) = inside.split_last().expect("not empty");
                let tdir = self.open(tparents)?;
                let st = tree::stat_at(tdir.as_fd(), tlast)?;
                if st.is_dir() {
                    return Err(bad("a hard link to a directory"));
                }
                return tree::link_at(tdir.as_fd(), tlast, dir.as_fd(), last);
            }
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                let t = match kind {
                    EntryType::Char => libc::S_IFCHR,
                    EntryType::Block => libc::S_IFBLK,
                    _ => libc::S_IFIFO,
                };
                let (ma, mi) = (
                    h.device_major()?.unwrap_or(0),
                    h.device_minor()?.unwrap_or(0),
                );
                tree::mknod_at(dir.as_fd(), last, t | 0o600, libc::makedev(ma, mi))?;
            }
            // PAX and GNU long-name records are read by the tar crate itself; other
            // kinds (sparse GNU files, unknown ones) are refused.
            other => return Err(bad(format!("an entry of unsupported kind {other:?}"))),
        }
        if kind == EntryType::Directory {
            return self.xattrs(&xattrs, dir.as_fd(), last);
        }
        tree::chown_at(dir.as_fd(), last, uid, gid)?;
        if kind != EntryType::Symlink {
            tree::chmod_at(dir.as_fd(), last, mode)?;
        }
        self.xattrs(&xattrs, dir.as_fd(), last)?;
        let mtime = (h.mtime()? as i64, 0);
        tree::utimes_at(dir.as_fd(), last, mtime, mtime)
    }

    fn xattrs(
        &self,
        xattrs: &[(Vec<u8>, Vec<u8>)],
        dir: BorrowedFd<'_>,
        name: &OsStr,
    ) -> io::Result<()> {
        if xattrs.is_empty() {
            return Ok(());
        }
        let path = tree::fd_path(dir, name)?;
        for (key, value) in xattrs {
            if xattr_allowed(key) {
                warren_sys::fs::lsetxattr(&path, key, value)?;
            }
        }
        Ok(())
    }

    /// Give the directories their owners and modes (deepest first).
    pub fn finish(mut self) -> io::Result<()> {
        self.dirs.sort_by_key(|d| std::cmp::Reverse(d.0.len()));
        for (names, mode, uid, gid) in &self.dirs {
            let dir = self.open(names)?;
            tree::fchown(dir.as_fd(), *uid, *gid)?;
            tree::fchmod(dir.as_fd(), *mode)?;
        }
        Ok(())
    }
}

/// The extended attributes an import sets: the user namespace, file capabilities,
/// POSIX ACLs and overlayfs's opaque marker. Others (overlayfs's redirect, metacopy,
/// origin and index records, which name paths and inodes of the exporting host;
/// security labels of its policy) are left out.
fn xattr_allowed(key: &[u8]) -> bool {
    key.starts_with(b"user.")
        || key == b"security.capability"
        || key.starts_with(b"system.posix_acl_")
        || key == b"trusted.overlay.opaque"
}

/// Make the tree at `root` durable: fsync every regular file and directory in it
/// (the filesystem commits them together, so an untouched layer costs about one
/// journal commit). Used before a snapshot, a restored layer or an imported zone is
/// renamed into place, so a power cut never leaves one that looks whole but is not.
pub fn sync_tree(root: &Path) -> io::Result<()> {
    struct S;
    impl Visitor for S {
        fn enter(&mut self, e: &Entry<'_>) -> io::Result<bool> {
            if e.stat.is_file() {
                let flags = libc::O_RDONLY | libc::O_NONBLOCK;
                File::from(tree::open_at(e.parent, e.name, flags, 0)?).sync_all()?;
            }
            Ok(true)
        }
        fn leave(
            &mut self,
            _: &Entry<'_>,
            dir: BorrowedFd<'_>,
            _: Option<BorrowedFd<'_>>,
        ) -> io::Result<()> {
            File::from(dir.try_clone_to_owned()?).sync_all()
        }
    }
    let dir = tree::open_dir(root)?;
    walk::walk(dir.as_fd(), None, &mut S)?;
    File::from(dir).sync_all()
}

/// A digest of the tree at `root`: every entry's relative name, type, mode, owner,
/// size and content (file bytes, link target, device number), sorted by name. Times
/// are left out, so the same tree made on two hosts has the same digest.
pub fn digest(root: &Path) -> io::Result<String> {
    struct D(Vec<(Vec<u8>, [u8; 32])>);
    impl Visitor for D {
        fn enter(&mut self, e: &Entry<'_>) -> io::Result<bool> {
            let name = rel(e.path, e.name);
            let st = e.stat;
            let mut h = Sha256::new();
            h.update(format!("{:o} {} {} {}\0", st.mode, st.uid, st.gid, st.size));
            match st.kind() {
                libc::S_IFREG => {
                    let mut f = File::from(tree::open_at(e.parent, e.name, libc::O_RDONLY, 0)?);
                    io::copy(&mut f, &mut h)?;
                }
                libc::S_IFLNK => h.update(tree::readlink_at(e.parent, e.name)?.as_bytes()),
                libc::S_IFCHR | libc::S_IFBLK => h.update(st.rdev.to_le_bytes()),
                _ => {}
            }
            self.0
                .push((name.as_os_str().as_bytes().to_vec(), h.finalize().into()));
            Ok(true)
        }
    }
    let dir = tree::open_dir(root)?;
    let mut d = D(Vec::new());
    walk::walk(dir.as_fd(), None, &mut d)?;
    d.0.sort();
    let mut all = Sha256::new();
    for (name, h) in &d.0 {
        all.update(name);
        all.update([0]);
        all.update(h);
    }
    Ok(format!("sha256:{:x}", all.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_plain_and_relative() {
        let ok = plain_components(Path::new("./layer/a/b")).unwrap();
        assert_eq!(ok, vec![OsString::from("layer"), "a".into(), "b".into()]);
        for bad in ["/etc/passwd", "layer/../x", "..", "", "."] {
            assert!(plain_components(Path::new(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ids_move_between_ranges() {
        let base = 1 << 30;
        assert_eq!(Ids::Down(base).map(base + 1000), 1000);
        // An id outside the zone's range stays (a host id in a template).
        assert_eq!(Ids::Down(base).map(7), 7);
        assert_eq!(Ids::Up(base).map(1000), base + 1000);
        assert_eq!(Ids::Keep.map(42), 42);
    }

    #[test]
    fn pax_values_survive_newlines() {
        let v = b"a\n=\x00\xff";
        assert_eq!(unhex(hex(v).as_bytes()).unwrap(), v);
        assert!(unhex(b"abc").is_err() && unhex(b"zz").is_err());
    }

    #[test]
    fn only_known_xattrs_are_set() {
        assert!(xattr_allowed(b"user.mime"));
        assert!(xattr_allowed(b"security.capability"));
        assert!(xattr_allowed(b"trusted.overlay.opaque"));
        assert!(!xattr_allowed(b"trusted.overlay.redirect"));
        assert!(!xattr_allowed(b"security.selinux"));
    }

    #[test]
    fn digest_ignores_times_and_sees_content() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        for t in [&a, &b] {
            std::fs::create_dir_all(t.join("etc")).unwrap();
            std::fs::write(t.join("etc/hostname"), "z\n").unwrap();
            std::os::unix::fs::symlink("hostname", t.join("etc/link")).unwrap();
        }
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000);
        File::options()
            .write(true)
            .open(b.join("etc/hostname"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(digest(&a).unwrap(), digest(&b).unwrap());
        std::fs::write(b.join("etc/hostname"), "y\n").unwrap();
        assert_ne!(digest(&a).unwrap(), digest(&b).unwrap());
    }
}
