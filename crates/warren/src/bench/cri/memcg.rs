//! What one memory cgroup costs the kernel outside it, on this boot: the probe
//! `warren bench cri` runs before its pods.
//!
//! Every memcg-aware superblock takes a shrinker id (one host-wide IDR whose maximum
//! never shrinks until reboot), and every memory cgroup keeps, per NUMA node, a
//! `shrinker_info` of ⌈max id / 64⌉ units (64 deferred counters and a 64-bit map:
//! 520 bytes, a `kmalloc-1k` slot each), allocated without charging the memcg. So a
//! host that once had tens of thousands of superblocks (10,000 zones) pays hundreds
//! of KiB of slab for every memory cgroup made afterwards — a pod's cgroup parent,
//! its sandbox's and each container's — all of it "kernel outside the pods'
//! cgroups" in [`super::run::Beyond`] (docs/scaling.md, "The superlinear term,
//! named"). The probe measures it as docs/scaling.md does: make a few empty memory
//! cgroups beneath the bench's own, count the `kmalloc-1k` objects they add in
//! /proc/slabinfo, remove them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::bench::cgroups;
use crate::bench::system::Failure;
use crate::cgroups::CgroupVersion;
use crate::doctor::snapshot::parse_proc_cgroups;

/// The slab cache a shrinker_info unit lives in.
pub const CACHE: &str = "kmalloc-1k";

/// One cache's line of /proc/slabinfo.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlabCache {
    pub active_objs: u64,
    pub num_objs: u64,
    pub objsize: u64,
}

/// `name`'s line of a /proc/slabinfo text (version 2.1: name, active_objs,
/// num_objs, objsize, ...). None: not there or not numbers.
pub fn slab_cache(slabinfo: &str, name: &str) -> Option<SlabCache> {
    slabinfo.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        if f.next()? != name {
            return None;
        }
        let mut n = || f.next()?.parse::<u64>().ok();
        Some(SlabCache {
            active_objs: n()?,
            num_objs: n()?,
            objsize: n()?,
        })
    })
}

/// What the probe found (serialized in results.json as `memcg_probe`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MemcgProbe {
    /// Empty memory cgroups made in each round, and the rounds.
    pub memcgs: u64,
    pub rounds: u64,
    /// The cache counted and its object size (bytes).
    pub cache: String,
    pub object_bytes: u64,
    /// Its active objects one empty memory cgroup adds, each round and their median.
    pub objects_per_memcg_rounds: Vec<f64>,
    pub objects_per_memcg: f64,
    /// objects × object size: the slab one more memory cgroup takes outside itself,
    /// KiB (per-node shrinker_info, sized by this boot's highest shrinker id).
    pub kib_per_memcg: f64,
    /// The shrinker ids that many units cover (objects × 64): this boot's mark, up
    /// to 64 (one node; on several the objects are per node).
    pub shrinker_ids: u64,
}

impl MemcgProbe {
    /// From the object counts of each round, (before, with the memcgs), `memcgs`
    /// empty memory cgroups a round, objects of `object_bytes`.
    pub fn from_rounds(memcgs: u64, object_bytes: u64, rounds: &[(u64, u64)]) -> MemcgProbe {
        let per: Vec<f64> = rounds
            .iter()
            .map(|&(a, b)| (b as f64 - a as f64) / memcgs.max(1) as f64)
            .collect();
        let objects = median(&per);
        MemcgProbe {
            memcgs,
            rounds: rounds.len() as u64,
            cache: CACHE.into(),
            object_bytes,
            objects_per_memcg_rounds: per,
            objects_per_memcg: objects,
            kib_per_memcg: objects * object_bytes as f64 / 1024.0,
            shrinker_ids: (objects.max(0.0).round() as u64) * 64,
        }
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The probe's cgroups: removed when dropped (also on failure).
struct Made(Vec<PathBuf>);

impl Drop for Made {
    fn drop(&mut self) {
        for d in self.0.drain(..) {
            let _ = std::fs::remove_dir(&d);
        }
    }
}

fn active(slabinfo: &Path) -> Result<SlabCache, Failure> {
    let text = std::fs::read_to_string(slabinfo).map_err(Failure::io(slabinfo))?;
    slab_cache(&text, CACHE)
        .ok_or_else(|| Failure::Failed(format!("{}: no {CACHE} line", slabinfo.display())))
}

/// The directory the probe makes its cgroups in: this process's own memory cgroup
/// (v1: the memory hierarchy's; v2: the unified one's, or the base above its
/// `warren-supervisor` leaf, if it gives its children the memory controller), and
/// which version it is. Err: none.
pub fn own_memory_dir(proc_root: &Path) -> Result<(PathBuf, CgroupVersion), Failure> {
    let hiers = cgroups::own_hierarchies(proc_root)?;
    if let Some(h) = hiers
        .iter()
        .find(|h| h.key.split(',').any(|c| c == "memory"))
    {
        return Ok((h.own.clone(), CgroupVersion::V1));
    }
    let h = hiers
        .iter()
        .find(|h| h.key.is_empty())
        .ok_or_else(|| Failure::Failed("no memory cgroup hierarchy".into()))?;
    // The base of a delegated subtree, where the pods' cgroups go too
    // (`daemon::prepare_pod_cgroups`).
    let base = crate::cgroups::delegate::base_of(&h.own);
    let sub = std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
    if !sub.split_whitespace().any(|c| c == "memory") {
        return Err(Failure::Failed(format!(
            "{}: the memory controller is not enabled for its children",
            base.display()
        )));
    }
    Ok((base, CgroupVersion::V2))
}

/// Make `memcgs` empty memory cgroups beneath `dir`, `rounds` times, counting
/// [`CACHE`]'s active objects in `slabinfo` before and with them; each round's
/// cgroups are removed before the next (and on any failure), and the probe waits
/// (up to 5 s) until the kernel has freed most of what they took, so the pods'
/// measurement after it does not see them go.
pub fn probe(
    dir: &Path,
    slabinfo: &Path,
    memcgs: usize,
    rounds: usize,
) -> Result<MemcgProbe, Failure> {
    let mut counts = Vec::new();
    let mut size = 0;
    for r in 0..rounds {
        let before = active(slabinfo)?;
        size = before.objsize;
        let mut made = Made(Vec::new());
        for i in 0..memcgs {
            let d = dir.join(format!("warren-memcg-probe-{}-{r}-{i}", std::process::id()));
            std::fs::create_dir(&d).map_err(Failure::io(&d))?;
            made.0.push(d);
        }
        let with = active(slabinfo)?;
        drop(made);
        counts.push((before.active_objs, with.active_objs));
        // Freed after an RCU grace period and a worker's pass: wait for most of it.
        let added = with.active_objs.saturating_sub(before.active_objs);
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            let now = active(slabinfo)?.active_objs;
            if now <= before.active_objs + added / 10 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(MemcgProbe::from_rounds(memcgs as u64, size, &counts))
}

/// Dying memory cgroups on the host now: /proc/cgroups' count less the live
/// directories of the memory hierarchy (v1: every directory; v2: those with
/// `memory.stat`). Each still holds its shrinker state ([`MemcgProbe::kib_per_memcg`])
/// until the kernel frees it, at a moment of its choosing: freed during a
/// measurement, it lowers the host's slab by that much. None: the hierarchy is not
/// seen from its root (a cgroup namespace) or not found.
pub fn dying_memcgs(proc_root: &Path) -> Option<u64> {
    let hiers = cgroups::own_hierarchies(proc_root).ok()?;
    let h = hiers
        .iter()
        .find(|h| h.key.split(',').any(|c| c == "memory"))
        .or_else(|| hiers.iter().find(|h| h.key.is_empty()))?;
    if h.root != "/" {
        return None;
    }
    // num_cgroups counts live memory cgroups and dying ones (removed, but kept until
    // their last charged page goes).
    let text = std::fs::read_to_string(proc_root.join("cgroups")).ok()?;
    let total = parse_proc_cgroups(&text, "memory")?;
    let mut dirs = Vec::new();
    cgroups::collect_dirs(&h.mount, &mut dirs);
    let v1 = !h.key.is_empty();
    let live = dirs
        .iter()
        .filter(|d| v1 || *d == &h.mount || d.join("memory.stat").is_file())
        .count() as u64;
    Some(total.saturating_sub(live))
}

/// A pod's part of "kernel outside the pods' cgroups" (KiB) that the per-memcg
/// state explains: its memory cgroups × what one costs (the probe's figure).
pub fn pod_share_kib(memcgs_per_pod: f64, probe: Option<&MemcgProbe>) -> f64 {
    probe.map_or(0.0, |p| memcgs_per_pod * p.kib_per_memcg)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLABINFO: &str = "slabinfo - version: 2.1
# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>
kmalloc-2k          3040   3088   2048   16    8 : tunables    0    0    0 : slabdata    193    193      0
kmalloc-1k         36571  36624   1024   16    4 : tunables    0    0    0 : slabdata   2289   2289      0
kmalloc-512        21112  21408    512   16    2 : tunables    0    0    0 : slabdata   1338   1338      0
";

    #[test]
    fn a_cache_from_slabinfo() {
        assert_eq!(
            slab_cache(SLABINFO, "kmalloc-1k"),
            Some(SlabCache {
                active_objs: 36571,
                num_objs: 36624,
                objsize: 1024
            })
        );
        assert_eq!(
            slab_cache(SLABINFO, "kmalloc-512").map(|c| c.objsize),
            Some(512)
        );
        // A prefix of a name is not the name; the header is not a cache.
        assert_eq!(slab_cache(SLABINFO, "kmalloc-1"), None);
        assert_eq!(slab_cache(SLABINFO, "#"), None);
        assert_eq!(slab_cache("kmalloc-1k  12 x 1024\n", "kmalloc-1k"), None);
    }

    #[test]
    fn objects_per_memcg_are_the_median_of_the_rounds() {
        // This host at 20:49 UTC: 50 empty memcgs added 31,301 objects (626 each).
        let p =
            MemcgProbe::from_rounds(10, 1024, &[(36571, 42831), (36608, 42858), (36600, 42900)]);
        assert_eq!(p.objects_per_memcg_rounds, vec![626.0, 625.0, 630.0]);
        assert_eq!(p.objects_per_memcg, 626.0);
        assert_eq!(p.kib_per_memcg, 626.0);
        assert_eq!(p.shrinker_ids, 626 * 64);
        assert_eq!(
            (p.memcgs, p.rounds, p.cache.as_str()),
            (10, 3, "kmalloc-1k")
        );
        let even = MemcgProbe::from_rounds(4, 512, &[(0, 40), (0, 44)]);
        assert_eq!(even.objects_per_memcg, 10.5);
        assert_eq!(even.kib_per_memcg, 5.25);
        // Objects freed meanwhile by others: a negative count is reported as measured.
        assert_eq!(
            MemcgProbe::from_rounds(2, 1024, &[(10, 8)]).objects_per_memcg,
            -1.0
        );
        assert_eq!(
            MemcgProbe::from_rounds(2, 1024, &[]),
            MemcgProbe {
                memcgs: 2,
                rounds: 0,
                cache: CACHE.into(),
                object_bytes: 1024,
                ..MemcgProbe::default()
            }
        );
    }

    #[test]
    fn the_probe_removes_what_it_made() {
        // A plain directory stands in for the cgroup and a fixed slabinfo for the
        // kernel's: nothing is added, and every directory made is gone after.
        let t = tempfile::tempdir().unwrap();
        let slab = t.path().join("slabinfo");
        std::fs::write(&slab, SLABINFO).unwrap();
        let cg = t.path().join("cg");
        std::fs::create_dir(&cg).unwrap();
        let p = probe(&cg, &slab, 3, 2).unwrap();
        assert_eq!((p.memcgs, p.rounds, p.object_bytes), (3, 2, 1024));
        assert_eq!(p.objects_per_memcg, 0.0);
        assert_eq!(std::fs::read_dir(&cg).unwrap().count(), 0);
        // A failure halfway (the second name taken) removes the first it made.
        let taken = cg.join(format!("warren-memcg-probe-{}-0-1", std::process::id()));
        std::fs::write(&taken, "").unwrap();
        assert!(probe(&cg, &slab, 3, 1).is_err());
        let left: Vec<_> = std::fs::read_dir(&cg)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(left, vec![taken]);
    }

    #[test]
    fn the_memory_controllers_count_from_proc_cgroups() {
        let t = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t6\t1\nmemory\t4\t77\t1\npids\t8\t6\t1\n";
        assert_eq!(parse_proc_cgroups(t, "memory"), Some(77));
        assert_eq!(parse_proc_cgroups("cpu\t1\t5\t1\n", "memory"), None);
        assert_eq!(parse_proc_cgroups("memory\t4\n", "memory"), None);
    }

    #[test]
    fn a_pods_share_is_its_memcgs_times_one() {
        let p = MemcgProbe::from_rounds(10, 1024, &[(0, 6250)]);
        assert_eq!(pod_share_kib(3.0, Some(&p)), 1875.0);
        assert_eq!(pod_share_kib(3.0, None), 0.0);
    }
}
