//! Resource abuse from inside real zones: a fork bomb, a CPU hog and a disk filler
//! are each stopped by their own zone's limit while the host and other zones keep
//! working. (The memory hog lives in tests/limits.rs.)

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Env;

/// A `warren login` left running in the background; killed (only it) on drop. The
/// zone's own processes go with the zone when the Env halts it.
struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn background(env: &Env, zone: &str, script: &str) -> Background {
    Background(
        env.cmd()
            .args(["login", zone, "--", "/bin/sh", "-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

fn num(s: &str) -> u64 {
    s.trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

fn pids_max_events(env: &Env, zone: &str) -> u64 {
    env.cgroup_file(zone, "pids", "pids.events")
        .lines()
        .find_map(|l| l.strip_prefix("max "))
        .map(num)
        .unwrap()
}

#[test]
fn fork_bomb_stops_at_max_processes_and_other_zones_stay_responsive() {
    let env = Env::new();
    env.host_zone("bomb", &["max-processes=64"]);
    env.host_zone("calm", &[]);
    env.ok(&["boot", "bomb"]);
    env.ok(&["boot", "calm"]);
    // Every shell loops forever forking another such shell: once at the cap, each
    // failed fork is retried at once, so the zone stays full for as long as it runs.
    // bash, not dash: dash exits on a failed fork, so on a loaded host the whole bomb
    // could die out at the cap; bash retries and keeps looping, as a real bomb would.
    let _bomb = background(
        &env,
        "bomb",
        "exec bash -c 'f() { while :; do f & done }; f' 2>/dev/null",
    );
    // Wait until the bomb has hit the cap.
    let t0 = Instant::now();
    while pids_max_events(&env, "bomb") == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the fork bomb never reached pids.max"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // While it keeps forking: the cap holds, and a login into another zone works.
    let mut peak = 0;
    let mut logins = 0;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        peak = peak.max(num(&env.cgroup_file("bomb", "pids", "pids.current")));
        let t = Instant::now();
        let r = env.sh("calm", "echo alive").ok();
        assert_eq!(r.stdout.trim(), "alive");
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "a login into another zone took {:?} during the bomb",
            t.elapsed()
        );
        logins += 1;
    }
    // On a loaded host (the other abuse tests run beside this one) the bomb refills
    // slowly; give it up to 10 s more, sampling often, to show it fills the zone.
    let until = Instant::now() + Duration::from_secs(10);
    while peak < 60 && Instant::now() < until {
        peak = peak.max(num(&env.cgroup_file("bomb", "pids", "pids.current")));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(peak <= 64, "pids.current {peak} exceeded max-processes 64");
    assert!(
        peak >= 60,
        "the bomb did not fill the zone (peak {peak} of 64)"
    );
    let refused = pids_max_events(&env, "bomb");
    assert!(refused >= 1, "no fork was refused");
    assert!(logins >= 1);
    // The host too: a process starts and exits.
    assert!(Command::new("true").status().unwrap().success());
    println!("fork bomb: peak {peak} tasks (cap 64), {refused} forks refused, {logins} logins into another zone meanwhile");
    // Halt kills the bomb through its cgroups.
    env.ok(&["halt", "bomb", "--timeout", "1"]);
}

#[test]
fn cpu_hog_with_cpu_max_half_gets_at_most_six_tenths_of_a_cpu() {
    let env = Env::new();
    env.host_zone("hog", &["cpu.max=0.5"]);
    env.ok(&["boot", "hog"]);
    // Two spinning loops: without the cap they could take both CPUs of this host.
    let _hog = background(&env, "hog", "while :; do :; done & while :; do :; done");
    std::thread::sleep(Duration::from_millis(500));
    let usage = || num(&env.cgroup_file("hog", "cpuacct", "cpuacct.usage"));
    let (u0, t0) = (usage(), Instant::now());
    std::thread::sleep(Duration::from_secs(5));
    let (u1, dt) = (usage(), t0.elapsed());
    let cpus = (u1 - u0) as f64 / dt.as_nanos() as f64;
    println!("cpu hog with cpu.max 0.5: {cpus:.3} CPUs over {dt:?}");
    assert!(cpus <= 0.6, "the hog got {cpus:.3} CPUs with cpu.max = 0.5");
    // And it did run (on a loaded 2-CPU host it may get less than its cap).
    assert!(
        cpus >= 0.1,
        "the hog barely ran ({cpus:.3} CPUs); is the host saturated?"
    );
    env.ok(&["halt", "hog", "--timeout", "1"]);
}

#[test]
fn disk_filler_is_stopped_by_disk_max() {
    let env = Env::new();
    let info = env.ok(&["info"]);
    assert!(
        info.stdout.contains("disk quota:      loop-ext4"),
        "this host cannot enforce disk.max: {}",
        info.stdout
    );
    env.host_zone("fill", &["disk.max=64M"]);
    env.host_zone("free", &[]);
    env.ok(&["boot", "fill"]);
    env.ok(&["boot", "free"]);
    let r = env.sh(
        "fill",
        "dd if=/dev/zero of=/filler bs=1M count=200 2>&1; echo written=$(stat -c %s /filler)",
    );
    assert!(r.stdout.contains("No space left on device"), "{r:?}");
    let written: u64 = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("written="))
        .map(num)
        .unwrap();
    assert!(
        written > 32 << 20 && written <= 64 << 20,
        "wrote {written} bytes with disk.max = 64M"
    );
    // The image holds it: the host's filesystem gave at most the cap.
    let img = env.root().join("zones/fill/disk.img");
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(&img).unwrap();
    assert_eq!(m.len(), 64 << 20);
    assert!(
        m.blocks() * 512 <= 64 << 20,
        "{} bytes allocated",
        m.blocks() * 512
    );
    // `warren stat` counts the image's allocated blocks as the zone's disk. The zone's
    // ext4 writes reach the image through the loop device only when flushed: sync
    // first, or the image may not yet hold what dd wrote.
    env.sh("fill", "sync");
    let st: serde_json::Value =
        serde_json::from_str(&env.ok(&["stat", "fill", "--json"]).stdout).unwrap();
    let disk = st["zones"][0]["disk_bytes"].as_u64().unwrap();
    assert!(
        disk >= written && disk <= 64 << 20,
        "stat disk_bytes {disk}"
    );
    // Another zone (and the host) can still write.
    env.sh(
        "free",
        "dd if=/dev/zero of=/ok bs=1M count=8 2>&1 && rm /ok",
    )
    .ok();
    // After a reboot the data is still there and the cap still holds.
    env.ok(&["halt", "fill"]);
    env.ok(&["boot", "fill"]);
    let r = env.sh("fill", "stat -c %s /filler; echo x >> /filler2; echo rc=$?");
    assert!(r.stdout.starts_with(&written.to_string()), "{r:?}");
    assert!(
        r.stderr.contains("No space left") || r.stdout.contains("rc=0"),
        "{r:?}"
    );
    // /dev/shm and the console are in the zone's storage: the image holds them too.
    let r = env.sh(
        "fill",
        "rm -f /filler; dd if=/dev/zero of=/dev/shm/fill bs=1M count=200 2>&1; \
         rm -f /dev/shm/fill; head -c 209715200 /dev/zero >> /dev/console; echo rc=$?",
    );
    assert!(
        format!("{r:?}").matches("No space left on device").count() >= 2
            && !r.stdout.contains("rc=0"),
        "/dev/shm or the console went past disk.max: {r:?}"
    );
    let m = std::fs::metadata(&img).unwrap();
    assert!(m.blocks() * 512 <= 64 << 20, "the image grew past its cap");
    println!("disk filler with disk.max 64M: stopped at {written} bytes (ENOSPC)");
}

/// Regression: the image's ext4 was once mounted by the zone's child, which races with
/// the parent moving it into the zone's devices cgroup (which denies the loop device):
/// in release builds most boots failed with EPERM. The parent now mounts it.
#[test]
fn disk_max_zone_boots_every_time() {
    let env = Env::new();
    env.host_zone("cap", &["disk.max=32M"]);
    for _ in 0..8 {
        env.ok(&["boot", "cap"]);
        env.sh("cap", "touch /still-capped && df / | tail -1").ok();
        env.ok(&["halt", "cap"]);
    }
}
