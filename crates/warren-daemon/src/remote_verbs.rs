//! The verbs `warren --remote NAME VERB ...` runs, each mapped to its REST call
//! ([`route`]), and how each answer is printed ([`print`]): list, info, boot, halt,
//! reboot, suspend, resume, snapshot list/create/restore/delete, stat, config
//! show/get/set/unset, and exec (its exit code is the command's).

use serde_json::{json, Value};

/// One REST call: method, path, JSON body.
#[derive(Debug, PartialEq, Eq)]
pub struct Call {
    pub method: &'static str,
    pub path: String,
    pub body: Option<String>,
    /// `exec`: print the command's output and exit with its code.
    pub exec: bool,
}

/// The verbs, for the message when another is asked for.
pub const VERBS: &str = "list, info [ZONE], boot|halt|reboot|suspend|resume ZONE, snapshot list [ZONE], snapshot create ZONE [NAME], snapshot restore|delete ZONE NAME, stat [ZONE...], config show ZONE, config get ZONE KEY, config set ZONE KEY=VALUE..., config unset ZONE KEY..., exec ZONE [--] COMMAND...";

/// A name that goes into a URL path: refused unless plain (the server checks it too).
fn seg(what: &str, s: &str) -> Result<String, String> {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && s != "."
        && s != ".."
    {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{what} {s:?}: give a name of letters, digits, '.', '_' and '-'"
        ))
    }
}

fn call(method: &'static str, path: String, body: Option<Value>) -> Call {
    Call {
        method,
        path,
        body: body.map(|b| b.to_string()),
        exec: false,
    }
}

/// The REST call of `words` (the verb and its arguments, global options removed).
pub fn route(words: &[String]) -> Result<Call, String> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let z = |s: &str| seg("zone", s);
    Ok(match w.as_slice() {
        ["list"] => call("GET", "/1.0/zones".into(), None),
        ["info"] => call("GET", "/1.0/info".into(), None),
        ["info", zone] => call("GET", format!("/1.0/zones/{}", z(zone)?), None),
        [v @ ("boot" | "halt" | "reboot" | "suspend" | "resume"), zone] => {
            call("POST", format!("/1.0/zones/{}/{v}", z(zone)?), None)
        }
        ["snapshot", "list"] => call("GET", "/1.0/snapshots".into(), None),
        ["snapshot", "list", zone] => {
            call("GET", format!("/1.0/zones/{}/snapshots", z(zone)?), None)
        }
        ["snapshot", "create", zone, rest @ ..] if rest.len() <= 1 => call(
            "POST",
            format!("/1.0/zones/{}/snapshots", z(zone)?),
            Some(match rest {
                [name] => json!({ "name": seg("snapshot", name)? }),
                _ => json!({}),
            }),
        ),
        ["snapshot", "restore", zone, name] => call(
            "POST",
            format!(
                "/1.0/zones/{}/snapshots/{}/restore",
                z(zone)?,
                seg("snapshot", name)?
            ),
            None,
        ),
        ["snapshot", "delete", zone, name] => call(
            "DELETE",
            format!(
                "/1.0/zones/{}/snapshots/{}",
                z(zone)?,
                seg("snapshot", name)?
            ),
            None,
        ),
        ["stat", zones @ ..] => {
            let zones = zones.iter().map(|s| z(s)).collect::<Result<Vec<_>, _>>()?;
            let q = if zones.is_empty() {
                String::new()
            } else {
                format!("?zones={}", zones.join(","))
            };
            call("GET", format!("/1.0/stat{q}"), None)
        }
        ["config", "show", zone] => call("GET", format!("/1.0/zones/{}/config", z(zone)?), None),
        ["config", "get", zone, key] => call(
            "GET",
            format!("/1.0/zones/{}/config/{}", z(zone)?, seg("key", key)?),
            None,
        ),
        ["config", "set", zone, sets @ ..] if !sets.is_empty() => call(
            "PATCH",
            format!("/1.0/zones/{}/config", z(zone)?),
            Some(json!({ "set": sets })),
        ),
        ["config", "unset", zone, keys @ ..] if !keys.is_empty() => call(
            "PATCH",
            format!("/1.0/zones/{}/config", z(zone)?),
            Some(json!({ "unset": keys })),
        ),
        [v @ ("exec" | "login"), zone, rest @ ..] => {
            let cmd = match rest {
                ["--", cmd @ ..] => cmd,
                cmd => cmd,
            };
            if cmd.is_empty() {
                return Err(format!(
                    "--remote {v} needs a command (a remote login shell is the dashboard's terminal): warren --remote NAME exec {zone} -- COMMAND..."
                ));
            }
            Call {
                exec: true,
                ..call(
                    "POST",
                    format!("/1.0/zones/{}/exec", z(zone)?),
                    Some(json!({ "command": cmd })),
                )
            }
        }
        _ => {
            return Err(format!(
                "--remote runs: {VERBS} (got {:?}); use the REST API for the rest (docs/daemon.md)",
                w.join(" ")
            ))
        }
    })
}

/// Print an answer's object as the verb's output; the exit code (exec: the
/// command's).
pub fn print(words: &[String], c: &Call, v: &Value, json_out: bool) -> i32 {
    if c.exec {
        let code = v["exit_code"].as_i64().unwrap_or(1) as i32;
        if json_out {
            println!("{v}");
        } else {
            use std::io::Write;
            let _ = std::io::stdout().write_all(v["stdout"].as_str().unwrap_or("").as_bytes());
            let _ = std::io::stderr().write_all(v["stderr"].as_str().unwrap_or("").as_bytes());
        }
        return code;
    }
    if json_out {
        println!("{v}");
    } else if words == ["list"] {
        println!("{:<24} {:<12} {:<6}", "NAME", "STATE", "KIND");
        for z in v.as_array().into_iter().flatten() {
            let f = |k: &str| z[k].as_str().unwrap_or("-").to_string();
            println!(
                "{:<24} {:<12} {:<6}",
                f("name"),
                f("state"),
                z["kind"].as_str().unwrap_or("zone")
            );
        }
    } else {
        println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(words: &[&str]) -> Result<Call, String> {
        route(&words.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn verbs_map_to_their_calls() {
        let c = r(&["snapshot", "create", "web1", "s1"]).unwrap();
        assert_eq!(
            (c.method, c.path.as_str(), c.body.as_deref()),
            (
                "POST",
                "/1.0/zones/web1/snapshots",
                Some(r#"{"name":"s1"}"#)
            )
        );
        let c = r(&["exec", "web1", "--", "ls", "--json"]).unwrap();
        assert!(c.exec);
        assert_eq!(c.body.as_deref(), Some(r#"{"command":["ls","--json"]}"#));
        assert_eq!(r(&["stat", "a", "b"]).unwrap().path, "/1.0/stat?zones=a,b");
        assert_eq!(
            r(&["config", "unset", "a", "memory.max"]).unwrap().method,
            "PATCH"
        );
        assert!(r(&["boot", "../x"]).is_err(), "no path tricks");
        assert!(r(&["config", "get", "a", "x/y"]).is_err());
        assert!(r(&["exec", "web1"]).is_err());
        assert!(r(&["clone", "a", "b"])
            .unwrap_err()
            .contains("--remote runs"));
    }
}
