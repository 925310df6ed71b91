//! Class 3 through `warren cp`: a running zone plants symlinks at the paths an
//! operator copies to and from, pointing at the test's victim directory (a host path
//! that does not exist inside the zone, so a link followed within the zone finds
//! nothing there). Nothing of the victim may be read into a copy, and nothing may be
//! written into it.

use std::fs;
use std::path::Path;

use super::common::Env;
use super::{short, Table, Victim};

pub fn cp(env: &Env, v: &Victim, t: &mut Table) {
    env.host_zone("cpz", &[]);
    env.ok(&["boot", "cpz"]);
    let victim = v.path().display().to_string();
    let plant = format!(
        "set -e; mkdir -p /srv/tree /srv/in; \
         ln -s {victim} /srv/dir-link; ln -s {victim}/secret /srv/secret-link; \
         ln -s {victim} /srv/tree/escape; echo zone > /srv/tree/own; \
         ln -s {victim} /srv/in/escape; ln -s /proc/1/root{victim}/secret /srv/magic-link"
    );
    let r = env.sh("cpz", &plant);
    assert_eq!(r.code, 0, "planting the links: {r:?}");
    let work = tempfile::Builder::new()
        .prefix("warren-cp-escape-")
        .tempdir_in("/tmp")
        .unwrap();
    let src = work.path().join("payload");
    fs::write(&src, b"payload\n").unwrap();
    let tree = work.path().join("escape");
    fs::create_dir_all(&tree).unwrap();
    fs::write(tree.join("planted"), b"payload\n").unwrap();
    let src_s = src.display().to_string();

    for (attempt, from) in [
        (
            "cp out of a zone link to a host file",
            "cpz:/srv/secret-link",
        ),
        (
            "cp out of a zone link through /proc/1/root",
            "cpz:/srv/magic-link",
        ),
    ] {
        let out = work.path().join("out");
        let _ = fs::remove_file(&out);
        let r = env.run(&["cp", from, &out.display().to_string()]);
        let got = fs::read(&out).unwrap_or_default();
        t.add(
            3,
            attempt,
            "resolved inside the zone (nothing there): the host secret is never copied",
            r.code != 0
                && !String::from_utf8_lossy(&got).contains("host secret")
                && v.untouched().is_ok(),
            short(&r),
        );
    }
    let r = env.run(&["cp", &src_s, "cpz:/srv/dir-link/"]);
    t.add(
        3,
        "cp a file into a zone dir that is a link to a host dir",
        "the link resolves inside the zone: no such dir there, refused; host dir untouched",
        r.code != 0 && r.stderr.contains("no such directory") && v.untouched().is_ok(),
        short(&r),
    );
    let r = env.run(&["cp", &src_s, "cpz:/srv/secret-link"]);
    t.add(
        3,
        "cp a file onto a zone path that is a link to a host file",
        "the zone's link is replaced or refused; the host file keeps its bytes",
        v.untouched().is_ok(),
        short(&r),
    );
    let r = env.run(&["cp", "-r", &tree.display().to_string(), "cpz:/srv/in/"]);
    t.add(
        3,
        "cp -r a tree whose top name meets a zone link to a host dir",
        "written within the zone only; host dir untouched",
        v.untouched().is_ok(),
        short(&r),
    );
    let out = work.path().join("tree-out");
    let r = env.run(&["cp", "-r", "cpz:/srv/tree", &out.display().to_string()]);
    let link = fs::symlink_metadata(out.join("escape")).map(|m| m.file_type().is_symlink());
    t.add(
        3,
        "cp -r out of a zone tree holding a link to a host dir",
        "copied as a link (never followed); host dir untouched",
        r.code == 0
            && link.is_ok_and(|l| l)
            && fs::read(out.join("own")).is_ok_and(|b| b == b"zone\n")
            && v.untouched().is_ok(),
        short(&r),
    );
    // The zone made a setuid-root file: out of the zone it loses the set-id bit.
    let r = env.sh("cpz", "cp /bin/true /srv/suid && chmod 4755 /srv/suid");
    assert_eq!(r.code, 0, "{r:?}");
    let out = work.path().join("suid");
    let r = env.run(&["cp", "cpz:/srv/suid", &out.display().to_string()]);
    let mode = fs::metadata(&out)
        .map(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.permissions().mode()
        })
        .ok();
    t.add(
        3,
        "cp out a setuid file the zone made",
        "copied without its set-id bit",
        r.code == 0 && mode.is_some_and(|m| m & 0o7000 == 0),
        format!("{} mode {:?}", short(&r), mode.map(|m| format!("{m:o}"))),
    );
    let leftovers = fs::read_dir(work.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".warren-cp"))
        .count();
    t.add(
        3,
        "cp out: the temporary directory beside the destination",
        "removed after every copy, also a refused one",
        leftovers == 0 && Path::new(work.path()).exists(),
        format!("{leftovers} left"),
    );
    // The same links while the zone is halted: its root is built by the helper in a
    // mount namespace of its own, and the links still resolve inside it.
    env.ok(&["halt", "cpz"]);
    let r = env.run(&["cp", &src_s, "cpz:/srv/dir-link/"]);
    t.add(
        3,
        "halted zone: cp a file into a zone dir that is a link to a host dir",
        "resolved inside the zone's root: refused; host dir untouched",
        r.code != 0 && v.untouched().is_ok(),
        short(&r),
    );
    let out = work.path().join("halted-out");
    let r = env.run(&[
        "cp",
        "cpz:/srv/tree/escape/secret",
        &out.display().to_string(),
    ]);
    let got = fs::read(&out).unwrap_or_default();
    t.add(
        3,
        "halted zone: cp out through a zone link to a host dir",
        "resolved inside the zone's root (nothing there); the host secret is never copied",
        r.code != 0 && !String::from_utf8_lossy(&got).contains("host secret"),
        short(&r),
    );
    env.ok(&["delete", "--force", "cpz"]);
}
