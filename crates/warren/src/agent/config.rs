//! The agent's config file (TOML) and its documented defaults.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::decide::{Threshold, Thresholds};
use crate::error::{Error, Result};

/// The defaults, as `warren agent --help` and docs/overcommit.md print them.
pub const DEFAULTS_TOML: &str = r#"interval-ms = 500        # how often to sample (at most 1000)
window-s = 5.0           # swap-in/out rates are averaged over this window
cooldown-s = 10.0        # after an action, wait this long to see its effect
halt-timeout-s = 5       # SIGTERM, then kill after this (or the zone's stop-timeout if shorter)
watch = "host"           # "host", "group" (warren's zone cgroup) or a cgroup directory
zone-refresh-s = 5.0     # with restart-evicted: look for evicted zones this often
evict-critical = false   # critical zones are never evicted unless this is true
suspend-first = true     # suspend a zone (never a critical one) before halting any
idle-scan-s = 30.0       # how often zones with suspend-after are checked for idleness
wake-on-connect = true   # resume a suspended zone when a client waits on its sockets...
wake-scan-s = 1.0        # ...the list of suspended zones is re-read this often
wake-hold = true         # watch them in one wait, holding their sockets (else: swept every tick)
restart-evicted = false  # boot evicted zones again once pressure is gone...
restart-after-s = 60.0   # ...for this long

[available]              # memory available, % of MemTotal (or of the watched limit)
trigger = 5.0            # below this...
clear = 10.0             # ...until back above this
grace-s = 5.0            # ...for this long
[swap-used]              # swap in use, % of swap
trigger = 90.0
clear = 80.0
grace-s = 10.0
[swap-in]                # pages swapped in per second (over window-s)
trigger = 5000.0
clear = 2000.0
grace-s = 10.0
[swap-out]               # pages swapped out per second (over window-s)
trigger = 10000.0
clear = 4000.0
grace-s = 10.0
[psi-full]               # memory PSI "full" avg10, %
trigger = 20.0
clear = 10.0
grace-s = 5.0
"#;

/// One threshold as written in the file.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ThresholdConfig {
    pub trigger: f64,
    pub clear: f64,
    pub grace_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct AgentConfig {
    pub interval_ms: u64,
    pub window_s: f64,
    pub cooldown_s: f64,
    pub halt_timeout_s: u64,
    pub watch: String,
    pub zone_refresh_s: f64,
    pub evict_critical: bool,
    pub suspend_first: bool,
    pub idle_scan_s: f64,
    pub wake_on_connect: bool,
    pub wake_scan_s: f64,
    pub wake_hold: bool,
    pub restart_evicted: bool,
    pub restart_after_s: f64,
    pub available: ThresholdConfig,
    pub swap_used: ThresholdConfig,
    pub swap_in: ThresholdConfig,
    pub swap_out: ThresholdConfig,
    pub psi_full: ThresholdConfig,
}

fn ms(s: f64) -> u64 {
    (s * 1000.0).round() as u64
}

impl AgentConfig {
    pub fn defaults() -> AgentConfig {
        parse(DEFAULTS_TOML).expect("the defaults parse")
    }

    pub fn thresholds(&self) -> Thresholds {
        let t = |c: &ThresholdConfig| Threshold {
            trigger: c.trigger,
            clear: c.clear,
            grace_ms: ms(c.grace_s),
        };
        Thresholds([
            t(&self.available),
            t(&self.swap_used),
            t(&self.swap_in),
            t(&self.swap_out),
            t(&self.psi_full),
        ])
    }

    pub fn cooldown_ms(&self) -> u64 {
        ms(self.cooldown_s)
    }
    pub fn window_ms(&self) -> u64 {
        ms(self.window_s)
    }
    pub fn restart_after_ms(&self) -> u64 {
        ms(self.restart_after_s)
    }
    pub fn halt_timeout(&self) -> Duration {
        Duration::from_secs(self.halt_timeout_s)
    }
}

fn invalid(m: String) -> Error {
    Error::Invalid(format!(
        "agent config: {m}; fix the file, or leave the key out for its default (docs/overcommit.md)"
    ))
}

fn check(c: &AgentConfig) -> Result<()> {
    if !(10..=1000).contains(&c.interval_ms) {
        return Err(invalid(format!(
            "interval-ms {}: expected 10 to 1000 (the agent samples at least every second)",
            c.interval_ms
        )));
    }
    for (name, v) in [
        ("window-s", c.window_s),
        ("cooldown-s", c.cooldown_s),
        ("zone-refresh-s", c.zone_refresh_s),
        ("idle-scan-s", c.idle_scan_s),
        ("wake-scan-s", c.wake_scan_s),
        ("restart-after-s", c.restart_after_s),
    ] {
        if !(0.0..=86_400.0).contains(&v) {
            return Err(invalid(format!("{name} {v}: expected 0 to 86400 seconds")));
        }
    }
    let all = [
        ("available", c.available, true),
        ("swap-used", c.swap_used, false),
        ("swap-in", c.swap_in, false),
        ("swap-out", c.swap_out, false),
        ("psi-full", c.psi_full, false),
    ];
    for (name, t, low_is_bad) in all {
        if !(0.0..=86_400.0).contains(&t.grace_s) || t.trigger < 0.0 || t.clear < 0.0 {
            return Err(invalid(format!(
                "[{name}]: trigger, clear and grace-s must be non-negative (grace-s at most 86400)"
            )));
        }
        if low_is_bad && t.clear < t.trigger {
            return Err(invalid(format!(
                "[{name}] clear {} is below trigger {}; available memory is bad when low, so clear must be at or above trigger",
                t.clear, t.trigger
            )));
        }
        if !low_is_bad && t.clear > t.trigger {
            return Err(invalid(format!(
                "[{name}] clear {} is above trigger {}; {name} is bad when high, so clear must be at or below trigger",
                t.clear, t.trigger
            )));
        }
    }
    if c.watch.is_empty() {
        return Err(invalid(
            "watch is empty: use \"host\", \"group\" or a cgroup directory".into(),
        ));
    }
    Ok(())
}

/// Read an agent config file, bounded; the defaults fill what it leaves out. `flag` is
/// the option that named it, for the message.
pub fn load_file(p: &std::path::Path, flag: &str) -> Result<AgentConfig> {
    let text = crate::fsutil::read_text_bounded(p, crate::fsutil::MAX_SMALL_FILE).map_err(|e| {
        Error::Invalid(format!(
            "{flag} {}: {e}; give the agent's TOML config (docs/overcommit.md)",
            p.display()
        ))
    })?;
    parse(&text)
}

/// Parse a config file: its keys override the defaults.
pub fn parse(text: &str) -> Result<AgentConfig> {
    let mut table: toml::Table = DEFAULTS_TOML.parse().expect("the defaults are TOML");
    let user: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| invalid(format!("not valid TOML: {}", e.message().trim())))?;
    for (k, v) in user {
        match (table.get_mut(&k), v) {
            (Some(toml::Value::Table(base)), toml::Value::Table(over)) => {
                for (k2, v2) in over {
                    base.insert(k2, v2);
                }
            }
            (_, v) => {
                table.insert(k, v);
            }
        }
    }
    let cfg: AgentConfig = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| invalid(e.message().trim().to_string()))?;
    check(&cfg)?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let d = AgentConfig::defaults();
        assert_eq!(d.interval_ms, 500);
        assert_eq!(d.thresholds().0[0].grace_ms, 5000);
        let c = parse("watch = \"group\"\n[available]\ntrigger = 20.0\nclear = 30.0\n").unwrap();
        assert_eq!(c.watch, "group");
        assert_eq!(c.available.trigger, 20.0);
        assert_eq!(c.available.grace_s, 5.0, "unset fields keep their defaults");
        assert_eq!(c.swap_used, d.swap_used);
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        let e = parse("[available]\ntrigger = 20.0\nclear = 10.0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("clear 10 is below trigger 20"), "{e}");
        let e = parse("[swap-in]\ntrigger = 10.0\nclear = 20.0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("clear must be at or below trigger"), "{e}");
        let e = parse("interval-ms = 5000\n").unwrap_err().to_string();
        assert!(e.contains("at least every second"), "{e}");
        let e = parse("intervall-ms = 5\n").unwrap_err().to_string();
        assert!(e.contains("intervall-ms"), "{e}");
    }
}
