//! The zones' shared /dev: one directory of device nodes per state root
//! (`<root>/dev-template/dev`), host root's, bound read-only into every zone instead of a
//! tmpfs per zone (docs/scaling.md: every superblock costs every memory cgroup on the
//! host shrinker state, so a tmpfs per zone cost O(zones²) kernel memory).
//!
//! It holds exactly what `isolation::devices` lists (the nodes, mode 0666, and the
//! /dev links), the empty `.masked` directory the masks bind over masked directories
//! (`sandbox::masks`), and the mount points of what each zone binds on it: `pts` (its
//! devpts), `shm` (a directory of the zone's own storage) and `console` (its console
//! file, `runtime::console`). Nothing in it is ever written by a zone: the bind is
//! read-only, nosuid and noexec (`runtime::boot`), and the mount is the host's, in a
//! mount namespace the host's user namespace owns, so a zone's root cannot remount it.
//!
//! [`ensure`] checks it on every boot (one directory read and a stat per entry) and
//! rebuilds it when anything differs (a missing or extra entry, a wrong type, mode,
//! owner or device number): built under a temporary name beside it and renamed into
//! place, so a boot never sees half of one, and two boots repairing at once agree.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use warren_sys::libc;
use warren_sys::tree;

use crate::error::{IoContext, Result};
use crate::isolation::devices::{LINKS, NODES};

/// The directory under the state root holding the template (0700, as every directory
/// of the state root; the template inside it is 0755 so the zones' users can use it).
pub const PARENT: &str = "dev-template";
/// The template's own name in [`PARENT`].
pub const NAME: &str = "dev";
/// The empty directory masked directories are covered with (`sandbox::masks::EMPTY`).
pub const MASKED: &str = crate::sandbox::masks::EMPTY;
/// Mount points in it: the zone's devpts, /dev/shm and console.
pub const PTS: &str = "pts";
pub const SHM: &str = "shm";
pub const CONSOLE: &str = "console";

/// One entry of the template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir(u32),
    File(u32),
    Char { mode: u32, major: u32, minor: u32 },
    Link(&'static str),
}

/// What the template holds, by name.
fn expected() -> BTreeMap<&'static str, Entry> {
    let mut m = BTreeMap::new();
    for n in NODES {
        m.insert(
            n.name,
            Entry::Char {
                mode: n.mode,
                major: n.major,
                minor: n.minor,
            },
        );
    }
    for (name, to) in LINKS {
        m.insert(name, Entry::Link(to));
    }
    m.insert(MASKED, Entry::Dir(0o555));
    m.insert(PTS, Entry::Dir(0o755));
    m.insert(SHM, Entry::Dir(0o1777));
    m.insert(CONSOLE, Entry::File(0o600));
    m
}

/// The template of state root `root`, checked and (re)built if needed: its path.
pub fn ensure(root: &Path) -> Result<PathBuf> {
    let parent = root.join(PARENT);
    let dir = parent.join(NAME);
    if intact(&dir) {
        return Ok(dir);
    }
    match crate::fsutil::mkdir_mode(&parent, 0o700) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        other => other.ctx(|| format!("creating {}", parent.display()))?,
    }
    let suffix = crate::fsutil::unique_suffix();
    let new = parent.join(format!(".new-{suffix}"));
    build(&new).ctx(|| format!("building the zones' /dev template in {}", new.display()))?;
    let old = parent.join(format!(".del-{suffix}"));
    // Boots repairing at once: a template another one placed meanwhile is kept (checked
    // again right before a damaged one is moved aside); ours then goes.
    for _ in 0..3 {
        if intact(&dir) {
            break;
        }
        if std::fs::symlink_metadata(&dir).is_ok() {
            let _ = std::fs::rename(&dir, &old);
        }
        if std::fs::rename(&new, &dir).is_ok() {
            break;
        }
    }
    let _ = crate::treeops::remove_tree(&new);
    let _ = crate::treeops::remove_tree(&old);
    // Leftovers of a repair that crashed.
    if let Ok(names) = std::fs::read_dir(&parent) {
        for e in names.flatten() {
            let n = e.file_name();
            if n != NAME && n.to_string_lossy().starts_with(".del-") {
                let _ = crate::treeops::remove_tree(&e.path());
            }
        }
    }
    if intact(&dir) {
        Ok(dir)
    } else {
        Err(crate::error::Error::Invalid(format!(
            "the zones' /dev template {} is damaged and could not be rebuilt; remove {} and boot again",
            dir.display(),
            parent.display()
        )))
    }
}

/// Whether `dir` holds exactly [`expected`], host root's, itself 0755.
fn intact(dir: &Path) -> bool {
    let Ok(fd) = tree::open_dir(dir) else {
        return false;
    };
    let Ok(st) = tree::fstat(fd.as_fd()) else {
        return false;
    };
    if !st.is_dir() || st.mode & 0o7777 != 0o755 || (st.uid, st.gid) != (0, 0) {
        return false;
    }
    let want = expected();
    let Ok(names) = tree::read_names(fd.as_fd()) else {
        return false;
    };
    if names.len() != want.len() {
        return false;
    }
    names.iter().all(|name| {
        let Some(entry) = name.to_str().and_then(|n| want.get(n)) else {
            return false;
        };
        let Ok(st) = tree::stat_at(fd.as_fd(), name) else {
            return false;
        };
        if (st.uid, st.gid) != (0, 0) {
            return false;
        }
        let perm = st.mode & 0o7777;
        match entry {
            Entry::Dir(mode) => st.is_dir() && perm == *mode,
            Entry::File(mode) => st.is_file() && perm == *mode,
            Entry::Char { mode, major, minor } => {
                st.kind() == libc::S_IFCHR
                    && perm == *mode
                    && st.rdev == libc::makedev(*major, *minor)
            }
            Entry::Link(to) => {
                st.is_symlink() && tree::readlink_at(fd.as_fd(), name).is_ok_and(|t| t == *to)
            }
        }
    })
}

/// Make the template in the new directory `dir`.
fn build(dir: &Path) -> std::io::Result<()> {
    crate::fsutil::mkdir_mode(dir, 0o755)?;
    let fd = tree::open_dir(dir)?;
    let at = fd.as_fd();
    tree::fchmod(at, 0o755)?;
    for (name, entry) in expected() {
        let n = OsStr::new(name);
        match entry {
            Entry::Dir(mode) => {
                tree::mkdir_at(at, n, mode)?;
                tree::chmod_at(at, n, mode)?;
            }
            Entry::File(mode) => {
                drop(tree::open_at(
                    at,
                    n,
                    libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
                    mode,
                )?);
                tree::chmod_at(at, n, mode)?;
            }
            Entry::Char { mode, major, minor } => {
                tree::mknod_at(at, n, libc::S_IFCHR | mode, libc::makedev(major, minor))?;
                tree::chmod_at(at, n, mode)?;
            }
            Entry::Link(to) => tree::symlink_at(&OsString::from(to), at, n)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Needs root (mknod); the unit tests run as root on the dev VM and in CI.
    #[test]
    fn the_template_is_built_once_and_repaired_when_damaged() {
        assert_eq!(
            warren_sys::geteuid(),
            0,
            "this test makes device nodes: run it as root"
        );
        let root = tempfile::tempdir().unwrap();
        let dir = ensure(root.path()).unwrap();
        assert!(intact(&dir));
        let null = std::fs::symlink_metadata(dir.join("null")).unwrap();
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        assert!(null.file_type().is_char_device());
        assert_eq!(null.rdev(), libc::makedev(1, 3));
        // Unchanged when intact: the same inode.
        let ino = std::fs::metadata(&dir).unwrap().ino();
        assert_eq!(
            std::fs::metadata(ensure(root.path()).unwrap())
                .unwrap()
                .ino(),
            ino
        );
        // Damage of each kind is repaired.
        type Damage = fn(&Path);
        let damages: [(&str, Damage); 4] = [
            ("a node removed", |d| {
                std::fs::remove_file(d.join("zero")).unwrap()
            }),
            ("an extra file", |d| {
                std::fs::write(d.join("sda"), b"").unwrap()
            }),
            ("a mode changed", |d| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(d.join("tty"), std::fs::Permissions::from_mode(0o600))
                    .unwrap()
            }),
            ("a link redirected", |d| {
                std::fs::remove_file(d.join("ptmx")).unwrap();
                std::os::unix::fs::symlink("/dev/ptmx", d.join("ptmx")).unwrap()
            }),
        ];
        for (what, damage) in damages {
            damage(&dir);
            assert!(!intact(&dir), "{what}: not seen as damaged");
            ensure(root.path()).unwrap();
            assert!(intact(&dir), "{what}: not repaired");
        }
        // No temporary directory is left beside it.
        let left: Vec<_> = std::fs::read_dir(root.path().join(PARENT))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [OsString::from(NAME)]);
    }
}
