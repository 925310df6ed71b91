//! OCI images as templates (`template create --from-oci`, docs/images.md): images
//! podman built and saved on this machine (no registry) in both archive formats and as
//! a directory become templates whose zones run the image's command with its Env,
//! WorkingDir and User; hand-made layouts check layer order, whiteouts, compression
//! and hard links; hostile and damaged archives are refused (or neutralised) with an
//! error naming the entry or blob, leaving nothing behind.

#[path = "oci_image/build.rs"]
mod build;
mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use build::{dir, file, link, tar_of, Comp, Opts};
use common::Env;
use tar::EntryType;

/// A private podman store (vfs) in the test's state root, emptied on drop.
struct Podman {
    dir: PathBuf,
}

impl Podman {
    fn new(base: &Path) -> Podman {
        if Command::new("podman").arg("--version").output().is_err() {
            panic!("podman is not installed: scripts/test.sh installs it (apt-get install podman)");
        }
        Podman {
            dir: base.join("podman"),
        }
    }
    fn cmd(&self) -> Command {
        let mut c = Command::new("podman");
        c.arg("--root")
            .arg(self.dir.join("store"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .args(["--storage-driver", "vfs", "--events-backend", "none"]);
        c.stdin(Stdio::null());
        c
    }
    #[track_caller]
    fn ok(&self, args: &[&str]) {
        let o = self.cmd().args(args).output().unwrap();
        assert!(
            o.status.success(),
            "podman {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self.cmd().args(["rmi", "-af"]).output();
        for m in common::host_mounts_under(&self.dir) {
            let _ = Command::new("umount").args(["-l", &m]).status();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A busybox root with a user `app` (1000:1000) and /srv.
fn busybox_root(at: &Path) {
    let bb = common::require_busybox();
    fs::create_dir_all(at.join("bin")).unwrap();
    fs::create_dir_all(at.join("etc")).unwrap();
    fs::create_dir_all(at.join("srv")).unwrap();
    fs::copy(&bb, at.join("bin/busybox")).unwrap();
    for a in ["sh", "id", "pwd", "env", "cat", "sleep", "ls"] {
        std::os::unix::fs::symlink("busybox", at.join("bin").join(a)).unwrap();
    }
    fs::write(
        at.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/srv:/bin/sh\n",
    )
    .unwrap();
    fs::write(at.join("etc/group"), "root:x:0:\napp:x:1000:\n").unwrap();
}

/// What the image's command wrote, once it has (the zone runs it as its init).
fn wait_out(env: &Env, zone: &str) -> String {
    let t0 = Instant::now();
    loop {
        let r = env.sh(zone, "cat /tmp/out");
        if r.code == 0 && r.stdout.contains("PWD") {
            return r.stdout;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "zone {zone}: the image's command wrote no /tmp/out: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn templates_clean(env: &Env, name: &str) -> Result<(), String> {
    let t = env.root().join("templates");
    let left: Vec<String> = fs::read_dir(&t)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n == name || n.starts_with(".new-"))
                .collect()
        })
        .unwrap_or_default();
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!("left in templates/: {left:?}"))
    }
}

#[test]
fn podman_saved_images_become_templates_whose_zones_run_the_cmd() {
    let env = Env::new();
    let pod = Podman::new(env.root());
    let rootfs = env.root().join("rootfs");
    busybox_root(&rootfs);
    let tar = env.root().join("rootfs.tar");
    let mut b = tar::Builder::new(fs::File::create(&tar).unwrap());
    b.follow_symlinks(false);
    b.append_dir_all(".", &rootfs).unwrap();
    b.finish().unwrap();
    pod.ok(&[
        "import",
        "--change",
        r#"CMD ["sh","-c","(id; pwd; env) > /tmp/out; exec sleep 1000"]"#,
        "--change",
        "ENV FOO=bar BAR=image",
        "--change",
        "WORKDIR /srv",
        "--change",
        "USER app",
        tar.to_str().unwrap(),
        "localhost/wbb:1",
    ]);
    let oci = env.root().join("wbb-oci.tar");
    let docker = env.root().join("wbb-docker.tar");
    pod.ok(&[
        "save",
        "-q",
        "--format",
        "oci-archive",
        "-o",
        oci.to_str().unwrap(),
        "localhost/wbb:1",
    ]);
    pod.ok(&[
        "save",
        "-q",
        "-o",
        docker.to_str().unwrap(),
        "localhost/wbb:1",
    ]);
    let layout = env.root().join("wbb-layout");
    pod.ok(&[
        "save",
        "-q",
        "--format",
        "oci-dir",
        "-o",
        layout.to_str().unwrap(),
        "localhost/wbb:1",
    ]);
    // An OCI layout directory as skopeo and podman write it ("oci-dir" is podman's
    // name for the layout format's directory form).
    assert!(layout.join("index.json").exists(), "podman wrote no layout");

    for (tpl, archive) in [
        ("fromoci", &oci),
        ("fromdocker", &docker),
        ("fromdir", &layout),
    ] {
        env.ok(&[
            "template",
            "create",
            tpl,
            "--from-oci",
            archive.to_str().unwrap(),
            "--image",
            "wbb:1",
        ]);
    }
    let list: serde_json::Value =
        serde_json::from_str(&env.ok(&["template", "list", "--json"]).stdout).unwrap();
    for t in list.as_array().unwrap() {
        assert_eq!(t["kind"], "oci", "{t}");
        let i = &t["image"];
        assert_eq!(i["reference"], "localhost/wbb:1", "{t}");
        assert!(
            i["config_digest"].as_str().unwrap().starts_with("sha256:"),
            "{t}"
        );
        assert_eq!(
            (i["uid"].as_u64(), i["gid"].as_u64()),
            (Some(1000), Some(1000))
        );
        assert_eq!(i["workdir"], "/srv");
        assert_eq!(i["init"][0], "/bin/sh", "the program is found on PATH: {t}");
        if t["name"] != "fromdocker" {
            assert!(i["digest"].as_str().unwrap().starts_with("sha256:"), "{t}");
        }
    }
    let table = env.ok(&["template", "list"]).stdout;
    assert!(table.contains("localhost/wbb:1@sha256:"), "{table}");
    let info = env.ok(&["template", "info", "fromoci"]).stdout;
    assert!(
        info.contains("app (uid 1000, gid 1000)") && info.contains("FOO=bar"),
        "{info}"
    );

    for tpl in ["fromoci", "fromdocker", "fromdir"] {
        let z = format!("z-{tpl}");
        env.ok(&["create", &z, "--template", tpl]);
        env.ok(&["install", &z]);
        env.ok(&["boot", &z]);
        let out = wait_out(&env, &z);
        assert!(out.contains("uid=1000(app) gid=1000(app)"), "{tpl}: {out}");
        assert!(
            out.contains("PWD=/srv") && out.contains("FOO=bar"),
            "{tpl}: {out}"
        );
        assert!(
            out.contains("BAR=image") && out.contains("WARREN_ZONE="),
            "{tpl}: {out}"
        );
        assert!(out.contains("HOME=/srv"), "the user's home: {tpl}: {out}");
        env.ok(&["halt", &z]);
    }
    // The zone's own config wins: env key by key, and its own init runs as root in /.
    env.ok(&[
        "create",
        "zenv",
        "--template",
        "fromoci",
        "--set",
        r#"env=["BAR=zone"]"#,
    ]);
    env.ok(&["install", "zenv"]);
    env.ok(&["boot", "zenv"]);
    let out = wait_out(&env, "zenv");
    assert!(out.contains("BAR=zone") && out.contains("FOO=bar"), "{out}");
    env.ok(&[
        "create",
        "zinit",
        "--template",
        "fromoci",
        "--set",
        r#"init=["/bin/sh","-c","(id; pwd; env) > /tmp/out; exec sleep 1000"]"#,
    ]);
    env.ok(&["install", "zinit"]);
    env.ok(&["boot", "zinit"]);
    let out = wait_out(&env, "zinit");
    assert!(
        out.contains("uid=0(root)") && out.contains("PWD=/\n"),
        "{out}"
    );
    assert!(
        out.contains("FOO=bar"),
        "the image's Env still applies: {out}"
    );
}

#[test]
fn layers_apply_in_order_with_whiteouts_compression_and_hard_links() {
    let env = Env::new();
    let l1 = tar_of(&[
        dir("etc/"),
        file("etc/keep", b"1"),
        file("etc/old", b"1"),
        dir("data/"),
        file("data/a", b"a"),
        file("data/b", b"b"),
        file("bin/tool", b"#!/bin/sh\n"),
    ]);
    let l2 = tar_of(&[
        file("etc/old", b"2"),
        dir("data/"),
        file("data/.wh..wh..opq", b""),
        file("data/c", b"c"),
        link("bin/tool2", EntryType::Link, "bin/tool"),
    ]);
    let l3 = tar_of(&[
        file("etc/.wh.old", b""),
        file("etc/new", b"3"),
        link("etc/lnk", EntryType::Symlink, "/etc/keep"),
    ]);
    for (i, (c1, c2, c3)) in [
        (Comp::None, Comp::Gzip, Comp::Zstd),
        (Comp::Zstd, Comp::None, Comp::Gzip),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = env.root().join(format!("img{i}"));
        let refs = vec!["localhost/app:1".to_string(), "localhost/app:2".to_string()];
        let opts = Opts {
            refs,
            ..Default::default()
        };
        let l = build::write(
            &dir,
            &[(l1.clone(), c1), (l2.clone(), c2), (l3.clone(), c3)],
            opts,
        );
        let source = if i == 0 { l.dir.clone() } else { l.to_tar() };
        let src = source.to_str().unwrap();
        let name = format!("layers{i}");
        // Two images: --image chooses.
        env.run(&["template", "create", &name, "--from-oci", src])
            .fails(5, "holds 2 images; choose one with --image");
        env.run(&[
            "template",
            "create",
            &name,
            "--from-oci",
            src,
            "--image",
            "app:3",
        ])
        .fails(
            5,
            "no image of that name; it holds: localhost/app:1, localhost/app:2",
        );
        env.ok(&[
            "template",
            "create",
            &name,
            "--from-oci",
            src,
            "--image",
            "app:2",
        ]);
        let again = ["template", "create", &name, "--from-oci", src];
        env.run(&again).fails(6, "already exists");
        let root = env.root().join("templates").join(&name).join("root");
        let read = |p: &str| fs::read_to_string(root.join(p)).ok();
        assert_eq!(read("etc/keep").as_deref(), Some("1"));
        assert_eq!(
            read("etc/old"),
            None,
            "whiteout of a file a later layer rewrote"
        );
        assert_eq!(read("etc/new").as_deref(), Some("3"));
        assert_eq!(
            read("data/a"),
            None,
            "opaque directory hides the lower layer"
        );
        assert_eq!(read("data/c").as_deref(), Some("c"));
        let (t1, t2) = (
            fs::metadata(root.join("bin/tool")).unwrap(),
            fs::metadata(root.join("bin/tool2")).unwrap(),
        );
        assert_eq!(
            (t1.ino(), t1.nlink()),
            (t2.ino(), 2),
            "one inode, two names"
        );
        assert_eq!(
            fs::read_link(root.join("etc/lnk")).unwrap(),
            Path::new("/etc/keep")
        );
        let info = env.ok(&["template", "info", &name]).stdout;
        assert!(
            info.contains("localhost/app:2") && info.contains(&l.manifest),
            "{info}"
        );
    }
}

/// What one hostile or damaged archive is and the words its refusal must hold.
struct Case {
    name: &'static str,
    layers: Vec<(Vec<u8>, Comp)>,
    opts: Opts,
    /// Damage done to the written layout.
    damage: fn(&build::Layout),
    as_tar: bool,
    needle: &'static str,
}

fn case(name: &'static str, layers: Vec<Vec<u8>>, needle: &'static str) -> Case {
    Case {
        name,
        layers: layers.into_iter().map(|l| (l, Comp::Gzip)).collect(),
        opts: Opts::default(),
        damage: |_| {},
        as_tar: false,
        needle,
    }
}

#[test]
fn hostile_and_damaged_archives_are_refused_and_leave_nothing() {
    let env = Env::new();
    let victim = env.root().join("victim");
    fs::create_dir_all(&victim).unwrap();
    fs::write(victim.join("secret"), b"s").unwrap();
    let vp = victim.to_str().unwrap();
    let vname = victim.file_name().unwrap().to_str().unwrap();
    let up = format!("../../../../../../{vname}");
    let base = tar_of(&[dir("bin/"), file("bin/x", b"x")]);
    let cases = vec![
        case(
            "dotdot",
            vec![tar_of(&[file(&format!("{up}/dotdot"), b"x")])],
            "would leave the root",
        ),
        case(
            "absolute",
            vec![tar_of(&[file(&format!("{vp}/abs"), b"x")])],
            "would leave the root",
        ),
        case(
            "symlink-then-file",
            vec![
                tar_of(&[link("lib", EntryType::Symlink, vp)]),
                tar_of(&[file("lib/planted", b"x")]),
            ],
            "entry \"lib/planted\": lib is a symlink or not a directory",
        ),
        case(
            "relative-link-then-file",
            vec![tar_of(&[
                link("up", EntryType::Symlink, &up),
                file("up/planted", b"x"),
            ])],
            "is a symlink or not a directory",
        ),
        case(
            "whiteout-through-link",
            vec![
                tar_of(&[link("v", EntryType::Symlink, vp)]),
                tar_of(&[file("v/.wh.secret", b"")]),
            ],
            "is a symlink or not a directory",
        ),
        case(
            "whiteout-dotdot",
            vec![base.clone(), tar_of(&[file("bin/.wh..", b"")])],
            "a whiteout of no name",
        ),
        case(
            "hardlink-out",
            vec![tar_of(&[link(
                "bin/h",
                EntryType::Link,
                &format!("{up}/secret"),
            )])],
            "hard links must stay inside the image",
        ),
        Case {
            // One byte changed in the middle: same size, another digest.
            damage: |l| {
                let p = l.blob(&l.layers[0]);
                let mut b = fs::read(&p).unwrap();
                let mid = b.len() / 2;
                b[mid] ^= 0xff;
                fs::write(&p, b).unwrap();
            },
            ..case("wrong-digest", vec![base.clone()], "hashes to")
        },
        Case {
            opts: Opts {
                diff_ids: Some(vec![build::sha(b"another layer")]),
                ..Default::default()
            },
            ..case("wrong-diff-id", vec![base.clone()], "(diff_id)")
        },
        Case {
            damage: |l| {
                let p = l.blob(&l.layers[0]);
                let len = fs::metadata(&p).unwrap().len();
                fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_len(len / 2)
                    .unwrap();
            },
            ..case("truncated-blob", vec![base.clone()], "layer 1 of 1")
        },
        Case {
            // The layer is most of the archive: cut in half, the cut falls inside it.
            damage: |l| {
                let t = l.to_tar();
                let len = fs::metadata(&t).unwrap().len();
                fs::OpenOptions::new()
                    .write(true)
                    .open(&t)
                    .unwrap()
                    .set_len(len / 2)
                    .unwrap();
            },
            as_tar: true,
            layers: vec![(tar_of(&[file("big", &[9u8; 256 << 10])]), Comp::None)],
            ..case("truncated-archive", vec![], "reading the archive")
        },
        Case {
            damage: |l| fs::remove_file(l.blob(&l.layers[0])).unwrap(),
            ..case("missing-blob", vec![base.clone()], "No such file")
        },
        Case {
            damage: |l| fs::remove_file(l.blob(&l.manifest)).unwrap(),
            ..case("missing-manifest", vec![base.clone()], "manifest")
        },
        Case {
            opts: Opts {
                run: Some(serde_json::json!({"User": "ghost"})),
                ..Default::default()
            },
            ..case("unknown-user", vec![base.clone()], "no user \"ghost\"")
        },
        Case {
            layers: vec![
                (base.clone(), Comp::Gzip),
                (tar_of(&[link("dev", EntryType::Symlink, vp)]), Comp::None),
            ],
            ..case("dev-link", vec![], "/dev is a symlink")
        },
    ];
    let mut failures = Vec::new();
    for (i, c) in cases.into_iter().enumerate() {
        let d = env.root().join(format!("h{i}"));
        let l = build::write(&d, &c.layers, c.opts);
        (c.damage)(&l);
        let src = if c.as_tar {
            d.with_extension("tar")
        } else {
            d.clone()
        };
        let tpl = format!("h{i}");
        let r = env.run(&[
            "template",
            "create",
            &tpl,
            "--from-oci",
            src.to_str().unwrap(),
        ]);
        let untouched = fs::read_dir(&victim).unwrap().count() == 1
            && fs::read(victim.join("secret")).unwrap() == b"s";
        let clean = templates_clean(&env, &tpl);
        if r.code != 5 || !r.stderr.contains(c.needle) || !untouched || clean.is_err() {
            failures.push(format!(
                "{}: code {} stderr {:?} (want {:?}); victim untouched {untouched}; {clean:?}",
                c.name, r.code, r.stderr, c.needle
            ));
        } else {
            println!("{:<26} refused: {}", c.name, r.stderr.trim());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn device_nodes_are_dropped_and_setuid_files_stay_root_only() {
    let env = Env::new();
    let mut suid = file("bin/suid", b"#!/bin/sh\n");
    suid.4 = 0o4755;
    let layer = tar_of(&[
        dir("bin/"),
        suid,
        link("bin/null", EntryType::Char, ""),
        link("bin/sda", EntryType::Block, ""),
        link("bin/pipe", EntryType::Fifo, ""),
    ]);
    let d = env.root().join("dev-img");
    build::write(&d, &[(layer, Comp::None)], Opts::default());
    env.ok(&[
        "template",
        "create",
        "devs",
        "--from-oci",
        d.to_str().unwrap(),
    ]);
    let root = env.root().join("templates/devs/root");
    assert!(!root.join("bin/null").exists() && !root.join("bin/sda").exists());
    let pipe = fs::symlink_metadata(root.join("bin/pipe")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&pipe.file_type()));
    // The set-id bit is kept as the image ships it; only root reaches it (the
    // templates directory is 0700), and zones run with no_new_privs.
    let m = fs::metadata(root.join("bin/suid")).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o4755);
    let t = fs::metadata(env.root().join("templates")).unwrap();
    assert_eq!((t.permissions().mode() & 0o777, t.uid()), (0o700, 0));
}

#[test]
fn interrupted_creation_is_removed_by_gc() {
    let env = Env::new();
    // A big enough layer that the creation is still running when it is killed.
    let mut entries = vec![dir("data/")];
    let blob: &'static [u8] = Box::leak(vec![7u8; 4 << 20].into_boxed_slice());
    for i in 0..64 {
        entries.push(file(&format!("data/f{i}"), blob));
    }
    let d = env.root().join("big");
    build::write(&d, &[(tar_of(&entries), Comp::Gzip)], Opts::default());
    let mut child = env
        .cmd()
        .args([
            "template",
            "create",
            "big",
            "--from-oci",
            d.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let staged = |env: &Env| {
        fs::read_dir(env.root().join("templates"))
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(".new-big-"))
            })
            .unwrap_or(false)
    };
    let t0 = Instant::now();
    while !staged(&env) && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(staged(&env), "the creation never staged its directory");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !env.root().join("templates/big").exists(),
        "killed half-way, yet in place"
    );
    env.ok(&["gc"]);
    templates_clean(&env, "big").unwrap();
}

/// SPEC.md, "OCI image templates": a 100 MiB image (four layers of random-ish files:
/// gzip, gzip, zstd, uncompressed) imported, digests verified; the time is printed
/// (the target, ≤ 3 s, is for a release build: `cargo test --release`), the content
/// checked.
#[test]
fn import_of_a_100_mib_image() {
    let env = Env::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = |n: usize| -> &'static [u8] {
        let mut v = Vec::with_capacity(n);
        while v.len() < n {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            v.extend_from_slice(&seed.to_le_bytes());
        }
        v.truncate(n);
        Box::leak(v.into_boxed_slice())
    };
    let mut layers = Vec::new();
    let mut total = 0usize;
    for (i, c) in [Comp::Gzip, Comp::Gzip, Comp::Zstd, Comp::None]
        .into_iter()
        .enumerate()
    {
        let mut entries = vec![dir(&format!("l{i}/"))];
        let mut size = 0;
        let mut k = 0;
        while size < 25 << 20 {
            let n = [64 << 10, 256 << 10, 1 << 20][k % 3];
            entries.push(file(&format!("l{i}/f{k}"), noise(n)));
            size += n;
            k += 1;
        }
        total += size;
        layers.push((tar_of(&entries), c));
    }
    let d = env.root().join("img100");
    build::write(&d, &layers, Opts::default());
    let tar = build::Layout {
        dir: d.clone(),
        layers: Vec::new(),
        manifest: String::new(),
    }
    .to_tar();
    let t0 = Instant::now();
    env.ok(&[
        "template",
        "create",
        "big",
        "--from-oci",
        tar.to_str().unwrap(),
    ]);
    let took = t0.elapsed();
    let root = env.root().join("templates/big/root");
    let mut got = 0u64;
    for i in 0..4 {
        for e in fs::read_dir(root.join(format!("l{i}"))).unwrap() {
            got += e.unwrap().metadata().unwrap().len();
        }
    }
    assert_eq!(got, total as u64);
    println!(
        "imported a {} MiB image (4 layers) in {:.2} s ({} build; the machine is shared and noisy)",
        total >> 20,
        took.as_secs_f64(),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
}

/// A docker-archive's manifest.json names files by path: a path out of the archive is
/// refused, and its layers are checked against the config's diff_ids (the only digest
/// the format gives for them).
#[test]
fn docker_archives_with_bad_paths_or_layers_are_refused() {
    let env = Env::new();
    let layer = tar_of(&[dir("bin/"), file("bin/x", b"x")]);
    let write = |name: &str, layers: &[&str], diff_id: String| -> PathBuf {
        let d = env.root().join(name);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("layer.tar"), &layer).unwrap();
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "amd64", "os": "linux", "config": {},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }))
        .unwrap();
        let cname = format!("{}.json", build::sha(&config).trim_start_matches("sha256:"));
        fs::write(d.join(&cname), &config).unwrap();
        let manifest = serde_json::json!([{
            "Config": cname, "RepoTags": ["localhost/d:1"], "Layers": layers,
        }]);
        fs::write(
            d.join("manifest.json"),
            serde_json::to_vec(&manifest).unwrap(),
        )
        .unwrap();
        d
    };
    let good = write("dgood", &["layer.tar"], build::sha(&layer));
    env.ok(&[
        "template",
        "create",
        "dgood",
        "--from-oci",
        good.to_str().unwrap(),
    ]);
    assert!(env.root().join("templates/dgood/root/bin/x").is_file());
    let out = write("dout", &["../../etc/passwd"], build::sha(&layer));
    env.run(&[
        "template",
        "create",
        "dout",
        "--from-oci",
        out.to_str().unwrap(),
    ])
    .fails(5, "which is not a plain name inside the archive");
    let bad = write("dbad", &["layer.tar"], build::sha(b"something else"));
    env.run(&[
        "template",
        "create",
        "dbad",
        "--from-oci",
        bad.to_str().unwrap(),
    ])
    .fails(5, "(diff_id)");
    for t in ["dout", "dbad"] {
        templates_clean(&env, t).unwrap();
    }
}
