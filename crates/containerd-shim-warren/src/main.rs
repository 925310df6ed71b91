//! `containerd-shim-warren-v1`: containerd's shim v2 (`runtime_type =
//! "io.containerd.warren.v1"`), serving the task API over ttrpc and running
//! containers through warren's OCI front end and sandbox core as library calls.
//!
//! - [`service`]: the shim (start/delete actions, one shim per pod) and the task
//!   service (create, start, exec, kill, pids, pause/resume, update, stats, wait,
//!   delete, state, connect, shutdown), exits published as `TaskExit`.
//! - [`task`]: the task service.
//! - [`helper`]: the one-shot single-threaded helper for `create` and `exec`: a
//!   clone into new namespaces (and an exec's setns) is only sound from a process
//!   with one thread, and the ttrpc server has several, so those two verbs run
//!   `warren::oci::ops::{create, exec}` in a fresh copy of this binary.
//! - [`stdio`]: the FIFOs containerd hands over, and the pty of a terminal process.
//! - [`metrics`]: cgroup figures as the `io.containerd.cgroups.v1/v2.Metrics` types.
#![forbid(unsafe_code)]

mod helper;
mod metrics;
mod service;
mod stdio;
mod task;

/// The runtime name containerd knows this shim by.
pub const RUNTIME_ID: &str = "io.containerd.warren.v1";

fn main() {
    let mut args = std::env::args_os();
    let _argv0 = args.next();
    if args.next().as_deref() == Some(std::ffi::OsStr::new(helper::ARG)) {
        std::process::exit(helper::main(args.collect()));
    }
    containerd_shim::run::<service::Shim>(RUNTIME_ID, None);
}
