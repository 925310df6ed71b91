//! `warren memstat`: the host's memory by kind, as mdb's ::memstat prints it, beside
//! what the zones' cgroups are charged and the average per zone.
//!
//! The host rows come from /proc/meminfo and add up to MemTotal by construction: kernel
//! (Slab, KernelStack, PageTables, and the rest: whatever no counter names, such as
//! per-CPU data, vmalloc, per-CPU free lists and driver pages), anon (AnonPages), page
//! cache (Cached − Shmem), buffers, shmem, swap cache, huge pages and free.
//!
//! "Mapped files" answers "how much of the page cache is template and host text the
//! zones run": the sum of `Pss_File` over every process of every booted zone. PSS
//! divides each page among all processes mapping it, so the sum counts a page at most
//! once and only the zones' share of it (host processes mapping the same libc keep
//! theirs): a lower bound of the page cache the zones' mapped files occupy. Beside it,
//! the per-process sum of Shared_Clean + Shared_Dirty: what those shared pages would
//! cost if every process had its own copy.

use std::collections::BTreeMap;

use serde::Serialize;

use super::collect::{pss_of, targets};
use super::readers::{self, ZoneMemory};
use super::SCHEMA_VERSION;
use crate::cgroups::CgroupVersion;
use crate::error::Result;
use crate::stats;
use crate::zone::Context;

/// The API object of `warren memstat --json`.
#[derive(Debug, Clone, Serialize)]
pub struct Memstat {
    pub schema_version: u32,
    pub cgroup_version: Option<CgroupVersion>,
    pub host: HostMemory,
    pub mapped_files: Option<MappedFiles>,
    pub zones: ZoneTotals,
}

/// The host's memory by kind, in bytes; the kinds add up to `total_bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostMemory {
    pub total_bytes: u64,
    pub kernel: KernelMemory,
    pub anon_bytes: u64,
    pub page_cache_bytes: u64,
    pub buffers_bytes: u64,
    pub shmem_bytes: u64,
    pub swap_cached_bytes: u64,
    pub hugetlb_bytes: u64,
    pub free_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelMemory {
    pub total_bytes: u64,
    pub slab_reclaimable_bytes: u64,
    pub slab_unreclaimable_bytes: u64,
    pub kernel_stack_bytes: u64,
    pub page_tables_bytes: u64,
    /// What no meminfo counter names (MemTotal minus every other row).
    pub other_bytes: u64,
}

/// File-backed pages mapped by zone processes (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MappedFiles {
    pub pss_file_bytes: u64,
    pub shared_sum_bytes: u64,
    pub processes: u64,
}

/// Sums over the booted zones' cgroups, and the average per zone (`null`: not reported
/// by this kernel, or no zone is booted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZoneTotals {
    pub booted: u64,
    pub total: ZoneKinds,
    pub per_zone: ZoneKinds,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ZoneKinds {
    pub kernel_bytes: Option<u64>,
    pub anon_bytes: Option<u64>,
    /// Page cache without shmem (file − shmem), comparable with the host row.
    pub page_cache_bytes: Option<u64>,
    pub shmem_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
}

/// The host rows from /proc/meminfo (bytes per key). `None` without MemTotal/MemFree.
pub fn host_memory(m: &BTreeMap<String, u64>) -> Option<HostMemory> {
    let g = |k: &str| m.get(k).copied().unwrap_or(0);
    let total = *m.get("MemTotal")?;
    let free = *m.get("MemFree")?;
    let shmem = g("Shmem");
    let page_cache = g("Cached").saturating_sub(shmem);
    let hugetlb = m.get("Hugetlb").copied().unwrap_or_else(|| {
        // Before 4.16: only the default huge page size is counted.
        g("HugePages_Total") * g("Hugepagesize")
    });
    let named_kernel = g("SReclaimable") + g("SUnreclaim") + g("KernelStack") + g("PageTables");
    let rest = total.saturating_sub(
        free + g("AnonPages")
            + page_cache
            + shmem
            + g("Buffers")
            + g("SwapCached")
            + hugetlb
            + named_kernel,
    );
    Some(HostMemory {
        total_bytes: total,
        kernel: KernelMemory {
            total_bytes: named_kernel + rest,
            slab_reclaimable_bytes: g("SReclaimable"),
            slab_unreclaimable_bytes: g("SUnreclaim"),
            kernel_stack_bytes: g("KernelStack"),
            page_tables_bytes: g("PageTables"),
            other_bytes: rest,
        },
        anon_bytes: g("AnonPages"),
        page_cache_bytes: page_cache,
        buffers_bytes: g("Buffers"),
        shmem_bytes: shmem,
        swap_cached_bytes: g("SwapCached"),
        hugetlb_bytes: hugetlb,
        free_bytes: free,
    })
}

/// Sums and per-zone averages of the zones' cgroup figures. A kind is summed only if
/// every zone reports it (a partial sum would understate it).
pub fn zone_totals(zones: &[ZoneMemory]) -> ZoneTotals {
    let n = zones.len() as u64;
    let sum = |f: fn(&ZoneMemory) -> Option<u64>| -> Option<u64> {
        if n == 0 {
            return None;
        }
        zones.iter().map(f).sum()
    };
    let total = ZoneKinds {
        kernel_bytes: sum(|z| z.kernel_bytes),
        anon_bytes: sum(|z| z.anon_bytes),
        page_cache_bytes: sum(|z| Some(z.file_bytes?.saturating_sub(z.shmem_bytes?))),
        shmem_bytes: sum(|z| z.shmem_bytes),
        swap_bytes: sum(|z| z.swap_bytes),
    };
    let avg = |v: Option<u64>| v.map(|v| v / n.max(1));
    ZoneTotals {
        booted: n,
        per_zone: ZoneKinds {
            kernel_bytes: avg(total.kernel_bytes),
            anon_bytes: avg(total.anon_bytes),
            page_cache_bytes: avg(total.page_cache_bytes),
            shmem_bytes: avg(total.shmem_bytes),
            swap_bytes: avg(total.swap_bytes),
        },
        total,
    }
}

/// Gather `warren memstat`.
pub fn memstat(ctx: &Context) -> Result<Memstat> {
    let meminfo = stats::meminfo(&ctx.host.proc);
    let host = host_memory(&meminfo).ok_or_else(|| crate::Error::Io {
        context: format!(
            "reading {}: no MemTotal/MemFree",
            ctx.host.proc.join("meminfo").display()
        ),
        source: std::io::Error::from(std::io::ErrorKind::InvalidData),
    })?;
    let sets: Vec<_> = targets(ctx, &[])?
        .into_iter()
        .filter_map(|t| t.cgroups)
        .collect();
    let memories: Vec<ZoneMemory> = sets.iter().map(readers::zone_memory).collect();
    let mut mapped = MappedFiles {
        pss_file_bytes: 0,
        shared_sum_bytes: 0,
        processes: 0,
    };
    let mut unreadable = false;
    for set in &sets {
        match pss_of(ctx, set) {
            Some(s) => {
                mapped.pss_file_bytes += s.pss_file_bytes;
                mapped.shared_sum_bytes += s.shared_bytes;
                mapped.processes += s.processes;
            }
            None => unreadable = true,
        }
    }
    Ok(Memstat {
        schema_version: SCHEMA_VERSION,
        cgroup_version: ctx.cgroups().ok().map(|(_, h)| h.version),
        host,
        mapped_files: (!unreadable).then_some(mapped),
        zones: zone_totals(&memories),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stat::readers::tests::{fixtures, v1_set, v2_set};

    fn parts(h: &HostMemory) -> u64 {
        h.kernel.total_bytes
            + h.anon_bytes
            + h.page_cache_bytes
            + h.buffers_bytes
            + h.shmem_bytes
            + h.swap_cached_bytes
            + h.hugetlb_bytes
            + h.free_bytes
    }

    #[test]
    fn host_rows_add_up_to_memtotal() {
        let text = std::fs::read_to_string(fixtures().join("proc/meminfo")).unwrap();
        let m = stats::parse_meminfo(&text);
        let h = host_memory(&m).unwrap();
        assert_eq!(parts(&h), h.total_bytes);
        assert_eq!(h.total_bytes, m["MemTotal"]);
        assert_eq!(h.anon_bytes, m["AnonPages"]);
        assert_eq!(h.page_cache_bytes, m["Cached"] - m["Shmem"]);
        let k = &h.kernel;
        assert_eq!(
            k.total_bytes,
            k.slab_reclaimable_bytes
                + k.slab_unreclaimable_bytes
                + k.kernel_stack_bytes
                + k.page_tables_bytes
                + k.other_bytes
        );
    }

    #[test]
    fn hand_made_meminfo_puts_the_remainder_in_kernel_other() {
        let m = stats::parse_meminfo(
            "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 10 kB\nCached: 300 kB\n\
             SwapCached: 0 kB\nShmem: 50 kB\nAnonPages: 200 kB\nSReclaimable: 40 kB\n\
             SUnreclaim: 60 kB\nKernelStack: 16 kB\nPageTables: 24 kB\nHugePages_Total: 0\n\
             Hugepagesize: 2048 kB\n",
        );
        let h = host_memory(&m).unwrap();
        assert_eq!(h.page_cache_bytes, 250 * 1024);
        assert_eq!(h.hugetlb_bytes, 0);
        // 1000 - 100 - 10 - 300 - 200 - 140 = 250 kB no counter names.
        assert_eq!(h.kernel.other_bytes, 250 * 1024);
        assert_eq!(h.kernel.total_bytes, 390 * 1024);
        assert_eq!(parts(&h), h.total_bytes);
        assert_eq!(host_memory(&BTreeMap::new()), None);
    }

    #[test]
    fn zone_totals_and_averages_from_v1_and_v2_fixtures() {
        let v1 = readers::zone_memory(&v1_set());
        let v2 = readers::zone_memory(&v2_set("v2"));
        let t = zone_totals(&[v1.clone(), v2.clone()]);
        assert_eq!(t.booted, 2);
        assert_eq!(t.total.anon_bytes, Some(70_139_904 + 67_690_496));
        assert_eq!(t.per_zone.anon_bytes, Some((70_139_904 + 67_690_496) / 2));
        assert_eq!(t.total.kernel_bytes, Some(524_288 + 1_871_872));
        assert_eq!(t.total.page_cache_bytes, Some(7_864_320 + 8_110_080 - 4096));
        // One zone without swap figures: the sum is absent, not understated.
        let old = readers::zone_memory(&v2_set("v2-5.10"));
        let t = zone_totals(&[v2, old]);
        assert_eq!(t.total.swap_bytes, None);
        assert!(t.total.kernel_bytes.is_some());
        let none = zone_totals(&[]);
        assert_eq!((none.booted, none.per_zone), (0, ZoneKinds::default()));
    }
}
