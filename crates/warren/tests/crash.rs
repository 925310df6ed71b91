//! Crash consistency: warren is SIGKILLed at every fault point of every verb; the next
//! command finds the zone in its old state, its new one, or incomplete and repairable;
//! `warren gc` removes every leftover (cgroups, temp dirs and files); the zone can then
//! be finished or removed cleanly.

mod common;

use std::os::unix::process::ExitStatusExt;

use common::{host_mounts_under, Env};

/// Set the zone up so that `verb` is the next step, and return the faulted command.
fn prepare(env: &Env, point: &str) -> (Vec<&'static str>, &'static [&'static str]) {
    let verb = point.split('.').next().unwrap();
    env.ok(&["template", "create", "host", "--from", "host"]);
    match verb {
        "create" => (vec!["create", "z"], &["absent"]),
        // A disk.max install stages its image beside the zone (`.disk-img-*`,
        // `.disk-stage-*`): gc must know those names too.
        "install" if point == "install.after-disk-image" => {
            env.ok(&["create", "z", "--set", "disk.max=64M"]);
            (vec!["install", "z"], &["incomplete"])
        }
        "install" => {
            env.ok(&["create", "z"]);
            (vec!["install", "z"], &["incomplete"])
        }
        "clone" => {
            env.host_zone("base", &[]);
            (vec!["clone", "base", "z"], &["absent"])
        }
        "boot" => {
            env.host_zone("z", &[]);
            (vec!["boot", "z"], &["installed", "running"])
        }
        // An atomic write killed before its rename: the first one of a boot
        // (runtime.json) leaves `.runtime.json.tmp-<pid>` and the zone's cgroups.
        "write" => {
            env.host_zone("z", &[]);
            (vec!["boot", "z"], &["installed"])
        }
        "halt" => {
            env.host_zone("z", &[]);
            env.ok(&["boot", "z"]);
            (
                vec!["halt", "z"],
                &["running", "shutting_down", "installed"],
            )
        }
        "uninstall" => {
            env.host_zone("z", &[]);
            (vec!["uninstall", "z"], &["incomplete"])
        }
        "delete" => {
            env.ok(&["create", "z"]);
            (vec!["delete", "z"], &["absent"])
        }
        "rename" => {
            env.host_zone("z", &[]);
            (vec!["rename", "z", "z2"], &["installed", "absent"])
        }
        // A suspend rolled back, or a resume recorded, by the next locked command.
        "suspend" => {
            env.host_zone("z", &[]);
            env.ok(&["boot", "z"]);
            (vec!["suspend", "z"], &["running"])
        }
        "resume" => {
            env.host_zone("z", &[]);
            env.ok(&["boot", "z"]);
            env.ok(&["suspend", "z"]);
            (vec!["resume", "z"], &["suspended", "running"])
        }
        "snapshot" if point == "snapshot.delete-after-rename" => {
            env.host_zone("z", &[]);
            env.ok(&["snapshot", "create", "z", "s1"]);
            (vec!["snapshot", "delete", "z", "s1"], &["installed"])
        }
        "snapshot" => {
            env.host_zone("z", &[]);
            (vec!["snapshot", "create", "z", "s1"], &["installed"])
        }
        "restore" => {
            env.host_zone("z", &[]);
            env.ok(&["snapshot", "create", "z", "s1"]);
            (vec!["snapshot", "restore", "z", "s1"], &["installed"])
        }
        "export" | "import" => {
            env.host_zone("z", &[]);
            let file: &'static str = Box::leak(
                env.root()
                    .join("z.wzone")
                    .display()
                    .to_string()
                    .into_boxed_str(),
            );
            if verb == "export" {
                return (vec!["export", "z", file], &["installed"]);
            }
            env.ok(&["export", "z", file]);
            (vec!["import", file, "z2"], &["installed"])
        }
        other => panic!("no scenario for verb {other}"),
    }
}

fn dot_entries(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            out.push(e.path().display().to_string());
        } else if e.file_type().unwrap().is_dir() && dir.ends_with("zones") {
            out.extend(dot_entries(&e.path()));
        }
    }
    out
}

#[test]
fn every_fault_point_is_recoverable() {
    for point in warren::fault::POINTS {
        let env = Env::new();
        let (args, allowed) = prepare(&env, point);
        let out = env
            .cmd()
            .args(&args)
            .env(warren::fault::ENV, point)
            .output()
            .unwrap();
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{point}: warren {args:?} was not killed at the fault point: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let state = env.state("z");
        assert!(
            allowed.contains(&state.as_str()),
            "{point}: zone is {state}, expected one of {allowed:?}"
        );

        let gc = env.ok(&["gc"]);
        let state = env.state("z");
        assert!(
            allowed.contains(&state.as_str()) || state == "installed",
            "{point}: after gc the zone is {state}"
        );
        assert!(
            host_mounts_under(env.root()).is_empty(),
            "{point}: host mounts left"
        );
        let leftovers: Vec<String> = dot_entries(&env.root().join("zones"))
            .into_iter()
            .chain(dot_entries(&env.root().join("templates")))
            .collect();
        assert!(
            leftovers.is_empty(),
            "{point}: left after gc: {leftovers:?}\n{}",
            gc.stdout
        );
        if state != "running" {
            assert!(
                env.group_dirs().is_empty(),
                "{point}: cgroups left: {:?}",
                env.group_dirs()
            );
        }

        // Whatever state it is in, the zone can be finished and removed.
        match state.as_str() {
            "incomplete" => {
                env.ok(&["install", "z"]);
                assert_eq!(env.state("z"), "installed", "{point}");
            }
            "shutting_down" | "running" | "suspended" => {
                env.ok(&["halt", "z"]);
            }
            _ => {}
        }
        if state != "absent" {
            env.ok(&["delete", "--force", "z"]);
        }
        assert_eq!(env.state("z"), "absent");
        assert!(
            env.group_dirs().is_empty(),
            "{point}: cgroups left at the end"
        );
    }
}

#[test]
fn zones_survive_a_killed_warren_and_a_new_one_sees_them() {
    let env = Env::new();
    env.host_zone("z", &[]);
    env.ok(&["boot", "z"]);
    let pid = env.init_pid("z");
    // Kill a warren in the middle of an unrelated verb on the same zone.
    let out = env
        .cmd()
        .args(["halt", "z"])
        .env(warren::fault::ENV, "halt.after-shutting-down")
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(9));
    assert!(common::alive(pid), "the zone died with warren");
    let r = env.ok(&["list", "-v"]);
    assert!(r.stdout.contains(&pid.to_string()), "{}", r.stdout);
    // A runtime record whose pid now names another process is not trusted.
    let rt = env.root().join("zones/z/runtime.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rt).unwrap()).unwrap();
    v["init"]["start_time"] = serde_json::json!(1);
    std::fs::write(&rt, serde_json::to_vec(&v).unwrap()).unwrap();
    assert_eq!(env.state("z"), "installed", "a recycled pid was trusted");
}

#[test]
fn autoboot_boots_the_zones_that_ask_for_it() {
    let env = Env::new();
    env.host_zone("auto", &["autoboot=true"]);
    env.host_zone("manual", &[]);
    // A record from another host boot counts as not running.
    env.ok(&["boot", "auto"]);
    let rt = env.root().join("zones/auto/runtime.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rt).unwrap()).unwrap();
    v["boot_id"] = serde_json::json!("a-previous-boot");
    std::fs::write(&rt, serde_json::to_vec(&v).unwrap()).unwrap();
    assert_eq!(env.state("auto"), "installed");
    // The leftover cgroups of "the previous boot" belong to no zone now; gc takes them.
    env.ok(&["gc"]);
    assert!(env.group_dirs().is_empty(), "{:?}", env.group_dirs());
    env.ok(&["boot", "--autoboot"]);
    assert_eq!(env.state("auto"), "running");
    assert_eq!(env.state("manual"), "installed");
}

/// `warren gc` takes a directory named after a running zone in a hierarchy the zone
/// does not run in (left by an earlier boot with other limits), and keeps every
/// directory the zone and its neighbours run in (zone::lifecycle's `cgroup_claim`,
/// shared with `halt --all`'s late removal). cgroup v1 only: on v2 a zone has one
/// directory, so no stray one of its name can sit beside it.
#[test]
fn gc_takes_a_running_zones_stray_cgroup_and_keeps_the_ones_it_runs_in() {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    if own.lines().all(|l| l.starts_with("0::")) {
        eprintln!(
            "SKIPPED: cgroup v2 host: a zone has one directory, there is no stray one to make"
        );
        return;
    }
    let env = Env::new();
    // "capped" joins the cpu hierarchy (its cpu.max), so the group has a directory there.
    env.host_zone("capped", &["cpu.max=0.5"]);
    env.host_zone("plain", &[]);
    env.ok(&["boot", "capped"]);
    env.ok(&["boot", "plain"]);
    let (capped, plain) = (env.cgroup_dirs("capped"), env.cgroup_dirs("plain"));
    let cpu_dir = capped
        .iter()
        .find(|(c, _)| c.split(',').any(|x| x == "cpu"))
        .map(|(_, d)| d.clone())
        .unwrap_or_else(|| panic!("a zone with cpu.max joins cpu: {capped:?}"));
    let stray = cpu_dir.with_file_name("plain");
    assert!(
        plain.iter().all(|(_, d)| d != &stray),
        "plain runs in {stray:?}: {plain:?}"
    );
    std::fs::create_dir(&stray).unwrap();
    let r = env.ok(&["gc"]);
    assert!(!stray.exists(), "the stray cgroup stayed: {r:?}");
    for (_, d) in capped.iter().chain(&plain) {
        assert!(
            d.exists(),
            "gc removed {d:?}, which a running zone uses: {r:?}"
        );
    }
    assert_eq!(env.state("capped"), "running");
    assert_eq!(env.state("plain"), "running");
    let r = env.sh("plain", "echo alive");
    assert!(r.stdout.contains("alive"), "{r:?}");
}
