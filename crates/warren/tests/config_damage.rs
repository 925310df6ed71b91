//! A damaged or hostile `config.toml` and config input (issue 22, items 7, 8 and 10):
//! errors name the file and the key, the config verbs repair what they can, `delete
//! --force` always works, and bad input is refused at create and `config set`.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{resume, wait_stopped, ChildGuard, Env};

const BAD_UTF8: &[u8] = b"template = \"host\"\nhostname = \"a\xffb\"\n";

fn config_file(env: &Env, zone: &str) -> std::path::PathBuf {
    env.root().join("zones").join(zone).join("config.toml")
}

/// An `EDITOR` that replaces the file it is given with `content`.
fn editor_writing(env: &Env, content: &str) -> String {
    let script = env.root().join(format!("editor-{}.sh", content.len()));
    let body = format!("#!/bin/sh\ncat > \"$1\" <<'EOF'\n{content}EOF\n");
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script.display().to_string()
}

#[test]
fn missing_config_toml_is_named_and_config_set_recreates_it() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    env.ok(&["create", "z"]);
    std::fs::remove_file(config_file(&env, "z")).unwrap();
    let r = env.run(&["config", "show", "z"]).fails(10, "config.toml");
    assert!(r.stderr.contains("the file is missing"), "{}", r.stderr);
    assert!(
        r.stderr.contains("warren config edit z"),
        "no remedy: {}",
        r.stderr
    );
    // A set that leaves the config invalid (no template) is refused...
    env.run(&["config", "set", "z", "memory.max=1G"])
        .fails(5, "template is missing");
    // ...one that makes it valid is written.
    env.ok(&["config", "set", "z", "template=host", "memory.max=1G"]);
    let shown = env.ok(&["config", "show", "z"]).stdout;
    assert!(shown.contains("template = \"host\""), "{shown}");
    assert!(shown.contains("max = \"1G\""), "{shown}");
}

#[test]
fn non_utf8_config_is_shown_named_and_repaired_by_config_edit() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    env.ok(&["create", "z"]);
    std::fs::write(config_file(&env, "z"), BAD_UTF8).unwrap();
    let r = env
        .run(&["config", "show", "z"])
        .fails(10, "is not UTF-8 text (byte 31 is invalid)");
    assert!(r.stderr.contains("config.toml"), "{}", r.stderr);
    assert!(
        r.stdout.contains("template = \"host\""),
        "show printed nothing of the file: {}",
        r.stdout
    );
    env.run(&["config", "set", "z", "hostname=ab"])
        .fails(10, "use 'warren config edit z'");
    let editor = editor_writing(&env, "template = \"host\"\nhostname = \"ab\"\n");
    let out = env
        .cmd()
        .args(["config", "edit", "z"])
        .env("EDITOR", &editor)
        .env_remove("VISUAL")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "config edit failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = env.ok(&["config", "show", "z"]).stdout;
    assert!(shown.contains("hostname = \"ab\""), "{shown}");
}

#[test]
fn config_edit_writes_nothing_when_the_result_is_invalid() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    env.ok(&["create", "z", "--set", "memory.max=1G"]);
    let before = std::fs::read(config_file(&env, "z")).unwrap();
    let editor = editor_writing(&env, "template = \"host\"\nmemory.max = \"12X\"\n");
    let out = env
        .cmd()
        .args(["config", "edit", "z"])
        .env("EDITOR", &editor)
        .env_remove("VISUAL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("memory.max \"12X\""), "{stderr}");
    assert!(stderr.contains("copy is kept at"), "{stderr}");
    if let Some(copy) = stderr.split("kept at ").nth(1) {
        let _ = std::fs::remove_file(copy.lines().next().unwrap_or("").trim());
    }
    assert_eq!(std::fs::read(config_file(&env, "z")).unwrap(), before);
}

#[test]
fn stored_value_warren_rejects_is_named_and_repaired_by_set_or_unset() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    for (zone, repair) in [
        ("a", vec!["set", "a", "memory.max=1G"]),
        ("b", vec!["unset", "b", "memory.max"]),
    ] {
        env.ok(&["create", zone]);
        std::fs::write(
            config_file(&env, zone),
            "template = \"host\"\n[memory]\nmax = \"12X\"\n",
        )
        .unwrap();
        let r = env
            .run(&["config", "show", zone])
            .fails(10, "memory.max \"12X\"");
        assert!(r.stderr.contains("config.toml"), "{}", r.stderr);
        assert!(r.stdout.contains("max = \"12X\""), "{}", r.stdout);
        // An edit that leaves the bad value is refused and names it.
        env.run(&["config", "set", zone, "cpu.max=0.5"])
            .fails(5, "memory.max \"12X\"");
        let mut args = vec!["config"];
        args.extend(repair.iter().copied());
        env.ok(&args);
        env.ok(&["config", "show", zone]);
    }
}

#[test]
fn stored_unknown_key_or_key_given_twice_is_repaired_by_unset_or_set() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    env.ok(&["create", "a"]);
    std::fs::write(
        config_file(&env, "a"),
        "template = \"host\"\nfrom-the-future = 1\n[memory]\nmax = \"1G\"\n",
    )
    .unwrap();
    env.run(&["config", "show", "a"])
        .fails(10, "unknown config key 'from-the-future'");
    env.ok(&["config", "unset", "a", "from-the-future"]);
    assert!(env
        .ok(&["config", "show", "a"])
        .stdout
        .contains("max = \"1G\""));
    // Unknown and absent: still refused.
    env.run(&["config", "unset", "a", "from-the-future"])
        .fails(5, "unknown config key");
    for (zone, repair) in [
        ("b", vec!["config", "set", "b", "memory.max=3G"]),
        ("c", vec!["config", "unset", "c", "memory.max"]),
    ] {
        env.ok(&["create", zone]);
        std::fs::write(
            config_file(&env, zone),
            "template = \"host\"\n\"memory.max\" = \"1G\"\n[memory]\nmax = \"2G\"\n",
        )
        .unwrap();
        env.run(&["config", "show", zone])
            .fails(10, "memory.max is given twice");
        env.ok(&repair);
        env.ok(&["config", "show", zone]);
    }
}

#[test]
fn delete_force_removes_a_zone_whose_config_is_missing_or_garbled() {
    let env = Env::new();
    env.host_zone("gone", &[]);
    env.host_zone("garbled", &[]);
    std::fs::remove_file(config_file(&env, "gone")).unwrap();
    std::fs::write(config_file(&env, "garbled"), BAD_UTF8).unwrap();
    for zone in ["gone", "garbled"] {
        env.run(&["delete", zone]).fails(10, "config.toml");
        env.ok(&["delete", "--force", zone]);
        assert!(
            !env.root().join("zones").join(zone).exists(),
            "zone {zone} still on disk"
        );
    }
}

#[test]
fn same_key_in_two_spellings_is_refused_naming_both() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    let file = env.root().join("twice.toml");
    std::fs::write(
        &file,
        "template = \"host\"\n\"memory.max\" = \"1G\"\n[memory]\nmax = \"2G\"\n",
    )
    .unwrap();
    let r = env
        .run(&["create", "z", "--config", file.to_str().unwrap()])
        .fails(5, "memory.max is given twice");
    assert!(
        r.stderr.contains("\"memory.max\"") && r.stderr.contains("max in [memory]"),
        "{}",
        r.stderr
    );
    assert!(!env.root().join("zones/z").exists());
}

#[test]
fn nul_or_unit_separator_in_services_is_refused_at_create_and_config_set() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    for bad in [
        r#"services=["sleep\u0000 1"]"#,
        r#"services=[["/bin/sleep", "1\u001f2"]]"#,
        r#"init="sleep\u0000 1""#,
    ] {
        env.run(&["create", "z", "--set", bad])
            .fails(5, "may not contain the control character");
    }
    assert!(!env.root().join("zones/z").exists());
    env.ok(&["create", "z"]);
    env.run(&["config", "set", "z", r#"services=["a\u0000b"]"#])
        .fails(5, "may not contain the control character");
}

#[test]
fn config_from_dev_urandom_fails_quickly_and_says_why() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    let t = Instant::now();
    env.run(&["create", "z", "--config", "/dev/urandom"])
        .fails(5, "/dev/urandom: it is larger than 1M");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    // The state root's own files are bounded too.
    env.ok(&["create", "z"]);
    let big = "#".repeat(2 << 20);
    std::fs::write(config_file(&env, "z"), big).unwrap();
    env.run(&["config", "show", "z"])
        .fails(10, "larger than 1M");
    env.ok(&["delete", "--force", "z"]);
}

#[test]
fn config_set_template_holds_the_template_lock_against_template_delete() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    env.ok(&["template", "create", "other", "--from", "host"]);
    env.ok(&["create", "z"]);
    let set = ChildGuard(
        env.cmd()
            .args(["config", "set", "z", "template=other"])
            .env(warren::fault::PAUSE_ENV, "config.after-template-check")
            .spawn()
            .unwrap(),
    );
    let set_pid = set.0.id();
    wait_stopped(set_pid);
    // The set has checked 'other' and holds its shared lock: delete must wait.
    let mut delete = ChildGuard(
        env.cmd()
            .args(["template", "delete", "other"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        delete.0.try_wait().unwrap().is_none(),
        "template delete did not wait for the config set holding the template's lock"
    );
    resume(set_pid);
    let mut set = set;
    assert!(set.0.wait().unwrap().success(), "config set failed");
    let out = std::mem::replace(&mut delete.0, Command::new("true").spawn().unwrap())
        .wait_with_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("is used by zone(s) z"), "{stderr}");
    assert!(env.root().join("templates/other").exists());
    assert!(env
        .ok(&["config", "show", "z"])
        .stdout
        .contains("template = \"other\""));
}

#[test]
fn lost_config_of_an_installed_zone_is_rebuilt_by_config_set_and_it_boots() {
    let env = Env::new();
    env.host_zone("z", &["memory.max=256M"]);
    std::fs::remove_file(config_file(&env, "z")).unwrap();
    env.run(&["boot", "z"]).fails(10, "the file is missing");
    env.ok(&["config", "set", "z", "template=host", "memory.max=256M"]);
    env.ok(&["boot", "z"]);
    assert_eq!(env.state("z"), "running");
    env.ok(&["halt", "z"]);
}

#[test]
fn config_edit_refuses_when_the_file_changed_meanwhile_and_rebuilds_a_missing_one() {
    let env = Env::new();
    env.ok(&["template", "create", "host", "--from", "host"]);
    env.ok(&["create", "z"]);
    // An editor during whose run someone else changes the zone's config.
    let script = env.root().join("racing-editor.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n{} config set z memory.max=1G >/dev/null\nprintf 'template = \"host\"\\nhostname = \"mine\"\\n' > \"$1\"\n",
            common::WARREN
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = env
        .cmd()
        .args(["config", "edit", "z"])
        .env("EDITOR", &script)
        .env_remove("VISUAL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("changed while it was being edited"),
        "{stderr}"
    );
    if let Some(copy) = stderr.split("kept at ").nth(1) {
        let _ = std::fs::remove_file(copy.lines().next().unwrap_or("").trim());
    }
    let shown = env.ok(&["config", "show", "z"]).stdout;
    assert!(
        shown.contains("max = \"1G\"") && !shown.contains("mine"),
        "{shown}"
    );
    // A missing file: the editor gets a note of what is needed, and its result is
    // written.
    std::fs::remove_file(config_file(&env, "z")).unwrap();
    let editor = editor_writing(&env, "template = \"host\"\nhostname = \"back\"\n");
    let out = env
        .cmd()
        .args(["config", "edit", "z"])
        .env("EDITOR", &editor)
        .env_remove("VISUAL")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(env
        .ok(&["config", "show", "z"])
        .stdout
        .contains("hostname = \"back\""));
}
