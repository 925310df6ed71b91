//! The allocator's list of free id ranges, `<root>/userns-free.json`: a new zone's range
//! is taken from it without listing `userns/` or `zones/`, so an allocation costs the
//! same at any number of zones (docs/scaling.md, "Clone at N zones": the two listings
//! made each clone 40× slower at 5,000 zones than at none, under the ranges lock).
//!
//! `userns/` (the index) and the zones' own `state.json` stay the truth; this file is a
//! cache of what they leave free, trusted only while it provably matches them:
//!
//! - it names the host boot it was written in. Index entries are not fsync'd (the
//!   zone's `state.json` is the durable record, [`super::allocate`]), so a power cut
//!   can lose some, and this file with them; only a reboot follows a power cut, so a
//!   file of another boot is not trusted: the next allocation rebuilds it, which
//!   re-records the lost entries from the zones' own records as before;
//! - it holds the stamp of `userns/` (device, inode, change and modification times) as
//!   it was right after its own last write: anything that changed the index since
//!   without updating this file (an older warren, an operator, `gc`'s removals) changed
//!   the stamp, and the file is rebuilt;
//! - warren's own writes that add an index entry other than an allocation from this
//!   list (a pinned range, a re-recorded one, a rename's second name) remove the file
//!   first ([`forget`]), so no entry is ever added behind its back, whatever the grain
//!   of the directory's time stamps (kernels before 6.13 stamp at the timer tick);
//!   removals only free ranges, so one the stamp missed costs a range, never a
//!   collision;
//! - it is read and written only under the ranges lock, like the index.
//!
//! What it holds: runs of free aligned slots (slot `s` is host ids `s·RANGE` up to
//! `s·RANGE + RANGE − 1`) in the order the full search visits them (from the root's
//! first slot up to the top of the allocated space, then from [`FIRST_BASE`]), and a
//! *horizon*: every free slot before it in that order is listed, those past it are not
//! known. An allocation takes the first listed slot: the lowest free one from the
//! root's first slot, as the full search finds it (first fit, so a deleted zone's range
//! is handed out again, as before); a delete gives its slot back when it lies before the
//! horizon. A rebuild (the file missing, stale, or used up) is the full search, O(zones),
//! listing up to [`MAX_RUNS`] runs: a fresh root (one run to the top of the space) pays it
//! once, a fragmented one at most once per that many allocations.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{IdRange, ALLOC_END, FIRST_BASE, RANGE};
use crate::error::{IoContext, Result};
use crate::fsutil::{atomic_write, read_text_bounded, MAX_SMALL_FILE};
use crate::layout::Layout;

/// The file, in the state root.
pub const FILE: &str = "userns-free.json";
/// The format; a file of another version is rebuilt.
const VERSION: u32 = 1;
/// Runs a rebuild lists, and the most a list keeps when deletes give slots back.
pub const MAX_RUNS: usize = 128;
/// The first slot of the allocated space ([`FIRST_BASE`]).
pub const FIRST_SLOT: u32 = FIRST_BASE / RANGE;
/// One past the last slot: a range must end below [`ALLOC_END`] (2^31), as
/// [`super::choose`] has it.
pub const END_SLOT: u32 = (ALLOC_END / RANGE as u64) as u32;
/// Slots in the allocated space.
const SPAN: u32 = END_SLOT - FIRST_SLOT;

/// What `userns/` looked like right after the list's last write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    ctime: i64,
    ctime_ns: i64,
    mtime: i64,
    mtime_ns: i64,
}

/// The stamp of the index directory `dir` now; `None` when it cannot be read.
pub fn stamp_of(dir: &Path) -> Option<Stamp> {
    let m = fs::metadata(dir).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        ctime: m.ctime(),
        ctime_ns: m.ctime_nsec(),
        mtime: m.mtime(),
        mtime_ns: m.mtime_nsec(),
    })
}

/// The list of free slots (see the module's doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreeList {
    version: u32,
    /// The host boot it was written in (`/proc/sys/kernel/random/boot_id`).
    boot_id: String,
    stamp: Option<Stamp>,
    /// The slot the search starts at: the root's first slot ([`super::first_slot`]).
    start: u32,
    /// Every free slot before this position in the search order is listed.
    horizon: u32,
    /// Runs of free slots (first slot, number of slots), in search order.
    runs: Vec<(u32, u32)>,
}

/// Where slot `s` comes in a search that starts at slot `start`.
fn pos(start: u32, s: u32) -> u32 {
    if s >= start {
        s - start
    } else {
        (END_SLOT - start) + (s - FIRST_SLOT)
    }
}

impl FreeList {
    /// The full search's result: the free slots, in search order from `start`, of a
    /// space where the ranges `taken` (any size, any alignment) are in use; at most
    /// `max_runs` runs (pure).
    pub fn build(taken: &[IdRange], start: u32, max_runs: usize) -> FreeList {
        let mut sorted: Vec<(u32, u32)> = taken
            .iter()
            .filter(|r| r.count > 0)
            .map(|r| (r.base / RANGE, r.last() / RANGE))
            .collect();
        sorted.sort_unstable();
        let mut list = FreeList {
            version: VERSION,
            boot_id: String::new(),
            stamp: None,
            start,
            horizon: SPAN,
            runs: Vec::new(),
        };
        // The search's two stretches: from the start to the top, then the bottom.
        for (lo, hi) in [(start, END_SLOT), (FIRST_SLOT, start)] {
            let mut s = lo;
            let push = |list: &mut FreeList, first: u32, end: u32| {
                list.runs.push((first, end - first));
                if list.runs.len() >= max_runs {
                    list.horizon = pos(start, first) + (end - first);
                    return true;
                }
                false
            };
            for &(first, last) in &sorted {
                if last < s {
                    continue;
                }
                if first >= hi {
                    break;
                }
                if first > s && push(&mut list, s, first) {
                    return list;
                }
                s = last + 1;
                if s >= hi {
                    break;
                }
            }
            if s < hi && push(&mut list, s, hi) {
                return list;
            }
        }
        list
    }

    /// Whether this list may be used now: same format, same boot, same start, the
    /// index as the list last saw it, and well formed.
    pub fn valid(&self, boot_id: &str, start: u32, stamp: Option<Stamp>) -> bool {
        self.version == VERSION
            && !boot_id.is_empty()
            && self.boot_id == boot_id
            && self.start == start
            && stamp.is_some()
            && self.stamp == stamp
            && self.well_formed()
    }

    /// Runs inside the space, non-empty, in search order without overlap, before the
    /// horizon; the start a slot of the space.
    fn well_formed(&self) -> bool {
        if !(FIRST_SLOT..END_SLOT).contains(&self.start) || self.horizon > SPAN {
            return false;
        }
        let mut next_pos = 0;
        for &(first, len) in &self.runs {
            let end = u64::from(first) + u64::from(len);
            // A run stays in one stretch of the search: never across the start or
            // the top of the space.
            let stretch_end = if first >= self.start {
                END_SLOT
            } else {
                self.start
            };
            if first < FIRST_SLOT || len == 0 || end > u64::from(stretch_end) {
                return false;
            }
            let p = pos(self.start, first);
            if p < next_pos || p + len > self.horizon {
                return false;
            }
            next_pos = p + len;
        }
        true
    }

    /// The first free slot, taken off the list; `None` when the list is used up.
    pub fn pop(&mut self) -> Option<u32> {
        let run = self.runs.first_mut()?;
        let s = run.0;
        run.0 += 1;
        run.1 -= 1;
        if run.1 == 0 {
            self.runs.remove(0);
        }
        Some(s)
    }

    /// Slot `s` is free again (its zone was deleted): listed if it lies before the
    /// horizon, merged with its neighbours; past [`MAX_RUNS`] runs the last run is
    /// dropped and the horizon moves back to it.
    pub fn give_back(&mut self, s: u32) {
        if !(FIRST_SLOT..END_SLOT).contains(&s) {
            return;
        }
        let p = pos(self.start, s);
        if p >= self.horizon {
            return;
        }
        let i = self
            .runs
            .partition_point(|&(first, _)| pos(self.start, first) <= p);
        if i > 0 {
            let (first, len) = self.runs[i - 1];
            if s < first + len {
                return; // listed already
            }
        }
        let joins_prev = i > 0 && {
            let (first, len) = self.runs[i - 1];
            first + len == s
        };
        let joins_next = i < self.runs.len() && s + 1 == self.runs[i].0;
        match (joins_prev, joins_next) {
            (true, true) => {
                let next = self.runs.remove(i);
                self.runs[i - 1].1 += 1 + next.1;
            }
            (true, false) => self.runs[i - 1].1 += 1,
            (false, true) => {
                self.runs[i].0 = s;
                self.runs[i].1 += 1;
            }
            (false, false) => self.runs.insert(i, (s, 1)),
        }
        if self.runs.len() > MAX_RUNS {
            if let Some((first, _)) = self.runs.pop() {
                self.horizon = pos(self.start, first);
            }
        }
    }

    /// Mark the list as matching the index as it is now, in this boot.
    pub fn seal(&mut self, boot_id: &str, stamp: Option<Stamp>) {
        boot_id.clone_into(&mut self.boot_id);
        self.stamp = stamp;
    }

    /// Mark the list as matching the index as it is now (after a delete's change),
    /// keeping the boot it was made in.
    pub fn restamp(&mut self, stamp: Option<Stamp>) {
        self.stamp = stamp;
    }

    /// Whether it matched the index before a change about to be made (a delete's
    /// give-back: the boot is checked by the next allocation).
    pub fn matches(&self, start: u32, stamp: Option<Stamp>) -> bool {
        self.version == VERSION
            && self.start == start
            && stamp.is_some()
            && self.stamp == stamp
            && self.well_formed()
    }
}

fn path(layout: &Layout) -> PathBuf {
    layout.root().join(FILE)
}

/// The list on disk, if there is one that parses.
pub fn load(layout: &Layout) -> Option<FreeList> {
    let text = read_text_bounded(&path(layout), MAX_SMALL_FILE).ok()?;
    serde_json::from_str(&text).ok()
}

/// Write the list (atomically, not fsync'd: a list lost or torn is rebuilt). When it
/// cannot be written, the old one is removed so it cannot be trusted.
pub fn save(layout: &Layout, list: &FreeList) -> Result<()> {
    let p = path(layout);
    let text = serde_json::to_vec(list).expect("the free list serializes");
    atomic_write(&p, &text, false).or_else(|e| {
        let _ = forget(layout);
        Err(e).ctx(|| format!("writing {}", p.display()))
    })
}

/// Remove the list: the next allocation rebuilds it from the index and the zones.
/// Called before any index entry is added other than by an allocation from the list.
pub fn forget(layout: &Layout) -> Result<()> {
    let p = path(layout);
    match fs::remove_file(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).ctx(|| format!("removing {}", p.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(runs: &[(u32, u32)], start: u32, horizon: u32) -> FreeList {
        FreeList {
            version: VERSION,
            boot_id: "b".into(),
            stamp: None,
            start,
            horizon,
            runs: runs.to_vec(),
        }
    }

    fn slots(start: u32, n: u32) -> Vec<IdRange> {
        (start..start + n)
            .map(|s| IdRange::new(s * RANGE))
            .collect()
    }

    #[test]
    fn an_empty_space_is_one_run_to_the_top_then_the_bottom() {
        let l = FreeList::build(&[], FIRST_SLOT, MAX_RUNS);
        assert_eq!(l.runs, vec![(FIRST_SLOT, SPAN)]);
        assert_eq!(l.horizon, SPAN);
        let mid = FIRST_SLOT + 100;
        let l = FreeList::build(&[], mid, MAX_RUNS);
        assert_eq!(l.runs, vec![(mid, END_SLOT - mid), (FIRST_SLOT, 100)]);
        assert!(l.well_formed());
    }

    #[test]
    fn taken_ranges_of_any_size_cut_the_runs_and_the_horizon_ends_the_last() {
        // Slots 0-1 taken, an unaligned range over slots 4-5, ids below the space.
        let mut taken = slots(FIRST_SLOT, 2);
        taken.push(IdRange {
            base: (FIRST_SLOT + 4) * RANGE + 7,
            count: RANGE,
        });
        taken.push(IdRange::new(65536));
        let l = FreeList::build(&taken, FIRST_SLOT, 2);
        assert_eq!(
            l.runs,
            vec![(FIRST_SLOT + 2, 2), (FIRST_SLOT + 6, SPAN - 6)]
        );
        assert_eq!(l.horizon, SPAN);
        let l = FreeList::build(&taken, FIRST_SLOT, 1);
        assert_eq!(l.runs, vec![(FIRST_SLOT + 2, 2)]);
        assert_eq!(l.horizon, 4);
        // Full: nothing listed, nothing past the horizon.
        let l = FreeList::build(
            &[IdRange {
                base: FIRST_BASE,
                count: u32::MAX - FIRST_BASE,
            }],
            FIRST_SLOT,
            8,
        );
        assert!(l.runs.is_empty() && l.horizon == SPAN, "{l:?}");
    }

    #[test]
    fn popping_gives_the_slots_in_search_order_across_the_wrap() {
        let start = END_SLOT - 2;
        let mut l = FreeList::build(&slots(FIRST_SLOT, 1), start, MAX_RUNS);
        let got: Vec<u32> = (0..4).map(|_| l.pop().unwrap()).collect();
        assert_eq!(
            got,
            vec![END_SLOT - 2, END_SLOT - 1, FIRST_SLOT + 1, FIRST_SLOT + 2]
        );
        assert!(l.well_formed());
    }

    #[test]
    fn a_slot_given_back_merges_with_its_neighbours_and_respects_the_horizon() {
        let s = FIRST_SLOT;
        let mut l = list(&[(s + 1, 1), (s + 3, 2)], s, 10);
        l.give_back(s + 2);
        assert_eq!(l.runs, vec![(s + 1, 4)]);
        l.give_back(s);
        assert_eq!(l.runs, vec![(s, 5)]);
        l.give_back(s + 3); // listed already
        assert_eq!(l.runs, vec![(s, 5)]);
        l.give_back(s + 7);
        assert_eq!(l.runs, vec![(s, 5), (s + 7, 1)]);
        l.give_back(s + 10); // past the horizon: not known, not listed
        assert_eq!(l.runs, vec![(s, 5), (s + 7, 1)]);
        l.give_back(s + 6);
        assert_eq!(l.runs, vec![(s, 5), (s + 6, 2)]);
        assert_eq!(l.pop(), Some(s));
        assert!(l.well_formed());
    }

    #[test]
    fn past_the_most_runs_the_last_is_dropped_and_the_horizon_moves_back() {
        let s = FIRST_SLOT;
        let runs: Vec<(u32, u32)> = (0..MAX_RUNS as u32).map(|i| (s + 2 * i, 1)).collect();
        let mut l = list(&runs, s, SPAN);
        l.give_back(s + 2 * MAX_RUNS as u32 + 1);
        assert_eq!(l.runs.len(), MAX_RUNS);
        assert_eq!(l.horizon, 2 * MAX_RUNS as u32 + 1);
        l.give_back(s + 1); // joins the first two runs: one fewer
        assert_eq!(l.runs[0], (s, 3));
        assert!(l.well_formed());
    }

    #[test]
    fn only_a_list_of_this_boot_start_and_index_is_trusted() {
        let st = Stamp {
            dev: 1,
            ino: 2,
            ctime: 3,
            ctime_ns: 4,
            mtime: 5,
            mtime_ns: 6,
        };
        let mut l = FreeList::build(&[], FIRST_SLOT, MAX_RUNS);
        l.seal("boot-a", Some(st));
        assert!(l.valid("boot-a", FIRST_SLOT, Some(st)));
        assert!(!l.valid("boot-b", FIRST_SLOT, Some(st)), "another boot");
        assert!(!l.valid("", FIRST_SLOT, Some(st)), "no boot id");
        assert!(
            !l.valid("boot-a", FIRST_SLOT + 1, Some(st)),
            "another start"
        );
        let later = Stamp { ctime_ns: 5, ..st };
        assert!(!l.valid("boot-a", FIRST_SLOT, Some(later)), "index changed");
        assert!(!l.valid("boot-a", FIRST_SLOT, None), "no index");
        assert!(l.matches(FIRST_SLOT, Some(st)) && !l.matches(FIRST_SLOT, Some(later)));
        // Junk that parses is not trusted either.
        for runs in [
            vec![(FIRST_SLOT, 0)],
            vec![(FIRST_SLOT - 1, 2)],
            vec![(FIRST_SLOT + 5, 1), (FIRST_SLOT + 2, 1)],
            vec![(END_SLOT - 1, 2)],
        ] {
            let mut j = list(&runs, FIRST_SLOT, SPAN);
            j.seal("boot-a", Some(st));
            assert!(!j.valid("boot-a", FIRST_SLOT, Some(st)), "{runs:?}");
        }
        // A run across the start (from the bottom stretch into the top one).
        let mut j = list(&[(FIRST_SLOT + 1, 3)], FIRST_SLOT + 2, SPAN);
        j.seal("boot-a", Some(st));
        assert!(!j.valid("boot-a", FIRST_SLOT + 2, Some(st)));
    }
}
