//! `warren proc-views`: each running zone's /proc views (live, dead or none), and
//! `--refresh`, which repairs them after lxcfs came back from a crash or restart.
//!
//! A zone keeps the binds of the lxcfs mount it booted with; when that daemon dies,
//! its viewed files fail with ENOTCONN (docs/proc-views.md). Refresh
//! (`runtime::reattach_views`) enters the zone's mount namespace (a forked helper:
//! `setns` to the namespace of the zone's init, which belongs to the host's user
//! namespace) and detaches the dead binds; if lxcfs answers
//! again and the zone wants views, it attaches new ones, opened on the host's mount
//! as at boot. A zone that wants no views, or whose views are live, is left alone; a
//! zone whose views died while lxcfs is still down gets the host's files back (it works
//! again, with the host's values). The contrib unit drop-in runs it after lxcfs starts.

use serde::Serialize;

use super::*;
use crate::procviews::{self, Want};
use crate::zone::names_in;

/// One zone's views, as read from its init's mountinfo and a `stat` through its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViewState {
    /// The host's /proc files.
    None,
    /// lxcfs's views, answering.
    Live,
    /// Binds of an lxcfs mount whose daemon is gone (ENOTCONN).
    Dead,
}

/// A running zone's views, before and (with `--refresh`) after.
#[derive(Debug, Clone, Serialize)]
pub struct ZoneViews {
    pub zone: String,
    pub want: &'static str,
    pub before: ViewState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<ViewState>,
}

fn want_name(w: Want) -> &'static str {
    match w {
        Want::Off => "off",
        Want::IfAvailable => "if available",
        Want::Required => "required",
    }
}

fn observe(proc_root: &Path, pid: i32) -> ViewState {
    let info = crate::fsutil::read_text_bounded(
        &proc_root.join(format!("{pid}/mountinfo")),
        crate::fsutil::MAX_SMALL_FILE * 16,
    )
    .unwrap_or_default();
    let first = format!("/{}", procviews::VIEWS[0]);
    if procviews::lxcfs_mounts_at(&info, Path::new(&first)) == 0 {
        return ViewState::None;
    }
    let through = proc_root.join(format!("{pid}/root/{}", procviews::VIEWS[0]));
    match std::fs::metadata(through) {
        Ok(_) => ViewState::Live,
        Err(_) => ViewState::Dead,
    }
}

/// The views of every running zone; with `refresh`, dead ones repaired.
pub fn proc_views(ctx: &Context, refresh: bool) -> Result<Vec<ZoneViews>> {
    if refresh {
        ctx.require_root()?;
    }
    let defaults = crate::config::Defaults::load(ctx.layout.root())?;
    let mut out = Vec::new();
    for name in names_in(&ctx.layout)? {
        let _lock = zone_lock(ctx, &name)?;
        let Ok(z) = load_locked(ctx, &name) else {
            continue;
        };
        let Some(init) = z.runtime.as_ref().and_then(|r| r.init) else {
            continue;
        };
        let want = procviews::want(&z.config, &defaults);
        let before = observe(&ctx.host.proc, init.pid);
        let after = match (refresh, before) {
            (true, ViewState::Dead | ViewState::None) => {
                let dir = procviews::for_boot(&name, &z.config, &defaults, &ctx.host.proc)
                    .unwrap_or(None)
                    .map(|s| s.dir);
                if before == ViewState::None && dir.is_none() {
                    Some(before)
                } else {
                    crate::runtime::reattach_views(&name, &ctx.host.proc, init, dir.as_deref())?;
                    Some(observe(&ctx.host.proc, init.pid))
                }
            }
            (true, ViewState::Live) => Some(before),
            (false, _) => None,
        };
        out.push(ZoneViews {
            zone: name,
            want: want_name(want),
            before,
            after,
        });
    }
    Ok(out)
}
