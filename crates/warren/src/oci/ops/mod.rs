//! The OCI verbs: effects on the host, in the order the runtime-spec gives; one file
//! per verb, what they share here.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use oci_spec::runtime::{LinuxNamespaceType, Process, Spec};
use warren_sys::libc;
use warren_sys::spawn::{Event, SpawnError};

use super::plan::{self, InitInputs, ProcessInputs};
use super::state::{self, Record, Status, Verb};
use super::{cgroup, hooks, Ctx};
use crate::error::{Error, IoContext, Result};
use crate::sandbox::CgroupEntry;

mod create;
mod delete;
mod exec;
mod kill;
mod pause;
mod start;
mod update;

pub use create::{create, CreateArgs};
pub use delete::delete;
pub use exec::{exec, ExecArgs};
pub use kill::{kill, parse_signal};
pub use pause::pause;
pub use start::start;
pub use update::{update, update_resources};

fn refused(msg: impl ToString) -> Error {
    Error::Refused(msg.to_string())
}

/// The largest config.json read (a bundle is the caller's; bounded like every file
/// warren reads).
const MAX_CONFIG: u64 = 4 << 20;

/// Read and parse `<bundle>/config.json`.
pub fn load_spec(id: &str, bundle: &Path) -> Result<Spec> {
    let path = bundle.join("config.json");
    let unreadable = |e: &dyn std::fmt::Display| {
        Error::Invalid(format!(
            "container '{id}': cannot read {}: {e}; pass the bundle directory holding config.json with --bundle",
            path.display()
        ))
    };
    let text = crate::fsutil::read_text_bounded(&path, MAX_CONFIG).map_err(|e| unreadable(&e))?;
    let malformed = |e: &dyn std::fmt::Display| {
        Error::Invalid(format!(
            "container '{id}': {} is malformed: {e}; fix it (see 'warren oci spec' for a valid one)",
            path.display()
        ))
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| malformed(&e))?;
    check_version(value.get("ociVersion")).map_err(|e| malformed(&e))?;
    serde_json::from_value(value).map_err(|e| malformed(&e))
}

/// `ociVersion` must be there and name a 1.x runtime spec (pure).
fn check_version(v: Option<&serde_json::Value>) -> std::result::Result<(), plan::PlanError> {
    let supported = format!("warren implements runtime-spec {}", super::OCI_VERSION);
    let Some(v) = v else {
        return Err(plan::PlanError::field(
            "ociVersion",
            format!(
                "is missing; set it to \"{}\" ({supported})",
                super::OCI_VERSION
            ),
        ));
    };
    let s = v.as_str().unwrap_or_default();
    let major = s.split('.').next().and_then(|m| m.parse::<u32>().ok());
    if major != Some(1) || s.split('.').count() < 2 {
        return Err(plan::PlanError::field(
            "ociVersion",
            format!("{v} is not supported; {supported} (any 1.x config is accepted)"),
        ));
    }
    Ok(())
}

/// The runtime-spec state document.
pub fn state_json(r: &Record, status: Status) -> serde_json::Value {
    let mut v = serde_json::json!({
        "ociVersion": super::OCI_VERSION,
        "id": r.id,
        "status": status.to_string(),
        "bundle": r.bundle,
        "rootfs": r.rootfs,
        "created": r.created,
        "owner": "",
        "annotations": r.annotations,
    });
    if let (Some(pid), true) = (r.pid, status != Status::Stopped) {
        v["pid"] = pid.into();
    } else {
        v["pid"] = 0.into();
    }
    v
}

fn hooks_of(spec: &Spec) -> oci_spec::runtime::Hooks {
    spec.hooks().clone().unwrap_or_default()
}

/// The container's seccomp program, if its config has a profile (create and exec).
fn seccomp_filter(id: &str, spec: &Spec) -> Result<Option<Vec<warren_sys::harden::SockFilter>>> {
    spec.linux()
        .as_ref()
        .and_then(|l| l.seccomp().as_ref())
        .map(|profile| {
            crate::oci::seccomp::filter(profile)
                .map_err(|e| Error::Invalid(format!("container '{id}': linux.seccomp: {e}")))
        })
        .transpose()
}

fn write_pid_file(path: &Path, pid: i32) -> Result<()> {
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    crate::fsutil::atomic_write(&path, pid.to_string().as_bytes(), true)
        .ctx(|| format!("writing the pid file {}", path.display()))
}

fn spawn_error(id: &str, p: &plan::Plan, e: SpawnError<Error>) -> Error {
    crate::sandbox::plan::spawn_error(("container", id), "setup step", "process", p, e)
}

/// Kill everything left, remove the cgroups create made and the state directory.
fn destroy(ctx: &Ctx, r: &Record) -> Result<()> {
    if let Some(set) = &r.cgroups {
        if cgroup::is_frozen(set) {
            let _ = cgroup::freeze(&r.id, set, false);
        }
        cgroup::destroy(set, r.cgroups_made.as_deref())?;
    } else if let (Some(pid), Some(st)) = (r.pid, r.start_time) {
        if crate::stats::proc_start_time(&ctx.proc_root, pid) == Some(st) {
            let _ = warren_sys::proc::kill(pid, libc::SIGKILL);
        }
    }
    let dir = state::dir(&ctx.root, &r.id);
    crate::fsutil::remove_tree(&dir).ctx(|| format!("removing {}", dir.display()))
}

pub fn state(ctx: &Ctx, id: &str) -> Result<serde_json::Value> {
    let r = state::load(&ctx.root, id)?;
    Ok(state_json(&r, state::observe_host(&r, &ctx.proc_root)))
}

pub fn pids(ctx: &Ctx, id: &str) -> Result<Vec<i32>> {
    let r = state::load(&ctx.root, id)?;
    Ok(match &r.cgroups {
        Some(set) => set.pids()?,
        None => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn oci_version_must_be_1_x() {
        use serde_json::json;
        assert!(super::check_version(Some(&json!("1.0.2"))).is_ok());
        assert!(super::check_version(Some(&json!("1.2.1"))).is_ok());
        assert!(super::check_version(None)
            .unwrap_err()
            .to_string()
            .contains("ociVersion: is missing"));
        assert!(super::check_version(Some(&json!("2.0.0"))).is_err());
        assert!(super::check_version(Some(&json!(1))).is_err());
        assert!(super::check_version(Some(&json!("one"))).is_err());
    }
}
