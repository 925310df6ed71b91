//! Host-side operations on trees a zone or an image controls: copy (clone, install,
//! template from a directory), remove (uninstall, delete), empty in place (a zone's
//! /dev/shm at boot), measure (`stat`'s disk figure), re-own (`idmap::shift_tree`).
//!
//! All of them run on [`warren_sys::walk`]: descriptor-relative, never following a
//! symlink found in the tree, never leaving its filesystem, with a bounded number of
//! open descriptors however deep the tree is (docs/isolation.md, "Host-side file
//! operations"). Only the parent of the top path given by the caller (a directory of
//! the state root, which warren owns, or an operator's source) is resolved by name;
//! the top's own last component is never followed.
//!
//! Copies keep what a root filesystem needs: types, modes (set-id bits included),
//! owners (optionally moved from one id range to another), times, extended attributes
//! (overlayfs keeps whiteouts and opaque markers in them), hard links (one inode per
//! source inode) and holes (reflink where the filesystem can, else only the data
//! ranges are copied).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use warren_sys::libc;
use warren_sys::tree::{self, Stat};
use warren_sys::walk::{self, Entry, Visitor};

use crate::idmap::IdRange;

/// Moving owners from one id range to another; ids outside `from` stay as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shift {
    pub from: IdRange,
    pub to: IdRange,
}

impl Shift {
    pub fn id(&self, id: u32) -> u32 {
        if id >= self.from.base && id <= self.from.last() {
            self.to.base + (id - self.from.base)
        } else {
            id
        }
    }
}

fn ids(shift: Option<Shift>, st: &Stat) -> (u32, u32) {
    shift.map_or((st.uid, st.gid), |s| (s.id(st.uid), s.id(st.gid)))
}

/// How many times a measure is retried when the tree changes under it.
const RETRIES: usize = 3;

/// Split `path` into its parent (opened as a directory) and its last name. The parent
/// is the caller's (a directory of the state root, an operator's source such as
/// `/bin` on a merged-/usr host) and is resolved normally; the last name is not
/// followed by anything that uses it.
fn parent_and_name(path: &Path) -> io::Result<(OwnedFd, OsString)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((OwnedFd::from(File::open(parent)?), name.to_os_string()))
}

fn copy_xattrs(src: &Path, dst: &Path) -> io::Result<()> {
    for name in warren_sys::fs::llistxattr(src)? {
        let value = warren_sys::fs::lgetxattr(src, &name)?;
        warren_sys::fs::lsetxattr(dst, &name, &value)?;
    }
    Ok(())
}

/// Owner, mode, extended attributes, times of `dst_name` in `dst` from `st` and the
/// source entry `src_name` in `src`, in the order that keeps set-id bits and file
/// capabilities (chown clears both).
fn finish(
    src: BorrowedFd<'_>,
    src_name: &OsStr,
    dst: BorrowedFd<'_>,
    dst_name: &OsStr,
    st: &Stat,
    shift: Option<Shift>,
) -> io::Result<()> {
    let (uid, gid) = ids(shift, st);
    tree::chown_at(dst, dst_name, uid, gid)?;
    if !st.is_symlink() {
        tree::chmod_at(dst, dst_name, st.mode & 0o7777)?;
    }
    copy_xattrs(
        &tree::fd_path(src, src_name)?,
        &tree::fd_path(dst, dst_name)?,
    )?;
    tree::utimes_at(dst, dst_name, st.atime, st.mtime)
}

struct Copier {
    shift: Option<Shift>,
    dst_root: OwnedFd,
    /// The first copy of each multiply-linked source inode, as names from the root.
    links: HashMap<(u64, u64), Vec<OsString>>,
}

impl Copier {
    /// Open the directory of the copy at `names` (all but the last), one name at a time.
    fn open_copy_parent(&self, names: &[OsString]) -> io::Result<OwnedFd> {
        let mut dir = self.dst_root.try_clone()?;
        for n in &names[..names.len() - 1] {
            dir = tree::open_dir_at(dir.as_fd(), n)?;
        }
        Ok(dir)
    }

    fn copy_file(&self, e: &Entry<'_>, dst: BorrowedFd<'_>) -> io::Result<()> {
        let flags = libc::O_RDONLY | libc::O_NONBLOCK;
        let from = File::from(tree::open_at(e.parent, e.name, flags, 0)?);
        let now = tree::fstat(from.as_fd())?;
        if !now.is_file() || !now.same_inode(e.stat) {
            return Err(walk::changed(e.name));
        }
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        let to = File::from(tree::open_at(dst, e.name, flags, 0o600)?);
        if e.stat.size > 0 && warren_sys::fs::reflink(&from, &to).is_err() {
            tree::copy_sparse(&from, &to, e.stat.size)?;
        }
        Ok(())
    }
}

impl Visitor for Copier {
    fn enter(&mut self, e: &Entry<'_>) -> io::Result<bool> {
        let dst = e.mirror.expect("a copy walks with its mirror");
        let st = e.stat;
        if st.is_dir() {
            tree::mkdir_at(dst, e.name, 0o700)?;
            return Ok(true);
        }
        if st.nlink > 1 {
            let key = (st.dev, st.ino);
            if let Some(first) = self.links.get(&key) {
                let dir = self.open_copy_parent(first)?;
                let last = first.last().expect("a path has a name");
                return tree::link_at(dir.as_fd(), last, dst, e.name).map(|()| false);
            }
            let mut names = e.path.to_vec();
            names.push(e.name.to_os_string());
            self.links.insert(key, names);
        }
        match st.kind() {
            libc::S_IFREG => self.copy_file(e, dst)?,
            libc::S_IFLNK => {
                let target = tree::readlink_at(e.parent, e.name)?;
                tree::symlink_at(&target, dst, e.name)?;
            }
            libc::S_IFCHR | libc::S_IFBLK | libc::S_IFIFO | libc::S_IFSOCK => {
                tree::mknod_at(dst, e.name, st.kind() | 0o600, st.rdev)?
            }
            _ => return Ok(false),
        }
        finish(e.parent, e.name, dst, e.name, st, self.shift)?;
        Ok(false)
    }

    fn leave(
        &mut self,
        e: &Entry<'_>,
        _: BorrowedFd<'_>,
        _: Option<BorrowedFd<'_>>,
    ) -> io::Result<()> {
        let dst = e.mirror.expect("a copy walks with its mirror");
        finish(e.parent, e.name, dst, e.name, e.stat, self.shift)
    }
}

/// Copy the tree at `src` to `dst` (which must not exist), never following a symlink
/// inside it; owners are moved by `shift` if given. `src` may also be a single file
/// or symlink.
pub fn copy_tree(src: &Path, dst: &Path, shift: Option<Shift>) -> io::Result<()> {
    let (sp, sname) = parent_and_name(src)?;
    let (dp, dname) = parent_and_name(dst)?;
    let st = tree::stat_at(sp.as_fd(), &sname)?;
    let mut copier = Copier {
        shift,
        dst_root: dp.try_clone()?,
        links: HashMap::new(),
    };
    if !st.is_dir() {
        // One entry: reuse the walk's visitor on the parents.
        let e = Entry {
            parent: sp.as_fd(),
            mirror: Some(dp.as_fd()),
            name: &sname,
            stat: &st,
            path: &[],
        };
        if sname != dname {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a single file is copied under its own name",
            ));
        }
        return copier.enter(&e).map(drop);
    }
    tree::mkdir_at(dp.as_fd(), &dname, 0o700)?;
    let from = tree::open_dir_at(sp.as_fd(), &sname)?;
    let to = tree::open_dir_at(dp.as_fd(), &dname)?;
    copier.dst_root = to.try_clone()?;
    walk::walk(from.as_fd(), Some(to.as_fd()), &mut copier)?;
    finish(sp.as_fd(), &sname, dp.as_fd(), &dname, &st, shift)
}

/// fsyncs every regular file and every non-empty directory of a tree (after its
/// contents). An empty directory has no entry of its own to make durable; its own
/// entry is its parent's. `entries`: how many entries each open directory had.
struct Syncer {
    entries: Vec<usize>,
    /// The tree's filesystem: the walk does not enter directories on another.
    dev: u64,
}

impl Visitor for Syncer {
    fn enter(&mut self, e: &Entry<'_>) -> io::Result<bool> {
        if let Some(n) = self.entries.last_mut() {
            *n += 1;
        }
        if e.stat.is_dir() {
            if e.stat.dev == self.dev {
                self.entries.push(0);
            }
            return Ok(true);
        }
        if e.stat.is_file() {
            let flags = libc::O_RDONLY | libc::O_NONBLOCK;
            let f = File::from(tree::open_at(e.parent, e.name, flags, 0)?);
            if !tree::fstat(f.as_fd())?.same_inode(e.stat) {
                return Err(walk::changed(e.name));
            }
            f.sync_all()?;
        }
        Ok(false)
    }
    fn leave(
        &mut self,
        _: &Entry<'_>,
        dir: BorrowedFd<'_>,
        _: Option<BorrowedFd<'_>>,
    ) -> io::Result<()> {
        match self.entries.pop() {
            Some(0) => Ok(()),
            _ => File::from(dir.try_clone_to_owned()?).sync_all(),
        }
    }
}

/// Make a tree durable in one pass: fsync every regular file and every non-empty
/// directory in it, the top directory last (a clone's new zone before the rename that publishes
/// it; docs/recovery.md, "Clone's durability"). Symlinks are not followed; their
/// entries are made durable by their directory's fsync.
pub fn sync_tree(path: &Path) -> io::Result<()> {
    let top = tree::open_dir(path)?;
    let mut syncer = Syncer {
        entries: vec![0],
        dev: tree::fstat(top.as_fd())?.dev,
    };
    walk::walk(top.as_fd(), None, &mut syncer)?;
    File::from(top).sync_all()
}

struct Remover;

impl Visitor for Remover {
    fn enter(&mut self, e: &Entry<'_>) -> io::Result<bool> {
        if e.stat.is_dir() {
            return Ok(true);
        }
        match tree::unlink_at(e.parent, e.name, false) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
            r => r.map(|()| false),
        }
    }
    fn leave(
        &mut self,
        e: &Entry<'_>,
        _: BorrowedFd<'_>,
        _: Option<BorrowedFd<'_>>,
    ) -> io::Result<()> {
        tree::unlink_at(e.parent, e.name, true)
    }
}

/// Remove a tree if it exists, never following a symlink in it, however deep it is.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let (parent, name) = match parent_and_name(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        r => r?,
    };
    let st = match tree::stat_at(parent.as_fd(), &name) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        r => r?,
    };
    if st.is_dir() {
        let dir = tree::open_dir_at(parent.as_fd(), &name)?;
        walk::walk(dir.as_fd(), None, &mut Remover)?;
    }
    tree::unlink_at(parent.as_fd(), &name, st.is_dir())
}

/// Empty the directory `path` in place, never following a symlink in it, and give it
/// back to root with `mode`, as a fresh `mkdir` under umask 0 would leave it. Unlike
/// [`remove_tree`] and a new `mkdir`, an empty directory costs no inode freed and none
/// allocated (ext4 without a journal scans every recently freed inode of the group at
/// each allocation: a `boot --all` of thousands of zones spent a fifth of its CPU
/// there). What a fresh directory would not have and a chmod does not reset (an ACL,
/// a `user.` attribute, an inode flag its owner set: [`fresh_dir`]) makes it go
/// instead, as does anything else at `path` (a file, a link). Whether a directory is
/// still there.
pub fn empty_dir(path: &Path, mode: u32) -> io::Result<bool> {
    let (parent, name) = match parent_and_name(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        r => r?,
    };
    let st = match tree::stat_at(parent.as_fd(), &name) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        r => r?,
    };
    if !st.is_dir() {
        tree::unlink_at(parent.as_fd(), &name, false)?;
        return Ok(false);
    }
    let dir = File::from(tree::open_dir_at(parent.as_fd(), &name)?);
    if !fresh_dir(&dir)? {
        walk::walk(dir.as_fd(), None, &mut Remover)?;
        tree::unlink_at(parent.as_fd(), &name, true)?;
        return Ok(false);
    }
    walk::walk(dir.as_fd(), None, &mut Remover)?;
    tree::fchown(dir.as_fd(), 0, 0)?;
    tree::fchmod(dir.as_fd(), mode)?;
    Ok(true)
}

/// The inode flags a new directory may carry (ext4's extents, hash index and inline
/// data: the filesystem's own choices, not its owner's).
const FRESH_DIR_FLAGS: u32 = 0x0008_0000 | 0x0000_1000 | 0x1000_0000;

/// Whether the open directory `dir` carries nothing a `mkdir` would not give it but
/// its entries, owner and mode: no extended attribute but the security modules'
/// (`security.*`, which its owner cannot set in a user namespace), so no ACL, and no
/// inode flag but [`FRESH_DIR_FLAGS`] (no `chattr +S`, `+A`, casefolding, encryption
/// policy…).
fn fresh_dir(dir: &File) -> io::Result<bool> {
    let flags = match warren_sys::swap::inode_flags(dir) {
        Ok(f) => f,
        // A filesystem without inode flags.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ENOTTY | libc::EOPNOTSUPP | libc::EINVAL)
            ) =>
        {
            0
        }
        Err(e) => return Err(e),
    };
    let xattrs = warren_sys::fs::flistxattr(dir.as_fd())?;
    Ok(flags & !FRESH_DIR_FLAGS == 0 && xattrs.iter().all(|n| n.starts_with(b"security.")))
}

struct Usage {
    dev: u64,
    total: u64,
    seen: std::collections::HashSet<(u64, u64)>,
}

impl Visitor for Usage {
    fn enter(&mut self, e: &Entry<'_>) -> io::Result<bool> {
        let st = e.stat;
        if st.dev != self.dev {
            return Ok(false);
        }
        if st.nlink > 1 && !st.is_dir() && !self.seen.insert((st.dev, st.ino)) {
            return Ok(false);
        }
        self.total += st.blocks * 512;
        Ok(true)
    }
}

/// Bytes of disk allocated to the tree at `path` (st_blocks × 512, each inode once,
/// not crossing into other filesystems, not following symlinks). Retried a few times
/// if the tree changes under the walk.
pub fn disk_usage(path: &Path) -> io::Result<u64> {
    let meta = fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        return Ok(meta.blocks() * 512);
    }
    let mut last = None;
    for _ in 0..RETRIES {
        let dir = tree::open_dir(path)?;
        let st = tree::fstat(dir.as_fd())?;
        let mut u = Usage {
            dev: st.dev,
            total: st.blocks * 512,
            seen: Default::default(),
        };
        match walk::walk(dir.as_fd(), None, &mut u) {
            Ok(()) => return Ok(u.total),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("tried at least once"))
}

struct Shifter {
    shift: Shift,
    n: u64,
}

/// Re-own one entry, keeping set-id bits and file capabilities that chown clears.
fn reown(dir: BorrowedFd<'_>, name: &OsStr, st: &Stat, shift: Shift) -> io::Result<bool> {
    let (uid, gid) = (shift.id(st.uid), shift.id(st.gid));
    if (uid, gid) == (st.uid, st.gid) {
        return Ok(false);
    }
    let caps = if st.is_file() {
        warren_sys::fs::lgetxattr(&tree::fd_path(dir, name)?, b"security.capability").ok()
    } else {
        None
    };
    tree::chown_at(dir, name, uid, gid)?;
    if !st.is_symlink() && st.mode & 0o6000 != 0 {
        tree::chmod_at(dir, name, st.mode & 0o7777)?;
    }
    if let Some(c) = caps {
        warren_sys::fs::lsetxattr(&tree::fd_path(dir, name)?, b"security.capability", &c)?;
    }
    Ok(true)
}

impl Visitor for Shifter {
    fn enter(&mut self, e: &Entry<'_>) -> io::Result<bool> {
        self.n += u64::from(reown(e.parent, e.name, e.stat, self.shift)?);
        Ok(true)
    }
}

/// Move the owners of everything in the tree at `root` (itself last) by `shift`;
/// returns how many entries changed.
pub fn shift_tree(root: &Path, shift: Shift) -> io::Result<u64> {
    let (parent, name) = parent_and_name(root)?;
    let st = tree::stat_at(parent.as_fd(), &name)?;
    let mut s = Shifter { shift, n: 0 };
    if st.is_dir() {
        let dir = tree::open_dir_at(parent.as_fd(), &name)?;
        walk::walk(dir.as_fd(), None, &mut s)?;
    }
    s.n += u64::from(reown(parent.as_fd(), &name, &st, shift)?);
    Ok(s.n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn blocks(p: &Path) -> u64 {
        fs::symlink_metadata(p).unwrap().blocks()
    }

    #[test]
    fn copy_keeps_holes_links_and_symlinks() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        fs::create_dir_all(src.join("a/b")).unwrap();
        let f = File::create(src.join("a/sparse")).unwrap();
        f.set_len(256 << 20).unwrap();
        fs::write(src.join("a/data"), vec![7u8; 1 << 20]).unwrap();
        for i in 0..5 {
            fs::hard_link(src.join("a/data"), src.join(format!("a/b/link{i}"))).unwrap();
        }
        symlink("/etc/passwd", src.join("abs")).unwrap();
        let dst = d.path().join("dst");
        copy_tree(&src, &dst, None).unwrap();
        assert_eq!(fs::metadata(dst.join("a/sparse")).unwrap().len(), 256 << 20);
        assert!(blocks(&dst.join("a/sparse")) < 64);
        let m = fs::metadata(dst.join("a/b/link3")).unwrap();
        assert_eq!(m.nlink(), 6);
        assert_eq!(m.ino(), fs::metadata(dst.join("a/data")).unwrap().ino());
        assert_eq!(
            fs::read_link(dst.join("abs")).unwrap(),
            Path::new("/etc/passwd")
        );
        let used = disk_usage(&dst).unwrap();
        assert!(used < 3 << 20, "{used} bytes");
        remove_tree(&dst).unwrap();
        assert!(!dst.exists());
        remove_tree(&dst).unwrap();
    }

    #[test]
    fn copy_with_a_shift_moves_owners_and_keeps_setuid() {
        use std::os::unix::fs::PermissionsExt;
        if warren_sys::geteuid() != 0 {
            panic!("this test chowns files to other ids and must run as root");
        }
        let (a, b) = (IdRange::new(1 << 30), IdRange::new((1 << 30) + (1 << 16)));
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        fs::create_dir_all(src.join("dir")).unwrap();
        fs::write(src.join("dir/suid"), b"x").unwrap();
        symlink("/nowhere", src.join("link")).unwrap();
        warren_sys::fs::lchown(&src, a.base, a.base).unwrap();
        warren_sys::fs::lchown(&src.join("dir"), a.base + 1000, a.base + 1000).unwrap();
        warren_sys::fs::lchown(&src.join("dir/suid"), a.base, a.base + 5).unwrap();
        fs::set_permissions(src.join("dir/suid"), fs::Permissions::from_mode(0o4755)).unwrap();
        warren_sys::fs::lchown(&src.join("link"), 7, 7).unwrap(); // a host id: kept
        let dst = d.path().join("dst");
        copy_tree(&src, &dst, Some(Shift { from: a, to: b })).unwrap();
        let m = |p: &str| fs::symlink_metadata(dst.join(p)).unwrap();
        assert_eq!((m("").uid(), m("dir").uid()), (b.base, b.base + 1000));
        assert_eq!(
            (m("dir/suid").uid(), m("dir/suid").gid()),
            (b.base, b.base + 5)
        );
        assert_eq!(m("dir/suid").mode() & 0o7777, 0o4755);
        assert_eq!(m("link").uid(), 7);
    }

    #[test]
    fn deep_tree_is_measured_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let top = d.path().join("deep");
        fs::create_dir(&top).unwrap();
        let mut cur = tree::open_dir(&top).unwrap();
        for _ in 0..5000 {
            tree::mkdir_at(cur.as_fd(), OsStr::new("d"), 0o755).unwrap();
            cur = tree::open_dir_at(cur.as_fd(), OsStr::new("d")).unwrap();
        }
        drop(cur);
        assert!(disk_usage(&top).unwrap() >= 5000 * 512);
        remove_tree(&top).unwrap();
        assert!(!top.exists());
    }

    #[test]
    fn the_root_may_not_be_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        symlink("/etc", d.path().join("link")).unwrap();
        // The link's own blocks (none), not /etc's.
        assert!(disk_usage(&d.path().join("link")).unwrap() < 4096);
        let e = remove_tree(&d.path().join("link"));
        assert!(e.is_ok() && Path::new("/etc/passwd").exists());
    }

    #[test]
    fn a_directory_is_emptied_in_place_without_following_links() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("keep"), b"x").unwrap();
        let shm = d.path().join("shm");
        fs::create_dir_all(shm.join("a/b")).unwrap();
        fs::write(shm.join("a/b/f"), b"x").unwrap();
        symlink(&outside, shm.join("out")).unwrap();
        fs::set_permissions(&shm, fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&shm, Some(7), Some(8)).unwrap();
        let ino = fs::metadata(&shm).unwrap().ino();

        assert!(empty_dir(&shm, 0o1777).unwrap());
        let m = fs::symlink_metadata(&shm).unwrap();
        assert_eq!(m.ino(), ino, "the same directory");
        assert_eq!(m.mode() & 0o7777, 0o1777);
        assert_eq!((m.uid(), m.gid()), (0, 0));
        assert_eq!(fs::read_dir(&shm).unwrap().count(), 0);
        assert!(outside.join("keep").exists(), "the link was not followed");

        // An ACL or a user attribute survives a chmod: the directory goes instead.
        fs::create_dir(shm.join("g")).unwrap();
        warren_sys::fs::lsetxattr(&shm, b"user.kept", b"1").unwrap();
        assert!(!empty_dir(&shm, 0o1777).unwrap());
        assert!(fs::symlink_metadata(&shm).is_err());
        // So does an inode flag its owner set (noatime, `chattr +A`).
        fs::create_dir(&shm).unwrap();
        let f = File::open(&shm).unwrap();
        let flags = warren_sys::swap::inode_flags(&f).unwrap();
        warren_sys::swap::set_inode_flags(&f, flags | 0x80)
            .expect("chattr +A on a directory of the test's temporary directory");
        drop(f);
        assert!(!empty_dir(&shm, 0o1777).unwrap());
        assert!(fs::symlink_metadata(&shm).is_err());
        fs::create_dir(&shm).unwrap();

        // Not a directory: removed, so the caller's mkdir makes one.
        fs::remove_dir(&shm).unwrap();
        symlink(&outside, &shm).unwrap();
        assert!(!empty_dir(&shm, 0o1777).unwrap());
        assert!(fs::symlink_metadata(&shm).is_err());
        assert!(outside.join("keep").exists());
        // Nothing there: nothing to do.
        assert!(!empty_dir(&shm, 0o1777).unwrap());
    }
}
