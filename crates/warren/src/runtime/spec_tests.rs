//! Golden tests of a zone's sandbox (pure: descriptors are numbers).

use super::*;
use crate::cgroups::{CgroupSet, CgroupVersion};
use crate::config::ZoneConfig;
use crate::quota::DiskMount;
use crate::storage::template::Bind;
use std::path::PathBuf;
use warren_sys::spawn::Step;

/// Golden plans of a zone: with and without a user namespace, a template bind and
/// a disk.max image. The one builder keeps the sandbox invariants (it checks them
/// itself), and the zone's choices land where they must: every mount target in
/// the tree is checked before it is mounted on, the parent's go comes after the
/// root change and before the user namespace is joined, the cgroup namespace after
/// the go, confinement last with the seccomp filter as the very last step.
#[test]
fn zone_plans_keep_the_invariants_and_the_zone_order() {
    let dir = PathBuf::from("/var/lib/warren/zones/web1");
    let root = RootMount::Overlay {
        lower: PathBuf::from("/var/lib/warren/templates/base/rootfs"),
        upper: dir.join("upper"),
        work: dir.join("work"),
        target: dir.join("root"),
    };
    let binds = [Bind {
        source: PathBuf::from("/usr"),
        target: "usr".into(),
        readonly: true,
    }];
    let cgroups = CgroupSet {
        version: CgroupVersion::V1,
        dirs: Vec::new(),
    };
    let disk = DiskMount {
        image: dir.join("disk.img"),
        mountpoint: dir.join("disk"),
    };
    let config = ZoneConfig::new("base");
    for (name, userns) in [("no user namespace", false), ("user namespace", true)] {
        let boot = BootSpec {
            zone: "web1",
            config: &config,
            root: &root,
            binds: &binds,
            cgroups: &cgroups,
            console: &dir.join("console.log"),
            dev: Path::new("/var/lib/warren/dev-template/dev"),
            init_exe: Path::new("/usr/lib/warren/warren-init"),
            proc_root: Path::new("/proc"),
            net: None,
            idmap: userns.then_some(IdRange {
                base: 200_000,
                count: 65536,
            }),
            disk: Some(&disk),
            views: None,
            image: None,
        };
        let fds = Descriptors {
            null: 11,
            init: Some(12),
            dev: 22,
            disk: Some(13),
            userns: userns.then(|| UsernsDescriptors {
                range: IdRange {
                    base: 200_000,
                    count: 65536,
                },
                user: 14,
                uts: Some(15),
                ipc: Some(16),
                net: Some(17),
                root: 18,
                binds: vec![19],
            }),
            views: vec![("proc/meminfo", 20), ("sys/devices/system/cpu/online", 21)],
        };
        let spec = zone_spec(&boot, &fds).unwrap();
        let p = crate::sandbox::plan(spec).unwrap_or_else(|e| panic!("{name}: {e}"));
        let steps = &p.spawn.steps;
        let at = |want: &dyn Fn(&Step) -> bool| steps.iter().position(want);
        let pivot = at(&|s| matches!(s, Step::PivotRoot { .. })).expect("pivot_root");
        let go = at(&|s| matches!(s, Step::Sync(crate::sandbox::spec::ROOT_BUILT)))
            .expect("the parent's go");
        assert!(
            !steps.iter().any(|s| matches!(s, Step::WaitParent)),
            "{name}: one go, at the sync point"
        );
        let cgroup_ns = at(&|s| matches!(s, Step::Unshare(f) if *f == libc::CLONE_NEWCGROUP))
            .expect("a cgroup namespace");
        assert!(
            pivot < go && go < cgroup_ns,
            "{name}: order of pivot, go, cgroupns"
        );
        let user =
            at(&|s| matches!(s, Step::Setns { nstype, .. } if *nstype == libc::CLONE_NEWUSER));
        assert_eq!(user.is_some(), userns, "{name}: user namespace join");
        if let Some(user) = user {
            assert!(
                go < user && user < cgroup_ns,
                "{name}: user ns after the go"
            );
            assert!(
                matches!(steps[user + 1], Step::BecomeRoot),
                "{name}: becomes root of it"
            );
        }
        // Each of proc, sys, dev and the template's usr is checked right before
        // something is mounted on it.
        for rel in ["proc", "sys", "dev", "usr"] {
            let target = dir.join("root").join(rel);
            let check = at(&|s| {
                matches!(s, Step::CheckBeneath { rel: r, .. } if r.to_bytes() == rel.as_bytes())
            })
            .unwrap_or_else(|| panic!("{name}: no check of /{rel}"));
            let on = |s: &Step| match s {
                Step::Mount { target: t, .. } | Step::MoveMount { target: t, .. } => {
                    t.to_bytes() == target.as_os_str().as_encoded_bytes()
                }
                _ => false,
            };
            assert!(
                on(&steps[check + 1]),
                "{name}: /{rel} mounted right after its check"
            );
        }
        // lxcfs's views land over the fresh /proc and the read-only /sys, after
        // both are mounted and before the root changes.
        let mounted = |rel: &str| {
            let t = dir.join("root").join(rel);
            at(&|s| match s {
                Step::Mount { target, .. } | Step::MoveMount { target, .. } => {
                    target.to_bytes() == t.as_os_str().as_encoded_bytes()
                }
                _ => false,
            })
            .unwrap_or_else(|| panic!("{name}: nothing mounted on /{rel}"))
        };
        let (proc, sys) = (mounted("proc"), mounted("sys"));
        for view in ["proc/meminfo", "sys/devices/system/cpu/online"] {
            let v = mounted(view);
            assert!(proc < v && sys < v && v < pivot, "{name}: /{view} placed");
        }
        // The flags of the clone: a new user namespace is never made by the clone
        // (it is joined), a new network namespace only without one.
        let flags = p.spawn.clone_flags;
        assert_eq!(flags & libc::CLONE_NEWUSER, 0, "{name}");
        assert_eq!(flags & libc::CLONE_NEWNET != 0, !userns, "{name}: netns");
        // Confinement last: bounding, capabilities, no_new_privs, the filter.
        let n = steps.len();
        assert!(
            matches!(steps[n - 1], Step::Seccomp(_)),
            "{name}: filter last"
        );
        assert!(matches!(steps[n - 2], Step::NoNewPrivs), "{name}");
        assert!(matches!(steps[n - 3], Step::SetCaps(_)), "{name}");
        // The device nodes belong to the zone's root.
        let chowned = steps
            .iter()
            .filter(|s| matches!(s, Step::Chown { uid: 200_000, .. }))
            .count();
        assert_eq!(
            chowned > 0,
            userns,
            "{name}: nodes and dirs given to the zone's root"
        );
        // The filesystems the zone makes are exactly SUPERBLOCKS (less the IPC
        // namespace's mqueue, which the kernel makes): /dev, /sys, /dev/shm and the
        // console are binds, no node is made per zone.
        let made: Vec<String> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Mount {
                    fstype: Some(t),
                    flags,
                    ..
                } if flags & (libc::MS_BIND | libc::MS_REMOUNT) == 0 => {
                    Some(t.to_string_lossy().into_owned())
                }
                _ => None,
            })
            .collect();
        assert_eq!(made, ["overlay", "proc", "devpts"], "{name}");
        assert_eq!(
            SUPERBLOCKS
                .iter()
                .filter(|s| **s != "mqueue")
                .collect::<Vec<_>>(),
            made.iter().collect::<Vec<_>>(),
            "{name}: runtime::SUPERBLOCKS (doctor's count) differs from the plan"
        );
        assert!(
            !steps.iter().any(|s| matches!(s, Step::Mknod { .. })),
            "{name}: nodes come from the shared /dev"
        );
        // The console and /dev/shm are opened in the zone's storage before the root
        // covers it, and bound on the shared /dev after it is attached.
        let opened = |fd: i32| {
            at(&|s| matches!(s, Step::Open { fd: f, .. } if *f == fd))
                .unwrap_or_else(|| panic!("{name}: nothing kept at {fd}"))
        };
        let overlay =
            at(&|s| matches!(s, Step::Mount { fstype: Some(t), .. } if t.to_bytes() == b"overlay"))
                .unwrap();
        assert!(
            opened(CONSOLE_FD) < overlay && opened(SHM_FD) < overlay,
            "{name}"
        );
        let dev = at(&|s| matches!(s, Step::MoveMount { fd: 22, .. })).expect("the shared /dev");
        for (rel, fd) in [("dev/console", CONSOLE_FD), ("dev/shm", SHM_FD)] {
            let bound = mounted(rel);
            assert!(dev < bound && bound < pivot, "{name}: /{rel} placed");
            assert!(
                matches!(&steps[bound], Step::Mount { source: Some(src), .. }
                    if src.to_bytes() == format!("/proc/self/fd/{fd}").as_bytes()),
                "{name}: /{rel} is the kept descriptor"
            );
        }
        assert!(
            matches!(p.spawn.exec, ExecTarget::Fd(12)),
            "{name}: warren-init by fd"
        );
        assert_eq!(p.spawn.pass_fds, 0, "{name}");
        assert_eq!(p.what.len(), steps.len(), "{name}: every step described");
    }
}

/// A zone whose init or services carry a NUL byte is refused naming the zone.
#[test]
fn nul_in_services_is_refused_naming_the_zone() {
    let mut config = ZoneConfig::new("base");
    config.services = vec![crate::config::Command::Shell("sleep\0 1".into())];
    let root = RootMount::Bind {
        source: PathBuf::from("/z/root"),
    };
    let cgroups = CgroupSet {
        version: CgroupVersion::V1,
        dirs: Vec::new(),
    };
    let boot = BootSpec {
        zone: "web2",
        config: &config,
        root: &root,
        binds: &[],
        cgroups: &cgroups,
        console: Path::new("/z/console.log"),
        dev: Path::new("/z/dev-template/dev"),
        init_exe: Path::new("/x/warren-init"),
        proc_root: Path::new("/proc"),
        net: None,
        idmap: None,
        disk: None,
        views: None,
        image: None,
    };
    let fds = Descriptors {
        null: 11,
        init: Some(12),
        dev: 22,
        disk: None,
        userns: None,
        views: Vec::new(),
    };
    let e = zone_spec(&boot, &fds).unwrap_err().to_string();
    assert!(e.contains("web2") && e.contains("NUL"), "{e}");
}

/// An OCI template's image config (docs/images.md): its command is the init, run as
/// its user in its working directory, its Env before the zone's `env` (which wins key
/// by key); a zone's own `init` wins and runs as every zone's, with the image's Env.
#[test]
fn image_defaults_apply_and_the_zone_config_wins() {
    use crate::config::Command;
    use crate::storage::image_config::ImageMeta;
    let root = RootMount::Bind {
        source: PathBuf::from("/z/root"),
    };
    let cgroups = CgroupSet {
        version: CgroupVersion::V1,
        dirs: Vec::new(),
    };
    let image = ImageMeta {
        reference: Some("localhost/web:1".into()),
        digest: None,
        config_digest: None,
        format: "oci".into(),
        layers: 1,
        init: vec!["/bin/httpd".into(), "-f".into()],
        env: vec![
            "PATH=/app/bin".into(),
            "FOO=image".into(),
            "BAR=image".into(),
        ],
        workdir: Some("/srv".into()),
        user: Some("app".into()),
        uid: 1000,
        gid: 1001,
        home: Some("/home/app".into()),
    };
    let fds = Descriptors {
        null: 11,
        init: Some(12),
        dev: 22,
        disk: None,
        userns: None,
        views: Vec::new(),
    };
    let mut config = ZoneConfig::new("web");
    config.env = vec!["BAR=zone".into()];
    let spec_of = |config: &ZoneConfig| {
        let boot = BootSpec {
            zone: "web3",
            config,
            root: &root,
            binds: &[],
            cgroups: &cgroups,
            console: Path::new("/z/console.log"),
            dev: Path::new("/z/dev-template/dev"),
            init_exe: Path::new("/x/warren-init"),
            proc_root: Path::new("/proc"),
            net: None,
            idmap: None,
            disk: None,
            views: None,
            image: Some(&image),
        };
        zone_spec(&boot, &fds).unwrap().process
    };
    let strs = |v: &[std::ffi::CString]| -> Vec<String> {
        v.iter().map(|c| c.to_string_lossy().into_owned()).collect()
    };
    let p = spec_of(&config);
    assert_eq!(strs(&p.argv), ["/bin/httpd", "-f"]);
    let env = strs(&p.envp);
    for want in [
        "PATH=/app/bin",
        "FOO=image",
        "BAR=zone",
        "WARREN_ZONE=web3",
        "HOME=/home/app",
    ] {
        assert!(env.contains(&want.to_string()), "{want} in {env:?}");
    }
    assert!(!env
        .iter()
        .any(|e| e == "BAR=image" || e.starts_with("PATH=/usr")));
    assert_eq!(p.cwd, Some(PathBuf::from("/srv")));
    assert_eq!(p.ids, Some((1000, 1001, vec![1001])));
    config.init = Some(Command::Argv(vec!["/bin/sleep".into(), "1".into()]));
    let p = spec_of(&config);
    assert_eq!(strs(&p.argv), ["/bin/sleep", "1"]);
    assert_eq!((p.cwd, p.ids), (None, None));
    assert!(strs(&p.envp).contains(&"FOO=image".to_string()));
}
