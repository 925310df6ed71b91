//! A descriptor-relative tree walk with a bounded number of open descriptors.
//!
//! The walk visits everything beneath a root directory descriptor, in pre-order for
//! every entry ([`Visitor::enter`]) and in post-order for directories
//! ([`Visitor::leave`]). It never follows a symlink (entries are `fstatat`'d with
//! `AT_SYMLINK_NOFOLLOW`, directories opened with `O_NOFOLLOW | O_DIRECTORY` relative
//! to their parent's descriptor) and never leaves the root's filesystem.
//!
//! Descriptors are bounded: only the deepest [`KEEP_OPEN`] directories on the stack
//! keep theirs. When the walk climbs back to a directory whose descriptor was closed,
//! it reopens it as `..` of the child and checks that it is the same inode (device and
//! inode recorded on the way down); a directory moved meanwhile (a tenant renaming
//! things during the walk) ends the walk with [`changed`] instead of letting it wander
//! off. So a 26,000-deep tree costs 26,000 small frames (its names) but at most about
//! 2 × [`KEEP_OPEN`] descriptors, and no path is ever longer than one name.
//!
//! A walk may carry a *mirror*: a second tree (a copy being built) whose directories
//! have the same names; the walk opens and climbs it alongside, so a copy is as
//! bounded as a read.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::tree::{fstat, open_dir_at, open_parent, read_names, stat_at, Stat};

/// How many directories of the stack keep an open descriptor (per tree).
pub const KEEP_OPEN: usize = 32;

/// The error a walk ends with when the tree changed under it (a directory replaced by
/// something else, or moved, between two steps).
pub fn changed(what: &OsStr) -> io::Error {
    io::Error::other(format!(
        "the tree changed during the walk ({what:?} was moved or replaced); try again"
    ))
}

/// One entry of the walk.
pub struct Entry<'a> {
    /// The directory holding the entry.
    pub parent: BorrowedFd<'a>,
    /// The same directory in the mirror tree, if the walk has one.
    pub mirror: Option<BorrowedFd<'a>>,
    pub name: &'a OsStr,
    pub stat: &'a Stat,
    /// Names from the root to `parent` (empty for the root's own entries).
    pub path: &'a [OsString],
}

/// What a walk does at each entry.
pub trait Visitor {
    /// Every entry, before a directory's contents. For a directory, `Ok(true)` walks
    /// into it (a mirror walk expects the visitor to have made the mirror directory).
    fn enter(&mut self, e: &Entry<'_>) -> io::Result<bool>;
    /// A directory after its contents, with its own descriptor (and its mirror's).
    /// Nothing by default.
    fn leave(
        &mut self,
        e: &Entry<'_>,
        dir: BorrowedFd<'_>,
        mirror: Option<BorrowedFd<'_>>,
    ) -> io::Result<()> {
        let _ = (e, dir, mirror);
        Ok(())
    }
}

struct Frame {
    name: OsString,
    stat: Stat,
    fd: Option<OwnedFd>,
    mirror: Option<OwnedFd>,
    mirror_id: Option<(u64, u64)>,
    names: Vec<OsString>,
}

fn id(s: &Stat) -> (u64, u64) {
    (s.dev, s.ino)
}

/// Walk everything beneath `root` (not `root` itself), with `mirror` alongside if given.
pub fn walk(
    root: BorrowedFd<'_>,
    mirror: Option<BorrowedFd<'_>>,
    v: &mut dyn Visitor,
) -> io::Result<()> {
    let root_stat = fstat(root)?;
    let mut stack = vec![Frame {
        name: OsString::new(),
        stat: root_stat,
        fd: Some(root.try_clone_to_owned()?),
        mirror: mirror.map(|m| m.try_clone_to_owned()).transpose()?,
        mirror_id: mirror.map(fstat).transpose()?.map(|s| id(&s)),
        names: read_names(root)?,
    }];
    let mut path: Vec<OsString> = Vec::new();
    loop {
        let top = stack
            .last_mut()
            .expect("the root frame stays until the end");
        if let Some(name) = top.names.pop() {
            let parent = top.fd.as_ref().expect("the top frame is open").as_fd();
            let stat = match stat_at(parent, &name) {
                Ok(s) => s,
                Err(e) if e.raw_os_error() == Some(crate::libc::ENOENT) => continue,
                Err(e) => return Err(e),
            };
            let entry = Entry {
                parent,
                mirror: top.mirror.as_ref().map(|m| m.as_fd()),
                name: &name,
                stat: &stat,
                path: &path,
            };
            if !v.enter(&entry)? || !stat.is_dir() || stat.dev != root_stat.dev {
                continue;
            }
            let fd = open_dir_at(parent, &name).map_err(|e| match e.raw_os_error() {
                Some(crate::libc::ELOOP | crate::libc::ENOTDIR | crate::libc::ENOENT) => {
                    changed(&name)
                }
                _ => e,
            })?;
            if !fstat(fd.as_fd())?.same_inode(&stat) {
                return Err(changed(&name));
            }
            let (m, mirror_id) = match &top.mirror {
                Some(pm) => {
                    let m = open_dir_at(pm.as_fd(), &name)?;
                    let mid = id(&fstat(m.as_fd())?);
                    (Some(m), Some(mid))
                }
                None => (None, None),
            };
            let names = read_names(fd.as_fd())?;
            path.push(name.clone());
            stack.push(Frame {
                name,
                stat,
                fd: Some(fd),
                mirror: m,
                mirror_id,
                names,
            });
            // Close the descriptors of the frame that just fell out of the window.
            if stack.len() > KEEP_OPEN {
                let old = stack.len() - KEEP_OPEN - 1;
                if old > 0 {
                    stack[old].fd = None;
                    stack[old].mirror = None;
                }
            }
        } else {
            let done = stack.pop().expect("non-empty");
            let Some(parent) = stack.last_mut() else {
                return Ok(());
            };
            path.pop();
            let dir = done.fd.expect("the top frame is open");
            if parent.fd.is_none() {
                let up = open_parent(dir.as_fd())?;
                if !fstat(up.as_fd())?.same_inode(&parent.stat) {
                    return Err(changed(&done.name));
                }
                parent.fd = Some(up);
            }
            if let (None, Some(m)) = (&parent.mirror, &done.mirror) {
                let up = open_parent(m.as_fd())?;
                if Some(id(&fstat(up.as_fd())?)) != parent.mirror_id {
                    return Err(changed(&done.name));
                }
                parent.mirror = Some(up);
            }
            let entry = Entry {
                parent: parent.fd.as_ref().expect("reopened above").as_fd(),
                mirror: parent.mirror.as_ref().map(|m| m.as_fd()),
                name: &done.name,
                stat: &done.stat,
                path: &path,
            };
            v.leave(&entry, dir.as_fd(), done.mirror.as_ref().map(|m| m.as_fd()))?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{mkdir_at, open_dir};

    struct Count {
        dirs: usize,
        max_fds: usize,
    }
    impl Visitor for Count {
        fn enter(&mut self, e: &Entry<'_>) -> io::Result<bool> {
            self.dirs += usize::from(e.stat.is_dir());
            let fds = std::fs::read_dir("/proc/self/fd")?.count();
            self.max_fds = self.max_fds.max(fds);
            Ok(true)
        }
    }

    /// Moves directory `a/d/d` to `y` when the walk is deep below it, so that the
    /// walk climbs back through a reopened `..` that is no longer the directory it left.
    struct Mover {
        root: std::path::PathBuf,
        moved: bool,
    }
    impl Visitor for Mover {
        fn enter(&mut self, e: &Entry<'_>) -> io::Result<bool> {
            if e.path.len() == KEEP_OPEN + 8 && !self.moved {
                std::fs::rename(self.root.join("a/d/d"), self.root.join("y"))?;
                self.moved = true;
            }
            Ok(true)
        }
    }

    #[test]
    fn a_directory_moved_during_the_walk_ends_it() {
        let d = tempfile::tempdir().unwrap();
        let root = open_dir(d.path()).unwrap();
        mkdir_at(root.as_fd(), OsStr::new("a"), 0o755).unwrap();
        let mut cur = open_dir_at(root.as_fd(), OsStr::new("a")).unwrap();
        for _ in 0..KEEP_OPEN + 12 {
            mkdir_at(cur.as_fd(), OsStr::new("d"), 0o755).unwrap();
            cur = open_dir_at(cur.as_fd(), OsStr::new("d")).unwrap();
        }
        let mut m = Mover {
            root: d.path().to_path_buf(),
            moved: false,
        };
        let e = walk(root.as_fd(), None, &mut m).unwrap_err();
        assert!(
            m.moved && e.to_string().contains("changed during the walk"),
            "{e}"
        );
    }

    #[test]
    fn deep_tree_with_bounded_descriptors() {
        let d = tempfile::tempdir().unwrap();
        let root = open_dir(d.path()).unwrap();
        let mut cur = root.try_clone().unwrap();
        for _ in 0..1000 {
            mkdir_at(cur.as_fd(), OsStr::new("d"), 0o755).unwrap();
            cur = open_dir_at(cur.as_fd(), OsStr::new("d")).unwrap();
        }
        drop(cur);
        let before = std::fs::read_dir("/proc/self/fd").unwrap().count();
        let mut c = Count {
            dirs: 0,
            max_fds: 0,
        };
        walk(root.as_fd(), None, &mut c).unwrap();
        assert_eq!(c.dirs, 1000);
        // Other tests of this binary run in parallel threads and open files too.
        assert!(c.max_fds < before + 2 * KEEP_OPEN + 16, "{} fds", c.max_fds);
    }
}
