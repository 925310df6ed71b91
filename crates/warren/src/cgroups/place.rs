//! Where a cgroup set is made, and how the directories it made are removed again.
//!
//! Zones live in `<own cgroup>/<group>/<zone>` ([`Place::Zone`]), a layout warren owns:
//! the group is shared by the zones and [`CgroupSet::remove`] takes it with the last.
//! The OCI runtime instead names any path, from the root of each hierarchy
//! ([`Place::FromRoot`], an absolute `linux.cgroupsPath`) or from warren's own cgroup
//! ([`Place::FromOwn`], a relative one). Such a path may cross directories that
//! exist already and belong to someone else (a pod's cgroup, a slice), so the driver
//! makes only what is missing, records what it made ([`Created::made`]) and
//! [`remove_made`] takes back exactly those, deepest first, leaving any that another
//! cgroup still lives in (as runc never removes a parent at all, this only tidies).

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{io_err, CgroupError, CgroupSet};

/// Where [`super::CgroupDriver::create_at`] makes a set's directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// `<own cgroup>/<the driver's group>/<zone>`.
    Zone(String),
    /// This relative path from the root of each hierarchy.
    FromRoot(PathBuf),
    /// This relative path beneath warren's own cgroup (on v2 its delegated base).
    FromOwn(PathBuf),
}

impl Place {
    /// The relative path of a path place; `None` for a zone.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Place::Zone(_) => None,
            Place::FromRoot(p) | Place::FromOwn(p) => Some(p),
        }
    }
}

/// A set made by [`super::CgroupDriver::create_at`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    pub set: CgroupSet,
    /// Every directory this creation made, across all hierarchies ([`remove_made`]
    /// takes them deepest first; empty for [`Place::Zone`], whose removal is
    /// [`CgroupSet::remove`]).
    pub made: Vec<PathBuf>,
}

/// Make `rel` beneath `anchor`, one component at a time, appending each directory made
/// to `made` and running `init` on it. A directory removed under us (the last other
/// user of a shared parent removing it) is made again.
pub(crate) fn make_path(
    anchor: &Path,
    rel: &Path,
    made: &mut Vec<PathBuf>,
    init: impl Fn(&Path) -> Result<(), CgroupError>,
) -> Result<PathBuf, CgroupError> {
    let mut attempts = 0;
    'again: loop {
        let mut dir = anchor.to_path_buf();
        for c in rel.components() {
            dir.push(c);
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    if !made.contains(&dir) {
                        made.push(dir.clone());
                    }
                    init(&dir)?;
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempts < 10 => {
                    attempts += 1;
                    continue 'again;
                }
                Err(e) => return Err(io_err("creating", &dir)(e)),
            }
        }
        return Ok(dir);
    }
}

/// Remove what a creation made, deepest first: the set's own directories (waiting for
/// exiting tasks, as [`CgroupSet::remove`]) and the parents it made, each only when
/// empty. A directory not in `made` (one that existed before) is never touched.
pub fn remove_made(
    set: &CgroupSet,
    made: &[PathBuf],
    timeout: Duration,
) -> Result<(), CgroupError> {
    let deadline = Instant::now() + timeout;
    let mut order: Vec<&PathBuf> = made.iter().collect();
    // Deepest first, whatever order the hierarchies were made in.
    order.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in order {
        let leaf = set.dirs.iter().any(|(_, x)| x == d);
        if leaf {
            set.drop_charges(d);
        }
        loop {
            match std::fs::remove_dir(d) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e)
                    if leaf
                        && e.raw_os_error() == Some(warren_sys::libc::EBUSY)
                        && Instant::now() < deadline =>
                {
                    // Tasks are still exiting.
                    std::thread::sleep(Duration::from_millis(2));
                }
                // A parent another cgroup still lives in stays.
                Err(_) if !leaf => break,
                Err(e) => return Err(io_err("removing", d)(e)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::CgroupVersion;

    #[test]
    fn makes_only_what_is_missing_and_removes_only_that() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("pod/existing")).unwrap();
        let mut made = Vec::new();
        let leaf = make_path(root, Path::new("pod/new/c1"), &mut made, |_| Ok(())).unwrap();
        assert_eq!(leaf, root.join("pod/new/c1"));
        assert_eq!(made, vec![root.join("pod/new"), root.join("pod/new/c1")]);
        // A sibling made by another container in the directory this one made.
        let mut other = Vec::new();
        make_path(root, Path::new("pod/new/c2"), &mut other, |_| Ok(())).unwrap();
        assert_eq!(other, vec![root.join("pod/new/c2")]);
        let set = CgroupSet {
            version: CgroupVersion::V1,
            dirs: vec![("memory".into(), leaf.clone())],
        };
        remove_made(&set, &made, Duration::from_millis(10)).unwrap();
        assert!(!leaf.exists());
        assert!(root.join("pod/new/c2").exists(), "the sibling stays");
        assert!(root.join("pod/new").exists(), "a parent still in use stays");
        let set2 = CgroupSet {
            version: CgroupVersion::V1,
            dirs: vec![("memory".into(), root.join("pod/new/c2"))],
        };
        remove_made(&set2, &other, Duration::from_millis(10)).unwrap();
        assert!(root.join("pod/new").exists(), "only its maker removes it");
        assert!(root.join("pod/existing").exists() && root.join("pod").exists());
    }

    #[test]
    fn an_existing_leaf_is_joined_not_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("a/b")).unwrap();
        let mut made = Vec::new();
        make_path(tmp.path(), Path::new("a/b"), &mut made, |_| Ok(())).unwrap();
        assert!(made.is_empty());
        let set = CgroupSet {
            version: CgroupVersion::V1,
            dirs: vec![("memory".into(), tmp.path().join("a/b"))],
        };
        remove_made(&set, &made, Duration::from_millis(10)).unwrap();
        assert!(tmp.path().join("a/b").exists());
    }
}
