//! config.json → a [`SandboxSpec`] (the field mapping); the one builder of
//! `sandbox::plan` turns it into the steps of the container init's plan (and of an
//! `exec`'d process's), in the order documented there, with the parent's go first
//! ([`SyncPoint::First`]) as runc does.
//!
//! Every path and string is resolved here, before the clone; the child only walks the
//! steps. Paths inside the rootfs are resolved with symlinks followed *inside* the
//! rootfs ([`secure_join`]), so a container's own links cannot aim a mount at a host
//! path. The process's user, capabilities, rlimits and cwd are set before `create`
//! returns (a failure there fails `create` with the reason); the wait for `start`
//! (`exec.fifo`) is the process's gate, before no_new_privs and the filter.

use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use oci_spec::runtime::{LinuxNamespaceType, Mount, Process, Spec};
use warren_sys::harden::SockFilter;
use warren_sys::libc;
use warren_sys::spawn::{ExecTarget, Step};

use crate::cgroups::{CgroupSet, CgroupVersion};
use crate::sandbox::spec::*;
use crate::sandbox::SandboxSpec;

pub use crate::sandbox::plan::{cpath, cstr, Plan, PlanError};

mod devices;
mod init;
mod mounts;
mod options;
mod paths;
mod process;
#[cfg(test)]
mod tests;

pub use init::{
    has_own_mount_namespace, host_id_of_root, init_plan, new_namespaces, InitInputs, HOOKS_SYNC,
};
pub use options::{parse_options, MountOptions};
pub use paths::{mount_holding, resolve_exec, secure_join};
pub use process::exec_plan;
pub use process::{cap_mask, process_spec, ProcessInputs};

/// The fd the console pty's slave is kept at in the child until it becomes stdio.
pub const CONSOLE_SLAVE_FD: RawFd = 901;

/// The fd the exec fifo is held at (O_PATH) while the init is still root.
pub const FIFO_PATH_FD: RawFd = 903;

/// The PATH used when the process's env has none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
