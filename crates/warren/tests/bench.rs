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

/// (pid, command line) of live processes in this test's memory cgroup or beneath it:
/// what this test (and the bench it ran) started. Other sessions on the same machine
/// sit in other cgroups, so their processes do not count.
fn own_processes() -> Vec<(i32, String)> {
    let memory_of = |pid: &str| -> Option<String> {
        std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .ok()?
            .lines()
            .find_map(|l| {
                let mut p = l.splitn(3, ':');
                let (_, c, path) = (p.next()?, p.next()?, p.next()?);
                (c.split(',').any(|x| x == "memory") || c.is_empty()).then(|| path.to_string())
            })
    };
    let own = memory_of("self").unwrap_or_else(|| "/".into());
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<i32>() else {
            continue;
        };
        if !common::alive(pid) {
            continue;
        }
        let Some(cg) = memory_of(&name) else { continue };
        if cg == own || cg.starts_with(&format!("{}/", own.trim_end_matches('/'))) {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            out.push((pid, cmd.trim().to_string()));
        }
    }
    out
}

/// `sleep 1000000` processes (crun's and LXC's containers, crun's helper) of this test.
fn own_sleepers() -> Vec<(i32, String)> {
    own_processes()
        .into_iter()
        .filter(|(_, cmd)| cmd.contains("sleep 1000000"))
        .collect()
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
    // After 1 zone the doctor is asked about the next step's 3, after 3 about 30.
    check_solaris(warren, 1, 3, &md);
    check_solaris(warren, 3, 30, &md);
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

/// The memstat-style breakdown of a step (results.json's `memory`): the kernel row is
/// its parts, the total its rows, per zone the whole set over N, and the report's
/// table prints the same figures.
fn check_breakdown(sys: &serde_json::Value, n: u64, md: &str) {
    let m = &step(sys, n)["memory"];
    assert_eq!(m["containers"], n, "{m}");
    let f = |k: &serde_json::Value, key: &str| {
        k[key].as_f64().unwrap_or_else(|| panic!("no {key} in {k}"))
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * (1.0 + a.abs().max(b.abs()));
    for kinds in [&m["all"], &m["per_zone"]] {
        let parts: f64 = [
            "slab_unreclaimable_kib",
            "slab_reclaimable_kib",
            "page_tables_kib",
            "kernel_stack_kib",
            "percpu_kib",
        ]
        .iter()
        .map(|k| f(kinds, k))
        .sum();
        assert!(
            close(parts, f(kinds, "kernel_kib")),
            "kernel parts: {kinds}"
        );
        let rows: f64 = [
            "kernel_kib",
            "anon_kib",
            "mapped_file_kib",
            "page_cache_kib",
            "shmem_kib",
        ]
        .iter()
        .map(|k| f(kinds, k))
        .sum();
        assert!(close(rows, f(kinds, "total_kib")), "total: {kinds}");
    }
    for key in ["kernel_kib", "anon_kib", "total_kib", "page_tables_kib"] {
        assert!(
            close(f(&m["per_zone"], key) * n as f64, f(&m["all"], key)),
            "{key}: per zone × {n} is not the whole set: {m}"
        );
    }
    // A zone has at least its init's page tables and its cgroups' kernel memory. Its
    // anon is read but may show 0: the kernel batches memcg statistics per CPU (64
    // pages each) and skips a flush below that, so an idle init's ~19 anon pages per
    // zone can be unflushed when memory.stat is read (seen in a full suite run).
    let cg = &m["cgroups_per_zone"];
    assert!(f(cg, "kernel_kib") > 0.0 && f(cg, "anon_kib") >= 0.0, "{m}");
    assert!(
        close(
            f(cg, "kernel_kib") * n as f64,
            f(&m["cgroups_all"], "kernel_kib")
        ),
        "{m}"
    );
    // The report's row for the total shows the same per-zone figure.
    let total = format!("{:.1}", f(&m["per_zone"], "total_kib"));
    let row = md
        .lines()
        .find(|l| l.starts_with("| total |"))
        .unwrap_or_else(|| panic!("no breakdown table in the report: {md}"));
    assert!(row.contains(&total), "{row} vs {total}");
    for kind in [
        "| kernel |",
        "|   slab unreclaimable |",
        "| anon |",
        "| cgroups: kernel |",
    ] {
        assert!(md.contains(kind), "no row {kind} in {md}");
    }
}

/// The Solaris density study's figures of a step of `n` zones: processes and threads
/// (host-wide and the zones' own), the host's free memory and CPU, and the first limit
/// the doctor names for the next step; and the report's table with the seed's figures.
fn check_solaris(sys: &serde_json::Value, n: u64, next: u64, md: &str) {
    let st = step(sys, n);
    let c = &st["census"];
    let u = |k: &str| {
        c[k].as_u64()
            .unwrap_or_else(|| panic!("no census.{k}: {c}"))
    };
    // Every zone has its init at least; each process at least its main thread.
    assert!(u("zone_processes") >= n, "{c}");
    assert!(u("zone_threads") >= u("zone_processes"), "{c}");
    assert!(u("host_processes") >= u("zone_processes"), "{c}");
    assert!(u("host_threads") >= u("zone_threads"), "{c}");
    // warren-init holds no inotify instance.
    assert_eq!(u("zone_inotify_instances"), 0, "{c}");
    let host_cpu = st["host_cpu_pct"].as_f64().unwrap();
    assert!(
        (0.0..=100.0).contains(&host_cpu),
        "host CPU {host_cpu}: {st}"
    );
    assert!(st["idle_cpu_pct"].as_f64().unwrap() >= 0.0, "{st}");
    // The host's busy time taken apart: kinds without idle, adding up to at most the
    // whole, and the heaviest task groups, largest first, within all tasks' CPU.
    let cu = &st["cpu_use"];
    let kinds = cu["kinds_pct"].as_array().unwrap();
    let names: Vec<&str> = kinds.iter().map(|k| k[0].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["user", "nice", "system", "iowait", "irq", "softirq", "steal"],
        "{cu}"
    );
    let sum: f64 = kinds.iter().map(|k| k[1].as_f64().unwrap()).sum();
    assert!((0.0..=100.01).contains(&sum), "{cu}");
    let top = cu["top"].as_array().unwrap();
    assert!(top.len() <= 8, "{cu}");
    let pcts: Vec<f64> = top.iter().map(|g| g["cpu_pct"].as_f64().unwrap()).collect();
    assert!(pcts.windows(2).all(|w| w[0] >= w[1]), "{cu}");
    assert!(
        pcts.iter().sum::<f64>() <= cu["tasks_pct"].as_f64().unwrap() + 1e-6,
        "{cu}"
    );
    assert!(
        top.iter().all(|g| g["tasks"].as_u64().unwrap() >= 1),
        "{cu}"
    );
    assert!(
        st["memory"]["host_free_kib"].as_f64().unwrap() > 0.0,
        "{st}"
    );
    assert!(st["memory"]["free_drop_kib"].as_f64().is_some(), "{st}");
    // The doctor's first limit for the next step: named, with its numbers.
    let ns = &st["next_step"];
    assert_eq!(ns["zones"], next, "{ns}");
    let plan = &ns["plan"];
    assert_eq!(plan["zones"], next, "{ns}");
    // Each process has its main thread: threads per zone > the processes besides init.
    let (threads, procs) = (
        plan["threads_per_zone"].as_u64().unwrap(),
        plan["procs_per_zone"].as_u64().unwrap(),
    );
    assert!(threads > procs, "{ns}");
    let first = &ns["first"];
    let limit = first["limit"]
        .as_str()
        .unwrap_or_else(|| panic!("no first limit: {ns}"));
    assert!(!limit.is_empty(), "{ns}");
    let from = first["fails_from"].as_u64().unwrap();
    assert!(from >= 1 && first["needed"].as_u64().is_some(), "{ns}");
    // It stops the next step exactly when it fails at or below the next step's zones.
    assert_eq!(ns["stops_next"], from <= next, "{ns}");
    assert!(ns["first_by_default_plan"]["limit"].is_string(), "{ns}");

    for text in [
        "## The Solaris density study",
        "| | seed: Solaris, 1,000 zones |",
        "| processes, host (kernel threads included) | 18,048 |",
        "| threads (LWPs), host | 84,798 |",
        "| memory, all zones, MiB (seed: GB in use) | 38 GB |",
        "| anon per zone, MiB | 25 MB |",
        "| kernel per zone, MiB | 11 MB |",
        "| CPU busy, host, % of all CPUs (zones idle) | 2 % |",
        "| free, host at the sample, MiB |",
        "Who used the host's CPUs over the idle window",
    ] {
        assert!(md.contains(text), "no {text:?} in the report: {md}");
    }
    let row = md
        .lines()
        .find(|l| l.starts_with("| first limit ahead (doctor) |"))
        .unwrap_or_else(|| panic!("no first-limit row: {md}"));
    assert!(row.contains(limit), "{row} does not name {limit}");
}

#[test]
fn density_breaks_memory_down_by_kind_and_the_columns_add_up() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let out = env.root().join("out");
    env.ok(&[
        "bench",
        "density",
        "--zones",
        "3",
        "--idle",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let r = results(&out);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    check_breakdown(&r["systems"][0], 3, &md);
    // The one step's next is ten times it.
    check_solaris(&r["systems"][0], 3, 30, &md);
    check_svg(&out.join("breakdown.svg"));
    check_svg(&out.join("kinds.svg"));
    let kinds = std::fs::read_to_string(out.join("kinds.svg")).unwrap();
    for kind in [
        "kernel",
        "anon",
        "mapped files (text)",
        "page cache (unmapped)",
        "free (host)",
    ] {
        assert!(kinds.contains(kind), "no series {kind} in kinds.svg");
    }
    // The chart says where and when it was measured.
    let svg = std::fs::read_to_string(out.join("breakdown.svg")).unwrap();
    let day = &r["date"].as_str().unwrap()[..10];
    assert!(svg.contains(day), "no date {day} in breakdown.svg");
    for kind in ["warren kernel", "warren anon", "warren total"] {
        assert!(svg.contains(kind), "no series {kind} in breakdown.svg");
    }
    let list = env.ok(&["list", "--json"]);
    assert_eq!(list.stdout.trim(), "[]", "{}", list.stdout);
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

/// Directories of this process's cgroup paths in every mounted hierarchy (podman makes
/// the memory cgroup's path in the other hierarchies too, and must remove what it made).
fn own_cgroup_dirs() -> Vec<std::path::PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mut out = Vec::new();
    for m in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        for l in own.lines() {
            let path = l.splitn(3, ':').nth(2).unwrap_or("/");
            let dir = m.path().join(path.trim_start_matches('/'));
            if dir.is_dir() && !out.contains(&dir) {
                out.push(dir);
            }
        }
    }
    out
}

#[test]
fn compare_crun_lxc_and_podman_or_say_how_to_install_them() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    common::require_busybox();
    let env = Env::new();
    let out = env.root().join("out");
    let cgroups_before = own_cgroup_dirs();
    env.ok(&[
        "bench",
        "density",
        "--zones",
        "1,3",
        "--idle",
        "1",
        "--template",
        "busybox",
        "--compare",
        "crun,crun-nocgroups,lxc,podman",
        "--out",
        out.to_str().unwrap(),
    ]);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let installed = std::process::Command::new("crun")
        .arg("--version")
        .output()
        .is_ok();
    for (i, name, manager) in [
        (1, "crun", "--cgroup-manager=cgroupfs"),
        (2, "crun-nocgroups", "--cgroup-manager=disabled"),
    ] {
        let crun = &r["systems"][i];
        assert_eq!(crun["name"], name);
        if !installed {
            assert_eq!(crun["status"], "not installed");
            assert!(crun["note"]
                .as_str()
                .unwrap()
                .contains("apt-get install crun"));
            continue;
        }
        // "ok" also says every container's /proc/<pid>/cgroup was checked: beneath
        // this run's wbench-crun-<pid> in every hierarchy for "crun".
        assert_eq!(crun["status"], "ok", "{crun}");
        assert!(crun["note"].as_str().unwrap().contains(manager), "{crun}");
        check_plausible(step(crun, 1));
        check_plausible(step(crun, 3));
        check_memory(crun);
        // Every container is gone: crun's state dir lived in the scratch dir.
        let left: Vec<_> = std::fs::read_dir(env.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".bench"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // Neither a container's /bin/sleep nor the mount-namespace helper is left.
        let left = own_sleepers();
        assert!(left.is_empty(), "left running: {left:?}");
    }
    // Nor a cgroup directory of crun's (the run's wbench-crun-<pid> and the
    // containers' beneath it).
    let left = own_cgroups_named("wbench-crun-");
    assert!(left.is_empty(), "cgroups left: {left:?}");
    let lxc = &r["systems"][3];
    assert_eq!(lxc["name"], "lxc");
    let lxc_installed = std::process::Command::new("lxc-start")
        .arg("--version")
        .output()
        .is_ok();
    if lxc_installed {
        assert_eq!(lxc["status"], "ok", "{lxc}");
        check_plausible(step(lxc, 1));
        check_plausible(step(lxc, 3));
        check_memory(lxc);
        assert!(lxc["note"]
            .as_str()
            .unwrap()
            .contains("lxc.cgroup.relative = 1"));
        // No container, monitor, cgroup or lock of this run is left.
        let left = own_sleepers();
        assert!(left.is_empty(), "left running: {left:?}");
        let monitors: Vec<String> = own_processes()
            .into_iter()
            .filter(|(_, cmd)| cmd.contains(env.root().to_str().unwrap()))
            .map(|(pid, cmd)| format!("{pid} {cmd}"))
            .collect();
        assert!(monitors.is_empty(), "left running: {monitors:?}");
        let mut left = own_cgroups_named("wbench-");
        left.extend(own_cgroups_named("lxc."));
        // Other bench tests run one at a time (SERIAL), so any wbench- dir is ours.
        assert!(left.is_empty(), "cgroups left: {left:?}");
        let lock =
            std::path::Path::new("/run/lxc/lock").join(env.root().strip_prefix("/").unwrap());
        assert!(!lock.exists(), "{} left", lock.display());
    } else {
        assert_eq!(lxc["status"], "not installed");
        assert!(lxc["note"]
            .as_str()
            .unwrap()
            .contains("apt-get install lxc"));
    }
    let podman = &r["systems"][4];
    assert_eq!(podman["name"], "podman");
    let podman_installed = std::process::Command::new("podman")
        .arg("--version")
        .output()
        .is_ok();
    if podman_installed {
        assert_eq!(podman["status"], "ok", "{podman}");
        check_plausible(step(podman, 1));
        check_plausible(step(podman, 3));
        check_memory(podman);
        let runtime = podman["runtime"].as_str().unwrap_or_default();
        assert!(runtime == "runc" || runtime == "crun", "{podman}");
        let note = podman["note"].as_str().unwrap();
        assert!(
            note.contains("--cgroup-parent") && note.contains(&format!("runtime {runtime}")),
            "{note}"
        );
        // No container, conmon or podman cleanup process of this run is left...
        let left = own_sleepers();
        assert!(left.is_empty(), "left running: {left:?}");
        let conmons: Vec<String> = own_processes()
            .into_iter()
            .filter(|(_, cmd)| cmd.contains("conmon") || cmd.contains(env.root().to_str().unwrap()))
            .map(|(pid, cmd)| format!("{pid} {cmd}"))
            .collect();
        assert!(conmons.is_empty(), "left running: {conmons:?}");
        // ...no overlay or shm mount under the root (the private store lived there)...
        let mounts = common::host_mounts_under(env.root());
        assert!(mounts.is_empty(), "mounts left: {mounts:?}");
        // ...and no cgroup directory podman made for its parent's path.
        let made: Vec<_> = own_cgroup_dirs()
            .into_iter()
            .filter(|d| !cgroups_before.contains(d))
            .collect();
        assert!(made.is_empty(), "cgroups left: {made:?}");
        let parents: Vec<_> = own_cgroup_dirs()
            .into_iter()
            .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("wbench-podman-")
            })
            .map(|e| e.path())
            .collect();
        assert!(parents.is_empty(), "cgroups left: {parents:?}");
    } else {
        assert_eq!(podman["status"], "not installed");
        assert!(podman["note"]
            .as_str()
            .unwrap()
            .contains("apt-get install podman"));
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| crun |")
            && md.contains("| crun-nocgroups |")
            && md.contains("| lxc |")
            && md.contains("| podman |"),
        "{md}"
    );
    check_svg(&out.join("latency.svg"));
}

/// Directories named `prefix…` in this process's own cgroup of any hierarchy.
fn own_cgroups_named(prefix: &str) -> Vec<std::path::PathBuf> {
    let mut left: Vec<_> = own_cgroup_dirs()
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    left.sort();
    left.dedup();
    left
}

fn results(out: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
}

/// Nothing of the run is left: no zone, no template, no scratch dir, no cgroup.
fn nothing_left(env: &Env) {
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
    assert!(env.group_dirs().is_empty(), "{:?}", env.group_dirs());
}

/// The study's table and the step figures of a scale run.
fn check_scale_step(s: &serde_json::Value, n: u64, cap_mib: f64) {
    assert_eq!(s["zones"], n, "{s}");
    let per: Vec<f64> = s["per_zone"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(per.len() as u64, n, "{s}");
    assert!(per.iter().all(|v| *v > 0.0), "every zone did work: {s}");
    let total = s["throughput"].as_f64().unwrap();
    assert!((total - per.iter().sum::<f64>()).abs() < 1e-6, "{s}");
    assert!(s["latency_avg_ms"].as_f64().unwrap() > 0.0, "{s}");
    assert_eq!(s["failed_zones"], serde_json::json!([]), "{s}");
    assert_eq!(s["memory_total_mib"].as_f64().unwrap(), cap_mib * n as f64);
    // Memory per zone: above zero, below the zone's cap.
    let mem = s["zones_memory_peak_mib"].as_f64().unwrap() / n as f64;
    assert!(
        mem > 0.0 && mem <= cap_mib,
        "memory per zone {mem} MiB: {s}"
    );
    assert!(s["boot_ms"]["median"].as_f64().unwrap() > 0.0);
    assert!(s["zones_cpu_pct"].as_f64().unwrap() > 0.0, "{s}");
}

fn check_scale_report(out: &std::path::Path, steps: usize) {
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains(
            "| zones | total CPU cap | total memory MiB | budget MiB | oversubscription % |"
        ),
        "{md}"
    );
    let rows = md
        .lines()
        .filter(|l| l.starts_with("| 1 |") || l.starts_with("| 2 |") || l.starts_with("| 3 |"));
    assert_eq!(rows.count(), steps, "{md}");
    check_svg(&out.join("throughput.svg"));
    check_svg(&out.join("latency.svg"));
}

/// PostgreSQL and pgbench inside each zone (the test command installs postgresql).
#[test]
fn scale_pgbench_runs_postgres_in_each_zone() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let out = env.root().join("out");
    env.ok(&[
        "bench",
        "scale",
        "--workload",
        "pgbench",
        "--zones",
        "1,3",
        "--duration",
        "5",
        "--memory-per-zone",
        "256M",
        "--pgbench-scale",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let r = results(&out);
    assert_eq!(r["schema_version"], 1);
    assert_eq!(
        (&r["workload"], &r["status"]),
        (&"pgbench".into(), &"ok".into()),
        "{r}"
    );
    let steps = r["results"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for (s, n) in steps.iter().zip([1, 3]) {
        check_scale_step(s, n, 256.0);
        let tps = s["throughput"].as_f64().unwrap();
        assert!((s["tpm"].as_f64().unwrap() - tps * 60.0).abs() < 1e-6);
        assert!(s["budget_mib"].is_null());
    }
    assert!((steps[0]["scaling_efficiency"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    check_scale_report(&out, 2);
    nothing_left(&env);
}

/// `--oversubscribe 25 --agent --cpu-per-zone 0.5`: the budget is 1/1.25 of the caps,
/// swap is there for the step and gone after it, vm.swappiness is as before, and the
/// CPU caps add up in the table.
#[test]
fn scale_pgbench_oversubscribed_with_swap_and_agent() {
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
        "--agent",
        "--cpu-per-zone",
        "0.5",
        "--out",
        out.to_str().unwrap(),
    ]);
    let r = results(&out);
    assert_eq!(r["oversubscribe_pct"], 25.0);
    assert_eq!(r["agent"], true);
    let s = &r["results"][0];
    assert_eq!(s["cpu_cap_total"], 1.0, "{s}");
    assert!(
        (s["budget_mib"].as_f64().unwrap() - 512.0 / 1.25).abs() < 0.01,
        "{s}"
    );
    assert!(
        (s["oversubscription_pct"].as_f64().unwrap() - 25.0).abs() < 0.01,
        "{s}"
    );
    assert!(s["swap_total_mib"].as_f64().unwrap() > 0.0, "{s}");
    if s["evictions"] == 0 {
        check_scale_step(s, 2, 256.0);
    } else {
        assert!(s["throughput"].as_f64().unwrap() > 0.0, "{s}");
    }
    check_scale_report(&out, 1);
    // warren's swap of this root is off and gone; swappiness restored.
    assert!(!env.root().join("swap/state.json").exists());
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    assert!(!swaps.contains(env.root().to_str().unwrap()), "{swaps}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap(),
        swappiness
    );
    nothing_left(&env);
}

fn sysctl(key: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{}", key.replace('.', "/"))).unwrap()
}

/// The open-loop http study at 1 and 2 zones, one zone per bridge (so N = 2 spreads
/// over two bridges), pinned, tuned: the figures are sane and consistent, the
/// calibration ran at both ends, `--tune` raised what the doctor named for 2 zones at
/// 300 requests/s each (2 × 300 × 60 = 36,000 ephemeral ports > the default 28,232) and
/// wrote it back, and nothing is left (zones, bridges, the sysctl record).
#[test]
fn scale_http_open_loop_tuned_spread_and_pinned() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    common::require_busybox();
    let env = Env::new();
    let bridge = format!("wt{:x}h", std::process::id());
    let out = env.root().join("out");
    let keys = [
        "net.ipv4.ip_local_port_range",
        "net.core.somaxconn",
        "net.ipv4.tcp_max_tw_buckets",
    ];
    let before: Vec<String> = keys.iter().map(|k| sysctl(k)).collect();
    env.ok(&[
        "bench",
        "scale",
        "--workload",
        "http",
        "--zones",
        "1,2",
        "--duration",
        "2",
        "--bridge",
        &bridge,
        "--subnet",
        "10.250.8.0/24",
        "--zones-per-bridge",
        "1",
        "--rate",
        "300",
        "--tune",
        "--pin",
        "--out",
        out.to_str().unwrap(),
    ]);
    let after: Vec<String> = keys.iter().map(|k| sysctl(k)).collect();
    assert_eq!(before, after, "--tune wrote every sysctl back");
    let r = results(&out);
    assert_eq!(
        r["status"], "ok",
        "bridge networking works on this machine: {r}"
    );
    let steps = r["results"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    let cal = r["calibration"].as_array().unwrap();
    assert_eq!(cal.len(), 2, "calibration at the start and the end: {r}");
    for (s, n) in steps.iter().zip([1u64, 2]).chain(cal.iter().zip([1, 1])) {
        check_scale_step(s, n, 512.0);
        assert!(s["tpm"].is_null());
        let h = &s["http"];
        assert_eq!(h["server"], "busybox", "{h}");
        assert_eq!(h["pinned"], true, "{h}");
        assert_eq!(h["bridges"].as_array().unwrap().len() as u64, n, "{h}");
        assert_eq!(h["offered_rps"].as_f64().unwrap(), 300.0 * n as f64, "{h}");
        // Every scheduled request was sent and either answered or counted as an error.
        let scheduled = h["scheduled"].as_u64().unwrap();
        assert_eq!(scheduled, 600 * n, "2 s × 300/s per zone: {h}");
        let errors: u64 = h["errors_by_kind"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(errors, s["errors"].as_u64().unwrap(), "{s}");
        assert_eq!(h["completed"].as_u64().unwrap() + errors, scheduled, "{h}");
        let achieved = h["achieved_rps"].as_f64().unwrap();
        assert!(
            achieved > 0.0 && achieved <= h["offered_rps"].as_f64().unwrap() + 1e-9,
            "{h}"
        );
        let l = &h["latency_ms"];
        let (mean, p50, p99, max) = (
            l["mean"].as_f64().unwrap(),
            l["p50"].as_f64().unwrap(),
            l["p99"].as_f64().unwrap(),
            l["max"].as_f64().unwrap(),
        );
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max && mean <= max, "{l}");
        assert_eq!(s["latency_avg_ms"].as_f64().unwrap(), mean);
        let host = h["host_cpu_pct"].as_f64().unwrap();
        assert!(host > 0.0 && host <= 100.0, "{h}");
        let gen = h["generator_cpu_pct"].as_f64().unwrap();
        assert!(gen > 0.0 && gen <= 100.0, "{h}");
    }
    let t = &r["tune"];
    assert_eq!(t["requested"], true);
    assert_eq!(t["restored"], true, "{t}");
    let applied = t["applied"].as_array().unwrap();
    if before[0].split_whitespace().collect::<Vec<_>>() == ["32768", "60999"] {
        assert!(
            applied
                .iter()
                .any(|a| a["key"] == "net.ipv4.ip_local_port_range"
                    && a["new"].as_str().unwrap().starts_with("1024")),
            "the default port range holds 28,232 ports and the run needs 36,000: {t}"
        );
    }
    assert!(t["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f.as_str().unwrap().starts_with("bridge ports: ok")));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for want in [
        "## Response time (open loop)",
        "| calibration (start) | 1 |",
        "| calibration (end) | 1 |",
        "Noise: ",
        "## Network limits (warren doctor, for the largest step)",
        "all restored",
    ] {
        assert!(md.contains(want), "{want:?} in {md}");
    }
    // A row per step in the study's table and in the response-time table.
    check_scale_report(&out, 4);
    check_svg(&out.join("response_time.svg"));
    nothing_left(&env);
    for b in [bridge.clone(), format!("{bridge}-1")] {
        assert!(
            !std::path::Path::new("/sys/class/net").join(&b).exists(),
            "bridge {b} left behind"
        );
    }
}

/// Kills its child on drop (a test that fails midway leaves no bench running).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `bench scale --tune` killed with SIGKILL (no unwinding, no guard; Ctrl-C's SIGINT
/// ends it the same way) has its raised sysctls written back at once by its watcher
/// (`bench tune-watch`, which sees its pipe from the bench close); the next `bench
/// scale` on that state root removes the killed run's zones and bridge.
#[test]
fn scale_tune_killed_is_restored_by_its_watcher() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    common::require_busybox();
    let key = "net.ipv4.ip_local_port_range";
    let before = sysctl(key);
    if before.split_whitespace().collect::<Vec<_>>() != ["32768", "60999"] {
        panic!("this test needs the kernel's default {key} (32768 60999) to see --tune raise it; this host has {before:?}");
    }
    let env = Env::new();
    let bridge = format!("wt{:x}k", std::process::id());
    let out = env.root().join("out");
    let record = env.root().join(".bench-scale-sysctls.json");
    let args = |zones: &'static str, extra: &[&'static str]| {
        let mut a: Vec<String> = [
            "bench",
            "scale",
            "--workload",
            "http",
            "--zones",
            zones,
            "--bridge",
            &bridge,
            "--subnet",
            "10.250.10.0/24",
            "--no-calibration",
            "--out",
            out.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    // 2 zones × 300/s × 60 s = 36,000 ports > 28,232: --tune widens the range.
    let mut child = KillOnDrop(
        env.cmd()
            .args(args("2", &["--rate", "300", "--tune", "--duration", "60"]))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !(record.exists() && sysctl(key) != before) {
        assert!(
            std::time::Instant::now() < deadline,
            "--tune never raised {key}"
        );
        assert!(
            child.0.try_wait().unwrap().is_none(),
            "the bench ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.0.kill().unwrap(); // SIGKILL: no guard runs
    child.0.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while sysctl(key) != before || record.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the watcher did not write {key} back within 10 s of the bench's death: {}",
            sysctl(key)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // The next run (untuned, one short step) cleans up the killed run's zones.
    env.ok(&args("1", &["--duration", "1"])
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>());
    assert_eq!(sysctl(key), before);
    // The killed run's zones and bridge went with the next run's cleanup.
    let list = env.ok(&["list", "--json"]);
    assert_eq!(list.stdout.trim(), "[]", "{}", list.stdout);
    assert!(!std::path::Path::new("/sys/class/net")
        .join(&bridge)
        .exists());
    // What SIGKILL leaves besides (the run's scratch directory, its template) is the
    // scale bench's Ctrl-C cleanup's to handle, not --tune's: removed here by hand.
    for e in std::fs::read_dir(env.root()).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().starts_with(".bench-scale-") {
            std::fs::remove_dir_all(e.path()).unwrap();
        }
    }
    for t in std::fs::read_dir(env.root().join("templates")).unwrap() {
        let name = t.unwrap().file_name().to_string_lossy().into_owned();
        env.ok(&["template", "delete", &name]);
    }
    nothing_left(&env);
}

/// `--server nginx` runs Debian's nginx from the host's /usr in each zone; without
/// nginx on the host the bench says how to install it.
#[test]
fn scale_http_nginx_or_say_how_to_install_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let bridge = format!("wt{:x}n", std::process::id());
    let out = env.root().join("out");
    let args = [
        "bench",
        "scale",
        "--workload",
        "http",
        "--server",
        "nginx",
        "--zones",
        "2",
        "--duration",
        "2",
        "--no-calibration",
        "--bridge",
        &bridge,
        "--subnet",
        "10.250.9.0/24",
        "--out",
        out.to_str().unwrap(),
    ];
    if !std::path::Path::new("/usr/sbin/nginx").exists() {
        env.run(&args).fails(7, "apt-get install nginx-light");
        panic!("nginx is not installed on this host (apt-get install nginx-light; scripts/test.sh installs it): the refusal is checked, the nginx run is not");
    }
    env.ok(&args);
    let r = results(&out);
    let s = &r["results"][0];
    check_scale_step(s, 2, 512.0);
    assert_eq!(s["http"]["server"], "nginx");
    assert!(r["calibration"].is_null(), "--no-calibration: {r}");
    nothing_left(&env);
}

#[test]
fn bad_scale_flags_are_refused() {
    let env = Env::new();
    env.run(&[
        "bench",
        "scale",
        "--workload",
        "pgbench",
        "--memory-per-zone",
        "1K",
    ])
    .fails(5, "at least 64M");
    env.run(&[
        "bench",
        "scale",
        "--workload",
        "pgbench",
        "--oversubscribe=500",
    ])
    .fails(5, "--oversubscribe");
    env.run(&["bench", "scale", "--workload", "pgbench", "--duration", "0"])
        .fails(5, "--duration");
    env.run(&["bench", "scale", "--workload", "ftp"])
        .fails(5, "give pgbench, mariadb or http");
    env.run(&["bench", "scale", "--workload", "pgbench,http"])
        .fails(5, "http runs alone");
    env.run(&["bench", "scale", "--workload", "mariadb", "--repeat", "0"])
        .fails(5, "--repeat");
    env.run(&[
        "bench",
        "scale",
        "--workload",
        "mariadb",
        "--buffer-pct",
        "99",
    ])
    .fails(5, "--buffer-pct");
    // The study needs the host's size it scales from.
    env.run(&["bench", "scale", "--study", "wasp"])
        .fails(2, "--budget");
    env.run(&["bench", "scale", "--study", "wasp", "--budget", "100M"])
        .fails(5, "--budget / 9.6");
    env.run(&[
        "bench",
        "scale",
        "--workload",
        "pgbench",
        "--zones",
        "1,2",
        "--agent",
        "--agent-thresholds-from",
        "4",
    ])
    .fails(5, "not one of the steps");
    env.run(&["bench", "scale", "--workload", "http", "--rate", "0"])
        .fails(5, "--rate");
    env.run(&[
        "bench",
        "scale",
        "--workload",
        "http",
        "--zones-per-bridge",
        "2000",
    ])
    .fails(5, "--zones-per-bridge");
}

/// `warren bench` stopped by SIGTERM (or Ctrl-C) mid-step: it ends after the step it is
/// in, with an error, and its guards remove its zones, their cgroups, its template and
/// its scratch directory (a signal's default action used to leave them running).
#[test]
fn density_stopped_by_a_signal_removes_what_it_made() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    common::require_busybox();
    let env = Env::new();
    let mut child = env
        .cmd()
        .args([
            "bench",
            "density",
            "--zones",
            "60",
            "--template",
            "busybox",
            "--idle",
            "30",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    struct Reap<'a>(&'a mut std::process::Child);
    impl Drop for Reap<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let pid = child.id() as i32;
    let guard = Reap(&mut child);
    // Wait until some of its zones exist, then signal it.
    let zones = env.root().join("zones");
    let t = std::time::Instant::now();
    while std::fs::read_dir(&zones).map_or(0, |d| d.count()) < 5 {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(120),
            "the bench made no zones in 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    warren_sys::proc::kill(pid, warren_sys::libc::SIGTERM).unwrap();
    let out = guard.0.wait_with_output_ref();
    assert_eq!(out.0.code(), Some(1), "it ends with an error: {}", out.1);
    assert!(out.1.contains("interrupted by signal 15"), "{}", out.1);
    drop(guard);
    let list = env.ok(&["list", "--json"]);
    assert_eq!(list.stdout.trim(), "[]", "no zone left: {}", list.stdout);
    fn bench_cgroups(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if e.file_name().to_string_lossy().contains("warren-bench-") {
                    out.push(e.path());
                }
                bench_cgroups(&e.path(), out);
            }
        }
    }
    let mut cgroups = Vec::new();
    for g in env.group_dirs() {
        bench_cgroups(&g, &mut cgroups);
    }
    assert!(cgroups.is_empty(), "no cgroup left: {cgroups:?}");
    let left: Vec<_> = std::fs::read_dir(env.root())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".bench"))
        .collect();
    assert!(left.is_empty(), "no scratch directory left: {left:?}");
    assert_eq!(
        std::fs::read_dir(env.root().join("templates"))
            .unwrap()
            .count(),
        0,
        "no template left"
    );
}

/// Wait for a child whose stderr is piped, without moving it: (status, stderr).
trait WaitRef {
    fn wait_with_output_ref(&mut self) -> (std::process::ExitStatus, String);
}

impl WaitRef for std::process::Child {
    fn wait_with_output_ref(&mut self) -> (std::process::ExitStatus, String) {
        use std::io::Read;
        let mut err = String::new();
        if let Some(mut e) = self.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (self.wait().unwrap(), err)
    }
}
