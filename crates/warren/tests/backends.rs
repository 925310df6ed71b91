//! The btrfs and copy storage backends, end to end. The btrfs test makes a small
//! loop-mounted btrfs filesystem for its state root and unmounts it afterwards.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Env, Run};

/// A loop-mounted btrfs image, unmounted (and its loop device freed) on drop.
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
            .prefix("warren-btrfs-")
            .tempdir_in("/tmp")
            .unwrap();
        let img = dir.path().join("img");
        let f = std::fs::File::create(&img).unwrap();
        f.set_len(256 << 20).unwrap();
        let out = Command::new(mkfs).arg("-q").arg(&img).output().unwrap();
        assert!(
            out.status.success(),
            "mkfs.btrfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let out = Command::new("mount")
            .arg("-o")
            .arg("loop")
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
        // Lazy unmount so a failed test cannot leave it behind; autoclear frees the loop.
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        let _ = &self.dir;
    }
}

fn run_in(root: &Path, env_kv: Option<(&str, &str)>, args: &[&str]) -> Run {
    let mut c = Command::new(common::WARREN);
    c.env("WARREN_ROOT", root)
        .env("WARREN_RUN_DIR", root.join("run"))
        .env("WARREN_OCI_ROOT", root.join("oci"))
        .env_remove("WARREN_STORAGE")
        .args(args);
    if let Some((k, v)) = env_kv {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Template, install, clone, boot, isolation of writes, halt, delete.
fn exercise(env: &Env, kv: Option<(&str, &str)>, expect_backend: &str) {
    let root = env.root().to_path_buf();
    let ok = |args: &[&str]| run_in(&root, kv, args).ok();
    let info = ok(&["info", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&info.stdout).unwrap();
    assert_eq!(v["storage_backend"], expect_backend, "{}", info.stdout);
    ok(&["template", "create", "host", "--from", "host"]);
    ok(&["create", "a"]);
    ok(&["install", "a"]);
    ok(&["clone", "a", "b"]);
    ok(&["boot", "a", "b"]);
    ok(&["login", "a", "--", "/bin/sh", "-c", "echo a > /root/mark"]);
    let r = ok(&[
        "login",
        "b",
        "--",
        "/bin/sh",
        "-c",
        "cat /root/mark 2>/dev/null || echo none",
    ]);
    assert_eq!(r.stdout.trim(), "none");
    let r = ok(&["list", "--json"]);
    assert!(
        r.stdout
            .contains(&format!("\"backend\": \"{expect_backend}\"")),
        "{}",
        r.stdout
    );
    ok(&["halt", "--all"]);
    ok(&["delete", "--force", "a", "b"]);
    ok(&["template", "delete", "host"]);
    let left: Vec<_> = std::fs::read_dir(root.join("zones"))
        .unwrap()
        .flatten()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn btrfs_backend_uses_subvolumes_and_snapshots() {
    common::require_root();
    let fs = BtrfsMount::new();
    let env = Env {
        dir: tempfile::Builder::new()
            .prefix("state-")
            .tempdir_in(&fs.mnt)
            .unwrap(),
    };
    exercise(&env, None, "btrfs");
}

#[test]
fn copy_backend_when_forced() {
    let env = Env::new();
    exercise(&env, Some(("WARREN_STORAGE", "copy")), "copy");
}
