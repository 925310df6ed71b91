//! Zone hardening policy, as plain data: the capabilities a zone keeps, its seccomp
//! filter, the /proc and /sys paths masked or made read-only, and the device nodes
//! its devices cgroup allows. `runtime` turns these into spawn steps; `cgroups::v1`
//! writes the device list. See docs/isolation.md for the reasoning.

pub mod caps;
pub mod devices;
pub mod rlimits;
pub mod seccomp;

use warren_sys::harden::SockFilter;

use crate::config::ZoneConfig;

/// What confines every process of a zone (init and `warren login` alike).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// Capabilities kept (bit n = capability n).
    pub keep: u64,
    /// The seccomp program.
    pub filter: Vec<SockFilter>,
}

impl Confinement {
    pub fn for_zone(config: &ZoneConfig) -> Confinement {
        Confinement {
            keep: caps::keep_mask(&config.caps_add, &config.caps_drop),
            filter: seccomp::zone::filter(&config.seccomp_deny),
        }
    }
}

/// Files hidden behind a bind of /dev/null (relative to the zone root); skipped where
/// the kernel does not have them.
pub const MASKED_FILES: [&str; 6] = [
    "proc/kcore",
    "proc/keys",
    "proc/sysrq-trigger",
    "proc/timer_list",
    "proc/sched_debug",
    "proc/kallsyms",
];

/// Directories hidden behind an empty read-only tmpfs; skipped where absent.
pub const MASKED_DIRS: [&str; 3] = ["sys/firmware", "proc/acpi", "proc/scsi"];

/// /proc directories bound onto themselves read-only.
pub const READONLY_DIRS: [&str; 3] = ["proc/sys", "proc/irq", "proc/bus"];
