//! The crun columns of `warren bench density --compare crun,crun-nocgroups`: the same
//! steps with OCI containers on a busybox root (the bench's busybox template, shared
//! read-only), no network beyond crun's default namespaces, `/bin/sleep` as the
//! container's process.
//!
//! `crun` runs as podman and containerd run it: `--cgroup-manager=cgroupfs`, every
//! container in its own cgroup of every hierarchy (on v1 crun joins all of them: cpu,
//! cpuacct, cpuset, memory, pids, blkio, devices, freezer, name=systemd here). Those
//! cgroups must lie beneath the bench's own, and crun places a container at
//! `<hierarchy's mount>/<cgroupsPath>` (its default path: `/<id>`). So crun runs in a
//! private mount namespace (a helper `unshare -m` process holds it; crun is started
//! through `nsenter`; the host's mounts are untouched) in which each hierarchy's
//! mount point is covered by a bind of this run's own directory, `wbench-crun-<pid>`,
//! made beneath the bench's own cgroup in that hierarchy (on v2 beneath its
//! delegated base). crun cannot reach any other cgroup there; the bench still checks
//! every container's /proc/<pid>/cgroup, and removes the directories when the step
//! ends.
//!
//! `crun-nocgroups` is the cheaper variant earlier sessions compared with:
//! `--cgroup-manager=disabled`, no cgroup at all (no creation, no migration, no
//! memory cgroup), which no container engine deploys.
//!
//! crun 1.8 refuses hybrid cgroup hosts whose unified hierarchy holds a controller
//! ("cgroups in hybrid mode not supported, drop all controllers from cgroupv2"), with
//! every cgroup manager; on such a host the helper's namespace also has
//! /sys/fs/cgroup/unified unmounted. nsenter's own cost is measured and subtracted
//! from every timed crun command.
//!
//! The steps are the runc-CLI stepper's ([`super::runc_cli`]) with crun as the
//! binary; every container is deleted when the step ends, also on failure, then the
//! helper is killed and the run's cgroup directories removed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::cgroups::{own_hierarchies, Hier};
use super::runc_cli::{CgroupJail, Launcher, RuncCli, Runtime};
use super::system::{Failure, Needs, System};
use crate::measure::{ms, summarize, Progress};

/// The helper's script: unmount the unified hierarchy on a hybrid host (`$1`), bind
/// each source over its mount point (the pairs after it), say "ready", hold the
/// namespace.
const HELPER: &str = r#"set -e
if [ "$1" = hybrid ]; then umount /sys/fs/cgroup/unified; fi
shift
while [ $# -gt 1 ]; do mount --bind "$1" "$2"; shift 2; done
echo ready
exec sleep 1000000"#;

/// Whether the host is a hybrid one (a cgroup2 mount at /sys/fs/cgroup/unified).
fn hybrid(mountinfo: &str) -> bool {
    mountinfo
        .lines()
        .any(|l| l.split(' ').nth(4) == Some("/sys/fs/cgroup/unified"))
}

/// The hierarchies crun will use, with `own` moved to where this run may make its
/// directory: the unified one is left out on a hybrid host (the helper unmounts it),
/// and on v2 the base is the delegated one, not warren's supervisor leaf (which
/// holds processes, so no controller reaches a cgroup beneath it).
fn crun_hierarchies(hiers: Vec<Hier>, hybrid: bool) -> Vec<Hier> {
    hiers
        .into_iter()
        .filter(|h| !(hybrid && h.key.is_empty()))
        .map(|mut h| {
            if h.key.is_empty() {
                let base = crate::cgroups::delegate::base_of(&h.own);
                if base != h.own {
                    h.own = base;
                    let p = h.own_path.trim_end_matches('/');
                    h.own_path = match p.rsplit_once('/') {
                        Some(("", _)) | None => "/".into(),
                        Some((parent, _)) => parent.into(),
                    };
                }
            }
            h
        })
        .collect()
}

/// Make this run's directory beneath `h.own`: cpuset's cpus and mems copied from its
/// parent (a v1 cpuset cgroup starts empty, and crun fills a new container's from the
/// parent it sees: this directory); on v2 the memory and pids controllers must reach
/// it (the base's `cgroup.subtree_control`, set up by the warren column's zones).
fn make_dir(h: &Hier, dir: &str) -> Result<PathBuf, Failure> {
    let d = h.own.join(dir);
    std::fs::create_dir(&d).map_err(Failure::io(&d))?;
    let prepared = (|| {
        if h.key.split(',').any(|c| c == "cpuset") {
            for f in ["cpuset.cpus", "cpuset.mems"] {
                let v = std::fs::read_to_string(h.own.join(f)).map_err(Failure::io(&h.own))?;
                std::fs::write(d.join(f), v.trim()).map_err(Failure::io(&d))?;
            }
        }
        if h.key.is_empty() {
            let have = std::fs::read_to_string(d.join("cgroup.controllers")).unwrap_or_default();
            for c in ["memory", "pids"] {
                if !have.split_whitespace().any(|x| x == c) {
                    return Err(Failure::Failed(format!(
                        "crun with cgroups: the {c} controller does not reach {} ({} lacks it in cgroup.subtree_control); run warren's own column first, or compare with crun-nocgroups",
                        d.display(),
                        h.own.display()
                    )));
                }
            }
        }
        Ok(())
    })();
    match prepared {
        Ok(()) => Ok(d),
        Err(e) => {
            let _ = std::fs::remove_dir(&d);
            Err(e)
        }
    }
}

/// The launcher for crun on this host: with `cgroups`, through nsenter into a
/// helper's mount namespace where this run's cgroup directories cover the
/// hierarchies; without, directly or (hybrid host) through such a helper without
/// /sys/fs/cgroup/unified. nsenter's median cost is measured. Also returns whether
/// the host is a hybrid one.
fn launcher(proc_root: &Path, cgroups: bool) -> Result<(Launcher, bool), Failure> {
    let mountinfo = std::fs::read_to_string(proc_root.join("self/mountinfo")).unwrap_or_default();
    let hybrid = hybrid(&mountinfo);
    if !hybrid && !cgroups {
        return Ok((Launcher::direct(), hybrid));
    }
    let mut l = Launcher::direct();
    let mut binds = Vec::new();
    if cgroups {
        let hiers = crun_hierarchies(own_hierarchies(proc_root)?, hybrid);
        let dir = format!("wbench-crun-{}", std::process::id());
        let mut jail = CgroupJail {
            hiers: Vec::new(),
            dir: dir.clone(),
            proc_root: proc_root.to_path_buf(),
        };
        for h in hiers {
            // The ones made so far are removed by the jail's drop if this fails; a
            // failed one by `make_dir` itself.
            let d = make_dir(&h, &dir)?;
            binds.push((d, h.mount.clone()));
            jail.hiers.push(h);
        }
        l.cgroups = Some(jail);
    }
    let mut helper = Command::new("unshare");
    helper
        .args(["-m", "--propagation", "private", "sh", "-c", HELPER, "sh"])
        .arg(if hybrid { "hybrid" } else { "-" });
    for (src, dst) in &binds {
        helper.arg(src).arg(dst);
    }
    let mut child = helper
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(Failure::spawn("unshare (util-linux)"))?;
    let mut line = String::new();
    let out = child.stdout.take().expect("piped");
    // From here the helper is killed on every path (the launcher's drop).
    l.helper = Some(child);
    let _ = BufReader::new(out).read_line(&mut line);
    if line.trim() != "ready" {
        return Err(format!(
            "could not prepare crun's mount namespace (unmount /sys/fs/cgroup/unified: {hybrid}, bind {} cgroup directories over their hierarchies)",
            binds.len()
        )
        .into());
    }
    let mut t = Vec::new();
    for _ in 0..10 {
        let s = Instant::now();
        l.command(Path::new("true"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .map_err(Failure::spawn("nsenter"))?;
        t.push(ms(s.elapsed()));
    }
    l.overhead_ms = summarize(&t).median;
    Ok((l, hybrid))
}

/// What crun needs on the host.
pub const NEEDS: Needs = Needs {
    command: "crun",
    package: "crun",
};

/// crun with cgroups (as container engines run it) as a compared system, under
/// `scratch`, from `rootfs`.
pub fn open(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    _: &mut dyn Progress,
) -> Result<Box<dyn System>, Failure> {
    open_as(scratch, rootfs, proc_root, true)
}

/// crun without cgroups (`--cgroup-manager=disabled`) as a compared system.
pub fn open_nocgroups(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    _: &mut dyn Progress,
) -> Result<Box<dyn System>, Failure> {
    open_as(scratch, rootfs, proc_root, false)
}

fn open_as(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    cgroups: bool,
) -> Result<Box<dyn System>, Failure> {
    let (launcher, hybrid) = launcher(proc_root, cgroups)?;
    let how = match (&launcher.helper, &launcher.cgroups) {
        (Some(_), Some(j)) => format!(
            "in a private mount namespace whose cgroup hierarchies are this run's {} directories beneath the bench's own{} (via nsenter, {:.2} ms per call, subtracted)",
            j.dir,
            if hybrid {
                ", without /sys/fs/cgroup/unified (crun 1.8 refuses this hybrid host otherwise)"
            } else {
                ""
            },
            launcher.overhead_ms
        ),
        (Some(_), None) => format!(
            "crun 1.8 refuses this hybrid cgroup host, so it ran in a private mount namespace without /sys/fs/cgroup/unified (via nsenter, {:.2} ms per call, subtracted)",
            launcher.overhead_ms
        ),
        (None, _) => "crun run directly".into(),
    };
    let (name, manager, id_letter, cg) = if cgroups {
        (
            "crun",
            "--cgroup-manager=cgroupfs",
            'c',
            "a cgroup per container in every hierarchy, as podman and containerd run it",
        )
    } else {
        (
            "crun-nocgroups",
            "--cgroup-manager=disabled",
            'n',
            "no cgroups: cheaper than crun as container engines run it",
        )
    };
    let rt = Runtime {
        name,
        program: PathBuf::from("crun"),
        before_root: Vec::new(),
        after_root: vec![manager.into()],
        spec: vec!["spec".into()],
        id_letter,
        launcher,
        note: format!(
            "busybox root shared read-only, /bin/sleep, default namespaces, {manager} ({cg}); {how}; 'clone' is writing the bundle, 'boot' create+start, 'halt' kill"
        ),
    };
    Ok(Box::new(RuncCli::open(rt, scratch, rootfs)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hier(key: &str, own: &str, own_path: &str, mount: &str) -> Hier {
        Hier {
            key: key.into(),
            own: own.into(),
            own_path: own_path.into(),
            mount: mount.into(),
            root: "/".into(),
        }
    }

    #[test]
    fn crun_leaves_out_a_hybrid_hosts_unified_hierarchy_and_uses_the_v2_base() {
        let hiers = vec![
            hier("", "/sys/fs/cgroup/unified", "/", "/sys/fs/cgroup/unified"),
            hier(
                "memory",
                "/sys/fs/cgroup/memory/a",
                "/a",
                "/sys/fs/cgroup/memory",
            ),
        ];
        let h = crun_hierarchies(hiers, true);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].key, "memory");
        let v2 = vec![hier(
            "",
            "/sys/fs/cgroup/svc/warren-supervisor",
            "/svc/warren-supervisor",
            "/sys/fs/cgroup",
        )];
        let h = crun_hierarchies(v2, false);
        assert_eq!(h[0].own, Path::new("/sys/fs/cgroup/svc"));
        assert_eq!(h[0].own_path, "/svc");
        let root = vec![hier(
            "",
            "/sys/fs/cgroup/warren-supervisor",
            "/warren-supervisor",
            "/sys/fs/cgroup",
        )];
        assert_eq!(crun_hierarchies(root, false)[0].own_path, "/");
    }

    #[test]
    fn hybrid_is_a_cgroup2_mount_at_unified() {
        let mi = "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n";
        assert!(hybrid(mi));
        assert!(!hybrid(
            "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
        ));
    }
}
