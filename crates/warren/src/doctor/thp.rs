//! Transparent huge pages "always" with swap: a warning the doctor gives, not a limit.
//!
//! On Debian 12's kernel 6.1 with THP `always` (Debian's default), swap under a memory
//! limit misbehaved in the cgroup v2 VM (issue 23), in plain hand-made cgroups too: a
//! cgroup at its `memory.max` with `memory.swap.max` room stalled or was OOM-killed
//! instead of swapping, because reclaim has to split huge pages before it can swap
//! them out. warren's overcommit relies on that swap, so when THP is `always` and swap
//! is in use (the host has swap, so zones with `memory.max` get a share of it) or asked
//! for (`warren swap enable`, a zone's `memory.swap`), the doctor says so and suggests
//! `madvise`, which keeps huge pages for the programs that ask for them.
//!
//! Reading ([`read`]) takes the sysfs, /proc and state roots as paths so tests point
//! them at fixtures; the verdict ([`finding`]) is a pure function of the reading.

use std::path::Path;

use super::snapshot::Reading;
use super::{Current, Finding, Fix, Unit, Verdict};

/// Relative to the sysfs root.
pub const THP_ENABLED: &str = "kernel/mm/transparent_hugepage/enabled";

/// What the THP warning looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThpSnapshot {
    /// The selected THP mode ("always", "madvise", "never"); `None` when the kernel
    /// has no THP (no such file); `Err` when it could not be read.
    pub mode: Option<Result<String, String>>,
    /// SwapTotal from /proc/meminfo, in bytes.
    pub swap_total: Reading,
    /// warren enabled swap for this state root (`<root>/swap/state.json`).
    pub warren_swap: bool,
    /// Zones of this state root whose config sets a non-zero `memory.swap`.
    pub zones_with_swap: Vec<String>,
}

/// The bracketed word of `enabled`, e.g. "always [madvise] never" → "madvise".
pub fn parse_mode(text: &str) -> Option<String> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .map(str::to_string)
}

/// Read the mode, the host's swap and what the state root asks for.
pub fn read(sys_root: &Path, proc_root: &Path, state_root: &Path) -> ThpSnapshot {
    let path = sys_root.join(THP_ENABLED);
    let mode = match std::fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(Err(format!("reading {}: {e}", path.display()))),
        Ok(t) => Some(
            parse_mode(&t)
                .ok_or_else(|| format!("{}: no [selected] mode in {:?}", path.display(), t.trim())),
        ),
    };
    let meminfo = proc_root.join("meminfo");
    let swap_total = std::fs::read_to_string(&meminfo)
        .map_err(|e| format!("reading {}: {e}", meminfo.display()))
        .and_then(|t| {
            crate::stats::parse_meminfo(&t)
                .get("SwapTotal")
                .copied()
                .ok_or_else(|| format!("{} has no SwapTotal", meminfo.display()))
        });
    let mut zones_with_swap = Vec::new();
    if let Ok(dir) = std::fs::read_dir(state_root.join("zones")) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(text) = std::fs::read_to_string(e.path().join("config.toml")) else {
                continue;
            };
            let swap = crate::config::parse(&name, &text)
                .ok()
                .and_then(|c| c.limits.memory_swap);
            if swap.is_some_and(|s| s > 0) {
                zones_with_swap.push(name);
            }
        }
    }
    zones_with_swap.sort();
    ThpSnapshot {
        mode,
        swap_total,
        warren_swap: state_root.join("swap/state.json").exists(),
        zones_with_swap,
    }
}

/// The finding: *warning* when THP is "always" and swap is in use or asked for; `None`
/// when the kernel has no THP.
pub fn finding(s: &ThpSnapshot) -> Option<Finding> {
    let limit = "transparent_hugepage with swap".to_string();
    let mode = match s.mode.as_ref()? {
        Err(e) => {
            return Some(Finding {
                limit,
                current: Current::Unknown(e.clone()),
                needed: 0,
                unit: Unit::Count,
                verdict: Verdict::Unknown,
                fix: None,
                note: format!("/sys/{THP_ENABLED} is read to warn about THP \"always\" with swap"),
            })
        }
        Ok(m) => m,
    };
    let mut uses = Vec::new();
    match &s.swap_total {
        Ok(n) if *n > 0 => uses.push(format!(
            "the host has {} MiB of swap (zones with memory.max get a share)",
            n >> 20
        )),
        _ => {}
    }
    if s.warren_swap {
        uses.push("warren swap is enabled for this state root".into());
    }
    if !s.zones_with_swap.is_empty() {
        uses.push(format!(
            "zone(s) {} set memory.swap",
            s.zones_with_swap.join(", ")
        ));
    }
    let always = mode == "always";
    let warn = always && !uses.is_empty();
    let note = if warn {
        format!(
            "transparent huge pages are \"always\" and {}: swap under a zone's memory limit misbehaved on Linux 6.1 with THP always (the cgroup stalled or was OOM-killed instead of swapping, as reclaim must split huge pages first)",
            uses.join("; ")
        )
    } else if always {
        "transparent huge pages are \"always\"; no swap is in use or configured, so zones' memory limits are not affected yet".into()
    } else {
        format!("transparent huge pages are {mode:?}")
    };
    Some(Finding {
        limit,
        // 1 when the combination that misbehaves is present.
        current: Current::Value(u64::from(warn)),
        needed: 0,
        unit: Unit::Count,
        verdict: if warn { Verdict::Warning } else { Verdict::Ok },
        fix: warn.then(|| Fix::Advice {
            text: format!(
                "echo madvise > /sys/{THP_ENABLED} (persist it with transparent_hugepage=madvise on the kernel command line)"
            ),
        }),
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(mode: &str, swap_kb: u64) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let w = |rel: &str, text: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w(&format!("sys/{THP_ENABLED}"), mode);
        w(
            "proc/meminfo",
            &format!("MemTotal: 1000000 kB\nSwapTotal: {swap_kb} kB\n"),
        );
        d
    }

    fn check(d: &tempfile::TempDir) -> Option<Finding> {
        let p = d.path();
        finding(&read(&p.join("sys"), &p.join("proc"), &p.join("state")))
    }

    #[test]
    fn parses_the_bracketed_mode() {
        assert_eq!(
            parse_mode("[always] madvise never\n").as_deref(),
            Some("always")
        );
        assert_eq!(
            parse_mode("always [madvise] never").as_deref(),
            Some("madvise")
        );
        assert_eq!(parse_mode("always madvise never"), None);
    }

    #[test]
    fn always_with_host_swap_warns_and_suggests_madvise() {
        let d = tree("[always] madvise never\n", 524288);
        let f = check(&d).unwrap();
        assert_eq!(f.verdict, Verdict::Warning);
        assert_eq!(f.current, Current::Value(1));
        assert!(f.note.contains("512 MiB of swap"), "{}", f.note);
        assert!(f.note.contains("6.1"), "{}", f.note);
        let fix = f.fix.unwrap().to_string();
        assert!(
            fix.contains("madvise") && fix.contains(THP_ENABLED),
            "{fix}"
        );
    }

    #[test]
    fn always_without_swap_is_ok_until_a_zone_or_warren_asks_for_swap() {
        let d = tree("[always] madvise never\n", 0);
        assert_eq!(check(&d).unwrap().verdict, Verdict::Ok);
        // A zone's memory.swap in its config.
        let zone = d.path().join("state/zones/db1");
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(
            zone.join("config.toml"),
            "template = \"host\"\n[memory]\nmax = \"64M\"\nswap = \"32M\"\n",
        )
        .unwrap();
        let f = check(&d).unwrap();
        assert_eq!(f.verdict, Verdict::Warning, "{f:?}");
        assert!(f.note.contains("db1"), "{}", f.note);
        // warren swap enable's record.
        std::fs::remove_dir_all(&zone).unwrap();
        std::fs::create_dir_all(d.path().join("state/swap")).unwrap();
        std::fs::write(d.path().join("state/swap/state.json"), "{}").unwrap();
        let f = check(&d).unwrap();
        assert_eq!(f.verdict, Verdict::Warning);
        assert!(f.note.contains("warren swap"), "{}", f.note);
    }

    #[test]
    fn madvise_never_and_no_thp_do_not_warn() {
        for mode in ["always [madvise] never", "always madvise [never]"] {
            let d = tree(mode, 524288);
            let f = check(&d).unwrap();
            assert_eq!(f.verdict, Verdict::Ok, "{mode}");
            assert!(f.fix.is_none());
        }
        let d = tree("[always] madvise never", 524288);
        std::fs::remove_file(d.path().join("sys").join(THP_ENABLED)).unwrap();
        assert_eq!(check(&d), None);
        let d = tree("garbage", 524288);
        assert_eq!(check(&d).unwrap().verdict, Verdict::Unknown);
    }
}
