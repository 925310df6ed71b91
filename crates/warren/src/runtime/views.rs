//! A running zone's /proc views replaced in place (`warren proc-views --refresh`):
//! a forked helper joins the zone's mount namespace, detaches the lxcfs binds stacked
//! on each view and attaches new ones, opened on the host's lxcfs mount as at boot
//! (`crate::procviews`, docs/proc-views.md).

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::procviews;
use crate::state::InitId;
use crate::stats;

/// In the zone's mount namespace: detach every lxcfs bind over a view, then attach
/// those of lxcfs at `dir` (none: the host's files stay).
pub fn reattach_views(
    zone: &str,
    proc_root: &Path,
    init: InitId,
    dir: Option<&Path>,
) -> Result<()> {
    let pid = init.pid;
    let ns_path = proc_root.join(format!("{pid}/ns/mnt"));
    let ns = std::fs::File::open(&ns_path)
        .ctx(|| format!("zone '{zone}': opening {}", ns_path.display()))?;
    // The descriptor is the zone's only if its init is still the one recorded.
    if stats::proc_start_time(proc_root, pid) != Some(init.start_time) {
        return Err(Error::Refused(format!(
            "zone '{zone}': its init (pid {pid}) exited while its /proc views were refreshed; boot it again"
        )));
    }
    let info = crate::fsutil::read_text_bounded(
        &proc_root.join(format!("{pid}/mountinfo")),
        crate::fsutil::MAX_SMALL_FILE * 16,
    )
    .unwrap_or_default();
    let stacked: Vec<(PathBuf, usize)> = procviews::VIEWS
        .iter()
        .map(|rel| {
            let at = Path::new("/").join(rel);
            let n = procviews::lxcfs_mounts_at(&info, &at);
            (at, n)
        })
        .collect();
    let fresh = match dir {
        Some(d) => procviews::open(zone, d)?,
        None => Vec::new(),
    };
    let child = warren_sys::proc::fork()
        .ctx(|| format!("zone '{zone}': forking to refresh its /proc views"))?;
    if child == 0 {
        let r = (|| -> std::io::Result<()> {
            warren_sys::proc::setns(ns.as_fd())?;
            for (at, n) in &stacked {
                for _ in 0..*n {
                    warren_sys::fs::umount2(at, warren_sys::libc::MNT_DETACH)?;
                }
            }
            for (rel, fd) in &fresh {
                warren_sys::userns::move_mount(fd.as_fd(), &Path::new("/").join(rel))?;
            }
            Ok(())
        })();
        if let Err(e) = &r {
            eprintln!("warren: zone '{zone}': refreshing its /proc views: {e}");
        }
        warren_sys::exit_now(i32::from(r.is_err()));
    }
    let status = warren_sys::proc::waitpid_blocking(child)
        .ctx(|| format!("zone '{zone}': waiting for the /proc views helper"))?;
    if status.code() != 0 {
        return Err(Error::Refused(format!(
            "zone '{zone}': refreshing its /proc views failed (see above); reboot the zone to get them back"
        )));
    }
    Ok(())
}
