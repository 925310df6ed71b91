//! Host id ranges for zones' user namespaces: one range of [`RANGE`] uids and gids per
//! zone, never overlapping another zone's.
//!
//! The index is a directory, `<root>/userns/`, with one file per allocated range,
//! named `<first host id>-<zone>`; it is changed only under `locks/userns-ranges.lock`,
//! each file written atomically (temp file, rename; an allocation's entry is not
//! fsync'd, [`allocate`]). One small file per range keeps an
//! allocation O(1) in bytes written, whereas one shared file would be rewritten whole
//! for every zone. A new range is the first slot of the list of free ranges beside it,
//! `<root>/userns-free.json` ([`free`]): no listing of `userns/` or `zones/`, so an
//! allocation costs the same at any number of zones; the list is rebuilt by the full
//! search only when it is missing, stale (the index changed behind it, or the host
//! rebooted) or used up (docs/scaling.md, "Clone at N zones"). The zone's own
//! `state.json` records its range too (`idmap`), so boot and delete need no lookup;
//! `warren gc` removes ranges whose zone has vanished, or that their zone does not
//! record.
//!
//! Allocated ranges start at [`FIRST_BASE`] (2^30), far above the ids of host users
//! and of the usual `/etc/subuid` ranges (100000+), end below [`ALLOC_END`] (2^31: what
//! Debian 12's kernels' devpts can take as a zone's tty group), and are aligned to
//! [`RANGE`]; a zone may pin its own base with `userns-base` (any base from 65536 on,
//! so host system ids are never mapped), which is refused if it overlaps another
//! zone's range.
//!
//! Ranges are unique per host, not only per state root ([`allocate`]): a new range
//! also avoids every range a running zone of any state root claims in the host-wide
//! registry ([`running`]; the candidate's base is looked up there, as a boot's claim
//! is), and a root other than the default starts its search at a slot derived from its
//! path ([`first_slot`]), so two roots' zones do not pile onto the same first ranges
//! even while halted; it also avoids the ranges other tools declare in `/etc/subuid`
//! and `/etc/subgid` ([`declared`]: two small files, whatever the number of zones).
//! The zone's own record is the truth and `userns/` its index: a rebuild of the free
//! list (always the first allocation after a reboot, when a power cut may have lost
//! entries) reads the records of the zones the index lacks and re-records them, a
//! boot re-records its range if the index lost it and refuses a range another zone's
//! index entry overlaps ([`check_at_boot`]); `warren gc` re-records every zone's range
//! and reports overlapping records ([`reconcile`]); and the *running* zones of every
//! state root are kept apart by a host-wide registry of claims ([`running`]).
//! docs/recovery.md, "Id ranges".
//!
//! [`shift_tree`] moves the owners of a private layer from one range to another (a
//! clone's copy of its source's upper directory, or a zone installed before user
//! namespaces), keeping set-id bits and file capabilities that chown would clear.

pub mod declared;
pub mod free;
pub mod running;

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::fsutil::atomic_write;
use crate::layout::Layout;
use crate::lock;

/// Ids per zone: uid 0–65535 inside.
pub const RANGE: u32 = 65536;
/// Where allocation starts: 2^30.
pub const FIRST_BASE: u32 = 1 << 30;
/// Where allocation ends: every allocated range lies below 2^31 (16,384 ranges from
/// [`FIRST_BASE`]). A zone's /dev/pts is mounted with `gid=` its tty group, host id
/// base + 5, and Linux 6.1 and 6.12 (Debian 12's kernel and its backport) parse that
/// option as a signed int: above 2^31 − 1 the mount fails with EINVAL (6.18 takes any
/// u32; `tests/cgroup_v2_vm.rs`, `boot-high-root`). A `userns-base` pinned above it
/// works only on such newer kernels.
pub const ALLOC_END: u64 = 1 << 31;
/// The lowest base `userns-base` may pin: host ids below 65536 are never mapped.
pub const MIN_PINNED_BASE: u32 = 65536;

/// One zone's host ids: inside uid/gid `n` is host `base + n`, for n < `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdRange {
    pub base: u32,
    pub count: u32,
}

impl IdRange {
    pub fn new(base: u32) -> IdRange {
        IdRange { base, count: RANGE }
    }
    /// The last host id of the range.
    pub fn last(&self) -> u32 {
        self.base + (self.count - 1)
    }
    /// The text of `/proc/<pid>/uid_map` and `gid_map`.
    pub fn map_line(&self) -> String {
        format!("0 {} {}", self.base, self.count)
    }
    fn overlaps(&self, other: &IdRange) -> bool {
        self.base <= other.last() && other.base <= self.last()
    }
}

/// Why a pinned base is not allowed, or `None`: range checks only (pure).
pub fn base_problem(base: u32) -> Option<String> {
    if base < MIN_PINNED_BASE {
        return Some(format!(
            "{base} would map host ids below {MIN_PINNED_BASE} (the host's own users and groups); use {MIN_PINNED_BASE} or more"
        ));
    }
    if u64::from(base) + u64::from(RANGE) > u64::from(u32::MAX) {
        return Some(format!(
            "{base} leaves no room for {RANGE} ids below 4294967295; use at most {}",
            u32::MAX - RANGE
        ));
    }
    None
}

/// Pick a base for `zone` given the ranges `taken` (base, owner): the pinned base if it
/// overlaps nobody else's range, else the lowest free aligned slot from [`FIRST_BASE`].
/// Errors are messages for `Error::config` (they name the field and the fix).
pub fn choose(
    taken: &[(u32, String)],
    zone: &str,
    pinned: Option<u32>,
) -> std::result::Result<u32, String> {
    let others: Vec<(IdRange, &str)> = taken
        .iter()
        .filter(|(_, z)| z != zone)
        .map(|(b, z)| (IdRange::new(*b), z.as_str()))
        .collect();
    if let Some(base) = pinned {
        if let Some(p) = base_problem(base) {
            return Err(format!("userns-base {p}"));
        }
        let want = IdRange::new(base);
        if let Some((r, owner)) = others.iter().find(|(r, _)| r.overlaps(&want)) {
            let free = first_free(&others).map_or(String::new(), |b| format!(" (e.g. {b})"));
            return Err(format!(
                "userns-base {base}: host ids {}-{} overlap zone '{owner}''s range {}-{}; pick a base outside every zone's range{free}, or unset userns-base to have one allocated",
                want.base,
                want.last(),
                r.base,
                r.last()
            ));
        }
        return Ok(base);
    }
    first_free(&others).ok_or_else(|| {
        "no free range of host ids is left for a user namespace; delete zones or set userns = false".to_string()
    })
}

/// [`choose`] with the search for a free range starting at `start` (an aligned base at
/// or above [`FIRST_BASE`]) and wrapping around to [`FIRST_BASE`], and avoiding the
/// ranges of `avoid` too (other tools', of any size: [`declared`]). The full search an
/// allocation made before the list of free ranges ([`free`]); now the reference that
/// list's first slot is checked against.
#[cfg(test)]
pub(crate) fn choose_from(
    taken: &[(u32, String)],
    zone: &str,
    pinned: Option<u32>,
    start: u32,
    avoid: &[IdRange],
) -> std::result::Result<u32, String> {
    if pinned.is_some() || (start <= FIRST_BASE && avoid.is_empty()) {
        return choose(taken, zone, pinned);
    }
    let others: Vec<(IdRange, &str)> = taken
        .iter()
        .filter(|(_, z)| z != zone)
        .map(|(b, z)| (IdRange::new(*b), z.as_str()))
        .chain(avoid.iter().map(|r| (*r, "(another tool)")))
        .collect();
    free_from(&others, start.max(FIRST_BASE))
        .or_else(|| first_free(&others))
        .ok_or_else(|| {
            "no free range of host ids is left for a user namespace; delete zones or set userns = false".to_string()
        })
}

/// Where a state root's allocations start: [`FIRST_BASE`] for the default root, else
/// one of the aligned slots above it (below [`ALLOC_END`]) chosen by a hash of the
/// root's path.
pub fn first_slot(layout: &Layout) -> u32 {
    if layout.root() == Path::new(crate::layout::DEFAULT_ROOT) {
        return FIRST_BASE;
    }
    let slots = (ALLOC_END - u64::from(FIRST_BASE)) / u64::from(RANGE);
    let h = crate::layout::fnv1a(layout.root().as_os_str().as_encoded_bytes());
    let slot = h % (slots - 1);
    (u64::from(FIRST_BASE) + slot * u64::from(RANGE)) as u32
}

fn first_free(others: &[(IdRange, &str)]) -> Option<u32> {
    free_from(others, FIRST_BASE)
}

fn free_from(others: &[(IdRange, &str)], start: u32) -> Option<u32> {
    // One sweep over the ranges in the order of their starts: a range that ends before
    // the candidate is behind it, one that starts past the candidate's end means the
    // candidate is free (every later range starts later still), and one in between
    // moves the candidate past it, realigned. O(n log n); trying every candidate
    // against every range was O(n²), seconds per clone at 10,000 zones.
    let mut sorted: Vec<IdRange> = others.iter().map(|(r, _)| *r).collect();
    sorted.sort_unstable_by_key(|r| r.base);
    let range = u64::from(RANGE);
    let mut base = u64::from(start);
    for o in &sorted {
        if base + range > ALLOC_END {
            return None;
        }
        if u64::from(o.last()) < base {
            continue;
        }
        if u64::from(o.base) >= base + range {
            break;
        }
        base = (u64::from(o.last()) + 1).div_ceil(range) * range;
    }
    (base + range <= ALLOC_END).then_some(base as u32)
}

fn dir(layout: &Layout) -> PathBuf {
    layout.root().join("userns")
}

/// Every allocated range: (base, zone), from the file names alone.
pub fn read_all(layout: &Layout) -> Result<Vec<(u32, String)>> {
    let d = dir(layout);
    let entries = match fs::read_dir(&d) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(Error::Corrupt {
                path: d,
                message: "not a directory (the index of zones' id ranges)".into(),
            })
        }
        Err(e) => return Err(e).ctx(|| format!("reading {}", d.display())),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.ctx(|| format!("reading {}", d.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        // Anything else is a temp file of an interrupted write.
        if let Some((base, zone)) = name.split_once('-') {
            if let Ok(base) = base.parse::<u32>() {
                out.push((base, zone.to_string()));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The range of `zone` (pinned to `pinned` if given), allocating it if it has none.
///
/// Without a pin the range comes from the list of free ranges ([`free`]): no listing of
/// `userns/` or `zones/` unless that list must be rebuilt. A pinned range is checked
/// against every range of the index (a pin is the operator's, and rare).
pub fn allocate(
    host: &crate::layout::HostPaths,
    layout: &Layout,
    zone: &str,
    pinned: Option<u32>,
) -> Result<IdRange> {
    let _lock = lock::exclusive(layout, "userns", "ranges")?;
    if pinned.is_none() {
        return allocate_free(host, layout, zone);
    }
    let taken = read_all(layout)?;
    let mine: Vec<u32> = taken
        .iter()
        .filter(|(_, z)| z == zone)
        .map(|(b, _)| *b)
        .collect();
    if let Some(b) = mine.first() {
        if pinned == Some(*b) {
            return Ok(IdRange::new(*b));
        }
    }
    // Zones whose index entry was lost: their own records say (and are re-recorded).
    let lost = rederive(layout, &taken, zone)?;
    let taken = [taken, lost].concat();
    let base = choose(&taken, zone, pinned).map_err(|m| Error::config(zone, m))?;
    // Not fsync'd: the caller records the range in the zone's own state.json, durably,
    // before the zone exists (install) or is published (clone); a power cut that loses
    // this entry is repaired by `rederive` at the first allocation after the reboot
    // (the free list is of another boot, [`free`]), by boot and by gc, and a crash
    // that keeps it for a zone never made is freed by gc.
    record(layout, zone, base, false)?;
    let d = dir(layout);
    // A re-pinned zone gives up its old range, after the new one is recorded.
    for old in mine {
        remove(&d, old, zone)?;
    }
    Ok(IdRange::new(base))
}

/// [`allocate`] without a pin, under the ranges lock: the first slot of the list of
/// free ranges that no other tool declares and no running zone of another state root
/// claims now (one stat in the host-wide registry), the list rebuilt by the full search
/// when it is missing, stale or used up. The entry is not fsync'd (see [`allocate`]).
fn allocate_free(host: &crate::layout::HostPaths, layout: &Layout, zone: &str) -> Result<IdRange> {
    let d = dir(layout);
    let boot_id = crate::stats::boot_id(&host.proc);
    let start = first_slot(layout) / RANGE;
    let avoid = declared::ranges(&host.etc);
    let mut list = free::load(layout).filter(|l| l.valid(&boot_id, start, free::stamp_of(&d)));
    let mut rebuilds = 0;
    let base = loop {
        let slot = match list.as_mut().and_then(free::FreeList::pop) {
            Some(s) => s,
            // Used up (or never made): rebuilt from the index and the zones. What a
            // rebuild lists is skipped only when another root's zone claims it or a
            // tool declares it meanwhile; three rebuilds in a row find the space full.
            None if rebuilds < 3 => {
                rebuilds += 1;
                list = Some(rebuild(host, layout, zone, start, &avoid)?);
                continue;
            }
            None => {
                return Err(Error::config(
                    zone,
                    "no free range of host ids is left for a user namespace; delete zones or set userns = false",
                ))
            }
        };
        let r = IdRange::new(slot * RANGE);
        if avoid.iter().any(|a| a.overlaps(&r)) || running::is_claimed(host, r.base) {
            continue;
        }
        break r.base;
    };
    write_entry(layout, zone, base, false)?;
    let mut list = list.expect("a slot came from the list");
    list.seal(&boot_id, free::stamp_of(&d));
    free::save(layout, &list)?;
    Ok(IdRange::new(base))
}

/// The list of free ranges made anew: the full search over the index, the zones the
/// index lost (re-recorded), the ranges running zones of every state root claim (the
/// host-wide registry's names) and those other tools declare. O(zones); see [`free`].
fn rebuild(
    host: &crate::layout::HostPaths,
    layout: &Layout,
    zone: &str,
    start: u32,
    avoid: &[IdRange],
) -> Result<free::FreeList> {
    let taken = read_all(layout)?;
    let lost = rederive(layout, &taken, zone)?;
    let ranges: Vec<IdRange> = taken
        .iter()
        .chain(lost.iter())
        .map(|(b, _)| *b)
        .chain(running::claimed(host))
        .map(IdRange::new)
        .chain(avoid.iter().copied())
        .collect();
    Ok(free::FreeList::build(&ranges, start, free::MAX_RUNS))
}

/// The ranges of zones (other than `except`) that have no entry in the index, read
/// from their own `state.json` and recorded again: what a lost `userns/` file hid.
/// Only those zones' files are read (one readdir of `zones/` otherwise): O(zones) in
/// names, paid by a rebuild of the free list and a pinned allocation only. A range that overlaps an indexed
/// one (a copied zone directory) is not recorded: it is taken already, and recording
/// it would make the original's boot refuse too; gc reports the pair. Caller holds
/// the ranges lock.
fn rederive(
    layout: &Layout,
    indexed: &[(u32, String)],
    except: &str,
) -> Result<Vec<(u32, String)>> {
    let mut out: Vec<(u32, String)> = Vec::new();
    let known: HashSet<&str> = indexed.iter().map(|(_, n)| n.as_str()).collect();
    for z in crate::zone::names_in(layout)? {
        if z == except || known.contains(z.as_str()) {
            continue;
        }
        let Ok(Some(lc)) = crate::state::load_lifecycle(&layout.zone_dir(&z)) else {
            continue;
        };
        let Some(r) = lc.idmap else { continue };
        let clash = indexed
            .iter()
            .chain(out.iter())
            .any(|(b, _)| IdRange::new(*b).overlaps(&r));
        if !clash {
            record(layout, &z, r.base, true)?;
            out.push((r.base, z));
        }
    }
    Ok(out)
}

fn file_name(base: u32, zone: &str) -> String {
    format!("{base}-{zone}")
}

/// Remove one range's file; whether there was one. Not fsync'd: a removal lost in a power cut leaves a range
/// held by a zone that no longer exists, which is safe (nothing can overlap it) and
/// which `warren gc` frees. An allocation is durable through the zone's own
/// `state.json` (see [`allocate`]).
fn remove(d: &Path, base: u32, zone: &str) -> Result<bool> {
    let path = d.join(file_name(base, zone));
    match fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).ctx(|| format!("removing {}", path.display())),
    }
}

/// Before a boot with recorded range `r`: re-record it in `userns/` if the index lost
/// it, and refuse it if another zone's entry overlaps it (a copied zone directory, a
/// range handed out again after the index was lost).
///
/// When the index holds this zone's own entry for exactly `r`, one lookup answers:
/// every writer of an entry checked it against every other entry first (an unpinned
/// allocation takes a slot of the free list, which the full search built from the
/// index and which any other new entry forgets; a pin, a re-record at boot or by `gc`
/// each compare with the whole index), so no other zone's entry can overlap it, and
/// listing `userns/` — 10,000 names at 10,000 zones, at every boot — proves nothing
/// more. Only a zone without its entry (a copied directory, a lost index) is compared
/// with the whole index.
pub fn check_at_boot(layout: &Layout, zone: &str, r: IdRange) -> Result<()> {
    let _lock = lock::exclusive(layout, "userns", "ranges")?;
    if r.count == RANGE && has_entry(layout, zone, r.base)? {
        return Ok(());
    }
    let taken = read_all(layout)?;
    if let Some((b, other)) = taken
        .iter()
        .find(|(b, z)| z != zone && IdRange::new(*b).overlaps(&r))
    {
        return Err(Error::Refused(format!(
            "zone '{zone}': its host id range {}-{} (state.json) overlaps zone '{other}''s range from {b} ({}); two zones must never share host ids: if '{zone}' is a copy of '{other}', delete it ('warren delete --force {zone}') and make it with 'warren clone', else set a free userns-base on one of them",
            r.base,
            r.last(),
            dir(layout).display()
        )));
    }
    if !taken.iter().any(|(b, z)| z == zone && *b == r.base) {
        record(layout, zone, r.base, true)?;
    }
    Ok(())
}

/// Whether the index holds `zone`'s entry for the range at `base` (a file of that
/// name; the index is warren's own directory, never a zone's).
fn has_entry(layout: &Layout, zone: &str, base: u32) -> Result<bool> {
    let path = dir(layout).join(file_name(base, zone));
    match fs::symlink_metadata(&path) {
        Ok(m) => Ok(m.is_file()),
        // Not there, or `userns/` is no directory: the full check says which.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e).ctx(|| format!("reading {}", path.display())),
    }
}

/// Add an index entry for a range the free list may still hold (a pinned or
/// re-recorded range): the list is removed first ([`free::forget`]).
fn record(layout: &Layout, zone: &str, base: u32, durable: bool) -> Result<()> {
    free::forget(layout)?;
    write_entry(layout, zone, base, durable)
}

fn write_entry(layout: &Layout, zone: &str, base: u32, durable: bool) -> Result<()> {
    let d = dir(layout);
    fs::create_dir_all(&d).ctx(|| format!("creating {}", d.display()))?;
    let path = d.join(file_name(base, zone));
    atomic_write(&path, format!("{zone}\n").as_bytes(), durable).ctx(|| {
        format!(
            "zone '{zone}': recording its id range in {}",
            path.display()
        )
    })
}

/// What [`reconcile`] found.
#[derive(Debug, Default)]
pub struct Reconciled {
    /// Ranges re-recorded in `userns/` from zones' own records.
    pub rerecorded: Vec<String>,
    /// Zones whose recorded ranges overlap, with the remedy.
    pub conflicts: Vec<String>,
}

/// `warren gc`: re-record every zone's range (from its `state.json`) in `userns/` and
/// report zones whose recorded ranges overlap.
pub fn reconcile(ctx: &crate::zone::Context, zones: &[String]) -> Result<Reconciled> {
    let layout = &ctx.layout;
    let _lock = lock::exclusive(layout, "userns", "ranges")?;
    let taken = read_all(layout)?;
    let mut out = Reconciled::default();
    let indexed: HashSet<(u32, &str)> = taken.iter().map(|(b, n)| (*b, n.as_str())).collect();
    let named: HashSet<&str> = taken.iter().map(|(_, n)| n.as_str()).collect();
    // The ranges kept so far, by base: disjoint, so the only one that can overlap a
    // range r is the last one starting at or before r's end.
    let mut recorded: BTreeMap<u32, (String, IdRange)> = BTreeMap::new();
    // Zones the index names first: of two zones claiming one range (a copied
    // directory), the one the index knows keeps it and the other is reported.
    let mut order: Vec<&String> = zones.iter().collect();
    order.sort_by_key(|z| !named.contains(z.as_str()));
    for z in order {
        let Ok(Some(lc)) = crate::state::load_lifecycle(&layout.zone_dir(z)) else {
            continue;
        };
        let Some(r) = lc.idmap else { continue };
        let overlapping = recorded
            .range(..=r.last())
            .next_back()
            .map(|(_, kept)| kept)
            .filter(|(_, o)| o.overlaps(&r));
        if let Some((other, o)) = overlapping {
            out.conflicts.push(format!(
                "zones '{other}' and '{z}' record overlapping host id ranges ({}-{} and {}-{}): one is probably a copy of the other's directory; delete the copy with 'warren delete --force' and make it with 'warren clone'",
                o.base, o.last(), r.base, r.last()
            ));
            continue;
        }
        recorded.insert(r.base, (z.clone(), r));
        if !indexed.contains(&(r.base, z.as_str())) {
            record(layout, z, r.base, true)?;
            out.rerecorded.push(format!(
                "zone '{z}': re-recorded its id range {}-{} in {}",
                r.base,
                r.last(),
                dir(layout).display()
            ));
        }
    }
    Ok(out)
}

/// Refuse a pinned base that overlaps another zone's range now (read-only; the
/// allocation at install or boot checks again under the lock).
pub fn check_pin(layout: &Layout, zone: &str, pinned: u32) -> Result<()> {
    let taken = read_all(layout)?;
    choose(&taken, zone, Some(pinned))
        .map(drop)
        .map_err(|m| Error::config(zone, m))
}

/// Free every range of `zone` (on delete). `known` is the range its state records:
/// then no directory scan is needed, and an aligned range goes back on the list of
/// free ranges ([`free`]) if that list matched the index. Safe to repeat.
pub fn release(layout: &Layout, zone: &str, known: Option<IdRange>) -> Result<()> {
    let _lock = lock::exclusive(layout, "userns", "ranges")?;
    let d = dir(layout);
    if let Some(r) = known {
        let start = first_slot(layout) / RANGE;
        let list = free::load(layout).filter(|l| l.matches(start, free::stamp_of(&d)));
        // Given back only when this entry was there to remove: a zone that merely
        // records the range (a copied directory) does not hold it in the index.
        if remove(&d, r.base, zone)? {
            if let Some(mut list) = list {
                if r.count == RANGE && r.base.is_multiple_of(RANGE) {
                    list.give_back(r.base / RANGE);
                }
                list.restamp(free::stamp_of(&d));
                // Not fatal: a list that cannot be written is removed (and rebuilt).
                let _ = free::save(layout, &list);
            }
        }
        return Ok(());
    }
    for (base, z) in read_all(layout)? {
        if z == zone {
            remove(&d, base, &z)?;
        }
    }
    Ok(())
}

/// Record `range` as held by `zone` too (a zone being renamed: the new name's record
/// is written before the directory is renamed, the old one removed after, so a crash
/// in between leaves an extra record that `gc` frees, never a range without one).
pub fn record_also(layout: &Layout, zone: &str, range: IdRange) -> Result<()> {
    let _lock = lock::exclusive(layout, "userns", "ranges")?;
    // While both names hold the range, a delete of one must not list it as free.
    free::forget(layout)?;
    let d = dir(layout);
    fs::create_dir_all(&d).ctx(|| format!("creating {}", d.display()))?;
    let path = d.join(file_name(range.base, zone));
    atomic_write(&path, format!("{zone}\n").as_bytes(), true).ctx(|| {
        format!(
            "zone '{zone}': recording its id range in {}",
            path.display()
        )
    })
}

/// What `gc` knows of a zone an index entry names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Busy (its lock is held: being made or changed right now) or unreadable: its
    /// entries stay.
    Keep,
    /// There is no such zone.
    Gone,
    /// The zone exists, idle, and its `state.json` records this range (or none).
    Records(Option<IdRange>),
}

/// An index entry [`gc`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freed {
    pub zone: String,
    pub range: IdRange,
    /// The zone is gone (else it exists but records another range, or none).
    pub gone: bool,
}

/// Free ranges whose zone no longer exists, and entries of an existing zone that its
/// own record does not name (an install or clone interrupted after its allocation and
/// then made again, which allocates anew: [`allocate`]). `held` says which (it must
/// say [`Held::Keep`] for a zone whose lock is held: one being made right now).
pub fn gc(layout: &Layout, held: &dyn Fn(&str) -> Held) -> Result<Vec<Freed>> {
    let _lock = lock::exclusive(layout, "userns", "ranges")?;
    let d = dir(layout);
    let mut freed = Vec::new();
    for (base, z) in read_all(layout)? {
        let gone = match held(&z) {
            Held::Keep => continue,
            Held::Records(Some(r)) if r.base == base => continue,
            Held::Records(_) => false,
            Held::Gone => true,
        };
        remove(&d, base, &z)?;
        freed.push(Freed {
            zone: z,
            range: IdRange::new(base),
            gone,
        });
    }
    Ok(freed)
}

/// Re-own the tree at `root` from range `from` to range `to` (host ids `from.base + n`
/// become `to.base + n`; ids outside `from` are left alone). `from` with base 0 means
/// "host ids", for a layer made before the zone had a user namespace. Symlinks are
/// re-owned, never followed. chown clears set-id bits and the `security.capability`
/// xattr, so both are put back. The top directory is re-owned last: its owner is the
/// mark of a finished shift (an interrupted one is finished by running it again; ids
/// already shifted lie outside `from` and are left alone).
pub fn shift_tree(root: &Path, from: IdRange, to: IdRange) -> std::io::Result<u64> {
    crate::treeops::shift_tree(root, crate::treeops::Shift { from, to })
}

#[cfg(test)]
mod tests;
