//! /proc views: a zone's `/proc/meminfo`, `cpuinfo`, `stat`, `uptime`, `loadavg`,
//! `diskstats`, `swaps` and `/sys/devices/system/cpu/online` show its own limits and
//! usage (`free` inside a zone capped at 48M says 48M), from the host's one lxcfs.
//!
//! The mechanism (docs/proc-views.md has the evaluation against a warren-native one):
//! Debian's lxcfs is one FUSE daemon for the whole host, mounted once in the host's
//! namespace (`lxcfs-dir` of `defaults.toml`, default `/var/lib/lxcfs`, by Debian's
//! unit or `contrib/warren-lxcfs.service`). It answers each read for the reading
//! process: it finds the reader's cgroups from its pid (`/proc/<pid>/cgroup`, v1 and
//! v2) and its pid namespace's init (for `uptime`). So nothing is per zone on the host
//! but the bind mounts: at boot, warren opens each view as a detached read-only bind
//! (`open_tree`, in the booting process, from the host's mount: a path no zone can
//! reach or replace) and the zone's child attaches them over its fresh /proc (and its
//! read-only /sys) before `pivot_root`, in the zone's own mount namespace. A zone's
//! root cannot unmount them (their mount namespace belongs to the host's user
//! namespace) and warren unmounts nothing at halt.
//!
//! Who decides: `proc-views` of the zone (true: required, the boot fails without
//! lxcfs; false: never), else the host's `proc-views` of `defaults.toml` (default
//! true), which binds the views when lxcfs is mounted and reachable and boots without
//! them otherwise. [`probe`] is what `warren info` and `warren doctor` show.
//!
//! Failure mode: the views are only as alive as the daemon. If lxcfs dies, every read
//! of a viewed file in a running zone fails with ENOTCONN ("Transport endpoint is not
//! connected"); the zone, its processes and every other file keep working.
//! `warren proc-views --refresh` (`zone::proc_views`, run by the contrib unit drop-in
//! when lxcfs starts) swaps the dead binds for the new mount's, or for the host's files
//! while lxcfs is down. lxcfs's own upgrade path (`systemctl reload lxcfs`: SIGUSR1
//! reloads its library behind the same mount) keeps running zones' views working;
//! tests/proc_views.rs proves each case.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::config::{Defaults, ZoneConfig};
use crate::error::{Error, Result};

/// The files lxcfs views, relative to both its mount and the zone's root. The first
/// one is what [`probe`] reads; a view this lxcfs does not provide is skipped.
pub const VIEWS: [&str; 8] = [
    "proc/meminfo",
    "proc/cpuinfo",
    "proc/stat",
    "proc/uptime",
    "proc/loadavg",
    "proc/diskstats",
    "proc/swaps",
    "sys/devices/system/cpu/online",
];

/// The filesystem type of an lxcfs mount in mountinfo.
pub const LXCFS_FSTYPE: &str = "fuse.lxcfs";

/// What a boot does about /proc views, from the zone's key and the host's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// `proc-views = false` (the zone's, or the host's with the zone silent).
    Off,
    /// The default: bound when lxcfs is there, else the host's files.
    IfAvailable,
    /// `proc-views = true` in the zone's config: no boot without them.
    Required,
}

/// The zone's choice (pure).
pub fn want(config: &ZoneConfig, defaults: &Defaults) -> Want {
    match config.proc_views {
        Some(true) => Want::Required,
        Some(false) => Want::Off,
        None if defaults.proc_views => Want::IfAvailable,
        None => Want::Off,
    }
}

/// The state of the host's lxcfs mount.
#[derive(Debug)]
pub enum Status {
    /// `proc-views = false` in `defaults.toml`.
    Disabled,
    /// Nothing, or another filesystem, is mounted at the directory.
    NotMounted { dir: PathBuf, found: Option<String> },
    /// lxcfs is mounted but does not answer (its daemon died: ENOTCONN).
    Unreachable { dir: PathBuf, error: std::io::Error },
    /// lxcfs answers at `dir`.
    Active { dir: PathBuf },
}

impl Status {
    /// One line for `warren info` and `warren doctor`.
    pub fn describe(&self) -> String {
        match self {
            Status::Disabled => "off (proc-views = false in defaults.toml)".to_string(),
            Status::NotMounted { dir, found: None } => format!(
                "inactive: lxcfs is not mounted at {} (zones see the host's values; start it: systemctl start lxcfs, docs/proc-views.md)",
                dir.display()
            ),
            Status::NotMounted {
                dir,
                found: Some(t),
            } => format!(
                "inactive: {} holds a {t} mount, not lxcfs (set lxcfs-dir in defaults.toml to lxcfs's mount)",
                dir.display()
            ),
            Status::Unreachable { dir, error } => format!(
                "broken: lxcfs at {} does not answer ({error}); restart it (systemctl restart lxcfs), then repair running zones' views: warren proc-views --refresh",
                dir.display()
            ),
            Status::Active { dir } => format!("active: lxcfs at {}", dir.display()),
        }
    }

    /// Whether a boot gets the views.
    pub fn is_active(&self) -> bool {
        matches!(self, Status::Active { .. })
    }
}

/// The status as a `warren doctor` finding: ok when active or turned off, tight when
/// lxcfs is not mounted (zones boot, seeing the host's values), will fail when it is
/// mounted but dead (running zones' views fail, `proc-views = true` zones do not boot).
pub fn finding(s: &Status) -> crate::doctor::Finding {
    use crate::doctor::{Current, Finding, Fix, Unit, Verdict};
    let (verdict, fix) = match s {
        Status::Disabled | Status::Active { .. } => (Verdict::Ok, None),
        Status::NotMounted { .. } => (
            Verdict::Tight,
            Some("start lxcfs: systemctl enable --now lxcfs (docs/proc-views.md)"),
        ),
        Status::Unreachable { .. } => (
            Verdict::WillFail,
            Some("systemctl restart lxcfs, then warren proc-views --refresh"),
        ),
    };
    Finding {
        limit: "/proc views (lxcfs)".into(),
        current: Current::Value(u64::from(s.is_active())),
        needed: 1,
        unit: Unit::Count,
        verdict,
        fix: fix.map(|t| Fix::Advice { text: t.into() }),
        note: s.describe(),
    }
}

/// The filesystem type of the topmost mount whose mount point is `dir`, from
/// mountinfo's text (pure; the mount point's octal escapes decoded).
pub fn fstype_at(mountinfo: &str, dir: &Path) -> Option<String> {
    let want = dir.to_str()?;
    let mut found = None;
    for line in mountinfo.lines() {
        let mut fields = line.split(' ');
        let Some(point) = fields.nth(4) else {
            continue;
        };
        if unescape(point) != want {
            continue;
        }
        let mut rest = fields.skip_while(|f| *f != "-");
        if let (Some(_), Some(fstype)) = (rest.next(), rest.next()) {
            found = Some(fstype.to_string());
        }
    }
    found
}

/// How many lxcfs mounts are stacked on `point` in mountinfo's text (pure): a zone's
/// views, in its init's mountinfo (mount points relative to the zone's root).
pub fn lxcfs_mounts_at(mountinfo: &str, point: &Path) -> usize {
    let Some(want) = point.to_str() else {
        return 0;
    };
    mountinfo
        .lines()
        .filter(|line| {
            let mut fields = line.split(' ');
            let at = fields.nth(4).map(unescape);
            let mut rest = fields.skip_while(|f| *f != "-");
            at.as_deref() == Some(want) && rest.nth(1) == Some(LXCFS_FSTYPE)
        })
        .count()
}

/// mountinfo's `\040`-style escapes decoded.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The host's lxcfs as `defaults` names it (`proc_root`: /proc, injected).
pub fn probe(proc_root: &Path, defaults: &Defaults) -> Status {
    if !defaults.proc_views {
        return Status::Disabled;
    }
    let dir = defaults.lxcfs_dir.clone();
    let info = crate::fsutil::read_text_bounded(
        &proc_root.join("self/mountinfo"),
        crate::fsutil::MAX_SMALL_FILE * 16,
    )
    .unwrap_or_default();
    match fstype_at(&info, &dir) {
        Some(t) if t == LXCFS_FSTYPE => {}
        found => return Status::NotMounted { dir, found },
    }
    match std::fs::metadata(dir.join(VIEWS[0])) {
        Ok(_) => Status::Active { dir },
        Err(error) => Status::Unreachable { dir, error },
    }
}

/// Where a boot's views come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// lxcfs's mount.
    pub dir: PathBuf,
    /// `proc-views = true`: a view that cannot be opened fails the boot; otherwise the
    /// zone boots with the host's files (lxcfs died between the probe and the open).
    pub required: bool,
}

/// The lxcfs mount a boot of `zone` binds views from, or `None` for the host's files;
/// `Required` without a working lxcfs is an error naming the fix.
pub fn for_boot(
    zone: &str,
    config: &ZoneConfig,
    defaults: &Defaults,
    proc_root: &Path,
) -> Result<Option<Source>> {
    let want = want(config, defaults);
    if want == Want::Off {
        return Ok(None);
    }
    // The zone's own `true` wins over the host's `false`.
    let host = Defaults {
        proc_views: true,
        ..defaults.clone()
    };
    match (probe(proc_root, &host), want) {
        (Status::Active { dir }, w) => Ok(Some(Source {
            dir,
            required: w == Want::Required,
        })),
        (_, Want::IfAvailable | Want::Off) => Ok(None),
        (status, Want::Required) => Err(Error::Unsupported(format!(
            "zone '{zone}': proc-views = true, but the host's /proc views are {}; or set proc-views = false (or unset it: views when lxcfs is there)",
            status.describe()
        ))),
    }
}

/// [`open`] for a boot: a zone that only wants views when they are there boots with
/// the host's files if they cannot be opened.
pub fn open_for_boot(zone: &str, src: &Source) -> Result<Vec<(&'static str, OwnedFd)>> {
    match open(zone, &src.dir) {
        Err(_) if !src.required => Ok(Vec::new()),
        r => r,
    }
}

/// Each view lxcfs at `dir` provides, as a detached read-only bind (close-on-exec),
/// with its path relative to the zone's root.
pub fn open(zone: &str, dir: &Path) -> Result<Vec<(&'static str, OwnedFd)>> {
    let mut out = Vec::new();
    for rel in VIEWS {
        let path = dir.join(rel);
        match warren_sys::userns::open_tree_readonly(&path) {
            Ok(fd) => out.push((rel, fd)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && rel != VIEWS[0] => {}
            Err(e) => {
                return Err(Error::Io {
                    context: format!(
                        "zone '{zone}': opening the /proc view {} (is lxcfs running? systemctl status lxcfs, or set proc-views = false)",
                        path.display()
                    ),
                    source: e,
                })
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
46 27 0:42 / /var/lib/lxcfs rw,nosuid,nodev,relatime shared:30 - fuse.lxcfs lxcfs rw,user_id=0,group_id=0,allow_other
47 22 0:43 / /tmp/a\\040b rw - tmpfs tmpfs rw
48 47 0:44 / /tmp/a\\040b rw - fuse.lxcfs lxcfs rw
garbage
1 2 3 / /var/lib/lxcfs
50 1 0:9 / /var/lib/lxcfs\\ rw -
";

    #[test]
    fn the_topmost_mount_at_the_directory_counts() {
        assert_eq!(
            fstype_at(INFO, Path::new("/var/lib/lxcfs")).as_deref(),
            Some(LXCFS_FSTYPE)
        );
        assert_eq!(
            fstype_at(INFO, Path::new("/tmp/a b")).as_deref(),
            Some(LXCFS_FSTYPE)
        );
        assert_eq!(fstype_at(INFO, Path::new("/var/lib")), None);
        assert_eq!(fstype_at(INFO, Path::new("/")).as_deref(), Some("ext4"));
        assert_eq!(lxcfs_mounts_at(INFO, Path::new("/tmp/a b")), 1);
        assert_eq!(lxcfs_mounts_at(INFO, Path::new("/var/lib/lxcfs")), 1);
        let twice = format!("{INFO}49 48 0:45 / /tmp/a\\040b rw - fuse.lxcfs lxcfs rw\n");
        assert_eq!(lxcfs_mounts_at(&twice, Path::new("/tmp/a b")), 2);
        assert_eq!(lxcfs_mounts_at(INFO, Path::new("/")), 0);
    }

    #[test]
    fn the_zone_key_beats_the_host_default() {
        let mut c = ZoneConfig::new("host");
        let mut d = Defaults::default();
        assert_eq!(want(&c, &d), Want::IfAvailable);
        d.proc_views = false;
        assert_eq!(want(&c, &d), Want::Off);
        c.proc_views = Some(true);
        assert_eq!(want(&c, &d), Want::Required);
        c.proc_views = Some(false);
        d.proc_views = true;
        assert_eq!(want(&c, &d), Want::Off);
    }

    #[test]
    fn a_required_view_without_lxcfs_names_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("self")).unwrap();
        std::fs::write(tmp.path().join("self/mountinfo"), INFO).unwrap();
        let d = Defaults {
            lxcfs_dir: PathBuf::from("/nowhere"),
            ..Defaults::default()
        };
        let mut c = ZoneConfig::new("host");
        assert_eq!(for_boot("z", &c, &d, tmp.path()).unwrap(), None);
        let gone = Source {
            dir: PathBuf::from("/nowhere"),
            required: false,
        };
        assert!(open_for_boot("z", &gone).unwrap().is_empty());
        let e = open_for_boot(
            "z",
            &Source {
                required: true,
                ..gone
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("zone 'z'") && e.contains("/nowhere/proc/meminfo"),
            "{e}"
        );
        c.proc_views = Some(true);
        let e = for_boot("z", &c, &d, tmp.path()).unwrap_err().to_string();
        assert!(
            e.contains("zone 'z'")
                && e.contains("not mounted at /nowhere")
                && e.contains("proc-views = false"),
            "{e}"
        );
    }
}
