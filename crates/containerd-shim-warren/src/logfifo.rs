//! The shim's log, kept on a FIFO containerd reads.
//!
//! containerd makes a `log` FIFO in every task's bundle and copies what is written to
//! it into its own log while that task lives (it holds the FIFO open read-write, so
//! its reader never sees an end of file, and closes it when the task goes). A shim
//! writes its log to the FIFO of the bundle it was started in. For a shim per pod
//! that is the pod's sandbox, the last task to go. A shim per node outlives it: once
//! the first pod is removed, containerd no longer reads that FIFO and every later
//! line would be lost. So the logger writes to one descriptor, and when the task
//! whose FIFO it is goes, the FIFO of a live task is put on that descriptor
//! (`dup2`): containerd reads it, and the logger never changes.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use warren_sys::libc;

/// The descriptor the logger writes to; -1 until [`init`].
static LOG_FD: AtomicI32 = AtomicI32::new(-1);
/// The bundle whose FIFO it is.
static CURRENT: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The bundle whose FIFO the log goes to.
pub fn current() -> Option<PathBuf> {
    CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Log to the `log` FIFO of the current directory (the bundle the shim was started
/// in), at containerd's level: `debug` when containerd runs with debug, else
/// `$RUST_LOG` or info (as `containerd_shim::logger::init`).
pub fn init(debug: bool) -> io::Result<()> {
    let f = OpenOptions::new().write(true).open("log")?;
    LOG_FD.store(f.as_raw_fd(), Ordering::SeqCst);
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = std::env::current_dir().ok();
    let configured = std::env::var(containerd_shim::logger::LOG_ENV)
        .ok()
        .and_then(|l| log::LevelFilter::from_str(&l).ok())
        .unwrap_or(log::LevelFilter::Info);
    let level = if debug {
        configured.max(log::LevelFilter::Debug)
    } else {
        configured
    };
    log::set_max_level(level);
    log::set_boxed_logger(Box::new(containerd_shim::logger::FifoLogger::with_file(f)))
        .map_err(|e| io::Error::other(e.to_string()))
}

/// Write the log to `bundle`'s FIFO from now on. Opened without blocking (containerd
/// holds its reading end; without one the open fails, ENXIO, and nothing changes),
/// then made blocking again as the first one was.
pub fn switch_to(bundle: &Path) -> io::Result<()> {
    let fd = LOG_FD.load(Ordering::SeqCst);
    if fd < 0 {
        return Err(io::Error::other("the log was never opened"));
    }
    let f: File = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(bundle.join("log"))?;
    use std::os::fd::AsFd;
    warren_sys::pty::set_nonblocking(f.as_raw_fd(), false)?;
    // Atomic: a line being written goes whole to the old FIFO or the new.
    warren_sys::fds::replace(f.as_fd(), fd)?;
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some(bundle.to_path_buf());
    Ok(())
}
