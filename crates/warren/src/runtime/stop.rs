//! Stop a zone: SIGTERM, a grace period, SIGKILL of its cgroups, the console saved.

use std::path::Path;
use std::time::Duration;

use warren_sys::libc;

use super::console;
use crate::cgroups::CgroupSet;
use crate::error::Result;
use crate::state::InitId;
use crate::stats;

/// How a stop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopOutcome {
    /// Init exited on SIGTERM within the timeout.
    pub graceful: bool,
}

/// Stop a zone: SIGTERM to its init, wait up to `timeout`, then SIGKILL everything in
/// its cgroups, reap init if it is our child, and remove the cgroups unless
/// `remove_cgroups` is false (the caller removes them later: `halt --all`). The console
/// is saved to `console_log` once the zone is gone (runtime::console).
pub fn stop(
    init: Option<InitId>,
    cgroups: &CgroupSet,
    timeout: Duration,
    proc_root: &Path,
    console_log: &Path,
    remove_cgroups: bool,
) -> Result<StopOutcome> {
    let mut graceful = true;
    let pidfd = init.and_then(|i| {
        let fd = warren_sys::proc::pidfd_open(i.pid).ok()?;
        // The pidfd pins the process; if the start time matches now, it is our init.
        (stats::proc_start_time(proc_root, i.pid) == Some(i.start_time)).then_some(fd)
    });
    // Held open across the stop, so the shutdown messages are in the saved copy.
    let live_console = init
        .filter(|_| pidfd.is_some())
        .and_then(|i| console::open_live(proc_root, i));
    if let Some(fd) = &pidfd {
        use std::os::fd::AsFd;
        if warren_sys::proc::pidfd_send_signal(fd.as_fd(), libc::SIGTERM).is_ok() {
            graceful = warren_sys::proc::pidfd_wait(fd.as_fd(), timeout).unwrap_or(false);
        }
    }
    cgroups.kill_all(Duration::from_secs(10))?;
    if let (Some(fd), Some(i)) = (&pidfd, init) {
        use std::os::fd::AsFd;
        let _ = warren_sys::proc::pidfd_wait(fd.as_fd(), Duration::from_secs(5));
        // Reap it if we are its parent (a long-running warren such as the demo).
        let _ = warren_sys::proc::waitpid_nohang(i.pid);
    }
    if remove_cgroups {
        cgroups.remove(Duration::from_secs(5))?;
    }
    if let Some(f) = &live_console {
        // A log that cannot be saved does not make the halt fail.
        let _ = console::save(f, console_log);
    }
    Ok(StopOutcome { graceful })
}
