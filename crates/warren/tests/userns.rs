//! User namespaces: each zone's own range of host ids (allocated without overlap,
//! recorded, released on delete, repaired by gc), the `userns = false` fallback,
//! rlimits, and the privileges and ranges a config may not ask for.

mod common;

use std::os::unix::fs::MetadataExt;

use common::Env;

fn base(env: &Env, zone: &str) -> Option<u64> {
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.root().join("zones").join(zone).join("state.json")).unwrap(),
    )
    .unwrap();
    state["idmap"]["base"].as_u64()
}

fn ranges(env: &Env) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(env.root().join("userns"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn ranges_are_disjoint_recorded_released_on_delete_and_repaired_by_gc() {
    common::require_root();
    let env = Env::new();
    env.host_zone("a", &[]);
    env.host_zone("b", &[]);
    let (ba, bb) = (base(&env, "a").unwrap(), base(&env, "b").unwrap());
    assert!(ba.abs_diff(bb) >= 65536, "ranges overlap: {ba} {bb}");
    assert_eq!(ranges(&env), vec![format!("{ba}-a"), format!("{bb}-b")]);
    // `warren list --json` shows each zone's range.
    let list: serde_json::Value =
        serde_json::from_str(&env.ok(&["list", "--json"]).stdout).unwrap();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|z| z["name"] == "a" && z["idmap"]["base"].as_u64() == Some(ba)),
        "{list}"
    );
    // The private layer belongs to the zone's range.
    assert_eq!(
        std::fs::metadata(env.root().join("zones/a/upper"))
            .unwrap()
            .uid() as u64,
        ba
    );

    // A clone gets a range of its own and its copy of the layer is re-owned.
    env.ok(&["boot", "a"]);
    env.sh("a", "mkdir -p /srv/data && echo hi > /srv/data/f")
        .ok();
    env.ok(&["halt", "a"]);
    env.ok(&["clone", "a", "c"]);
    let bc = base(&env, "c").unwrap();
    assert!(bc != ba && bc != bb, "{bc}");
    let f = std::fs::metadata(env.root().join("zones/c/upper/srv/data/f")).unwrap();
    assert_eq!((f.uid() as u64, f.gid() as u64), (bc, bc));
    env.ok(&["boot", "c"]);
    let r = env
        .sh(
            "c",
            "cat /proc/self/uid_map; stat -c %u:%g /srv/data/f; id -u",
        )
        .ok();
    assert!(
        r.stdout.contains(&format!("0 {bc}"))
            || r.stdout.split_whitespace().any(|w| w == bc.to_string()),
        "{r:?}"
    );
    assert!(r.stdout.contains("0:0\n0\n"), "{r:?}");
    env.ok(&["halt", "c"]);

    // Released on delete.
    env.ok(&["delete", "--force", "b"]);
    assert!(
        !ranges(&env).iter().any(|r| r.ends_with("-b")),
        "{:?}",
        ranges(&env)
    );
    // A zone that vanished without a delete: gc frees its range.
    std::fs::rename(env.root().join("zones/c"), env.root().join("c-gone")).unwrap();
    let r = env.ok(&["gc"]);
    assert!(
        r.stdout.contains("zone 'c': user namespace id range"),
        "{r:?}"
    );
    assert_eq!(ranges(&env), vec![format!("{ba}-a")]);
    std::fs::rename(env.root().join("c-gone"), env.root().join("zones/c")).unwrap();
    env.ok(&["delete", "--force", "c"]);
    // The freed slot is reused.
    env.host_zone("d", &[]);
    assert_eq!(base(&env, "d"), Some(bb));
}

#[test]
fn userns_false_keeps_host_ids_and_switching_reowns_the_layer() {
    common::require_root();
    let env = Env::new();
    env.host_zone("plain", &["userns=false"]);
    assert_eq!(base(&env, "plain"), None);
    env.ok(&["boot", "plain"]);
    let r = env
        .sh("plain", "cat /proc/self/uid_map; touch /made-as-host-root")
        .ok();
    assert!(
        r.stdout.contains("4294967295"),
        "the initial user namespace: {r:?}"
    );
    env.ok(&["halt", "plain"]);
    assert_eq!(
        std::fs::metadata(env.root().join("zones/plain/upper/made-as-host-root"))
            .unwrap()
            .uid(),
        0
    );
    // Switched on: the next boot allocates a range and re-owns the layer.
    env.ok(&["config", "set", "plain", "userns=true"]);
    env.ok(&["boot", "plain"]);
    let b = base(&env, "plain").expect("allocated at boot");
    let m = std::fs::metadata(env.root().join("zones/plain/upper/made-as-host-root")).unwrap();
    assert_eq!(m.uid() as u64, b);
    let r = env.sh("plain", "stat -c %u /made-as-host-root").ok();
    assert_eq!(r.stdout.trim(), "0");
    env.ok(&["halt", "plain"]);
    // And back.
    env.ok(&["config", "set", "plain", "userns=false"]);
    env.ok(&["boot", "plain"]);
    let m = std::fs::metadata(env.root().join("zones/plain/upper/made-as-host-root")).unwrap();
    assert_eq!(m.uid(), 0);
}

#[test]
fn rlimits_reach_init_and_login() {
    common::require_root();
    let env = Env::new();
    env.host_zone("lim", &["rlimit.nofile=100:200", "rlimit.core=0"]);
    env.ok(&["boot", "lim"]);
    let r = env
        .sh(
            "lim",
            "grep -E 'open files|core file' /proc/1/limits; ulimit -n; ulimit -Hn; ulimit -c",
        )
        .ok();
    let words: Vec<&str> = r.stdout.split_whitespace().collect();
    let s = words.join(" ");
    assert!(s.contains("Max core file size 0 0 bytes"), "{s}");
    assert!(s.contains("Max open files 100 200 files"), "{s}");
    assert!(s.ends_with("100 200 0"), "{s}");
}

#[test]
fn overlapping_ranges_and_ungrantable_privileges_are_refused() {
    common::require_root();
    let env = Env::new();
    env.host_zone("p1", &["userns-base=2000000000"]);
    assert_eq!(base(&env, "p1"), Some(2_000_000_000));
    let r = env
        .run(&["create", "p2", "--set", "userns-base=2000000100"])
        .fails(5, "zone 'p2': userns-base 2000000100");
    assert!(
        r.stderr.contains("zone 'p1'") && r.stderr.contains("unset userns-base"),
        "{r:?}"
    );
    // Pinned later, on a configured zone, the boot-time allocation refuses it too.
    env.host_zone("p3", &[]);
    env.run(&["config", "set", "p3", "userns-base=2000065535"])
        .fails(5, "overlap zone 'p1'");
    env.run(&["create", "low", "--set", "userns-base=1000"])
        .fails(5, "below 65536");
    // A hard limit above warren's own (no CAP_SYS_RESOURCE to raise it).
    let (_, hard) = {
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap()
            .to_string();
        let w: Vec<u64> = line
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        (w[0], w[1])
    };
    let too_many = format!("rlimit.nofile={}", hard + 1);
    env.run(&["create", "fd", "--set", &too_many])
        .fails(5, "rlimit.nofile hard limit");
    // A capability outside warren's bounding set: run warren without CAP_SYS_MODULE.
    let out = std::process::Command::new("setpriv")
        .args(["--bounding-set", "-sys_module", "--", common::WARREN])
        .args(["create", "mod", "--set", "caps.add=CAP_SYS_MODULE"])
        .env("WARREN_ROOT", env.root())
        .env("WARREN_RUN_DIR", env.root().join("run"))
        .output()
        .expect("setpriv (util-linux) runs warren with a smaller bounding set");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("zone 'mod': caps.add CAP_SYS_MODULE: this host cannot grant it"),
        "{stderr}"
    );
    assert!(!env.root().join("zones/mod").exists());
}

/// The zone's network namespace belongs to its user namespace, so its root keeps the
/// capabilities it is given there: a port below 1024 and a raw socket (ping) work.
#[test]
fn zone_root_binds_port_80_and_opens_a_raw_socket_in_its_own_namespace() {
    common::require_root();
    let env = Env::new();
    env.host_zone("web", &[]);
    env.ok(&["boot", "web"]);
    let r = env
        .run(&[
            "login",
            "web",
            "--",
            "perl",
            "-MIO::Socket::INET",
            "-e",
            r#"IO::Socket::INET->new(LocalPort => 80, Listen => 1) or die "bind: $!\n"; print "bound 80\n"; socket(my $s, 2, 3, 1) or die "raw: $!\n"; print "raw ok\n""#,
        ])
        .ok();
    assert_eq!(r.stdout, "bound 80\nraw ok\n", "{r:?}");
    // Without CAP_NET_BIND_SERVICE the same bind is refused: the capability is what
    // allows it, not a missing check.
    env.ok(&["halt", "web"]);
    env.ok(&["config", "set", "web", "caps.drop=CAP_NET_BIND_SERVICE"]);
    env.ok(&["boot", "web"]);
    let r = env.run(&[
        "login",
        "web",
        "--",
        "perl",
        "-MIO::Socket::INET",
        "-e",
        r#"IO::Socket::INET->new(LocalPort => 80, Listen => 1) or die "bind: $!\n"; print "bound 80\n""#,
    ]);
    assert!(r.stderr.contains("bind: Permission denied"), "{r:?}");
}
