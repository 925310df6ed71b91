//! Class 4 (issue 14): a hostile image against host users.

use super::*;

/// A root filesystem an attacker would ship: busybox, a setuid-root `id`, a `cat`
/// with cap_dac_read_search, device nodes with /dev/null's and /dev/zero's numbers
/// (mode 666), and a `nobody` user.
fn hostile_image(dir: &Path) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for d in ["dev", "etc", "srv", "proc", "sys", "tmp", "root"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::copy(common::require_busybox(), bin.join("busybox")).unwrap();
    for x in [
        "sh", "sleep", "su", "id", "cat", "ls", "cp", "chmod", "echo",
    ] {
        std::os::unix::fs::symlink("busybox", bin.join(x)).unwrap();
    }
    std::fs::write(
        dir.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(dir.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n").unwrap();
    let id = dir.join("srv/suid-id");
    std::fs::copy("/usr/bin/id", &id).unwrap();
    std::fs::set_permissions(&id, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let cat = dir.join("srv/fcap-cat");
    std::fs::copy("/usr/bin/cat", &cat).unwrap();
    let o = Command::new("setcap")
        .args(["cap_dac_read_search+ep"])
        .arg(&cat)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "setcap on the image's cat: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    for (name, minor) in [("nullnode", "3"), ("zeronode", "5")] {
        let o = Command::new("mknod")
            .args(["-m", "666"])
            .arg(dir.join("srv").join(name))
            .args(["c", "1", minor])
            .output()
            .unwrap();
        assert!(o.status.success(), "mknod {name}");
    }
}

#[test]
fn class4_hostile_image_and_host_users() {
    require_root();
    require_tool(
        "setpriv",
        "util-linux: it runs probes as an unprivileged host user",
    );
    require_tool("setcap", "libcap2-bin: the image's file capability");
    require_tool("tar", "the --from-tar template");
    let env = Env::new();
    // The state root itself is left as the operator made it (/var/lib/warren is
    // usually 0755); open it so that only warren's own modes stand between a host
    // user and the templates.
    std::fs::set_permissions(env.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let img = scratch("warren-caller-img-");
    hostile_image(img.path());
    let tar = img.path().with_extension("tar");
    let o = Command::new("tar")
        .args(["--xattrs", "--xattrs-include=*", "-cf"])
        .arg(&tar)
        .arg("-C")
        .arg(img.path())
        .arg(".")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tar: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    struct RmFile(PathBuf);
    impl Drop for RmFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _tar_guard = RmFile(tar.clone());
    env.ok(&[
        "template",
        "create",
        "img",
        "--from-dir",
        img.path().to_str().unwrap(),
    ]);
    env.ok(&[
        "template",
        "create",
        "imgtar",
        "--from-tar",
        tar.to_str().unwrap(),
    ]);
    env.ok(&["create", "hz", "--template", "img"]);
    env.ok(&["install", "hz"]);
    env.ok(&[
        "create",
        "hzn",
        "--template",
        "img",
        "--set",
        "userns=false",
    ]);
    env.ok(&["install", "hzn"]);
    env.ok(&["boot", "hz"]);
    env.ok(&["boot", "hzn"]);
    let root = env.root().display().to_string();

    // Guard: the probes really run unprivileged.
    let g = as_nobody("grep CapEff /proc/self/status; id -u");
    assert!(
        g.stdout.contains("CapEff:\t0000000000000000") && g.stdout.contains("65534"),
        "the unprivileged probe shell is not unprivileged: {g:?}"
    );
    let mut t = Table::new("4 image/users");

    let mut modes = Vec::new();
    let mut ok = true;
    for e in std::fs::read_dir(env.root()).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            let m = e.metadata().unwrap().mode() & 0o7777;
            ok &= m == 0o700;
            modes.push(format!("{}:{m:o}", e.file_name().to_string_lossy()));
        }
    }
    modes.sort();
    t.row(
        "every directory directly inside the state root",
        "0700",
        ok && modes.len() >= 4,
        modes.join(" "),
    );

    let tpl = format!("{root}/templates/img/root/srv");
    t.denied_to_nobody(
        "host user execs the image's setuid-root id in templates/",
        &format!("{tpl}/suid-id"),
    );
    t.denied_to_nobody(
        "host user writes the image's char node (1:3) in templates/",
        &format!("echo x > {tpl}/nullnode && echo REACHED"),
    );
    let r = as_nobody(&format!("head -c 4 {tpl}/zeronode | od -c"));
    t.run_row(
        "host user reads the image's char node (1:5) in templates/",
        "EACCES",
        r.stderr.contains("Permission denied") && !r.stdout.contains("\\0"),
        &r,
    );
    let r = as_nobody(&format!("{tpl}/fcap-cat /etc/shadow | head -c 20"));
    t.run_row(
        "host user runs the image's cap_dac_read_search cat on /etc/shadow",
        "EACCES",
        r.stderr.contains("Permission denied") && !r.stdout.contains("root:"),
        &r,
    );
    t.denied_to_nobody(
        "host user lists templates/",
        &format!("ls {root}/templates/ && echo REACHED"),
    );
    t.denied_to_nobody(
        "host user execs the setuid id of a --from-tar template",
        &format!("{root}/templates/imgtar/root/srv/suid-id"),
    );

    // A setuid file the zone's root planted in its own layer.
    let r = env.run(&[
        "login",
        "hz",
        "--",
        "/bin/sh",
        "-c",
        "cp /bin/busybox /srv/planted && chmod 4755 /srv/planted && echo planted",
    ]);
    assert!(r.stdout.contains("planted"), "{r:?}");
    t.denied_to_nobody(
        "host user execs a setuid file the zone planted (zones/hz/upper)",
        &format!("{root}/zones/hz/upper/srv/planted id"),
    );
    t.denied_to_nobody(
        "host user reads a zone's config",
        &format!("cat {root}/zones/hz/config.toml && echo REACHED"),
    );
    let init = env.init_pid("hz");
    t.denied_to_nobody(
        "host user walks /proc/<zone init>/root",
        &format!("ls /proc/{init}/root/srv && echo REACHED"),
    );

    // userns=false: a zone process runs as host uid 65534 (the image's nobody), and
    // /proc/<pid>/root of a process of one's own uid is open to that user.
    let r = env.run(&[
        "login",
        "hzn",
        "--",
        "/bin/sh",
        "-c",
        "su -s /bin/sh nobody -c 'exec sleep 1007' </dev/null >/dev/null 2>&1 & echo started",
    ]);
    assert!(r.stdout.contains("started"), "{r:?}");
    let pid = find_in_zone(&env, "hzn", "sleep 1007")
        .unwrap_or_else(|| panic!("no `sleep 1007` running as nobody in hzn"));
    let uid = std::fs::metadata(format!("/proc/{pid}")).unwrap().uid();
    assert_eq!(uid, 65534, "the zone's nobody is not host uid 65534");
    let r = as_nobody(&format!(
        "head -c 4 /proc/{pid}/root/srv/zeronode | od -An -c; echo x > /proc/{pid}/root/srv/nullnode && echo WROTE-NODE"
    ));
    t.run_row(
        "userns=false: host nobody opens the image's nodes via /proc/<zone nobody pid>/root",
        "EACCES (no usable device node from an image)",
        !r.stdout.contains("\\0") && !r.stdout.contains("WROTE-NODE"),
        &r,
    );
    let r = as_nobody(&format!("/proc/{pid}/root/srv/suid-id"));
    t.run_row(
        "userns=false: host nobody execs the image's setuid id via that /proc/<pid>/root",
        "no euid 0",
        !output(&r).contains("euid=0") && r.code != -1,
        &r,
    );

    // Pre-existing open directories are tightened by the next command.
    for d in ["templates", "zones", "locks", "userns"] {
        let p = env.root().join(d);
        if p.exists() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    std::fs::create_dir_all(env.root().join("leases-extra")).unwrap();
    std::fs::set_permissions(
        env.root().join("leases-extra"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    env.ok(&["list"]);
    let mut modes = Vec::new();
    let mut ok = true;
    for e in std::fs::read_dir(env.root()).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            let m = e.metadata().unwrap().mode() & 0o7777;
            ok &= m == 0o700;
            modes.push(format!("{}:{m:o}", e.file_name().to_string_lossy()));
        }
    }
    modes.sort();
    t.row(
        "state root dirs opened to 0755 (and a new one), then `warren list`",
        "all back to 0700",
        ok && modes.iter().any(|m| m.starts_with("leases-extra")),
        modes.join(" "),
    );
    t.finish();
}
