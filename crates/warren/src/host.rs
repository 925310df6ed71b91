//! What `warren info` reports: the kernel, the cgroup hierarchy and controllers found,
//! the storage backend chosen and why, and the limits of this process.

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
