//! /proc views end to end, as root: each test starts its own lxcfs (Debian's, the
//! package scripts/test.sh installs) on a private mount point named by `lxcfs-dir`
//! in its state root's defaults.toml, boots real zones (user-namespaced by default,
//! cgroup v1 on this machine), and reads their /proc through `warren login`. The
//! lxcfs guard stops the daemon and unmounts its mount, also when a test fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Env;

/// One private lxcfs: `lxcfs -f --enable-loadavg --enable-cfs -p PIDFILE DIR`.
/// Its mount point is outside the state root (warren walks the state root).
struct Lxcfs {
    dir: PathBuf,
    pidfile: PathBuf,
    child: Option<Child>,
    /// Removed after `drop` has unmounted `dir`.
    _tmp: tempfile::TempDir,
}

impl Lxcfs {
    fn start() -> Lxcfs {
        let tmp = tempfile::Builder::new()
            .prefix("warren-lxcfs-")
            .tempdir_in("/tmp")
            .unwrap();
        let dir = tmp.path().join("mnt");
        std::fs::create_dir_all(&dir).unwrap();
        let mut l = Lxcfs {
            pidfile: tmp.path().join("lxcfs.pid"),
            dir,
            child: None,
            _tmp: tmp,
        };
        l.spawn();
        l
    }

    fn spawn(&mut self) {
        let bin = Path::new("/usr/bin/lxcfs");
        assert!(
            bin.exists(),
            "this test needs Debian's lxcfs (scripts/test.sh installs it: apt-get install lxcfs)"
        );
        let child = Command::new(bin)
            .args(["-f", "--enable-loadavg", "--enable-cfs", "-p"])
            .arg(&self.pidfile)
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let t = Instant::now();
        while !self.dir.join("proc/meminfo").exists() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "lxcfs did not mount {} within 20 s",
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("lxcfs running").id()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(ok.success(), "kill {sig} lxcfs");
    }

    /// SIGKILL: the daemon dies and its mount stays, dead (ENOTCONN).
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// What lxcfs.service's ExecStopPost does: unmount the dead mount.
    fn unmount(&self) {
        if common::host_mounts_under(&self.dir)
            .iter()
            .any(|l| l.contains("fuse.lxcfs"))
        {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

impl Drop for Lxcfs {
    fn drop(&mut self) {
        self.kill();
        self.unmount();
    }
}

fn with_lxcfs() -> (Lxcfs, Env) {
    let env = Env::new();
    let lx = Lxcfs::start();
    std::fs::write(
        env.root().join("defaults.toml"),
        format!("lxcfs-dir = \"{}\"\n", lx.dir.display()),
    )
    .unwrap();
    (lx, env)
}

/// A field of /proc/meminfo as the zone reads it, in kB.
fn mem_total(env: &Env, zone: &str) -> u64 {
    let r = env.sh(zone, "head -1 /proc/meminfo").ok();
    field_kb(&r.stdout, "MemTotal:")
}

fn field_kb(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {text:?}"))
}

fn host_mem_total() -> u64 {
    field_kb(
        &std::fs::read_to_string("/proc/meminfo").unwrap(),
        "MemTotal:",
    )
}

fn count(env: &Env, zone: &str, script: &str) -> u64 {
    let r = env.sh(zone, script).ok();
    r.stdout
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{script}: {:?}", r.stdout))
}

fn host_cpus() -> u64 {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count() as u64
}

/// Whether the v1 cpu and cpuset hierarchies put warren's zones at the same path:
/// lxcfs 5.0.3 reads cpu.max (the CFS quota) at the reader's *cpuset* path.
fn cpu_and_cpuset_agree(env: &Env, zone: &str) -> bool {
    let pid = env.init_pid(zone);
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = |c: &str| {
        text.lines()
            .find(|l| l.split(':').nth(1).unwrap().split(',').any(|x| x == c))
            .map(|l| l.splitn(3, ':').nth(2).unwrap().to_string())
    };
    let unified = text.lines().count() == 1;
    unified || path("cpu") == path("cpuset")
}

#[test]
fn a_zone_sees_its_own_limits_and_one_without_sees_the_host() {
    let (lx, env) = with_lxcfs();
    let info = env.ok(&["info"]).stdout;
    assert!(info.contains("proc views:      active: lxcfs at"), "{info}");

    // 48M, one CPU by cpuset, in a user namespace (the default).
    env.host_zone("pv-cap", &["memory.max=48M", "cpuset=0"]);
    env.ok(&["boot", "pv-cap"]);
    assert_eq!(mem_total(&env, "pv-cap"), 48 * 1024);
    let free = env.sh("pv-cap", "free -m").ok().stdout;
    let total = free
        .lines()
        .find_map(|l| l.strip_prefix("Mem:"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("free -m: {free}"));
    assert_eq!(total, "48", "free -m in the zone: {free}");
    assert_eq!(count(&env, "pv-cap", "nproc"), 1);
    assert_eq!(count(&env, "pv-cap", "grep -c ^processor /proc/cpuinfo"), 1);
    assert_eq!(count(&env, "pv-cap", "grep -c '^cpu[0-9]' /proc/stat"), 1);
    // Its uptime starts at its boot, not the host's.
    let up = env.sh("pv-cap", "cat /proc/uptime").ok().stdout;
    let zone_up: f64 = up.split_whitespace().next().unwrap().parse().unwrap();
    let host_up: f64 = std::fs::read_to_string("/proc/uptime")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        zone_up < 120.0 && zone_up < host_up,
        "zone uptime {zone_up}, host {host_up}"
    );
    // loadavg counts the zone's tasks: init and the shell reading it.
    let load = env.sh("pv-cap", "cat /proc/loadavg").ok().stdout;
    let tasks: u64 = load
        .split_whitespace()
        .nth(3)
        .and_then(|f| f.split('/').nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("loadavg {load:?}"));
    assert!(
        tasks < 10,
        "the zone's loadavg counts its own tasks: {load}"
    );

    // The zone's root can neither remove nor cover nor write its views.
    let cannot_touch = |zone: &str| {
        let r = env.sh(
            zone,
            "umount /proc/meminfo; umount -l /proc/meminfo; echo 1 > /tmp/f; mount --bind /tmp/f /proc/meminfo; echo x > /proc/meminfo; true",
        );
        assert!(r.stderr.contains("meminfo"), "{zone}: {r:?}");
        assert_eq!(mem_total(&env, zone), 48 * 1024, "{zone}: {r:?}");
    };
    cannot_touch("pv-cap");

    // Without a user namespace too.
    env.host_zone("pv-host-ids", &["memory.max=48M", "userns=false"]);
    env.ok(&["boot", "pv-host-ids"]);
    assert_eq!(mem_total(&env, "pv-host-ids"), 48 * 1024);
    cannot_touch("pv-host-ids");

    // cpu.max = 0.5: lxcfs (--enable-cfs) shows one CPU in cpuinfo and cpu/online,
    // which getconf (glibc) reads; nproc asks sched_getaffinity, which only a
    // cpuset changes, so it still counts the host's CPUs (docs/proc-views.md).
    env.host_zone("pv-cfs", &["cpu.max=0.5", "cpuset=0-1"]);
    env.ok(&["boot", "pv-cfs"]);
    assert!(
        cpu_and_cpuset_agree(&env, "pv-cfs"),
        "this host puts warren's v1 cpu and cpuset cgroups at different paths, where lxcfs 5.0.3 cannot see cpu.max; run the test where warren's own cgroup is the same in both"
    );
    assert_eq!(count(&env, "pv-cfs", "grep -c ^processor /proc/cpuinfo"), 1);
    assert_eq!(
        env.sh("pv-cfs", "cat /sys/devices/system/cpu/online")
            .ok()
            .stdout
            .trim(),
        "0"
    );
    assert_eq!(count(&env, "pv-cfs", "getconf _NPROCESSORS_ONLN"), 1);
    assert_eq!(count(&env, "pv-cfs", "nproc"), host_cpus().min(2));

    // No limits: the host's values (a memory cap above the host's memory, the
    // host's CPUs).
    env.host_zone("pv-free", &["memory.max=64T"]);
    env.ok(&["boot", "pv-free"]);
    assert_eq!(mem_total(&env, "pv-free"), host_mem_total());
    assert_eq!(
        count(&env, "pv-free", "grep -c ^processor /proc/cpuinfo"),
        host_cpus()
    );

    // The zone's opt-out: the host's /proc/meminfo despite its 48M.
    env.host_zone("pv-off", &["memory.max=48M", "proc-views=false"]);
    env.ok(&["boot", "pv-off"]);
    assert_eq!(mem_total(&env, "pv-off"), host_mem_total());

    // The host's opt-out: zones that do not say otherwise see the host's values; a
    // zone's own proc-views = true still gets them.
    std::fs::write(
        env.root().join("defaults.toml"),
        format!("proc-views = false\nlxcfs-dir = \"{}\"\n", lx.dir.display()),
    )
    .unwrap();
    let info = env.ok(&["info"]).stdout;
    assert!(info.contains("proc views:      off"), "{info}");
    env.host_zone("pv-hostoff", &["memory.max=48M"]);
    env.ok(&["boot", "pv-hostoff"]);
    assert_eq!(mem_total(&env, "pv-hostoff"), host_mem_total());
    env.host_zone("pv-wants", &["memory.max=48M", "proc-views=true"]);
    env.ok(&["boot", "pv-wants"]);
    assert_eq!(mem_total(&env, "pv-wants"), 48 * 1024);
}

#[test]
fn a_running_zone_keeps_working_when_lxcfs_reloads_dies_or_restarts() {
    let (mut lx, env) = with_lxcfs();
    env.host_zone("pv-run", &["memory.max=48M"]);
    env.ok(&["boot", "pv-run"]);
    assert_eq!(mem_total(&env, "pv-run"), 48 * 1024);
    let init = env.init_pid("pv-run");

    // systemctl reload lxcfs: SIGUSR1 reloads its library behind the same mount.
    lx.signal("-USR1");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(mem_total(&env, "pv-run"), 48 * 1024);

    // The daemon dies: the viewed files fail with ENOTCONN, nothing else does.
    lx.kill();
    let r = env.sh("pv-run", "head -1 /proc/meminfo");
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("Transport endpoint is not connected"),
        "{r:?}"
    );
    let r = env
        .sh(
            "pv-run",
            "grep -c ^Name /proc/self/status && echo alive > /tmp/x && cat /tmp/x",
        )
        .ok();
    assert!(r.stdout.contains("alive"), "{r:?}");
    assert!(common::alive(init), "the zone's init survives lxcfs");
    let info = env.ok(&["info"]).stdout;
    assert!(info.contains("proc views:      broken"), "{info}");
    let doc = env.run(&["doctor"]);
    assert!(
        doc.stdout.contains("/proc views (lxcfs)") && doc.stdout.contains("will fail"),
        "{doc:?}"
    );
    // Meanwhile a zone that may go without views boots with the host's values, and
    // one that requires them is refused, naming the fix.
    env.host_zone("pv-later", &["memory.max=48M"]);
    env.ok(&["boot", "pv-later"]);
    assert_eq!(mem_total(&env, "pv-later"), host_mem_total());
    env.host_zone("pv-must", &["memory.max=48M", "proc-views=true"]);
    env.run(&["boot", "pv-must"]).fails(
        7,
        "proc-views = true, but the host's /proc views are broken",
    );

    // While lxcfs is down, --refresh gives the zone the host's files back: it works
    // again, with the host's values.
    let r = env.ok(&["proc-views"]).stdout;
    assert!(r.contains("dead (ENOTCONN"), "{r}");
    let r = env.ok(&["proc-views", "--refresh"]).stdout;
    assert!(r.contains("none (the host's files)"), "{r}");
    assert_eq!(mem_total(&env, "pv-run"), host_mem_total());

    // lxcfs back (unmounted and started, as its unit does): a running zone keeps the
    // binds it has until --refresh (the unit drop-in's ExecStartPost) attaches the new
    // mount's views, without a reboot.
    lx.kill();
    lx.unmount();
    lx.spawn();
    let r = env.ok(&["proc-views", "--refresh", "--json"]).stdout;
    let v: serde_json::Value = serde_json::from_str(&r).unwrap();
    let run = v
        .as_array()
        .unwrap()
        .iter()
        .find(|z| z["zone"] == "pv-run")
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(run["before"], "none", "{r}");
    assert_eq!(run["after"], "live", "{r}");
    assert_eq!(mem_total(&env, "pv-run"), 48 * 1024);
    assert_eq!(env.init_pid("pv-run"), init, "the same boot");

    // Killed again with the views attached: dead, then repaired by --refresh after
    // the restart.
    lx.kill();
    lx.unmount();
    lx.spawn();
    let r = env.sh("pv-run", "head -1 /proc/meminfo");
    assert!(
        r.stderr.contains("Transport endpoint is not connected"),
        "{r:?}"
    );
    env.ok(&["proc-views", "--refresh"]);
    assert_eq!(mem_total(&env, "pv-run"), 48 * 1024);
    let mounts = env
        .sh("pv-run", "grep -c fuse.lxcfs /proc/self/mountinfo")
        .ok()
        .stdout;
    assert_eq!(mounts.trim(), "8", "the dead binds are gone, 8 new ones");
    // And the zones that booted meanwhile: the required one now boots.
    env.ok(&["boot", "pv-must"]);
    assert_eq!(mem_total(&env, "pv-must"), 48 * 1024);
}
