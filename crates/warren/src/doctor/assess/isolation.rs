//! Host settings that weaken isolation (issue 14): pure verdicts over the snapshot's
//! [`IsolationSnapshot`]. Each finding names the sysctl, its value, the value
//! isolation wants (NEEDED), the verdict *weakens isolation* when it is off, and the
//! command that fixes it. A setting the kernel does not have yields no finding.

use super::super::snapshot::{IsolationSnapshot, Reading};
use super::super::{Current, Finding, Fix, Unit, Verdict};

fn check(
    limit: String,
    reading: &Reading,
    want: u64,
    weak: impl Fn(u64) -> bool,
    fix: String,
    why: String,
) -> Finding {
    let (current, verdict) = match reading {
        Ok(v) if weak(*v) => (Current::Value(*v), Verdict::Weakens),
        Ok(v) => (Current::Value(*v), Verdict::Ok),
        Err(e) => (Current::Unknown(e.clone()), Verdict::Unknown),
    };
    Finding {
        fix: (verdict == Verdict::Weakens).then_some(Fix::Advice { text: fix }),
        limit,
        current,
        needed: want,
        unit: Unit::Count,
        verdict,
        note: why,
    }
}

/// The isolation findings. `max_user_namespaces` is the snapshot's
/// `user.max_user_namespaces` (unprivileged user namespaces need it above 0).
pub fn findings(s: &IsolationSnapshot, max_user_namespaces: Option<&Reading>) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(r) = &s.legacy_tiocsti {
        out.push(check(
            "dev.tty.legacy_tiocsti".into(),
            r,
            0,
            |v| v != 0,
            "sysctl -w dev.tty.legacy_tiocsti=0, and persist it in /etc/sysctl.d".into(),
            "with TIOCSTI a process holding a terminal's descriptor types into it: a zone process that got an admin's terminal could run commands in the admin's shell".into(),
        ));
    }
    if let Some(r) = &s.unprivileged_userns_clone {
        let userns_on = matches!(max_user_namespaces, Some(Ok(n)) if *n > 0);
        out.push(check(
            "kernel.unprivileged_userns_clone".into(),
            r,
            0,
            |v| v != 0 && userns_on,
            "sysctl -w kernel.unprivileged_userns_clone=0, and persist it in /etc/sysctl.d (warren runs as root and does not need it)".into(),
            format!(
                "unprivileged users (and a zone's root) may create user namespaces, the entry to most kernel privilege escalations{}",
                if userns_on { "" } else { "; user.max_user_namespaces = 0 disables them anyway" }
            ),
        ));
    }
    let has_bridges = matches!(&s.bridges, Ok(b) if !b.is_empty());
    if let (true, Some(r)) = (has_bridges, &s.ip_forward) {
        out.push(check(
            "net.ipv4.ip_forward".into(),
            r,
            0,
            |v| v != 0,
            "if the host routes for other reasons, drop what it would route from a warren bridge back into it (e.g. nft add rule inet filter forward iifname <bridge> oifname <bridge> drop); else sysctl -w net.ipv4.ip_forward=0".into(),
            "the host forwards IPv4: a zone can reach another through the gateway by routing, around net-isolated (which filters bridged traffic) and beside the bridge filter".into(),
        ));
    }
    match &s.bridges {
        Err(e) => out.push(Finding {
            limit: "bridge accept_ra".into(),
            current: Current::Unknown(e.clone()),
            needed: 0,
            unit: Unit::Count,
            verdict: Verdict::Unknown,
            fix: None,
            note: "warren's bridges are listed in the state root's net/ records".into(),
        }),
        Ok(bridges) => {
            for b in bridges {
                let Some(accept_ra) = &b.accept_ra else {
                    continue;
                };
                // accept_ra = 1 is ignored while the interface forwards; 2 accepts anyway.
                let forwarding = matches!(&b.forwarding, Some(Ok(f)) if *f != 0);
                let autoconf = match &b.autoconf {
                    Some(Ok(a)) => a.to_string(),
                    _ => "unknown".into(),
                };
                out.push(check(
                    format!("net.ipv6.conf.{}.accept_ra", b.name),
                    accept_ra,
                    0,
                    |v| v >= 2 || (v == 1 && !forwarding),
                    format!(
                        "sysctl -w net.ipv6.conf.{0}.accept_ra=0 net.ipv6.conf.{0}.autoconf=0 (warren sets both on bridges it creates)",
                        b.name
                    ),
                    format!(
                        "zones on bridge {} could configure the host's IPv6 addresses and routes with router advertisements (autoconf = {autoconf}, forwarding = {})",
                        b.name,
                        u8::from(forwarding)
                    ),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::super::snapshot::BridgeV6;
    use super::*;

    fn verdicts(f: &[Finding]) -> Vec<(String, Verdict)> {
        f.iter().map(|f| (f.limit.clone(), f.verdict)).collect()
    }

    #[test]
    fn this_vm_has_tiocsti_on_and_no_debian_userns_knob() {
        // The development VM: kernel 6.18, legacy_tiocsti = 1, no
        // unprivileged_userns_clone, no warren bridge recorded.
        let s = IsolationSnapshot {
            legacy_tiocsti: Some(Ok(1)),
            unprivileged_userns_clone: None,
            bridges: Ok(Vec::new()),
            ip_forward: Some(Ok(0)),
        };
        let f = findings(&s, Some(&Ok(96362)));
        assert_eq!(
            verdicts(&f),
            [("dev.tty.legacy_tiocsti".to_string(), Verdict::Weakens)]
        );
        let fix = f[0].fix.as_ref().unwrap().to_string();
        assert!(fix.contains("dev.tty.legacy_tiocsti=0"), "{fix}");
    }

    #[test]
    fn userns_clone_weakens_only_while_user_namespaces_are_allowed() {
        let s = IsolationSnapshot {
            legacy_tiocsti: Some(Ok(0)),
            unprivileged_userns_clone: Some(Ok(1)),
            bridges: Ok(Vec::new()),
            ip_forward: Some(Ok(1)),
        };
        let v = verdicts(&findings(&s, Some(&Ok(100))));
        assert_eq!(v[0].1, Verdict::Ok);
        assert_eq!(
            v[1],
            ("kernel.unprivileged_userns_clone".into(), Verdict::Weakens)
        );
        let v = verdicts(&findings(&s, Some(&Ok(0))));
        assert_eq!(v[1].1, Verdict::Ok);
        let off = IsolationSnapshot {
            unprivileged_userns_clone: Some(Ok(0)),
            ..s
        };
        assert_eq!(verdicts(&findings(&off, Some(&Ok(100))))[1].1, Verdict::Ok);
    }

    #[test]
    fn bridge_accept_ra_follows_the_kernels_forwarding_rule() {
        let b = |name: &str, ra: u64, fwd: u64| BridgeV6 {
            name: name.into(),
            accept_ra: Some(Ok(ra)),
            autoconf: Some(Ok(1)),
            forwarding: Some(Ok(fwd)),
        };
        let s = IsolationSnapshot {
            legacy_tiocsti: None,
            unprivileged_userns_clone: None,
            bridges: Ok(vec![
                b("w0", 1, 0),
                b("w1", 1, 1),
                b("w2", 2, 1),
                b("w3", 0, 0),
                BridgeV6 {
                    name: "gone".into(),
                    accept_ra: None,
                    autoconf: None,
                    forwarding: None,
                },
            ]),
            ip_forward: None,
        };
        let f = findings(&s, None);
        assert_eq!(
            verdicts(&f),
            [
                ("net.ipv6.conf.w0.accept_ra".to_string(), Verdict::Weakens),
                ("net.ipv6.conf.w1.accept_ra".to_string(), Verdict::Ok),
                ("net.ipv6.conf.w2.accept_ra".to_string(), Verdict::Weakens),
                ("net.ipv6.conf.w3.accept_ra".to_string(), Verdict::Ok),
            ]
        );
        assert!(f[0].note.contains("bridge w0"), "{}", f[0].note);
        // With bridges, a forwarding host is flagged; without, it is not mentioned.
        let routed = IsolationSnapshot {
            ip_forward: Some(Ok(1)),
            ..s.clone()
        };
        let f = findings(&routed, None);
        assert_eq!(f[0].limit, "net.ipv4.ip_forward");
        assert_eq!(f[0].verdict, Verdict::Weakens);
        let not_routed = IsolationSnapshot {
            ip_forward: Some(Ok(0)),
            ..s.clone()
        };
        assert_eq!(findings(&not_routed, None)[0].verdict, Verdict::Ok);
        let unreadable = IsolationSnapshot {
            bridges: Err("reading net/: permission denied".into()),
            ..s
        };
        assert_eq!(findings(&unreadable, None)[0].verdict, Verdict::Unknown);
    }
}
