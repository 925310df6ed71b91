//! Resource controls, for real on this host's cgroups.

mod common;

use common::{alive, Env};

#[test]
fn max_processes_stops_the_21st() {
    let env = Env::new();
    env.host_zone("p", &["max-processes=20"]);
    env.ok(&["boot", "p"]);
    assert_eq!(env.cgroup_file("p", "pids", "pids.max"), "20");
    // Start far more sleepers than the cap allows; the shell exits without waiting, so
    // the sleepers that got in stay behind (reparented to the zone's init).
    let _ = env.sh(
        "p",
        "for i in $(seq 1 40); do sleep 300 >/dev/null 2>&1 & done",
    );
    let events = env.cgroup_file("p", "pids", "pids.events");
    let refused: u64 = events
        .lines()
        .find_map(|l| l.strip_prefix("max "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(refused >= 1, "no fork was refused: {events}");
    // What is left: init + the sleepers that got in. While the loop ran, the login
    // process and its shell were also in the zone, so 20 - 3 sleepers fit.
    let current: u64 = env
        .cgroup_file("p", "pids", "pids.current")
        .parse()
        .unwrap();
    assert_eq!(current, 18, "init + 17 sleepers should remain");
    // The host and other zones are unaffected.
    env.host_zone("q", &[]);
    env.ok(&["boot", "q"]);
    env.sh("q", "true").ok();
}

#[test]
fn memory_max_kills_the_hog_inside_its_zone_only() {
    let env = Env::new();
    env.host_zone("m", &["memory.max=32M", "memory.swap=0"]);
    env.ok(&["boot", "m"]);
    assert_eq!(
        env.cgroup_file("m", "memory", "memory.limit_in_bytes"),
        (32u64 << 20).to_string()
    );
    let canary = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let init = env.init_pid("m");
    // The host's count of OOM kills (every cgroup's, the global OOM killer's too).
    let host_ooms = || -> u64 {
        std::fs::read_to_string("/proc/vmstat")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .unwrap()
            .parse()
            .unwrap()
    };
    let host_before = host_ooms();
    // dd's 128 MiB buffer is touched as it reads: four times the cap.
    let r = env.sh("m", "dd if=/dev/zero of=/dev/null bs=128M count=1");
    let host_after = host_ooms();
    assert_ne!(r.code, 0, "the hog survived: {r:?}");
    let oom: u64 = env
        .cgroup_file("m", "memory", "memory.oom_control")
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(oom >= 1, "no OOM kill recorded in the zone's cgroup");
    // Every OOM kill on the host during the hog was the zone's own (a kill elsewhere
    // would also be counted here; the host has no other memory pressure in this test).
    assert_eq!(
        host_after - host_before,
        oom,
        "OOM kills outside the zone's cgroup happened during the hog"
    );
    assert!(alive(init), "the zone's init was killed");
    assert!(alive(canary.id() as i32), "a host process was killed");
    env.sh("m", "echo still here").ok();
    let mut canary = canary;
    canary.kill().unwrap();
    canary.wait().unwrap();
}

#[test]
fn cpu_and_cpuset_limits_reach_the_kernel() {
    let env = Env::new();
    env.host_zone(
        "c",
        &[
            "cpu.max=0.5",
            "cpuset=0",
            "cpu.shares=512",
            "max-threads=50",
            "max-processes=10",
        ],
    );
    env.ok(&["boot", "c"]);
    assert_eq!(env.cgroup_file("c", "cpu", "cpu.cfs_quota_us"), "50000");
    assert_eq!(env.cgroup_file("c", "cpu", "cpu.cfs_period_us"), "100000");
    assert_eq!(env.cgroup_file("c", "cpu", "cpu.shares"), "512");
    assert_eq!(env.cgroup_file("c", "cpuset", "cpuset.cpus"), "0");
    assert_eq!(env.cgroup_file("c", "pids", "pids.max"), "50");
    let r = env.sh("c", "grep Cpus_allowed_list /proc/self/status").ok();
    assert!(r.stdout.trim().ends_with('0'), "{}", r.stdout);
}

#[test]
fn limit_changes_apply_at_next_boot() {
    let env = Env::new();
    env.host_zone("l", &[]);
    env.ok(&["boot", "l"]);
    let r = env.ok(&["config", "set", "l", "--next-boot", "max-processes=33"]);
    assert!(r.stdout.contains("next boot"), "{}", r.stdout);
    assert_ne!(env.cgroup_file("l", "pids", "pids.max"), "33");
    env.ok(&["reboot", "l"]);
    assert_eq!(env.cgroup_file("l", "pids", "pids.max"), "33");
    env.ok(&["config", "unset", "l", "--next-boot", "max-processes"]);
    env.ok(&["reboot", "l"]);
    // Unset, the zone falls back to the host's default cap (config::defaults).
    assert_eq!(env.cgroup_file("l", "pids", "pids.max"), "1024");
}
