//! Masked and read-only kernel interfaces, for zones and OCI containers alike (the
//! zones' policy is `isolation::MASKED_FILES` and friends; an OCI container's is its
//! `linux.maskedPaths` and `linux.readonlyPaths`; see docs/isolation.md).
//!
//! One mechanism: a masked *file* is covered by a bind of `/dev/null`, a masked
//! *directory* by a read-only bind of one empty directory made once in the sandbox's
//! `/dev` (`/dev/.masked`), not by a tmpfs each: a superblock per mount would cost a
//! shrinker per sandbox. A read-only path is bound onto itself and remounted
//! read-only, nosuid, nodev, noexec. Every step skips a path this kernel or root
//! lacks.

use std::path::Path;

use warren_sys::libc;
use warren_sys::spawn::Step;

use super::plan::{cpath, PlanError};
use super::Described;

/// The empty directory masked directories are covered with, inside `dev`.
pub const EMPTY: &str = ".masked";

/// Steps that mask `masked` and make `readonly` read-only. Paths are joined to `root`
/// (the sandbox's root before pivot_root, or `/` after it); `dev` is its /dev.
pub fn steps<'a>(
    root: &Path,
    dev: &Path,
    masked: impl IntoIterator<Item = &'a str>,
    readonly: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<Described>, PlanError> {
    let remount_ro = |target: &Path| -> Result<Step, PlanError> {
        Ok(Step::Mount {
            source: None,
            target: cpath(target)?,
            fstype: None,
            flags: libc::MS_BIND
                | libc::MS_REMOUNT
                | libc::MS_RDONLY
                | libc::MS_NOSUID
                | libc::MS_NODEV
                | libc::MS_NOEXEC,
            data: None,
        })
    };
    let mut out: Vec<Described> = Vec::new();
    let empty = dev.join(EMPTY);
    // The empty directory, read-only; where /dev cannot take it (a read-only /dev of an
    // OCI bundle), a masked directory falls back to a read-only tmpfs.
    out.push((
        Step::Optional(Box::new(Step::Tolerate(
            libc::EROFS,
            Box::new(Step::Mkdir {
                path: cpath(&empty)?,
                mode: 0o555,
            }),
        ))),
        format!("create {}", empty.display()),
    ));
    out.push((
        Step::Optional(Box::new(Step::Mount {
            source: Some(cpath(&empty)?),
            target: cpath(&empty)?,
            fstype: None,
            flags: libc::MS_BIND,
            data: None,
        })),
        format!("bind {}", empty.display()),
    ));
    out.push((
        Step::Optional(Box::new(remount_ro(&empty)?)),
        format!("make {} read-only", empty.display()),
    ));
    let null = dev.join("null");
    for m in masked {
        let target = root.join(m.trim_start_matches('/'));
        out.push((
            Step::Mask {
                path: cpath(&target)?,
                null: cpath(&null)?,
                empty: cpath(&empty)?,
            },
            format!("mask {}", target.display()),
        ));
    }
    for r in readonly {
        let target = root.join(r.trim_start_matches('/'));
        out.push((
            Step::Optional(Box::new(Step::Mount {
                source: Some(cpath(&target)?),
                target: cpath(&target)?,
                fstype: None,
                flags: libc::MS_BIND | libc::MS_REC,
                data: None,
            })),
            format!("bind {} onto itself", target.display()),
        ));
        out.push((
            Step::Optional(Box::new(remount_ro(&target)?)),
            format!("make {} read-only", target.display()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_directories_share_one_mask_step_and_paths_stay_under_root() {
        let s = steps(
            Path::new("/z/root"),
            Path::new("/z/root/dev"),
            ["proc/kcore", "/sys/firmware"],
            ["proc/sys"],
        )
        .unwrap();
        let masks: Vec<&Step> = s
            .iter()
            .map(|(st, _)| st)
            .filter(|st| matches!(st, Step::Mask { .. }))
            .collect();
        assert_eq!(masks.len(), 2);
        for (st, what) in &s {
            if let Step::Mask { path, null, empty } = st {
                assert!(path.to_bytes().starts_with(b"/z/root/"), "{what}");
                assert_eq!(null.to_bytes(), b"/z/root/dev/null");
                assert_eq!(empty.to_bytes(), b"/z/root/dev/.masked");
            }
        }
        assert!(s
            .iter()
            .any(|(_, w)| w == "make /z/root/proc/sys read-only"));
    }
}
