//! The CLI that helps (issue 15, items 6 and 8), end to end on the real binary:
//! "did you mean" for zone names and config keys, verb aliases, exit codes, `list`
//! filters, formats and columns, `info ZONE`, `config get` / `config keys`, `rename`
//! of a halted zone that then boots, profiles at create, `max` for limits, completion
//! scripts for bash, zsh and fish, and man pages.

mod common;

use common::{Env, WARREN};

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// Three configured zones from the host template: web1, web2, db1.
fn three_zones(env: &Env) {
    env.ok(&["template", "create", "host", "--from", "host"]);
    for z in ["web1", "web2", "db1"] {
        env.ok(&["create", z]);
    }
}

#[test]
fn misspelt_zone_names_and_keys_get_a_suggestion() {
    let env = Env::new();
    three_zones(&env);
    env.run(&["boot", "webl"])
        .fails(3, "zone 'webl' does not exist")
        .fails(3, "did you mean zone 'web1'?");
    env.run(&["info", "db"])
        .fails(3, "did you mean zone 'db1'?");
    // Each zone of a verb on several gets its own.
    env.ok(&["install", "web1"]);
    env.run(&["boot", "web1", "wbe2"])
        .fails(1, "1 of 2 zone(s) failed")
        .fails(1, "did you mean zone 'web2'?");
    // Nothing near: no guess.
    let r = env.run(&["boot", "qqqqqqqq"]).fails(3, "does not exist");
    assert!(!r.stderr.contains("did you mean"), "{}", r.stderr);
    // Keys by meaning (cgroup and other runtimes' names) and by spelling.
    env.run(&["config", "set", "web1", "mem.max=1G"])
        .fails(5, "did you mean 'memory.max'?");
    env.run(&["config", "set", "web1", "pids.max=50"])
        .fails(5, "did you mean 'max-processes'?");
    env.run(&["create", "x1", "--set", "max-lwps=10"])
        .fails(5, "did you mean 'max-threads'?");
    env.run(&["config", "get", "web1", "memroy.max"])
        .fails(5, "did you mean 'memory.max'?");
    env.run(&["create", "x2", "--template", "hots"])
        .fails(3, "did you mean template 'host'?");
}

#[test]
fn aliases_run_the_same_verbs_and_usage_errors_exit_2() {
    let env = Env::new();
    three_zones(&env);
    env.ok(&["install", "web1"]);
    let r = env.ok(&["start", "web1"]);
    assert!(r.stdout.contains("zone 'web1' booted"), "{}", r.stdout);
    assert_eq!(env.state("web1"), "running");
    let r = env.ok(&["ls"]);
    assert!(r.stdout.contains("web1") && r.stdout.contains("running"));
    env.ok(&["stop", "web1"]);
    assert_eq!(env.state("web1"), "installed");
    env.ok(&["rm", "--force", "web1"]);
    assert_eq!(env.state("web1"), "absent");
    // Usage errors (the parser's): exit 2, with clap's own suggestion for a verb.
    env.run(&["bot", "web2"])
        .fails(2, "similar subcommand exists: 'boot'");
    env.run(&["list", "--format", "xml"])
        .fails(2, "invalid value 'xml'");
    env.run(&["list", "--state", "sleeping"])
        .fails(2, "invalid value 'sleeping'");
    env.run(&["completions", "tcsh"])
        .fails(2, "invalid value 'tcsh'");
    // Bad input warren checks itself: exit 5.
    env.run(&["list", "-c", "name,colour"])
        .fails(5, "-c colour: no such column");
}

#[test]
fn a_non_root_user_is_told_to_run_as_root() {
    let env = Env::new();
    three_zones(&env);
    let as_nobody = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args([
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
                "--",
            ])
            .arg(WARREN)
            .args(args)
            .env("WARREN_ROOT", env.root())
            .output()
            .expect("setpriv (util-linux) runs warren as nobody")
    };
    for verb in [&["list"][..], &["info", "web1"], &["boot", "web1"]] {
        let out = as_nobody(verb);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(8), "{verb:?}: {stderr}");
        assert!(
            stderr.contains("must run as root") && stderr.contains("sudo"),
            "{stderr}"
        );
        // Not even a name is leaked to the caller.
        assert!(!stderr.contains("did you mean"), "{stderr}");
    }
    // Verbs that read no state run as anyone.
    let out = as_nobody(&["completions", "bash"]);
    assert_eq!(out.status.code(), Some(0));
    let out = as_nobody(&["config", "keys"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("memory.max"));
}

#[test]
fn list_filters_by_name_glob_and_state_in_table_json_and_csv() {
    let env = Env::new();
    three_zones(&env);
    env.ok(&["install", "web2"]);
    let names = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["list", "--format", "json"];
        a.extend(args);
        json(&env.ok(&a).stdout)
            .as_array()
            .unwrap()
            .iter()
            .map(|z| z["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&["web*"]), ["web1", "web2"]);
    assert_eq!(names(&["?b1"]), ["db1"]);
    assert_eq!(names(&["--state", "installed"]), ["web2"]);
    assert_eq!(names(&["--state", "configured", "w*"]), ["web1"]);
    assert_eq!(names(&["db1"]), ["db1"]);
    assert!(names(&["x*"]).is_empty());
    // --json is --format json.
    let v = json(&env.ok(&["list", "web2", "--json"]).stdout);
    assert_eq!(v[0]["state"], "installed");
    // A plain name that matches nothing is a zone that does not exist.
    env.run(&["list", "web3"])
        .fails(3, "did you mean zone 'web1'?");

    let r = env.ok(&[
        "list",
        "--format",
        "csv",
        "-c",
        "name,state,memory,procs",
        "w*",
    ]);
    assert_eq!(
        r.stdout,
        "name,state,memory,procs\nweb1,configured,-,-\nweb2,installed,-,-\n"
    );
    let r = env.ok(&["ls", "-c", "name,template,idmap", "web2"]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    assert!(lines[0].starts_with("NAME") && lines[0].contains("IDMAP"));
    assert!(lines[1].starts_with("web2") && lines[1].contains("host"));
    let base: u64 = lines[1].split_whitespace().last().unwrap().parse().unwrap();
    assert!(base >= 1 << 30, "{}", r.stdout);
}

#[test]
fn info_zone_config_get_and_config_keys() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    env.ok(&[
        "create",
        "web1",
        "--set",
        "cpu.max=0.5",
        "--set",
        "max-processes=max",
    ]);
    let r = env.ok(&["info", "web1"]);
    for want in [
        "zone:           web1",
        "state:          configured",
        "template:       host",
        "memory.max:     512M (host default)",
        "max-processes:  max",
        "cpu=0.5",
    ] {
        assert!(r.stdout.contains(want), "{want:?} in {}", r.stdout);
    }
    let v = json(&env.ok(&["info", "web1", "--json"]).stdout);
    assert_eq!(v["name"], "web1");
    assert_eq!(v["boot_limits"]["memory-max"], 512u64 << 20);
    assert!(v["dir"].as_str().unwrap().ends_with("zones/web1"));

    assert_eq!(
        env.ok(&["config", "get", "web1", "cpu.max"]).stdout,
        "0.5\n"
    );
    assert_eq!(
        env.ok(&["config", "get", "web1", "max-processes"]).stdout,
        "max\n"
    );
    assert_eq!(
        env.ok(&["config", "get", "web1", "template"]).stdout,
        "host\n"
    );
    let r = env.ok(&["config", "get", "web1", "stop-timeout"]);
    assert_eq!(r.stdout, "10 (default; not set)\n");
    let v = json(
        &env.ok(&["config", "get", "web1", "cpu.max", "--json"])
            .stdout,
    );
    assert_eq!(
        (v["set"].clone(), v["value"].clone()),
        (true.into(), 0.5.into())
    );
    env.run(&["config", "get", "nope", "cpu.max"])
        .fails(3, "zone 'nope' does not exist");

    let r = env.ok(&["config", "keys"]);
    let header = r.stdout.lines().next().unwrap();
    for col in ["KEY", "EXAMPLE", "DEFAULT", "LIVE", "MEANING"] {
        assert!(header.contains(col), "{header}");
    }
    let keys = json(&env.ok(&["config", "keys", "--json"]).stdout);
    let key = |n: &str| {
        keys.as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"] == n)
            .unwrap_or_else(|| panic!("{n} in config keys"))
            .clone()
    };
    assert_eq!(key("memory.max")["live"], true);
    assert_eq!(key("cpu.max")["live"], true);
    assert_eq!(key("net")["live"], false);
    assert_eq!(key("memory.max")["default"], "\"512M\"");
    // The default profile's value is the default new zones get.
    env.ok(&["profile", "create", "default", "memory.max=96M"]);
    let keys = json(&env.ok(&["config", "keys", "--json"]).stdout);
    let mm = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "memory.max")
        .unwrap();
    assert_eq!(mm["default"], "\"96M\" (profile)");
}

#[test]
fn a_halted_zone_is_renamed_and_boots_under_its_new_name() {
    let env = Env::new();
    env.host_zone("ren-a", &["memory.max=64M"]);
    env.ok(&["boot", "ren-a"]);
    env.run(&["rename", "ren-a", "ren-b"])
        .fails(4, "halt it first: 'warren halt ren-a'");
    env.ok(&["halt", "ren-a"]);
    let base = json(&env.ok(&["info", "ren-a", "--json"]).stdout)["idmap"]["base"].clone();
    env.ok(&["create", "ren-c"]);
    env.run(&["rename", "ren-a", "ren-c"])
        .fails(6, "zone 'ren-c' already exists");
    env.run(&["rename", "ren-a", "Bad_Name"])
        .fails(5, "name \"Bad_Name\" is invalid");
    let r = env.ok(&["rename", "ren-a", "ren-b"]);
    assert!(r.stdout.contains("zone 'ren-a' renamed to 'ren-b'"));
    assert_eq!(env.state("ren-a"), "absent");
    assert_eq!(env.state("ren-b"), "installed");
    // Its id range goes with it: the same host ids, recorded under the new name.
    let v = json(&env.ok(&["info", "ren-b", "--json"]).stdout);
    assert_eq!(v["idmap"]["base"], base);
    let records: Vec<String> = std::fs::read_dir(env.root().join("userns"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(records, [format!("{base}-ren-b")]);
    env.ok(&["boot", "ren-b"]);
    assert_eq!(env.state("ren-b"), "running");
    // The hostname follows the name; the config came along.
    let r = env.sh("ren-b", "hostname; id -u");
    assert_eq!(r.stdout, "ren-b\n0\n", "{}", r.stderr);
    assert_eq!(env.cgroup_file("ren-b", "pids", "pids.max"), "1024");
    let file = match env.runtime("ren-b")["cgroups"]["version"].as_str() {
        Some("v1") => "memory.limit_in_bytes",
        _ => "memory.max",
    };
    assert_eq!(
        env.cgroup_file("ren-b", "memory", file),
        (64u64 << 20).to_string()
    );
    env.ok(&["halt", "ren-b"]);
    env.run(&["rename", "ren-b", "ren-b"])
        .fails(5, "the new name is the same as the old one");
}

#[test]
fn profiles_are_copied_at_create_in_order_and_recorded() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    env.ok(&[
        "profile",
        "create",
        "default",
        "memory.max=96M",
        "max-processes=200",
        "stop-timeout=7",
    ]);
    env.ok(&[
        "profile",
        "create",
        "small",
        "memory.max=48M",
        "cpu.max=0.25",
    ]);
    env.ok(&["profile", "create", "wide", "max-processes=max"]);
    env.run(&["profile", "create", "small"])
        .fails(6, "profile 'small' already exists");
    env.run(&["profile", "set", "small", "mem.max=1G"])
        .fails(5, "did you mean 'memory.max'?");
    env.run(&["profile", "create", "Bad", "cpu.max=1"])
        .fails(5, "profile name \"Bad\" is invalid");
    // The defaults file is the default profile: one mechanism.
    let text = std::fs::read_to_string(env.root().join("defaults.toml")).unwrap();
    assert!(text.contains("96M"), "{text}");

    env.ok(&["create", "p0"]);
    env.ok(&["create", "p1", "-p", "small", "--profile", "wide"]);
    env.ok(&["create", "p2", "-p", "small", "--set", "memory.max=32M"]);
    let get = |z: &str, k: &str| env.ok(&["config", "get", z, k]).stdout.trim().to_string();
    // The default profile's caps are the host's, applied at boot, not copied; its
    // other keys are copied.
    assert_eq!(get("p0", "memory.max"), "96M (default; not set)");
    assert_eq!(get("p0", "max-processes"), "200 (default; not set)");
    assert_eq!(get("p0", "stop-timeout"), "7");
    assert_eq!(get("p1", "memory.max"), "48M");
    assert_eq!(get("p1", "cpu.max"), "0.25");
    assert_eq!(get("p1", "max-processes"), "max");
    assert_eq!(get("p2", "memory.max"), "32M");
    let profiles = |z: &str| json(&env.ok(&["info", z, "--json"]).stdout)["profiles"].clone();
    assert_eq!(profiles("p0"), serde_json::json!(["default"]));
    assert_eq!(
        profiles("p1"),
        serde_json::json!(["default", "small", "wide"])
    );
    env.run(&["create", "p3", "-p", "smal"])
        .fails(3, "profile 'smal' does not exist")
        .fails(3, "did you mean profile 'small'?");
    assert_eq!(env.state("p3"), "absent");

    // A later change reaches new zones only.
    env.ok(&["profile", "set", "small", "memory.max=40M"]);
    env.ok(&["create", "p4", "-p", "small"]);
    assert_eq!(get("p1", "memory.max"), "48M");
    assert_eq!(get("p4", "memory.max"), "40M");
    env.ok(&["profile", "unset", "small", "cpu.max"]);
    let r = env.ok(&["profile", "show", "small"]);
    assert!(!r.stdout.contains("cpu"), "{}", r.stdout);
    assert!(r.stderr.contains("p1, p2, p4"), "{}", r.stderr);
    let r = env.ok(&["profile", "list"]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[1].starts_with("default"), "{}", r.stdout);
    assert_eq!(lines.len(), 4, "{}", r.stdout);
    // Deleting a profile leaves its zones as they are.
    env.ok(&["profile", "delete", "small"]);
    assert_eq!(get("p1", "memory.max"), "48M");
    env.run(&["profile", "show", "small"])
        .fails(3, "does not exist");
    // A named profile's caps are copied: what the zone boots with.
    env.ok(&["install", "p1"]);
    env.ok(&["boot", "p1"]);
    assert_eq!(env.cgroup_file("p1", "pids", "pids.max"), "max");
    // The default profile's caps reach a zone that sets none at its next boot.
    env.ok(&["profile", "set", "default", "max-processes=150"]);
    env.ok(&["install", "p0"]);
    env.ok(&["boot", "p0"]);
    assert_eq!(env.cgroup_file("p0", "pids", "pids.max"), "150");
}

#[test]
fn completions_for_three_shells_and_man_pages() {
    let env = Env::new();
    let bash = env.ok(&["completions", "bash"]).stdout;
    assert!(bash.contains("complete -F _warren") && bash.contains("rename"));
    let zsh = env.ok(&["completions", "zsh"]).stdout;
    assert!(zsh.starts_with("#compdef warren") && zsh.contains("profile"));
    let fish = env.ok(&["completions", "fish"]).stdout;
    assert!(fish.contains("complete -c warren") && fish.contains("completions"));
    // Each script parses in its shell (`-n`: read, do not run). bash is always here
    // (the tests run under it); zsh and fish are checked where installed, and the
    // test says when one is not.
    for (shell, script) in [("bash", &bash), ("zsh", &zsh), ("fish", &fish)] {
        let present = std::process::Command::new(shell)
            .args(["-c", "true"])
            .output()
            .is_ok();
        if !present {
            assert_ne!(
                shell, "bash",
                "bash is needed to check the bash completions"
            );
            eprintln!(
                "note: {shell} is not installed here; its script was checked by content only"
            );
            continue;
        }
        let file = env.root().join(format!("warren.{shell}"));
        std::fs::write(&file, script).unwrap();
        let out = std::process::Command::new(shell)
            .arg("-n")
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{shell} -n: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let dir = env.root().join("man");
    let r = env.ok(&["man", dir.to_str().unwrap()]);
    assert!(r.stdout.contains("man pages written"), "{}", r.stdout);
    for page in [
        "warren.1",
        "warren-list.1",
        "warren-config-get.1",
        "warren-profile-create.1",
    ] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}: {text}");
    }
    let list = std::fs::read_to_string(dir.join("warren-list.1")).unwrap();
    assert!(
        list.contains("\\-\\-state") && list.contains("csv"),
        "{list}"
    );
}

#[test]
fn a_rename_killed_midway_leaves_one_working_zone() {
    use std::os::unix::process::ExitStatusExt;
    for (point, survivor, gone) in [
        ("rename.after-record", "kill-a", "kill-b"),
        ("rename.after-dir", "kill-b", "kill-a"),
    ] {
        let env = Env::new();
        env.host_zone("kill-a", &[]);
        let base = json(&env.ok(&["info", "kill-a", "--json"]).stdout)["idmap"]["base"]
            .as_u64()
            .unwrap();
        let out = env
            .cmd()
            .args(["rename", "kill-a", "kill-b"])
            .env(warren::fault::ENV, point)
            .output()
            .unwrap();
        assert_eq!(out.status.signal(), Some(9), "{point}: {out:?}");
        assert_eq!(env.state(survivor), "installed", "{point}");
        assert_eq!(env.state(gone), "absent", "{point}");
        let records = || -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(env.root().join("userns"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        // Both names hold the range until gc frees the one without a zone.
        assert_eq!(
            records(),
            [format!("{base}-kill-a"), format!("{base}-kill-b")],
            "{point}"
        );
        env.ok(&["gc"]);
        assert_eq!(records(), [format!("{base}-{survivor}")], "{point}");
        env.ok(&["boot", survivor]);
        let v = json(&env.ok(&["info", survivor, "--json"]).stdout);
        assert_eq!(v["idmap"]["base"].as_u64(), Some(base), "{point}");
        assert_eq!(env.sh(survivor, "id -u").stdout, "0\n", "{point}");
    }
}
