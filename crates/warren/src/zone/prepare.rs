//! What boot, install and clone check and prepare before anything is created: the
//! privileges the host can grant, the zone's id range and the ownership of its private
//! layer, and its `disk.max` image.

use std::fs;
use std::path::Path;

use super::{Context, Zone};
use crate::config::{self, ZoneConfig};
use crate::error::{Error, IoContext, Result};
use crate::idmap::{self, IdRange};
use crate::state;
use crate::storage::RootMount;

/// What this warren process can pass on to a zone: its capability bounding set and
/// the hard limits of the resources `cfg` sets.
pub(super) fn host_privileges(ctx: &Context, cfg: &ZoneConfig) -> config::HostPrivileges {
    let status = fs::read_to_string(ctx.host.proc.join("self/status")).unwrap_or_default();
    let cap_bounding = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(u64::MAX);
    let hard_limits = cfg
        .rlimits
        .keys()
        .filter_map(|name| {
            let r = crate::isolation::rlimits::resource(name)?;
            let (_, hard) = warren_sys::getrlimit(r).ok()?;
            Some((name.clone(), hard))
        })
        .collect();
    config::HostPrivileges {
        cap_bounding,
        hard_limits,
    }
}

/// The zone's user-namespace ids for a boot: the range its state records (allocated
/// now if it has none or `userns-base` pins another), and, for the overlay backend,
/// its private upper layer owned by that range (host ids with `userns = false`).
pub(super) fn prepare_idmap(
    ctx: &Context,
    z: &mut Zone,
    root: &RootMount,
) -> Result<Option<IdRange>> {
    let want = if z.config.userns {
        let r = match z.lifecycle.idmap {
            Some(r) if z.config.userns_base.is_none_or(|b| b == r.base) => {
                idmap::check_at_boot(&ctx.layout, &z.name, r)?;
                r
            }
            _ => {
                let r = idmap::allocate(&ctx.host, &ctx.layout, &z.name, z.config.userns_base)?;
                z.lifecycle.idmap = Some(r);
                state::save_lifecycle(&z.dir, &z.lifecycle)?;
                r
            }
        };
        Some(r)
    } else {
        None
    };
    let owner = want.unwrap_or(IdRange::new(0));
    if crate::quota::image(&z.dir).is_some() {
        crate::quota::shift_image(&z.name, &z.dir, owner)?;
    } else if let RootMount::Overlay { upper, .. } = root {
        own_upper(&z.name, upper, owner)?;
    }
    Ok(want)
}

/// The zone's `disk.max` image, checked against its config: a cap set after install,
/// removed, or changed is refused with the remedy (the image is made at install).
pub(super) fn disk_for_boot(z: &Zone) -> Result<Option<crate::quota::DiskMount>> {
    let disk = crate::quota::DiskMount::of(&z.dir);
    let remedy = "uninstall and install it again (this discards the zone's changes)";
    match (&disk, z.config.disk_max) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(Error::config(
            &z.name,
            format!("disk.max is set but the zone was installed without a cap; {remedy}, or unset disk.max"),
        )),
        (Some(_), None) => Err(Error::config(
            &z.name,
            format!("disk.max was unset but the zone's layer is a capped image; set disk.max again, or {remedy}"),
        )),
        (Some(d), Some(max)) => {
            let size = crate::quota::image_size(&d.image)?;
            if size != max {
                return Err(Error::config(
                    &z.name,
                    format!(
                        "disk.max is {} but the zone's image holds {}; resizing is not supported yet: set disk.max = \"{}\" again, or {remedy}",
                        config::format_size(max),
                        config::format_size(size),
                        config::format_size(size)
                    ),
                ));
            }
            Ok(disk)
        }
    }
}

/// The id range that owns the upper directory `upper`, judged by its top directory's
/// owner: `known` (the range the zone's record names) if the owner falls inside it
/// (a zone may chown its `/` to any of its own ids), else host ids if the owner is
/// one, else the range starting at that owner (a layer from before ranges were
/// recorded).
pub(super) fn upper_owner(zone: &str, upper: &Path, known: Option<IdRange>) -> Result<IdRange> {
    use std::os::unix::fs::MetadataExt;
    let uid = fs::symlink_metadata(upper)
        .ctx(|| format!("zone '{zone}': reading {}", upper.display()))?
        .uid();
    Ok(match known {
        Some(r) if uid >= r.base && uid <= r.last() => r,
        _ if uid < idmap::RANGE => IdRange::new(0),
        _ => IdRange::new(uid),
    })
}

/// Make the upper directory `upper` (and everything in it) owned by range `to`, if its
/// top directory says it belongs to another range (or to host ids).
pub(super) fn own_upper(zone: &str, upper: &Path, to: IdRange) -> Result<()> {
    let from = upper_owner(zone, upper, Some(to))?;
    if from == to {
        return Ok(());
    }
    idmap::shift_tree(upper, from, to).ctx(|| {
        format!(
            "zone '{zone}': re-owning its private layer {} from host ids {}-{} to {}-{}",
            upper.display(),
            from.base,
            from.last(),
            to.base,
            to.last()
        )
    })?;
    Ok(())
}
