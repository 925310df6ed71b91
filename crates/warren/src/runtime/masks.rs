//! Masked and read-only kernel interfaces in a zone's /proc and /sys (the policy is
//! `isolation::MASKED_FILES` and friends; see docs/isolation.md).

use std::path::Path;

use warren_sys::libc;
use warren_sys::spawn::Step;

use super::{c, Plan};
use crate::isolation;

/// Mask kernel interfaces a zone must not use: files behind /dev/null, directories
/// behind an empty read-only directory, and read-only /proc/sys, /proc/irq, /proc/bus.
/// Each step is optional: a path this kernel lacks is skipped.
///
/// The masked directories are covered by a read-only bind of one empty directory of
/// the zone's /dev tmpfs rather than by a tmpfs each: a superblock per mount would cost
/// a shrinker per zone (see the /sys note in `build`).
pub(super) fn mask_paths(p: &mut Plan, root: &Path, dev: &Path) {
    let optional =
        |p: &mut Plan, step: Step, what: String| p.push(Step::Optional(Box::new(step)), what);
    let bind = |src: &Path, target: &Path, flags: libc::c_ulong| Step::Mount {
        source: Some(c(src)),
        target: c(target),
        fstype: None,
        flags: libc::MS_BIND | flags,
        data: None,
    };
    let remount_ro = |target: &Path| Step::Mount {
        source: None,
        target: c(target),
        fstype: None,
        flags: libc::MS_BIND
            | libc::MS_REMOUNT
            | libc::MS_RDONLY
            | libc::MS_NOSUID
            | libc::MS_NODEV
            | libc::MS_NOEXEC,
        data: None,
    };
    let null = dev.join("null");
    for f in isolation::MASKED_FILES {
        let target = root.join(f);
        optional(p, bind(&null, &target, 0), format!("mask /{f}"));
    }
    let empty = dev.join(".masked");
    p.push(
        Step::Mkdir {
            path: c(&empty),
            mode: 0o555,
        },
        format!("create {}", empty.display()),
    );
    p.push(bind(&empty, &empty, 0), format!("bind {}", empty.display()));
    p.push(
        remount_ro(&empty),
        format!("make {} read-only", empty.display()),
    );
    for d in isolation::MASKED_DIRS {
        let target = root.join(d);
        optional(p, bind(&empty, &target, 0), format!("mask /{d}"));
        optional(p, remount_ro(&target), format!("make /{d} read-only"));
    }
    for d in isolation::READONLY_DIRS {
        let target = root.join(d);
        optional(
            p,
            bind(&target, &target, libc::MS_REC),
            format!("bind /{d} onto itself"),
        );
        optional(p, remount_ro(&target), format!("make /{d} read-only"));
    }
}
