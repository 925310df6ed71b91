use super::*;

fn p(text: &str) -> Result<ZoneConfig> {
    parse("web1", text)
}

#[test]
fn full_config_round_trips() {
    let text = r#"
template = "host"
net = "host"
hostname = "w1.example"
services = ["sleep infinity", ["/bin/true"]]
autoboot = true
priority = "best-effort"
stop-timeout = 3
max-processes = 20
max-threads = 40
cpuset = "0-1"
[memory]
max = "512M"
swap = "1G"
request = "128M"
[cpu]
weight = 200
max = 0.5
"#;
    let c = p(text).unwrap();
    assert_eq!(c.limits.memory_max, Some(512 << 20));
    assert_eq!(c.limits.memory_swap, Some(1 << 30));
    assert_eq!(c.limits.memory_request, Some(128 << 20));
    assert_eq!(c.limits.pids_max(), Some(40));
    assert_eq!(c.limits.cpu_max, Some(0.5));
    assert_eq!(c.limits.cpuset, Some(CpuSet(vec![0, 1])));
    assert_eq!(c.services.len(), 2);
    let again = p(&to_toml(&c)).unwrap();
    assert_eq!(c, again);
}

#[test]
fn memory_request_is_checked_against_max() {
    let e = p("template = \"host\"\n[memory]\nmax = \"64M\"\nrequest = \"128M\"")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("memory.request 128M is above memory.max 64M") && e.contains("lower"),
        "{e}"
    );
    let e = p("template = \"host\"\nmemory.request = \"lots\"")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("memory.request \"lots\": expected a size"),
        "{e}"
    );
    // A request without a cap is allowed: a guarantee, no limit.
    let c = p("template = \"host\"\nmemory.request = \"32M\"").unwrap();
    assert_eq!(c.limits.memory_request, Some(32 << 20));
}

#[test]
fn swap_allowance_is_proportional_to_the_request() {
    let gib = 1u64 << 30;
    let mut l = Limits {
        memory_max: Some(2 * gib),
        memory_request: Some(gib),
        ..Limits::default()
    };
    // 1 GiB of 16 GiB RAM gets 1/16 of 8 GiB swap.
    assert_eq!(swap_allowance(&l, 16 * gib, 8 * gib), Some(512 << 20));
    assert_eq!(
        l.with_swap_allowance(16 * gib, 8 * gib).swap_allowance,
        Some(512 << 20)
    );
    assert_eq!(swap_allowance(&l, 16 * gib, 0), None, "no host swap");
    l.memory_swap = Some(0);
    assert_eq!(swap_allowance(&l, 16 * gib, 8 * gib), None, "explicit wins");
    l.memory_swap = None;
    l.memory_max = None;
    assert_eq!(swap_allowance(&l, 16 * gib, 8 * gib), None, "no cap");
    l.memory_max = Some(2 * gib);
    l.memory_request = None;
    assert_eq!(swap_allowance(&l, 16 * gib, 8 * gib), None, "no request");
}

#[test]
fn bad_size_names_field_and_fix() {
    let e = p("template = \"host\"\nmemory.max = \"12X\"")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "zone 'web1': memory.max \"12X\": expected a size such as 512M or 2G, or \"max\" for no limit"
    );
}

#[test]
fn max_and_unlimited_mean_no_limit_and_round_trip() {
    let c = p("template = \"host\"\nmemory.max = \"max\"\nmemory.swap = \"unlimited\"\nmax-processes = \"MAX\"\ncpu.max = \"max\"\ndisk.max = \"unlimited\"").unwrap();
    assert_eq!(c.limits.memory_max, Some(UNLIMITED));
    assert_eq!(c.limits.memory_swap, Some(UNLIMITED));
    assert_eq!(c.limits.max_processes, Some(UNLIMITED));
    assert_eq!((c.limits.cpu_max, c.disk_max), (None, None));
    // The host defaults do not replace an explicit "max".
    let l = c.limits.with_defaults(&Defaults::default());
    assert_eq!(l.pids_max(), Some(UNLIMITED));
    assert_eq!(limit_text(UNLIMITED), "max");
    let text = to_toml(&c);
    assert!(text.contains("max-processes = \"max\""), "{text}");
    assert_eq!(parse("web1", &text).unwrap(), c);
    let e = p("template = \"host\"\nmax-threads = \"lots\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("or \"max\" for no limit"), "{e}");
}

#[test]
fn keys_are_suggested_by_meaning_then_spelling() {
    assert_eq!(suggest("mem.max"), Some("memory.max"));
    assert_eq!(suggest("pids.max"), Some("max-processes"));
    assert_eq!(suggest("PIDS_MAX"), Some("max-processes"));
    assert_eq!(suggest("memory.low"), Some("memory.request"));
    assert_eq!(suggest("cpuset.cpus"), Some("cpuset"));
    assert_eq!(suggest("max_processes"), Some("max-processes"));
    assert_eq!(suggest("zzzzzzzzzz"), None);
    // Every synonym names a real key, and every key says whether it is live.
    for (_, k) in SYNONYMS {
        assert!(key(k).is_some(), "{k}");
    }
    assert!(key("memory.max").unwrap().live && !key("net").unwrap().live);
}

#[test]
fn unknown_key_suggests() {
    let e = p("template = \"host\"\n[memory]\nmaxx = \"1G\"")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown config key 'memory.maxx'"), "{e}");
    assert!(e.contains("did you mean 'memory.max'"), "{e}");
}

#[test]
fn wrong_types_and_ranges() {
    for (text, needle) in [
        (
            "max-processes = \"many\"",
            "max-processes \"many\": expected a whole number",
        ),
        (
            "max-processes = 0",
            "max-processes 0: expected a whole number from 1",
        ),
        (
            "max-processes = 99999999999",
            "expected a whole number from 1 to 4194304",
        ),
        ("cpu.max = 0", "cpu.max 0: expected between 0.01"),
        (
            "cpu.max = \"half\"",
            "cpu.max \"half\": expected a number of CPUs",
        ),
        ("cpuset = \"3-1\"", "cpuset \"3-1\": expected a CPU list"),
        (
            "net = \"bridged\"",
            "net \"bridged\": expected \"none\", \"host\" or \"bridge\"",
        ),
        ("memory.max = \"1K\"", "at least 4M"),
        ("memory.max = \"99999999T\"", "expected a size"),
        ("autoboot = 3", "autoboot 3: expected true or false"),
        ("init = [\"sleep\"]", "must be an absolute path"),
        ("services = \"x\"", "expected an array of commands"),
        ("priority = \"high\"", "expected \"critical\""),
        (
            "net = \"bridge\"\nnet-subnet = \"10.1.0.0/31\"",
            "net-subnet \"10.1.0.0/31\": the prefix length must be from /8 to /30",
        ),
        (
            "net = \"bridge\"\nnet-address = \"10.1.0.300\"",
            "expected an IPv4 address",
        ),
        (
            "net = \"bridge\"\nnet-bridge = \"a b\"",
            "net-bridge \"a b\": use letters",
        ),
    ] {
        let e = p(&format!("template = \"host\"\n{text}"))
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn cross_field_rules() {
    for (text, needle) in [
        ("cpu.shares = 100\ncpu.weight = 100", "set one of them"),
        ("memory.swap = \"1G\"", "without memory.max"),
        ("max-processes = 10\nmax-threads = 5", "below max-processes"),
        ("init = \"sleep 1\"\nservices = [\"x\"]", "drop one of them"),
    ] {
        let e = p(&format!("template = \"host\"\n{text}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
    let e = p("template = \"host\"\nnet-subnet = \"10.5.0.0/24\"")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "zone 'web1': net-subnet apply only to net = \"bridge\", but net is \"none\"; set net = \"bridge\" or unset them"
    );
    let e = p("template = \"host\"\nnet = \"bridge\"\nnet-subnet = \"10.5.0.0/24\"\nnet-address = \"10.6.0.9\"")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "zone 'web1': net-address 10.6.0.9 cannot be used in net-subnet 10.5.0.0/24: it is outside the subnet; pick an address from 10.5.0.2 to 10.5.0.254 or change net-subnet"
    );
    let e = p("template = \"host\"\nnet = \"bridge\"\nnet-address = \"10.231.0.1\"")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the default net-subnet 10.231.0.0/16: it is the gateway"),
        "{e}"
    );
    let c = p("template = \"host\"\nnet = \"bridge\"\nnet-bridge = \"wt0\"\nnet-subnet = \"10.5.0.0/24\"\nnet-address = \"10.5.0.9\"").unwrap();
    assert_eq!(c.bridge(), "wt0");
    assert_eq!(p(&to_toml(&c)).unwrap(), c);
    let iso = p("template = \"host\"\nnet = \"bridge\"\nnet-isolated = true").unwrap();
    assert!(iso.net_isolated && !c.net_isolated);
    assert_eq!(p(&to_toml(&iso)).unwrap(), iso);
    let e = p("template = \"host\"\nnet-isolated = true")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("net-isolated apply only to net = \"bridge\""),
        "{e}"
    );
    let e = p("template = \"host\"\nnet = \"bridge\"\nnet-isolated = 1")
        .unwrap_err()
        .to_string();
    assert!(e.contains("net-isolated 1: expected true or false"), "{e}");
    let e = p("template = \"../x\"").unwrap_err().to_string();
    assert!(e.contains("not a template name"), "{e}");
    let e = p("net = \"none\"").unwrap_err().to_string();
    assert!(e.contains("template is missing"), "{e}");
    let e = p("template = ").unwrap_err().to_string();
    assert!(e.contains("not valid TOML"), "{e}");
}

#[test]
fn host_checks() {
    let c = p("template = \"host\"\ncpuset = \"0,5\"").unwrap();
    let e = check_host("web1", &c, &[0, 1]).unwrap_err().to_string();
    assert!(
        e.contains("names CPU 5") && e.contains("online: 0-1"),
        "{e}"
    );
    let c = p("template = \"host\"\ncpu.max = 4").unwrap();
    assert!(check_host("web1", &c, &[0, 1]).is_err());
    let c = p("template = \"host\"\ncpu.max = 1.5\ncpuset = \"1\"").unwrap();
    check_host("web1", &c, &[0, 1]).unwrap();
}

#[test]
fn caps_and_seccomp_keys_are_validated() {
    let mut t = to_table(&ZoneConfig::new("host"));
    set_in_table("z", &mut t, "caps.add", set_value("sys_nice,CAP_IPC_LOCK")).unwrap();
    set_in_table("z", &mut t, "caps.drop", set_value("[\"CAP_NET_RAW\"]")).unwrap();
    set_in_table("z", &mut t, "seccomp.deny", set_value("io_uring_setup")).unwrap();
    let c = from_table("z", &t).unwrap();
    assert_eq!(c.caps_add, ["CAP_SYS_NICE", "CAP_IPC_LOCK"]);
    assert_eq!(c.caps_drop, ["CAP_NET_RAW"]);
    assert_eq!(c.seccomp_deny, ["io_uring_setup"]);
    // Round trip through config.toml.
    assert_eq!(from_table("z", &to_table(&c)).unwrap(), c);
    let mut bad = t.clone();
    set_in_table("z", &mut bad, "caps.add", set_value("CAP_FLY")).unwrap();
    let e = from_table("z", &bad).unwrap_err().to_string();
    assert!(e.contains("not a capability"), "{e}");
    let mut bad = t.clone();
    set_in_table("z", &mut bad, "seccomp.deny", set_value("no_such_call")).unwrap();
    let e = from_table("z", &bad).unwrap_err().to_string();
    assert!(e.contains("not a syscall"), "{e}");
    let mut bad = t;
    set_in_table("z", &mut bad, "caps.drop", set_value("SYS_NICE")).unwrap();
    let e = from_table("z", &bad).unwrap_err().to_string();
    assert!(e.contains("both caps.add and caps.drop"), "{e}");
}

#[test]
fn set_values_take_toml_or_text() {
    assert_eq!(set_value("20"), toml::Value::Integer(20));
    assert_eq!(set_value("0.5"), toml::Value::Float(0.5));
    assert_eq!(set_value("512M"), toml::Value::String("512M".into()));
    assert_eq!(set_value("0-1"), toml::Value::String("0-1".into()));
    assert_eq!(set_value("\"x y\""), toml::Value::String("x y".into()));
    let mut t = to_table(&ZoneConfig::new("host"));
    set_in_table("z", &mut t, "memory.max", set_value("1G")).unwrap();
    set_in_table("z", &mut t, "max-processes", set_value("20")).unwrap();
    let c = from_table("z", &t).unwrap();
    assert_eq!(c.limits.memory_max, Some(1 << 30));
    unset_in_table("z", &mut t, "memory.max").unwrap();
    assert_eq!(from_table("z", &t).unwrap().limits.memory_max, None);
    assert!(set_in_table("z", &mut t, "memroy.max", set_value("1")).is_err());
}

#[test]
fn sizes_and_cpu_lists() {
    assert_eq!(parse_size("512M"), Some(512 << 20));
    assert_eq!(parse_size("2GiB"), Some(2 << 30));
    assert_eq!(parse_size("1.5G"), Some(3 << 29));
    assert_eq!(parse_size("4096"), Some(4096));
    assert_eq!(parse_size("12X"), None);
    assert_eq!(parse_size(""), None);
    assert_eq!(parse_size("M"), None);
    assert_eq!(format_size(512 << 20), "512M");
    assert_eq!(format_size(1000), "1000");
    assert_eq!(parse_cpu_list("0-2,5,5"), Some(vec![0, 1, 2, 5]));
    assert_eq!(parse_cpu_list("0,,1"), None);
    assert_eq!(CpuSet(vec![0, 1, 2, 5, 7, 8]).to_string(), "0-2,5,7-8");
}

#[test]
fn userns_rlimit_and_disk_keys_round_trip() {
    let c = p("template = \"host\"\nuserns = false\n[rlimit]\nnofile = \"1024:4096\"\ncore = 0\n[disk]\nmax = \"64M\"").unwrap();
    assert!(!c.userns);
    assert_eq!(
        c.rlimits.get("nofile"),
        Some(&crate::isolation::rlimits::Limit {
            soft: 1024,
            hard: 4096
        })
    );
    assert_eq!(c.disk_max, Some(64 << 20));
    let back = from_table("z", &to_table(&c)).unwrap();
    assert_eq!(back, c);
    let d = p("template = \"host\"").unwrap();
    assert!(d.userns, "user namespaces are the default");
    let pinned = p("template = \"host\"\nuserns-base = 2000000000").unwrap();
    assert_eq!(from_table("z", &to_table(&pinned)).unwrap(), pinned);
}

#[test]
fn bad_userns_rlimit_and_disk_values_name_the_key() {
    for (text, want) in [
        (
            "userns-base = 1000",
            "userns-base 1000 would map host ids below 65536",
        ),
        (
            "userns = false\nuserns-base = 2000000000",
            "userns-base is set but userns = false",
        ),
        (
            "rlimit.nofile = \"20:10\"",
            "rlimit.nofile \"20:10\": expected",
        ),
        ("rlimit.bogus = 1", "unknown config key 'rlimit.bogus'"),
        ("disk.max = \"1M\"", "disk.max \"1M\": at least 16M"),
    ] {
        let e = p(&format!("template = \"host\"\n{text}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{text}: {e}");
        assert!(e.starts_with("zone 'web1'"), "{e}");
    }
}

#[test]
fn privileges_the_host_cannot_grant_are_refused() {
    let c =
        p("template = \"host\"\ncaps.add = [\"CAP_SYS_MODULE\"]\nrlimit.nofile = 100000").unwrap();
    let all = HostPrivileges {
        cap_bounding: u64::MAX,
        hard_limits: BTreeMap::new(),
    };
    check_privileges("web1", &c, &all).unwrap();
    let no_module = HostPrivileges {
        cap_bounding: !crate::isolation::caps::bit("CAP_SYS_MODULE"),
        hard_limits: BTreeMap::new(),
    };
    let e = check_privileges("web1", &c, &no_module)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("zone 'web1'") && e.contains("caps.add CAP_SYS_MODULE"),
        "{e}"
    );
    assert!(e.contains("remove it from caps.add"), "{e}");
    let low = HostPrivileges {
        cap_bounding: u64::MAX,
        hard_limits: [("nofile".to_string(), 20000)].into_iter().collect(),
    };
    let e = check_privileges("web1", &c, &low).unwrap_err().to_string();
    assert!(e.contains("rlimit.nofile hard limit 100000"), "{e}");
    assert!(e.contains("use at most 20000"), "{e}");
}

#[test]
fn one_key_in_two_spellings_is_refused_naming_both() {
    let e = p("template = \"host\"\n\"memory.max\" = \"1G\"\n[memory]\nmax = \"2G\"\n")
        .unwrap_err()
        .to_string();
    // Both spellings are named (in the table's key order, not the file's).
    assert_eq!(
        e,
        "zone 'web1': memory.max is given twice, as max in [memory] and as \"memory.max\"; keep one of them"
    );
    let e = p("template = \"host\"\n\"rlimit.nofile\" = 10\n[rlimit]\nnofile = 20\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("rlimit.nofile is given twice"), "{e}");
    // One spelling, or distinct keys in both forms: fine.
    p("template = \"host\"\n\"memory.max\" = \"1G\"\n[memory]\nswap = \"2G\"\n").unwrap();
    let e = Defaults::parse(
        std::path::Path::new("/r/defaults.toml"),
        "max-processes = 10\n\"memory.max\" = \"1G\"\n[memory]\nmax = \"2G\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("/r/defaults.toml: memory.max is given twice"),
        "{e}"
    );
    assert!(e.contains("remove it to use the built-in defaults"), "{e}");
}

#[test]
fn commands_with_nul_or_the_unit_separator_are_refused() {
    for text in [
        "services = [\"sleep\\u0000 1\"]",
        "services = [[\"/bin/sleep\", \"1\\u001f2\"]]",
        "init = \"sleep\\u0000\"",
        "init = [\"/bin/sleep\\u001f\", \"1\"]",
    ] {
        let e = p(&format!("template = \"host\"\n{text}\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("may not contain the control character"),
            "{text}: {e}"
        );
    }
    // Other control characters reach init intact: a tab in a shell command is fine.
    p("template = \"host\"\nservices = [\"sleep\\t1\"]\n").unwrap();
}

#[test]
fn env_is_a_list_of_key_value_strings_and_round_trips() {
    let c = p("template = \"host\"\nenv = [\"LANG=C.UTF-8\", \"EMPTY=\"]\n").unwrap();
    assert_eq!(c.env, ["LANG=C.UTF-8", "EMPTY="]);
    assert_eq!(p(&to_toml(&c)).unwrap().env, c.env);
    for (bad, why) in [
        ("env = [\"NOEQUALS\"]", "expected KEY=VALUE"),
        ("env = [\"=v\"]", "name before '=' is empty"),
        ("env = \"LANG=C\"", "expected an array"),
    ] {
        let e = p(&format!("template = \"host\"\n{bad}\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
}
