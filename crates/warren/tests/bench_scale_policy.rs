//! `warren bench scale --agent-policy` (evict vs suspend under the same pressure, issue
//! 19 item 4) and the bench's cleanup when it is interrupted (SIGINT: issue 21 — no
//! zone, cgroup, budget, swap or process left behind). Needs the host's PostgreSQL
//! (`apt-get install postgresql`, as tests/bench.rs's pgbench tests). No timing
//! assertions.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{ChildGuard, Env};

/// The scale tests run one at a time: each is the other's memory pressure.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Live processes whose command line mentions `root` (the bench's agent and `warren
/// login` children carry the state root in their arguments or are zone processes
/// started from it), other than this test itself.
fn processes_mentioning(root: &Path) -> Vec<(i32, String)> {
    let needle = root.to_string_lossy().into_owned();
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me || !common::alive(pid) {
            continue;
        }
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(&needle) {
            out.push((pid, cmd.trim().to_string()));
        }
    }
    out
}

/// Nothing of a bench run is left in `env`'s root or on the host.
fn nothing_left(env: &Env, swappiness: &str) {
    let list = env.ok(&["list", "--json"]);
    assert_eq!(list.stdout.trim(), "[]", "zones left: {}", list.stdout);
    let scratch: Vec<_> = std::fs::read_dir(env.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".bench"))
        .collect();
    assert!(scratch.is_empty(), "scratch left: {scratch:?}");
    let templates = std::fs::read_dir(env.root().join("templates")).map_or(0, |d| d.count());
    assert_eq!(templates, 0, "the bench's template is left");
    // The budget was the zone group's memory limit: the group itself is gone.
    assert!(
        env.group_dirs().is_empty(),
        "cgroups left (the budget with them): {:?}",
        env.group_dirs()
    );
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    assert!(
        !swaps.contains(env.root().to_str().unwrap()),
        "swap left on: {swaps}"
    );
    assert!(
        !env.root().join("swap/state.json").exists(),
        "swap record left"
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap(),
        swappiness,
        "vm.swappiness not restored"
    );
    let procs = processes_mentioning(env.root());
    assert!(procs.is_empty(), "processes left: {procs:?}");
}

fn results(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
}

/// `--agent-policy both`: each step twice, evict then suspend, under the same budget;
/// the suspending run loses no zone and evicts none, no OOM kill in either, every zone
/// the evicting run lost is one the agent evicted, and the report puts them side by side.
#[test]
fn agent_policy_both_runs_each_step_evicting_then_suspending() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let swappiness = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let out = env.root().join("out");
    env.ok(&[
        "bench",
        "scale",
        "--workload",
        "pgbench",
        "--zones",
        "2",
        "--duration",
        "5",
        "--memory-per-zone",
        "256M",
        "--pgbench-scale",
        "1",
        "--oversubscribe",
        "25",
        "--agent-policy",
        "both",
        "--out",
        out.to_str().unwrap(),
    ]);
    let r = results(&out);
    assert_eq!(
        (&r["agent"], &r["agent_policy"]),
        (&true.into(), &"both".into()),
        "{r}"
    );
    let rows = r["results"].as_array().unwrap();
    let policies: Vec<&str> = rows
        .iter()
        .map(|s| s["agent_policy"].as_str().unwrap())
        .collect();
    assert_eq!(policies, ["evict", "suspend"], "{r}");
    for s in rows {
        assert_eq!(s["zones"], 2, "{s}");
        assert_eq!(s["oom_kills"], 0, "no OOM kill: {s}");
        assert!(
            (s["oversubscription_pct"].as_f64().unwrap() - 25.0).abs() < 0.01,
            "{s}"
        );
    }
    let (evict, suspend) = (&rows[0], &rows[1]);
    assert_eq!(
        evict["zones_lost"].as_array().unwrap().len() as u64,
        evict["evictions"].as_u64().unwrap(),
        "every zone the evicting run lost was evicted: {evict}"
    );
    assert_eq!(suspend["evictions"], 0, "{suspend}");
    assert_eq!(
        suspend["zones_lost"],
        serde_json::json!([]),
        "no zone lost: {suspend}"
    );
    assert!(suspend["throughput"].as_f64().unwrap() > 0.0, "{suspend}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Evict vs suspend, same pressure"), "{md}");
    assert!(
        md.contains("| evictions | suspensions | OOM kills | zones lost |"),
        "{md}"
    );
    assert!(
        md.contains("evicting (suspend-first = false), then suspending"),
        "{md}"
    );
    nothing_left(&env, &swappiness);
}

/// SIGINT to a running `bench scale` (budget set, swap on, agent running, pgbench
/// running in the zones): it stops, says so, and removes all it made.
#[test]
fn sigint_to_bench_scale_leaves_no_zone_cgroup_budget_swap_or_process() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let swappiness = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let out = env.root().join("out");
    let err = env.root().join("bench.err");
    let child = env
        .cmd()
        .args([
            "bench",
            "scale",
            "--workload",
            "pgbench",
            "--zones",
            "2",
            "--duration",
            "120",
            "--memory-per-zone",
            "256M",
            "--pgbench-scale",
            "1",
            "--oversubscribe",
            "25",
            "--agent-policy",
            "suspend",
            "--out",
        ])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let mut guard = ChildGuard(child);
    let pid = guard.0.id();
    let scratch = env.root().join(format!(".bench-scale-{pid}"));
    // Wait for the timed run: the agent's config is written, pgbench runs in each zone.
    let t0 = Instant::now();
    loop {
        // The 2-zone step's logs: step-<workload>-<rep|cal><repetition>-<zones>.
        let step2 = std::fs::read_dir(&scratch).ok().and_then(|d| {
            d.flatten().map(|e| e.path()).find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("step-pgbench-rep") && n.ends_with("-2"))
            })
        });
        let running = step2.is_some_and(|d| {
            (1..=2).all(|i| d.join(format!("warren-bench-s{i:04}-pgbench.log")).exists())
        });
        if running && scratch.join("agent.toml").exists() {
            break;
        }
        if let Ok(Some(st)) = guard.0.try_wait() {
            panic!(
                "bench scale ended before it was interrupted ({st}): {}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "bench scale did not reach its timed run in 300 s: {}",
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    assert!(
        swaps.contains(env.root().to_str().unwrap()),
        "the step's swap is on before the signal: {swaps}"
    );
    assert!(
        !processes_mentioning(env.root()).is_empty(),
        "the agent runs"
    );
    let t_sig = Instant::now();
    assert!(std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let status = loop {
        if let Some(st) = guard.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            t_sig.elapsed() < Duration::from_secs(120),
            "bench scale still runs 120 s after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(9), "stderr: {stderr}");
    assert!(
        stderr.contains("interrupted by signal 2 (SIGINT)"),
        "stderr: {stderr}"
    );
    assert!(
        !out.join("results.json").exists(),
        "no results of a cut run"
    );
    nothing_left(&env, &swappiness);
}

/// The OpenShift + wasp study's preset, small: both databases (PostgreSQL + pgbench,
/// MariaDB + sysbench; the test command installs postgresql, mariadb-server and
/// sysbench), 1 and 2 zones against a fixed budget that 2 zones oversubscribe by 25 %,
/// the calibration first and last, the agent's swap triggers set from the 1-zone step
/// for the 2-zone step; results.json has the study's fields, the report its noise and
/// verdict, and nothing is left, no database server either.
#[test]
fn study_wasp_runs_both_databases_interleaved_with_noise_and_leaves_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let swappiness = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let out = env.root().join("out");
    env.ok(&[
        "bench",
        "scale",
        "--study",
        "wasp",
        "--budget",
        "256M",
        "--memory-per-zone",
        "160M",
        "--zones",
        "1,2",
        "--repeat",
        "1",
        "--warmup",
        "1",
        "--duration",
        "3",
        "--pgbench-scale",
        "1",
        "--sysbench-rows",
        "1000",
        "--out",
        out.to_str().unwrap(),
    ]);
    let r = results(&out);
    assert_eq!(r["study"], "wasp", "{r}");
    assert_eq!(r["workloads"], serde_json::json!(["pgbench", "mariadb"]));
    assert_eq!((&r["repeat"], &r["warmup_s"]), (&1.into(), &1.0.into()));
    assert_eq!(r["budget_mib"], 256.0);
    assert_eq!(r["buffer_pct"], 50);
    let cpus = r["machine"]["cpus"].as_f64().unwrap();
    let cap = r["cpu_per_zone"].as_f64().unwrap();
    assert!((cap - cpus * 1.125 / 12.0).abs() < 1e-3, "{r}");
    // A database's steps in a row, then the other's (A B), each against the budget;
    // the step past the reference once more without the agent (the counterfactual).
    let rows = r["results"].as_array().unwrap();
    let order: Vec<(&str, u64, &str)> = rows
        .iter()
        .map(|s| {
            (
                s["workload"].as_str().unwrap(),
                s["zones"].as_u64().unwrap(),
                s["agent_policy"].as_str().unwrap_or("off"),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("pgbench", 1, "evict"),
            ("pgbench", 2, "evict"),
            ("pgbench", 2, "off"),
            ("mariadb", 1, "evict"),
            ("mariadb", 2, "evict"),
            ("mariadb", 2, "off")
        ]
    );
    for s in rows {
        let n = s["zones"].as_f64().unwrap();
        let agent = !s["agent_policy"].is_null();
        assert_eq!(s["repetition"], 1, "{s}");
        assert_eq!(s["oom_kills"], 0, "no OOM kill: {s}");
        assert_eq!(s["budget_mib"], 256.0, "{s}");
        assert!((s["cpu_cap_total"].as_f64().unwrap() - cap * n).abs() < 1e-9);
        assert!(s["swap_total_mib"].as_f64().unwrap() > 0.0, "{s}");
        for k in [
            "swap_in_pages_s",
            "swap_out_pages_s",
            "swap_in_peak_pages_s",
        ] {
            assert!(s[k].as_f64().unwrap() >= 0.0, "{k}: {s}");
        }
        assert_eq!(
            s["zones_lost"].as_array().unwrap().len() as u64,
            s["evictions"].as_u64().unwrap(),
            "every zone lost was evicted: {s}"
        );
        assert!(s["tpm"].as_f64().unwrap() > 0.0, "{s}");
        let want = if n == 2.0 { 25.0 } else { -37.5 };
        assert!(
            (s["oversubscription_pct"].as_f64().unwrap() - want).abs() < 0.01,
            "{s}"
        );
        if n == 1.0 {
            assert!(
                s["agent_thresholds"].is_null(),
                "defaults below the reference: {s}"
            );
            assert_eq!(s["failed_zones"], serde_json::json!([]), "{s}");
        } else if agent {
            let t = &s["agent_thresholds"];
            assert_eq!(t["from_zones"], 1, "{s}");
            assert!(t["swap_in_trigger"].as_f64().unwrap() >= 256.0, "{s}");
        } else {
            assert!(s["agent_thresholds"].is_null(), "no agent: {s}");
            assert_eq!(s["agent_actions"], serde_json::json!([]), "{s}");
            assert_eq!(s["evictions"], 0, "{s}");
            assert_eq!(s["zones_lost"], serde_json::json!([]), "{s}");
        }
    }
    assert!(
        rows[3]["latency_p95_ms"].as_f64().unwrap() > 0.0,
        "{}",
        rows[3]
    );
    // The calibration: one zone of each database first and last.
    let cal: Vec<(&str, u64)> = r["calibration"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["workload"].as_str().unwrap(),
                s["repetition"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        cal,
        [
            ("pgbench", 0),
            ("mariadb", 0),
            ("pgbench", 0),
            ("mariadb", 0)
        ]
    );
    let sum = &r["summary"];
    assert_eq!(sum["rows"].as_array().unwrap().len(), 6, "{sum}");
    assert_eq!(sum["noise"].as_array().unwrap().len(), 2, "{sum}");
    let verdicts = sum["verdicts"].as_array().unwrap();
    assert_eq!(
        verdicts.len(),
        4,
        "one per database, with and without the agent: {sum}"
    );
    for v in verdicts {
        assert_eq!(
            (&v["reference_zones"], &v["oversubscribed_zones"]),
            (&1.into(), &2.into())
        );
        assert!(v["larger_than_noise"].is_boolean(), "{v}");
        assert!(v["noise_pct"].as_f64().unwrap() >= 0.0, "{v}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for want in [
        "--study wasp",
        "## Over the repetitions: median (min–max)",
        "## Noise",
        "## Is the oversubscribed step's loss larger than the noise?",
        "## What the agent did",
        "### With and without the agent (the counterfactual)",
        "pgbench vs mariadb at 2 zones, agent off",
        "InnoDB O_DIRECT",
    ] {
        assert!(md.contains(want), "{want}: {md}");
    }
    for db in ["pgbench", "mariadb"] {
        let svg = std::fs::read_to_string(out.join(format!("tpm-{db}.svg"))).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("<polyline"),
            "{svg}"
        );
        assert!(
            svg.contains("memory +25.0 %"),
            "the oversubscribed step is marked: {svg}"
        );
    }
    nothing_left(&env, &swappiness);
    let servers: Vec<(i32, String)> = processes_mentioning(Path::new("--socket=/tmp/mysqld.sock"));
    assert!(servers.is_empty(), "a MariaDB server is left: {servers:?}");
}
