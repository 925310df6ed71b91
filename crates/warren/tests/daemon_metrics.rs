//! The daemon's `/metrics` carries the doctor's verdicts as `warren metrics` does:
//! the daemon runs the doctor in a child (`warren metrics --doctor-row`) and serves
//! the kept verdicts with their age, so a scrape never waits for (or forks) the
//! doctor. Both texts are read by the Python client library's strict OpenMetrics
//! parser (python3-prometheus-client, installed by scripts/test.sh), as
//! tests/metrics.rs reads `warren metrics`.

mod common;
mod daemon_client;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Env;
use daemon_client::Daemon;

/// Every doctor sample of an OpenMetrics text: {"name{label=value,...}": value}.
const PARSE: &str = r#"
import json, sys
try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError as e:
    print("python3-prometheus-client is missing (" + str(e) + "): apt-get install python3-prometheus-client, as scripts/test.sh does", file=sys.stderr)
    sys.exit(3)
out = {}
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        if s.name.startswith("warren_doctor_"):
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
print(json.dumps(out))
"#;

fn doctor_samples(text: &str) -> BTreeMap<String, f64> {
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", PARSE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("this test needs Debian's /usr/bin/python3 with python3-prometheus-client (scripts/test.sh installs them)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the OpenMetrics parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The daemon's `/metrics` in OpenMetrics (as Prometheus asks for it).
fn daemon_scrape(d: &Daemon) -> String {
    let o = Command::new("curl")
        .args(["-sS", "--max-time", "60", "--unix-socket"])
        .arg(&d.socket)
        .args([
            "-H",
            "Accept: application/openmetrics-text; version=1.0.0",
            "http://warren/metrics",
        ])
        .output()
        .expect("curl runs (apt-get install curl)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The samples without the age, which differs between the two by design.
fn verdicts(s: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    s.iter()
        .filter(|(k, _)| !k.starts_with("warren_doctor_age_seconds"))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

#[test]
fn the_daemons_metrics_carry_the_doctors_verdicts_as_warren_metrics_does() {
    common::require_root();
    let env = Env::new();
    let d = Daemon::start(&env, &[]);
    // The first run starts with the daemon; a scrape before it ends has no verdicts
    // and does not wait for them.
    let t = Instant::now();
    let text = loop {
        let text = daemon_scrape(&d);
        if text.contains("warren_doctor_check{") {
            break text;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no doctor verdicts in the daemon's /metrics after 60 s:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let daemon = doctor_samples(&text);
    let cli_text = env.ok(&["metrics"]).stdout;
    let cli = doctor_samples(&cli_text);
    assert_eq!(
        verdicts(&daemon),
        verdicts(&cli),
        "the daemon's doctor gauges differ from warren metrics'"
    );
    // Every check has exactly one verdict at 1, and there are checks.
    let ones = daemon
        .iter()
        .filter(|(k, v)| k.starts_with("warren_doctor_check{") && **v == 1.0)
        .count();
    let checks: std::collections::BTreeSet<_> = daemon
        .keys()
        .filter_map(|k| k.strip_prefix("warren_doctor_check{check="))
        .filter_map(|k| k.split(",verdict=").next())
        .collect();
    assert!(ones > 3, "too few doctor checks: {daemon:?}");
    assert_eq!(ones, checks.len(), "{daemon:?}");
    assert_eq!(daemon["warren_doctor_plan_zones{}"], 1000.0);
    // The age is there, and it is the age of a run, not of the scrape.
    let age = daemon["warren_doctor_age_seconds{}"];
    assert!((0.0..120.0).contains(&age), "age {age}");
    std::thread::sleep(Duration::from_millis(1500));
    let later = doctor_samples(&daemon_scrape(&d));
    assert!(
        later["warren_doctor_age_seconds{}"] > age + 1.0,
        "the verdicts were run again at a scrape: {age} then {later:?}"
    );
    assert!(cli["warren_doctor_age_seconds{}"] < 60.0, "{cli:?}");
    // The verdicts' source: `warren metrics --doctor-row`, JSON the daemon reads.
    let row = env.ok(&["metrics", "--doctor-row"]).stdout;
    let v: serde_json::Value = serde_json::from_str(&row).unwrap();
    assert_eq!(v["plan_zones"], 1000, "{v}");
    assert!(
        v["findings"]
            .as_array()
            .is_some_and(|f| f.len() >= checks.len()),
        "{v}"
    );
}

/// Processes whose command line names `needle` (a daemon left behind would).
fn processes_naming(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle) && c.contains("warren-daemon"))
        .collect()
}

#[test]
fn bench_metrics_with_a_daemon_times_its_scrapes_reads_its_memory_and_stops_it() {
    common::require_busybox();
    let env = Env::new();
    let out = env.root().join("bench-out");
    let exe = daemon_client::daemon_exe();
    env.ok(&[
        "bench",
        "metrics",
        "--zones",
        "3",
        "--scrapes",
        "3",
        "--daemon",
        exe.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let d = &r["steps"][0]["daemon"];
    assert!(d["first_ms"].as_f64().is_some_and(|m| m > 0.0), "{r}");
    assert!(
        d["warm_ms"]["median"].as_f64().is_some_and(|m| m > 0.0),
        "{r}"
    );
    // A daemon is a few MiB resident, not nothing and not a runaway.
    let rss = d["rss_kib"].as_u64().unwrap();
    assert!((1024..512 * 1024).contains(&rss), "RSS {rss} KiB: {r}");
    assert!(d["peak_rss_kib"].as_u64().unwrap() >= rss, "{r}");
    // Its answer carried the step's zones, as the in-process scrape did.
    assert!(d["bytes"].as_u64().unwrap() > 1000, "{r}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("The daemon's own `/metrics`"), "{report}");
    // The daemon is gone, and so are the zones.
    let root = env.root().to_string_lossy().into_owned();
    assert!(
        processes_naming(&root).is_empty(),
        "a daemon is left: {:?}",
        processes_naming(&root)
    );
    assert_eq!(
        std::fs::read_dir(env.root().join("zones")).unwrap().count(),
        0
    );
    // A daemon that cannot start fails the bench, naming the option and the fix.
    env.run(&[
        "bench",
        "metrics",
        "--zones",
        "1",
        "--daemon",
        "/nonexistent/warren-daemon",
        "--out",
        out.to_str().unwrap(),
    ])
    .fails(5, "--daemon /nonexistent/warren-daemon");
    assert_eq!(
        std::fs::read_dir(env.root().join("zones")).unwrap().count(),
        0
    );
}
