//! Class 9 (issue 14): the default limits.

use super::*;

const FORK_LOOP: &str = r#"my @p; my $err = 0;
for (1..1200) { my $c = fork(); if (!defined $c) { $err = $! + 0; last } if ($c == 0) { sleep 60; exit 0 } push @p, $c }
print "forked=", scalar(@p), " errno=$err\n";
kill 'KILL', @p; 1 while wait() != -1;"#;

fn limits(env: &Env, zone: &str) -> (String, String) {
    (
        env.cgroup_file(zone, "pids", "pids.max"),
        env.cgroup_file(zone, "memory", "memory.limit_in_bytes"),
    )
}

#[test]
fn class9_default_limits() {
    require_root();
    assert!(
        Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
            && Path::new("/sys/fs/cgroup/pids").is_dir(),
        "this test reads cgroup v1 pids.max and memory.limit_in_bytes; this host has no v1 memory/pids hierarchy"
    );
    let env = Env::new();
    let mut t = Table::new("9 defaults");
    env.host_zone("d1", &[]);
    env.ok(&["boot", "d1"]);
    let (p, m) = limits(&env, "d1");
    t.row("zone with no limits: pids.max", "1024", p == "1024", &p);
    t.row(
        "zone with no limits: memory.limit_in_bytes",
        "536870912 (512M)",
        m == "536870912",
        &m,
    );
    env.host_zone("d1n", &["userns=false"]);
    env.ok(&["boot", "d1n"]);
    let (p, m) = limits(&env, "d1n");
    t.row(
        "userns=false zone with no limits: pids.max, memory",
        "1024, 536870912",
        p == "1024" && m == "536870912",
        format!("{p} {m}"),
    );
    let r = env.run(&["login", "d1", "--", "perl", "-e", FORK_LOOP]);
    let forked: i64 = field(&r.stdout, "forked")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.run_row(
        "zone with no limits forks 1200 processes",
        "fork fails (EAGAIN) just below 1024",
        field(&r.stdout, "errno") == Some("11") && (1000..1024).contains(&forked),
        &r,
    );
    let r = env.run(&[
        "login",
        "d1",
        "--",
        "python3",
        "-c",
        "b = bytearray(1 << 30); print('allocated', len(b))",
    ]);
    t.run_row(
        "zone with no limits allocates 1 GiB",
        "killed inside the zone (memory cap), not allocated",
        !r.stdout.contains("allocated") && r.code != 0,
        &r,
    );
    let keys = env.ok(&["config", "keys"]).stdout;
    let doc = |k: &str| {
        keys.lines()
            .find(|l| l.starts_with(k))
            .unwrap_or_default()
            .to_string()
    };
    t.row(
        "`warren config keys` shows the defaults",
        "max-processes default 1024, memory.max default 512M",
        doc("max-processes").contains("1024") && doc("memory.max ").contains("512M"),
        format!("{} / {}", doc("max-processes"), doc("memory.max ")),
    );

    // The host's defaults.
    let defaults = env.root().join("defaults.toml");
    std::fs::write(&defaults, "max-processes = 64\nmemory.max = \"128M\"\n").unwrap();
    env.host_zone("d2", &[]);
    env.ok(&["boot", "d2"]);
    let (p, m) = limits(&env, "d2");
    t.row(
        "defaults.toml max-processes = 64, memory.max = 128M: next boot",
        "pids.max 64, memory 134217728",
        p == "64" && m == "134217728",
        format!("{p} {m}"),
    );
    let r = env.run(&["login", "d2", "--", "perl", "-e", FORK_LOOP]);
    let forked: i64 = field(&r.stdout, "forked")
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    t.run_row(
        "zone under defaults.toml forks 1200 processes",
        "fork fails (EAGAIN) just below 64",
        field(&r.stdout, "errno") == Some("11") && (50..64).contains(&forked),
        &r,
    );
    env.ok(&["halt", "d1", "--timeout", "1"]);
    env.ok(&["boot", "d1"]);
    let (p, m) = limits(&env, "d1");
    t.row(
        "an existing zone with no limits, rebooted after defaults.toml",
        "the new defaults (64, 128M)",
        p == "64" && m == "134217728",
        format!("{p} {m}"),
    );
    env.host_zone("d3", &["max-processes=200"]);
    env.ok(&["boot", "d3"]);
    let (p, m) = limits(&env, "d3");
    t.row(
        "zone's own max-processes = 200 under defaults.toml",
        "its own wins (200); memory from defaults (128M)",
        p == "200" && m == "134217728",
        format!("{p} {m}"),
    );
    env.host_zone("d4", &["memory.max=256M"]);
    env.ok(&["boot", "d4"]);
    let (p, m) = limits(&env, "d4");
    t.row(
        "zone's own memory.max = 256M under defaults.toml",
        "its own wins (268435456); pids from defaults (64)",
        p == "64" && m == "268435456",
        format!("{p} {m}"),
    );
    env.host_zone("d5", &["max-threads=300"]);
    env.ok(&["boot", "d5"]);
    let (p, _) = limits(&env, "d5");
    t.row(
        "zone's own max-threads = 300 under defaults.toml",
        "pids.max 300 (no default on top)",
        p == "300",
        &p,
    );

    // Bad host defaults: the boot fails naming the file and the key.
    env.host_zone("d6", &[]);
    for (text, key, what) in [
        ("max-processes = \"lots\"\n", "max-processes", "a bad value"),
        ("cpu.maxx = 1\n", "cpu.maxx", "an unknown key"),
        ("max-processes = = 3\n", "defaults.toml", "invalid TOML"),
    ] {
        std::fs::write(&defaults, text).unwrap();
        let r = env.run(&["boot", "d6"]);
        let state = if env.root().join("zones/d6/runtime.json").exists() {
            "running"
        } else {
            "not running"
        };
        t.row(
            format!("defaults.toml with {what} ({})", text.trim()),
            "boot fails naming defaults.toml and the key",
            r.code != 0
                && r.stderr.contains("defaults.toml")
                && r.stderr.contains(key)
                && state != "running",
            format!("exit {} state {state} {}", r.code, r.stderr),
        );
    }
    std::fs::write(&defaults, "max-processes = 64\n").unwrap();
    t.finish();
}
