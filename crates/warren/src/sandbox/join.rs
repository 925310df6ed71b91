//! Joining a running sandbox's namespaces: the one join of `warren login` and
//! `warren oci exec`.
//!
//! The caller (single-threaded, as `setns` into a mount namespace requires) opens the
//! namespaces of the sandbox's init ([`Target::open`]), checks that they are still
//! that init's (its start time, read after the descriptors pinned them), and joins
//! them in the order it gives ([`Target::enter`]). The process it then spawns through
//! `warren_sys::spawn` starts inside (in the pid namespace too: `setns` of a pid
//! namespace applies to children).

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Why a join failed.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The init is gone (or another process has its pid now).
    #[error("its init has exited")]
    Gone,
    /// `setns` into one namespace failed.
    #[error("joining its {ns} namespace: {source}")]
    Setns {
        ns: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// The namespaces of one sandbox's init that differ from ours, in joining order.
pub struct Target {
    fds: Vec<(&'static str, File)>,
}

impl Target {
    /// Open the namespaces named in `order` of the process `pid`, which must have
    /// started at `start_time` (clock ticks, /proc/<pid>/stat field 22). A namespace
    /// this process already shares is skipped.
    pub fn open(
        proc_root: &Path,
        pid: i32,
        start_time: u64,
        order: &[&'static str],
    ) -> Result<Target, JoinError> {
        let ns_dir = proc_root.join(pid.to_string()).join("ns");
        let mut fds = Vec::new();
        for &ns in order {
            let theirs = ns_dir.join(ns);
            let ours = proc_root.join("self/ns").join(ns);
            let same = match (std::fs::metadata(&theirs), std::fs::metadata(&ours)) {
                (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
                (Err(_), _) => return Err(JoinError::Gone),
                _ => false,
            };
            if !same {
                fds.push((ns, File::open(&theirs).map_err(|_| JoinError::Gone)?));
            }
        }
        // The descriptors pin the namespaces; make sure they are still the init's.
        if crate::stats::proc_start_time(proc_root, pid) != Some(start_time) {
            return Err(JoinError::Gone);
        }
        Ok(Target { fds })
    }

    /// Whether joining includes a user namespace.
    pub fn has_user(&self) -> bool {
        self.fds.iter().any(|(ns, _)| *ns == "user")
    }

    /// Join every namespace, in order.
    pub fn enter(&self) -> Result<(), JoinError> {
        for (ns, f) in &self.fds {
            warren_sys::proc::setns(f.as_fd()).map_err(|source| JoinError::Setns { ns, source })?;
        }
        Ok(())
    }
}
