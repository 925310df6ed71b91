//! warren: dense, fast, isolated zones on one Linux host.
//!
//! Layers, top to bottom (each depends only on those below it):
//! - [`cli`]: argument parsing, tables and `--json`; no logic of its own.
//! - [`zone`]: the lifecycle and its state machine; takes per-zone locks.
//! - [`storage`], [`runtime`], [`cgroups`], [`stats`]: the effects.
//! - [`doctor`]: host limits against a planned density (pure verdicts), fixes, probes.
//! - [`stat`]: what zones cost (`warren stat`, `warren memstat`), read from cgroups and /proc.
//! - [`agent`]: evicts zones under memory pressure before the OOM killer must; [`swap`]
//!   provisions the swap that overcommit needs.
//! - `warren_sys`: the audited unsafe syscalls.
//!
//! Pure decisions ([`state::decide`], [`config`] validation, cgroup file values) are plain
//! functions over data, unit-tested without a kernel.

#![forbid(unsafe_code)]

pub mod agent;
pub mod bench;
pub mod cgroups;
pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod doctor;
pub mod error;
pub mod fault;
pub mod fsutil;
pub mod host;
pub mod idmap;
pub mod isolation;
pub mod journal;
pub mod layout;
pub mod lock;
pub mod measure;
pub mod metrics;
pub mod names;
pub mod net;
pub mod oci;
pub mod procviews;
pub mod profile;
pub mod quota;
pub mod runtime;
pub mod sandbox;
pub mod stat;
pub mod state;
pub mod stats;
pub mod storage;
pub mod suspend;
pub mod swap;
pub mod treeops;
pub mod zone;

pub use error::{Error, ExitCode, Result};
