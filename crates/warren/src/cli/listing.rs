//! `warren list` with its filters, formats and columns, and `warren info ZONE`.

use serde::Serialize;

use super::*;
use crate::zone::ZoneInfo;

pub(super) const LIST_HELP: &str = "\
Columns (-c, comma-separated; default name,state,template,backend,kind; -v adds
pid,uptime,net,address,limits,root):
  name state template backend kind pid uptime net address limits root
  memory (memory.max)  procs (max-processes)  cpu (cpu.max)  idmap (first host id)

States (--state): configured incomplete installed ready running shutting_down, and
evicted (an installed zone the agent evicted).

Examples:
  warren list 'web*' --state running
  warren ls -c name,state,memory,address
  warren list --format csv -c name,state,uptime > zones.csv
  warren list db1 --format json";

/// Every column `-c` accepts.
const COLUMNS: &[&str] = &[
    "name", "state", "template", "backend", "kind", "pid", "uptime", "net", "address", "limits",
    "root", "memory", "procs", "cpu", "idmap",
];
const DEFAULT_COLUMNS: &[&str] = &["name", "state", "template", "backend", "kind"];
const VERBOSE_COLUMNS: &[&str] = &["pid", "uptime", "net", "address", "limits", "root"];

/// The flags of `warren list`.
pub(super) struct ListArgs {
    pub pattern: Option<String>,
    pub states: Vec<String>,
    pub format: Option<String>,
    pub columns: Vec<String>,
    pub verbose: bool,
}

/// Whether `name` matches `pattern`: `*` any run of characters, `?` one, else literal.
pub(super) fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some(('*', rest)) => (0..=n.len()).any(|i| go(rest, &n[i..])),
            Some(('?', rest)) => !n.is_empty() && go(rest, &n[1..]),
            Some((c, rest)) => n.first() == Some(c) && go(rest, &n[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

fn state_matches(i: &ZoneInfo, wanted: &[String]) -> bool {
    wanted.is_empty()
        || wanted.iter().any(|w| match w.as_str() {
            "evicted" => i.evicted.is_some(),
            w => i.state.is_some_and(|s| s.to_string() == w),
        })
}

fn cell(i: &ZoneInfo, col: &str) -> String {
    let dash = || "-".to_string();
    let limits = i.config.as_ref().map(|c| &c.limits);
    match col {
        "name" => i.name.clone(),
        "state" => output::state_cell(i),
        "template" => i.template.clone().unwrap_or_else(dash),
        "backend" => i.backend.map(|b| b.to_string()).unwrap_or_else(dash),
        "kind" => i.kind.to_string(),
        "pid" => i.init_pid.map(|p| p.to_string()).unwrap_or_else(dash),
        "uptime" => i.uptime_s.map(output::uptime).unwrap_or_else(dash),
        "net" => i.net.map(|n| n.as_str().to_string()).unwrap_or_else(dash),
        "address" => i.address.map(|a| a.to_string()).unwrap_or_else(dash),
        "limits" => i
            .config
            .as_ref()
            .map(output::limits_summary)
            .unwrap_or_else(dash),
        "root" => match (&i.root, &i.error) {
            (_, Some(e)) => e.clone(),
            (Some(r), _) => r.display().to_string(),
            _ => dash(),
        },
        "memory" => limits
            .and_then(|l| l.memory_max)
            .map(output::size_or_max)
            .unwrap_or_else(dash),
        "procs" => limits
            .and_then(|l| l.max_processes)
            .map(config::limit_text)
            .unwrap_or_else(dash),
        "cpu" => limits
            .and_then(|l| l.cpu_max)
            .map(|f| f.to_string())
            .unwrap_or_else(dash),
        "idmap" => i.idmap.map(|r| r.base.to_string()).unwrap_or_else(dash),
        other => unreachable!("column {other} was checked"),
    }
}

/// One CSV field, quoted when it holds a comma, quote or line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `warren list`.
pub(super) fn list_cmd(ctx: &Context, json: bool, oci_root: &Path, a: ListArgs) -> Result<()> {
    for c in &a.columns {
        if !COLUMNS.contains(&c.as_str()) {
            return Err(Error::Invalid(format!(
                "-c {c}: no such column; choose from {}",
                COLUMNS.join(",")
            )));
        }
    }
    if let Some(p) = &a.pattern {
        if !p.contains(['*', '?']) {
            names::zone(p)?;
        }
    }
    let infos: Vec<ZoneInfo> = zone::list_with_oci(ctx, oci_root)?
        .into_iter()
        .filter(|i| a.pattern.as_deref().is_none_or(|p| glob_match(p, &i.name)))
        .filter(|i| state_matches(i, &a.states))
        .collect();
    // A plain name that matches nothing is a zone that does not exist.
    if let (Some(p), true) = (&a.pattern, infos.is_empty()) {
        if !p.contains(['*', '?']) && a.states.is_empty() {
            return Err(Error::NoSuchZone(p.clone()));
        }
    }
    let format = a
        .format
        .as_deref()
        .unwrap_or(if json { "json" } else { "table" });
    if format == "json" {
        output::json(&infos);
        return Ok(());
    }
    let cols: Vec<&str> = if a.columns.is_empty() {
        let mut c = DEFAULT_COLUMNS.to_vec();
        if a.verbose {
            c.extend(VERBOSE_COLUMNS);
        }
        c
    } else {
        a.columns.iter().map(String::as_str).collect()
    };
    if format == "table" && a.columns.is_empty() {
        output::zone_table(&infos, a.verbose);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = infos
        .iter()
        .map(|i| cols.iter().map(|c| cell(i, c)).collect())
        .collect();
    if format == "csv" {
        println!("{}", cols.join(","));
        for r in rows {
            let fields: Vec<String> = r.iter().map(|f| csv_field(f)).collect();
            println!("{}", fields.join(","));
        }
    } else {
        let header: Vec<String> = cols.iter().map(|c| c.to_uppercase()).collect();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        output::table(&header, &rows);
    }
    Ok(())
}

/// `warren info ZONE --json`: the `list` object and what only one zone's detail shows.
#[derive(Serialize)]
struct ZoneDetail {
    #[serde(flatten)]
    info: ZoneInfo,
    /// The zone's directory under the state root.
    dir: std::path::PathBuf,
    /// The profiles its config was made from at create.
    profiles: Vec<String>,
    /// The limits it boots with: its config's, with the host defaults (the `default`
    /// profile's caps, else the built-in ones) where it sets none.
    boot_limits: config::Limits,
}

/// `warren info ZONE`: one zone in detail.
pub(super) fn zone_info(ctx: &Context, json: bool, name: &str) -> Result<()> {
    let z = zone::load(ctx, name)?;
    let info = zone::info(ctx, name);
    let defaults = config::Defaults::load(ctx.layout.root())?;
    let d = ZoneDetail {
        boot_limits: z.config.limits.with_defaults(&defaults),
        dir: z.dir.clone(),
        profiles: z.lifecycle.profiles.clone(),
        info,
    };
    if json {
        output::json(&d);
        return Ok(());
    }
    let i = &d.info;
    let dash = || "-".to_string();
    let line = |k: &str, v: String| println!("{k:<15} {v}");
    line("zone:", i.name.clone());
    line("state:", output::state_cell(i));
    line("template:", i.template.clone().unwrap_or_else(dash));
    line(
        "backend:",
        i.backend.map(|b| b.to_string()).unwrap_or_else(dash),
    );
    let net = i.net.map(|n| n.as_str().to_string()).unwrap_or_else(dash);
    let addr = i.address.map(|a| format!(" ({a})")).unwrap_or_default();
    line("net:", format!("{net}{addr}"));
    line("hostname:", z.config.hostname_or(name).to_string());
    line(
        "init pid:",
        i.init_pid.map(|p| p.to_string()).unwrap_or_else(dash),
    );
    line(
        "uptime:",
        i.uptime_s.map(output::uptime).unwrap_or_else(dash),
    );
    line(
        "host ids:",
        match i.idmap {
            Some(r) => format!("{}-{} (user namespace)", r.base, r.last()),
            None if z.config.userns => "not allocated yet".into(),
            None => "the host's (userns = false)".into(),
        },
    );
    line(
        "profiles:",
        if d.profiles.is_empty() {
            dash()
        } else {
            d.profiles.join(", ")
        },
    );
    line("directory:", d.dir.display().to_string());
    line(
        "root:",
        i.root
            .as_ref()
            .map(|r| r.display().to_string())
            .unwrap_or_else(dash),
    );
    let l = &d.boot_limits;
    let own = &z.config.limits;
    let from = |set: bool| if set { "" } else { " (host default)" };
    line(
        "memory.max:",
        format!(
            "{}{}",
            l.memory_max.map(output::size_or_max).unwrap_or_else(dash),
            from(own.memory_max.is_some())
        ),
    );
    line(
        "max-processes:",
        format!(
            "{}{}",
            l.pids_max().map(config::limit_text).unwrap_or_else(dash),
            from(own.pids_max().is_some())
        ),
    );
    line("limits:", output::limits_summary(&z.config));
    // A running zone: the limits the kernel enforces, where they differ from the config
    // (a `config set --live-only`, or a hand-written cgroup file).
    if let Some(files) = &i.in_force {
        let drift: Vec<String> = files
            .iter()
            .filter_map(|f| {
                let c = f.configured.as_ref()?;
                Some(format!("{}={} (configured {c})", f.file, f.in_force))
            })
            .collect();
        line(
            "in force:",
            if drift.is_empty() {
                "as configured".into()
            } else {
                drift.join(", ")
            },
        );
    }
    if let Some(n) = i.oom_kills {
        line("oom kills:", n.to_string());
    }
    if let Some(s) = &i.suspended {
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1 << 20) as f64);
        line(
            "suspended:",
            format!(
                "since {}; resident {} (was {}), {} in swap{}",
                crate::journal::iso_utc(s.since_ms),
                mib(s.now.resident),
                mib(s.resident_before),
                mib(s.now.swapped),
                if s.host_swap {
                    ""
                } else {
                    " (no swap on the host)"
                }
            ),
        );
    }
    println!("\nconfig ({}):", d.dir.join("config.toml").display());
    print!("{}", config::to_toml(&z.config));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_the_shell_does() {
        assert!(glob_match("web*", "web1"));
        assert!(glob_match("web*", "web"));
        assert!(glob_match("w?b1", "web1"));
        assert!(glob_match("*1", "db1"));
        assert!(!glob_match("web?", "web"));
        assert!(!glob_match("web", "web1"));
        assert!(glob_match("*", ""));
    }

    #[test]
    fn csv_quotes_only_what_needs_it() {
        assert_eq!(csv_field("web1"), "web1");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
