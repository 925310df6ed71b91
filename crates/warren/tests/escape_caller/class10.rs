//! Class 10 (issue 14): the state root's locks and the host's warren binaries.

use super::*;

fn sha256(path: &Path) -> String {
    let o = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(o.status.success(), "sha256sum {}", path.display());
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Harmless probes of /proc/1/exe: chmod to its mode, chown to its owner, open for
/// appending (nothing written), truncate to its size, remove a user xattr it does not
/// have (ENODATA would mean the zone may write its xattrs).
const EXE_PROBES: &str = r#"
import os
p = "/proc/1/exe"
st = os.stat(p)
r = ["exe=%d:%d" % (st.st_dev, st.st_ino), "ro=%d" % (os.statvfs(p).f_flag & 1)]
def t(name, f):
    try:
        f()
        r.append(name + "=ALLOWED")
    except OSError as e:
        r.append("%s=errno%d" % (name, e.errno))
t("chmod", lambda: os.chmod(p, st.st_mode & 0o7777))
t("chown", lambda: os.chown(p, st.st_uid, st.st_gid))
t("write", lambda: os.close(os.open(p, os.O_WRONLY | os.O_APPEND)))
t("truncate", lambda: os.truncate(p, st.st_size))
t("xattr", lambda: os.removexattr(p, "user.warren-probe"))
print(" ".join(r))
"#;

/// Every process of the zone (as it sees them) that runs one of the files whose
/// dev:ino are in argv: whether that file sits on a read-only mount.
const FIND_HOST_BINARIES: &str = r#"
import os, sys
want = set(sys.argv[1:])
found = []
for n in os.listdir("/proc"):
    if not n.isdigit():
        continue
    p = "/proc/%s/exe" % n
    try:
        st = os.stat(p)
        ro = os.statvfs(p).f_flag & 1
    except OSError:
        continue
    if "%d:%d" % (st.st_dev, st.st_ino) in want:
        found.append("%s:ro=%d" % (n, ro))
print("found=" + ",".join(found))
"#;

#[test]
fn class10_locks_and_host_binaries() {
    require_root();
    require_tool(
        "setpriv",
        "util-linux: it runs probes as an unprivileged host user",
    );
    require_tool("flock", "util-linux: the lock probe");
    let env = Env::new();
    std::fs::set_permissions(env.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut t = Table::new("10 locks/bins");
    env.host_zone("lk", &[]);
    env.host_zone("lkn", &["userns=false"]);
    env.ok(&["boot", "lk"]);
    env.ok(&["boot", "lkn"]);
    let locks = env.root().join("locks");
    let root = env.root().display().to_string();

    let mut modes = Vec::new();
    let dmode = std::fs::metadata(&locks).unwrap().mode() & 0o7777;
    let mut ok = dmode == 0o700;
    for e in std::fs::read_dir(&locks).unwrap().flatten() {
        let m = e.metadata().unwrap().mode() & 0o7777;
        ok &= m == 0o600;
        modes.push(format!("{}:{m:o}", e.file_name().to_string_lossy()));
    }
    t.row(
        "lock files and their directory",
        "files 0600 in a 0700 dir",
        ok && !modes.is_empty(),
        format!("dir {dmode:o}; {}", modes.join(" ")),
    );
    t.denied_to_nobody(
        "host user flocks zone-lk.lock",
        &format!("flock -n {root}/locks/zone-lk.lock true && echo REACHED"),
    );
    t.denied_to_nobody(
        "host user flocks userns-ranges.lock",
        &format!("flock -n {root}/locks/userns-ranges.lock true && echo REACHED"),
    );
    t.denied_to_nobody(
        "host user flocks the locks directory itself",
        &format!("flock -n {root}/locks true && echo REACHED"),
    );
    // A lock file and directory left open by an older warren.
    std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        locks.join("zone-lk.lock"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let r = as_nobody(&format!(
        "flock -s -n {root}/locks/zone-lk.lock true && echo opened-while-open"
    ));
    assert!(
        r.stdout.contains("opened-while-open"),
        "control: with 0755/0644 a host user can open the lock ({r:?})"
    );
    env.ok(&["halt", "lk", "--timeout", "1"]);
    env.ok(&["boot", "lk"]);
    let fm = std::fs::metadata(locks.join("zone-lk.lock"))
        .unwrap()
        .mode()
        & 0o7777;
    let dm = std::fs::metadata(&locks).unwrap().mode() & 0o7777;
    t.row(
        "0644 lock file in a 0755 locks dir (older warren), then halt + boot",
        "tightened to 0600 / 0700",
        fm == 0o600 && dm == 0o700,
        format!("file {fm:o} dir {dm:o}"),
    );

    // Host binaries.
    let warren = PathBuf::from(WARREN);
    let init = warren.with_file_name("warren-init");
    let mut bins = vec![warren.clone()];
    if init.exists() {
        bins.push(init.clone());
    }
    let snap = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.mode(), m.uid(), m.gid(), sha256(p))
    };
    let before: Vec<_> = bins.iter().map(|b| snap(b)).collect();
    let ids: Vec<String> = bins
        .iter()
        .map(|b| {
            let m = std::fs::metadata(b).unwrap();
            format!("{}:{}", m.dev(), m.ino())
        })
        .collect();

    for (zone, mode) in [("lk", "default zone"), ("lkn", "userns=false zone")] {
        let r = env.run(&["login", zone, "--", "python3", "-c", EXE_PROBES]);
        let rep = r.stdout.clone();
        let denied_as =
            |k: &str, allowed: &[&str]| field(&rep, k).is_some_and(|v| allowed.contains(&v));
        t.row(
            format!("{mode}: chmod /proc/1/exe (to its own mode)"),
            "EROFS/EPERM/EACCES",
            denied_as("chmod", &["errno30", "errno1", "errno13"]),
            format!("{:?} {}", field(&rep, "chmod"), r.stderr),
        );
        t.row(
            format!("{mode}: chown /proc/1/exe (to its own owner)"),
            "EROFS/EPERM/EACCES (EINVAL: unmapped owner)",
            denied_as("chown", &["errno30", "errno1", "errno13", "errno22"]),
            format!("{:?}", field(&rep, "chown")),
        );
        t.row(
            format!("{mode}: open /proc/1/exe for writing"),
            "ETXTBSY/EROFS/EACCES",
            denied_as("write", &["errno26", "errno30", "errno13", "errno1"]),
            format!("{:?}", field(&rep, "write")),
        );
        t.row(
            format!("{mode}: truncate /proc/1/exe (to its own size)"),
            "ETXTBSY/EROFS/EACCES",
            denied_as("truncate", &["errno26", "errno30", "errno13", "errno1"]),
            format!("{:?}", field(&rep, "truncate")),
        );
        t.row(
            format!("{mode}: change /proc/1/exe's xattrs (file capabilities)"),
            "EROFS/EPERM (ENODATA would mean writable)",
            denied_as("xattr", &["errno30", "errno1", "errno13"]),
            format!("{:?}", field(&rep, "xattr")),
        );
        let mut args = vec!["login", zone, "--", "python3", "-c", FIND_HOST_BINARIES];
        args.extend(ids.iter().map(String::as_str));
        let r = env.run(&args);
        let found = field(&r.stdout, "found").unwrap_or("?").to_string();
        t.row(
            format!("{mode}: processes running a host warren binary, seen from inside"),
            "none, or only through a read-only mount",
            r.code == 0
                && found
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .all(|s| s.ends_with("ro=1")),
            format!("found={found} {}", r.stderr),
        );
    }

    // The OCI runtime: a created container's process 1 is warren itself, waiting for
    // `start`; a process exec'd into the container meanwhile probes its /proc/1/exe
    // (chmod to its own mode, open for appending: harmless if they got through).
    let oci = Oci::new();
    let (code, out) = created_container_exec(
        &oci,
        "exe-wait",
        "echo exe=$(readlink /proc/1/exe); m=$(stat -L -c %a /proc/1/exe) && chmod $m /proc/1/exe && echo CHMOD-ALLOWED; : >> /proc/1/exe && echo WRITE-ALLOWED; echo probed",
        None,
    );
    t.row(
        "oci exec into a created container: chmod / open for writing /proc/1/exe",
        "EPERM/EACCES/EROFS/ETXTBSY (the host binary is not reachable)",
        !out.contains("ALLOWED") && (out.contains("probed") || code != 0),
        format!("exit {code} {out}"),
    );
    drop(oci);

    let after: Vec<_> = bins.iter().map(|b| snap(b)).collect();
    t.row(
        "host warren and warren-init after the probes",
        "mode, owner and sha256 unchanged",
        before == after,
        bins.iter()
            .zip(&after)
            .map(|(b, a)| {
                format!(
                    "{}: {:o} {}:{} {}",
                    b.file_name().unwrap().to_string_lossy(),
                    a.0 & 0o7777,
                    a.1,
                    a.2,
                    &a.3[..12]
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    );
    env.ok(&["halt", "lk", "lkn", "--timeout", "1"]);
    let b1 = env.run(&["boot", "lk", "lkn"]);
    let r1 = env.run(&["login", "lk", "--", "echo", "alive"]);
    let r2 = env.run(&["login", "lkn", "--", "echo", "alive"]);
    t.row(
        "later boots of both zones",
        "boot and login work",
        b1.code == 0 && r1.stdout.contains("alive") && r2.stdout.contains("alive"),
        format!("{} {} {}", summary(&b1), summary(&r1), summary(&r2)),
    );
    t.finish();
}
