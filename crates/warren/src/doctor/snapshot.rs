//! Reading the host's limits into plain data ([`LimitSnapshot`]), from an injected /proc
//! root (tests point it at a fixture tree), plus statvfs of the state root. Nothing here
//! decides anything; a value that cannot be read is kept as the reason why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cgroups::{own_dirs, parse_mountinfo, parse_proc_cgroup, CgroupVersion};

/// A number read from the host, or why it could not be read.
pub type Reading = Result<u64, String>;

/// The sysctls the doctor checks. Those in [`OPTIONAL_SYSCTLS`] exist only when their
/// module is loaded and are left out of the snapshot when absent.
pub const SYSCTLS: &[&str] = &[
    "kernel.pid_max",
    "kernel.threads-max",
    "vm.max_map_count",
    "fs.file-max",
    "fs.nr_open",
    "fs.inotify.max_user_instances",
    "fs.inotify.max_user_watches",
    "user.max_user_namespaces",
    "user.max_mnt_namespaces",
    "user.max_pid_namespaces",
    "user.max_net_namespaces",
    "user.max_ipc_namespaces",
    "user.max_uts_namespaces",
    "user.max_cgroup_namespaces",
    "fs.mount-max",
    "net.ipv4.neigh.default.gc_thresh1",
    "net.ipv4.neigh.default.gc_thresh2",
    "net.ipv4.neigh.default.gc_thresh3",
    "net.ipv6.neigh.default.gc_thresh1",
    "net.ipv6.neigh.default.gc_thresh2",
    "net.ipv6.neigh.default.gc_thresh3",
    "net.netfilter.nf_conntrack_max",
    "net.netfilter.nf_conntrack_count",
    "net.core.somaxconn",
    super::serving::PORT_RANGE,
    "net.ipv4.tcp_max_tw_buckets",
];

/// Present only while nf_conntrack is loaded.
pub const OPTIONAL_SYSCTLS: &[&str] = &[
    "net.netfilter.nf_conntrack_max",
    "net.netfilter.nf_conntrack_count",
];

/// warren's own cgroup limits, per cgroup version in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupLimits {
    /// v1: warren's own cgroup in the pids hierarchy. `None` = no limit ("max", or the
    /// root cgroup, which has no pids.max).
    V1 {
        pids_dir: PathBuf,
        pids_max: Result<Option<u64>, String>,
        pids_current: Reading,
    },
    /// v2: warren's own cgroup. `None` = "max".
    V2 {
        dir: PathBuf,
        max_descendants: Result<Option<u64>, String>,
        max_depth: Result<Option<u64>, String>,
        nr_descendants: Reading,
    },
    Unknown(String),
}

/// Everything [`super::assess()`] looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSnapshot {
    /// sysctl key → value. Optional keys that do not exist are absent.
    pub sysctls: BTreeMap<String, Reading>,
    /// Tasks on the host now (4th field of /proc/loadavg, "running/total").
    pub tasks: Reading,
    /// File handles allocated now (first field of fs.file-nr).
    pub open_files: Reading,
    /// Lines of the host's mount table (this process's mount namespace).
    pub host_mounts: Reading,
    pub mem_available: Reading,
    pub swap_free: Reading,
    /// (soft, hard) of this process; `RLIM_INFINITY` is u64::MAX.
    pub nofile: Result<(u64, u64), String>,
    pub nproc: Result<(u64, u64), String>,
    pub euid: Reading,
    pub cap_sys_resource: Result<bool, String>,
    /// The state root (or its nearest existing ancestor) and its free bytes.
    pub disk: Result<(PathBuf, u64), String>,
    pub cgroup: CgroupLimits,
    /// Memory cgroups on the host now (/proc/cgroups), dying ones included.
    pub memory_cgroups: Reading,
    /// Host settings that weaken isolation between zones and the host.
    pub isolation: IsolationSnapshot,
}

/// Host settings that weaken isolation (`None`: the setting does not exist here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationSnapshot {
    /// `dev.tty.legacy_tiocsti` (Linux 6.2+; without it TIOCSTI always works).
    pub legacy_tiocsti: Option<Reading>,
    /// `kernel.unprivileged_userns_clone` (Debian and Ubuntu kernels only).
    pub unprivileged_userns_clone: Option<Reading>,
    /// The bridges of this state root's lease records, with their IPv6 settings, or why
    /// the records could not be read.
    pub bridges: Result<Vec<BridgeV6>, String>,
    /// `net.ipv4.ip_forward`: with it, the host routes between zones through the
    /// gateway, around `net-isolated` (which filters bridged traffic).
    pub ip_forward: Option<Reading>,
}

/// A warren bridge's IPv6 settings (`None`: no such file, e.g. the bridge is gone or
/// the host has no IPv6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeV6 {
    pub name: String,
    pub accept_ra: Option<Reading>,
    pub autoconf: Option<Reading>,
    pub forwarding: Option<Reading>,
}

/// Read the isolation settings; bridges come from `<state_root>/net/*.json`.
pub fn read_isolation(proc_root: &Path, state_root: &Path) -> IsolationSnapshot {
    let layout = crate::layout::Layout::new(state_root);
    let bridges = crate::net::ipam::load_all(&layout)
        .map_err(|e| e.to_string())
        .map(|records| {
            records
                .iter()
                .map(|r| {
                    let knob = |k: &str| {
                        read_sysctl(proc_root, &format!("net.ipv6.conf.{}.{k}", r.bridge))
                    };
                    BridgeV6 {
                        name: r.bridge.clone(),
                        accept_ra: knob("accept_ra"),
                        autoconf: knob("autoconf"),
                        forwarding: knob("forwarding"),
                    }
                })
                .collect()
        });
    IsolationSnapshot {
        legacy_tiocsti: read_sysctl(proc_root, "dev.tty.legacy_tiocsti"),
        unprivileged_userns_clone: read_sysctl(proc_root, "kernel.unprivileged_userns_clone"),
        bridges,
        ip_forward: read_sysctl(proc_root, "net.ipv4.ip_forward"),
    }
}

impl LimitSnapshot {
    /// The reading of `key`; `None` if the key is optional and absent.
    pub fn sysctl(&self, key: &str) -> Option<&Reading> {
        self.sysctls.get(key)
    }
}

/// The /proc/sys path of a sysctl key. A key naming a network interface
/// (`net.ipv6.conf.<dev>.<knob>`) keeps the dots of the interface name.
pub fn sysctl_path(proc_root: &Path, key: &str) -> PathBuf {
    let sys = proc_root.join("sys");
    if let Some(rest) = key.strip_prefix("net.ipv6.conf.") {
        if let Some((dev, knob)) = rest.rsplit_once('.') {
            return sys.join("net/ipv6/conf").join(dev).join(knob);
        }
    }
    sys.join(key.replace('.', "/"))
}

fn read_text(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

fn parse_u64(path: &Path, text: &str) -> Reading {
    let t = text.split_whitespace().next().unwrap_or("");
    t.parse()
        .map_err(|_| format!("{}: {t:?} is not a number", path.display()))
}

/// Read one sysctl; `None` if the file does not exist.
pub fn read_sysctl(proc_root: &Path, key: &str) -> Option<Reading> {
    let path = sysctl_path(proc_root, key);
    match std::fs::read_to_string(&path) {
        Ok(t) => Some(
            super::serving::parse_sysctl(key, &t)
                .ok_or_else(|| format!("{}: {:?} is not a number", path.display(), t.trim())),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(Err(format!("reading {}: {e}", path.display()))),
    }
}

/// Total tasks from /proc/loadavg ("0.23 0.49 0.32 1/92 25775" → 92).
pub fn parse_loadavg_tasks(text: &str) -> Option<u64> {
    text.split_whitespace()
        .nth(3)?
        .split('/')
        .nth(1)?
        .parse()
        .ok()
}

/// Tasks on the host now.
pub fn read_tasks(proc_root: &Path) -> Reading {
    let path = proc_root.join("loadavg");
    let text = read_text(&path)?;
    parse_loadavg_tasks(&text)
        .ok_or_else(|| format!("{}: no task count in {text:?}", path.display()))
}

/// (soft, hard) of a "Max ..." line of /proc/<pid>/limits; "unlimited" is u64::MAX.
pub fn parse_limits(text: &str, name: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let mut f = line[name.len()..].split_whitespace();
    let num = |s: Option<&str>| match s? {
        "unlimited" => Some(u64::MAX),
        n => n.parse().ok(),
    };
    Some((num(f.next())?, num(f.next())?))
}

/// (effective uid, whether CapEff holds CAP_SYS_RESOURCE) from /proc/<pid>/status.
pub fn parse_status(text: &str) -> (Option<u64>, Option<bool>) {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let euid = field("Uid:").and_then(|l| l.split_whitespace().nth(1)?.parse().ok());
    const CAP_SYS_RESOURCE: u32 = 24;
    let cap = field("CapEff:")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .map(|bits| bits & (1 << CAP_SYS_RESOURCE) != 0);
    (euid, cap)
}

/// num_cgroups of `controller` in /proc/cgroups.
pub fn parse_proc_cgroups(text: &str, controller: &str) -> Option<u64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.first() == Some(&controller)).then(|| f.get(2)?.parse().ok())?
    })
}

/// A cgroup limit file: `None` for "max" or a missing file (the root cgroup has none).
fn read_cgroup_max(dir: &Path, file: &str) -> Result<Option<u64>, String> {
    let path = dir.join(file);
    match std::fs::read_to_string(&path) {
        Ok(t) if t.trim() == "max" => Ok(None),
        Ok(t) => parse_u64(&path, &t).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

/// warren's own cgroup limits for the cgroup version warren uses.
pub fn read_cgroup(proc_root: &Path, version: Result<CgroupVersion, String>) -> CgroupLimits {
    let version = match version {
        Ok(v) => v,
        Err(e) => return CgroupLimits::Unknown(e),
    };
    let mountinfo = match read_text(&proc_root.join("self/mountinfo")) {
        Ok(t) => t,
        Err(e) => return CgroupLimits::Unknown(e),
    };
    let own = match read_text(&proc_root.join("self/cgroup")) {
        Ok(t) => t,
        Err(e) => return CgroupLimits::Unknown(e),
    };
    let dirs = own_dirs(&parse_mountinfo(&mountinfo), &parse_proc_cgroup(&own));
    match version {
        CgroupVersion::V1 => {
            let Some((_, _, dir)) = dirs
                .into_iter()
                .find(|(v, c, _)| *v == CgroupVersion::V1 && c.iter().any(|x| x == "pids"))
            else {
                return CgroupLimits::Unknown("no v1 pids hierarchy is mounted".into());
            };
            let current = dir.join("pids.current");
            let pids_current = if current.exists() {
                read_text(&current).and_then(|t| parse_u64(&current, &t))
            } else {
                read_tasks(proc_root)
            };
            CgroupLimits::V1 {
                pids_max: read_cgroup_max(&dir, "pids.max"),
                pids_current,
                pids_dir: dir,
            }
        }
        CgroupVersion::V2 => {
            let Some((_, _, dir)) = dirs.into_iter().find(|(v, _, _)| *v == CgroupVersion::V2)
            else {
                return CgroupLimits::Unknown("no cgroup2 hierarchy is mounted".into());
            };
            let dir = crate::cgroups::delegate::base_of(&dir);
            let stat = dir.join("cgroup.stat");
            let nr_descendants = read_text(&stat).and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("nr_descendants "))
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or_else(|| format!("{}: no nr_descendants", stat.display()))
            });
            CgroupLimits::V2 {
                max_descendants: read_cgroup_max(&dir, "cgroup.max.descendants"),
                max_depth: read_cgroup_max(&dir, "cgroup.max.depth"),
                nr_descendants,
                dir,
            }
        }
    }
}

/// The nearest existing ancestor of `path` (the state root may not exist yet).
fn existing_ancestor(path: &Path) -> &Path {
    path.ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"))
}

/// Read the host. `cgroup_version` comes from cgroup discovery (or why it failed).
pub fn read(
    proc_root: &Path,
    state_root: &Path,
    cgroup_version: Result<CgroupVersion, String>,
) -> LimitSnapshot {
    let mut sysctls = BTreeMap::new();
    for key in SYSCTLS {
        match read_sysctl(proc_root, key) {
            Some(r) => {
                sysctls.insert(key.to_string(), r);
            }
            None if OPTIONAL_SYSCTLS.contains(key) => {}
            None => {
                let path = sysctl_path(proc_root, key);
                sysctls.insert(
                    key.to_string(),
                    Err(format!("{} does not exist in this kernel", path.display())),
                );
            }
        }
    }
    let file_nr = proc_root.join("sys/fs/file-nr");
    let open_files = read_text(&file_nr).and_then(|t| parse_u64(&file_nr, &t));
    let mounts = proc_root.join("self/mountinfo");
    let host_mounts = read_text(&mounts).map(|t| t.lines().count() as u64);
    let meminfo_path = proc_root.join("meminfo");
    let meminfo = read_text(&meminfo_path).map(|t| crate::stats::parse_meminfo(&t));
    let mem = |key: &str| -> Reading {
        let m = meminfo.as_ref().map_err(Clone::clone)?;
        m.get(key)
            .copied()
            .ok_or_else(|| format!("{} has no {key}", meminfo_path.display()))
    };
    let limits_path = proc_root.join("self/limits");
    let limits = read_text(&limits_path);
    let limit = |name: &str| {
        let text = limits.as_ref().map_err(Clone::clone)?;
        parse_limits(text, name).ok_or_else(|| format!("{}: no {name:?}", limits_path.display()))
    };
    let status_path = proc_root.join("self/status");
    let status = read_text(&status_path).map(|t| parse_status(&t));
    let euid = status
        .clone()
        .and_then(|(u, _)| u.ok_or_else(|| format!("{}: no Uid line", status_path.display())));
    let cap_sys_resource = status
        .and_then(|(_, c)| c.ok_or_else(|| format!("{}: no CapEff line", status_path.display())));
    let at = existing_ancestor(state_root).to_path_buf();
    let disk = warren_sys::fs::statvfs(&at)
        .map(|s| (at.clone(), s.avail_bytes))
        .map_err(|e| format!("statvfs {}: {e}", at.display()));
    let cgroups_path = proc_root.join("cgroups");
    let memory_cgroups = read_text(&cgroups_path).and_then(|t| {
        parse_proc_cgroups(&t, "memory")
            .ok_or_else(|| format!("{}: no memory controller", cgroups_path.display()))
    });
    LimitSnapshot {
        sysctls,
        tasks: read_tasks(proc_root),
        open_files,
        host_mounts,
        mem_available: mem("MemAvailable"),
        swap_free: mem("SwapFree"),
        nofile: limit("Max open files"),
        nproc: limit("Max processes"),
        euid,
        cap_sys_resource,
        disk,
        cgroup: read_cgroup(proc_root, cgroup_version),
        memory_cgroups,
        isolation: read_isolation(proc_root, state_root),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        assert_eq!(parse_loadavg_tasks("0.23 0.49 0.32 1/92 25775\n"), Some(92));
        assert_eq!(parse_loadavg_tasks("garbage"), None);
        let limits = "\
Limit                     Soft Limit           Hard Limit           Units
Max processes             96362                96362                processes
Max open files            1024                 20000                files
Max locked memory         unlimited            unlimited            bytes
";
        assert_eq!(parse_limits(limits, "Max open files"), Some((1024, 20000)));
        assert_eq!(parse_limits(limits, "Max processes"), Some((96362, 96362)));
        assert_eq!(
            parse_limits(limits, "Max locked memory"),
            Some((u64::MAX, u64::MAX))
        );
        let status = "Name:\twarren\nUid:\t1000\t0\t0\t0\nCapEff:\t000001ffffffffff\n";
        assert_eq!(parse_status(status), (Some(0), Some(true)));
        let status = "Uid:\t5\t5\t5\t5\nCapEff:\t0000000000000000\n";
        assert_eq!(parse_status(status), (Some(5), Some(false)));
        let cg =
            "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\nmemory\t4\t212\t1\n";
        assert_eq!(parse_proc_cgroups(cg, "memory"), Some(212));
        assert_eq!(parse_proc_cgroups(cg, "pids"), None);
    }

    /// A fixture /proc tree: what a snapshot reads, and nothing it does not.
    fn fixture(dir: &Path) {
        let w = |rel: &str, text: &str| {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w("sys/kernel/pid_max", "32768\n");
        w("sys/kernel/threads-max", "192724\n");
        w("sys/fs/inotify/max_user_instances", "128\n");
        w("sys/fs/file-nr", "1888\t0\t2466097\n");
        w("sys/fs/mount-max", "not-a-number\n");
        w("loadavg", "0.00 0.00 0.00 1/92 100\n");
        w("meminfo", "MemAvailable:   1000 kB\nSwapFree:   0 kB\n");
        w(
            "self/limits",
            "Max open files            1024                 20000                files\n",
        );
        w(
            "self/status",
            "Uid:\t0\t0\t0\t0\nCapEff:\t000001fffeffffff\n",
        );
        let cg = dir.join("cg/pids");
        w(
            "self/mountinfo",
            &format!("40 35 0:35 / {} rw - cgroup cgroup rw,pids\n", cg.display()),
        );
        w("self/cgroup", "8:pids:/box\n0::/\n");
        w("cg/pids/box/pids.max", "300\n");
        w("cg/pids/box/pids.current", "12\n");
        w("cgroups", "memory\t4\t7\t1\n");
        w("sys/dev/tty/legacy_tiocsti", "1\n");
        w("sys/net/ipv6/conf/br.0/accept_ra", "1\n");
        w("sys/net/ipv6/conf/br.0/autoconf", "0\n");
    }

    #[test]
    fn reads_a_fixture_proc_tree() {
        let d = tempfile::tempdir().unwrap();
        fixture(d.path());
        let s = read(
            d.path(),
            &d.path().join("no/such/root"),
            Ok(CgroupVersion::V1),
        );
        assert_eq!(s.sysctl("kernel.pid_max"), Some(&Ok(32768)));
        assert_eq!(s.sysctl("fs.inotify.max_user_instances"), Some(&Ok(128)));
        // Unreadable and missing values are kept with the reason, never dropped.
        let bad = s.sysctl("fs.mount-max").unwrap().as_ref().unwrap_err();
        assert!(bad.contains("is not a number"), "{bad}");
        let missing = s.sysctl("vm.max_map_count").unwrap().as_ref().unwrap_err();
        assert!(missing.contains("does not exist"), "{missing}");
        // Optional (module) sysctls are absent when not loaded.
        assert_eq!(s.sysctl("net.netfilter.nf_conntrack_max"), None);
        assert_eq!(s.tasks, Ok(92));
        assert_eq!(s.open_files, Ok(1888));
        assert_eq!(s.host_mounts, Ok(1));
        assert_eq!(s.mem_available, Ok(1_024_000));
        assert_eq!(s.swap_free, Ok(0));
        assert_eq!(s.nofile, Ok((1024, 20000)));
        assert!(s.nproc.is_err());
        assert_eq!(s.euid, Ok(0));
        assert_eq!(s.cap_sys_resource, Ok(false));
        assert_eq!(s.memory_cgroups, Ok(7));
        assert_eq!(s.disk.as_ref().unwrap().0, d.path());
        assert_eq!(
            s.cgroup,
            CgroupLimits::V1 {
                pids_dir: d.path().join("cg/pids/box"),
                pids_max: Ok(Some(300)),
                pids_current: Ok(12),
            }
        );
        // The root pids cgroup has no pids.max: no limit; its tasks are the host's.
        std::fs::write(d.path().join("self/cgroup"), "8:pids:/\n").unwrap();
        assert_eq!(
            read_cgroup(d.path(), Ok(CgroupVersion::V1)),
            CgroupLimits::V1 {
                pids_dir: d.path().join("cg/pids"),
                pids_max: Ok(None),
                pids_current: Ok(92),
            }
        );
        assert!(matches!(
            read_cgroup(d.path(), Err("no hierarchy".into())),
            CgroupLimits::Unknown(_)
        ));
        // Isolation settings: present, absent, and a bridge named with a dot.
        assert_eq!(s.isolation.legacy_tiocsti, Some(Ok(1)));
        assert_eq!(s.isolation.unprivileged_userns_clone, None);
        assert_eq!(s.isolation.bridges, Ok(Vec::new()));
        assert_eq!(s.isolation.ip_forward, None);
        let root = d.path().join("state");
        std::fs::create_dir_all(root.join("net")).unwrap();
        let rec =
            crate::net::ipam::BridgeRecord::new("br.0", "10.9.0.0/24".parse().unwrap(), "boot");
        std::fs::write(
            root.join("net/br.0.json"),
            serde_json::to_string(&rec).unwrap(),
        )
        .unwrap();
        let iso = read_isolation(d.path(), &root);
        assert_eq!(
            iso.bridges,
            Ok(vec![BridgeV6 {
                name: "br.0".into(),
                accept_ra: Some(Ok(1)),
                autoconf: Some(Ok(0)),
                forwarding: None,
            }])
        );
        let a = crate::doctor::admit::read(d.path(), Some(CgroupVersion::V1), false, &[]);
        assert_eq!(
            (a.pid_max, a.threads_max, a.tasks),
            (Some(32768), Some(192724), Some(92))
        );
    }
}
