//! Unit tests of the plan builder (pure; golden init plans checked against the
//! sandbox invariants).

use super::init::*;
use super::process::*;
use super::*;

/// Golden plans: the init plan of several configs keeps every sandbox invariant
/// (sandbox::invariants), and the steps land where the runtime spec wants them.
#[test]
fn init_plans_keep_the_sandbox_invariants() {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    for d in ["proc", "dev", "sys", "tmp", "bin"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    std::fs::write(rootfs.join("bin/sh"), "").unwrap();
    std::fs::set_permissions(
        rootfs.join("bin/sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let cgroups = CgroupSet {
        version: CgroupVersion::V1,
        dirs: Vec::new(),
    };
    let filter = vec![SockFilter {
        code: 6,
        jt: 0,
        jf: 0,
        k: 0x7fff_0000,
    }];
    let hard = |_: libc::c_int| None;
    type Edit = Box<dyn Fn(&mut Spec)>;
    // (name, config edit, terminal, --no-pivot)
    let variants: Vec<(&str, Edit, bool, bool)> = vec![
        ("default", Box::new(|_: &mut Spec| {}), false, false),
        (
            "user namespace",
            Box::new(|s: &mut Spec| {
                let mut linux = s.linux().clone().unwrap();
                let mut ns = linux.namespaces().clone().unwrap();
                ns.push(
                    oci_spec::runtime::LinuxNamespaceBuilder::default()
                        .typ(LinuxNamespaceType::User)
                        .build()
                        .unwrap(),
                );
                linux.set_namespaces(Some(ns));
                s.set_linux(Some(linux));
            }),
            false,
            false,
        ),
        (
            "terminal, no_new_privs off",
            Box::new(|s: &mut Spec| {
                let mut p = s.process().clone().unwrap();
                p.set_terminal(Some(true));
                p.set_no_new_privileges(Some(false));
                s.set_process(Some(p));
            }),
            true,
            false,
        ),
        ("no pivot", Box::new(|_: &mut Spec| {}), false, true),
    ];
    for (name, edit, console, no_pivot) in variants {
        let mut spec = Spec::default();
        let mut process = spec.process().clone().unwrap();
        process.set_args(Some(vec!["sh".into()]));
        spec.set_process(Some(process));
        edit(&mut spec);
        let i = InitInputs {
            id: "golden",
            spec: &spec,
            bundle: dir.path(),
            rootfs: &rootfs,
            cgroups: &cgroups,
            join: &[],
            state_dir_fd: 10,
            console_socket: console.then_some(11),
            no_pivot,
            hooks_sync: true,
            rootfs_parent_mount: None,
            process: ProcessInputs {
                id: "golden",
                root: &rootfs,
                seccomp: Some(&filter),
                console,
                hard_limit: &hard,
            },
        };
        let (p, _) = init_plan(&i).unwrap_or_else(|e| panic!("{name}: {e}"));
        crate::sandbox::invariants::check(&p.spawn, &[&rootfs])
            .unwrap_or_else(|e| panic!("{name}: {e} ({})", p.what[e.index]));
        let at = |want: &dyn Fn(&Step) -> bool| p.spawn.steps.iter().position(want);
        let ready = at(&|s| matches!(s, Step::Ready)).expect("a Ready step");
        let set_ids = at(&|s| matches!(s, Step::SetIds { .. })).expect("SetIds");
        // The user is applied before create returns, the filter after start.
        assert!(set_ids < ready, "{name}: SetIds after Ready");
        let last_filter = p
            .spawn
            .steps
            .iter()
            .rposition(|s| matches!(s, Step::Seccomp(_)))
            .expect("a filter");
        let nnp = spec.process().as_ref().unwrap().no_new_privileges() == Some(true);
        if nnp {
            assert_eq!(
                last_filter,
                p.spawn.steps.len() - 1,
                "{name}: filter not last"
            );
        }
        assert!(
            matches!(p.spawn.steps[0], Step::WaitParent),
            "{name}: the first step is the parent's go"
        );
    }
}

#[test]
fn the_mount_holding_a_path_is_the_longest_prefix() {
    let mi = "22 1 8:1 / / rw shared:1 - ext4 /dev/sda1 rw\n\
              30 22 0:5 / /var/lib rw shared:2 - tmpfs tmpfs rw\n\
              31 22 0:6 / /var/lib/c\\040d rw - tmpfs tmpfs rw\n";
    let at = |p: &str| mount_holding(mi, Path::new(p)).unwrap();
    assert_eq!(at("/var/lib/x/rootfs"), Path::new("/var/lib"));
    assert_eq!(at("/var/lib/c d/rootfs"), Path::new("/var/lib/c d"));
    assert_eq!(at("/home/u"), Path::new("/"));
    // A prefix of the string that is not a path prefix does not count.
    assert_eq!(at("/var/library"), Path::new("/"));
}

#[test]
fn the_host_id_of_the_container_root() {
    let m = |c: u32, h: u32, n: u32| {
        oci_spec::runtime::LinuxIdMappingBuilder::default()
            .container_id(c)
            .host_id(h)
            .size(n)
            .build()
            .unwrap()
    };
    assert_eq!(host_id_of_root(&[m(0, 200000, 65536)]), Some(200000));
    assert_eq!(
        host_id_of_root(&[m(1, 100001, 10), m(0, 5000, 1)]),
        Some(5000)
    );
    assert_eq!(host_id_of_root(&[m(1, 100001, 10)]), None);
    assert_eq!(host_id_of_root(&[]), None);
}

#[test]
fn options_split_into_flags_propagation_and_data() {
    let o = parse_options(
        &[
            "nosuid",
            "strictatime",
            "mode=755",
            "size=65536k",
            "rprivate",
            "ro",
        ]
        .map(String::from),
    );
    assert_eq!(
        o.flags,
        libc::MS_NOSUID | libc::MS_STRICTATIME | libc::MS_RDONLY
    );
    assert_eq!(o.propagation, vec![libc::MS_PRIVATE | libc::MS_REC]);
    assert_eq!(o.data, vec!["mode=755", "size=65536k"]);
    let b = parse_options(&["rbind", "rw", "tmpcopyup"].map(String::from));
    assert!(b.bind && b.recursive && b.flags == 0 && b.data.is_empty());
}

#[test]
fn secure_join_keeps_links_inside_the_root() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("escape")).unwrap();
    std::os::unix::fs::symlink("../../..", root.join("usr/bin/up")).unwrap();
    std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
    assert_eq!(
        secure_join(root, Path::new("/escape/passwd")),
        root.join("etc/passwd")
    );
    assert_eq!(
        secure_join(root, Path::new("/usr/bin/up/x")),
        root.join("x")
    );
    assert_eq!(secure_join(root, Path::new("/../../a")), root.join("a"));
    assert_eq!(
        secure_join(root, Path::new("/bin/sh")),
        root.join("usr/bin/sh")
    );
    std::fs::write(root.join("usr/bin/sh"), "").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        root.join("usr/bin/sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    assert_eq!(
        resolve_exec(root, "sh", "/sbin:/bin"),
        Some("/bin/sh".into())
    );
    assert_eq!(resolve_exec(root, "/bin/sh", ""), Some("/bin/sh".into()));
    assert_eq!(resolve_exec(root, "nope", "/bin"), None);
}

#[test]
fn capability_names_become_bits() {
    let (m, unknown) = cap_mask(["CAP_CHOWN", "CAP_KILL", "CAP_NOPE"].into_iter());
    assert_eq!(m, 1 | 1 << 5);
    assert_eq!(unknown, vec!["CAP_NOPE"]);
}
