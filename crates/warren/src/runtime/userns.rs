//! The host side of a user-namespaced boot: the zone's namespaces and the idmapped
//! mounts its root is made of, made before the clone (see docs/isolation.md).

use std::os::fd::OwnedFd;
use std::path::Path;

use warren_sys::libc;
use warren_sys::userns::{Namespaces, MOUNT_ATTR_NODEV, MOUNT_ATTR_RDONLY};

use super::BootSpec;
use crate::config::NetMode;
use crate::error::{Error, Result};
use crate::idmap::IdRange;
use crate::storage::RootMount;

/// A user-namespaced boot's descriptors, made before the clone so the child inherits
/// them: the namespaces (see `warren_sys::userns`) and idmapped copies of the mounts
/// the zone's root is made of.
pub(super) struct UsernsFds {
    pub range: IdRange,
    pub ns: Namespaces,
    /// The overlay's lower layer (the template), or the zone's own root (bind).
    pub root: OwnedFd,
    /// One per template bind (`/usr` of the `host` template), in order.
    pub binds: Vec<OwnedFd>,
}

/// Make the zone's user namespace (with its network, UTS and IPC namespaces) and the
/// idmapped mounts its root is made of.
pub(super) fn userns_fds(spec: &BootSpec<'_>, range: IdRange) -> Result<UsernsFds> {
    let zone = spec.zone;
    let mut extra = libc::CLONE_NEWUTS | libc::CLONE_NEWIPC;
    if spec.config.net != NetMode::Host {
        extra |= libc::CLONE_NEWNET;
    }
    let owner = (range.base, range.base);
    let held = || crate::fault::point("boot.holder-alive");
    let ns = Namespaces::create_then(extra, &range.map_line(), owner, spec.proc_root, held)
        .map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::ENOSPC) => " (user.max_user_namespaces or another namespace limit was reached; raise it with sysctl)",
            Some(libc::EPERM) => " (user namespaces are disabled here; set userns = false for this zone)",
            _ => "",
        };
        Error::Io {
            context: format!(
                "zone '{zone}': creating its user namespace (host ids {}-{}){hint}",
                range.base,
                range.last()
            ),
            source: e,
        }
    })?;
    let idmapped = |path: &Path, attrs: u64| {
        warren_sys::userns::open_tree_idmapped(path, &ns.user, attrs).map_err(|e| Error::Io {
            context: format!(
                "zone '{zone}': making an idmapped mount of {} (the filesystem must support idmapped mounts; else set userns = false)",
                path.display()
            ),
            source: e,
        })
    };
    let root = match spec.root {
        RootMount::Overlay { lower, .. } => idmapped(lower, MOUNT_ATTR_RDONLY)?,
        RootMount::Bind { source } => idmapped(source, MOUNT_ATTR_NODEV)?,
    };
    let mut binds = Vec::new();
    for b in spec.binds {
        let attrs = if b.readonly {
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV
        } else {
            0
        };
        binds.push(idmapped(&b.source, attrs)?);
    }
    Ok(UsernsFds {
        range,
        ns,
        root,
        binds,
    })
}
