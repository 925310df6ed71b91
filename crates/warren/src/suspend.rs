//! Paging a frozen zone's memory out, and what a suspended zone still holds
//! (`warren suspend`, docs/suspend.md). The verbs and the record are `zone`'s
//! (`zone/lifecycle/suspend.rs`); this module only acts on a cgroup set and its
//! processes, with /proc injected.
//!
//! cgroup v1 has no reclaim file, so each process of the zone is asked for its pages
//! through a pidfd: `process_madvise(MADV_PAGEOUT)` over its private writable mappings
//! (heap, stacks, anonymous maps, a program's data) read from /proc/PID/maps; shared
//! and read-only mappings are left alone (their pages serve other zones too). The
//! kernel skips pages mapped by more than one process. The pages it writes to swap
//! stay charged to the group as swap cache, and page cache is not in any process's
//! mappings, so a write to v1's `memory.force_empty` follows (it reclaims the group as
//! far as it goes, tasks or not). cgroup v2 reclaims the whole
//! group in one write to `memory.reclaim`. Without swap, anonymous memory cannot leave
//! RAM: only file pages are reclaimed, and the verb says so.

use std::path::Path;

use crate::cgroups::{CgroupSet, CgroupVersion};

/// The private writable mappings of a /proc/PID/maps text: (start, length) (pure).
pub fn private_writable(maps: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let perms = f.next()?;
            let p = perms.as_bytes();
            if p.len() < 4 || p[1] != b'w' || p[3] != b'p' {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            let a = usize::from_str_radix(a, 16).ok()?;
            let b = usize::from_str_radix(b, 16).ok()?;
            (b > a).then_some((a, b - a))
        })
        .collect()
}

/// What a pageout did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pageout {
    /// Processes whose mappings were advised (v1), or 0 (v2: the group at once).
    pub processes: usize,
    /// Bytes of mappings advised (v1) or asked of `memory.reclaim` (v2).
    pub advised: u64,
    /// Processes that could not be advised, with why (one that exited meanwhile is
    /// not counted).
    pub failed: Vec<(i32, String)>,
}

/// Page out the memory of the (frozen) processes of `set`.
pub fn pageout(set: &CgroupSet, proc_root: &Path) -> Pageout {
    match set.version {
        CgroupVersion::V2 => reclaim_v2(set),
        CgroupVersion::V1 => {
            let mut out = madvise_all(set, proc_root, Advice::Pageout);
            force_empty_v1(set, &mut out);
            out
        }
    }
}

/// v1: after the pageout, `memory.force_empty` reclaims what the group still holds:
/// the swap cache the pageout left (the pages it wrote to swap stay charged there until
/// reclaimed again) and the page cache. Despite its name it neither needs an empty
/// group nor kills anything: it reclaims until usage stops falling.
fn force_empty_v1(set: &CgroupSet, out: &mut Pageout) {
    let Some(dir) = set.dir_with("memory") else {
        return;
    };
    let file = dir.join("memory.force_empty");
    if let Err(e) = std::fs::write(&file, "0") {
        out.failed.push((0, format!("{}: {e}", file.display())));
    }
}

fn reclaim_v2(set: &CgroupSet) -> Pageout {
    let mut out = Pageout::default();
    let Some((_, dir)) = set.dirs.first() else {
        return out;
    };
    let want = set.memory_bytes().unwrap_or(0);
    if want == 0 {
        return out;
    }
    out.advised = want;
    // EAGAIN: the kernel reclaimed less than asked (no swap, or pages in use); what it
    // did reclaim stays reclaimed.
    if let Err(e) = std::fs::write(dir.join("memory.reclaim"), want.to_string()) {
        if e.raw_os_error() != Some(warren_sys::libc::EAGAIN) {
            out.failed
                .push((0, format!("{}: {e}", dir.join("memory.reclaim").display())));
        }
    }
    out
}

/// Read a resumed zone's swapped-out memory back ahead of its touches:
/// `process_madvise(MADV_WILLNEED)` over every process's private writable mappings
/// (docs/suspend.md, "Warm again"). The zone runs meanwhile.
pub fn prefetch(set: &CgroupSet, proc_root: &Path) -> Pageout {
    madvise_all(set, proc_root, Advice::WillNeed)
}

#[derive(Clone, Copy)]
enum Advice {
    Pageout,
    WillNeed,
}

fn madvise_all(set: &CgroupSet, proc_root: &Path, advice: Advice) -> Pageout {
    let mut out = Pageout::default();
    let pids = match set.pids() {
        Ok(p) => p,
        Err(e) => {
            out.failed.push((0, e.to_string()));
            return out;
        }
    };
    for pid in pids {
        // The pidfd first: the maps read afterwards are then surely this process's.
        let fd = match warren_sys::proc::pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(warren_sys::libc::ESRCH) => continue,
            Err(e) => {
                out.failed.push((pid, format!("pidfd_open: {e}")));
                continue;
            }
        };
        let maps = match std::fs::read_to_string(proc_root.join(format!("{pid}/maps"))) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                out.failed.push((pid, format!("reading its maps: {e}")));
                continue;
            }
        };
        let ranges = private_writable(&maps);
        if ranges.is_empty() {
            continue;
        }
        use std::os::fd::AsFd;
        let (result, name) = match advice {
            Advice::Pageout => (
                warren_sys::proc::process_madvise_pageout(fd.as_fd(), &ranges),
                "MADV_PAGEOUT",
            ),
            Advice::WillNeed => (
                warren_sys::proc::process_madvise_willneed(fd.as_fd(), &ranges),
                "MADV_WILLNEED",
            ),
        };
        match result {
            Ok(n) => {
                out.processes += 1;
                out.advised += n;
            }
            Err(e) if e.raw_os_error() == Some(warren_sys::libc::ESRCH) => {}
            Err(e) => out
                .failed
                .push((pid, format!("process_madvise({name}): {e}"))),
        }
    }
    out
}

/// What a zone holds: charged memory and swap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Holdings {
    /// Bytes charged to its memory cgroup (v1 `memory.usage_in_bytes`, v2
    /// `memory.current`: anonymous memory, page cache, kernel memory).
    pub resident: u64,
    /// Bytes of its processes' memory in swap (the sum of `VmSwap`).
    pub swapped: u64,
}

/// Read what `set` holds now.
pub fn holdings(set: &CgroupSet, proc_root: &Path) -> Holdings {
    let swapped = set
        .pids()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pid| std::fs::read_to_string(proc_root.join(format!("{pid}/status"))).ok())
        .filter_map(|s| vm_swap(&s))
        .sum();
    Holdings {
        resident: set.memory_bytes().unwrap_or(0),
        swapped,
    }
}

/// A suspended zone for `list` / `info` (`--json`): what the suspend recorded and
/// what the zone holds now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SuspendedView {
    /// Unix time in milliseconds when it was suspended.
    pub since_ms: u64,
    /// Bytes charged to it before the pageout.
    pub resident_before: u64,
    /// Bytes charged to it now, and in swap now.
    #[serde(flatten)]
    pub now: Holdings,
    /// Whether the host had swap when it was suspended.
    pub host_swap: bool,
}

/// Describe a finished suspension of `set` (reads the cgroup and /proc now).
pub fn view(rec: &crate::state::Suspension, set: &CgroupSet, proc_root: &Path) -> SuspendedView {
    SuspendedView {
        since_ms: rec.since_ms,
        resident_before: rec.resident_before,
        now: holdings(set, proc_root),
        host_swap: rec.host_swap,
    }
}

/// `VmSwap` of a /proc/PID/status text, in bytes (pure).
pub fn vm_swap(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmSwap:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Whether the host has swap enabled (`SwapTotal` of /proc/meminfo).
pub fn host_has_swap(proc_root: &Path) -> bool {
    crate::stats::meminfo(proc_root)
        .get("SwapTotal")
        .is_some_and(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_private_writable_mappings_are_paged_out() {
        let maps = "\
55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]
7f3a00000000-7f3a10000000 rw-p 00000000 00:00 0 
7f3a20000000-7f3a20001000 rw-s 00000000 00:05 1234                       /dev/shm/x
7f3a30000000-7f3a30100000 r-xp 00000000 08:01 42                         /usr/lib/libc.so.6
7f3a30200000-7f3a30202000 rw-p 00200000 08:01 42                         /usr/lib/libc.so.6
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";
        assert_eq!(
            private_writable(maps),
            vec![
                (0x55d0c0a00000, 0x21000),
                (0x7f3a00000000, 0x10000000),
                (0x7f3a30200000, 0x2000),
                (0x7ffd00000000, 0x21000),
            ]
        );
        assert!(private_writable("garbage\n").is_empty());
    }

    #[test]
    fn vm_swap_is_read_in_bytes() {
        let s = "Name:\tcat\nVmRSS:\t  1000 kB\nVmSwap:\t   262144 kB\n";
        assert_eq!(vm_swap(s), Some(256 << 20));
        assert_eq!(vm_swap("Name:\tkthreadd\n"), None);
    }
}
