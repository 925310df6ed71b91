//! Class 3 from the image side: `template create` from directories and tars whose
//! `dev`, `var`, `tmp`… are links or files, whose names climb out with `../` or are
//! absolute, or whose links point at the test's victim directory.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};

use super::common::Env;
use super::{host_root_clean, short, Table, Victim};

/// A minimal root directory: what the image gives, plus `bin/sh` from the host for
/// nothing (the image is never booted).
fn image_dir(base: &Path, name: &str, plant: impl FnOnce(&Path)) -> PathBuf {
    let d = base.join(name);
    fs::create_dir_all(d.join("bin")).unwrap();
    fs::write(d.join("bin/hello"), b"#!/bin/sh\necho hi\n").unwrap();
    plant(&d);
    d
}

/// One raw tar entry: name, type, link name, data.
type TarEntry = (String, tar::EntryType, String, Vec<u8>);

/// A tar whose entries carry raw names (the tar crate's builder refuses `..`).
fn raw_tar(path: &Path, entries: &[(&str, tar::EntryType, &str, &[u8])]) {
    let mut b = tar::Builder::new(fs::File::create(path).unwrap());
    for (name, kind, link, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_size(data.len() as u64);
        h.set_mode(if *kind == tar::EntryType::Directory {
            0o755
        } else {
            0o644
        });
        let old = h.as_old_mut();
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.finish().unwrap();
}

pub(super) fn images(env: &Env, v: &Victim, t: &mut Table) {
    let base = env.root().join("images");
    let vp = v.path().to_str().unwrap().to_string();
    let refuse = |t: &mut Table, attempt, name: &str, needle: &str, plant: &dyn Fn(&Path)| {
        let d = image_dir(&base, name, plant);
        let r = env.run(&[
            "template",
            "create",
            name,
            "--from-dir",
            d.to_str().unwrap(),
        ]);
        let ok = r.code != 0
            && r.stderr.contains(needle)
            && v.untouched().is_ok()
            && host_root_clean()
            && !env.root().join("templates").join(name).exists();
        t.add(
            3,
            attempt,
            "template refused, naming the entry; nothing made outside",
            ok,
            short(&r),
        );
    };
    refuse(t, "image dev -> /", "devlink", "/dev is a symlink", &|d| {
        symlink("/", d.join("dev")).unwrap()
    });
    refuse(
        t,
        "image var -> host dir",
        "varlink",
        "/var is a symlink",
        &|d| symlink(&vp, d.join("var")).unwrap(),
    );
    refuse(
        t,
        "image tmp is a file",
        "tmpfile",
        "/tmp is not a directory",
        &|d| fs::write(d.join("tmp"), b"x").unwrap(),
    );
    refuse(
        t,
        "image proc -> host dir",
        "proclink",
        "/proc is a symlink",
        &|d| symlink(&vp, d.join("proc")).unwrap(),
    );
    refuse(
        t,
        "image run -> ../../..",
        "runlink",
        "/run is a symlink",
        &|d| symlink("../../..", d.join("run")).unwrap(),
    );
    refuse(
        t,
        "image sys is an empty file",
        "sysfile",
        "/sys is not a directory",
        &|d| fs::write(d.join("sys"), b"").unwrap(),
    );

    // `etc` may be a link (some images do it); nothing is ever written through it.
    let d = image_dir(&base, "etclink", |d| {
        symlink(&vp, d.join("etc")).unwrap();
        symlink(format!("{vp}/secret"), d.join("bin/shadow")).unwrap();
        fs::create_dir(d.join("root")).unwrap();
        symlink(&vp, d.join("root/away")).unwrap();
    });
    let r = env.run(&[
        "template",
        "create",
        "etclink",
        "--from-dir",
        d.to_str().unwrap(),
    ]);
    let troot = env.root().join("templates/etclink/root");
    let kept = fs::read_link(troot.join("bin/shadow")).ok() == Some(format!("{vp}/secret").into())
        && fs::read_link(troot.join("etc")).ok() == Some(PathBuf::from(&vp));
    t.add(
        3,
        "image etc -> host dir, absolute links inside",
        "accepted, links copied as links, host dir untouched",
        r.code == 0 && kept && v.untouched().is_ok(),
        short(&r),
    );
    let r = env.run(&["template", "delete", "etclink"]);
    t.add(
        3,
        "delete a template full of links to the host",
        "template gone, the links' targets untouched",
        r.code == 0 && v.untouched().is_ok(),
        short(&r),
    );

    // Tars: `../` names, absolute names, a symlinked root/, a hard link out.
    let vname = v.path().file_name().unwrap().to_str().unwrap();
    let tars: Vec<(&'static str, Vec<TarEntry>)> = vec![
        (
            "tar entry ../../../../<victim>/dotdot",
            vec![(
                format!("../../../../{vname}/dotdot"),
                tar::EntryType::Regular,
                String::new(),
                b"x".to_vec(),
            )],
        ),
        (
            "tar entry with an absolute name",
            vec![(
                format!("{vp}/abs"),
                tar::EntryType::Regular,
                String::new(),
                b"x".to_vec(),
            )],
        ),
        (
            "tar: root -> host dir, then root/planted",
            vec![
                (
                    "root".into(),
                    tar::EntryType::Symlink,
                    vp.clone(),
                    Vec::new(),
                ),
                (
                    "root/planted".into(),
                    tar::EntryType::Regular,
                    String::new(),
                    b"x".to_vec(),
                ),
            ],
        ),
        (
            "tar: hard link to a host file",
            vec![(
                "bin/hl".into(),
                tar::EntryType::Link,
                format!("../../../../{vname}/secret"),
                Vec::new(),
            )],
        ),
        (
            "tar: dev -> host dir",
            vec![(
                "dev".into(),
                tar::EntryType::Symlink,
                vp.clone(),
                Vec::new(),
            )],
        ),
    ];
    for (i, (attempt, entries)) in tars.iter().enumerate() {
        let path = base.join(format!("t{i}.tar"));
        let e: Vec<(&str, tar::EntryType, &str, &[u8])> = entries
            .iter()
            .map(|(n, k, l, d)| (n.as_str(), *k, l.as_str(), d.as_slice()))
            .collect();
        raw_tar(&path, &e);
        let name = format!("tar{i}");
        let r = env.run(&[
            "template",
            "create",
            &name,
            "--from-tar",
            path.to_str().unwrap(),
        ]);
        // Refused, or made without anything outside (and without a link to the secret).
        let inside_secret = env.root().join("templates").join(&name).join("root/bin/hl");
        let linked = fs::metadata(&inside_secret)
            .map(|m| m.ino() == fs::metadata(v.path().join("secret")).unwrap().ino())
            .unwrap_or(false);
        let victim = v.untouched();
        let ok = victim.is_ok() && host_root_clean() && !linked;
        let leaked = victim.err().unwrap_or_default();
        t.add(
            3,
            attempt,
            "refused or contained; nothing made or linked outside",
            ok,
            format!("{} {leaked}", short(&r)),
        );
    }
}
