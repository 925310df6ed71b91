//! The sandbox core: what zones (`runtime`), `warren login` and the OCI runtime
//! (`oci::plan`) share, so that a hardening fix is made once.
//!
//! A front end converts its config into a [`spec::SandboxSpec`] (a zone config and
//! its template; an OCI `config.json`; a login or an `exec`), and [`plan::plan`]
//! turns that into the steps of a spawn plan in one fixed order, checked against
//! [`invariants`]; `warren_sys::spawn` runs it. Also here: the masked and read-only
//! kernel paths ([`masks`]), the one join of `login` and `oci exec` ([`join`]), and how
//! every new process enters its cgroups ([`cgroup_entry`]).
//! The policy applied (device list, capabilities, seccomp, masks) is data in
//! `isolation`.

pub mod cgroup_entry;
mod error;
pub mod invariants;
pub mod join;
pub mod masks;
pub mod plan;
mod root;
pub mod spec;

use warren_sys::spawn::Step;

pub use cgroup_entry::CgroupEntry;
pub use plan::{plan, Plan, PlanError};
pub use spec::SandboxSpec;

/// A step and what it does (for error messages).
pub type Described = (Step, String);
