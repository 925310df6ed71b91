//! `warren cp` on a halted (installed) zone: the helper builds the zone's root as boot
//! would, in a private mount namespace of its own, and enters it as the zone's root.
//!
//! Under the zone's lock (a boot waits): the zone's id range is made ready as for boot
//! (`prepare_idmap`), a new mount namespace is made private, the `disk.max` image is
//! mounted where the upper layer lives, the template is attached idmapped (as boot
//! attaches it) and the overlay mounted on the zone's root directory (or the zone's own
//! tree attached idmapped, for the bind backends); then the helper chroots into it and
//! joins a user namespace with the zone's id map, becoming its root. From there the
//! copy is the running zone's: paths resolve inside the zone's tree, with the zone
//! root's rights. The mount namespace dies with the helper, so nothing is ever
//! mounted on the host, and the overlay is never written behind a mounted overlay's
//! back (only one is mounted at a time: the lock keeps boot out).
//!
//! The template's binds (the `host` template's read-only `/usr`, …) are not mounted:
//! a path beneath one is refused, since what lies under it is not what the zone sees.

use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use warren_sys::libc;
use warren_sys::userns::{Namespaces, MOUNT_ATTR_NODEV, MOUNT_ATTR_RDONLY};

use super::prepare::{disk_for_boot, prepare_idmap};
use super::Context;
use crate::error::{Error, IoContext, Result};
use crate::lock::Lock;
use crate::state::ZoneState;
use crate::storage::{backend, template, RootMount};

/// What must stay alive while the helper works in the halted zone's root.
pub struct Entered {
    _lock: Lock,
    _ns: Option<Namespaces>,
    /// The disk.max image's loop device (autoclear) and its mount.
    _disk: Option<(warren_sys::loopdev::LoopDevice, std::os::fd::OwnedFd)>,
}

/// Enter the halted zone `name` for a copy of `path` (a path inside the zone).
pub fn enter(ctx: &Context, name: &str, path: &str) -> Result<Entered> {
    let lock = crate::lock::exclusive(&ctx.layout, "zone", name)?;
    let mut z = super::load(ctx, name)?;
    let state = z.state(ctx);
    if state != ZoneState::Installed {
        return Err(Error::WrongState {
            zone: name.into(),
            state,
            remedy: "warren cp needs it running or installed".into(),
        });
    }
    let manifest = template::load(&ctx.layout, &z.config.template)?;
    for b in &manifest.binds {
        let t = format!("/{}", b.target.trim_matches('/'));
        if path == t || path.starts_with(&format!("{t}/")) {
            return Err(Error::Invalid(format!(
                "zone '{name}': {path} lies beneath {t}, which template '{}' binds from the host {}; boot the zone to copy there",
                z.config.template,
                if b.readonly { "read-only" } else { "(writable)" }
            )));
        }
    }
    let kind = z.lifecycle.backend.ok_or_else(|| Error::Corrupt {
        path: crate::state::state_path(&z.dir),
        message: "an installed zone without a storage backend".into(),
    })?;
    let troot = template::root_of(&ctx.layout, &z.config.template);
    let mut root = backend(kind).root_mount(&troot, &z.dir);
    let disk = disk_for_boot(&z)?;
    if let (Some(d), RootMount::Overlay { upper, work, .. }) = (&disk, &mut root) {
        *upper = d.upper();
        *work = d.work();
    }
    let idmap = prepare_idmap(ctx, &mut z, &root)?;
    let what = |w: &str| format!("zone '{name}': {w} (to copy while it is halted)");
    crate::fsutil::private_mount_namespace().map_err(|(step, e)| Error::Io {
        context: what(step),
        source: e,
    })?;
    let mut disk_fds = None;
    if let Some(d) = &disk {
        let image = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&d.image)
            .ctx(|| what(&format!("opening {}", d.image.display())))?;
        let dev = warren_sys::loopdev::attach(&image)
            .ctx(|| what("attaching its disk.max image to a loop device"))?;
        let mnt = warren_sys::loopdev::mount_detached(
            "ext4",
            &dev.path,
            warren_sys::userns::MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        )
        .ctx(|| what("mounting its disk.max image"))?;
        warren_sys::userns::move_mount(mnt.as_fd(), &d.mountpoint)
            .ctx(|| what("attaching its disk.max image"))?;
        disk_fds = Some((dev, mnt));
    }
    let ns = match idmap {
        Some(r) => Some(
            Namespaces::create(0, &r.map_line(), (r.base, r.base), &ctx.host.proc)
                .ctx(|| what("creating a user namespace with its id map"))?,
        ),
        None => None,
    };
    let attach_idmapped = |path: &Path, attrs: u64| -> Result<()> {
        let ns = ns.as_ref().expect("only with a user namespace");
        let fd = warren_sys::userns::open_tree_idmapped(path, &ns.user, attrs)
            .ctx(|| what(&format!("making an idmapped mount of {}", path.display())))?;
        warren_sys::userns::move_mount(fd.as_fd(), path)
            .ctx(|| what(&format!("attaching the idmapped {}", path.display())))
    };
    match &root {
        RootMount::Overlay {
            lower,
            upper,
            work,
            target,
        } => {
            if ns.is_some() {
                attach_idmapped(lower, MOUNT_ATTR_RDONLY)?;
            }
            let opts = crate::runtime::overlay_options(lower, upper, work)?;
            warren_sys::fs::mount(
                Some(Path::new("overlay")),
                target,
                Some("overlay"),
                libc::MS_NODEV,
                Some(&opts),
            )
            .ctx(|| what(&format!("mounting its overlay on {}", target.display())))?;
        }
        RootMount::Bind { source } if ns.is_some() => attach_idmapped(source, MOUNT_ATTR_NODEV)?,
        RootMount::Bind { source } => warren_sys::fs::mount(
            Some(source),
            source,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        )
        .ctx(|| what(&format!("binding {}", source.display())))?,
    }
    warren_sys::fs::chroot(root.target()).ctx(|| what("entering its root"))?;
    if let Some(n) = &ns {
        warren_sys::proc::setns(n.user.as_fd()).ctx(|| what("joining its user namespace"))?;
        warren_sys::userns::become_root_in_userns()
            .ctx(|| what("becoming root of its user namespace"))?;
    }
    Ok(Entered {
        _lock: lock,
        _ns: ns,
        _disk: disk_fds,
    })
}
