//! `memory.merge` (KSM): a warning the doctor gives, not a limit.
//!
//! KSM merges identical anonymous pages across every process that opted in, whichever
//! zone it belongs to. That is the point (ten replicas of one service share their
//! identical data), and also a side channel between tenants: a zone can tell whether
//! another zone holds a given page by timing a write to its own copy (the
//! copy-on-write of a merged page is slow), so it is off by default and the doctor says
//! which zones turned it on (verdict *weakens isolation*). Zones that ask for merging
//! while ksmd does not run (`/sys/kernel/mm/ksm/run` is not 1) merge nothing: that is a
//! *warning* with the fix.
//!
//! [`read`] takes the sysfs and state roots as paths; [`finding`] is pure.

use std::path::Path;

use super::{Current, Finding, Fix, Unit, Verdict};

/// Relative to the sysfs root.
pub const KSM_RUN: &str = "kernel/mm/ksm/run";

/// What the KSM finding looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KsmSnapshot {
    /// `/sys/kernel/mm/ksm/run` (0 stopped, 1 running, 2 unmerging); `None` without KSM.
    pub run: Option<u32>,
    /// Zones of this state root whose config sets `memory.merge = true`.
    pub merging: Vec<String>,
}

/// Read ksmd's state and the zones that merge.
pub fn read(sys_root: &Path, state_root: &Path) -> KsmSnapshot {
    let run = std::fs::read_to_string(sys_root.join(KSM_RUN))
        .ok()
        .and_then(|t| t.trim().parse().ok());
    let mut merging = Vec::new();
    if let Ok(dir) = std::fs::read_dir(state_root.join("zones")) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(text) = std::fs::read_to_string(e.path().join("config.toml")) else {
                continue;
            };
            if crate::config::parse(&name, &text).is_ok_and(|c| c.memory_merge) {
                merging.push(name);
            }
        }
    }
    merging.sort();
    KsmSnapshot { run, merging }
}

/// The finding: *weakens isolation* when zones merge (with a *warning* instead when
/// ksmd does not run, so nothing is merged); ok when none does.
pub fn finding(s: &KsmSnapshot) -> Finding {
    let limit = "memory.merge (KSM)".to_string();
    let n = s.merging.len() as u64;
    let base = Finding {
        limit,
        current: Current::Value(n),
        needed: 0,
        unit: Unit::Count,
        verdict: Verdict::Ok,
        fix: None,
        note: String::new(),
    };
    if s.merging.is_empty() {
        return Finding {
            note: "no zone sets memory.merge (off by default: merging crosses tenants)".into(),
            ..base
        };
    }
    let zones = s.merging.join(", ");
    match s.run {
        Some(1) => Finding {
            verdict: Verdict::Weakens,
            fix: Some(Fix::Advice {
                text: "set memory.merge = false on zones of tenants that must not learn each other's memory".into(),
            }),
            note: format!(
                "zone(s) {zones} let KSM merge their identical pages with every other merging zone's: a tenant can tell whether another holds a page by timing a write to its own copy"
            ),
            ..base
        },
        run => Finding {
            verdict: Verdict::Warning,
            fix: run.is_some().then(|| Fix::Advice {
                text: format!("echo 1 > /sys/{KSM_RUN} (starts ksmd, host-wide)"),
            }),
            note: match run {
                None => format!("zone(s) {zones} set memory.merge, but this kernel has no KSM (/sys/{KSM_RUN}): nothing is merged"),
                Some(r) => format!("zone(s) {zones} set memory.merge, but ksmd is not running (/sys/{KSM_RUN} = {r}): nothing is merged"),
            },
            ..base
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_zones_weaken_isolation_and_a_stopped_ksmd_is_a_warning() {
        let none = KsmSnapshot {
            run: Some(1),
            merging: vec![],
        };
        assert_eq!(finding(&none).verdict, Verdict::Ok);
        let on = KsmSnapshot {
            run: Some(1),
            merging: vec!["a".into(), "b".into()],
        };
        let f = finding(&on);
        assert_eq!(f.verdict, Verdict::Weakens);
        assert!(
            f.note.contains("a, b") && f.note.contains("timing"),
            "{}",
            f.note
        );
        let stopped = KsmSnapshot {
            run: Some(0),
            merging: vec!["a".into()],
        };
        let f = finding(&stopped);
        assert_eq!(f.verdict, Verdict::Warning);
        assert!(f.fix.unwrap().to_string().contains("ksm/run"));
        let absent = KsmSnapshot {
            run: None,
            merging: vec!["a".into()],
        };
        assert!(finding(&absent).note.contains("no KSM"));
    }

    #[test]
    fn zones_that_merge_are_read_from_their_configs() {
        let d = tempfile::tempdir().unwrap();
        for (z, extra) in [("a", "memory.merge = true\n"), ("b", "")] {
            let dir = d.path().join("state/zones").join(z);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("config.toml"),
                format!("template = \"host\"\n{extra}"),
            )
            .unwrap();
        }
        std::fs::create_dir_all(d.path().join("sys/kernel/mm/ksm")).unwrap();
        std::fs::write(d.path().join("sys").join(KSM_RUN), "0\n").unwrap();
        let s = read(&d.path().join("sys"), &d.path().join("state"));
        assert_eq!(
            s,
            KsmSnapshot {
                run: Some(0),
                merging: vec!["a".into()]
            }
        );
    }
}
