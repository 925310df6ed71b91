//! `warren cp -r` through the daemon: a tree into a zone as a tar body and back out
//! as a tar stream (`/1.0/zones/{zone}/files?recursive=true`), with a symlink and a
//! hard link, and hostile streams (`..`, an absolute name, a name through a symlink
//! of the stream) refused whole without writing anything, in the zone or on the host.

mod common;
mod daemon_client;

use std::path::Path;
use std::process::Command;

use common::{require_busybox, Env};
use daemon_client::Daemon;
use serde_json::Value;

/// Run `script` in `zone` through the API; its exit code and stdout.
fn exec(d: &Daemon, zone: &str, script: &str) -> (i64, String) {
    let body = serde_json::json!({ "command": ["/bin/sh", "-c", script] }).to_string();
    let x = d.json("POST", &format!("/1.0/zones/{zone}/exec"), Some(&body), 200);
    (
        x["exit_code"].as_i64().unwrap(),
        x["stdout"].as_str().unwrap().to_string(),
    )
}

/// PUT `tar` (a file) as the tree at `path` in `zone`; the status and the answer.
fn put_tree(d: &Daemon, zone: &str, path: &str, tar: &Path) -> (u16, Value) {
    let out = Command::new("curl")
        .args(["-sS", "-w", "\n%{http_code}", "--unix-socket"])
        .arg(&d.socket)
        .args(["-X", "PUT", "-H", "content-type: application/x-tar"])
        .arg("--data-binary")
        .arg(format!("@{}", tar.display()))
        .arg(format!(
            "http://warren/1.0/zones/{zone}/files?path={path}&recursive=true"
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (
        code.parse().unwrap(),
        serde_json::from_str(body).unwrap_or(Value::String(body.into())),
    )
}

/// A tar stream with raw (possibly hostile) names, as an attacker would write it.
fn hostile(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, link) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_mode(0o644);
        let data: &[u8] = if *kind == tar::EntryType::Regular {
            b"pwned"
        } else {
            b""
        };
        h.set_size(data.len() as u64);
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        h.set_cksum();
        b.append(&h, data).unwrap();
    }
    b.into_inner().unwrap()
}

#[test]
fn a_tree_round_trips_and_hostile_tars_are_refused() {
    let env = Env::new();
    require_busybox();
    env.ok(&["template", "create", "bb", "--busybox"]);
    env.ok(&["create", "dtree1", "--template", "bb"]);
    env.ok(&["install", "dtree1"]);
    let d = Daemon::start(&env, &[]);
    d.json("POST", "/1.0/zones/dtree1/boot", None, 200);

    // A tree on the host: a file, a hard link to it, a relative and an absolute symlink.
    let host = tempfile::tempdir().unwrap();
    let tree = host.path().join("tree");
    std::fs::create_dir_all(tree.join("a")).unwrap();
    std::fs::write(tree.join("a/file"), "hello tree\n").unwrap();
    std::fs::hard_link(tree.join("a/file"), tree.join("a/hard")).unwrap();
    std::os::unix::fs::symlink("a/file", tree.join("rel")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", tree.join("abs")).unwrap();
    let tar_in = host.path().join("in.tar");
    let st = Command::new("tar")
        .arg("-C")
        .arg(host.path())
        .arg("-cf")
        .arg(&tar_in)
        .arg("tree")
        .status()
        .unwrap();
    assert!(st.success());
    let (code, r) = put_tree(&d, "dtree1", "/tree", &tar_in);
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["direction"], "in", "{r}");
    assert_eq!(
        exec(
            &d,
            "dtree1",
            "cat /tree/a/file /tree/a/hard; readlink /tree/rel; readlink /tree/abs"
        ),
        (0, "hello tree\nhello tree\na/file\n/etc/passwd\n".into())
    );

    // Out again as a tar stream: the symlinks stay symlinks (not followed), the files
    // keep their content.
    let (status, _) = d.curl(
        "GET",
        "/1.0/zones/dtree1/files?path=/tree&recursive=true",
        None,
    );
    assert_eq!(status, 200);
    let tar_out = host.path().join("out.tar");
    let st = Command::new("curl")
        .args(["-sS", "-f", "-o"])
        .arg(&tar_out)
        .arg("--unix-socket")
        .arg(&d.socket)
        .arg("http://warren/1.0/zones/dtree1/files?path=/tree&recursive=true")
        .status()
        .unwrap();
    assert!(st.success());
    let back = host.path().join("back");
    std::fs::create_dir(&back).unwrap();
    let st = Command::new("tar")
        .arg("-C")
        .arg(&back)
        .arg("-xf")
        .arg(&tar_out)
        .status()
        .unwrap();
    assert!(st.success());
    for f in ["a/file", "a/hard"] {
        assert_eq!(
            std::fs::read_to_string(back.join("tree").join(f)).unwrap(),
            "hello tree\n",
            "{f}"
        );
    }
    assert_eq!(
        std::fs::read_link(back.join("tree/rel")).unwrap(),
        Path::new("a/file")
    );
    assert_eq!(
        std::fs::read_link(back.join("tree/abs")).unwrap(),
        Path::new("/etc/passwd")
    );

    // Hostile streams: refused whole, nothing written in the zone or on the host.
    let escape = format!("escape-{}", std::process::id());
    let dotdot = format!("tree/../../../../../../tmp/{escape}");
    let absolute = format!("/tmp/{escape}");
    let through = format!("tree/l/tmp/{escape}");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "..",
            hostile(&[
                ("tree/", tar::EntryType::Directory, ""),
                (&dotdot, tar::EntryType::Regular, ""),
            ]),
        ),
        (
            "absolute",
            hostile(&[(&absolute, tar::EntryType::Regular, "")]),
        ),
        (
            "through a symlink",
            hostile(&[
                ("tree/", tar::EntryType::Directory, ""),
                ("tree/l", tar::EntryType::Symlink, "/"),
                (&through, tar::EntryType::Regular, ""),
            ]),
        ),
        (
            "a top that is a symlink to the host's /etc",
            hostile(&[("tree", tar::EntryType::Symlink, "/etc")]),
        ),
        (
            "a hard link out",
            hostile(&[("tree/h", tar::EntryType::Link, "/etc/shadow")]),
        ),
    ];
    for (what, data) in cases {
        let f = host.path().join("hostile.tar");
        std::fs::write(&f, data).unwrap();
        let (code, e) = put_tree(&d, "dtree1", "/evil", &f);
        assert_eq!(code, 400, "{what}: {e}");
        assert_eq!(
            (e["field"].as_str(), e["zone"].as_str()),
            (Some("body"), Some("dtree1")),
            "{what}: {e}"
        );
        assert!(
            !Path::new("/tmp").join(&escape).exists(),
            "{what} wrote on the host"
        );
        assert_eq!(
            exec(
                &d,
                "dtree1",
                &format!("ls -d /evil /tmp/{escape} 2>/dev/null; true")
            ),
            (0, String::new()),
            "{what} wrote in the zone"
        );
    }
    // A body over the API's 1 MiB limit is refused before it is read.
    let big = host.path().join("big.tar");
    std::fs::write(&big, vec![0u8; 2 << 20]).unwrap();
    assert_eq!(put_tree(&d, "dtree1", "/big", &big).0, 413);
    // No spool is left in the state root.
    let left: Vec<_> = std::fs::read_dir(env.root())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".files-"))
        .collect();
    assert!(left.is_empty(), "spools left: {left:?}");
    d.json("POST", "/1.0/zones/dtree1/halt", None, 200);
}
