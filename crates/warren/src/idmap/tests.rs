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
