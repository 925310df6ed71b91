//! `warren cp` (issue 15, item 4), end to end as root on real zones: files and `-r`
//! trees in and out, owners as the zone sees them (its root by default, `--uid/--gid`,
//! `--mode`), what the zone's root can then do with them, running and halted zones,
//! and the refusals. The
//! hostile-symlink rows are in tests/escape_fs.rs (escape_fs/cp.rs).

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use common::Env;

fn work() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("warren-cp-test-")
        .tempdir_in("/tmp")
        .unwrap()
}

#[test]
fn files_and_trees_in_owned_as_the_zone_sees_them() {
    let env = Env::new();
    env.host_zone("cp-in", &[]);
    env.ok(&["boot", "cp-in"]);
    let w = work();
    let file = w.path().join("conf");
    fs::write(&file, b"one\n").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    let tree = w.path().join("site");
    fs::create_dir_all(tree.join("sub/deeper")).unwrap();
    fs::write(tree.join("index"), b"index\n").unwrap();
    fs::write(tree.join("sub/deeper/leaf"), b"leaf\n").unwrap();
    std::os::unix::fs::symlink("index", tree.join("link")).unwrap();
    let f = file.display().to_string();
    let t = tree.display().to_string();

    // Into an existing directory (keeps the name), and to a new name.
    env.ok(&["cp", &f, "cp-in:/root/"]);
    env.ok(&["cp", &f, "cp-in:/root/renamed"]);
    // A tree with owner and mode as the zone sees them.
    env.ok(&[
        "cp",
        "-r",
        &t,
        "cp-in:/srv/www",
        "--uid",
        "33",
        "--gid",
        "44",
        "--mode",
        "0640",
    ]);
    let r = env.sh(
        "cp-in",
        "stat -c '%u:%g %a %n' /root/conf /root/renamed /srv/www/index /srv/www/sub/deeper/leaf; \
         readlink /srv/www/link; cat /srv/www/sub/deeper/leaf; \
         echo two >> /root/conf && cat /root/conf",
    );
    assert_eq!(
        r.stdout,
        "0:0 600 /root/conf\n0:0 600 /root/renamed\n33:44 640 /srv/www/index\n\
         33:44 640 /srv/www/sub/deeper/leaf\nindex\nleaf\none\ntwo\n",
        "{r:?}"
    );
    // Copying a tree again into the same directory merges into it, replacing files.
    env.ok(&["cp", "-r", &t, "cp-in:/srv/"]);
    fs::write(tree.join("index"), b"index v2\n").unwrap();
    fs::write(tree.join("new"), b"new\n").unwrap();
    env.ok(&["cp", "-r", &t, "cp-in:/srv/"]);
    let r = env.sh(
        "cp-in",
        "cat /srv/site/index /srv/site/new /srv/site/sub/deeper/leaf",
    );
    assert_eq!(r.stdout, "index v2\nnew\nleaf\n", "{r:?}");
    // On the host the zone's root is its range's first id, not the host's root.
    let state: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(env.root().join("zones/cp-in/state.json")).unwrap(),
    )
    .unwrap();
    let base = state["idmap"]["base"]
        .as_u64()
        .expect("a user-namespaced zone") as u32;
    let upper = env.root().join("zones/cp-in/upper/root/conf");
    let m = fs::metadata(&upper).expect("the overlay backend keeps the zone's writes in upper/");
    assert_eq!(m.uid(), base, "{}", upper.display());
    // Refusals: a directory without -r, a relative zone path, two zones, a halted zone.
    env.run(&["cp", &t, "cp-in:/srv/x"])
        .fails(5, "copy it with -r");
    env.run(&["cp", &f, "cp-in:relative"])
        .fails(5, "absolute path");
    env.run(&["cp", "cp-in:/root/conf", "cp-in:/tmp/x"])
        .fails(5, "one zone");
    env.run(&["cp", &f, "cp-in:/no/such/dir/x"])
        .fails(9, "no such directory in the zone");
}

#[test]
fn files_and_trees_out_owned_by_the_caller() {
    let env = Env::new();
    env.host_zone("cp-out", &[]);
    env.ok(&["boot", "cp-out"]);
    let r = env.sh(
        "cp-out",
        "set -e; mkdir -p /srv/t/a/b; echo deep > /srv/t/a/b/c; echo top > /srv/t/top; \
         chown -R 33:33 /srv/t; chmod 0751 /srv/t/a; ln -s top /srv/t/l; echo f > /srv/f",
    );
    assert_eq!(r.code, 0, "{r:?}");
    let w = work();
    let dst = w.path().display().to_string();
    env.ok(&["cp", "cp-out:/srv/f", &dst]);
    assert_eq!(fs::read(w.path().join("f")).unwrap(), b"f\n");
    let r = env.ok(&[
        "--json",
        "cp",
        "-r",
        "cp-out:/srv/t",
        &format!("{dst}/t-copy"),
    ]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        (v["files"].as_u64(), v["dirs"].as_u64(), v["links"].as_u64()),
        (Some(2), Some(3), Some(1)),
        "{v}"
    );
    let copy = w.path().join("t-copy");
    assert_eq!(fs::read(copy.join("a/b/c")).unwrap(), b"deep\n");
    assert_eq!(
        fs::read_link(copy.join("l")).unwrap(),
        std::path::Path::new("top")
    );
    let m = fs::metadata(copy.join("a")).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o751));
    // A directory out without -r, and a missing source, are refused by name.
    env.run(&["cp", "cp-out:/srv/t", &dst])
        .fails(9, "copy it with -r");
    env.run(&["cp", "cp-out:/srv/nothing", &dst])
        .fails(9, "/srv/nothing");
    // A destination directory that exists and is not empty is not overwritten.
    fs::create_dir_all(w.path().join("t")).unwrap();
    fs::write(w.path().join("t/mine"), b"mine\n").unwrap();
    env.run(&["cp", "-r", "cp-out:/srv/t", &dst])
        .fails(9, "remove it first");
    assert_eq!(fs::read(w.path().join("t/mine")).unwrap(), b"mine\n");
    // A halted zone: out and in through its root built as boot builds it, owners as
    // the zone sees them once booted again; a path under a template bind is refused.
    env.ok(&["halt", "cp-out"]);
    let halted = w.path().join("halted");
    env.ok(&["cp", "cp-out:/srv/t/a/b/c", &halted.display().to_string()]);
    assert_eq!(fs::read(&halted).unwrap(), b"deep\n");
    env.ok(&[
        "cp",
        &halted.display().to_string(),
        "cp-out:/srv/t/in-halted",
        "--uid",
        "5",
        "--gid",
        "6",
    ]);
    env.ok(&["cp", "-r", &format!("{dst}/t-copy"), "cp-out:/root/"]);
    env.run(&["cp", &halted.display().to_string(), "cp-out:/usr/x"])
        .fails(9, "binds from the host");
    // Nothing the helper mounted shows on the host.
    assert!(common::host_mounts_under(env.root()).is_empty());
    env.ok(&["boot", "cp-out"]);
    let r = env.sh(
        "cp-out",
        "stat -c '%u:%g' /srv/t/in-halted; cat /srv/t/in-halted /root/t-copy/a/b/c",
    );
    assert_eq!(r.stdout, "5:6\ndeep\ndeep\n", "{r:?}");
}

/// Halted zones whose root is not a plain overlay: the `disk.max` image (mounted by
/// the helper from a loop device, detached again when it exits) and the copy backend
/// (the zone's own tree, attached idmapped).
#[test]
fn halted_zones_with_disk_max_and_the_copy_backend() {
    let env = Env::new();
    env.host_zone("cp-disk", &["disk.max=64M"]);
    let r = env
        .cmd()
        .env("WARREN_STORAGE", "copy")
        .args(["template", "create", "cp-hc", "--from", "host"])
        .output()
        .unwrap();
    assert!(r.status.success(), "{r:?}");
    env.ok(&["create", "cp-copy", "--template", "cp-hc"]);
    env.ok(&["install", "cp-copy"]);
    let w = work();
    let file = w.path().join("f");
    fs::write(&file, b"halted\n").unwrap();
    let f = file.display().to_string();
    for zone in ["cp-disk", "cp-copy"] {
        env.ok(&["cp", &f, &format!("{zone}:/root/f"), "--uid", "9"]);
        let out = w.path().join(format!("{zone}-passwd"));
        env.ok(&[
            "cp",
            &format!("{zone}:/etc/passwd"),
            &out.display().to_string(),
        ]);
        assert!(fs::read_to_string(&out).unwrap().starts_with("root:"));
        assert!(common::host_mounts_under(env.root()).is_empty(), "{zone}");
        env.ok(&["boot", zone]);
        let r = env.sh(zone, "stat -c %u /root/f; cat /root/f");
        assert_eq!(r.stdout, "9\nhalted\n", "{zone}: {r:?}");
        env.ok(&["halt", zone]);
    }
    let loops = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    let root = env.root().display().to_string();
    assert!(
        !String::from_utf8_lossy(&loops.stdout).contains(&root),
        "a loop device of this state root survived: {loops:?}"
    );
    env.ok(&["delete", "--force", "cp-copy"]);
    env.ok(&["template", "delete", "cp-hc"]);
}
