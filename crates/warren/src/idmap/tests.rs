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
    let top = (u32::MAX / RANGE - 1) * RANGE;
    assert_eq!(choose_from(&[], "a", None, top, &[]), Ok(top));
    let taken = t(&[(top, "b")]);
    assert_eq!(choose_from(&taken, "a", None, top, &[]), Ok(FIRST_BASE));
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
        while base + u64::from(RANGE) <= u64::from(u32::MAX) {
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
    let top = u32::MAX / RANGE - 1;
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
