//! Finding the cgroup hierarchies and warren's own place in them, from
//! `<proc>/self/mountinfo` and `<proc>/self/cgroup`.

use std::path::{Path, PathBuf};

use super::{v1::V1Driver, v2::V2Driver, CgroupDriver, CgroupError, CgroupVersion};

/// A cgroup filesystem mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    pub mountpoint: PathBuf,
    /// The mount's root inside the hierarchy (not "/" inside a cgroup namespace's view).
    pub root: String,
    /// v1: the controllers of this hierarchy (e.g. ["cpu", "cpuacct"]); v2: empty.
    pub controllers: Vec<String>,
    pub version: CgroupVersion,
}

/// Parse mountinfo text into its cgroup mounts (hierarchies with controllers; named
/// v1 hierarchies such as `name=systemd` left out).
pub fn parse_mountinfo(text: &str) -> Vec<CgroupMount> {
    parse(text, false)
}

/// [`parse_mountinfo`] with the named v1 hierarchies too, each with its `name=…`
/// option among its controllers (as /proc/<pid>/cgroup lists it).
pub fn parse_mountinfo_named(text: &str) -> Vec<CgroupMount> {
    parse(text, true)
}

fn parse(text: &str, named: bool) -> Vec<CgroupMount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        if pre.len() < 5 || post.len() < 3 {
            continue;
        }
        let (root, mountpoint) = (unescape(pre[3]), unescape(pre[4]));
        match post[0] {
            "cgroup2" => out.push(CgroupMount {
                mountpoint: PathBuf::from(mountpoint),
                root,
                controllers: Vec::new(),
                version: CgroupVersion::V2,
            }),
            "cgroup" => {
                let controllers: Vec<String> = post[2]
                    .split(',')
                    .filter(|o| {
                        !matches!(*o, "rw" | "ro" | "clone_children" | "noprefix" | "xattr")
                            && !o.starts_with("release_agent=")
                            && (named || !o.starts_with("name="))
                    })
                    .map(str::to_string)
                    .collect();
                if !controllers.is_empty() {
                    out.push(CgroupMount {
                        mountpoint: PathBuf::from(mountpoint),
                        root,
                        controllers,
                        version: CgroupVersion::V1,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if let (b'\\', Some(d)) = (b[i], octal) {
            out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse /proc/self/cgroup into (controllers, path); v2's line has no controllers.
pub fn parse_proc_cgroup(text: &str) -> Vec<(Vec<String>, String)> {
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let _id = parts.next()?;
            let ctrls = parts.next()?;
            let path = parts.next()?;
            let ctrls = ctrls
                .split(',')
                .filter(|c| !c.is_empty() && !c.starts_with("name="))
                .map(str::to_string)
                .collect();
            Some((ctrls, path.to_string()))
        })
        .collect()
}

/// What discovery found, for `warren info`.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    pub version: CgroupVersion,
    pub why: String,
}

/// Join a mount and warren's own cgroup path into the directory of warren's cgroup.
fn own_dir(mount: &CgroupMount, own_path: &str) -> PathBuf {
    let rel = own_path
        .strip_prefix(mount.root.as_str())
        .unwrap_or(own_path)
        .trim_start_matches('/');
    if rel.is_empty() {
        mount.mountpoint.clone()
    } else {
        mount.mountpoint.join(rel)
    }
}

/// warren's own cgroup directory in every hierarchy: (version, controllers, directory).
/// v2's entry has no controllers listed (read its `cgroup.controllers`).
pub fn own_dirs(
    mounts: &[CgroupMount],
    own: &[(Vec<String>, String)],
) -> Vec<(CgroupVersion, Vec<String>, PathBuf)> {
    mounts
        .iter()
        .map(|m| {
            let own_path = own
                .iter()
                .find(|(c, _)| match m.version {
                    CgroupVersion::V2 => c.is_empty(),
                    CgroupVersion::V1 => {
                        !c.is_empty() && m.controllers.iter().all(|x| c.contains(x))
                    }
                })
                .map(|(_, p)| p.as_str())
                .unwrap_or("/");
            (m.version, m.controllers.clone(), own_dir(m, own_path))
        })
        .collect()
}

/// Probe the host and build the driver for it. `group` is the per-state-root group name.
/// `WARREN_CGROUP=v1|v2` forces a version.
pub fn discover(
    proc_root: &Path,
    group: &str,
) -> Result<(Box<dyn CgroupDriver>, Hierarchy), CgroupError> {
    let mi_path = proc_root.join("self/mountinfo");
    let mountinfo =
        std::fs::read_to_string(&mi_path).map_err(super::io_err("reading", &mi_path))?;
    let cg_path = proc_root.join("self/cgroup");
    let own = std::fs::read_to_string(&cg_path).map_err(super::io_err("reading", &cg_path))?;
    let forced = std::env::var("WARREN_CGROUP").ok();
    choose(
        &parse_mountinfo(&mountinfo),
        &parse_proc_cgroup(&own),
        group,
        forced.as_deref(),
    )
    .map_err(|e| match e {
        CgroupError::NoHierarchy { .. } => CgroupError::NoHierarchy {
            mountinfo: mi_path.display().to_string(),
        },
        e => e,
    })
}

/// The pure part of [`discover`].
pub fn choose(
    mounts: &[CgroupMount],
    own: &[(Vec<String>, String)],
    group: &str,
    forced: Option<&str>,
) -> Result<(Box<dyn CgroupDriver>, Hierarchy), CgroupError> {
    let v1: Vec<&CgroupMount> = mounts
        .iter()
        .filter(|m| m.version == CgroupVersion::V1)
        .collect();
    let v2 = mounts.iter().find(|m| m.version == CgroupVersion::V2);
    let has_v1 = |c: &str| v1.iter().any(|m| m.controllers.iter().any(|x| x == c));
    let v1_usable = has_v1("memory") && has_v1("pids");

    let use_v2 = match forced {
        Some("v2") => true,
        Some("v1") => false,
        _ => !v1_usable,
    };
    if use_v2 {
        let Some(m) = v2 else {
            return Err(CgroupError::NoHierarchy {
                mountinfo: String::new(),
            });
        };
        let own_path = own
            .iter()
            .find(|(c, _)| c.is_empty())
            .map(|(_, p)| p.as_str())
            .unwrap_or("/");
        let why = if v1_usable {
            "forced by WARREN_CGROUP=v2".to_string()
        } else {
            format!("unified hierarchy at {}", m.mountpoint.display())
        };
        let driver = V2Driver::new(m.mountpoint.clone(), own_dir(m, own_path), group);
        return Ok((
            Box::new(driver),
            Hierarchy {
                version: CgroupVersion::V2,
                why,
            },
        ));
    }
    if !v1_usable {
        return Err(CgroupError::NoHierarchy {
            mountinfo: String::new(),
        });
    }
    let mut hierarchies = Vec::new();
    for m in v1 {
        let own_path = own
            .iter()
            .find(|(c, _)| !c.is_empty() && m.controllers.iter().all(|x| c.contains(x)))
            .map(|(_, p)| p.as_str())
            .unwrap_or("/");
        hierarchies.push((
            m.controllers.clone(),
            m.mountpoint.clone(),
            own_dir(m, own_path),
        ));
    }
    let why = match (forced, v2) {
        (Some("v1"), _) => "forced by WARREN_CGROUP=v1".to_string(),
        (_, Some(m)) => format!(
            "hybrid host: v1 controllers hold memory and pids; the v2 mount at {} is not used",
            m.mountpoint.display()
        ),
        _ => "legacy v1 hierarchy".to_string(),
    };
    Ok((
        Box::new(V1Driver::new(hierarchies, group)),
        Hierarchy {
            version: CgroupVersion::V1,
            why,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
35 24 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755
36 35 0:31 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw
37 35 0:32 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd
38 35 0:33 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
39 35 0:34 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
40 35 0:35 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
41 35 0:36 / /sys/fs/cgroup/my\\040dir rw - cgroup cgroup rw,cpuset
";
    const HYBRID_OWN: &str = "\
5:cpuset:/
4:pids:/user.slice
3:memory:/process_api/abc
2:cpu,cpuacct:/
1:name=systemd:/init.scope
0::/init.scope
";

    #[test]
    fn parses_hybrid_mounts() {
        let m = parse_mountinfo(HYBRID);
        assert_eq!(m.len(), 5);
        assert_eq!(m[0].version, CgroupVersion::V2);
        assert_eq!(m[1].controllers, vec!["cpu", "cpuacct"]);
        assert_eq!(m[4].mountpoint, PathBuf::from("/sys/fs/cgroup/my dir"));
    }

    #[test]
    fn hybrid_host_uses_v1_beneath_own_cgroups() {
        let (d, h) = choose(
            &parse_mountinfo(HYBRID),
            &parse_proc_cgroup(HYBRID_OWN),
            "warren-x",
            None,
        )
        .unwrap();
        assert_eq!(h.version, CgroupVersion::V1);
        assert!(h.why.contains("hybrid"));
        let parents = d.parents();
        assert!(parents.contains(&(
            "memory".into(),
            PathBuf::from("/sys/fs/cgroup/memory/process_api/abc/warren-x")
        )));
        assert!(parents.contains(&(
            "pids".into(),
            PathBuf::from("/sys/fs/cgroup/pids/user.slice/warren-x")
        )));
        assert!(parents.contains(&(
            "cpu,cpuacct".into(),
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/warren-x")
        )));
    }

    #[test]
    fn own_dirs_per_hierarchy() {
        let dirs = own_dirs(&parse_mountinfo(HYBRID), &parse_proc_cgroup(HYBRID_OWN));
        assert!(dirs.contains(&(
            CgroupVersion::V2,
            vec![],
            PathBuf::from("/sys/fs/cgroup/unified/init.scope")
        )));
        assert!(dirs.contains(&(
            CgroupVersion::V1,
            vec!["pids".to_string()],
            PathBuf::from("/sys/fs/cgroup/pids/user.slice")
        )));
    }

    #[test]
    fn pure_v2_host() {
        let mi = "30 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let (d, h) = choose(
            &parse_mountinfo(mi),
            &parse_proc_cgroup("0::/user.slice/session-1.scope\n"),
            "warren",
            None,
        )
        .unwrap();
        assert_eq!(h.version, CgroupVersion::V2);
        assert_eq!(
            d.parents()[0].1,
            PathBuf::from("/sys/fs/cgroup/user.slice/session-1.scope/warren")
        );
    }

    #[test]
    fn cgroup_namespace_root_is_stripped() {
        let mi = "30 24 0:26 /outer /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let (d, _) = choose(
            &parse_mountinfo(mi),
            &parse_proc_cgroup("0::/outer/inner\n"),
            "warren",
            None,
        )
        .unwrap();
        assert_eq!(
            d.parents()[0].1,
            PathBuf::from("/sys/fs/cgroup/inner/warren")
        );
    }

    #[test]
    fn nothing_usable() {
        let mi = "37 35 0:32 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n";
        assert!(matches!(
            choose(&parse_mountinfo(mi), &[], "warren", None),
            Err(CgroupError::NoHierarchy { .. })
        ));
    }
}
