//! `warren bench density`: small steps, plausible numbers, the files it writes, and
//! that it leaves nothing behind. No timing assertions.

mod common;

use common::Env;

/// Tags open and close in order (a small XML well-formedness check: no attributes with
/// '>' inside are written by the bench).
fn balanced(svg: &str) -> bool {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find('<') {
        let Some(j) = rest[i..].find('>') else {
            return false;
        };
        let tag = &rest[i + 1..i + j];
        rest = &rest[i + j + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            if stack.pop().as_deref() != Some(name.trim()) {
                return false;
            }
        } else if !tag.ends_with('/') {
            stack.push(tag.split_whitespace().next().unwrap_or("").to_string());
        }
    }
    stack.is_empty()
}

fn check_svg(path: &std::path::Path) {
    let svg = std::fs::read_to_string(path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", path.display());
    assert!(svg.contains("<polyline"), "{}", path.display());
    assert!(balanced(&svg), "{} is not balanced", path.display());
}

fn step(sys: &serde_json::Value, n: u64) -> &serde_json::Value {
    sys["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["zones"] == n)
        .unwrap_or_else(|| panic!("no step {n} in {sys}"))
}

/// Memory per zone is a host-wide /proc/meminfo delta: a build running beside the test
/// moves it by tens of MiB within one step, so the bound holds for the best step of a
/// system, not for every step; and a compiler's anonymous memory lands in the anon
/// and pinned rows, so the bound is on what only zones add to: slab and page tables.
fn check_memory(sys: &serde_json::Value) {
    let best = sys["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let m = &s["mem_per_zone"];
            assert!(m["pinned_kib"].as_f64().is_some(), "{s}");
            m["slab_kib"].as_f64().unwrap() + m["page_tables_kib"].as_f64().unwrap()
        })
        .fold(f64::INFINITY, f64::min);
    assert!(best < 8.0 * 1024.0, "memory per zone {best} KiB: {sys}");
}

/// The bench tests run one at a time: each is the other's memory noise.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn check_plausible(s: &serde_json::Value) {
    for k in ["clone_ms", "boot_ms", "halt_ms", "delete_ms"] {
        assert!(s[k]["median"].as_f64().unwrap() > 0.0, "{k}: {s}");
    }
    let disk = s["disk_per_zone_kib"].as_f64().unwrap();
    assert!(disk > 0.0 && disk < 1024.0, "disk per zone {disk} KiB: {s}");
    assert!(s["total_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn density_writes_results_report_and_charts_and_cleans_up() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let out = env.root().join("out");
    env.ok(&[
        "bench",
        "density",
        "--zones",
        "1,3",
        "--idle",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["steps"], serde_json::json!([1, 3]));
    for k in [
        "kernel",
        "cpus",
        "mem_total_mib",
        "cgroup_version",
        "storage_backend",
    ] {
        assert!(!r["machine"][k].is_null(), "machine.{k}");
    }
    assert!(r["date"].as_str().unwrap().ends_with('Z'));
    let warren = &r["systems"][0];
    assert_eq!(
        (&warren["name"], &warren["status"]),
        (&"warren".into(), &"ok".into())
    );
    check_plausible(step(warren, 1));
    check_plausible(step(warren, 3));
    check_memory(warren);

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("## 1 zone\n") && md.contains("## 3 zones\n"),
        "{md}"
    );
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| warren |")).collect();
    assert_eq!(rows.len(), 2, "one summary row per step: {md}");
    check_svg(&out.join("latency.svg"));
    check_svg(&out.join("memory.svg"));

    // Nothing left: no zone, no template, no scratch dir.
    let list = env.ok(&["list", "--json"]);
    assert_eq!(list.stdout.trim(), "[]", "{}", list.stdout);
    let left: Vec<_> = std::fs::read_dir(env.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".bench"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(
        std::fs::read_dir(env.root().join("templates"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn bad_steps_are_refused() {
    let env = Env::new();
    env.run(&["bench", "density", "--zones", "1,0"])
        .fails(5, "at least 1");
    env.run(&["bench", "density", "--zones", "x"])
        .fails(5, "not a number");
    env.run(&["bench", "density", "--compare", "docker"])
        .fails(2, "docker");
}

/// Processes running `sleep 1000000` (what the crun containers and crun's helper
/// run) in this test's memory cgroup or beneath it: (pid, cmdline).
fn sleepers_in_our_cgroup() -> Vec<(String, String)> {
    let memory_path = |text: &str| {
        text.lines().find_map(|l| {
            let mut it = l.splitn(3, ':');
            let (_, c, p) = (it.next()?, it.next()?, it.next()?);
            c.split(',').any(|x| x == "memory").then(|| p.to_string())
        })
    };
    let own =
        memory_path(&std::fs::read_to_string("/proc/self/cgroup").unwrap()).unwrap_or_default();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().into_owned();
            pid.parse::<u32>().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if !cmd.contains("sleep 1000000") {
                return None;
            }
            let cg = memory_path(&std::fs::read_to_string(e.path().join("cgroup")).ok()?)?;
            (cg == own || cg.starts_with(&format!("{}/", own.trim_end_matches('/'))))
                .then_some((pid, cmd))
        })
        .collect()
}

#[test]
fn compare_crun_or_say_how_to_install_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    common::require_busybox();
    let env = Env::new();
    let out = env.root().join("out");
    env.ok(&[
        "bench",
        "density",
        "--zones",
        "1,2",
        "--idle",
        "1",
        "--template",
        "busybox",
        "--compare",
        "crun,lxc",
        "--out",
        out.to_str().unwrap(),
    ]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let crun = &r["systems"][1];
    assert_eq!(crun["name"], "crun");
    let installed = std::process::Command::new("crun")
        .arg("--version")
        .output()
        .is_ok();
    if installed {
        assert_eq!(crun["status"], "ok", "{crun}");
        check_plausible(step(crun, 1));
        check_plausible(step(crun, 2));
        check_memory(crun);
        // Every container is gone: crun's state dir lived in the scratch dir.
        let left: Vec<_> = std::fs::read_dir(env.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".bench"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // Neither a container's /bin/sleep nor the mount-namespace helper is left
        // (among this test's processes: other work on the host, in other cgroups, may
        // run the same command).
        let left = sleepers_in_our_cgroup();
        assert!(left.is_empty(), "left running: {left:?}");
    } else {
        assert_eq!(crun["status"], "not installed");
        assert!(crun["note"]
            .as_str()
            .unwrap()
            .contains("apt-get install crun"));
    }
    let lxc = &r["systems"][2];
    assert_eq!(lxc["name"], "lxc");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| crun |"), "{md}");
    check_svg(&out.join("latency.svg"));
}
