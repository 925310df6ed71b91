//! Export and import end to end (docs/snapshots.md): a zone exported and imported into
//! a second temporary state root ("another host") boots with its data; templates that
//! differ or are missing are refused, or carried with --with-template; damaged,
//! truncated and hostile archives are refused with nothing created; a full disk
//! mid-export leaves no file.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::Env;

/// Zones and templates of a state root (names not starting with '.', and those that do).
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn exported(env: &Env, dir: &Path) -> PathBuf {
    env.host_zone("web", &[]);
    env.ok(&["boot", "web"]);
    env.sh(
        "web",
        "mkdir -p /srv/app && echo hello > /srv/app/index && ln /srv/app/index /srv/app/hard && ln -s index /srv/app/soft && rm -f /etc/motd && chmod 4755 /srv/app/index && chown 1000:1000 /srv/app",
    )
    .ok();
    let file = dir.join("web.wzone");
    // Exported while running (frozen for the copy).
    env.ok(&["export", "web", file.to_str().unwrap()]);
    file
}

#[test]
fn export_import_to_another_root_boots_with_the_data() {
    let a = Env::new();
    let b = Env::new();
    let out = tempfile::tempdir().unwrap();
    let file = exported(&a, out.path());
    b.ok(&["template", "create", "host", "--from", "host"]);
    let r: serde_json::Value = serde_json::from_str(
        &b.ok(&["--json", "import", file.to_str().unwrap(), "web2"])
            .stdout,
    )
    .unwrap();
    assert_eq!(r["template_created"], false);
    assert_eq!(b.state("web2"), "installed");
    b.ok(&["boot", "web2"]);
    let r = b.sh(
        "web2",
        "cat /srv/app/index; stat -c '%a %u %h' /srv/app/index; readlink /srv/app/soft; stat -c %u /srv/app; test -e /etc/motd && echo motd || echo gone",
    );
    assert_eq!(r.ok().stdout, "hello\n4755 0 2\nindex\n1000\ngone\n");
    // The same archive again, under the exported name, beside it.
    b.ok(&["import", file.to_str().unwrap()]);
    b.run(&["import", file.to_str().unwrap()])
        .fails(6, "zone 'web' already exists");
}

#[test]
fn templates_that_differ_or_are_missing() {
    let a = Env::new();
    let out = tempfile::tempdir().unwrap();
    let file = exported(&a, out.path());
    let f = file.to_str().unwrap();
    // Missing on the other host.
    let b = Env::new();
    b.run(&["import", f])
        .fails(6, "template 'host' does not exist");
    // Present but holding another tree.
    b.ok(&["template", "create", "host", "--from", "host"]);
    std::fs::write(b.root().join("templates/host/root/etc/changed"), "x").unwrap();
    b.run(&["import", f]).fails(6, "holds another tree");
    assert!(entries(&b.root().join("zones")).is_empty());
    // Carried in the archive.
    let full = out.path().join("full.wzone");
    a.ok(&["export", "--with-template", "web", full.to_str().unwrap()]);
    let c = Env::new();
    c.run(&["import", full.to_str().unwrap()])
        .fails(6, "add --with-template");
    c.ok(&["import", "--with-template", full.to_str().unwrap()]);
    c.ok(&["boot", "web"]);
    assert_eq!(c.sh("web", "cat /srv/app/index").ok().stdout, "hello\n");
    // A snapshot exports as the zone was then.
    a.ok(&["snapshot", "create", "web", "s1"]);
    a.sh("web", "echo changed > /srv/app/index").ok();
    let snap = out.path().join("snap.wzone");
    a.ok(&["export", "--snapshot", "s1", "web", snap.to_str().unwrap()]);
    c.ok(&["import", snap.to_str().unwrap(), "fromsnap"]);
    c.ok(&["boot", "fromsnap"]);
    assert_eq!(
        c.sh("fromsnap", "cat /srv/app/index").ok().stdout,
        "hello\n"
    );
}

/// Nothing of an import is left: no zone, no temporary directory, no id range.
fn nothing_created(env: &Env) {
    assert!(
        entries(&env.root().join("zones")).is_empty(),
        "{:?}",
        entries(&env.root().join("zones"))
    );
    assert_eq!(
        entries(&env.root().join("templates")),
        vec!["host".to_string()]
    );
}

#[test]
fn damaged_and_truncated_archives() {
    let a = Env::new();
    let out = tempfile::tempdir().unwrap();
    let file = exported(&a, out.path());
    let bytes = std::fs::read(&file).unwrap();
    let b = Env::new();
    b.ok(&["template", "create", "host", "--from", "host"]);
    for (what, data) in [
        ("truncated", bytes[..bytes.len() * 2 / 3].to_vec()),
        ("cut at the end", bytes[..bytes.len() - 9].to_vec()),
        ("flipped", {
            let mut d = bytes.clone();
            let i = d.len() / 2;
            d[i] ^= 0x55;
            d
        }),
        ("not zstd", b"hello, this is not an archive".to_vec()),
        ("empty", Vec::new()),
    ] {
        let p = out.path().join(format!("{}.wzone", what.replace(' ', "-")));
        std::fs::write(&p, data).unwrap();
        b.run(&["import", p.to_str().unwrap(), "x"])
            .fails(5, "damaged");
        nothing_created(&b);
    }
    b.run(&["import", "/nonexistent.wzone"]).fails(9, "opening");
}

/// One raw entry: its header and data.
type Extra = (tar::Header, Vec<u8>);

/// Rewrite the archive `src` into `dst`, adding `extra` (raw tar headers + data)
/// before its end record.
fn with_entries(src: &Path, dst: &Path, extra: &[Extra]) {
    let mut raw = Vec::new();
    zstd::Decoder::new(std::fs::File::open(src).unwrap())
        .unwrap()
        .read_to_end(&mut raw)
        .unwrap();
    let mut ar = tar::Archive::new(&raw[..]);
    let mut b = tar::Builder::new(Vec::new());
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let path = e.path().unwrap().into_owned();
        if path == Path::new("warren-export.end") {
            for (h, d) in extra {
                b.append(h, &d[..]).unwrap();
            }
        }
        // Keep each entry's PAX records (extended attributes, symlink targets).
        let pax: Vec<(String, Vec<u8>)> = match e.pax_extensions().unwrap() {
            Some(exts) => exts
                .map(|x| {
                    let x = x.unwrap();
                    (x.key().unwrap().to_string(), x.value_bytes().to_vec())
                })
                .collect(),
            None => Vec::new(),
        };
        if !pax.is_empty() {
            b.append_pax_extensions(pax.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
                .unwrap();
        }
        let mut h = e.header().clone();
        let mut d = Vec::new();
        e.read_to_end(&mut d).unwrap();
        b.append_data(&mut h, &path, &d[..]).unwrap();
    }
    let tar = b.into_inner().unwrap();
    let mut enc = zstd::Encoder::new(std::fs::File::create(dst).unwrap(), 1).unwrap();
    enc.write_all(&tar).unwrap();
    enc.finish().unwrap();
}

/// A raw tar header with `name` (and link name) written as bytes, unchecked.
fn raw(kind: tar::EntryType, name: &str, link: &str, size: u64) -> tar::Header {
    let mut h = tar::Header::new_old();
    h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(size);
    h.set_cksum();
    h
}

#[test]
fn hostile_archives_stay_inside_the_new_zone() {
    let a = Env::new();
    let out = tempfile::tempdir().unwrap();
    let file = exported(&a, out.path());
    let b = Env::new();
    b.ok(&["template", "create", "host", "--from", "host"]);
    let outside = out.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let target = outside.to_str().unwrap().to_string();
    let cases: Vec<(&str, Vec<Extra>, &str)> = vec![
        (
            "dotdot",
            vec![(
                raw(tar::EntryType::Regular, "layer/../../pwned", "", 1),
                b"x".to_vec(),
            )],
            "plain relative",
        ),
        (
            "absolute",
            vec![(
                raw(tar::EntryType::Regular, "/tmp/pwned", "", 1),
                b"x".to_vec(),
            )],
            "plain relative",
        ),
        (
            "hardlink-out",
            vec![(
                raw(tar::EntryType::Link, "layer/evil", "/etc/passwd", 0),
                Vec::new(),
            )],
            "plain relative",
        ),
        (
            "hardlink-template",
            vec![(
                raw(tar::EntryType::Link, "layer/evil", "config.toml", 0),
                Vec::new(),
            )],
            "outside its own tree",
        ),
        (
            "through-symlink",
            vec![
                (
                    raw(tar::EntryType::Symlink, "layer/sl", &target, 0),
                    Vec::new(),
                ),
                (
                    raw(tar::EntryType::Regular, "layer/sl/pwned", "", 1),
                    b"x".to_vec(),
                ),
            ],
            "not a directory",
        ),
    ];
    for (what, extra, needle) in cases {
        let p = out.path().join(format!("{what}.wzone"));
        with_entries(&file, &p, &extra);
        let r = b
            .run(&["import", p.to_str().unwrap(), "x"])
            .fails(5, "damaged");
        assert!(r.stderr.contains(needle), "{what}: {}", r.stderr);
        nothing_created(&b);
        assert!(entries(&outside).is_empty(), "{what}: wrote outside");
        assert!(!Path::new("/tmp/pwned").exists() && !out.path().join("pwned").exists());
    }
}

/// A small tmpfs, unmounted on drop.
struct Tmpfs(tempfile::TempDir);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_disk_mid_export_leaves_no_file() {
    let a = Env::new();
    a.host_zone("big", &[]);
    a.ok(&["boot", "big"]);
    a.sh("big", "head -c 8388608 /dev/urandom > /root/blob")
        .ok();
    let t = Tmpfs(tempfile::tempdir().unwrap());
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(t.0.path())
        .status()
        .unwrap();
    assert!(st.success(), "mounting a 2 MiB tmpfs");
    let file = t.0.path().join("big.wzone");
    let r = a.run(&["export", "big", file.to_str().unwrap()]);
    assert_eq!(r.code, 9, "{}", r.stderr);
    assert!(r.stderr.contains("zone 'big'"), "{}", r.stderr);
    assert!(entries(t.0.path()).is_empty(), "{:?}", entries(t.0.path()));
    // The zone is thawed and goes on.
    assert_eq!(a.state("big"), "running");
    a.sh("big", "echo ok > /root/after").ok();
}
