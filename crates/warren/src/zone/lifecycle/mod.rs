//! The verbs: create, install, clone, boot, halt, reboot, login, uninstall, delete,
//! config set/unset. Each is atomic on disk: a new zone is built in a temporary
//! directory and renamed into place; a state change is a durable rename of state.json;
//! an interrupted install or uninstall leaves `incomplete`, which the next install or
//! uninstall finishes.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{load, reconcile, Context, Zone};
use crate::cgroups::CgroupError;
use crate::config::{self, NetMode, ZoneConfig};
use crate::doctor;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{
    atomic_write, mkdir_mode, read_text_bounded, remove_tree, sync_dir, unique_suffix,
    MAX_SMALL_FILE,
};
use crate::idmap::{self, IdRange};
use crate::lock::{self, Lock};
use crate::runtime::{self, BootSpec};
use crate::state::{self, Decision, Lifecycle, Runtime, Verb, ZoneState};
use crate::stats;
use crate::storage::{backend, template, RootMount};
use crate::{fault, names};

use super::prepare::{disk_for_boot, host_privileges, own_upper, prepare_idmap, upper_owner};

mod edit;
mod install;
mod live;
mod run;
mod suspend;
mod views;

pub use edit::{config_bytes, config_replace, config_set, config_unset};
pub use install::{clone, clone_from, create, create_with_profiles, delete, install, uninstall};
pub use live::{ApplyTo, ConfigChange};
pub use run::{
    boot, boot_autoboot, boot_watched, evict, halt, halt_keeping_cgroups, login, reboot,
    remove_kept_cgroups, BootReport, Halted, Kept,
};
pub(in crate::zone) use run::{cgroup_claim, halt_locked, CgroupClaim};
pub(in crate::zone) use suspend::repair as repair_suspension;
pub use suspend::{resume, resume_with, suspend, wake, ResumeReport, SuspendReport};
pub use views::{proc_views, ViewState, ZoneViews};

/// What a verb did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// Nothing to do: the zone was already there (idempotent verbs).
    AlreadyDone(&'static str),
}

const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(10);

pub(in crate::zone) fn zone_lock(ctx: &Context, name: &str) -> Result<Lock> {
    names::zone(name)?;
    lock::exclusive(&ctx.layout, "zone", name)
}

/// Load under lock and repair leftovers.
pub(in crate::zone) fn load_locked(ctx: &Context, name: &str) -> Result<Zone> {
    let mut z = load(ctx, name)?;
    reconcile(ctx, &mut z)?;
    Ok(z)
}

pub(in crate::zone) fn write_config(dir: &Path, cfg: &ZoneConfig) -> Result<()> {
    let path = super::config_path(dir);
    atomic_write(&path, config::to_toml(cfg).as_bytes(), true)
        .ctx(|| format!("writing {}", path.display()))
}

fn validate_for_host(ctx: &Context, name: &str, cfg: &ZoneConfig) -> Result<()> {
    config::check_host(name, cfg, &stats::online_cpus(&ctx.host.sys))?;
    config::check_privileges(name, cfg, &host_privileges(ctx, cfg))?;
    if let (true, Some(base)) = (cfg.userns, cfg.userns_base) {
        idmap::check_pin(&ctx.layout, name, base)?;
    }
    Ok(())
}
