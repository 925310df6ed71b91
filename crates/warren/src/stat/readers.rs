//! Readers of what the kernel says about a zone and the host: cgroup memory, CPU and pid
//! files (v1 and v2), PSI, and `/proc/<pid>/smaps_rollup`. Every reader takes its roots
//! as data (a [`CgroupSet`] holds absolute directories; /proc is a path), so the unit
//! tests below run on recorded fixture files. A file the kernel does not provide gives
//! `None`, never a made-up zero.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::cgroups::{CgroupSet, CgroupVersion};

/// A zone's memory as its cgroup reports it, in bytes. `None`: not reported here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ZoneMemory {
    /// Everything charged to the cgroup (v1 memory.usage_in_bytes, v2 memory.current).
    pub charged_bytes: Option<u64>,
    /// Resident anonymous memory (v1 total_rss, v2 anon).
    pub anon_bytes: Option<u64>,
    /// Page cache charged to the zone, shmem included (v1 total_cache, v2 file).
    pub file_bytes: Option<u64>,
    /// tmpfs and shared memory, a part of `file_bytes` (v1 total_shmem, v2 shmem).
    pub shmem_bytes: Option<u64>,
    /// Kernel memory (v1 memory.kmem.usage_in_bytes; v2 memory.stat kernel, or on
    /// kernels before 5.18 the sum of kernel_stack, pagetables, percpu, sock and slab).
    pub kernel_bytes: Option<u64>,
    /// Swapped out (v1 total_swap, present only with swap accounting; v2
    /// memory.swap.current).
    pub swap_bytes: Option<u64>,
}

/// Pressure stall information: the share of the last 10 s in which some (or all)
/// tasks waited for memory, in percent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pressure {
    pub some_avg10: f64,
    pub full_avg10: f64,
}

/// smaps_rollup totals over a set of processes, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Smaps {
    pub rss_bytes: u64,
    pub pss_bytes: u64,
    /// Unique set size: Private_Clean + Private_Dirty.
    pub uss_bytes: u64,
    pub pss_anon_bytes: u64,
    pub pss_file_bytes: u64,
    pub pss_shmem_bytes: u64,
    /// Shared_Clean + Shared_Dirty, summed per process (a page mapped by two processes
    /// counts twice: what private copies would cost).
    pub shared_bytes: u64,
    pub swap_bytes: u64,
    /// Processes whose smaps_rollup was read (those that exited meanwhile are skipped).
    pub processes: u64,
}

pub use crate::cgroups::parse_keyed;

fn read_u64(set: &CgroupSet, controller: &str, file: &str) -> Option<u64> {
    set.read(controller, file)?.parse().ok()
}

/// The zone's memory from its cgroup files.
pub fn zone_memory(set: &CgroupSet) -> ZoneMemory {
    let text = set.read("memory", "memory.stat").unwrap_or_default();
    let stat = parse_keyed(&text);
    let get = |k: &str| stat.get(k).copied();
    match set.version {
        CgroupVersion::V1 => ZoneMemory {
            charged_bytes: read_u64(set, "memory", "memory.usage_in_bytes"),
            anon_bytes: get("total_rss"),
            file_bytes: get("total_cache"),
            shmem_bytes: get("total_shmem"),
            kernel_bytes: read_u64(set, "memory", "memory.kmem.usage_in_bytes"),
            swap_bytes: get("total_swap"),
        },
        CgroupVersion::V2 => ZoneMemory {
            charged_bytes: read_u64(set, "memory", "memory.current"),
            anon_bytes: get("anon"),
            file_bytes: get("file"),
            shmem_bytes: get("shmem"),
            kernel_bytes: get("kernel").or_else(|| v2_kernel_parts(&stat)),
            swap_bytes: read_u64(set, "memory", "memory.swap.current"),
        },
    }
}

/// Kernel memory on v2 kernels without the "kernel" line (before 5.18): the parts it
/// sums. `None` unless at least the stack and slab lines are there.
fn v2_kernel_parts(stat: &BTreeMap<&str, u64>) -> Option<u64> {
    let stack = stat.get("kernel_stack")?;
    let slab = stat.get("slab")?;
    let rest: u64 = ["pagetables", "sec_pagetables", "percpu", "sock", "vmalloc"]
        .iter()
        .filter_map(|k| stat.get(k))
        .sum();
    Some(stack + slab + rest)
}

/// CPU time used by the zone since boot, in nanoseconds.
pub fn zone_cpu_ns(set: &CgroupSet) -> Option<u64> {
    set.cpu_ns()
}

/// Processes (cgroup.procs), tasks (pids.current: processes and threads) and the cap on
/// tasks (pids.max; `None` when "max" or absent). The processes are counted in the
/// pids controller's directory, where every process of the zone is (one file, not
/// one per v1 hierarchy: a scrape reads this for each of 1,000 zones); without that
/// controller, in all of the zone's cgroups.
pub fn zone_pids(set: &CgroupSet) -> (Option<u64>, Option<u64>, Option<u64>) {
    let procs = match set.read("pids", "cgroup.procs") {
        Some(text) => Some(text.lines().filter(|l| !l.trim().is_empty()).count() as u64),
        None => set.pids().ok().map(|p| p.len() as u64),
    };
    let tasks = read_u64(set, "pids", "pids.current");
    let max = read_u64(set, "pids", "pids.max");
    (procs, tasks, max)
}

/// The zone's memory limit as the kernel holds it (v1 memory.limit_in_bytes, v2
/// memory.max); `None` when unlimited ("max", or v1's page-rounded i64::MAX) or absent.
pub fn zone_memory_limit(set: &CgroupSet) -> Option<u64> {
    let file = match set.version {
        CgroupVersion::V1 => "memory.limit_in_bytes",
        CgroupVersion::V2 => "memory.max",
    };
    read_u64(set, "memory", file).filter(|n| *n < 1 << 60)
}

/// Bytes (received, sent) by a bridged zone, from the host end of its veth pair
/// (`/sys/class/net/<veth>/statistics`): what the host end sends, the zone receives.
pub fn zone_net_bytes(sys_root: &Path, host_veth: &str) -> Option<(u64, u64)> {
    let dir = sys_root
        .join("class/net")
        .join(host_veth)
        .join("statistics");
    let get = |f: &str| -> Option<u64> {
        std::fs::read_to_string(dir.join(f))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some((get("tx_bytes")?, get("rx_bytes")?))
}

/// Parse a PSI file ("some avg10=… avg60=… avg300=… total=…" and a "full" line).
pub fn parse_pressure(text: &str) -> Option<Pressure> {
    let avg10 = |kind: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(kind))?;
        line.split_whitespace()
            .find_map(|f| f.strip_prefix("avg10="))?
            .parse()
            .ok()
    };
    Some(Pressure {
        some_avg10: avg10("some ")?,
        full_avg10: avg10("full ").unwrap_or(0.0),
    })
}

/// The zone's own memory PSI (v2 memory.pressure; v1 kernels do not have it per cgroup).
pub fn zone_pressure(set: &CgroupSet) -> Option<Pressure> {
    // v1 has no per-cgroup PSI: not even a failed open per zone.
    if set.version == CgroupVersion::V1 {
        return None;
    }
    parse_pressure(&set.read("memory", "memory.pressure")?)
}

/// The host's memory PSI (/proc/pressure/memory; absent without CONFIG_PSI or psi=0).
pub fn host_pressure(proc_root: &Path) -> Option<Pressure> {
    parse_pressure(&std::fs::read_to_string(proc_root.join("pressure/memory")).ok()?)
}

/// Parse smaps_rollup text into one process's totals.
pub fn parse_smaps_rollup(text: &str) -> Option<Smaps> {
    let mut kb: BTreeMap<&str, u64> = BTreeMap::new();
    for l in text.lines() {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        if let Some(n) = v.split_whitespace().next().and_then(|n| n.parse().ok()) {
            kb.insert(k.trim(), n);
        }
    }
    let rss = *kb.get("Rss")?;
    let b = |k: &str| kb.get(k).copied().unwrap_or(0) * 1024;
    Some(Smaps {
        rss_bytes: rss * 1024,
        pss_bytes: b("Pss"),
        uss_bytes: b("Private_Clean") + b("Private_Dirty"),
        pss_anon_bytes: b("Pss_Anon"),
        pss_file_bytes: b("Pss_File"),
        pss_shmem_bytes: b("Pss_Shmem"),
        shared_bytes: b("Shared_Clean") + b("Shared_Dirty"),
        swap_bytes: b("Swap"),
        processes: 1,
    })
}

impl std::ops::AddAssign for Smaps {
    fn add_assign(&mut self, o: Smaps) {
        self.rss_bytes += o.rss_bytes;
        self.pss_bytes += o.pss_bytes;
        self.uss_bytes += o.uss_bytes;
        self.pss_anon_bytes += o.pss_anon_bytes;
        self.pss_file_bytes += o.pss_file_bytes;
        self.pss_shmem_bytes += o.pss_shmem_bytes;
        self.shared_bytes += o.shared_bytes;
        self.swap_bytes += o.swap_bytes;
        self.processes += o.processes;
    }
}

/// smaps_rollup summed over `pids`. Slow: the kernel walks every page table of each
/// process to answer. Processes that are gone (or zombies, whose file is empty) are
/// skipped.
pub fn smaps_total(proc_root: &Path, pids: &[i32]) -> Smaps {
    let mut total = Smaps::default();
    for pid in pids {
        let path = proc_root.join(pid.to_string()).join("smaps_rollup");
        if let Some(s) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| parse_smaps_rollup(&t))
        {
            total += s;
        }
    }
    total
}

/// Host CPU ticks: (busy, total) from /proc/stat's "cpu" line.
pub fn host_cpu_ticks(proc_root: &Path) -> Option<(u64, u64)> {
    let (total, idle) = crate::stats::cpu_ticks(proc_root)?;
    Some((total.saturating_sub(idle), total))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    pub fn fixtures() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/stat/fixtures")
    }

    /// A v1 zone recorded on the development VM while python3 held 64 MiB of touched
    /// bytes in it (warren-init, python3, sleep).
    pub fn v1_set() -> CgroupSet {
        let f = fixtures().join("v1");
        CgroupSet {
            version: CgroupVersion::V1,
            dirs: ["cpuacct", "memory", "pids"]
                .iter()
                .map(|c| (c.to_string(), f.join(c)))
                .collect(),
        }
    }

    pub fn v2_set(dir: &str) -> CgroupSet {
        CgroupSet {
            version: CgroupVersion::V2,
            dirs: vec![("cpu,memory,pids".into(), fixtures().join(dir).join("zone"))],
        }
    }

    #[test]
    fn v1_memory_from_memory_stat_and_kmem() {
        let m = zone_memory(&v1_set());
        assert_eq!(m.anon_bytes, Some(70_139_904));
        assert_eq!(m.file_bytes, Some(7_864_320));
        assert_eq!(m.shmem_bytes, Some(0));
        assert_eq!(m.swap_bytes, Some(0));
        assert_eq!(m.kernel_bytes, Some(524_288));
        assert!(m.charged_bytes.unwrap() >= m.anon_bytes.unwrap());
    }

    #[test]
    fn v2_memory_from_memory_stat_and_swap_current() {
        let m = zone_memory(&v2_set("v2"));
        assert_eq!(
            m,
            ZoneMemory {
                charged_bytes: Some(79_753_216),
                anon_bytes: Some(67_690_496),
                file_bytes: Some(8_110_080),
                shmem_bytes: Some(4096),
                kernel_bytes: Some(1_871_872),
                swap_bytes: Some(1_048_576),
            }
        );
    }

    #[test]
    fn v2_before_5_18_sums_kernel_parts_and_lacks_swap() {
        let m = zone_memory(&v2_set("v2-5.10"));
        // kernel_stack + slab + percpu + sock (no pagetables line on 5.10).
        assert_eq!(m.kernel_bytes, Some(32_768 + 368_640));
        assert_eq!(m.swap_bytes, None, "no memory.swap.current: absent, not 0");
        assert_eq!(m.anon_bytes, Some(2_162_688));
    }

    #[test]
    fn missing_files_are_absent_not_zero() {
        let tmp = tempfile::tempdir().unwrap();
        let set = CgroupSet {
            version: CgroupVersion::V1,
            dirs: vec![("memory".into(), tmp.path().to_path_buf())],
        };
        assert_eq!(zone_memory(&set), ZoneMemory::default());
        assert_eq!(zone_pids(&set), (Some(0), None, None));
        assert_eq!(zone_cpu_ns(&set), None);
        assert_eq!(zone_pressure(&set), None);
    }

    #[test]
    fn cpu_time_v1_nanoseconds_v2_microseconds() {
        assert_eq!(zone_cpu_ns(&v1_set()), Some(119_824_316));
        assert_eq!(zone_cpu_ns(&v2_set("v2")), Some(2_073_411_000));
    }

    #[test]
    fn memory_limit_finite_or_absent() {
        let tmp = tempfile::tempdir().unwrap();
        let set = CgroupSet {
            version: CgroupVersion::V1,
            dirs: vec![("memory".into(), tmp.path().to_path_buf())],
        };
        assert_eq!(zone_memory_limit(&set), None);
        std::fs::write(
            tmp.path().join("memory.limit_in_bytes"),
            "9223372036854771712\n",
        )
        .unwrap();
        assert_eq!(zone_memory_limit(&set), None, "v1's unlimited is no limit");
        std::fs::write(tmp.path().join("memory.limit_in_bytes"), "67108864\n").unwrap();
        assert_eq!(zone_memory_limit(&set), Some(64 << 20));
        let v2 = CgroupSet {
            version: CgroupVersion::V2,
            dirs: vec![("memory".into(), tmp.path().to_path_buf())],
        };
        std::fs::write(tmp.path().join("memory.max"), "max\n").unwrap();
        assert_eq!(zone_memory_limit(&v2), None);
        std::fs::write(tmp.path().join("memory.max"), "33554432\n").unwrap();
        assert_eq!(zone_memory_limit(&v2), Some(32 << 20));
    }

    #[test]
    fn net_bytes_from_the_host_veth_swapped() {
        let tmp = tempfile::tempdir().unwrap();
        let stats = tmp.path().join("class/net/wz1234/statistics");
        std::fs::create_dir_all(&stats).unwrap();
        std::fs::write(stats.join("rx_bytes"), "100\n").unwrap();
        std::fs::write(stats.join("tx_bytes"), "2500\n").unwrap();
        // The host end sent 2500: the zone received them.
        assert_eq!(zone_net_bytes(tmp.path(), "wz1234"), Some((2500, 100)));
        assert_eq!(zone_net_bytes(tmp.path(), "wzgone"), None);
    }

    #[test]
    fn pids_and_caps() {
        assert_eq!(zone_pids(&v1_set()), (Some(3), Some(3), None));
        assert_eq!(zone_pids(&v2_set("v2")), (Some(3), Some(12), Some(100)));
        assert_eq!(zone_pids(&v2_set("v2-5.10")), (Some(1), Some(3), None));
    }

    #[test]
    fn pressure_per_cgroup_on_v2_host_wide_otherwise() {
        assert_eq!(
            zone_pressure(&v2_set("v2")),
            Some(Pressure {
                some_avg10: 1.25,
                full_avg10: 0.5
            })
        );
        assert_eq!(zone_pressure(&v1_set()), None);
        let host = host_pressure(&fixtures().join("proc")).unwrap();
        assert_eq!(host.some_avg10, 0.0);
        assert_eq!(parse_pressure("garbage"), None);
        // /proc/pressure/cpu on old kernels has no "full" line.
        assert_eq!(
            parse_pressure("some avg10=3.10 avg60=1.00 avg300=0.20 total=5\n"),
            Some(Pressure {
                some_avg10: 3.1,
                full_avg10: 0.0
            })
        );
    }

    #[test]
    fn smaps_rollup_sums_over_the_zones_processes() {
        let proc_ = fixtures().join("proc");
        let pids = v1_set().pids().unwrap();
        let t = smaps_total(&proc_, &pids);
        assert_eq!(t.processes, 3);
        assert_eq!(t.rss_bytes, (1432 + 73_728 + 1484) * 1024);
        assert_eq!(t.pss_bytes, (1428 + 72_195 + 288) * 1024);
        assert_eq!(t.uss_bytes, (1340 + 88 + 3648 + 68_312 + 96) * 1024);
        assert_eq!(t.pss_anon_bytes, (88 + 68_312 + 96) * 1024);
        // A pid that exited is skipped, not an error.
        assert_eq!(smaps_total(&proc_, &[999_999]).processes, 0);
        assert_eq!(parse_smaps_rollup(""), None);
    }

    #[test]
    fn host_cpu_busy_and_total() {
        let (busy, total) = host_cpu_ticks(&fixtures().join("proc")).unwrap();
        assert!(busy > 0 && busy < total);
    }
}
