//! The scenario both drivers run, `scripts/vm/scenario.sh`: the cgroup v2 VM
//! (`cgroup_v2_vm.rs`) and this host (`scenario_host.rs`). One list of the checks every
//! run must report, so a check that passes on one driver and is missing or failing on
//! the other is a failing test. Checks that exist on one cgroup version only are named
//! `v2-...` and listed in [`V2_ONLY`].

/// One `WARREN-VM-RESULT <check> ok|fail <detail>` line.
#[derive(Debug)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

/// The result lines of a run's output.
pub fn parse(output: &str) -> Vec<Check> {
    output
        .lines()
        .filter_map(|l| l.trim_end_matches('\r').strip_prefix("WARREN-VM-RESULT "))
        .map(|l| {
            let mut p = l.splitn(3, ' ');
            Check {
                name: p.next().unwrap_or_default().to_string(),
                ok: p.next() == Some("ok"),
                detail: p.next().unwrap_or_default().to_string(),
            }
        })
        .collect()
}

/// Checks every driver must report ok.
pub const REQUIRED: &[&str] = &[
    "setup",
    "info",
    "doctor",
    "info-userns",
    "userns-tmpfs-detected",
    "boot-plain",
    "memory.max",
    "memory.low",
    "pids.max",
    "cpu.max",
    "cpu.weight",
    "login-plain",
    "devices-allowed",
    "mknod-no-usable-node",
    "devices-disk-denied",
    "oom-kill",
    "list-oom-killed",
    "pids-cap",
    "cpu-max",
    "stat",
    "memstat",
    "boot-userns",
    "login-userns",
    "no-cpu-without-cpu-limit",
    "cpu-with-cpu-max",
    "boot-high-root",
    "login-high-root",
    "live-set",
    "live-memory.max",
    "live-cpu.max",
    "live-pids.max",
    "live-login",
    "live-only",
    "live-in-force",
    "init-exit-reported",
    "list-exited",
    "swap-enable",
    "memory.swap.max",
    "swap-no-oom",
    "boot-disk",
    "cpuset.cpus",
    "disk-max-enospc",
    "boot-bridge",
    "ping-gateway",
    "agent-once",
    "agent-evicts",
    "evicted-listed",
    "clone",
    "boot-clone",
    "oci-run",
    "oci-create",
    "oci-cgroups-path",
    "oci-frozen",
    "oci-thawed",
    "oci-update",
    "oci-updated-pids",
    "doctor-probe",
    "suspend",
    "suspended-listed",
    "resume",
    "login-after-resume",
    "unit-warren-autoboot-ExecStart",
    "login-at-limit",
    "halt",
    "gc",
    "empty-tree",
];

/// Checks only a cgroup v2 run reports: what a zone's `cgroup.controllers` holds, the
/// init born in its cgroup (clone3 `CLONE_INTO_CGROUP` takes only a cgroup2 directory),
/// gc in buckets, and a session whose parent withholds the controllers (v1 has no
/// delegation).
pub const V2_ONLY: &[&str] = &[
    "v2-init-cloned-into-cgroup",
    "v2-init-migrated-when-off",
    "v2-only-needed-controllers",
    "v2-cpu-zone-controllers",
    "v2-gc-sweeps-buckets",
    "v2-refused-undelegated",
    "v2-nothing-made-undelegated",
];

/// Every required check missing or failed, and every other failed check, each line
/// prefixed with `label`.
pub fn failures(label: &str, checks: &[Check], v2: bool) -> Vec<String> {
    let mut out = Vec::new();
    let wanted = REQUIRED
        .iter()
        .chain(V2_ONLY.iter().filter(|_| v2))
        .copied();
    let mut required = Vec::new();
    for name in wanted {
        required.push(name);
        match checks.iter().find(|c| c.name == name) {
            None => out.push(format!("[{label}] {name}: not reported")),
            Some(c) if !c.ok => out.push(format!("[{label}] {name}: {}", c.detail)),
            Some(_) => {}
        }
    }
    for c in checks
        .iter()
        .filter(|c| !c.ok && !required.contains(&c.name.as_str()))
    {
        out.push(format!("[{label}] {}: {}", c.name, c.detail));
    }
    if !v2 {
        for c in checks.iter().filter(|c| V2_ONLY.contains(&c.name.as_str())) {
            out.push(format!("[{label}] {}: reported on cgroup v1", c.name));
        }
    }
    out
}
