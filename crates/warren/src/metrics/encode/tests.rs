//! The encoding on fixture data: names, units, types, labels, absent figures, escaping.

use super::*;
use crate::config::{NetMode, Priority};
use crate::doctor::{Current, Finding, Unit as DUnit, Verdict};
use crate::metrics::{AgentRow, DoctorRow};
use crate::stat::{Pressure, ZoneMemory};
use crate::state::ZoneState;
use crate::zone::Kind;

fn running() -> ZoneRow {
    ZoneRow {
        name: "web1".into(),
        kind: Kind::Zone,
        template: Some("host".into()),
        state: ZoneState::Running,
        net: Some(NetMode::Bridge),
        priority: Some(Priority::BestEffort),
        boot_time_s: Some(1_700_000_000.5),
        cpu_seconds: Some(2.5),
        memory: ZoneMemory {
            charged_bytes: Some(80 << 20),
            anon_bytes: Some(64 << 20),
            file_bytes: Some(8 << 20),
            shmem_bytes: Some(4096),
            kernel_bytes: Some(1 << 20),
            swap_bytes: None,
        },
        memory_limit: Some(128 << 20),
        memory_request: Some(32 << 20),
        processes: Some(3),
        tasks: Some(12),
        tasks_limit: Some(100),
        oom_kills: Some(2),
        disk_bytes: Some(28 << 10),
        disk_limit: Some(1 << 30),
        net_bytes: Some((2500, 100)),
        memory_pressure: Some(Pressure {
            some_avg10: 1.25,
            full_avg10: 0.5,
        }),
    }
}

fn installed() -> ZoneRow {
    ZoneRow {
        name: "db".into(),
        kind: Kind::Zone,
        template: Some("busybox".into()),
        state: ZoneState::Installed,
        net: Some(NetMode::None),
        priority: Some(Priority::Critical),
        boot_time_s: None,
        cpu_seconds: None,
        memory: ZoneMemory::default(),
        memory_limit: None,
        memory_request: None,
        processes: None,
        tasks: None,
        tasks_limit: None,
        oom_kills: None,
        disk_bytes: Some(4096),
        disk_limit: None,
        net_bytes: None,
        memory_pressure: None,
    }
}

fn fixture() -> Snapshot {
    let text =
        std::fs::read_to_string(crate::stat::readers::tests::fixtures().join("proc/meminfo"))
            .unwrap();
    let meminfo = crate::stats::parse_meminfo(&text);
    Snapshot {
        zones: vec![running(), installed()],
        host: crate::stat::memstat::host_memory(&meminfo),
        host_available: Some(1 << 30),
        swap: Some((2 << 30, 1 << 30)),
        host_pressure: Some(Pressure {
            some_avg10: 12.5,
            full_avg10: 2.0,
        }),
        agent: AgentRow {
            signals: vec![
                ("available".into(), Some(42.0), 5.0),
                ("swap-in".into(), None, 5000.0),
            ],
            swap_pages: (10, 30),
            actions: vec![
                ("evict".into(), "done".into(), 3),
                ("evict".into(), "failed".into(), 1),
            ],
            last_action_s: vec![("evict".into(), 1_700_000_100.0)],
        },
        doctor: Some(DoctorRow {
            plan_zones: 1000,
            findings: vec![Finding {
                limit: "cgroup delegation \"memory\"".into(),
                current: Current::Value(1),
                needed: 2,
                unit: DUnit::Count,
                verdict: Verdict::WillFail,
                fix: None,
                note: String::new(),
            }],
        }),
        doctor_age_seconds: Some(12.5),
        collect_seconds: 0.004,
    }
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[test]
fn zone_families_carry_units_types_and_values() {
    let text = encode(&fixture());
    let l = lines(&text);
    for want in [
        "# TYPE warren_zone_cpu_seconds counter",
        "# UNIT warren_zone_cpu_seconds seconds",
        "warren_zone_cpu_seconds_total{zone=\"web1\"} 2.5",
        "warren_zone_memory_bytes{zone=\"web1\",kind=\"anon\"} 67108864",
        "warren_zone_memory_bytes{zone=\"web1\",kind=\"kernel\"} 1048576",
        "warren_zone_memory_limit_bytes{zone=\"web1\"} 134217728",
        "warren_zone_memory_request_bytes{zone=\"web1\"} 33554432",
        "warren_zone_pids{zone=\"web1\"} 12",
        "warren_zone_pids_limit{zone=\"web1\"} 100",
        "warren_zone_oom_kills_total{zone=\"web1\"} 2",
        "warren_zone_disk_bytes{zone=\"db\"} 4096",
        "warren_zone_disk_limit_bytes{zone=\"web1\"} 1073741824",
        "warren_zone_network_receive_bytes_total{zone=\"web1\"} 2500",
        "warren_zone_network_transmit_bytes_total{zone=\"web1\"} 100",
        "warren_zone_memory_pressure_avg10_ratio{zone=\"web1\",kind=\"full\"} 0.005",
        "warren_zone_state{zone=\"web1\",state=\"running\"} 1",
        "warren_zone_state{zone=\"web1\",state=\"installed\"} 0",
        "warren_zone_state{zone=\"db\",state=\"installed\"} 1",
        "warren_zone_info{zone=\"web1\",kind=\"zone\",template=\"host\",net=\"bridge\",priority=\"best-effort\"} 1",
    ] {
        assert!(l.contains(&want), "missing {want:?} in:\n{text}");
    }
    // Six states per zone, exactly one of them 1.
    let db_states: Vec<&&str> = l
        .iter()
        .filter(|x| x.starts_with("warren_zone_state{zone=\"db\""))
        .collect();
    assert_eq!(db_states.len(), 6);
    assert_eq!(db_states.iter().filter(|x| x.ends_with(" 1")).count(), 1);
    // Absent figures are absent, never 0: no swap reading, nothing for a halted zone.
    assert!(!text.contains("kind=\"swap\""), "{text}");
    assert!(!text.contains("warren_zone_cpu_seconds_total{zone=\"db\"}"));
    assert!(!text.contains("warren_zone_memory_limit_bytes{zone=\"db\"}"));
    assert_eq!(l.last(), Some(&"# EOF"));
}

#[test]
fn host_agent_and_doctor_families() {
    let s = fixture();
    let text = encode(&s);
    let l = lines(&text);
    let h = s.host.as_ref().unwrap();
    // The memstat kinds add up to the total, as in `warren memstat`.
    let sum: u64 = l
        .iter()
        .filter(|x| x.starts_with("warren_host_memory_bytes{"))
        .map(|x| x.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, h.total_bytes);
    assert!(l.contains(&format!("warren_host_memory_total_bytes {}", h.total_bytes).as_str()));
    for want in [
        "warren_host_memory_pressure_avg10_ratio{kind=\"some\"} 0.125",
        "warren_host_swap_pages_total{direction=\"out\"} 30",
        "warren_agent_signal{signal=\"available\"} 42.0",
        "warren_agent_signal_trigger{signal=\"swap-in\"} 5000.0",
        "warren_agent_actions_total{action=\"evict\",outcome=\"done\"} 3",
        "warren_agent_actions_total{action=\"evict\",outcome=\"failed\"} 1",
        "warren_agent_last_action_time_seconds{action=\"evict\"} 1700000100.0",
        "warren_doctor_plan_zones 1000",
        "warren_doctor_age_seconds 12.5",
        // The check's name is escaped, not cut.
        "warren_doctor_check{check=\"cgroup delegation \\\"memory\\\"\",verdict=\"will_fail\"} 1",
        "warren_doctor_check{check=\"cgroup delegation \\\"memory\\\"\",verdict=\"ok\"} 0",
    ] {
        assert!(l.contains(&want), "missing {want:?} in:\n{text}");
    }
    // A signal that cannot be measured (one sample: no rate) has no sample.
    assert!(!text.contains("warren_agent_signal{signal=\"swap-in\"}"));
}

#[test]
fn each_family_is_described_once_and_empty_ones_are_left_out() {
    let mut s = fixture();
    s.zones.clear();
    s.doctor = None;
    s.doctor_age_seconds = None;
    s.agent.actions.clear();
    s.agent.last_action_s.clear();
    let text = encode(&s);
    assert!(!text.contains("warren_zone_"), "{text}");
    assert!(!text.contains("warren_doctor_"), "{text}");
    assert!(!text.contains("warren_agent_actions"), "{text}");
    let full = encode(&fixture());
    let types: Vec<&str> = full.lines().filter(|x| x.starts_with("# TYPE ")).collect();
    let mut names: Vec<&str> = types.iter().map(|t| t.split(' ').nth(2).unwrap()).collect();
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "a family described twice: {types:?}");
    assert!(names.iter().all(|n| n.starts_with("warren_")));
}

#[test]
fn prometheus_text_names_counter_families_as_their_samples() {
    let text = encode_as(&fixture(), Format::Prometheus);
    let l = lines(&text);
    assert!(
        l.contains(&"# TYPE warren_zone_cpu_seconds_total counter"),
        "{text}"
    );
    assert!(l.contains(&"warren_zone_cpu_seconds_total{zone=\"web1\"} 2.5"));
    assert!(l
        .iter()
        .any(|x| x.starts_with("# HELP warren_zone_oom_kills_total ")));
    // Gauges keep their names; no OpenMetrics-only lines.
    assert!(l.contains(&"# TYPE warren_zone_memory_limit_bytes gauge"));
    assert!(
        !text.contains("# UNIT") && !text.contains("# EOF"),
        "{text}"
    );
    // The same samples in both formats.
    let samples = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|x| !x.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(samples(&text), samples(&encode(&fixture())));
}
