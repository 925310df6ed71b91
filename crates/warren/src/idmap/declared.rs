//! Id ranges other tools on the host declare: `/etc/subuid` and `/etc/subgid`
//! (`name-or-uid:first:count` per line), the ranges podman (rootless), docker's
//! userns-remap, LXC, Incus and the kubelet map their containers into. A new zone's
//! range avoids them ([`super::allocate`]).
//!
//! Why declared ranges and not the live maps: the live maps are only found by reading
//! `/proc/*/ns/user` and `uid_map` of every process on the host, one read per process
//! and per user namespace, so every clone grew with the number of zones running
//! (docs/scaling.md, "Linear scans"); warren's own running zones are already known
//! from the host-wide registry of claims ([`super::running`]). Two small files cost
//! the same at any number of zones. What this does not see: a tool that maps a range
//! it declared nowhere (systemd-nspawn's `--private-users=pick` checks only its own
//! locks too). warren's ranges start at 2^30, far above the usual `/etc/subuid`
//! ranges (100000+), so the check matters only where an operator declared high ones.

use std::path::Path;

use super::IdRange;
use crate::fsutil::{read_text_bounded, MAX_SMALL_FILE};

/// The ranges `subuid` and `subgid` under `etc` declare (a file that is missing or
/// unreadable declares none).
pub fn ranges(etc: &Path) -> Vec<IdRange> {
    ["subuid", "subgid"]
        .iter()
        .filter_map(|f| read_text_bounded(&etc.join(f), MAX_SMALL_FILE).ok())
        .flat_map(|text| parse(&text))
        .collect()
}

/// The `first:count` ranges of a subuid/subgid file; comments, blank and malformed
/// lines are skipped, a count running past 2^32 is cut there.
pub fn parse(text: &str) -> Vec<IdRange> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split(':').skip(1).map(|x| x.trim().parse::<u64>().ok());
            let (first, count) = (f.next()??, f.next()??);
            let count = count.min((1u64 << 32) - first.min(1 << 32));
            (first <= u64::from(u32::MAX) && count > 0).then_some(IdRange {
                base: first as u32,
                count: count as u32,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subid_lines_are_ranges_and_junk_is_skipped() {
        let text = "# podman\nalice:100000:65536\n1000:231072:65536\n\nbad\nbob:x:1\nzed:4294967000:1000\n";
        assert_eq!(
            parse(text),
            vec![
                IdRange {
                    base: 100000,
                    count: 65536
                },
                IdRange {
                    base: 231072,
                    count: 65536
                },
                IdRange {
                    base: 4294967000,
                    count: 296
                },
            ]
        );
    }

    #[test]
    fn missing_files_declare_nothing() {
        let d = tempfile::tempdir().unwrap();
        assert!(ranges(d.path()).is_empty());
        std::fs::write(d.path().join("subgid"), "lxd:1073741824:1000000\n").unwrap();
        assert_eq!(
            ranges(d.path()),
            vec![IdRange {
                base: 1 << 30,
                count: 1000000
            }]
        );
    }
}
