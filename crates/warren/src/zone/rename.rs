//! `warren rename`: give a halted zone another name.
//!
//! What carries a zone's name: its directory, its lock file, its id range record
//! (`<root>/userns/<base>-<name>`) and its address leases (`<root>/net/<bridge>.json`).
//! Its cgroups, veth and nftables names are made from the name at boot and removed at
//! halt, so a halted zone has none (a stale runtime record is reconciled first, which
//! removes them). The hostname follows the name unless the config pins one.
//!
//! Order, so that a crash at any step leaves a zone that works under one of the two
//! names: the new name's id range record is written first, then the directory is
//! renamed (the one atomic switch), then the old record is removed and any lease moved
//! (halt releases a zone's lease, so a halted zone normally has none). A crash in
//! between leaves an extra record that `warren gc` frees (fault points
//! `rename.after-record` and `rename.after-dir`, tests/cli.rs and tests/crash.rs).

use std::fs;

use super::{load, reconcile, Context};
use crate::error::{Error, IoContext, Result};
use crate::state::ZoneState;
use crate::{idmap, lock, names, net};

/// Rename zone `old` to `new`; it must be configured or installed (halted).
pub fn rename(ctx: &Context, old: &str, new: &str) -> Result<()> {
    ctx.require_root()?;
    names::zone(old)?;
    names::zone(new)?;
    if old == new {
        return Err(Error::Invalid(format!(
            "zone '{old}': the new name is the same as the old one; give another name"
        )));
    }
    // Both names' locks, in name order (as clone does), so two renames cannot deadlock.
    let (_a, _b) = if old < new {
        let a = lock::exclusive(&ctx.layout, "zone", old)?;
        (a, lock::exclusive(&ctx.layout, "zone", new)?)
    } else {
        let b = lock::exclusive(&ctx.layout, "zone", new)?;
        (lock::exclusive(&ctx.layout, "zone", old)?, b)
    };
    let mut z = load(ctx, old)?;
    reconcile(ctx, &mut z)?;
    let st = z.state(ctx);
    match st {
        ZoneState::Configured | ZoneState::Installed => {}
        ZoneState::Incomplete => {
            return Err(Error::WrongState {
                zone: old.into(),
                state: st,
                remedy: format!(
                    "finish it first with 'warren install {old}' or 'warren uninstall {old}'"
                ),
            })
        }
        ZoneState::Ready | ZoneState::Running | ZoneState::Suspended | ZoneState::ShuttingDown => {
            return Err(Error::WrongState {
                zone: old.into(),
                state: st,
                remedy: format!("halt it first: 'warren halt {old}'"),
            })
        }
    }
    let zones = ctx.layout.zones();
    let to = ctx.layout.zone_dir(new);
    if to.exists() {
        return Err(Error::ZoneExists(new.into()));
    }
    if let Some(r) = z.lifecycle.idmap {
        idmap::record_also(&ctx.layout, new, r)?;
    }
    crate::fault::point("rename.after-record");
    fs::rename(&z.dir, &to).ctx(|| {
        format!(
            "zone '{old}': renaming {} to {}",
            z.dir.display(),
            to.display()
        )
    })?;
    crate::fsutil::sync_dir(&zones).ctx(|| format!("syncing {}", zones.display()))?;
    crate::fault::point("rename.after-dir");
    idmap::release(&ctx.layout, old, z.lifecycle.idmap)?;
    move_leases(ctx, old, new)
}

/// Move `old`'s address leases to `new` (a halted zone keeps its address for its next
/// boot), under the address lock.
fn move_leases(ctx: &Context, old: &str, new: &str) -> Result<()> {
    let _lock = lock::exclusive(&ctx.layout, "net", "ipam")?;
    for mut rec in net::ipam::load_all(&ctx.layout)? {
        if let Some(a) = rec.leases.remove(old) {
            rec.leases.insert(new.to_string(), a);
            net::ipam::save(&ctx.layout, &rec)?;
        }
    }
    Ok(())
}
