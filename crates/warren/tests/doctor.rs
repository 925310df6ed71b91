//! `warren doctor` for real: the report, `--fix` on a harmless sysctl (restored by a
//! guard, also on failure), and the probe, which must leave no cgroup and no process.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Env;

/// Every `warren doctor` removes probe cgroups whose warren is dead, so the test that
/// leaves one behind on purpose must not run beside the others: they take this lock.
static DOCTOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    DOCTOR.lock().unwrap_or_else(|e| e.into_inner())
}

const INOTIFY: &str = "/proc/sys/fs/inotify/max_user_instances";

/// Puts a sysctl back to the value it had when the guard was made, when dropped.
struct SysctlGuard {
    path: &'static str,
    original: String,
}

impl SysctlGuard {
    fn new(path: &'static str) -> SysctlGuard {
        SysctlGuard {
            path,
            original: std::fs::read_to_string(path).unwrap().trim().to_string(),
        }
    }
    fn value(&self) -> u64 {
        self.original.parse().unwrap()
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        std::fs::write(self.path, &self.original).unwrap();
    }
}

fn read_u64(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[test]
fn report_lists_every_limit_and_exit_code_follows_the_verdicts() {
    let _serial = serial();
    let env = Env::new();
    let r = env.ok(&["doctor", "--zones", "10", "--json"]);
    let v = json(&r.stdout);
    let findings = v["findings"].as_array().unwrap();
    for limit in [
        "kernel.pid_max",
        "kernel.threads-max",
        "vm.max_map_count",
        "fs.file-max",
        "fs.nr_open",
        "fs.inotify.max_user_instances",
        "fs.inotify.max_user_watches",
        "user.max_user_namespaces",
        "user.max_mnt_namespaces",
        "user.max_pid_namespaces",
        "user.max_net_namespaces",
        "user.max_ipc_namespaces",
        "user.max_uts_namespaces",
        "user.max_cgroup_namespaces",
        "fs.mount-max",
        "net.ipv4.neigh.default.gc_thresh3",
        "net.ipv6.neigh.default.gc_thresh1",
        "RLIMIT_NOFILE",
        "RLIMIT_NPROC",
        "memory",
        "kernel stacks",
        "disk",
        "subordinate ids",
    ] {
        let f = findings
            .iter()
            .find(|f| f["limit"] == limit)
            .unwrap_or_else(|| panic!("{limit} missing from {}", r.stdout));
        assert!(f["verdict"].is_string(), "{f}");
    }
    // This host's real pid_max, as /proc says.
    let pid = findings
        .iter()
        .find(|f| f["limit"] == "kernel.pid_max")
        .unwrap();
    assert_eq!(
        pid["current"]["value"].as_u64().unwrap(),
        read_u64("/proc/sys/kernel/pid_max")
    );
    assert_eq!(v["summary"]["will_fail"], 0);

    // 3 million zones × 2 tasks exceed any pid_max the kernel allows: exit 1.
    let r = env.run(&["doctor", "--zones", "3000000"]);
    assert_eq!(r.code, 1, "{} {}", r.stdout, r.stderr);
    assert!(r.stdout.contains("LIMIT"), "{}", r.stdout);
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("kernel.pid_max "))
        .unwrap();
    assert!(line.contains("will fail"), "{line}");
    assert!(line.contains("plan fewer zones"), "{line}");
    assert!(
        r.stdout.contains("will fail,"),
        "summary line: {}",
        r.stdout
    );

    // Bad input.
    env.run(&["doctor", "--zones", "0"]).fails(5, "--zones");
    env.run(&["doctor", "--procs-per-zone", "3", "--threads-per-zone", "2"])
        .fails(5, "at least 4");
    env.run(&["doctor", "--mem-per-zone", "lots"])
        .fails(5, "expected a size");
}

#[test]
fn fix_raises_a_sysctl_persists_it_and_never_lowers() {
    let _serial = serial();
    let env = Env::new();
    let guard = SysctlGuard::new(INOTIFY);
    let etc = tempfile::tempdir().unwrap();
    let conf = etc.path().join("90-warren.conf");
    let before = guard.value();
    // One zone more than there are instances: the plan needs a raise.
    let zones = (before + 1).to_string();
    let want = (before + 1 + (before + 1).div_ceil(4)).next_power_of_two();
    let sysctl_dir = etc.path().to_str().unwrap();
    let base = ["doctor", "--zones", &zones, "--sysctl-dir", sysctl_dir];

    let mut dry = base.to_vec();
    dry.extend(["--fix", "--dry-run"]);
    let r = env.run(&dry);
    assert!(
        r.stdout.contains(&format!(
            "would set fs.inotify.max_user_instances: {before} -> {want}"
        )),
        "{}",
        r.stdout
    );
    assert_eq!(read_u64(INOTIFY), before, "a dry run changes nothing");
    assert!(!conf.exists(), "a dry run writes nothing");

    let mut fix = base.to_vec();
    fix.push("--fix");
    let r = env.run(&fix);
    assert!(
        r.stdout.contains(&format!(
            "set fs.inotify.max_user_instances: {before} -> {want}"
        )),
        "{} {}",
        r.stdout,
        r.stderr
    );
    assert_eq!(read_u64(INOTIFY), want);
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.contains(&format!("fs.inotify.max_user_instances = {want}\n")),
        "{text}"
    );
    // The report after the fix: this limit is ok now.
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("fs.inotify.max_user_instances "))
        .unwrap();
    assert!(line.contains(" ok "), "{line}");

    // A smaller plan never lowers the value, live or in the file.
    let r = env.run(&[
        "doctor",
        "--zones",
        "1",
        "--fix",
        "--sysctl-dir",
        sysctl_dir,
    ]);
    assert!(r.stdout.contains("no sysctl needs raising"), "{}", r.stdout);
    assert_eq!(read_u64(INOTIFY), want);
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), text);
    drop(guard);
    assert_eq!(read_u64(INOTIFY), before, "restored by the guard");
}

/// Removes a probe cgroup that a failed test left (killing what is in it first).
struct CgroupGuard(PathBuf);

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        for _ in 0..500 {
            let procs = std::fs::read_to_string(self.0.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines() {
                let _ = Command::new("kill").args(["-9", pid.trim()]).status();
            }
            if std::fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The directory probe cgroups are made in: this process's pids cgroup (warren runs
/// in the same one).
fn pids_parent() -> PathBuf {
    let mounts =
        warren::cgroups::parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap());
    let own =
        warren::cgroups::parse_proc_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap());
    warren::cgroups::own_dirs(&mounts, &own)
        .into_iter()
        .find(|(_, c, _)| c.iter().any(|x| x == "pids"))
        .map(|(_, _, d)| d)
        .expect("a v1 pids hierarchy (this host is cgroup v1 hybrid)")
}

/// Live (non-zombie) processes whose cgroup is `name`.
fn processes_in(name: &str) -> Vec<i32> {
    let needle = format!("/{name}\n");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .is_ok_and(|c| c.contains(&needle))
                && common::alive(*pid)
        })
        .collect()
}

/// Run a probe; returns (exit code, JSON report, warren's pid).
fn probe(env: &Env, args: &[&str]) -> (i32, serde_json::Value, i32) {
    let child = env
        .cmd()
        .args(["doctor", "--json"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let _guard = CgroupGuard(pids_parent().join(format!("warren-probe-{pid}")));
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "probe failed: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap(), json(&stdout), pid)
}

#[track_caller]
fn assert_cleaned_up(report: &serde_json::Value, pid: i32) {
    let name = format!("warren-probe-{pid}");
    let dir = Path::new(report["cgroup"].as_str().unwrap());
    assert!(dir.ends_with(&name), "{report}");
    assert!(
        !dir.exists(),
        "the probe cgroup {} is still there",
        dir.display()
    );
    assert_eq!(
        processes_in(&name),
        Vec::<i32>::new(),
        "probe processes left"
    );
}

#[test]
fn probe_procs_reaches_its_max() {
    let _serial = serial();
    let env = Env::new();
    let (_, r, pid) = probe(&env, &["--probe", "procs", "--max", "2000"]);
    assert_eq!(r["created"], 2000, "{r}");
    assert_eq!(r["stopped_by"]["limit"], "reached", "{r}");
    assert_eq!(r["cap"], 2008, "default cap: --max + 8");
    assert_cleaned_up(&r, pid);
}

#[test]
fn probe_procs_is_stopped_by_its_cgroup_cap() {
    let _serial = serial();
    let env = Env::new();
    let (_, r, pid) = probe(&env, &["--probe", "procs", "--max", "2000", "--cap", "300"]);
    // pids.max counts every task in the cgroup, and the probe process that forks the
    // others is one of them: 1 + 299 children = 300, and the 300th child is refused.
    assert_eq!(r["created"], 299, "{r}");
    assert_eq!(r["stopped_by"]["limit"], "cgroup_cap", "{r}");
    assert_eq!(r["stopped_by"]["pids_max"], 300, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("temporarily unavailable"),
        "EAGAIN expected: {r}"
    );
    assert_cleaned_up(&r, pid);
}

#[test]
fn probe_threads_counts_threads_against_the_cap() {
    let _serial = serial();
    let env = Env::new();
    let (_, r, pid) = probe(&env, &["--probe", "threads", "--max", "500"]);
    assert_eq!(
        (r["created"].as_u64(), &r["stopped_by"]["limit"]),
        (Some(500), &"reached".into())
    );
    assert_cleaned_up(&r, pid);
    // Threads are tasks too: the probe's main thread + 99 = 100.
    let (_, r, pid) = probe(
        &env,
        &["--probe", "threads", "--max", "500", "--cap", "100"],
    );
    assert_eq!(r["created"], 99, "{r}");
    assert_eq!(r["stopped_by"]["limit"], "cgroup_cap", "{r}");
    assert_cleaned_up(&r, pid);
}

/// Start a long probe and signal warren while it runs. The guard removes the probe
/// cgroup if the test fails before warren does.
fn interrupted_probe(env: &Env, sig: &str) -> (std::process::Output, i32, CgroupGuard) {
    let child = env
        .cmd()
        .args(["doctor", "--json", "--probe", "procs", "--max", "4000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let name = format!("warren-probe-{pid}");
    let guard = CgroupGuard(pids_parent().join(&name));
    // Wait until the probe has started creating, then signal warren alone.
    let t0 = Instant::now();
    while processes_in(&name).len() < 20 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the probe never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if sig == "-KILL" {
        // Its probe and the probe's children die with it (PR_SET_PDEATHSIG).
        let t0 = Instant::now();
        while !processes_in(&name).is_empty() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "probe processes outlived warren: {:?}",
                processes_in(&name)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    (out, pid, guard)
}

#[test]
fn probe_cleans_up_on_ctrl_c() {
    let _serial = serial();
    let env = Env::new();
    let (out, pid, _guard) = interrupted_probe(&env, "-INT");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    let r = json(&stdout);
    assert_eq!(r["interrupted_by"], 2, "{r}");
    assert_cleaned_up(&r, pid);
}

#[test]
fn probe_left_by_a_killed_warren_is_removed_by_the_next_doctor() {
    let _serial = serial();
    let env = Env::new();
    let (out, pid, _guard) = interrupted_probe(&env, "-KILL");
    assert_eq!(out.status.code(), None, "killed by a signal");
    let dir = pids_parent().join(format!("warren-probe-{pid}"));
    assert!(
        dir.exists(),
        "the killed warren could not remove its cgroup"
    );
    let r = env.ok(&["doctor", "--zones", "1"]);
    assert!(
        r.stderr.contains("removed the leftover probe cgroup"),
        "{}",
        r.stderr
    );
    assert!(!dir.exists());
}

/// Deletes the test's bridge, its ports and its nftables table when dropped (declare it
/// before the `Env`, so the zone is halted first).
struct BridgeGuard(String);

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        if let Ok(mut nl) = warren::net::netlink::Netlink::open() {
            if let Ok(d) = std::fs::read_dir(format!("/sys/class/net/{}/brif", self.0)) {
                for port in d.flatten() {
                    let _ = nl.delete_link(&port.file_name().to_string_lossy());
                }
            }
            let _ = nl.delete_link(&self.0);
        }
        let _ = warren::net::filter::remove_table(&self.0);
    }
}

fn finding<'a>(v: &'a serde_json::Value, limit: &str) -> Option<&'a serde_json::Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["limit"] == limit)
}

/// The isolation lines (issue 14): TIOCSTI as this host has it, and router
/// advertisements on warren's bridge: off as warren creates it (ok), on once someone
/// turns accept_ra back on (weakens isolation, exit code still 0).
#[test]
fn doctor_flags_host_settings_that_weaken_isolation() {
    let _serial = serial();
    let br = BridgeGuard(format!("wd{:x}", std::process::id()));
    let env = Env::new();
    let tiocsti = "/proc/sys/dev/tty/legacy_tiocsti";
    let v = json(&env.ok(&["doctor", "--zones", "1", "--json"]).stdout);
    match std::fs::read_to_string(tiocsti) {
        Ok(t) => {
            let f = finding(&v, "dev.tty.legacy_tiocsti").expect("no tiocsti finding");
            let now: u64 = t.trim().parse().unwrap();
            assert_eq!(f["current"]["value"].as_u64(), Some(now), "{f}");
            let want = if now == 0 { "ok" } else { "weakens" };
            assert_eq!(f["verdict"], want, "{f}");
        }
        Err(_) => assert!(finding(&v, "dev.tty.legacy_tiocsti").is_none()),
    }
    if !Path::new("/proc/sys/kernel/unprivileged_userns_clone").exists() {
        assert!(finding(&v, "kernel.unprivileged_userns_clone").is_none());
    }

    env.host_zone(
        "nd",
        &[
            "net=bridge",
            &format!("net-bridge={}", br.0),
            "net-subnet=10.251.10.0/24",
        ],
    );
    env.ok(&["boot", "nd"]);
    let knob = format!("/proc/sys/net/ipv6/conf/{}/accept_ra", br.0);
    if !Path::new(&knob).exists() {
        panic!("this test needs IPv6 on the host ({knob} is missing)");
    }
    let key = format!("net.ipv6.conf.{}.accept_ra", br.0);
    let v = json(&env.ok(&["doctor", "--zones", "1", "--json"]).stdout);
    let f = finding(&v, &key).unwrap_or_else(|| panic!("no {key} finding: {v}"));
    assert_eq!(
        (f["current"]["value"].as_u64(), &f["verdict"]),
        (Some(0), &serde_json::json!("ok")),
        "{f}"
    );
    // The bridge is the test's own: turning accept_ra on is undone with it.
    std::fs::write(&knob, "1").unwrap();
    let r = env.ok(&["doctor", "--zones", "1"]);
    let line = r.stdout.lines().find(|l| l.starts_with(&key)).unwrap();
    assert!(line.contains("weakens isolation"), "{line}");
    assert!(line.contains("accept_ra=0"), "{line}");
    assert!(
        r.stdout.contains("weaken isolation (see notes)"),
        "{}",
        r.stdout
    );
    let v = json(&env.ok(&["doctor", "--zones", "1", "--json"]).stdout);
    assert_eq!(finding(&v, &key).unwrap()["verdict"], "weakens");
    assert!(v["summary"]["weakens"].as_u64().unwrap() >= 1);
}

/// Transparent huge pages "always" with swap (issue 23): the finding follows this
/// host's THP mode and swap, and a zone asking for memory.swap counts as swap configured.
/// The verdict rule itself is unit-tested on fixture trees in `doctor::thp`.
#[test]
fn doctor_warns_about_thp_always_when_zones_swap() {
    let _serial = serial();
    let enabled = "/sys/kernel/mm/transparent_hugepage/enabled";
    let Ok(mode) = std::fs::read_to_string(enabled) else {
        panic!(
            "{enabled} is missing: this kernel has no THP, so the warning cannot be checked here"
        );
    };
    let always = mode.contains("[always]");
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    env.ok(&[
        "create",
        "sw1",
        "--set",
        "memory.max=64M",
        "--set",
        "memory.swap=32M",
    ]);
    let r = env.run(&["doctor", "--zones", "1", "--json"]);
    let v = json(&r.stdout);
    let f = finding(&v, "transparent_hugepage with swap")
        .unwrap_or_else(|| panic!("no THP finding: {}", r.stdout));
    let want = if always { "warning" } else { "ok" };
    assert_eq!(f["verdict"], want, "THP line {mode:?}: {f}");
    if always {
        let note = f["note"].as_str().unwrap();
        assert!(note.contains("sw1") && note.contains("6.1"), "{note}");
        assert!(
            f["fix"]["text"].as_str().unwrap().contains("madvise"),
            "{f}"
        );
    } else {
        assert!(f["fix"].is_null(), "{f}");
    }
    // Warnings are advice: they never turn the exit code into a failure by themselves.
    let fails = v["summary"]["will_fail"].as_u64().unwrap();
    assert_eq!(
        r.code == 0,
        fails == 0,
        "exit {} with {fails} will-fail",
        r.code
    );
    assert_eq!(v["summary"]["warnings"], u64::from(always));
}

/// `--net bridge --rate-per-zone`: the serving checks of the KVM consolidation study
/// (bridge ports, somaxconn, the ephemeral port range, TIME_WAIT buckets) against this
/// host's values, and `--fix --dry-run` names the sysctls it would raise, the port
/// range among them in its own terms (ports in the range).
#[test]
fn serving_checks_for_bridged_zones_under_load() {
    let env = Env::new();
    let args = [
        "doctor",
        "--zones",
        "2000",
        "--net",
        "bridge",
        "--rate-per-zone",
        "5",
        "--json",
    ];
    let r = env.run(&args);
    let v = json(&r.stdout);
    let get = |limit: &str| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["limit"] == limit)
            .unwrap_or_else(|| panic!("{limit} missing from {}", r.stdout))
            .clone()
    };
    let b = get("bridge ports");
    assert_eq!(
        (b["needed"].as_u64(), b["verdict"].as_str()),
        (Some(2000), Some("will_fail")),
        "{b}"
    );
    assert!(
        b["fix"]["text"].as_str().unwrap().contains("2 bridges"),
        "{b}"
    );
    let s = get("net.core.somaxconn");
    assert_eq!(s["needed"], 10_000, "2,000 zones × 5/s × 1 s: {s}");
    let host: u64 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(s["current"]["value"], host, "{s}");
    let p = get("net.ipv4.ip_local_port_range");
    assert_eq!(p["needed"], 600_000, "2,000 zones × 5/s × 60 s: {p}");
    assert_eq!(
        p["verdict"], "will_fail",
        "no range holds 600,000 ports: {p}"
    );
    let t = get("net.ipv4.tcp_max_tw_buckets");
    assert_ne!(
        t["verdict"], "will_fail",
        "TIME_WAIT overflow is churn, tight at most: {t}"
    );
    assert_ne!(r.code, 0, "a will-fail verdict fails the doctor");
    // Without a rate only the bridge ports are checked.
    let r0 = env.run(&["doctor", "--zones", "2000", "--net", "bridge", "--json"]);
    assert!(!r0.stdout.contains("net.core.somaxconn"), "{}", r0.stdout);
    let mut fix = args.to_vec();
    fix.extend(["--fix", "--dry-run"]);
    let d = json(&env.run(&fix).stdout);
    let applied = d["fix"]["applied"].as_array().unwrap();
    if p["current"]["value"].as_u64().unwrap() >= 64_512 {
        return; // this host already has the widest range: nothing to raise
    }
    let range = applied
        .iter()
        .find(|c| c["key"] == "net.ipv4.ip_local_port_range")
        .unwrap_or_else(|| panic!("the port range is not raised: {d}"));
    assert_eq!(range["to"], 64_512, "the widest range, 1024-65535: {range}");
}
