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

/// /dev/shm is the zone's own directory, emptied in place at each boot (no inode freed
/// and made again per boot): whatever the zone left in it, and the mode it gave it, are
/// gone at the next boot; it is still its root's, sticky and world-writable.
#[test]
fn dev_shm_starts_empty_and_sticky_at_each_boot() {
    let env = Env::new();
    env.host_zone("shm", &[]);
    env.ok(&["boot", "shm"]);
    let before = std::fs::symlink_metadata(env.root().join("zones/shm/dev-shm"))
        .expect("the zone's dev-shm");
    let r = env.sh(
        "shm",
        "mkdir -p /dev/shm/d/e && echo x > /dev/shm/d/e/f && ln -s / /dev/shm/root && \
         chmod 0700 /dev/shm && echo rc=$?",
    );
    assert!(r.stdout.contains("rc=0"), "{r:?}");
    env.ok(&["halt", "shm"]);
    env.ok(&["boot", "shm"]);
    let r = env.sh("shm", "ls -A /dev/shm | wc -l; stat -c '%a %u' /dev/shm");
    assert_eq!(
        r.stdout.split_whitespace().collect::<Vec<_>>(),
        ["0", "1777", "0"],
        "/dev/shm after a reboot: {r:?}"
    );
    let after = std::fs::symlink_metadata(env.root().join("zones/shm/dev-shm")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        after.ino(),
        before.ino(),
        "emptied in place, not made again"
    );
    assert_eq!(
        after.uid(),
        before.uid(),
        "still the zone root's on the host"
    );
    // What a chmod does not reset (here an inode flag the zone's root may set on its
    // own directory, `chattr +A`) makes the next boot start from a new directory.
    let r = env.sh("shm", "chattr +A /dev/shm && lsattr -d /dev/shm");
    assert!(
        r.stdout
            .split_whitespace()
            .next()
            .is_some_and(|f| f.contains('A')),
        "chattr +A on the zone's /dev/shm: {r:?}"
    );
    env.ok(&["halt", "shm"]);
    env.ok(&["boot", "shm"]);
    let r = env.sh("shm", "lsattr -d /dev/shm; stat -c '%a %u' /dev/shm");
    let words: Vec<&str> = r.stdout.split_whitespace().collect();
    assert!(
        words.len() == 4 && !words[0].contains('A') && words[2..] == ["1777", "0"],
        "/dev/shm after a reboot: {r:?}"
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

/// warren-init's private memory is paid once per zone (docs/scaling.md, "warren-init"):
/// it starts at its own entry point, so neither the C library's start-up nor Rust's runs:
/// no heap at all, and only the pages its own code writes are private. Anonymous
/// memory: 80 KiB (release) before the second pass, 59 after it, with the C library's
/// and Rust's start-up; without them 24 KiB (debug, as `cargo test` builds) and 17-20
/// (release; bench/results/2026-12-05-s15-init). The stack's pages vary from one exec
/// to the next by up to two: the kernel moves the stack pointer down by a random 0-8
/// KiB below argv and the environment (arch_align_stack), so both the strings above
/// and the frames below can each straddle one more page boundary. Each budget is the
/// smallest figure plus those two pages.
#[test]
fn warren_init_keeps_its_private_memory_within_budget() {
    const BUDGET_KIB: u64 = if cfg!(debug_assertions) { 32 } else { 28 };
    let env = Env::new();
    env.host_zone("ini", &[r#"services=["sleep 300"]"#]);
    env.ok(&["boot", "ini"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !env.ok(&["logs", "ini"]).stdout.contains("started /bin/sh") {
        assert!(
            std::time::Instant::now() < deadline,
            "warren-init did not start its service"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = env.init_pid("ini");
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    let kib = |key: &str| -> u64 {
        rollup
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in smaps_rollup: {rollup}"))
    };
    let anon = kib("Anonymous:");
    assert!(
        anon <= BUDGET_KIB,
        "warren-init holds {anon} KiB of anonymous memory (budget {BUDGET_KIB}):\n{rollup}"
    );
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    eprintln!("warren-init: {anon} KiB anonymous\n{maps}");
    assert!(
        !maps.contains("[heap]"),
        "warren-init has a heap: the C library's start-up ran (build.rs links it with --entry=warren_init_start):\n{maps}"
    );
}

/// A zone makes a cgroup only in the hierarchies its limits and accounting need
/// (docs/scaling.md, "Which cgroups a zone makes"): a zone without CPU limits has no cpu
/// or cpuset group, and freezer, blkio, net_cls and named hierarchies are never joined
/// (its init stays where the booting process was there). Each group costs ~11 KiB of
/// kernel memory and 10-15 kernfs nodes per zone.
#[test]
fn a_zone_without_cpu_limits_joins_only_memory_pids_cpuacct_and_devices() {
    let env = Env::new();
    env.host_zone("cg", &[]);
    env.ok(&["boot", "cg"]);
    let joined: BTreeSet<String> = env
        .cgroup_dirs("cg")
        .into_iter()
        .flat_map(|(c, _)| c.split(',').map(str::to_string).collect::<Vec<_>>())
        .collect();
    let pid = env.init_pid("cg");
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let init = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    if own.lines().all(|l| l.starts_with("0::")) {
        // cgroup v2: one directory, named by its bucket of controllers.
        assert_eq!(env.cgroup_dirs("cg").len(), 1, "{joined:?}");
        return;
    }
    for c in [
        "cpu",
        "cpuset",
        "freezer",
        "blkio",
        "net_cls",
        "perf_event",
        "hugetlb",
    ] {
        assert!(
            !joined.contains(c),
            "a zone without limits joined {c}: {joined:?}"
        );
    }
    for c in ["memory", "pids"] {
        assert!(joined.contains(c), "{c} missing: {joined:?}");
    }
    // Where a hierarchy is not joined, init is where the booting process was.
    let path_of = |text: &str, hier: &str| {
        text.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, c, p) = (f.next()?, f.next()?, f.next()?);
            (c == hier).then(|| p.to_string())
        })
    };
    for l in own.lines() {
        let hier = l.split(':').nth(1).unwrap_or_default();
        let joined_here = hier.split(',').any(|c| joined.contains(c));
        if hier.is_empty() || joined_here {
            continue;
        }
        assert_eq!(
            path_of(&init, hier),
            path_of(&own, hier),
            "init joined the {hier} hierarchy:\n{init}"
        );
    }
}
