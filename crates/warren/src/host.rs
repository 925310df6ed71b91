//! What `warren info` reports: the kernel, the cgroup hierarchy and controllers found,
//! the storage backend chosen and why, the limits of this process, and whether the
//! kernel and the state root's filesystem can boot user-namespaced zones
//! ([`userns_support`], also a doctor finding).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cgroups::CgroupVersion;
use crate::error::Result;
use crate::storage::{self, template, BackendKind};
use crate::zone::Context;

#[derive(Debug, Serialize)]
pub struct HostInfo {
    pub warren_version: &'static str,
    pub kernel: String,
    pub state_root: PathBuf,
    pub cgroup_version: CgroupVersion,
    pub cgroup_why: String,
    pub cgroup_controllers: Vec<String>,
    /// Where zone cgroups are created (controllers, directory).
    pub cgroup_parents: Vec<(String, PathBuf)>,
    /// Whether zones can get their controllers here (read-only check; `warren doctor`
    /// tries it).
    pub cgroup_delegation: crate::cgroups::Delegation,
    pub storage_backend: BackendKind,
    pub storage_why: String,
    /// How `disk.max` is enforced here (or why it cannot be).
    pub disk_quota: String,
    /// User namespaces: the default for zones, and what the kernel allows.
    pub user_namespaces: String,
    /// Whether user-namespaced zones can boot here, tried (see [`userns_support`]).
    pub userns_support: UsernsSupport,
    /// /proc views (`crate::procviews`): lxcfs's state as zones booted now get it.
    pub proc_views: String,
    pub proc_views_active: bool,
    pub online_cpus: usize,
    pub mem_total_bytes: u64,
    pub swap_total_bytes: u64,
    pub nofile_soft: u64,
    pub nofile_hard: u64,
    pub static_busybox: Option<PathBuf>,
    pub init_exe: Option<PathBuf>,
    pub is_root: bool,
}

pub fn info(ctx: &Context) -> Result<HostInfo> {
    let (driver, hier) = ctx.cgroups()?;
    let (backend, why) = storage::choose(ctx.layout.root(), &ctx.host.proc)?;
    let mem = crate::stats::meminfo(&ctx.host.proc);
    let (soft, hard) = warren_sys::rlimit_nofile().unwrap_or((0, 0));
    let (proc_views, proc_views_active) = match crate::config::Defaults::load(ctx.layout.root()) {
        Ok(d) => {
            let s = crate::procviews::probe(&ctx.host.proc, &d);
            (s.describe(), s.is_active())
        }
        Err(e) => (format!("unknown: {e}"), false),
    };
    Ok(HostInfo {
        warren_version: env!("CARGO_PKG_VERSION"),
        kernel: warren_sys::kernel_release(),
        state_root: ctx.layout.root().to_path_buf(),
        cgroup_version: hier.version,
        cgroup_why: hier.why.clone(),
        cgroup_controllers: driver.controllers(),
        cgroup_parents: driver.parents(),
        cgroup_delegation: driver.delegation(false),
        storage_backend: backend,
        storage_why: why,
        disk_quota: crate::quota::probe(&ctx.host.proc).describe(),
        user_namespaces: userns_info(&ctx.host.proc),
        userns_support: userns_support(ctx.layout.root(), &ctx.host.proc),
        proc_views,
        proc_views_active,
        online_cpus: crate::stats::online_cpus(&ctx.host.sys).len(),
        mem_total_bytes: mem.get("MemTotal").copied().unwrap_or(0),
        swap_total_bytes: mem.get("SwapTotal").copied().unwrap_or(0),
        nofile_soft: soft,
        nofile_hard: hard,
        static_busybox: template::find_static_busybox().ok(),
        init_exe: crate::runtime::init_exe().ok(),
        is_root: warren_sys::geteuid() == 0,
    })
}

/// User namespaces as `warren info` shows them: on by default per zone, with idmapped
/// mounts; the kernel's limit on their number.
fn userns_info(proc_root: &Path) -> String {
    let max = std::fs::read_to_string(proc_root.join("sys/user/max_user_namespaces"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!(
        "default for every zone (65536 host ids each from {}, idmapped template and /usr; userns = false opts out); user.max_user_namespaces = {max}",
        crate::idmap::FIRST_BASE
    )
}

/// Linux 5.19 is the first to take idmapped mounts as overlay layers.
pub const IDMAPPED_OVERLAY_LAYERS: (u32, u32) = (5, 19);

/// What user-namespaced zones (`userns = true`, the default) need from the host: the
/// template attached as an idmapped mount and used as an overlay lower layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsernsSupport {
    pub ok: bool,
    /// How the zone's root is made, or what is missing (the kernel feature).
    pub summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// `major.minor` of a kernel release such as "6.1.0-57-cloud-amd64" (pure).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Try it: make a throwaway user namespace and an idmapped mount of the state root (or
/// its nearest existing ancestor: the filesystem templates live on), and check the
/// kernel version for idmapped overlay layers (not triable without mounting an
/// overlay in a mount namespace of our own; `tests/cgroup_v2_vm.rs` boots one on 6.1).
pub fn userns_support(state_root: &Path, proc_root: &Path) -> UsernsSupport {
    let release = warren_sys::kernel_release();
    let (maj, min) = IDMAPPED_OVERLAY_LAYERS;
    if kernel_version(&release).is_some_and(|v| v < (maj, min)) {
        return UsernsSupport {
            ok: false,
            summary: format!(
                "Linux {release} cannot use an idmapped mount as an overlay layer (needs {maj}.{min})"
            ),
            fix: Some(format!(
                "boot Linux {maj}.{min} or newer, or create zones with --set userns=false"
            )),
        };
    }
    let dir = state_root
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"));
    let map = format!("0 {} 1", crate::idmap::FIRST_BASE);
    let owner = (crate::idmap::FIRST_BASE, crate::idmap::FIRST_BASE);
    let tried = warren_sys::userns::Namespaces::create(0, &map, owner, proc_root)
        .and_then(|ns| warren_sys::userns::open_tree_idmapped(dir, &ns.user, 0).map(drop));
    match tried {
        Ok(()) => UsernsSupport {
            ok: true,
            summary: format!(
                "tried: an idmapped mount of {} works; zones take the idmapped template, attached in their own mount namespace, as overlay lower layer (Linux {release} >= {maj}.{min})",
                dir.display()
            ),
            fix: None,
        },
        Err(e) => UsernsSupport {
            ok: false,
            summary: format!(
                "an idmapped mount of {} failed ({e}): its filesystem or this kernel does not support idmapped mounts (tmpfs needs Linux 6.3; ext4, xfs, btrfs have them from 5.12-5.15), or user namespaces are off",
                dir.display()
            ),
            fix: Some(
                "put the state root (--root / WARREN_ROOT) on ext4, xfs or btrfs, or create zones with --set userns=false".into(),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions() {
        assert_eq!(kernel_version("6.1.0-57-cloud-amd64"), Some((6, 1)));
        assert_eq!(kernel_version("6.12.95+deb12-cloud-amd64"), Some((6, 12)));
        assert_eq!(kernel_version("5.15.0"), Some((5, 15)));
        assert!(kernel_version("5.15.0").unwrap() < IDMAPPED_OVERLAY_LAYERS);
        assert!(kernel_version("6.1.0").unwrap() >= IDMAPPED_OVERLAY_LAYERS);
        assert_eq!(kernel_version("unknown"), None);
    }
}
