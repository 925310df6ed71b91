//! `warren doctor --fix`: raise the sysctls the plan needs, now (by writing /proc/sys)
//! and at every boot (a sysctl.d file warren owns, written atomically and durably).
//!
//! Rules: a value is only ever raised, never lowered, both live and in the file (a key
//! already in the file keeps the larger of the two values, so fixing for a smaller plan
//! later cannot undo an earlier fix). What is applied is written to the file only after
//! the kernel accepted it, so the file never holds a value that fails at boot.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::serving::{parse_sysctl, sysctl_text};
use super::snapshot::sysctl_path;
use super::{Current, Finding, Fix};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::atomic_write;

/// The file warren owns below the sysctl.d directory.
pub const CONF_NAME: &str = "90-warren.conf";
/// Where it goes by default.
pub const DEFAULT_SYSCTL_DIR: &str = "/etc/sysctl.d";

/// One sysctl to raise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub key: String,
    pub from: u64,
    pub to: u64,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} -> {}", self.key, self.from, self.to)
    }
}

/// The changes the findings call for: sysctl fixes that raise a readable value.
pub fn changes(findings: &[Finding]) -> Vec<Change> {
    findings
        .iter()
        .filter_map(|f| match (&f.fix, &f.current) {
            (Some(Fix::Sysctl { key, value }), Current::Value(now)) if value > now => {
                Some(Change {
                    key: key.clone(),
                    from: *now,
                    to: *value,
                })
            }
            _ => None,
        })
        .collect()
}

const HEADER: &str = "\
# Written by 'warren doctor --fix': kernel limits raised for the planned zone density.
# warren only ever raises the values here. Remove this file to drop them at next boot.
";

/// The new content of warren's sysctl.d file: the keys already there (the larger value
/// wins) plus `applied`. Lines warren cannot parse are kept as they were.
pub fn merge_conf(existing: &str, applied: &[Change]) -> String {
    let mut values: BTreeMap<String, u64> = BTreeMap::new();
    let mut other = Vec::new();
    for line in existing.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
            continue;
        }
        match t.split_once('=').and_then(|(k, v)| {
            let v: u64 = parse_sysctl(k.trim(), v)?;
            Some((k.trim().to_string(), v))
        }) {
            Some((k, v)) => {
                let e = values.entry(k).or_insert(v);
                *e = (*e).max(v);
            }
            None => other.push(t.to_string()),
        }
    }
    for c in applied {
        let e = values.entry(c.key.clone()).or_insert(c.to);
        *e = (*e).max(c.to);
    }
    let mut out = HEADER.to_string();
    for (k, v) in values {
        out.push_str(&format!("{k} = {}\n", sysctl_text(&k, v)));
    }
    for l in other {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// What `--fix` did (its `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct FixReport {
    pub dry_run: bool,
    pub applied: Vec<Change>,
    /// (change, error) for values the kernel refused.
    pub failed: Vec<(Change, String)>,
    /// The sysctl.d file written (or that would be).
    pub file: Option<PathBuf>,
    /// Fixes warren cannot make, as advice.
    pub advice: Vec<(String, String)>,
}

/// Apply `changes` under `proc_root` and persist them in `sysctl_dir`. With `dry_run`,
/// only report what would be done. Each value is read again just before writing so a
/// value raised meanwhile is never lowered.
pub fn apply(
    proc_root: &Path,
    sysctl_dir: &Path,
    changes: &[Change],
    advice: Vec<(String, String)>,
    dry_run: bool,
) -> Result<FixReport> {
    let file = sysctl_dir.join(CONF_NAME);
    let mut report = FixReport {
        dry_run,
        applied: Vec::new(),
        failed: Vec::new(),
        file: (!changes.is_empty()).then(|| file.clone()),
        advice,
    };
    if dry_run {
        report.applied = changes.to_vec();
        return Ok(report);
    }
    for c in changes {
        let path = sysctl_path(proc_root, &c.key);
        let now = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| parse_sysctl(&c.key, &t));
        if now.is_some_and(|n| n >= c.to) {
            continue; // raised meanwhile: never lower it
        }
        // Never create: a key the kernel does not have must fail, not appear.
        let write = || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&path)?;
            f.write_all(format!("{}\n", sysctl_text(&c.key, c.to)).as_bytes())
        };
        let result = write().and_then(|_| {
            let back = std::fs::read_to_string(&path)?;
            match parse_sysctl(&c.key, &back) {
                Some(v) if v >= c.to => Ok(()),
                _ => Err(std::io::Error::other(format!(
                    "the kernel kept {} instead",
                    back.trim()
                ))),
            }
        });
        match result {
            Ok(()) => report.applied.push(Change {
                from: now.unwrap_or(c.from),
                ..c.clone()
            }),
            Err(e) => report
                .failed
                .push((c.clone(), format!("writing {}: {e}", path.display()))),
        }
    }
    if !report.applied.is_empty() {
        let existing = match crate::fsutil::read_text_bounded(&file, crate::fsutil::MAX_SMALL_FILE)
        {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).ctx(|| format!("reading {}", file.display())),
        };
        std::fs::create_dir_all(sysctl_dir).ctx(|| format!("creating {}", sysctl_dir.display()))?;
        atomic_write(
            &file,
            merge_conf(&existing, &report.applied).as_bytes(),
            true,
        )
        .ctx(|| {
            format!(
                "writing {}; the values were applied but will not survive a reboot",
                file.display()
            )
        })?;
    } else {
        report.file = None;
    }
    Ok(report)
}

/// The error for values the kernel refused, after the others were applied.
pub fn refused(report: &FixReport) -> Option<Error> {
    if report.failed.is_empty() {
        return None;
    }
    let list: Vec<String> = report
        .failed
        .iter()
        .map(|(c, e)| format!("{} = {} ({e})", c.key, c.to))
        .collect();
    Some(Error::Refused(format!(
        "the kernel refused {}; the other values were applied; set these by hand with sysctl -w",
        list.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{Unit, Verdict};

    fn finding(key: &str, now: u64, fix: Option<u64>) -> Finding {
        Finding {
            limit: key.into(),
            current: Current::Value(now),
            needed: 0,
            unit: Unit::Count,
            verdict: Verdict::WillFail,
            fix: fix.map(|value| Fix::Sysctl {
                key: key.into(),
                value,
            }),
            note: String::new(),
        }
    }

    #[test]
    fn only_raising_sysctl_fixes_become_changes() {
        let mut advice = finding("memory", 1, None);
        advice.fix = Some(Fix::Advice {
            text: "add memory".into(),
        });
        let c = changes(&[
            finding("kernel.pid_max", 32768, Some(65536)),
            finding("fs.nr_open", 100, Some(50)),
            advice,
        ]);
        assert_eq!(
            c,
            vec![Change {
                key: "kernel.pid_max".into(),
                from: 32768,
                to: 65536
            }]
        );
        assert_eq!(c[0].to_string(), "kernel.pid_max: 32768 -> 65536");
    }

    #[test]
    fn merging_keeps_the_larger_value_and_foreign_lines() {
        let old = "# mine\nkernel.pid_max = 131072\nfs.nr_open=2000000\nweird line\n";
        let c = [
            Change {
                key: "kernel.pid_max".into(),
                from: 32768,
                to: 65536,
            },
            Change {
                key: "fs.inotify.max_user_instances".into(),
                from: 128,
                to: 256,
            },
        ];
        let new = merge_conf(old, &c);
        assert!(new.starts_with("# Written by 'warren doctor --fix'"));
        let body: Vec<&str> = new.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            body,
            vec![
                "fs.inotify.max_user_instances = 256",
                "fs.nr_open = 2000000",
                "kernel.pid_max = 131072",
                "weird line",
            ]
        );
        // Idempotent.
        assert_eq!(merge_conf(&new, &c), new);
    }

    #[test]
    fn applies_to_a_fake_proc_and_never_lowers() {
        let d = tempfile::tempdir().unwrap();
        let proc_root = d.path().join("proc");
        let etc = d.path().join("etc/sysctl.d");
        std::fs::create_dir_all(proc_root.join("sys/kernel")).unwrap();
        std::fs::create_dir_all(proc_root.join("sys/fs")).unwrap();
        std::fs::write(proc_root.join("sys/kernel/pid_max"), "32768\n").unwrap();
        // Raised by someone else since the snapshot: must stay.
        std::fs::write(proc_root.join("sys/fs/nr_open"), "9000000\n").unwrap();
        let c = vec![
            Change {
                key: "kernel.pid_max".into(),
                from: 32768,
                to: 65536,
            },
            Change {
                key: "fs.nr_open".into(),
                from: 1_048_576,
                to: 2_097_152,
            },
        ];
        let dry = apply(&proc_root, &etc, &c, vec![], true).unwrap();
        assert_eq!(dry.applied.len(), 2);
        assert!(!etc.exists(), "a dry run writes nothing");
        assert_eq!(
            std::fs::read_to_string(proc_root.join("sys/kernel/pid_max")).unwrap(),
            "32768\n"
        );
        let r = apply(&proc_root, &etc, &c, vec![], false).unwrap();
        assert_eq!(r.applied, c[..1].to_vec());
        assert!(refused(&r).is_none());
        assert_eq!(
            std::fs::read_to_string(proc_root.join("sys/kernel/pid_max")).unwrap(),
            "65536\n"
        );
        assert_eq!(
            std::fs::read_to_string(proc_root.join("sys/fs/nr_open")).unwrap(),
            "9000000\n"
        );
        let conf = std::fs::read_to_string(etc.join(CONF_NAME)).unwrap();
        assert!(conf.contains("kernel.pid_max = 65536\n"), "{conf}");
        assert!(!conf.contains("nr_open"), "{conf}");
        // A key the kernel does not have is reported, not written to the file.
        let missing = vec![Change {
            key: "kernel.no_such_key".into(),
            from: 1,
            to: 2,
        }];
        let r = apply(&proc_root, &etc, &missing, vec![], false).unwrap();
        assert_eq!(r.failed.len(), 1);
        let e = refused(&r).unwrap().to_string();
        assert!(e.contains("kernel.no_such_key = 2"), "{e}");
        assert!(!std::fs::read_to_string(etc.join(CONF_NAME))
            .unwrap()
            .contains("no_such_key"));
    }
}
