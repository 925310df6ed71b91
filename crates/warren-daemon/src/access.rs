//! Who may do what, decided per connection from the peer's credentials (SO_PEERCRED):
//! uid 0 reads and writes; a member of group `warren` (primary or supplementary) only
//! reads (GET), and not a zone's files ([`zone_files`]); anyone else is refused with 403 and a structured error. The decision
//! ([`decide`]) is pure; [`layer`] applies it to every request as an axum middleware,
//! so another listener (TCP with client certificates) only has to attach its own
//! [`Access`] to the connection.

use axum::extract::Request;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// What a connection may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    ReadWrite,
    ReadOnly,
    Refused,
}

/// A connection's peer and what it may do (a request extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub uid: u32,
    pub level: Level,
}

/// The level of a peer: `uid`, its groups (primary first), the gid of group `warren`
/// if the host has one. Pure.
pub fn decide(uid: u32, groups: &[u32], warren_gid: Option<u32>) -> Level {
    if uid == 0 {
        Level::ReadWrite
    } else if warren_gid.is_some_and(|g| groups.contains(&g)) {
        Level::ReadOnly
    } else {
        Level::Refused
    }
}

/// The gid of group `name` in an /etc/group text. Pure.
pub fn gid_in(group_file: &str, name: &str) -> Option<u32> {
    group_file.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

/// The host's group `warren`, if any.
pub fn warren_gid() -> Option<u32> {
    gid_in(&std::fs::read_to_string("/etc/group").ok()?, "warren")
}

/// The supplementary groups of process `pid` (its /proc status `Groups:` line).
fn groups_of(pid: Option<i32>) -> Vec<u32> {
    let Some(pid) = pid else { return Vec::new() };
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Groups:").map(|g| {
                    g.split_whitespace()
                        .filter_map(|n| n.parse().ok())
                        .collect()
                })
            })
        })
        .unwrap_or_default()
}

/// The access of a unix-socket peer.
pub fn of_peer(cred: &tokio::net::unix::UCred) -> Access {
    let mut groups = vec![cred.gid()];
    if cred.uid() != 0 {
        groups.extend(groups_of(cred.pid()));
    }
    Access {
        uid: cred.uid(),
        level: decide(cred.uid(), &groups, warren_gid()),
    }
}

/// The middleware: refuse what the connection's [`Access`] does not allow.
pub async fn layer(req: Request, next: Next) -> Response {
    let access = req.extensions().get::<Access>().copied();
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    let files = zone_files(req.uri().path());
    match access.map(|a| (a.uid, a.level)) {
        Some((_, Level::ReadWrite)) => next.run(req).await,
        Some((uid, Level::ReadOnly)) if files => ApiError::new(
            403,
            "forbidden",
            format!("uid {uid} is in group 'warren', which may read warren's state but not a zone's files (the tenant's data; reading them wakes a suspended zone or mounts a halted one); run the client as root"),
        )
        .into_response(),
        Some((_, Level::ReadOnly)) if read => next.run(req).await,
        Some((uid, Level::ReadOnly)) => ApiError::new(
            403,
            "forbidden",
            format!("uid {uid} is in group 'warren', which may only read (GET); changing verbs need root; run the client as root"),
        )
        .into_response(),
        Some((uid, Level::Refused)) => ApiError::new(
            403,
            "forbidden",
            format!("uid {uid} may not use warren's API; connect as root, or add the user to group 'warren' for read-only access"),
        )
        .into_response(),
        None => ApiError::new(403, "forbidden", "the connection has no known peer; refused").into_response(),
    }
}

/// Whether `path` is a zone's files (`/1.0/zones/{zone}/files`): read-write access only,
/// GET included — they are the tenant's data, and copying them out costs the host
/// disk and may resume a suspended zone or mount a halted one.
pub fn zone_files(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    matches!(parts[..], ["", "1.0", "zones", zone, "files"] if !zone.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zones_files_are_read_write_only_and_nothing_else_is() {
        assert!(zone_files("/1.0/zones/web/files"));
        assert!(zone_files("/1.0/zones/web/files/"));
        // A zone named "files", and other routes, are not.
        assert!(!zone_files("/1.0/zones/files"));
        assert!(!zone_files("/1.0/zones/web"));
        assert!(!zone_files("/1.0/zones/web/files/x"));
        assert!(!zone_files("/1.0/zones//files"));
        assert!(!zone_files("/1.0/templates/web/files"));
    }

    #[test]
    fn root_writes_group_reads_others_are_refused() {
        assert_eq!(decide(0, &[0], None), Level::ReadWrite);
        assert_eq!(decide(1000, &[1000, 998], Some(998)), Level::ReadOnly);
        assert_eq!(decide(1000, &[1000], Some(998)), Level::Refused);
        assert_eq!(decide(65534, &[65534], None), Level::Refused);
    }

    #[test]
    fn group_file_is_read_by_name() {
        let f = "root:x:0:\nwarrenx:x:5:\nwarren:x:998:alice,bob\n";
        assert_eq!(gid_in(f, "warren"), Some(998));
        assert_eq!(gid_in(f, "nobody"), None);
    }
}
