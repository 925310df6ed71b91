//! Per-zone resource limits (`rlimit.<name>` config keys): the names warren knows, and
//! how a value is written. Applied in the zone's child before exec (so init and every
//! process it starts inherit them) and by `warren login` before the command starts.
//! A zone cannot raise a hard limit above warren's own: that needs CAP_SYS_RESOURCE in
//! the host's user namespace, which no zone has (`config::check_privileges` refuses it).

use warren_sys::libc;

/// `RLIM_INFINITY`.
pub const INFINITY: u64 = libc::RLIM_INFINITY;

/// (config name, resource) for every limit a zone may set.
pub const TABLE: [(&str, libc::c_int); 15] = [
    ("as", libc::RLIMIT_AS as libc::c_int),
    ("core", libc::RLIMIT_CORE as libc::c_int),
    ("cpu", libc::RLIMIT_CPU as libc::c_int),
    ("data", libc::RLIMIT_DATA as libc::c_int),
    ("fsize", libc::RLIMIT_FSIZE as libc::c_int),
    ("locks", libc::RLIMIT_LOCKS as libc::c_int),
    ("memlock", libc::RLIMIT_MEMLOCK as libc::c_int),
    ("msgqueue", libc::RLIMIT_MSGQUEUE as libc::c_int),
    ("nice", libc::RLIMIT_NICE as libc::c_int),
    ("nofile", libc::RLIMIT_NOFILE as libc::c_int),
    ("nproc", libc::RLIMIT_NPROC as libc::c_int),
    ("rtprio", libc::RLIMIT_RTPRIO as libc::c_int),
    ("rttime", libc::RLIMIT_RTTIME as libc::c_int),
    ("sigpending", libc::RLIMIT_SIGPENDING as libc::c_int),
    ("stack", libc::RLIMIT_STACK as libc::c_int),
];

/// The resource number of `name` (`nofile`).
pub fn resource(name: &str) -> Option<libc::c_int> {
    TABLE.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}

/// One limit: (soft, hard); [`INFINITY`] is "unlimited".
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Limit {
    pub soft: u64,
    pub hard: u64,
}

fn one(s: &str) -> Option<u64> {
    let s = s.trim();
    if s == "unlimited" || s == "infinity" {
        return Some(INFINITY);
    }
    s.parse::<u64>().ok().filter(|n| *n < INFINITY)
}

/// Parse `"1024"`, `"1024:4096"` (soft:hard) or `"unlimited"`; `None` if malformed or
/// soft above hard.
pub fn parse(s: &str) -> Option<Limit> {
    let (soft, hard) = match s.split_once(':') {
        Some((a, b)) => (one(a)?, one(b)?),
        None => {
            let v = one(s)?;
            (v, v)
        }
    };
    (soft <= hard).then_some(Limit { soft, hard })
}

/// The config form of a limit.
pub fn format(l: Limit) -> String {
    let f = |v: u64| {
        if v == INFINITY {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    if l.soft == l.hard {
        f(l.soft)
    } else {
        format!("{}:{}", f(l.soft), f(l.hard))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_and_print_back() {
        assert_eq!(
            parse("1024"),
            Some(Limit {
                soft: 1024,
                hard: 1024
            })
        );
        assert_eq!(parse("10:20"), Some(Limit { soft: 10, hard: 20 }));
        assert_eq!(
            parse("0:unlimited"),
            Some(Limit {
                soft: 0,
                hard: INFINITY
            })
        );
        assert_eq!(parse("20:10"), None);
        assert_eq!(parse("x"), None);
        assert_eq!(parse("-1"), None);
        for s in ["1024", "10:20", "unlimited", "0:unlimited"] {
            assert_eq!(format(parse(s).unwrap()), s);
        }
        assert_eq!(resource("nofile"), Some(libc::RLIMIT_NOFILE as i32));
        assert_eq!(resource("bogus"), None);
    }
}
