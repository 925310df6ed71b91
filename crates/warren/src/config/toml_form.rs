//! The config's TOML file and `--set key=value` forms, both ways.

use super::*;

/// Parse and validate a config table for zone `zone`.
pub fn from_table(zone: &str, table: &toml::Table) -> Result<ZoneConfig> {
    if let Some(m) = duplicate_key(table) {
        return Err(Error::config(zone, m));
    }
    let mut entries = Vec::new();
    flatten("", table, &mut entries);
    let mut cfg = ZoneConfig::new("host");
    let mut has_template = false;
    for (name, value) in &entries {
        let key = find_key(name).ok_or_else(|| Error::config(zone, unknown_key(name)))?;
        (key.apply)(&mut cfg, value).map_err(|m| Error::config(zone, format!("{name} {m}")))?;
        has_template |= name == "template";
    }
    if !has_template {
        return Err(Error::config(
            zone,
            "template is missing; add template = \"host\" (or another from 'warren template list')",
        ));
    }
    check_consistency(zone, &cfg)?;
    Ok(cfg)
}

/// The first key given twice in `table` under two spellings (a quoted dotted key such
/// as `"memory.max"` and `max` in `[memory]`), as a message naming both and the fix.
/// TOML itself refuses a key repeated in one spelling.
pub fn duplicate_key(table: &toml::Table) -> Option<String> {
    fn walk(
        path: &[&str],
        table: &toml::Table,
        seen: &mut Vec<(String, String)>,
    ) -> Option<String> {
        for (k, v) in table {
            let mut p = path.to_vec();
            p.push(k);
            if let toml::Value::Table(t) = v {
                if let Some(m) = walk(&p, t, seen) {
                    return Some(m);
                }
                continue;
            }
            let name = p.join(".");
            let quote = |s: &str| {
                if !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                {
                    s.to_string()
                } else {
                    format!("{s:?}")
                }
            };
            let last = quote(k);
            let spelling = match path {
                [] => last,
                _ => format!(
                    "{last} in [{}]",
                    path.iter().map(|s| quote(s)).collect::<Vec<_>>().join(".")
                ),
            };
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
                return Some(format!(
                    "{name} is given twice, as {first} and as {spelling}; keep one of them"
                ));
            }
            seen.push((name, spelling));
        }
        None
    }
    walk(&[], table, &mut Vec::new())
}

/// Parse a config file's text.
pub fn parse(zone: &str, text: &str) -> Result<ZoneConfig> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        Error::config(
            zone,
            format!(
                "config is not valid TOML: {}; fix the syntax (examples: 'warren config keys')",
                e.message().trim()
            ),
        )
    })?;
    from_table(zone, &table)
}

/// Interpret a `--set` value: TOML syntax if it parses (numbers, booleans, arrays,
/// quoted strings), else the raw text as a string ("512M", "0-1").
pub fn set_value(raw: &str) -> toml::Value {
    if let Ok(t) = format!("v = {raw}").parse::<toml::Table>() {
        if let Some(v) = t.get("v") {
            return v.clone();
        }
    }
    toml::Value::String(raw.to_string())
}

/// Set dotted `key` to `value` in `table` (creating sub-tables).
pub fn set_in_table(
    zone: &str,
    table: &mut toml::Table,
    key: &str,
    value: toml::Value,
) -> Result<()> {
    if find_key(key).is_none() {
        return Err(Error::config(zone, unknown_key(key)));
    }
    if key.contains('.') {
        // The key in its quoted spelling ("memory.max" = …) gives way to the one set.
        table.remove(key);
    }
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().expect("split yields at least one part");
    let mut t = table;
    for p in parts {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = match entry {
            toml::Value::Table(t) => t,
            _ => {
                return Err(Error::config(
                    zone,
                    format!("config key '{p}' holds a value, so {key} cannot be set below it; remove '{p} = …' with 'warren config edit'"),
                ))
            }
        };
    }
    t.insert(last.to_string(), value);
    Ok(())
}

/// Remove dotted `key` from `table`. A key this warren does not know is removed too
/// when the table holds it (under either spelling: a stored config from another
/// version is repaired this way); otherwise it is refused as unknown.
pub fn unset_in_table(zone: &str, table: &mut toml::Table, key: &str) -> Result<()> {
    if key == "template" {
        return Err(Error::config(
            zone,
            "template cannot be unset; set another one instead",
        ));
    }
    // The quoted spelling: one top-level key with dots in it.
    let mut removed = key.contains('.') && table.remove(key).is_some();
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().expect("split yields at least one part");
    let mut t = Some(&mut *table);
    for p in parts {
        t = match t.and_then(|t| t.get_mut(p)) {
            Some(toml::Value::Table(inner)) => Some(inner),
            _ => None,
        };
    }
    if let Some(t) = t {
        removed |= t.remove(last).is_some();
    }
    if !removed && find_key(key).is_none() {
        return Err(Error::config(zone, unknown_key(key)));
    }
    Ok(())
}

/// Parse `key=value` pairs from the command line.
pub fn parse_assignment(zone: &str, s: &str) -> Result<(String, toml::Value)> {
    let (k, v) = s.split_once('=').ok_or_else(|| {
        Error::config(
            zone,
            format!("--set {s:?}: expected key=value, e.g. memory.max=512M"),
        )
    })?;
    Ok((k.trim().to_string(), set_value(v.trim())))
}

/// The config as a TOML table (what `config.toml` holds).
pub fn to_table(c: &ZoneConfig) -> toml::Table {
    let mut t = toml::Table::new();
    let mut put = |k: &str, v: toml::Value| {
        set_in_table("", &mut t, k, v).expect("registered key");
    };
    put("template", c.template.clone().into());
    if c.brand != Brand::Native {
        put("brand", "native".into());
    }
    put("net", c.net.as_str().into());
    if let Some(b) = &c.net_bridge {
        put("net-bridge", b.clone().into());
    }
    if let Some(s) = &c.net_subnet {
        put("net-subnet", s.to_string().into());
    }
    if let Some(a) = &c.net_address {
        put("net-address", a.to_string().into());
    }
    if c.net_isolated {
        put("net-isolated", true.into());
    }
    if let Some(h) = &c.hostname {
        put("hostname", h.clone().into());
    }
    let list = |v: &[String]| toml::Value::Array(v.iter().cloned().map(Into::into).collect());
    if !c.caps_add.is_empty() {
        put("caps.add", list(&c.caps_add));
    }
    if !c.caps_drop.is_empty() {
        put("caps.drop", list(&c.caps_drop));
    }
    if !c.seccomp_deny.is_empty() {
        put("seccomp.deny", list(&c.seccomp_deny));
    }
    if !c.env.is_empty() {
        put("env", list(&c.env));
    }
    let cmd = |c: &Command| match c {
        Command::Shell(s) => toml::Value::String(s.clone()),
        Command::Argv(v) => toml::Value::Array(v.iter().cloned().map(Into::into).collect()),
    };
    if let Some(i) = &c.init {
        put("init", cmd(i));
    }
    if !c.services.is_empty() {
        put(
            "services",
            toml::Value::Array(c.services.iter().map(cmd).collect()),
        );
    }
    if c.autoboot {
        put("autoboot", true.into());
    }
    if let Some(v) = c.proc_views {
        put("proc-views", v.into());
    }
    if c.memory_merge {
        put("memory.merge", true.into());
    }
    if let Some(s) = c.suspend_after {
        put("suspend-after", super::values::duration_text(s).into());
    }
    if c.priority != Priority::Normal {
        put(
            "priority",
            match c.priority {
                Priority::Critical => "critical",
                Priority::Normal => "normal",
                Priority::BestEffort => "best-effort",
            }
            .into(),
        );
    }
    let int = |n: u64| toml::Value::Integer(n as i64);
    if let Some(s) = c.stop_timeout {
        put("stop-timeout", int(s));
    }
    let l = &c.limits;
    if let Some(n) = l.max_processes {
        put("max-processes", int_or_max(n));
    }
    if let Some(n) = l.max_threads {
        put("max-threads", int_or_max(n));
    }
    if let Some(n) = l.memory_max {
        put("memory.max", size_or_max(n));
    }
    if let Some(n) = l.memory_swap {
        put("memory.swap", size_or_max(n));
    }
    if let Some(n) = l.memory_request {
        put("memory.request", format_size(n).into());
    }
    if let Some(n) = l.cpu_shares {
        put("cpu.shares", int(n));
    }
    if let Some(n) = l.cpu_weight {
        put("cpu.weight", int(n));
    }
    if let Some(f) = l.cpu_max {
        put("cpu.max", toml::Value::Float(f));
    }
    if let Some(cs) = &l.cpuset {
        put("cpuset", cs.to_string().into());
    }
    if !c.userns {
        put("userns", false.into());
    }
    if let Some(b) = c.userns_base {
        put("userns-base", int(u64::from(b)));
    }
    for (name, l) in &c.rlimits {
        put(
            &format!("rlimit.{name}"),
            crate::isolation::rlimits::format(*l).into(),
        );
    }
    if let Some(n) = c.disk_max {
        put("disk.max", format_size(n).into());
    }
    t
}

/// The config file's text.
pub fn to_toml(c: &ZoneConfig) -> String {
    toml::to_string(&to_table(c)).expect("a table always serialises")
}

/// Keys a running zone takes without a reboot: those the registry marks `live` (each
/// is a cgroup file, see `cgroups::live`). `disk.max` is not among them: its
/// loop-backed ext4 image is made at install.
pub fn live_keys() -> Vec<&'static str> {
    KEYS.iter().filter(|k| k.live).map(|k| k.name).collect()
}

/// Whether `key` is one of [`live_keys`].
pub fn is_live(key: &str) -> bool {
    find_key(key).is_some_and(|k| k.live)
}

/// The dotted keys whose values differ between `old` (none: every key of `new`) and
/// `new`, sorted.
pub fn changed_keys(old: Option<&ZoneConfig>, new: &ZoneConfig) -> Vec<String> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    if let Some(old) = old {
        flatten("", &to_table(old), &mut a);
    }
    flatten("", &to_table(new), &mut b);
    let mut keys: Vec<String> = a
        .iter()
        .filter(|(k, v)| b.iter().find(|(k2, _)| k2 == k).map(|(_, v2)| v2) != Some(v))
        .chain(
            b.iter()
                .filter(|(k, v)| a.iter().find(|(k2, _)| k2 == k).map(|(_, v2)| v2) != Some(v)),
        )
        .map(|(k, _)| k.clone())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}
