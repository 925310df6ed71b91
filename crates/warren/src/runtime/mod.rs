//! The native runtime: start a zone's init in new namespaces, stop it, log into it.
//!
//! Boot is one `clone(2)` and one `execve(2)`: the child builds the zone's root *inside
//! its own mount namespace* (overlay or bind, the template's read-only binds, /proc,
//! read-only /sys, a tiny /dev) and pivots into it while the parent moves it into the
//! zone's cgroups (and wires its network); then the child enters a new cgroup namespace
//! and execs init. Nothing is mounted in the host's namespace and no helper process
//! stays on the host: when the zone's last process exits, the kernel tears down its
//! mounts and namespaces with it.
//!
//! The zone is converted into a sandbox spec ([`spec`]), which the one plan builder
//! (`sandbox::plan`) turns into steps and `warren_sys::spawn` executes ([`boot`]);
//! [`stop`] ends it.

mod boot;
pub mod console;
pub mod devdir;
pub mod init;
pub mod login;
mod login_io;
pub mod login_user;
mod spec;
mod stop;
mod userns;
mod views;

use std::fs::File;
use std::path::{Path, PathBuf};

use self::userns::UsernsFds;

use crate::cgroups::CgroupSet;
use crate::config::ZoneConfig;
use crate::error::{Error, IoContext, Result};
use crate::idmap::IdRange;
use crate::net::NetRuntime;
use crate::storage::template::Bind;
use crate::storage::RootMount;

pub use boot::{boot, init_exited, last_lines, watch, Booted, BOOT_WATCH};
pub use spec::SUPERBLOCKS;
pub use stop::{stop, StopOutcome};
pub use views::reattach_views;

/// The environment every zone process starts with.
pub const ZONE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The descriptor number the child gives the console log (close-on-exec).
const CONSOLE_FD: i32 = 900;
/// The descriptor number the child keeps the zone's /dev/shm directory at, between
/// opening it in the zone's storage and binding it on the shared /dev.
const SHM_FD: i32 = 901;

/// Everything needed to boot one zone.
pub struct BootSpec<'a> {
    pub zone: &'a str,
    pub config: &'a ZoneConfig,
    pub root: &'a RootMount,
    pub binds: &'a [Bind],
    pub cgroups: &'a CgroupSet,
    /// The host file the zone's console (init's stdout/stderr, /dev/console) is saved to.
    pub console: &'a Path,
    /// The shared /dev template bound read-only into the zone (`devdir::ensure`).
    pub dev: &'a Path,
    /// The `warren-init` binary on the host (run by file descriptor).
    pub init_exe: &'a Path,
    pub proc_root: &'a Path,
    /// `net = "bridge"`: the leased address, attached right after the clone.
    pub net: Option<&'a NetRuntime>,
    /// The zone's host ids: boot it in its own user namespace (`userns = true`).
    pub idmap: Option<IdRange>,
    /// `disk.max`: the image holding the overlay's upper and work directories,
    /// mounted (from a loop device) before the overlay.
    pub disk: Option<&'a crate::quota::DiskMount>,
    /// `proc-views`: the lxcfs mount whose views are bound over the zone's /proc
    /// (`crate::procviews`).
    pub views: Option<&'a crate::procviews::Source>,
    /// The template's OCI image: its command, env, working directory and user are the
    /// zone's defaults (docs/images.md).
    pub image: Option<&'a crate::storage::image_config::ImageMeta>,
}

/// Descriptors the child needs; they must stay open until the spawn returns.
struct Fds {
    cgroups: crate::sandbox::CgroupEntry,
    null: File,
    /// The shared /dev as a detached read-only bind (idmapped with a user namespace).
    dev: std::os::fd::OwnedFd,
    init: Option<File>,
    userns: Option<UsernsFds>,
    /// A `disk.max` image's loop device (autoclear: detached when its last mount goes)
    /// and its ext4 filesystem, mounted by the parent as a detached mount.
    disk: Option<(warren_sys::loopdev::LoopDevice, std::os::fd::OwnedFd)>,
    /// lxcfs's views as detached read-only binds, with their paths in the zone's root.
    views: Vec<(&'static str, std::os::fd::OwnedFd)>,
}

/// Overlay mount options, refusing paths the option syntax cannot carry.
pub fn overlay_options(lower: &Path, upper: &Path, work: &Path) -> Result<String> {
    for p in [lower, upper, work] {
        let s = p.to_string_lossy();
        if s.contains([',', ':', '\\']) || s.contains('\0') {
            return Err(Error::Invalid(format!(
                "path {} contains ',', ':' or '\\', which overlayfs options cannot carry; use a state root without them",
                p.display()
            )));
        }
    }
    Ok(format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    ))
}

/// Where the zone init binary is: `warren-init` beside this executable, else this
/// executable itself (it dispatches on argv[0]).
pub fn init_exe() -> Result<PathBuf> {
    let me = std::env::current_exe().ctx(|| "finding warren's own executable".to_string())?;
    let beside = me.with_file_name(init::ARGV0);
    Ok(if beside.is_file() { beside } else { me })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_options_refuse_unsafe_paths() {
        let ok = overlay_options(Path::new("/l"), Path::new("/u"), Path::new("/w")).unwrap();
        assert_eq!(ok, "lowerdir=/l,upperdir=/u,workdir=/w");
        assert!(overlay_options(Path::new("/a,b"), Path::new("/u"), Path::new("/w")).is_err());
        assert!(overlay_options(Path::new("/l"), Path::new("/u:x"), Path::new("/w")).is_err());
    }
}
