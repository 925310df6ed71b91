//! `warren doctor`: find the limits that cap density before they bite.
//!
//! # Why
//!
//! A host runs out of something long before it runs out of CPU or memory when it holds
//! thousands of zones: pids (`kernel.pid_max` is 32,768 by default, and every thread of
//! every zone takes one), tasks (`kernel.threads-max`), namespaces of each kind
//! (`user.max_*_namespaces`), inotify instances (all zones run as root, so they share
//! root's 128), neighbour-table entries when zones sit on a bridge, conntrack entries, the
//! 65,535 ids the kernel has for memory cgroups. Each of these fails late and obscurely
//! (`fork: Resource temporarily unavailable` in the 32,001st process). The doctor turns
//! a planned density (`--zones N --procs-per-zone P ...`) into what every limit must
//! hold, compares it with the host, and says what to change before the first zone boots.
//!
//! # How
//!
//! Three parts, kept apart so the decisions are testable without a kernel:
//!
//! 1. [`snapshot`] reads the host into a [`LimitSnapshot`]: plain numbers (or the reason
//!    a number could not be read). Every path hangs off an injected /proc root.
//! 2. [`assess()`] is a pure function of (snapshot, [`Plan`]) → [`Finding`]s: for each
//!    limit its current value, what the plan needs, a [`Verdict`] and a [`Fix`]. The
//!    verdict rule is the same everywhere: *will fail* when the need exceeds the limit,
//!    *tight* when it exceeds 80 % of it, else *ok*; a limit that could not be read is
//!    *unknown*, with the reason. The fix for a sysctl is the next power of two at or
//!    above 1.25 × the need, capped at the kernel's maximum; for what warren cannot
//!    change (memory, disk, a hard rlimit without CAP_SYS_RESOURCE) it is advice.
//! 3. Effects: [`fix`] raises sysctls (never lowers them) in /proc/sys and persists
//!    them in a sysctl.d file warren owns; [`probe`] measures instead of estimating, with
//!    a "limited fork bomb" inside a throwaway pids cgroup that caps it by construction.
//!
//! For bridged zones that serve traffic from the host, [`serving`] adds what breaks
//! first as they grow (bridge ports, somaxconn, the ephemeral port range, TIME_WAIT
//! buckets; `--net bridge --rate-per-zone R`).
//!
//! Besides limits, [`assess()`] flags host settings that weaken isolation (verdict
//! *weakens isolation*, advice only, exit code unchanged): `dev.tty.legacy_tiocsti`,
//! `kernel.unprivileged_userns_clone`, router advertisements accepted on warren's
//! bridges, and IPv4 forwarding beside them (`assess::isolation`).
//!
//! `warren boot` uses the same knowledge cheaply: [`admit()`] refuses a zone when a host
//! limit leaves no room for it (`kernel.pid_max`, `kernel.threads-max`, warren's own
//! cgroup's pids.max and cgroup.max.descendants, RLIMIT_NPROC, memory), before any
//! cgroup is made, and names the one that stops it, its value and the fix.
//!
//! # What a zone needs
//!
//! The per-zone needs are estimates, written down as the constants below so that they
//! can be argued with: a zone is an init plus P processes (T tasks in all, T ≥ 1 + P),
//! one mount, pid, uts, ipc and cgroup namespace, and one network namespace unless it
//! shares the host's (`net = "host"`). Its mounts (about 8) live in its own mount
//! namespace, so `fs.mount-max`, which is per namespace, compares against the host's
//! mount count plus 8, not against N × 8. On a bridge, each zone adds a neighbour entry
//! per address family on the host side and some conntrack entries. Its host memory grows
//! with N ([`zone_memory`]): every memory cgroup keeps state for every superblock on the
//! host, and each zone makes [`SUPERBLOCKS_PER_ZONE`] of them (docs/scaling.md).

pub mod admit;
pub mod assess;
pub mod fix;
pub mod ksm;
pub mod probe;
pub mod serving;
pub mod snapshot;
pub mod thp;

use serde::{Deserialize, Serialize};

pub use admit::{admit, AdmitSnapshot};
pub use assess::assess;
pub use snapshot::{CgroupLimits, LimitSnapshot, Reading};

use crate::error::{Error, Result};

/// Host memory an idle zone costs beyond its own programs (SPEC.md: 0.45 MiB at 1,000
/// zones; namespaces, cgroups, init, page tables), rounded up.
pub const ZONE_BASE_MEMORY: u64 = 512 << 10;
/// Host memory an idle zone costs that does not grow with the number of zones
/// (docs/scaling.md: 0.55 MiB at 1,000 zones less 96 KiB, 0.69 MiB at 3,000 less 235 KiB
/// of shrinker state: namespaces, cgroup files, warren-init's anon and page tables),
/// rounded up.
pub const ZONE_FLAT_MEMORY: u64 = 480 << 10;
/// Superblocks a zone makes, each a shrinker id (docs/scaling.md): the length of the
/// runtime's own list (`runtime::SUPERBLOCKS`: overlay root, proc, devpts, its IPC
/// namespace's mqueue), which the zone-plan golden test checks against the plan.
pub const SUPERBLOCKS_PER_ZONE: u64 = crate::runtime::SUPERBLOCKS.len() as u64;
/// Shrinker ids covered by one unit of a memory cgroup's shrinker state.
pub const SHRINKER_IDS_PER_UNIT: u64 = 64;
/// A unit's cost: 64 deferred counters and a 64-bit map, 520 bytes in a 1 KiB slab slot.
pub const SHRINKER_UNIT_BYTES: u64 = 1024;

/// Host memory per idle zone when `zones` run: [`ZONE_FLAT_MEMORY`] plus its memory
/// cgroup's shrinker state, which covers every superblock on the host and so grows with
/// the number of zones (O(N²) for the host). The host's own superblocks (a few hundred)
/// and the high-water mark of earlier runs (the kernel never shrinks it) are left out:
/// a lower bound for a host that ran more zones since boot.
pub fn zone_memory(zones: u64) -> u64 {
    let ids = zones.saturating_mul(SUPERBLOCKS_PER_ZONE);
    ZONE_FLAT_MEMORY.saturating_add(
        ids.div_ceil(SHRINKER_IDS_PER_UNIT)
            .saturating_mul(SHRINKER_UNIT_BYTES),
    )
}
/// Disk of an untouched clone (SPEC.md: 28 KiB).
pub const ZONE_DISK: u64 = 28 << 10;
/// Kernel stack per task on x86_64 (THREAD_SIZE); unswappable.
pub const KERNEL_STACK: u64 = 16 << 10;
/// Mounts in a zone's own mount namespace (root, /usr, /proc, /sys, /dev, devpts, ...).
pub const MOUNTS_PER_ZONE: u64 = 8;
/// Open files per process, system-wide estimate (stdio, a log, a socket or two).
pub const FILES_PER_PROCESS: u64 = 16;
/// inotify instances per zone: a service manager or a file watcher inside it. All zones
/// run as root today, so they share root's per-user limit. warren-init uses none.
pub const INOTIFY_INSTANCES_PER_ZONE: u64 = 1;
/// inotify watches per zone, for the same watcher.
pub const INOTIFY_WATCHES_PER_ZONE: u64 = 32;
/// Memory mappings a large dynamically linked service holds (vm.max_map_count is per
/// process, so the number of zones does not change it).
pub const MAPS_PER_PROCESS: u64 = 1024;
/// Conntrack entries per bridged zone (a few idle connections each way).
pub const CONNTRACK_PER_ZONE: u64 = 16;
/// Neighbour entries per bridged zone and address family (its address on the bridge).
pub const NEIGH_PER_ZONE: u64 = 1;
/// Host ids per zone with a user namespace (`idmap::RANGE`).
pub const IDS_PER_ZONE: u64 = 65536;
/// Descriptors warren itself holds at its peak; it keeps none per zone.
pub const WARREN_FDS: u64 = 64;
/// Memory cgroup ids the kernel has (MEM_CGROUP_ID_MAX), dying cgroups included.
pub const MEM_CGROUP_IDS: u64 = 65535;

/// How the planned zones are networked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum NetPlan {
    /// Own network namespace with loopback only (warren's default).
    None,
    /// Own network namespace with a veth on a host bridge.
    Bridge,
    /// The host's network stack, shared: no network namespace.
    Host,
}

/// The density to check the host against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub zones: u64,
    /// Processes per zone besides init.
    pub procs_per_zone: u64,
    /// Tasks (threads, each process's main thread included) per zone.
    pub threads_per_zone: u64,
    /// Memory per zone for its programs, on top of [`ZONE_BASE_MEMORY`].
    pub mem_per_zone: u64,
    pub net: NetPlan,
    /// New connections per second each zone gets from the host (0: no load planned);
    /// the serving checks ([`serving`]) count with it.
    pub rate_per_zone: u64,
    /// inotify instances per zone ([`INOTIFY_INSTANCES_PER_ZONE`] unless measured).
    pub inotify_instances_per_zone: u64,
    /// inotify watches per zone ([`INOTIFY_WATCHES_PER_ZONE`] unless measured).
    pub inotify_watches_per_zone: u64,
}

impl Plan {
    /// Build a plan; `threads` defaults to the process count (one thread each).
    pub fn new(
        zones: u64,
        procs_per_zone: u64,
        threads: Option<u64>,
        mem_per_zone: u64,
        net: NetPlan,
    ) -> Result<Plan> {
        if zones == 0 {
            return Err(Error::Invalid(
                "--zones must be at least 1: give the density to plan for, e.g. --zones 1000"
                    .into(),
            ));
        }
        let procs = 1 + procs_per_zone;
        let threads_per_zone = threads.unwrap_or(procs);
        if threads_per_zone < procs {
            return Err(Error::Invalid(format!(
                "--threads-per-zone {threads_per_zone} is below the zone's {procs} processes (init + {procs_per_zone}); it counts every task, so give at least {procs}"
            )));
        }
        Ok(Plan {
            zones,
            procs_per_zone,
            threads_per_zone,
            mem_per_zone,
            net,
            rate_per_zone: 0,
            inotify_instances_per_zone: INOTIFY_INSTANCES_PER_ZONE,
            inotify_watches_per_zone: INOTIFY_WATCHES_PER_ZONE,
        })
    }

    /// The plan with zones that hold `instances` inotify instances and `watches`
    /// watches each (as `warren bench density` counted them) instead of the allowance
    /// for a service manager.
    pub fn with_inotify(self, instances: u64, watches: u64) -> Plan {
        Plan {
            inotify_instances_per_zone: instances,
            inotify_watches_per_zone: watches,
            ..self
        }
    }

    /// The plan with a load of `rate` new connections per second per zone.
    pub fn with_rate(self, rate: u64) -> Plan {
        Plan {
            rate_per_zone: rate,
            ..self
        }
    }

    /// Processes per zone: init + P.
    pub fn procs(&self) -> u64 {
        1 + self.procs_per_zone
    }

    /// Tasks of all planned zones.
    pub fn total_tasks(&self) -> u64 {
        self.zones.saturating_mul(self.threads_per_zone)
    }

    /// Network namespaces per zone.
    pub fn netns_per_zone(&self) -> u64 {
        match self.net {
            NetPlan::Host => 0,
            NetPlan::None | NetPlan::Bridge => 1,
        }
    }
}

/// How a limit compares with the plan's need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    /// Need above 80 % of the limit: it holds, with little room.
    Tight,
    /// Need above the limit.
    WillFail,
    /// The limit could not be read (the finding says why).
    Unknown,
    /// A host setting that weakens isolation between zones, or between a zone and the
    /// host (advice; it does not change the exit code, which is about density).
    Weakens,
    /// A host setting known to make zones misbehave (advice; exit code unchanged), e.g.
    /// transparent huge pages "always" with swap ([`thp`]).
    Warning,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Ok => "ok",
            Verdict::Tight => "tight",
            Verdict::WillFail => "will fail",
            Verdict::Unknown => "unknown",
            Verdict::Weakens => "weakens isolation",
            Verdict::Warning => "warning",
        })
    }
}

/// A limit's value now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Current {
    Value(u64),
    /// No limit is set ("max", RLIM_INFINITY, no control file at the root cgroup).
    Unlimited,
    /// Could not be read; the reason.
    Unknown(String),
}

/// What the numbers count, for printing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Count,
    Bytes,
}

/// What to do about a limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fix {
    /// Raise a sysctl (`warren doctor --fix` does it).
    Sysctl { key: String, value: u64 },
    /// Something warren cannot change for you.
    Advice { text: String },
}

impl std::fmt::Display for Fix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fix::Sysctl { key, value } => {
                // The port range is two numbers: quoted, as sysctl(8) takes it.
                let text = serving::sysctl_text(key, *value).replace('\t', " ");
                if text.contains(' ') {
                    write!(f, "sysctl -w {key}=\"{text}\"")
                } else {
                    write!(f, "sysctl -w {key}={text}")
                }
            }
            Fix::Advice { text } => f.write_str(text),
        }
    }
}

/// One limit, checked against the plan. The JSON form is the API object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The sysctl key, or a name such as "RLIMIT_NOFILE" or "memory".
    pub limit: String,
    pub current: Current,
    pub needed: u64,
    pub unit: Unit,
    pub verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
    /// How the need was counted, or why the limit matters (or does not).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// The cgroup delegation check ([`crate::cgroups::delegate`]) as a finding: will fail
/// when zones cannot get their controllers, with the fix.
pub fn delegation_finding(d: &crate::cgroups::Delegation) -> Finding {
    Finding {
        limit: "cgroup delegation (memory, pids)".into(),
        current: Current::Value(d.granted as u64),
        needed: crate::cgroups::delegate::REQUIRED.len() as u64,
        unit: Unit::Count,
        verdict: if d.ok { Verdict::Ok } else { Verdict::WillFail },
        fix: d.fix.clone().map(|text| Fix::Advice { text }),
        note: d.summary.clone(),
    }
}

/// User-namespaced zones ([`crate::host::userns_support`]) as a finding: will fail
/// naming the kernel or filesystem feature that is missing.
pub fn userns_finding(u: &crate::host::UsernsSupport) -> Finding {
    Finding {
        limit: "idmapped overlay layers (userns zones)".into(),
        current: Current::Value(u64::from(u.ok)),
        needed: 1,
        unit: Unit::Count,
        verdict: if u.ok { Verdict::Ok } else { Verdict::WillFail },
        fix: u.fix.clone().map(|text| Fix::Advice { text }),
        note: u.summary.clone(),
    }
}

/// The host's limits now, as [`assess()`] takes them (`warren doctor`, `warren metrics`).
pub fn read_snapshot(ctx: &crate::zone::Context) -> LimitSnapshot {
    let version = ctx
        .cgroups()
        .map(|(_, h)| h.version)
        .map_err(|e| e.to_string());
    snapshot::read(&ctx.host.proc, ctx.layout.root(), version)
}

/// The findings beside the limits, which no plan changes: cgroup delegation (tried for
/// real with `try_delegation`: it prepares what a boot would; read-only otherwise),
/// user namespaces (tried: a throwaway namespace and an idmapped mount, so a
/// single-threaded caller or one whose other threads do not rely on this moment),
/// transparent huge pages and /proc views.
pub fn host_findings(ctx: &crate::zone::Context, try_delegation: bool) -> Vec<Finding> {
    let mut f: Vec<Finding> = ctx
        .cgroups()
        .ok()
        .map(|(d, _)| delegation_finding(&d.delegation(try_delegation)))
        .into_iter()
        .collect();
    f.push(userns_finding(&crate::host::userns_support(
        ctx.layout.root(),
        &ctx.host.proc,
    )));
    f.extend(thp::finding(&thp::read(
        &ctx.host.sys,
        &ctx.host.proc,
        ctx.layout.root(),
    )));
    f.push(ksm::finding(&ksm::read(&ctx.host.sys, ctx.layout.root())));
    if let Ok(d) = crate::config::Defaults::load(ctx.layout.root()) {
        f.push(crate::procviews::finding(&crate::procviews::probe(
            &ctx.host.proc,
            &d,
        )));
    }
    f
}

/// Counts of verdicts, for the summary line and the exit code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub ok: usize,
    pub tight: usize,
    pub will_fail: usize,
    pub unknown: usize,
    /// Host settings that weaken isolation.
    pub weakens: usize,
    /// Host settings known to make zones misbehave.
    pub warnings: usize,
}

impl Summary {
    pub fn of(findings: &[Finding]) -> Summary {
        let mut s = Summary::default();
        for f in findings {
            match f.verdict {
                Verdict::Ok => s.ok += 1,
                Verdict::Tight => s.tight += 1,
                Verdict::WillFail => s.will_fail += 1,
                Verdict::Unknown => s.unknown += 1,
                Verdict::Weakens => s.weakens += 1,
                Verdict::Warning => s.warnings += 1,
            }
        }
        s
    }
}

/// What `warren doctor` reports (its `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub plan: Plan,
    pub findings: Vec<Finding>,
    pub summary: Summary,
}

impl Report {
    pub fn new(plan: Plan, findings: Vec<Finding>) -> Report {
        let summary = Summary::of(&findings);
        Report {
            plan,
            findings,
            summary,
        }
    }
}
