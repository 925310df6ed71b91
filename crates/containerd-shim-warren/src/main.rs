//! `containerd-shim-warren-v1`: containerd's shim v2 (`runtime_type =
//! "io.containerd.warren.v1"`), serving the task API over ttrpc and running
//! containers through warren's OCI front end and sandbox core as library calls.
//!
//! - [`bootstrap`]: the actions containerd runs (`start`, `delete`, the server).
//! - [`service`]: the shim's containers and processes (one shim per pod), exits
//!   published as `TaskExit`, the queue of events to containerd.
//! - [`task`]: the task service (create, start, exec, kill, pids, pause/resume,
//!   update, stats, wait, delete, state, connect, shutdown).
//! - [`helper`]: the one-shot single-threaded helper for `create` and `exec`: a
//!   clone into new namespaces (and an exec's setns) is only sound from a process
//!   with one thread, and the server has two (its runtime's and the reaper), so
//!   those two verbs run
//!   `warren::oci::ops::{create, exec}` in a fresh copy of this binary.
//! - [`socket`]: the pod's socket, claimed and given up under a lock beside it (two
//!   `start`s racing on one pod).
//! - [`stdio`]: the FIFOs containerd hands over, and the pty of a terminal process.
//! - [`oom`]: the live OOM watcher (one epoll for all the shim's memory cgroups,
//!   watched by the server's runtime).
//! - [`metrics`]: cgroup figures as the `io.containerd.cgroups.v1/v2.Metrics` types.
#![forbid(unsafe_code)]

mod bootstrap;
mod helper;
mod logfifo;
mod metrics;
mod oom;
mod service;
mod socket;
mod stdio;
mod task;

/// The runtime name containerd knows this shim by.
pub const RUNTIME_ID: &str = "io.containerd.warren.v1";

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == helper::ARG) {
        std::process::exit(helper::main(args[2..].to_vec()));
    }
    let flags = match containerd_shim::parse(&args[1..]) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{RUNTIME_ID}: {e}; containerd runs this binary as its runtime (runtime_type = \"{RUNTIME_ID}\")");
            std::process::exit(2);
        }
    };
    let code = match flags.action.as_str() {
        "start" => bootstrap::start(&flags),
        "delete" => bootstrap::delete(&flags),
        "" if !flags.socket.is_empty() => bootstrap::serve(&flags),
        other => {
            eprintln!("{RUNTIME_ID}: action {other:?} is not known (start, delete, or -socket for the server)");
            2
        }
    };
    std::process::exit(code);
}
