//! The memstat-style breakdown of what a step's containers cost, as the seed's
//! `::memstat` table printed it: kernel (slab unreclaimable and reclaimable, page
//! tables, kernel stacks, per-CPU), anon, mapped file pages (program text and other
//! file-backed mappings), the rest of the page cache, shmem, and their total; for the
//! whole set and per container. Pure: two /proc/meminfo readings (and, for warren, the
//! zones' memory cgroups) in, figures out.
//!
//! The host rows are deltas of /proc/meminfo between the baseline (before the first
//! start) and the sample (after the idle window), so they hold everything the
//! containers made the kernel allocate, wherever it is charged. They add up by
//! construction: `kernel` is the sum of its five parts and `total` the sum of kernel,
//! anon, mapped files, page cache and shmem (= ΔSlab + ΔPageTables + ΔKernelStack +
//! ΔPercpu + ΔAnonPages + ΔCached). `Mapped` counts file pages mapped by any process
//! and `Cached` includes them and shmem, so page cache here is ΔCached − ΔShmem −
//! ΔMapped: the unmapped rest. Any delta may be negative on a busy host (noise); what
//! no counter names (MemFree's per-CPU lists, vmalloc) is left out, so `total` is
//! comparable with the "pinned" figure, not with the MemAvailable drop.
//!
//! The cgroup rows are what the zones' own memory cgroups are charged at the sample
//! (v1 `memory.kmem.usage_in_bytes` and `memory.stat`, v2 `memory.stat`), summed over
//! the zones: the part of the host delta that is attributed to them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::stat::memstat::ZoneTotals;

/// Memory by kind, KiB.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Kinds {
    pub slab_unreclaimable_kib: f64,
    pub slab_reclaimable_kib: f64,
    pub page_tables_kib: f64,
    pub kernel_stack_kib: f64,
    pub percpu_kib: f64,
    /// The five rows above.
    pub kernel_kib: f64,
    pub anon_kib: f64,
    /// File pages mapped into processes (program text, libraries, mapped files).
    pub mapped_file_kib: f64,
    /// The page cache nobody maps, shmem excluded.
    pub page_cache_kib: f64,
    pub shmem_kib: f64,
    /// kernel + anon + mapped files + page cache + shmem.
    pub total_kib: f64,
}

/// What the containers' own memory cgroups were charged, KiB (`None`: not reported).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CgroupKinds {
    pub kernel_kib: Option<f64>,
    pub anon_kib: Option<f64>,
    pub page_cache_kib: Option<f64>,
    pub shmem_kib: Option<f64>,
}

/// One step's breakdown.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Breakdown {
    /// Containers in the step.
    pub containers: usize,
    /// The whole set (host deltas).
    pub all: Kinds,
    /// `all` divided by `containers`.
    pub per_zone: Kinds,
    /// The zones' memory cgroups, summed (`None` for systems measured by pid only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroups_all: Option<CgroupKinds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroups_per_zone: Option<CgroupKinds>,
    /// The host's free memory (MemFree) at the sample, KiB: memstat's "free" row.
    pub host_free_kib: f64,
    /// How far MemFree fell from the baseline to the sample, KiB, whole set (page
    /// cache and per-CPU free lists move it too: noisier than `all.total_kib`).
    pub free_drop_kib: f64,
}

/// The breakdown of `n` containers from two /proc/meminfo readings (bytes per key, as
/// `stats::meminfo` gives them) and, where known, their cgroups' totals at `after`.
pub fn breakdown(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    n: usize,
    cgroups: Option<&ZoneTotals>,
) -> Breakdown {
    let kib = |k: &str| {
        let g = |m: &BTreeMap<String, u64>| m.get(k).copied().unwrap_or(0) as f64;
        (g(after) - g(before)) / 1024.0
    };
    let mut all = Kinds {
        slab_unreclaimable_kib: kib("SUnreclaim"),
        slab_reclaimable_kib: kib("SReclaimable"),
        page_tables_kib: kib("PageTables"),
        kernel_stack_kib: kib("KernelStack"),
        percpu_kib: kib("Percpu"),
        anon_kib: kib("AnonPages"),
        mapped_file_kib: kib("Mapped"),
        shmem_kib: kib("Shmem"),
        ..Kinds::default()
    };
    all.page_cache_kib = kib("Cached") - all.shmem_kib - all.mapped_file_kib;
    all.kernel_kib = all.slab_unreclaimable_kib
        + all.slab_reclaimable_kib
        + all.page_tables_kib
        + all.kernel_stack_kib
        + all.percpu_kib;
    all.total_kib =
        all.kernel_kib + all.anon_kib + all.mapped_file_kib + all.page_cache_kib + all.shmem_kib;
    let d = n.max(1) as f64;
    let per_zone = Kinds {
        slab_unreclaimable_kib: all.slab_unreclaimable_kib / d,
        slab_reclaimable_kib: all.slab_reclaimable_kib / d,
        page_tables_kib: all.page_tables_kib / d,
        kernel_stack_kib: all.kernel_stack_kib / d,
        percpu_kib: all.percpu_kib / d,
        kernel_kib: all.kernel_kib / d,
        anon_kib: all.anon_kib / d,
        mapped_file_kib: all.mapped_file_kib / d,
        page_cache_kib: all.page_cache_kib / d,
        shmem_kib: all.shmem_kib / d,
        total_kib: all.total_kib / d,
    };
    let cg = |div: f64| {
        cgroups.map(|t| {
            let k = |v: Option<u64>| v.map(|b| b as f64 / 1024.0 / div);
            CgroupKinds {
                kernel_kib: k(t.total.kernel_bytes),
                anon_kib: k(t.total.anon_bytes),
                page_cache_kib: k(t.total.page_cache_bytes),
                shmem_kib: k(t.total.shmem_bytes),
            }
        })
    };
    let free = |m: &BTreeMap<String, u64>| m.get("MemFree").copied().unwrap_or(0) as f64 / 1024.0;
    Breakdown {
        containers: n,
        all,
        per_zone,
        cgroups_all: cg(1.0),
        cgroups_per_zone: cg(d),
        host_free_kib: free(after),
        free_drop_kib: free(before) - free(after),
    }
}

/// A row of the breakdown: its label and how to read it.
pub type Row = (&'static str, fn(&Kinds) -> f64);

/// The breakdown's rows as (label, figure) for the report and the chart, in memstat's
/// order; indented labels are parts of the row above them.
pub const ROWS: &[Row] = &[
    ("kernel", |k| k.kernel_kib),
    ("  slab unreclaimable", |k| k.slab_unreclaimable_kib),
    ("  slab reclaimable", |k| k.slab_reclaimable_kib),
    ("  page tables", |k| k.page_tables_kib),
    ("  kernel stacks", |k| k.kernel_stack_kib),
    ("  per-CPU", |k| k.percpu_kib),
    ("anon", |k| k.anon_kib),
    ("mapped files (text)", |k| k.mapped_file_kib),
    ("page cache (unmapped)", |k| k.page_cache_kib),
    ("shmem", |k| k.shmem_kib),
    ("total", |k| k.total_kib),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stat::memstat::ZoneKinds;

    fn meminfo(text: &str) -> BTreeMap<String, u64> {
        crate::stats::parse_meminfo(text)
    }

    #[test]
    fn the_rows_are_meminfo_deltas_and_add_up() {
        let before = meminfo(
            "MemTotal: 1000000 kB\nMemFree: 500000 kB\nSUnreclaim: 1000 kB\nSReclaimable: 500 kB\n\
             PageTables: 200 kB\nKernelStack: 100 kB\nPercpu: 50 kB\nAnonPages: 3000 kB\n\
             Mapped: 700 kB\nShmem: 40 kB\nCached: 9000 kB\n",
        );
        let after = meminfo(
            "MemTotal: 1000000 kB\nMemFree: 400000 kB\nSUnreclaim: 1400 kB\nSReclaimable: 540 kB\n\
             PageTables: 240 kB\nKernelStack: 116 kB\nPercpu: 54 kB\nAnonPages: 3080 kB\n\
             Mapped: 900 kB\nShmem: 48 kB\nCached: 9100 kB\n",
        );
        let b = breakdown(&before, &after, 4, None);
        let a = &b.all;
        assert_eq!(
            (
                a.slab_unreclaimable_kib,
                a.slab_reclaimable_kib,
                a.page_tables_kib
            ),
            (400.0, 40.0, 40.0)
        );
        assert_eq!((a.kernel_stack_kib, a.percpu_kib), (16.0, 4.0));
        assert_eq!(a.kernel_kib, 500.0);
        assert_eq!(
            (a.anon_kib, a.mapped_file_kib, a.shmem_kib),
            (80.0, 200.0, 8.0)
        );
        // Cached rose by 100, of which 8 shmem and 200 newly mapped: -108 unmapped.
        assert_eq!(a.page_cache_kib, -108.0);
        assert_eq!(a.total_kib, 500.0 + 80.0 + 200.0 - 108.0 + 8.0);
        // The total is the rise of the counters it is made of.
        assert_eq!(a.total_kib, 400.0 + 40.0 + 40.0 + 16.0 + 4.0 + 80.0 + 100.0);
        // Per zone is the whole set over the containers, row by row.
        for (name, f) in ROWS {
            assert_eq!(f(&b.per_zone) * 4.0, f(&b.all), "{name}");
        }
        assert_eq!(b.per_zone.total_kib, 170.0);
        assert!(b.cgroups_all.is_none() && b.cgroups_per_zone.is_none());
        // Free is the host's at the sample, and how far it fell.
        assert_eq!((b.host_free_kib, b.free_drop_kib), (400000.0, 100000.0));
    }

    #[test]
    fn cgroup_rows_are_summed_over_the_zones_and_averaged() {
        let m = meminfo("MemTotal: 10 kB\nMemFree: 5 kB\n");
        let totals = ZoneTotals {
            booted: 2,
            total: ZoneKinds {
                kernel_bytes: Some(2 * 300 * 1024),
                anon_bytes: Some(2 * 60 * 1024),
                page_cache_bytes: Some(0),
                shmem_bytes: None,
                swap_bytes: Some(0),
            },
            per_zone: ZoneKinds::default(),
        };
        let b = breakdown(&m, &m, 2, Some(&totals));
        let all = b.cgroups_all.unwrap();
        let per = b.cgroups_per_zone.unwrap();
        assert_eq!((all.kernel_kib, per.kernel_kib), (Some(600.0), Some(300.0)));
        assert_eq!((all.anon_kib, per.anon_kib), (Some(120.0), Some(60.0)));
        assert_eq!(per.shmem_kib, None);
        // No host change: every host row is zero, the total too.
        assert_eq!(b.all, Kinds::default());
        assert_eq!((b.host_free_kib, b.free_drop_kib), (5.0, 0.0));
    }

    #[test]
    fn zero_containers_do_not_divide_by_zero() {
        let a = meminfo("MemTotal: 10 kB\nMemFree: 5 kB\nAnonPages: 8 kB\n");
        let b = meminfo("MemTotal: 10 kB\nMemFree: 5 kB\nAnonPages: 4 kB\n");
        let r = breakdown(&a, &b, 0, None);
        assert_eq!(r.per_zone.anon_kib, -4.0);
    }
}
