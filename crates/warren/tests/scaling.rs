//! What a zone costs the host per zone, checked where it is structural: the superblocks
//! a zone makes (each costs every memory cgroup on the host shrinker state,
//! docs/scaling.md): overlay, proc and devpts only; /dev is a shared read-only template,
//! /dev/shm and the console are in the zone's own storage.

mod common;

use std::collections::BTreeSet;

use common::Env;

/// (mount point, device, fstype) of every mount in `pid`'s mount namespace.
fn mounts_of(pid: i32) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/mountinfo: {e}"));
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let dash = f
                .iter()
                .position(|x| *x == "-")
                .expect("mountinfo separator");
            (f[4].to_string(), f[2].to_string(), f[dash + 1].to_string())
        })
        .collect()
}

#[test]
fn a_zone_makes_only_overlay_proc_and_devpts_and_binds_the_rest() {
    let env = Env::new();
    env.host_zone("sb", &[]);
    env.ok(&["boot", "sb"]);
    let mounts = mounts_of(env.init_pid("sb"));
    let host: BTreeSet<String> = mounts_of(std::process::id() as i32)
        .into_iter()
        .map(|(_, d, _)| d)
        .collect();
    // Superblocks the zone made: devices none of the host's mounts has. The IPC
    // namespace's mqueue is the kernel's (never mounted), so runtime::SUPERBLOCKS has
    // one more than this.
    let made: BTreeSet<(&str, &str)> = mounts
        .iter()
        .filter(|(_, d, _)| !host.contains(d))
        .map(|(_, d, t)| (t.as_str(), d.as_str()))
        .collect();
    let kinds: Vec<&str> = made.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        kinds,
        ["devpts", "overlay", "proc"],
        "superblocks made by one zone: {made:?} in {mounts:?}"
    );
    // /dev is the state root's shared template, bound (read-only) from the host.
    let text = std::fs::read_to_string(format!("/proc/{}/mountinfo", env.init_pid("sb"))).unwrap();
    let dev = text
        .lines()
        .find(|l| l.split(' ').nth(4) == Some("/dev"))
        .unwrap_or_else(|| panic!("no /dev in the zone: {text}"));
    let f: Vec<&str> = dev.split(' ').collect();
    assert!(
        f[3].ends_with("/dev-template/dev") && f[5].split(',').any(|o| o == "ro"),
        "/dev is not the shared read-only template: {dev}"
    );
    // The console and /dev/shm are on the host's filesystem (the zone's storage).
    for at in ["/dev/console", "/dev/shm"] {
        let (_, d, _) = mounts
            .iter()
            .rev()
            .find(|(m, _, _)| m == at)
            .unwrap_or_else(|| panic!("no mount at {at} in the zone: {mounts:?}"));
        assert!(host.contains(d), "{at} is a superblock of its own ({d})");
    }
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if ["/dev/console", "/dev/shm"].contains(&f[4]) {
            let opts: Vec<&str> = f[5].split(',').collect();
            assert!(
                ["nosuid", "nodev", "noexec"]
                    .iter()
                    .all(|o| opts.contains(o)),
                "{} must be nosuid, nodev, noexec: {line}",
                f[4]
            );
        }
    }
    let r = env.sh(
        "sb",
        "echo hi > /dev/shm/x && cat /dev/shm/x && echo c > /dev/console && \
         head -c 4 /dev/zero | wc -c && touch /dev/new 2>&1; ls /dev/pts/ptmx",
    );
    assert!(
        r.stdout.contains("hi") && r.stdout.contains('4') && r.stdout.contains("/dev/pts/ptmx"),
        "{r:?}"
    );
    assert!(
        format!("{r:?}").contains("Read-only file system"),
        "the shared /dev must be read-only in the zone: {r:?}"
    );
}

#[test]
fn the_saved_console_keeps_its_last_mebibyte() {
    let env = Env::new();
    env.host_zone("con", &[]);
    env.ok(&["boot", "con"]);
    let r = env.sh(
        "con",
        "echo first-line >> /dev/console; \
         head -c 1572864 /dev/zero | tr '\\0' x >> /dev/console; \
         echo; echo last-line >> /dev/console; echo rc=$?",
    );
    assert!(
        r.stdout.contains("rc=0"),
        "writing 1.5 MiB to /dev/console: {r:?}"
    );
    env.ok(&["halt", "con"]);
    let log = std::fs::read(env.root().join("zones/con/console.log")).unwrap();
    assert!(
        log.len() as u64 <= 1 << 20,
        "saved console of {} bytes",
        log.len()
    );
    assert!(
        log.len() as u64 > 1 << 19,
        "saved console of {} bytes",
        log.len()
    );
    let text = String::from_utf8_lossy(&log);
    assert!(
        text.trim_end().ends_with("last-line"),
        "tail: {:?}",
        &text[text.len().saturating_sub(40)..]
    );
    assert!(
        !text.contains("first-line"),
        "the first bytes were kept, not the last"
    );
}
