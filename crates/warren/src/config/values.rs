//! Values: sizes, CPU lists, and the typed readers each key's parser uses.

use super::*;

/// Parse a CPU list as the kernel writes them ("0-3,6"); `None` if malformed.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',') {
        let part = part.trim();
        if part.is_empty() {
            return None;
        }
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b || b > 8191 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => {
                let a: u32 = part.parse().ok()?;
                if a > 8191 {
                    return None;
                }
                cpus.push(a);
            }
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// Parse a size: an integer of bytes, or a number with K, M, G or T (powers of 1024,
/// optionally followed by "i", "B" or "iB"). `None` if malformed or too large.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(digits_end);
    if num.is_empty() {
        return None;
    }
    let unit = unit.trim();
    let unit = unit
        .strip_suffix("iB")
        .or_else(|| unit.strip_suffix('B'))
        .or_else(|| unit.strip_suffix('i'))
        .unwrap_or(unit);
    let mult: u64 = match unit {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        "T" | "t" => 1 << 40,
        _ => return None,
    };
    let value = if num.contains('.') {
        let f: f64 = num.parse().ok()?;
        let v = f * mult as f64;
        if !v.is_finite() || v >= (1u64 << 62) as f64 {
            return None;
        }
        v as u64
    } else {
        num.parse::<u64>().ok()?.checked_mul(mult)?
    };
    // Cgroup files take a signed 64-bit value; stay well inside it.
    (value < (1u64 << 62)).then_some(value)
}

/// Format a size the way a person writes it in a config ("512M").
pub fn format_size(bytes: u64) -> String {
    for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] {
        if bytes >= (1 << shift) && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

pub(super) fn short(v: &toml::Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!("{}…", &s[..s.floor_char_boundary(40)])
    } else {
        s
    }
}

pub(super) fn want_str<'a>(v: &'a toml::Value, what: &str) -> std::result::Result<&'a str, String> {
    v.as_str()
        .ok_or_else(|| format!("{}: expected {what}", short(v)))
}

/// A list of names: a TOML array of strings, or one string of comma-separated names.
pub(super) fn want_names(v: &toml::Value, what: &str) -> std::result::Result<Vec<String>, String> {
    let items: Vec<String> = match v {
        toml::Value::String(s) => s.split(',').map(|x| x.trim().to_string()).collect(),
        toml::Value::Array(a) => a
            .iter()
            .map(|x| want_str(x, what).map(str::to_string))
            .collect::<std::result::Result<_, _>>()?,
        other => return Err(format!("{}: expected {what}", short(other))),
    };
    Ok(items.into_iter().filter(|s| !s.is_empty()).collect())
}

/// Environment entries: a TOML array of `KEY=VALUE` strings (KEY non-empty, without
/// `=` or NUL; the value without NUL).
pub(super) fn want_env(v: &toml::Value) -> std::result::Result<Vec<String>, String> {
    let toml::Value::Array(items) = v else {
        return Err(format!(
            "{}: expected an array of \"KEY=VALUE\" strings such as [\"LANG=C.UTF-8\"]",
            short(v)
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let s = want_str(item, "a \"KEY=VALUE\" string")?;
        if let Some(p) = env_problem(s) {
            return Err(format!("{s:?}: {p}"));
        }
        out.push(s.to_string());
    }
    Ok(out)
}

/// What is wrong with an environment entry `KEY=VALUE`, if anything.
pub fn env_problem(entry: &str) -> Option<&'static str> {
    match entry.split_once('=') {
        _ if entry.contains('\0') => Some("contains a NUL byte"),
        None => Some("expected KEY=VALUE (an '=' after the name)"),
        Some(("", _)) => Some("the name before '=' is empty"),
        Some(_) => None,
    }
}

/// Capability names, canonicalised (`sys_nice` → `CAP_SYS_NICE`).
pub(super) fn want_caps(v: &toml::Value) -> std::result::Result<Vec<String>, String> {
    want_names(v, "capability names such as [\"CAP_SYS_NICE\"]")?
        .iter()
        .map(|n| {
            crate::isolation::caps::canonical(n)
                .map(str::to_string)
                .ok_or_else(|| {
                    format!(
                        "{n:?} is not a capability; known: {}",
                        crate::isolation::caps::NAMES.join(", ")
                    )
                })
        })
        .collect()
}

pub(super) fn want_bool(v: &toml::Value) -> std::result::Result<bool, String> {
    match v {
        toml::Value::Boolean(b) => Ok(*b),
        toml::Value::String(s) if s == "true" || s == "false" => Ok(s == "true"),
        other => Err(format!("{}: expected true or false", short(other))),
    }
}

pub(super) fn want_int(v: &toml::Value, min: u64, max: u64) -> std::result::Result<u64, String> {
    let n = match v {
        toml::Value::Integer(i) => *i as i128,
        toml::Value::String(s) => s
            .trim()
            .parse::<i128>()
            .map_err(|_| format!("{s:?}: expected a whole number from {min} to {max}"))?,
        other => {
            return Err(format!(
                "{}: expected a whole number from {min} to {max}",
                short(other)
            ))
        }
    };
    if n < min as i128 || n > max as i128 {
        return Err(format!("{n}: expected a whole number from {min} to {max}"));
    }
    Ok(n as u64)
}

/// A duration such as "10m", "90s", "2h", "1d" (or whole seconds), in seconds.
pub(super) fn want_duration(v: &toml::Value) -> std::result::Result<u64, String> {
    let bad = || {
        format!(
            "{}: expected a duration such as 10m, 90s, 2h or 1d",
            short(v)
        )
    };
    let text = match v {
        toml::Value::Integer(i) if *i > 0 => return Ok(*i as u64),
        toml::Value::String(s) => s.trim(),
        _ => return Err(bad()),
    };
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let mul = match unit.trim() {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    match n.checked_mul(mul) {
        Some(s) if s > 0 => Ok(s),
        _ => Err(bad()),
    }
}

/// Seconds as the largest unit that divides them ("10m", "90s").
pub fn duration_text(secs: u64) -> String {
    for (unit, n) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if secs.is_multiple_of(n) {
            return format!("{}{unit}", secs / n);
        }
    }
    format!("{secs}s")
}

pub(super) fn want_size(v: &toml::Value) -> std::result::Result<u64, String> {
    let parsed = match v {
        toml::Value::Integer(i) if *i >= 0 => parse_size(&i.to_string()),
        toml::Value::String(s) => parse_size(s),
        _ => None,
    };
    parsed.ok_or_else(|| format!("{}: expected a size such as 512M or 2G", short(v)))
}

pub(super) fn want_command(v: &toml::Value) -> std::result::Result<Command, String> {
    let cmd = match v {
        toml::Value::String(s) if !s.trim().is_empty() => Command::Shell(s.clone()),
        toml::Value::Array(items) if !items.is_empty() => {
            let argv = items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("{}: expected an array of strings", short(v)))?;
            Command::Argv(argv)
        }
        other => {
            return Err(format!(
                "{}: expected a command string or a non-empty array of strings",
                short(other)
            ))
        }
    };
    let words: &[String] = match &cmd {
        Command::Shell(s) => std::slice::from_ref(s),
        Command::Argv(argv) => argv,
    };
    // A command reaches init in its environment, words separated by 0x1f
    // (runtime::init::encode_services): NUL cannot be in an environment string, and
    // 0x1f would split a word in two.
    for w in words {
        if let Some(c) = w.chars().find(|c| matches!(c, '\0' | '\u{1f}')) {
            return Err(format!(
                "{}: a command may not contain the control character {:?} (it cannot be passed to the zone's init); remove it",
                short(v),
                c
            ));
        }
    }
    Ok(cmd)
}

/// A limit set to `max` / `unlimited`: no cap, not even the host's default (stored in
/// `Limits` as this value, written to the cgroup as `max`, or `-1` on cgroup v1).
pub const UNLIMITED: u64 = u64::MAX;

/// The text a cgroup v2 limit file takes for `n` (`max` for [`UNLIMITED`]).
pub fn limit_text(n: u64) -> String {
    if n == UNLIMITED {
        "max".into()
    } else {
        n.to_string()
    }
}

/// Whether a value spells "no limit": `max`, `unlimited` or `infinity` (any case).
pub(super) fn is_unlimited(v: &toml::Value) -> bool {
    v.as_str().is_some_and(|s| {
        let s = s.trim();
        ["max", "unlimited", "infinity"]
            .iter()
            .any(|w| s.eq_ignore_ascii_case(w))
    })
}

/// A size, or `max` / `unlimited` ([`UNLIMITED`]).
pub(super) fn want_size_or_max(v: &toml::Value) -> std::result::Result<u64, String> {
    if is_unlimited(v) {
        return Ok(UNLIMITED);
    }
    want_size(v).map_err(|_| {
        format!(
            "{}: expected a size such as 512M or 2G, or \"max\" for no limit",
            short(v)
        )
    })
}

/// A whole number in `min..=max`, or `max` / `unlimited` ([`UNLIMITED`]).
pub(super) fn want_int_or_max(
    v: &toml::Value,
    min: u64,
    max: u64,
) -> std::result::Result<u64, String> {
    if is_unlimited(v) {
        return Ok(UNLIMITED);
    }
    want_int(v, min, max).map_err(|m| format!("{m}, or \"max\" for no limit"))
}

/// The config form of a size limit: "512M", or "max".
pub fn size_or_max(n: u64) -> toml::Value {
    if n == UNLIMITED {
        "max".into()
    } else {
        format_size(n).into()
    }
}

/// The config form of a count limit: 100, or "max".
pub fn int_or_max(n: u64) -> toml::Value {
    if n == UNLIMITED {
        "max".into()
    } else {
        toml::Value::Integer(n as i64)
    }
}
