//! Unit tests of the id-range allocator (pure parts and a temp state root).

use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn t(v: &[(u32, &str)]) -> Vec<(u32, String)> {
    v.iter().map(|(b, z)| (*b, z.to_string())).collect()
}

#[test]
fn first_zone_gets_first_base_and_gaps_are_reused() {
    assert_eq!(choose(&[], "a", None), Ok(FIRST_BASE));
    let taken = t(&[(FIRST_BASE, "a"), (FIRST_BASE + 2 * RANGE, "c")]);
    assert_eq!(choose(&taken, "b", None), Ok(FIRST_BASE + RANGE));
}

#[test]
fn an_unaligned_pinned_range_is_skipped_by_allocation() {
    let taken = t(&[(FIRST_BASE + 100, "p")]);
    assert_eq!(choose(&taken, "b", None), Ok(FIRST_BASE + 2 * RANGE));
}

#[test]
fn pinned_overlap_names_the_other_zone_and_a_free_base() {
    let taken = t(&[(FIRST_BASE, "a")]);
    let e = choose(&taken, "b", Some(FIRST_BASE + 10)).unwrap_err();
    assert!(e.contains("userns-base"), "{e}");
    assert!(e.contains("zone 'a'"), "{e}");
    assert!(e.contains(&(FIRST_BASE + RANGE).to_string()), "{e}");
    // Adjacent is fine; its own range does not count.
    assert_eq!(
        choose(&taken, "b", Some(FIRST_BASE + RANGE)),
        Ok(FIRST_BASE + RANGE)
    );
    assert_eq!(
        choose(&taken, "a", Some(FIRST_BASE + 5)),
        Ok(FIRST_BASE + 5)
    );
}

#[test]
fn pinned_bases_that_map_host_ids_or_wrap_are_refused() {
    assert!(choose(&[], "a", Some(0)).unwrap_err().contains("65536"));
    assert!(choose(&[], "a", Some(1000)).is_err());
    assert!(choose(&[], "a", Some(u32::MAX - 10)).is_err());
    assert_eq!(choose(&[], "a", Some(65536)), Ok(65536));
}

#[test]
fn a_root_other_than_the_default_starts_elsewhere_and_wraps() {
    let start = first_slot(&Layout::new("/tmp/some-root"));
    assert!(
        start >= FIRST_BASE && start.is_multiple_of(RANGE),
        "{start}"
    );
    assert_eq!(
        first_slot(&Layout::new(crate::layout::DEFAULT_ROOT)),
        FIRST_BASE
    );
    let top = (ALLOC_END as u32 / RANGE - 1) * RANGE;
    assert_eq!(choose_from(&[], "a", None, top, &[]), Ok(top));
    let taken = t(&[(top, "b")]);
    assert_eq!(choose_from(&taken, "a", None, top, &[]), Ok(FIRST_BASE));
}

/// Every range the allocator hands out keeps the zone's tty group (base + 5, the
/// `gid=` of its devpts mount) within a signed int, as the devpts of Linux 6.1 and 6.12
/// parses it:
/// any state root's first slot, and the last range of the space.
#[test]
fn allocated_ranges_keep_the_tty_group_within_what_debian_12_devpts_takes() {
    let tty = |base: u32| u64::from(base) + 5;
    for root in ["/tmp/some-root", "/var/tmp/x", "/srv/warren-2", "/a/b/c/d"] {
        let start = first_slot(&Layout::new(root));
        assert!(tty(start) <= i32::MAX as u64, "{root}: {start}");
    }
    let last = ALLOC_END as u32 - RANGE;
    assert_eq!(choose_from(&[], "a", None, last, &[]), Ok(last));
    assert!(tty(last) <= i32::MAX as u64);
    // The whole space taken: none left, rather than one past it.
    let all = IdRange {
        base: FIRST_BASE,
        count: (ALLOC_END - u64::from(FIRST_BASE)) as u32,
    };
    assert!(free_from(&[(all, "z")], FIRST_BASE).is_none());
}

#[test]
fn map_line_is_the_kernel_format() {
    assert_eq!(IdRange::new(FIRST_BASE).map_line(), "0 1073741824 65536");
    assert_eq!(IdRange::new(FIRST_BASE).last(), FIRST_BASE + 65535);
}

#[test]
fn shift_tree_moves_owners_and_keeps_setuid() {
    let d = std::env::temp_dir().join(format!("warren-shift-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(d.join("a")).unwrap();
    fs::write(d.join("a/f"), b"x").unwrap();
    fs::set_permissions(d.join("a/f"), fs::Permissions::from_mode(0o4755)).unwrap();
    std::os::unix::fs::symlink("/nonexistent", d.join("l")).unwrap();
    if warren_sys::geteuid() != 0 {
        eprintln!("skipped: shift_tree needs root to chown");
        fs::remove_dir_all(&d).unwrap();
        return;
    }
    warren_sys::fs::lchown(&d.join("a/f"), 7, 8).unwrap();
    fs::set_permissions(d.join("a/f"), fs::Permissions::from_mode(0o4755)).unwrap();
    let to = IdRange::new(FIRST_BASE);
    shift_tree(&d, IdRange::new(0), to).unwrap();
    let m = fs::metadata(d.join("a/f")).unwrap();
    assert_eq!((m.uid(), m.gid()), (FIRST_BASE + 7, FIRST_BASE + 8));
    assert_eq!(m.mode() & 0o7777, 0o4755);
    assert_eq!(fs::symlink_metadata(d.join("l")).unwrap().uid(), FIRST_BASE);
    // And back.
    shift_tree(&d, to, IdRange::new(0)).unwrap();
    assert_eq!(fs::metadata(d.join("a/f")).unwrap().uid(), 7);
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn ranges_other_tools_declare_are_skipped_whatever_their_size() {
    // A declared range over the first three slots (unaligned, 2.5 ranges long).
    let avoid = [IdRange {
        base: FIRST_BASE + 10,
        count: 2 * RANGE + RANGE / 2,
    }];
    assert_eq!(
        choose_from(&[], "a", None, FIRST_BASE, &avoid),
        Ok(FIRST_BASE + 3 * RANGE)
    );
    let taken = t(&[(FIRST_BASE + 3 * RANGE, "b")]);
    assert_eq!(
        choose_from(&taken, "a", None, FIRST_BASE, &avoid),
        Ok(FIRST_BASE + 4 * RANGE)
    );
    // A pinned base is the operator's choice: checked against zones only.
    assert_eq!(
        choose_from(&[], "a", Some(FIRST_BASE), FIRST_BASE, &avoid),
        Ok(FIRST_BASE)
    );
}

/// The sweep of `free_from` against the obvious search (every candidate against every
/// range) over many layouts: aligned and unaligned ranges, other tools' ranges of any
/// size, starts in the middle, the top of the id space.
#[test]
fn the_sweep_finds_what_trying_every_candidate_finds() {
    fn reference(others: &[(IdRange, &str)], start: u32) -> Option<u32> {
        let mut base = u64::from(start);
        while base + u64::from(RANGE) <= ALLOC_END {
            let r = IdRange::new(base as u32);
            match others.iter().find(|(o, _)| o.overlaps(&r)) {
                None => return Some(base as u32),
                Some((o, _)) => {
                    base = (u64::from(o.last()) + 1).div_ceil(u64::from(RANGE)) * u64::from(RANGE)
                }
            }
        }
        None
    }
    // A small deterministic generator (xorshift), so a failure reproduces.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let top = (ALLOC_END / u64::from(RANGE)) as u32 - 1;
    for case in 0..2000 {
        let mut others = Vec::new();
        for _ in 0..next(40) {
            let slot = if case % 3 == 0 {
                top - next(30) as u32
            } else {
                16_384 + next(60) as u32
            };
            let base = slot * RANGE
                + if next(4) == 0 {
                    next(u64::from(RANGE)) as u32
                } else {
                    0
                };
            let count = match next(5) {
                0 => 1 + next(u64::from(3 * RANGE)) as u32,
                _ => RANGE,
            };
            let count = count.min(u32::MAX - base);
            if count > 0 {
                others.push((IdRange { base, count }, "z"));
            }
        }
        let start = if case % 3 == 0 {
            (top - 35) * RANGE
        } else {
            (16_384 + next(50) as u32) * RANGE
        };
        assert_eq!(
            free_from(&others, start),
            reference(&others, start),
            "case {case}: {others:?} from {start}"
        );
    }
}

/// With 10,000 ranges taken (in any order) the allocation finds the one gap, and past
/// the last range when there is none.
#[test]
fn choosing_among_ten_thousand_ranges_takes_the_first_gap() {
    let mut taken: Vec<(u32, String)> = (0..10_000u32)
        .filter(|i| *i != 7_777)
        .map(|i| (FIRST_BASE + i * RANGE, format!("z{i}")))
        .collect();
    taken.reverse();
    assert_eq!(
        choose_from(&taken, "new", None, FIRST_BASE + RANGE, &[]),
        Ok(FIRST_BASE + 7_777 * RANGE)
    );
    taken.push((FIRST_BASE + 7_777 * RANGE, "z7777".into()));
    assert_eq!(
        choose_from(&taken, "new", None, FIRST_BASE + RANGE, &[]),
        Ok(FIRST_BASE + 10_000 * RANGE)
    );
}

/// A temporary state root with its own host paths (boot id, registry, /etc).
struct Root {
    _dir: Option<tempfile::TempDir>,
    layout: Layout,
    host: crate::layout::HostPaths,
}

fn root_at(d: &Path) -> Root {
    let host = crate::layout::HostPaths {
        proc: d.join("proc"),
        sys: d.join("sys"),
        run: d.join("run"),
        etc: d.join("etc"),
    };
    let random = host.proc.join("sys/kernel/random");
    if !random.exists() {
        fs::create_dir_all(&random).unwrap();
        fs::write(random.join("boot_id"), "boot-1\n").unwrap();
        fs::create_dir_all(&host.etc).unwrap();
    }
    Root {
        _dir: None,
        layout: Layout::new(d.join("root")),
        host,
    }
}

fn root() -> Root {
    let d = tempfile::tempdir().unwrap();
    let r = root_at(d.path());
    Root { _dir: Some(d), ..r }
}

/// Allocate for `z` and check the list's choice against the full search (the index,
/// the declared ranges, `extra` for the registry's claims).
fn alloc_as_full_search(r: &Root, z: &str, extra: &[(u32, String)]) -> u32 {
    let taken = [read_all(&r.layout).unwrap(), extra.to_vec()].concat();
    let want = choose_from(
        &taken,
        z,
        None,
        first_slot(&r.layout),
        &declared::ranges(&r.host.etc),
    )
    .unwrap();
    let got = allocate(&r.host, &r.layout, z, None).unwrap().base;
    assert_eq!(got, want, "zone {z}");
    got
}

/// The slot the full search would hand out next (the index only).
fn next_by_full_search(r: &Root) -> u32 {
    let taken = read_all(&r.layout).unwrap();
    choose_from(&taken, "x", None, first_slot(&r.layout), &[]).unwrap()
}

fn list_file(r: &Root) -> std::path::PathBuf {
    r.layout.root().join(free::FILE)
}

#[test]
fn the_free_list_hands_out_what_the_full_search_would() {
    let r = root();
    let a = alloc_as_full_search(&r, "a", &[]);
    assert_eq!(a, first_slot(&r.layout));
    assert!(list_file(&r).exists(), "no free list after an allocation");
    let b = alloc_as_full_search(&r, "b", &[]);
    alloc_as_full_search(&r, "c", &[]);
    // A delete gives its slot back: the next zone gets it, as the full search's first fit.
    release(&r.layout, "b", Some(IdRange::new(b))).unwrap();
    assert_eq!(alloc_as_full_search(&r, "d", &[]), b);
    // A pinned range in the list's way: the list is forgotten and rebuilt around it.
    let next = next_by_full_search(&r);
    allocate(&r.host, &r.layout, "p", Some(next + 5)).unwrap();
    assert!(
        !list_file(&r).exists(),
        "a pinned range left the list in place"
    );
    let e = alloc_as_full_search(&r, "e", &[]);
    assert!(
        e != next && e != next + RANGE,
        "{e} overlaps the pinned range at {}",
        next + 5
    );
    // Another tool declares the next slot; a running zone of another root claims the one after.
    let next = next_by_full_search(&r);
    fs::write(
        r.host.etc.join("subuid"),
        format!("podman:{next}:{RANGE}\n"),
    )
    .unwrap();
    let claimed = next + RANGE;
    fs::create_dir_all(r.host.run.join("userns")).unwrap();
    fs::write(r.host.run.join("userns").join(claimed.to_string()), "{}").unwrap();
    let f = alloc_as_full_search(&r, "f", &[(claimed, "(other root)".into())]);
    assert!(f != next && f != claimed, "{f}");
}

#[test]
fn a_missing_stale_or_foreign_list_is_rebuilt_from_the_index_and_the_zones() {
    let r = root();
    for z in ["a", "b", "c"] {
        alloc_as_full_search(&r, z, &[]);
    }
    // Missing.
    fs::remove_file(list_file(&r)).unwrap();
    alloc_as_full_search(&r, "d", &[]);
    // An entry added behind its back (an older warren, an operator): the index's
    // stamp changed, so the slot it took is not handed out again (exact on kernels
    // with fine-grained directory stamps, 6.13 and later: see free.rs).
    let next = next_by_full_search(&r);
    fs::write(dir(&r.layout).join(format!("{next}-old")), "old\n").unwrap();
    assert_ne!(alloc_as_full_search(&r, "e", &[]), next);
    // Garbage.
    fs::write(list_file(&r), "{\"version\": 1, \"runs\": [[0, 1]]}").unwrap();
    alloc_as_full_search(&r, "f", &[]);
    // A power cut lost zone a's entry (not fsync'd) but its state.json has the range,
    // and the list still looks consistent with the index: only a reboot follows a
    // power cut, and a list of another boot is rebuilt, re-recording a's entry.
    let ra = IdRange::new(
        read_all(&r.layout)
            .unwrap()
            .iter()
            .find(|(_, z)| z == "a")
            .unwrap()
            .0,
    );
    let zdir = r.layout.zone_dir("a");
    fs::create_dir_all(&zdir).unwrap();
    let lc = crate::state::Lifecycle {
        idmap: Some(ra),
        ..crate::state::Lifecycle::configured()
    };
    crate::state::save_lifecycle(&zdir, &lc).unwrap();
    fs::remove_file(dir(&r.layout).join(format!("{}-a", ra.base))).unwrap();
    let taken: Vec<IdRange> = read_all(&r.layout)
        .unwrap()
        .iter()
        .map(|(b, _)| IdRange::new(*b))
        .collect();
    let mut stale = free::FreeList::build(&taken, first_slot(&r.layout) / RANGE, free::MAX_RUNS);
    stale.seal("boot-1", free::stamp_of(&dir(&r.layout)));
    free::save(&r.layout, &stale).unwrap();
    fs::write(r.host.proc.join("sys/kernel/random/boot_id"), "boot-2\n").unwrap();
    let g = allocate(&r.host, &r.layout, "g", None).unwrap().base;
    assert_ne!(
        g, ra.base,
        "zone a's range was handed out again after a reboot"
    );
    assert!(
        read_all(&r.layout)
            .unwrap()
            .contains(&(ra.base, "a".to_string())),
        "a's entry was not re-recorded"
    );
}

#[test]
fn gc_frees_entries_of_gone_zones_and_those_a_zone_does_not_record() {
    let r = root();
    let first = allocate(&r.host, &r.layout, "z", None).unwrap();
    // An interrupted clone or install made again: a second range for the same name.
    let second = allocate(&r.host, &r.layout, "z", None).unwrap();
    assert_ne!(first, second);
    let gone = allocate(&r.host, &r.layout, "gone", None).unwrap();
    let busy = allocate(&r.host, &r.layout, "busy", None).unwrap();
    let held = |z: &str| match z {
        "z" => Held::Records(Some(second)),
        "busy" => Held::Keep,
        _ => Held::Gone,
    };
    let freed = gc(&r.layout, &held).unwrap();
    let mut got: Vec<(String, u32, bool)> = freed
        .into_iter()
        .map(|f| (f.zone, f.range.base, f.gone))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("gone".into(), gone.base, true),
            ("z".into(), first.base, false)
        ]
    );
    let mut left = read_all(&r.layout).unwrap();
    left.sort();
    let mut want = t(&[(second.base, "z"), (busy.base, "busy")]);
    want.sort();
    assert_eq!(left, want);
    // The list notices the removals: the lowest freed slot is first again.
    alloc_as_full_search(&r, "n", &[]);
}

/// Each of two processes allocates and releases ranges in one state root at once; the
/// ranges lock and the list keep them apart.
#[test]
fn concurrent_allocations_from_two_processes_never_overlap() {
    let d = tempfile::tempdir().unwrap();
    let r = root_at(d.path());
    let exe = std::env::current_exe().unwrap();
    let kids: Vec<std::process::Child> = ["x", "y"]
        .iter()
        .map(|prefix| {
            std::process::Command::new(&exe)
                .args([
                    "idmap::tests::allocation_child",
                    "--exact",
                    "--ignored",
                    "--test-threads=1",
                ])
                .env("WARREN_TEST_ALLOC_DIR", d.path())
                .env("WARREN_TEST_ALLOC_PREFIX", prefix)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut k in kids {
        assert!(k.wait().unwrap().success(), "a child failed");
    }
    let all = read_all(&r.layout).unwrap();
    let kept = (0..CHILD_ZONES).filter(|i| i % 5 != 3).count();
    assert_eq!(all.len(), 2 * kept, "{all:?}");
    let mut bases: Vec<u32> = all.iter().map(|(b, _)| *b).collect();
    bases.sort_unstable();
    for w in bases.windows(2) {
        assert!(w[1] - w[0] >= RANGE, "overlap: {} and {}", w[0], w[1]);
    }
    alloc_as_full_search(&r, "after", &[]);
}

const CHILD_ZONES: usize = 150;

#[test]
#[ignore = "a child process of concurrent_allocations_from_two_processes_never_overlap"]
fn allocation_child() {
    let Some(d) = std::env::var_os("WARREN_TEST_ALLOC_DIR") else {
        return;
    };
    let prefix = std::env::var("WARREN_TEST_ALLOC_PREFIX").unwrap();
    let r = root_at(Path::new(&d));
    for i in 0..CHILD_ZONES {
        let z = format!("{prefix}{i}");
        let got = allocate(&r.host, &r.layout, &z, None).unwrap();
        if i % 5 == 3 {
            release(&r.layout, &z, Some(got)).unwrap();
        }
    }
}

/// A boot with the zone's own entry passes on that entry alone; without it (a copied
/// directory, a lost index) the whole index is compared: an overlap is refused naming
/// the other zone, and a free range is re-recorded.
#[test]
fn check_at_boot_trusts_the_own_entry_and_compares_the_rest() {
    let r = root();
    let a = allocate(&r.host, &r.layout, "a", None).unwrap();
    check_at_boot(&r.layout, "a", a).unwrap();
    assert_eq!(read_all(&r.layout).unwrap(), t(&[(a.base, "a")]));
    // A copy of a's directory records a's range and has no entry: refused.
    let e = check_at_boot(&r.layout, "copy", a).unwrap_err().to_string();
    assert!(e.contains("zone 'a'"), "{e}");
    assert!(e.contains("overlaps"), "{e}");
    // An unaligned range inside a's, recorded by a zone without an entry: refused too.
    let inside = IdRange::new(a.base + 100);
    assert!(check_at_boot(&r.layout, "b", inside).is_err());
    // A zone whose entry was lost gets it back, and the next boot takes the short way.
    let c = allocate(&r.host, &r.layout, "c", None).unwrap();
    fs::remove_file(r.layout.root().join(format!("userns/{}-c", c.base))).unwrap();
    check_at_boot(&r.layout, "c", c).unwrap();
    assert!(has_entry(&r.layout, "c", c.base).unwrap());
    check_at_boot(&r.layout, "c", c).unwrap();
    // An index that is not a directory is reported as corrupt, not passed.
    let idx = r.layout.root().join("userns");
    fs::remove_dir_all(&idx).unwrap();
    fs::write(&idx, "").unwrap();
    let e = check_at_boot(&r.layout, "a", a).unwrap_err().to_string();
    assert!(e.contains("not a directory"), "{e}");
}
