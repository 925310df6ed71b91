//! Bad input gets a clear error, a documented exit code, and nothing is created.

mod common;

use common::Env;

fn zones_dir_entries(env: &Env) -> Vec<String> {
    std::fs::read_dir(env.root().join("zones"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn bad_names_are_refused_before_touching_disk() {
    let env = Env::new();
    let long = "a".repeat(64);
    for name in ["../x", "", &long, "Web1", "zöne", "a/b", "-x", "a.b", "a b"] {
        // After "--", even "-x" reaches warren as a name rather than a flag.
        env.run(&["create", "--", name]).fails(5, "is invalid");
        env.run(&["template", "create", "--from", "host", "--", name])
            .fails(5, "is invalid");
        env.run(&["boot", "--", name]).fails(5, "is invalid");
    }
    // The state root's directories may exist (every command makes them root-only),
    // but nothing was created in them.
    assert!(!env.root().join("zones").exists() || zones_dir_entries(&env).is_empty());
    let templates = std::fs::read_dir(env.root().join("templates"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(templates, 0, "a template was created for a bad name");
}

#[test]
fn bad_config_is_refused_with_the_field_and_the_fix() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--set", "memory.max=12X"],
            5,
            "zone 'z': memory.max \"12X\": expected a size such as 512M or 2G",
        ),
        (
            &["--set", "memroy.max=1G"],
            5,
            "unknown config key 'memroy.max' (did you mean 'memory.max'?)",
        ),
        (
            &["--set", "cpuset=7"],
            5,
            "names CPU 7, which this host does not have online",
        ),
        (&["--set", "cpuset=1-0"], 5, "expected a CPU list"),
        (
            &["--set", "cpu.max=-1"],
            5,
            "cpu.max -1: expected between 0.01",
        ),
        (&["--set", "cpu.max=64"], 5, "more than the"),
        (
            &["--set", "max-processes=0"],
            5,
            "max-processes 0: expected a whole number from 1",
        ),
        (
            &["--set", "max-processes=lots"],
            5,
            "expected a whole number",
        ),
        (
            &["--set", "memory.swap=1G"],
            5,
            "memory.swap is set without memory.max",
        ),
        (
            &["--set", "net=bridge0"],
            5,
            "expected \"none\", \"host\" or \"bridge\"",
        ),
        (&["--set", "brand=microvm"], 5, "not available yet"),
        (&["--set", "nonsense"], 5, "expected key=value"),
        (&["--template", "nope"], 3, "template 'nope' does not exist"),
        (
            &["--set", "template=nope"],
            3,
            "template 'nope' does not exist",
        ),
    ];
    for (args, code, needle) in cases {
        let mut a = vec!["create", "z"];
        a.extend_from_slice(args);
        env.run(&a).fails(*code, needle);
    }
    // Config files: empty, not TOML, wrong types, missing file.
    let dir = env.root();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let empty = write("empty.toml", "");
    env.run(&["create", "z", "--config", &empty])
        .fails(5, "template is missing");
    let garbage = write("garbage.toml", "template = \n[[[");
    env.run(&["create", "z", "--config", &garbage])
        .fails(5, "is not valid TOML");
    let types = write("types.toml", "template = \"host\"\nautoboot = \"maybe\"\n");
    env.run(&["create", "z", "--config", &types])
        .fails(5, "autoboot \"maybe\": expected true or false");
    env.run(&["create", "z", "--config", "/nonexistent.toml"])
        .fails(5, "--config /nonexistent.toml");
    assert!(
        zones_dir_entries(&env).is_empty(),
        "something was created: {:?}",
        zones_dir_entries(&env)
    );
}

#[test]
fn wrong_states_and_missing_zones() {
    let env = Env::new();
    env.run(&["boot", "ghost"])
        .fails(3, "zone 'ghost' does not exist");
    env.run(&["login", "ghost"]).fails(125, "does not exist");
    env.host_zone("z", &[]);
    env.run(&["create", "z"])
        .fails(6, "zone 'z' already exists");
    env.run(&["clone", "z", "z"]).fails(5, "onto itself");
    env.run(&["clone", "ghost", "y"])
        .fails(3, "zone 'ghost' does not exist");
    env.ok(&["boot", "z"]);
    env.run(&["uninstall", "z"])
        .fails(4, "halt it before uninstall");
    env.run(&["delete", "z"])
        .fails(4, "halt and uninstall it before delete");
    env.run(&["config", "set", "z", "template=other"])
        .fails(4, "can change only while it is configured");
    env.run(&["template", "delete", "host"])
        .fails(6, "is used by zone(s) z");
    env.run(&["template", "create", "host", "--from", "host"])
        .fails(6, "already exists");
    // --force takes a running zone all the way out.
    env.ok(&["delete", "--force", "z"]);
    assert_eq!(env.state("z"), "absent");
}

#[test]
fn corrupt_state_file_names_the_file() {
    let env = Env::new();
    env.host_zone("z", &[]);
    let state = env.root().join("zones/z/state.json");
    std::fs::write(&state, b"{\"version\": 1, \"sta").unwrap();
    let r = env.run(&["boot", "z"]).fails(10, "state.json");
    assert!(r.stderr.contains("delete --force"), "{}", r.stderr);
    std::fs::write(&state, b"").unwrap();
    env.run(&["install", "z"]).fails(10, "truncated");
    // list still works and flags the zone.
    let r = env.ok(&["list"]);
    assert!(r.stdout.contains("unreadable"), "{}", r.stdout);
    env.ok(&["delete", "--force", "z"]);
}

#[test]
fn concurrent_commands_serialize_per_zone() {
    let env = Env::new();
    env.host_zone("z", &[]);
    // Four boots of one zone at once: all succeed, one boots it, the others find it running.
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let mut c = env.cmd();
            c.args(["boot", "z"]);
            std::thread::spawn(move || c.output().unwrap())
        })
        .collect();
    let outs: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for o in outs {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(env.state("z"), "running");
    // Exactly one winner when names collide.
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let mut c = env.cmd();
            c.args(["create", "same"]);
            std::thread::spawn(move || c.output().unwrap())
        })
        .collect();
    let codes: Vec<i32> = handles
        .into_iter()
        .map(|h| h.join().unwrap().status.code().unwrap())
        .collect();
    assert_eq!(codes.iter().filter(|c| **c == 0).count(), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 6).count(), 5, "{codes:?}");
}

#[test]
fn json_list_schema() {
    let env = Env::new();
    env.host_zone("j", &["memory.max=128M"]);
    env.ok(&["boot", "j"]);
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["list", "--json"]).stdout).unwrap();
    let z = &v[0];
    assert_eq!(z["name"], "j");
    assert_eq!(z["state"], "running");
    assert_eq!(z["template"], "host");
    assert_eq!(z["backend"], "overlay");
    assert_eq!(z["net"], "none");
    assert!(z["init_pid"].as_i64().unwrap() > 1);
    assert_eq!(z["config"]["limits"]["memory-max"], 128 << 20);
    let info: serde_json::Value =
        serde_json::from_str(&env.ok(&["info", "--json"]).stdout).unwrap();
    assert!(["v1", "v2"].contains(&info["cgroup_version"].as_str().unwrap()));
    assert!(info["storage_backend"].is_string());
    assert!(info["kernel"].as_str().unwrap().len() > 1);
}

#[test]
fn twenty_parallel_clones_of_one_source() {
    let env = Env::new();
    env.host_zone("src", &[]);
    let handles: Vec<_> = (0..20)
        .map(|i| {
            let mut c = env.cmd();
            c.args(["clone", "src", &format!("c{i}")]);
            std::thread::spawn(move || c.output().unwrap())
        })
        .collect();
    for h in handles {
        let o = h.join().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    for i in 0..20 {
        assert_eq!(env.state(&format!("c{i}")), "installed");
    }
}

#[test]
fn parallel_boot_and_halt_of_100_zones() {
    let env = Env::new();
    env.host_zone("base", &[]);
    let names: Vec<String> = (0..100).map(|i| format!("p{i:03}")).collect();
    for n in &names {
        env.ok(&["clone", "base", n]);
    }
    let run_all = |verb: &'static str| {
        let handles: Vec<_> = names
            .chunks(10)
            .map(|chunk| {
                let mut c = env.cmd();
                c.arg(verb).args(chunk);
                std::thread::spawn(move || c.output().unwrap())
            })
            .collect();
        for h in handles {
            let o = h.join().unwrap();
            assert!(
                o.status.success(),
                "{verb}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    };
    run_all("boot");
    let listed: serde_json::Value =
        serde_json::from_str(&env.ok(&["list", "--json"]).stdout).unwrap();
    let running = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|z| z["state"] == "running")
        .count();
    assert_eq!(running, 100);
    run_all("halt");
    let listed: serde_json::Value =
        serde_json::from_str(&env.ok(&["list", "--json"]).stdout).unwrap();
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .all(|z| z["state"] == "installed"));
    assert!(env.group_dirs().is_empty(), "{:?}", env.group_dirs());
}
