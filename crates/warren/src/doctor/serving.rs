//! What breaks first when many bridged zones serve traffic from the host (the KVM
//! consolidation study's web load, `bench scale --workload http`): pure verdicts over
//! the snapshot, beside the neighbour-table and conntrack checks of [`super::assess`].
//!
//! - **bridge ports**: a Linux bridge takes at most 1,023 ports (BR_MAX_PORTS less port
//!   0); more zones must be spread over several bridges, each with its own subnet.
//!   Advice only: a zone's bridge is its config (`net-bridge`, `net-subnet`), and
//!   `bench scale` spreads its zones itself (`--zones-per-bridge`).
//!
//! With a load (`--rate-per-zone R`: new connections per second each zone gets from the
//! host; [`Plan::rate_per_zone`]):
//!
//! - **net.core.somaxconn**: a zone's listeners live in its own network namespace,
//!   which starts with the kernel's default (4096), not the host's; the host's value
//!   caps the host-side listeners that front all zones (a proxy, warren's
//!   wake-on-connection listeners). Need: one second of the zones' arrivals queued
//!   there while it stalls, N × R × [`BACKLOG_SECONDS`].
//! - **net.ipv4.ip_local_port_range**, counted as the ports in the range: every
//!   connection the host closes first holds its port in TIME_WAIT for 60 s. The
//!   kernel may reuse a port towards another destination, but `connect()` then walks
//!   the range past the ports in use, on every new connection. Need: N × R × 60. The
//!   range cannot exceed 1024–65535 (64,512 ports); beyond that the fix is the widest
//!   range and the note says that ports are then shared between zones.
//! - **net.ipv4.tcp_max_tw_buckets**: past it the kernel drops TIME_WAIT sockets early
//!   ("time wait bucket table overflow"), which is churn, not failure: *tight* at most.
//!   Need: N × R × 60.
//!
//! The port range is two numbers in /proc/sys; [`sysctl_text`] and [`parse_sysctl`]
//! convert it to and from "ports in the range", so `--fix` and the bench's `--tune`
//! write it like any other sysctl.

use super::snapshot::{LimitSnapshot, Reading};
use super::{Current, Finding, Fix, NetPlan, Plan, Unit, Verdict};
use crate::net::BRIDGE_MAX_PORTS;

/// Seconds of arrivals a host-side listener must be able to queue.
pub const BACKLOG_SECONDS: u64 = 1;
/// TCP_TIMEWAIT_LEN: how long a closed connection holds its port, s.
pub const TIME_WAIT_SECONDS: u64 = 60;
/// The widest ephemeral range: 1024–65535.
pub const PORT_RANGE_MAX: u64 = 65535 - 1024 + 1;
/// The port range key, read and written as the number of ports in it.
pub const PORT_RANGE: &str = "net.ipv4.ip_local_port_range";

/// The text to write to /proc/sys for `value` of `key` (the port range: the widest
/// range of `value` ports ending at 65535, never starting below 1024).
pub fn sysctl_text(key: &str, value: u64) -> String {
    if key == PORT_RANGE {
        let ports = value.clamp(1, PORT_RANGE_MAX);
        format!("{}\t65535", 65536 - ports)
    } else {
        value.to_string()
    }
}

/// The value of `key` from its /proc/sys text (the port range: the ports in it).
pub fn parse_sysctl(key: &str, text: &str) -> Option<u64> {
    let mut parts = text.split_whitespace();
    let first: u64 = parts.next()?.parse().ok()?;
    if key == PORT_RANGE {
        let hi: u64 = parts.next()?.parse().ok()?;
        return hi.checked_sub(first).map(|d| d + 1);
    }
    Some(first)
}

fn current(r: &Reading) -> Current {
    match r {
        Ok(v) => Current::Value(*v),
        Err(e) => Current::Unknown(e.clone()),
    }
}

fn finding(
    key: &str,
    r: &Reading,
    need: u64,
    cap: u64,
    max_verdict: Verdict,
    note: String,
) -> Finding {
    let cur = current(r);
    let mut verdict = super::assess::verdict(&cur, need);
    if verdict == Verdict::WillFail && max_verdict == Verdict::Tight {
        verdict = Verdict::Tight;
    }
    let fix = match (verdict, &cur) {
        (Verdict::Tight | Verdict::WillFail, Current::Value(now)) => {
            let value = super::assess::suggest(need, cap);
            (value > *now).then(|| Fix::Sysctl {
                key: key.to_string(),
                value,
            })
        }
        _ => None,
    };
    Finding {
        limit: key.to_string(),
        current: cur,
        needed: need,
        unit: Unit::Count,
        verdict,
        fix,
        note,
    }
}

/// The serving checks for `plan` (none unless the zones are bridged).
pub fn findings(s: &LimitSnapshot, plan: &Plan) -> Vec<Finding> {
    if plan.net != NetPlan::Bridge {
        return Vec::new();
    }
    let n = plan.zones;
    let ports = BRIDGE_MAX_PORTS as u64;
    let bridge_verdict = super::assess::verdict(&Current::Value(ports), n);
    let mut out = vec![Finding {
        limit: "bridge ports".into(),
        current: Current::Value(ports),
        needed: n,
        unit: Unit::Count,
        verdict: bridge_verdict,
        fix: (bridge_verdict >= Verdict::Tight && bridge_verdict <= Verdict::WillFail).then(|| Fix::Advice {
            text: format!(
                "put at most 1,000 zones on a bridge ({} for {n} zones): give the next ones another bridge and subnet (--set net-bridge=warren1 --set net-subnet=10.232.0.0/16); bench scale spreads its zones itself (--zones-per-bridge)",
                match n.div_ceil(1000) {
                    1 => "one bridge holds them, with little room".to_string(),
                    k => format!("{k} bridges"),
                }
            ),
        }),
        note: format!("one bridge port per zone; the kernel's BR_MAX_PORTS is 1024, port 0 reserved: {n} zones on one bridge"),
    }];
    let r = plan.rate_per_zone;
    if r == 0 {
        return out;
    }
    let rate = n.saturating_mul(r);
    if let Some(v) = s.sysctl("net.core.somaxconn") {
        out.push(finding(
            "net.core.somaxconn",
            v,
            rate.saturating_mul(BACKLOG_SECONDS),
            i32::MAX as u64,
            Verdict::WillFail,
            format!("{n} zones × {r} connections/s × {BACKLOG_SECONDS} s queued at a host-side listener fronting them (zones' own listeners get their namespace's default, 4096)"),
        ));
    }
    let tw = rate.saturating_mul(TIME_WAIT_SECONDS);
    if let Some(v) = s.sysctl(PORT_RANGE) {
        let mut f = finding(
            PORT_RANGE,
            v,
            tw,
            PORT_RANGE_MAX,
            Verdict::WillFail,
            format!("ports in the range, against {n} zones × {r} connections/s × {TIME_WAIT_SECONDS} s in TIME_WAIT when the host closes first"),
        );
        if tw > PORT_RANGE_MAX {
            f.note.push_str(
                "; more than the widest range (1024-65535) holds: connect() shares ports between zones and searches longer",
            );
        }
        out.push(f);
    }
    if let Some(v) = s.sysctl("net.ipv4.tcp_max_tw_buckets") {
        out.push(finding(
            "net.ipv4.tcp_max_tw_buckets",
            v,
            tw,
            i32::MAX as u64,
            Verdict::Tight,
            format!("{n} zones × {r} connections/s × {TIME_WAIT_SECONDS} s; past it TIME_WAIT sockets are dropped early (churn, not failure)"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::assess::tests::dev_vm;

    fn plan(n: u64, rate: u64) -> Plan {
        Plan::new(n, 1, None, 0, NetPlan::Bridge)
            .unwrap()
            .with_rate(rate)
    }

    fn get<'a>(f: &'a [Finding], k: &str) -> &'a Finding {
        f.iter()
            .find(|x| x.limit == k)
            .unwrap_or_else(|| panic!("no {k}"))
    }

    fn snap() -> LimitSnapshot {
        let mut s = dev_vm();
        s.sysctls.insert("net.core.somaxconn".into(), Ok(4096));
        s.sysctls.insert(PORT_RANGE.into(), Ok(60999 - 32768 + 1));
        s.sysctls
            .insert("net.ipv4.tcp_max_tw_buckets".into(), Ok(131_072));
        s
    }

    #[test]
    fn the_port_range_reads_and_writes_as_a_count() {
        assert_eq!(parse_sysctl(PORT_RANGE, "32768\t60999\n"), Some(28232));
        assert_eq!(sysctl_text(PORT_RANGE, 28232), "37304\t65535");
        assert_eq!(sysctl_text(PORT_RANGE, 1 << 20), "1024\t65535");
        assert_eq!(
            parse_sysctl(PORT_RANGE, &sysctl_text(PORT_RANGE, 65536)),
            Some(PORT_RANGE_MAX)
        );
        assert_eq!(parse_sysctl("net.core.somaxconn", "4096\n"), Some(4096));
        assert_eq!(sysctl_text("net.core.somaxconn", 8192), "8192");
        assert_eq!(parse_sysctl(PORT_RANGE, "60999 32768"), None);
    }

    /// The dev VM's defaults at the study's steps, 5 requests/s per zone.
    #[test]
    fn verdicts_as_zones_grow() {
        let f = findings(&snap(), &plan(64, 5));
        assert_eq!(get(&f, "bridge ports").verdict, Verdict::Ok);
        assert_eq!(get(&f, "net.core.somaxconn").verdict, Verdict::Ok);
        assert_eq!(get(&f, PORT_RANGE).verdict, Verdict::Ok);
        assert_eq!(get(&f, PORT_RANGE).fix, None);
        // 80 × 5 × 60 = 24,000 of 28,232 ports: tight.
        let f = findings(&snap(), &plan(80, 5));
        let p = get(&f, PORT_RANGE);
        assert_eq!((p.needed, p.verdict), (24_000, Verdict::Tight));
        assert_eq!(
            p.fix,
            Some(Fix::Sysctl {
                key: PORT_RANGE.into(),
                value: 32768
            })
        );

        let f = findings(&snap(), &plan(256, 5));
        let p = get(&f, PORT_RANGE);
        assert_eq!((p.needed, p.verdict), (76_800, Verdict::WillFail));
        assert_eq!(
            p.fix,
            Some(Fix::Sysctl {
                key: PORT_RANGE.into(),
                value: PORT_RANGE_MAX
            })
        );
        assert!(p.note.contains("shares ports"), "{}", p.note);
        assert_eq!(
            p.fix.as_ref().unwrap().to_string(),
            "sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\""
        );
        assert_eq!(get(&f, "net.ipv4.tcp_max_tw_buckets").verdict, Verdict::Ok);

        let f = findings(&snap(), &plan(1000, 5));
        let s = get(&f, "net.core.somaxconn");
        assert_eq!((s.needed, s.verdict), (5000, Verdict::WillFail));
        assert_eq!(
            s.fix,
            Some(Fix::Sysctl {
                key: "net.core.somaxconn".into(),
                value: 8192
            })
        );
        // 300,000 TIME_WAIT against 131,072: tight (churn), raised by the fix.
        let t = get(&f, "net.ipv4.tcp_max_tw_buckets");
        assert_eq!(t.verdict, Verdict::Tight);
        assert_eq!(
            t.fix,
            Some(Fix::Sysctl {
                key: t.limit.clone(),
                value: 524_288
            })
        );
        assert_eq!(get(&f, "bridge ports").verdict, Verdict::Tight);

        let f = findings(&snap(), &plan(2000, 5));
        let b = get(&f, "bridge ports");
        assert_eq!(b.verdict, Verdict::WillFail);
        assert!(
            b.fix.as_ref().unwrap().to_string().contains("2 bridges"),
            "{b:?}"
        );
    }

    #[test]
    fn no_rate_no_load_checks_and_no_bridge_no_checks() {
        let f = findings(&snap(), &plan(2000, 0));
        assert_eq!(f.len(), 1, "{f:?}");
        let none = Plan::new(2000, 1, None, 0, NetPlan::None)
            .unwrap()
            .with_rate(5);
        assert!(findings(&snap(), &none).is_empty());
    }
}
