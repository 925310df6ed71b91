//! Class 1 (issue 14): the caller's descriptors and working directory.

use super::*;

/// The checks that run inside a zone booted (and logged into) by a careless caller.
fn caller_rows_for_zone(t: &mut Table, env: &Env, held: &Held, zone: &str, tag: &str, svc: &str) {
    let mode = if tag == "userns" {
        "default zone"
    } else {
        "userns=false zone"
    };
    // Boot while holding the descriptors, from the host directory.
    let mut c = env.cmd();
    c.args(["boot", zone]);
    held.give(&mut c);
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "boot {zone} with the caller's descriptors: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let r = env.run(&["login", zone, "--", "python3", "-c", FD_LIST, "1"]);
    let (ok, what) = fds_clean(&r.stdout, held);
    t.row(
        format!("{mode}: boot holding dir/file/socket/pipe on 7-10,200: init's fds"),
        "only 0-2 (and init's own /proc handle)",
        ok && r.code == 0,
        format!("{what} {}", r.stderr),
    );

    let r = env.sh(
        zone,
        "for p in /proc/1/fd/7/.. /proc/1/fd/200/. /proc/1/fd/7/../..; do ls $p >/dev/null 2>&1 && echo REACHED $p; done; \
         cat /proc/1/fd/8 2>/dev/null && echo REACHED-file; cat /proc/1/fd/7/secret 2>/dev/null; echo walked",
    );
    let out = output(&r);
    t.run_row(
        format!("{mode}: walk the host dir via /proc/1/fd/7/.. , 200, read fd 8"),
        "no such descriptor",
        out.contains("walked") && !out.contains("REACHED") && !out.contains("host-secret"),
        &r,
    );

    let planted = held.dir.path().join(format!("planted-{tag}"));
    let r = env.sh(
        zone,
        &format!("touch /proc/1/fd/7/planted-{tag} /proc/1/fd/200/planted-{tag} 2>&1; echo tried"),
    );
    t.row(
        format!("{mode}: write into the host dir via /proc/1/fd/7 and 200"),
        "fails; nothing created on the host",
        !planted.exists() && output(&r).contains("tried"),
        format!("host file exists: {}; {}", planted.exists(), summary(&r)),
    );

    let r = env.sh(
        zone,
        "echo cwd=$(readlink /proc/1/cwd) same=$([ \"$(stat -L -c %d:%i /proc/1/cwd)\" = \"$(stat -c %d:%i /)\" ] && echo yes || echo no)",
    );
    let out = output(&r);
    t.run_row(
        format!("{mode}: init's cwd (boot run from a host dir)"),
        "the zone's /",
        field(&out, "cwd") == Some("/") && field(&out, "same") == Some("yes"),
        &r,
    );

    let svc_fds = find_in_zone(env, zone, svc).map(host_fds);
    let ok = svc_fds
        .as_ref()
        .is_some_and(|v| v.iter().map(|(n, _)| *n).collect::<Vec<_>>() == vec![0, 1, 2]);
    t.row(
        format!("{mode}: a service started by init ({svc}), from the host"),
        "exactly fds 0-2",
        ok,
        format!("{svc_fds:?}"),
    );

    // Login holding the descriptors, from the host directory.
    let mut c = env.cmd();
    c.args(["login", zone, "--", "python3", "-c", FD_LIST, "self"]);
    held.give(&mut c);
    let o = c.output().unwrap();
    let listing = String::from_utf8_lossy(&o.stdout).into_owned();
    let (ok, what) = fds_clean(&listing, held);
    t.row(
        format!("{mode}: login holding the same fds: the command's fds"),
        "only 0-2 (and the listing's own)",
        ok && o.status.success(),
        format!("{what} {}", String::from_utf8_lossy(&o.stderr)),
    );

    let mut c = env.cmd();
    c.args([
        "login",
        zone,
        "--",
        "/bin/sh",
        "-c",
        "echo cwd=$(pwd) link=$(readlink /proc/self/cwd) same=$([ \"$(stat -c %d:%i .)\" = \"$(stat -c %d:%i /)\" ] && echo yes || echo no); \
         for n in 7 8 9 10 200; do ls /proc/$$/fd/$n/.. >/dev/null 2>&1 && echo REACHED $n; done; echo walked",
    ]);
    held.give(&mut c);
    let o = c.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    t.row(
        format!("{mode}: login from a host cwd holding fds: cwd, /proc/$$/fd/N/.."),
        "cwd is the zone's /; no fd 7-10,200",
        field(&out, "cwd") == Some("/")
            && field(&out, "link") == Some("/")
            && field(&out, "same") == Some("yes")
            && out.contains("walked")
            && !out.contains("REACHED"),
        out,
    );
}

fn oci_rows(t: &mut Table) {
    let oci = Oci::new();
    // For --preserve-fds: a token file on 3 and a host directory on 4.
    let tok_dir = scratch("warren-caller-oci-tok-");
    std::fs::write(tok_dir.path().join("token"), "passed\n").unwrap();
    let tok = File::open(tok_dir.path().join("token")).unwrap();
    let tdir = File::open(tok_dir.path()).unwrap();
    let held = Held::new(vec![
        (3, dup_high(tok.as_raw_fd())),
        (4, dup_high(tdir.as_raw_fd())),
    ]);
    let list = "ls -l /proc/self/fd; echo cwd=$(readlink /proc/self/cwd); ls /proc/self/cwd/ | tr '\\n' ' '; true";

    oci.spec(&["sh", "-c", list]);
    let mut c = oci.cmd();
    c.args(["run", "--bundle", &oci.bundle(), "fd-run"]);
    held.give(&mut c);
    let (code, out) = oci.run(c);
    let (ok, what) = fds_clean(&out, &held);
    t.row(
        "oci run holding fds 3,4,7-10,200 (no --preserve-fds): the process's fds",
        "only 0-2 (and the listing's own)",
        ok && code == 0,
        what,
    );
    t.row(
        "oci run from a host cwd: the process's cwd",
        "the container's / (its rootfs)",
        code == 0
            && field(&out, "cwd") == Some("/")
            && out.contains("bin dev etc proc")
            && !out.contains("secret"),
        format!(
            "cwd={:?}; its / lists: {}",
            field(&out, "cwd"),
            out.lines().last().unwrap_or_default()
        ),
    );

    let mut c = oci.cmd();
    c.args([
        "run",
        "--preserve-fds",
        "1",
        "--bundle",
        &oci.bundle(),
        "fd-keep",
    ]);
    held.give(&mut c);
    oci.spec(&[
        "sh",
        "-c",
        "ls -l /proc/self/fd; echo fd3=$(readlink /proc/self/fd/3); ls /proc/self/fd/4/ >/dev/null 2>&1 && echo HAS-4; true",
    ]);
    let (code, out) = oci.run(c);
    let numbers: Vec<&str> = out
        .lines()
        .filter_map(|l| {
            l.split_once(" -> ")
                .and_then(|(a, _)| a.split_whitespace().last())
        })
        .collect();
    t.row(
        "oci run --preserve-fds 1 holding 3,4,7-10,200",
        "fd 3 (the passed file) and not 4 or 7+",
        code == 0
            && field(&out, "fd3").is_some_and(|l| l.ends_with("/token"))
            && !out.contains("HAS-4")
            && numbers.iter().all(|n| {
                ["0", "1", "2", "3"].contains(n) || {
                    // the listing's own descriptor (ls opens /proc/self/fd as 3 or 4)
                    out.lines().any(|l| l.contains(&format!(" {n} -> /proc/")))
                }
            }),
        format!("fds {numbers:?} {}", short(&out, 200)),
    );

    // create (holding the fds) + start: the process that runs later has none of them.
    oci.spec(&[
        "sh",
        "-c",
        "ls -l /proc/self/fd > /tmp/fds; exec sleep 1000",
    ]);
    let mut c = oci.cmd();
    c.args(["create", "--bundle", &oci.bundle(), "fd-created"]);
    held.give(&mut c);
    let (code, out) = oci.run(c);
    assert_eq!(code, 0, "oci create: {out}");
    let mut c = oci.cmd();
    c.args(["start", "fd-created"]);
    held.give(&mut c);
    let (code, out) = oci.run(c);
    assert_eq!(code, 0, "oci start: {out}");
    let fds_file = oci.dir.path().join("bundle/rootfs/tmp/fds");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fds_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let listing = std::fs::read_to_string(&fds_file).unwrap_or_default();
    let (ok, what) = fds_clean(&listing, &held);
    t.row(
        "oci create + start, both holding fds: the container's process",
        "only 0-2 (and the listing's own)",
        ok,
        what,
    );

    let mut c = oci.cmd();
    c.args([
        "exec",
        "fd-created",
        "sh",
        "-c",
        "ls -l /proc/self/fd; true",
    ]);
    held.give(&mut c);
    let (code, out) = oci.run(c);
    let (ok, what) = fds_clean(&out, &held);
    t.row(
        "oci exec holding fds into the running container",
        "only 0-2 (and the listing's own)",
        ok && code == 0,
        what,
    );

    let mut c = oci.cmd();
    c.args([
        "exec",
        "--preserve-fds",
        "1",
        "fd-created",
        "sh",
        "-c",
        "echo fd3=$(readlink /proc/self/fd/3); for n in 4 7 8 9 10 200; do [ -e /proc/self/fd/$n ] && echo HAS-$n; done; true",
    ]);
    held.give(&mut c);
    let (code, out) = oci.run(c);
    t.row(
        "oci exec --preserve-fds 1 holding 3,4,7-10,200",
        "fd 3 only",
        code == 0
            && field(&out, "fd3").is_some_and(|l| l.ends_with("/token"))
            && !out.contains("HAS-"),
        format!("exit {code} {out}"),
    );
    let mut c = oci.cmd();
    c.args(["delete", "--force", "fd-created"]);
    let _ = oci.run(c);

    // A created container's process 1 is the runtime itself, waiting for `start`; a
    // process exec'd into the container meanwhile shares its pid namespace and may
    // look at its descriptors. Walking up from them must not reach the host (the
    // probe looks for this test's own directory, which holds `warren-oci`).
    let (wcode, wout) = created_container_exec(
        &oci,
        "fd-wait",
        "for f in /proc/1/fd/*; do for up in .. ../..; do ls \"$f/$up\" 2>/dev/null | grep -qx warren-oci && echo \"REACHED $f/$up\"; done; done; echo walked",
        None,
    );
    let (code, out) = created_container_exec(
        &oci,
        "fd-held",
        "for f in /proc/1/fd/*; do echo \"${f##*/} $(readlink $f) $(stat -L -c %d:%i $f)\"; done; cat /proc/1/fd/7/secret /proc/1/fd/8; echo listed",
        Some(&held),
    );
    let leaked: Vec<&str> = out
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(2)
                .is_some_and(|id| held.ids.iter().any(|h| h == id))
        })
        .collect();
    t.row(
        "oci create holding the caller's fds; exec into the created container: /proc/1/fd",
        "none of the caller's descriptors",
        leaked.is_empty() && !out.contains("host-secret") && (out.contains("listed") || code != 0),
        format!(
            "exit {code} {}caller's fds on process 1: {:?}",
            if out.contains("host-secret") {
                "read the caller's secret through /proc/1/fd/7; "
            } else {
                ""
            },
            leaked
                .iter()
                .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join("->"))
                .collect::<Vec<_>>()
        ),
    );
    t.row(
        "oci exec into a created (not started) container: walk /proc/1/fd/N/.. of its process 1",
        "no host directory reachable",
        !wout.contains("REACHED") && (wout.contains("walked") || wcode != 0),
        format!("exit {wcode} {wout}"),
    );
}

#[test]
fn class1_caller_descriptors_and_cwd() {
    require_root();
    let env = Env::new();
    let held = Held::new(Vec::new());
    // Control: the held objects really reach a plain child at their numbers, so a
    // clean listing in the zone means warren closed them.
    let mut c = Command::new("/bin/sh");
    c.args(["-c", "ls /proc/$$/fd | tr '\\n' ' '"]);
    held.give(&mut c);
    let o = c.output().unwrap();
    let seen = String::from_utf8_lossy(&o.stdout).into_owned();
    for n in held.targets() {
        assert!(
            seen.split_whitespace().any(|w| w == n.to_string()),
            "control: fd {n} did not reach a plain child ({seen}); the test cannot judge warren"
        );
    }

    let mut t = Table::new("1 caller fds");
    env.host_zone("fdz", &["services=[\"sleep 1001\"]"]);
    env.host_zone("fdn", &["userns=false", "services=[\"sleep 1002\"]"]);
    caller_rows_for_zone(&mut t, &env, &held, "fdz", "userns", "sleep 1001");
    caller_rows_for_zone(&mut t, &env, &held, "fdn", "host", "sleep 1002");
    login_on_terminal_with_fds(&mut t, &env, &held, "fdz");

    // `reboot` is another way to start init.
    let mut c = env.cmd();
    c.args(["reboot", "fdz"]);
    held.give(&mut c);
    let o = c.output().unwrap();
    let r = env.run(&["login", "fdz", "--", "python3", "-c", FD_LIST, "1"]);
    let (ok, what) = fds_clean(&r.stdout, &held);
    t.row(
        "reboot holding the fds, from a host cwd: init's fds",
        "only 0-2 (and init's own /proc handle)",
        ok && o.status.success() && r.code == 0,
        format!("{what} {}", String::from_utf8_lossy(&o.stderr)),
    );

    // Other ways a zone's first process starts: a custom init, and a zone whose
    // layer is a loop-mounted image (warren opens more descriptors of its own).
    env.host_zone("fdi", &["init=[\"/bin/sleep\", \"1009\"]"]);
    env.host_zone("fdq", &["disk.max=64M", "services=[\"sleep 1010\"]"]);
    for (zone, what, tag) in [
        ("fdi", "a custom init (/bin/sleep)", "/bin/sleep 1009"),
        ("fdq", "a disk.max zone's service", "sleep 1010"),
    ] {
        let mut c = env.cmd();
        c.args(["boot", zone]);
        held.give(&mut c);
        let o = c.output().unwrap();
        let fds = if o.status.success() {
            find_in_zone(&env, zone, tag).map(host_fds)
        } else {
            None
        };
        t.row(
            format!("boot holding fds: {what}, from the host"),
            "exactly fds 0-2",
            fds.as_ref()
                .is_some_and(|v| v.iter().map(|(n, _)| *n).collect::<Vec<_>>() == vec![0, 1, 2]),
            format!("{fds:?} {}", String::from_utf8_lossy(&o.stderr)),
        );
    }
    let r = env.run(&["login", "fdq", "--", "python3", "-c", FD_LIST, "1"]);
    let (ok, what) = fds_clean(&r.stdout, &held);
    t.row(
        "boot holding fds: a disk.max zone's init",
        "only 0-2 (and init's own /proc handle)",
        ok && r.code == 0,
        format!("{what} {}", r.stderr),
    );
    oci_rows(&mut t);
    t.finish();
}

/// `warren login` on a terminal (the pty path) from a shell that holds a host
/// directory and a host file on 7, 8 and 200.
fn login_on_terminal_with_fds(t: &mut Table, env: &Env, held: &Held, zone: &str) {
    let screen = held.dir.path().join("screen");
    let body = format!(
        "exec 7<\"$T\"; exec 8<>\"$T/secret\"; exec 200<\"$T\"; cd \"$T\"; \"$W\" login {zone} -- python3 -c \"$FDL\" self"
    );
    let screen_f = File::create(&screen).unwrap();
    let mut child = Child(
        Command::new("script")
            .args(["-qec", &format!("bash -c '{body}'"), "/dev/null"])
            .env("W", WARREN)
            .env("T", held.dir.path())
            .env("FDL", FD_LIST)
            .env("WARREN_ROOT", env.root())
            .env("WARREN_RUN_DIR", env.root().join("run"))
            .env("WARREN_OCI_ROOT", env.root().join("oci"))
            .stdin(Stdio::piped())
            .stdout(screen_f.try_clone().unwrap())
            .stderr(screen_f)
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "script did not finish in 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let listing = std::fs::read_to_string(&screen)
        .unwrap_or_default()
        .replace('\r', "");
    let (ok, what) = fds_clean(&listing, held);
    let on_pty = listing.lines().any(|l| l.starts_with("0 /dev/pts/"));
    t.row(
        "login on a terminal (pty path) from a shell holding fds 7, 8, 200",
        "only 0-2 on the zone pty (and the listing's own)",
        ok && on_pty,
        what,
    );
}
