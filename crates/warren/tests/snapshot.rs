//! Snapshots end to end (docs/snapshots.md): data written in a zone, snapshot, change,
//! restore, data back; a snapshot of a running zone (frozen while copied); clone from
//! a snapshot and from a running zone; publish as a template; the bad inputs; and the
//! btrfs backend on a loop-mounted btrfs.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{host_mounts_under, Env};

fn json(r: &common::Run) -> serde_json::Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
}

/// Write, snapshot, change, restore, read back: on the state root of `env`.
fn round_trip(env: &Env) {
    env.host_zone("z", &[]);
    env.ok(&["boot", "z"]);
    env.sh("z", "echo one > /root/data && echo keep > /etc/extra")
        .ok();
    env.ok(&["halt", "z"]);
    let s = json(&env.ok(&["--json", "snapshot", "create", "z", "s1"]));
    assert_eq!(s["name"], "s1");
    assert_eq!(s["taken_running"], false);
    env.ok(&["boot", "z"]);
    env.sh(
        "z",
        "echo two > /root/data && rm /etc/extra && echo new > /root/later",
    )
    .ok();
    // Restore needs the zone halted.
    env.run(&["snapshot", "restore", "z", "s1"])
        .fails(4, "halt");
    env.ok(&["halt", "z"]);
    env.ok(&["snapshot", "restore", "z", "s1"]);
    env.ok(&["boot", "z"]);
    let r = env.sh(
        "z",
        "cat /root/data /etc/extra; test -e /root/later && echo later || true",
    );
    assert_eq!(r.ok().stdout, "one\nkeep\n");
    // The snapshot stays: restore again after another change.
    env.sh("z", "echo three > /root/data").ok();
    env.ok(&["halt", "z"]);
    env.ok(&["snapshot", "restore", "z", "s1"]);
    env.ok(&["boot", "z"]);
    assert_eq!(env.sh("z", "cat /root/data").ok().stdout, "one\n");
    env.ok(&["halt", "z"]);
    let list = json(&env.ok(&["--json", "snapshot", "list", "z"]));
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert!(list[0]["size_bytes"].as_u64().unwrap() > 0, "{list}");
    env.ok(&["snapshot", "delete", "z", "s1"]);
    assert_eq!(
        json(&env.ok(&["--json", "snapshot", "list"])),
        serde_json::json!([])
    );
    // No restore staging or snapshot temp left behind.
    let dots: Vec<_> = std::fs::read_dir(env.root().join("zones/z"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(dots.is_empty(), "{dots:?}");
}

#[test]
fn snapshot_restore_brings_data_back() {
    let env = Env::new();
    round_trip(&env);
}

#[test]
fn running_zone_snapshot_and_clones() {
    let env = Env::new();
    env.host_zone("src", &[]);
    env.ok(&["boot", "src"]);
    env.sh("src", "echo live > /root/data").ok();
    let pid = env.init_pid("src");
    let s = json(&env.ok(&["--json", "snapshot", "create", "src", "hot"]));
    assert_eq!(s["taken_running"], true, "{s}");
    // Thawed again: the zone goes on running and writing.
    assert_eq!(env.state("src"), "running");
    assert_eq!(env.init_pid("src"), pid);
    env.sh("src", "echo after > /root/data").ok();
    // A clone of the running zone (frozen while copied) has the current data…
    env.ok(&["clone", "src", "hotclone"]);
    assert_eq!(env.state("src"), "running");
    // …and a clone of the snapshot has the data as it was.
    env.ok(&["clone", "--snapshot", "hot", "src", "fromsnap"]);
    env.ok(&["boot", "hotclone", "fromsnap"]);
    assert_eq!(env.sh("hotclone", "cat /root/data").ok().stdout, "after\n");
    assert_eq!(env.sh("fromsnap", "cat /root/data").ok().stdout, "live\n");
    // Publish: a halted zone's merged root becomes a template.
    env.run(&["template", "create", "pub", "--from-zone", "src"])
        .fails(4, "halt");
    env.ok(&["halt", "src"]);
    env.sh("src", "true"); // not running: ignored
    env.ok(&["template", "create", "pub", "--from-zone", "src"]);
    let t = json(&env.ok(&["--json", "template", "list"]));
    let row = t
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pub")
        .unwrap();
    assert!(row["size_bytes"].as_u64().unwrap() > 0, "{t}");
    let host = t
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "host")
        .unwrap();
    assert!(
        host["zones"].as_array().unwrap().contains(&"src".into()),
        "{t}"
    );
    env.ok(&["create", "p1", "--template", "pub"]);
    env.ok(&["install", "p1"]);
    env.ok(&["boot", "p1"]);
    assert_eq!(env.sh("p1", "cat /root/data").ok().stdout, "after\n");
}

#[test]
fn snapshot_bad_input() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    env.ok(&["create", "c"]);
    env.run(&["snapshot", "create", "c", "s"])
        .fails(4, "installed");
    env.ok(&["install", "c"]);
    env.run(&["snapshot", "create", "c", "../x"])
        .fails(5, "invalid");
    env.ok(&["snapshot", "create", "c", "s"]);
    env.run(&["snapshot", "create", "c", "s"])
        .fails(6, "already has a snapshot 's'");
    env.run(&["snapshot", "restore", "c", "nope"])
        .fails(3, "no snapshot 'nope'");
    env.run(&["snapshot", "delete", "c", "nope"])
        .fails(3, "no snapshot 'nope'");
    env.run(&["clone", "--snapshot", "nope", "c", "d"])
        .fails(3, "no snapshot");
    env.run(&["snapshot", "list", "ghost"])
        .fails(3, "does not exist");
    // A default name is the time.
    let s = json(&env.ok(&["--json", "snapshot", "create", "c"]));
    assert!(s["name"].as_str().unwrap().starts_with("20"), "{s}");
    // Uninstall removes the snapshots with the layer.
    env.ok(&["uninstall", "c"]);
    assert!(!env.root().join("zones/c/snapshots").exists());
    // gc removes a snapshot left half-made by a dead process.
    env.ok(&["install", "c"]);
    let half = env.root().join("zones/c/snapshots/.new-s2-999999-1a");
    std::fs::create_dir_all(half.join("upper/x")).unwrap();
    env.ok(&["gc"]);
    assert!(!half.exists());
}

/// A loop-mounted btrfs image, unmounted (its loop device freed) on drop.
struct BtrfsMount {
    dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl BtrfsMount {
    fn new() -> BtrfsMount {
        let mkfs = [
            "/usr/sbin/mkfs.btrfs",
            "/sbin/mkfs.btrfs",
            "/usr/bin/mkfs.btrfs",
        ]
        .iter()
        .find(|p| Path::new(p).exists())
        .expect("this test needs btrfs-progs (the README's test command installs it)");
        let dir = tempfile::Builder::new()
            .prefix("warren-snap-btrfs-")
            .tempdir_in("/tmp")
            .unwrap();
        let img = dir.path().join("img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(256 << 20)
            .unwrap();
        let out = Command::new(mkfs).arg("-q").arg(&img).output().unwrap();
        assert!(
            out.status.success(),
            "mkfs.btrfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let out = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mount -o loop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        BtrfsMount { dir, mnt }
    }
}

impl Drop for BtrfsMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        let _ = &self.dir;
    }
}

#[test]
fn btrfs_snapshots_are_subvolumes() {
    common::require_root();
    let fs = BtrfsMount::new();
    let root = fs.mnt.join("state");
    std::fs::create_dir(&root).unwrap();
    // Env's guard halts and deletes the zones before the mount goes (declared after).
    let env = Env {
        dir: tempfile::Builder::new()
            .prefix("s")
            .tempdir_in(&root)
            .unwrap(),
    };
    round_trip(&env);
    env.ok(&["snapshot", "create", "z", "b1"]);
    let snap = env.root().join("zones/z/snapshots/b1/root");
    assert!(warren_sys::fs::is_btrfs_subvol(&snap), "{}", snap.display());
    // delete --force removes a zone with snapshot subvolumes in it.
    env.ok(&["delete", "--force", "z"]);
    assert!(!env.root().join("zones/z").exists());
}

#[test]
fn copy_backend_snapshots() {
    let env = Env::new();
    let out = env
        .cmd()
        .env("WARREN_STORAGE", "copy")
        .args(["template", "create", "host", "--from", "host"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    round_trip(&env);
    let r = json(&env.ok(&["--json", "list"]));
    assert_eq!(r[0]["backend"], "copy", "{r}");
}

#[test]
fn disk_max_zone_snapshots_its_image() {
    let env = Env::new();
    env.host_zone("q", &["disk.max=64M"]);
    env.ok(&["boot", "q"]);
    env.sh("q", "echo before > /root/data").ok();
    // Running: the image is copied with the zone frozen.
    env.ok(&["snapshot", "create", "q", "s"]);
    assert!(env.root().join("zones/q/snapshots/s/disk.img").is_file());
    env.sh("q", "echo after > /root/data").ok();
    env.ok(&["halt", "q"]);
    env.ok(&["snapshot", "restore", "q", "s"]);
    env.ok(&["boot", "q"]);
    assert_eq!(env.sh("q", "cat /root/data").ok().stdout, "before\n");
    // Export: not of the running zone's mounted image (refused with the way round),
    // of a snapshot's image, or of the halted zone's.
    let file = env.root().join("q.wzone");
    let f = file.to_str().unwrap();
    env.run(&["export", "q", f]).fails(7, "export the snapshot");
    env.ok(&["export", "--snapshot", "s", "q", f]);
    let other = Env::new();
    other.ok(&["template", "create", "host", "--from", "host"]);
    other.ok(&["import", f, "q1"]);
    assert!(other.root().join("zones/q1/disk.img").is_file());
    other.ok(&["boot", "q1"]);
    assert_eq!(other.sh("q1", "cat /root/data").ok().stdout, "before\n");
    env.ok(&["halt", "q"]);
    std::fs::remove_file(&file).unwrap();
    env.ok(&["export", "q", f]);
    other.ok(&["import", f, "q2"]);
    other.ok(&["boot", "q2"]);
    assert_eq!(other.sh("q2", "cat /root/data").ok().stdout, "before\n");
    assert!(host_mounts_under(env.root()).is_empty());
    assert!(host_mounts_under(other.root()).is_empty());
}

/// A tenant's links to host paths are copied as links by snapshot and export, never
/// followed: nothing of the host's / ends up in the snapshot or the archive.
#[test]
fn tenant_symlinks_are_never_followed() {
    let env = Env::new();
    env.host_zone("t", &[]);
    env.ok(&["boot", "t"]);
    env.sh("t", "ln -s / /root/hostroot && ln -s /etc/shadow /root/shadow && mkdir /root/d && ln -s /usr /root/d/u")
        .ok();
    env.ok(&["snapshot", "create", "t", "s"]);
    let snap = env.root().join("zones/t/snapshots/s");
    let link = snap.join("upper/root/hostroot");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("/"));
    let size = warren::fsutil::disk_usage(&snap).unwrap();
    assert!(
        size < 1 << 20,
        "the snapshot holds {size} bytes: a link was followed"
    );
    let file = env.root().join("t.wzone");
    env.ok(&["export", "t", file.to_str().unwrap()]);
    let len = std::fs::metadata(&file).unwrap().len();
    assert!(
        len < 1 << 20,
        "the archive is {len} bytes: a link was followed"
    );
    let other = Env::new();
    other.ok(&["template", "create", "host", "--from", "host"]);
    other.ok(&["import", file.to_str().unwrap()]);
    other.ok(&["boot", "t"]);
    let r = other
        .sh("t", "readlink /root/hostroot /root/shadow /root/d/u")
        .ok();
    assert_eq!(r.stdout, "/\n/etc/shadow\n/usr\n");
}
