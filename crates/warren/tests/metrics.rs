//! `warren metrics` on the real kernel, read back by a real Prometheus parser: the
//! Python client library's (Debian's python3-prometheus-client; scripts/test.sh
//! installs it), its strict OpenMetrics parser for the default format and its text
//! parser for `--format prometheus`. The values are checked against what was set and
//! done: the memory and pids limits set, the states, traffic on a bridged zone's
//! veth, an OOM kill counted.
//!
//! The bridged zones use this test's own bridge and subnet, removed by a guard (as
//! tests/net.rs does); traffic goes only between the test's own zones.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use common::Env;
use warren::net::netlink::Netlink;

/// Deletes its bridge and any port left on it when dropped; declared before the `Env`
/// so the zones are halted first.
struct BridgeGuard(String);

impl BridgeGuard {
    fn new(tag: &str) -> BridgeGuard {
        let name = format!("wm{:x}{tag}", std::process::id());
        assert!(name.len() <= 15, "{name}");
        BridgeGuard(name)
    }
}

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        let Ok(mut nl) = Netlink::open() else {
            return;
        };
        if let Ok(d) = std::fs::read_dir(format!("/sys/class/net/{}/brif", self.0)) {
            for port in d.flatten() {
                let _ = nl.delete_link(&port.file_name().to_string_lossy());
            }
        }
        let _ = nl.delete_link(&self.0);
        let _ = warren::net::filter::remove_table(&self.0);
    }
}

/// The parser run over the text: every sample as [name, {labels}, value].
const PARSE: &str = r#"
import json, sys
try:
    if sys.argv[1] == "openmetrics":
        from prometheus_client.openmetrics.parser import text_string_to_metric_families
    else:
        from prometheus_client.parser import text_string_to_metric_families
except ImportError as e:
    print("python3-prometheus-client is missing (" + str(e) + "): apt-get install python3-prometheus-client, as scripts/test.sh does", file=sys.stderr)
    sys.exit(3)
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        out.append([s.name, s.labels, s.value, fam.type])
print(json.dumps(out))
"#;

/// A series: its name and sorted labels.
type Series = (String, Vec<(String, String)>);

/// Samples by series: (value, the family's type).
struct Scrape(BTreeMap<Series, (f64, String)>);

impl Scrape {
    /// Parse `text` with the Python client library's parser for `format`.
    fn parse(text: &str, format: &str) -> Scrape {
        // Debian's python3, where its python3-prometheus-client lives (not a pyenv one).
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", PARSE, format])
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
            "the {format} parser refused warren's text: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: Vec<(String, BTreeMap<String, String>, f64, String)> =
            serde_json::from_slice(&out.stdout).unwrap();
        let mut map = BTreeMap::new();
        for (name, labels, value, ty) in rows {
            let key = (name, labels.into_iter().collect());
            assert!(
                map.insert(key.clone(), (value, ty)).is_none(),
                "duplicate series {key:?}"
            );
        }
        Scrape(map)
    }

    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut l: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.sort();
        self.0.get(&(name.to_string(), l)).map(|v| v.0)
    }

    #[track_caller]
    fn must(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
    }

    fn type_of(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|((n, _), _)| n == name)
            .map(|(_, (_, t))| t.as_str())
    }

    /// Every sample of family `name` as (labels, value).
    fn all(&self, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        self.0
            .iter()
            .filter(|((n, _), _)| n == name)
            .map(|((_, l), (v, _))| (l.iter().cloned().collect(), *v))
            .collect()
    }
}

fn scrape(env: &Env) -> Scrape {
    let text = env.ok(&["metrics"]).stdout;
    assert!(text.ends_with("# EOF\n"), "{text}");
    Scrape::parse(&text, "openmetrics")
}

fn zone_state(s: &Scrape, zone: &str) -> String {
    let on: Vec<String> = s
        .all("warren_zone_state")
        .into_iter()
        .filter(|(l, v)| l["zone"] == zone && *v == 1.0)
        .map(|(l, _)| l["state"].clone())
        .collect();
    assert_eq!(on.len(), 1, "zone {zone}: states at 1: {on:?}");
    on[0].clone()
}

fn bb_zone(env: &Env, zone: &str, sets: &[String]) {
    if !env.root().join("templates/bb").exists() {
        env.ok(&["template", "create", "bb", "--busybox"]);
    }
    let mut args = vec!["create", zone, "--template", "bb"];
    for s in sets {
        args.push("--set");
        args.push(s);
    }
    env.ok(&args);
    env.ok(&["install", zone]);
}

#[test]
fn metrics_parse_and_match_limits_states_traffic_and_oom_kills() {
    common::require_busybox();
    let br = BridgeGuard::new("m");
    let env = Env::new();
    env.host_zone(
        "lim",
        &[
            "memory.max=32M",
            "memory.swap=0",
            "memory.request=16M",
            "max-processes=40",
        ],
    );
    let bridged = [
        "net=bridge".to_string(),
        format!("net-bridge={}", br.0),
        "net-subnet=10.251.7.0/24".to_string(),
    ];
    bb_zone(&env, "b1", &bridged);
    bb_zone(&env, "b2", &bridged);
    env.ok(&["create", "idle"]);
    env.ok(&["install", "idle"]);
    env.ok(&["boot", "lim", "b1", "b2"]);

    let s = scrape(&env);
    // States, one gauge each at 1.
    assert_eq!(zone_state(&s, "lim"), "running");
    assert_eq!(zone_state(&s, "b1"), "running");
    assert_eq!(zone_state(&s, "idle"), "installed");
    assert_eq!(s.type_of("warren_zone_state"), Some("gauge"));
    // The limits set are the limits shown, and what the kernel holds.
    let lim = [("zone", "lim")];
    assert_eq!(
        s.must("warren_zone_memory_limit_bytes", &lim),
        (32u64 << 20) as f64
    );
    assert_eq!(
        env.cgroup_file("lim", "memory", "memory.limit_in_bytes"),
        (32u64 << 20).to_string()
    );
    assert_eq!(
        s.must("warren_zone_memory_request_bytes", &lim),
        (16u64 << 20) as f64
    );
    assert_eq!(s.must("warren_zone_pids_limit", &lim), 40.0);
    assert!(s.must("warren_zone_pids", &lim) >= 1.0);
    // A zone without memory.max has the default limit; the metric is the kernel's.
    let b1_limit: f64 = env
        .cgroup_file("b1", "memory", "memory.limit_in_bytes")
        .parse()
        .unwrap();
    assert_eq!(
        s.get("warren_zone_memory_limit_bytes", &[("zone", "b1")]),
        (b1_limit < 1e18).then_some(b1_limit)
    );
    assert_eq!(
        s.get("warren_zone_cpu_seconds_total", &[("zone", "idle")]),
        None
    );
    assert_eq!(s.type_of("warren_zone_cpu_seconds_total"), Some("counter"));
    assert!(s.must("warren_zone_memory_charged_bytes", &lim) > 0.0);
    for kind in ["anon", "file", "kernel"] {
        s.must(
            "warren_zone_memory_bytes",
            &[("zone", "lim"), ("kind", kind)],
        );
    }
    let info = s.all("warren_zone_info");
    let b1 = info.iter().find(|(l, _)| l["zone"] == "b1").unwrap();
    assert_eq!(
        (b1.0["template"].as_str(), b1.0["net"].as_str()),
        ("bb", "bridge")
    );

    // Traffic between the two bridged zones shows on their veths' counters.
    let before_rx = s.must("warren_zone_network_receive_bytes_total", &[("zone", "b2")]);
    let addr2 = env.runtime("b2")["net"]["address"]
        .as_str()
        .unwrap()
        .to_string();
    env.sh("b1", &format!("ping -c 3 -W 3 -s 1000 {addr2}"))
        .ok();
    let s = scrape(&env);
    let rx = s.must("warren_zone_network_receive_bytes_total", &[("zone", "b2")]);
    let tx = s.must(
        "warren_zone_network_transmit_bytes_total",
        &[("zone", "b1")],
    );
    assert!(
        rx >= before_rx + 3000.0,
        "b2 received {before_rx} then {rx}"
    );
    assert!(tx >= 3000.0, "b1 sent {tx}");
    assert_eq!(
        s.get("warren_zone_network_receive_bytes_total", &lim),
        None,
        "lim is not bridged"
    );

    // An OOM kill in the zone increments its counter.
    assert_eq!(s.must("warren_zone_oom_kills_total", &lim), 0.0);
    let r = env.sh("lim", "dd if=/dev/zero of=/dev/null bs=128M count=1");
    assert_ne!(r.code, 0, "the hog survived: {r:?}");
    let s = scrape(&env);
    let kills = s.must("warren_zone_oom_kills_total", &lim);
    assert!(kills >= 1.0, "no OOM kill counted");
    let kernel: f64 = env
        .cgroup_file("lim", "memory", "memory.oom_control")
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(kills, kernel);

    // Host rows add up as memstat's do; each doctor check has exactly one verdict.
    let kinds: f64 = s
        .all("warren_host_memory_bytes")
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert_eq!(kinds, s.must("warren_host_memory_total_bytes", &[]));
    let mut verdicts: BTreeMap<String, f64> = BTreeMap::new();
    for (l, v) in s.all("warren_doctor_check") {
        *verdicts.entry(l["check"].clone()).or_default() += v;
    }
    assert!(verdicts.contains_key("kernel.pid_max"), "{verdicts:?}");
    assert!(verdicts.values().all(|n| *n == 1.0), "{verdicts:?}");
    assert_eq!(s.must("warren_doctor_plan_zones", &[]), 1000.0);
    s.must("warren_agent_signal_trigger", &[("signal", "available")]);

    // The 0.0.4 text form, written atomically to a file, has the same samples.
    let file = env.root().join("warren.prom");
    env.ok(&[
        "metrics",
        "--format",
        "prometheus",
        "--no-doctor",
        "--output",
        file.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&file).unwrap();
    let p = Scrape::parse(&text, "prometheus");
    assert_eq!(
        p.must("warren_zone_memory_limit_bytes", &lim),
        (32u64 << 20) as f64
    );
    assert_eq!(p.must("warren_zone_oom_kills_total", &lim), kills);
    assert_eq!(p.type_of("warren_zone_oom_kills_total"), Some("counter"));
    assert!(p.all("warren_doctor_check").is_empty(), "--no-doctor");
    let leftovers: Vec<_> = std::fs::read_dir(env.root())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");

    // After a halt the zone is installed and its usage families are gone.
    env.ok(&["halt", "lim"]);
    let s = scrape(&env);
    assert_eq!(zone_state(&s, "lim"), "installed");
    assert_eq!(s.get("warren_zone_oom_kills_total", &lim), None);
}

#[test]
fn bad_metrics_arguments_are_refused_with_the_fix() {
    let env = Env::new();
    env.run(&["metrics", "--doctor-zones", "0"])
        .fails(5, "--doctor-zones must be at least 1");
    let missing = env.root().join("no-such-dir/warren.prom");
    env.run(&["metrics", "--output", missing.to_str().unwrap()])
        .fails(9, "its directory must exist");
    env.run(&["metrics", "--agent-config", "/nonexistent/agent.toml"])
        .fails(5, "--agent-config /nonexistent/agent.toml");
}

#[test]
fn bench_metrics_times_scrapes_and_removes_its_zones() {
    common::require_busybox();
    let env = Env::new();
    let out = env.root().join("bench-out");
    env.ok(&[
        "bench",
        "metrics",
        "--zones",
        "2,5",
        "--scrapes",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for (s, n) in steps.iter().zip([2u64, 5]) {
        assert_eq!(s["zones"].as_u64(), Some(n));
        let cold = s["cold_ms"].as_f64().unwrap();
        let warm = s["warm_ms"]["median"].as_f64().unwrap();
        assert!(cold > 0.0 && warm > 0.0 && warm < 60_000.0, "{s}");
        // Every zone of the step was in the scrape: six state samples each.
        assert!(s["samples"].as_u64().unwrap() >= n * 6, "{s}");
    }
    assert!(r["extrapolated_warm_ms_at_1000"].as_f64().is_some(), "{r}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| 5 |"), "{report}");
    // Nothing of the bench is left: no zone, no template, no cgroup.
    let zones: Vec<_> = std::fs::read_dir(env.root().join("zones"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(zones.is_empty(), "{zones:?}");
    assert!(
        !env.root().join("templates/warren-bench-busybox").exists(),
        "the bench's template is left"
    );
    fn bench_dirs(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if e.file_name().to_string_lossy().starts_with("warren-bench-") {
                    out.push(e.path());
                }
                bench_dirs(&e.path(), out);
            }
        }
    }
    let mut left = Vec::new();
    for d in env.group_dirs() {
        bench_dirs(&d, &mut left);
    }
    assert!(left.is_empty(), "zone cgroups left: {left:?}");
}
