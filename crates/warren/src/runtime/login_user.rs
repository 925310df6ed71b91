//! Who a login runs as, and with which environment: `-u NAME|UID[:GID]` resolved
//! against the zone's own /etc/passwd and /etc/group, and the environment built from
//! the defaults, the zone's `env` key and `-e`.
//!
//! The files are read after the login has joined the zone's mount and user namespaces,
//! so every path (and every symlink the zone planted in it) resolves inside the zone's
//! root, with the zone root's rights; they are opened non-blocking (a FIFO planted as
//! /etc/passwd cannot stall the login), must be regular files, and are read up to
//! [`crate::fsutil::MAX_SMALL_FILE`]. The parsing is pure and unit-tested below.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use warren_sys::libc;

/// The identity a login's command runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (from /etc/group; the primary group first).
    pub groups: Vec<u32>,
    /// The user's name, when /etc/passwd knows it.
    pub name: Option<String>,
    pub home: String,
    pub shell: Option<String>,
}

impl Identity {
    /// The zone's root, as /etc/passwd describes it (or as a bare root if it does not).
    pub fn root(passwd: &str) -> Identity {
        match resolve("0", passwd, "") {
            Ok(id) if id.name.is_some() => id,
            _ => Identity {
                uid: 0,
                gid: 0,
                groups: vec![0],
                name: Some("root".into()),
                home: "/root".into(),
                shell: None,
            },
        }
    }
}

/// One line of /etc/passwd.
struct PasswdEntry<'a> {
    name: &'a str,
    uid: u32,
    gid: u32,
    home: &'a str,
    shell: &'a str,
}

fn passwd_entries(passwd: &str) -> impl Iterator<Item = PasswdEntry<'_>> {
    passwd.lines().filter_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() < 7 {
            return None;
        }
        Some(PasswdEntry {
            name: f[0],
            uid: f[2].parse().ok()?,
            gid: f[3].parse().ok()?,
            home: f[5],
            shell: f[6],
        })
    })
}

/// (name, gid, members) of each line of /etc/group.
fn group_entries(group: &str) -> impl Iterator<Item = (&str, u32, Vec<&str>)> {
    group.lines().filter_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() < 4 {
            return None;
        }
        let members = f[3].split(',').filter(|m| !m.is_empty()).collect();
        Some((f[0], f[2].parse().ok()?, members))
    })
}

/// Resolve `-u` (`NAME`, `UID`, either with `:GID` or `:GROUP`) against the zone's
/// passwd and group files. A numeric uid need not be in passwd (its group is then 0
/// unless given, its home /); a name must be. The error says what was not found.
pub fn resolve(spec: &str, passwd: &str, group: &str) -> Result<Identity, String> {
    let (user, grp) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    if user.is_empty() {
        return Err(format!(
            "-u {spec:?}: the user is empty; give NAME or UID, optionally :GID"
        ));
    }
    let entry = match user.parse::<u32>() {
        Ok(uid) => passwd_entries(passwd).find(|e| e.uid == uid),
        Err(_) => Some(passwd_entries(passwd).find(|e| e.name == user).ok_or_else(|| {
            format!("-u {spec:?}: no user {user:?} in the zone's /etc/passwd; give a name it lists or a numeric UID")
        })?),
    };
    let uid = match &entry {
        Some(e) => e.uid,
        None => user
            .parse()
            .expect("numeric: a name without entry was refused"),
    };
    let gid = match grp {
        None => entry.as_ref().map_or(0, |e| e.gid),
        Some("") => {
            return Err(format!(
                "-u {spec:?}: the group after ':' is empty; give GID or GROUP"
            ))
        }
        Some(g) => match g.parse::<u32>() {
            Ok(n) => n,
            Err(_) => group_entries(group)
                .find(|(name, _, _)| *name == g)
                .map(|(_, gid, _)| gid)
                .ok_or_else(|| {
                    format!("-u {spec:?}: no group {g:?} in the zone's /etc/group; give a name it lists or a numeric GID")
                })?,
        },
    };
    let mut groups = vec![gid];
    if let Some(e) = &entry {
        for (_, g, members) in group_entries(group) {
            if members.contains(&e.name) && !groups.contains(&g) {
                groups.push(g);
            }
        }
    }
    Ok(Identity {
        uid,
        gid,
        groups,
        name: entry.as_ref().map(|e| e.name.to_string()),
        home: entry
            .as_ref()
            .map(|e| e.home)
            .filter(|h| h.starts_with('/'))
            .unwrap_or("/")
            .to_string(),
        shell: entry
            .as_ref()
            .map(|e| e.shell)
            .filter(|s| s.starts_with('/'))
            .map(str::to_string),
    })
}

/// The environment of a login: the defaults for `who`, then the zone's `env`, then
/// the `-e` entries (`KEY` alone takes `caller(KEY)`, and is skipped when unset); a
/// later entry replaces an earlier one of the same name. Returns an error naming a
/// bad `-e` entry.
pub fn environment(
    who: &Identity,
    shell: &str,
    term: Option<String>,
    zone_env: &[String],
    cli_env: &[String],
    caller: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    let name = who.name.clone().unwrap_or_else(|| who.uid.to_string());
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), super::ZONE_PATH.into()),
        ("HOME".into(), who.home.clone()),
        ("USER".into(), name.clone()),
        ("LOGNAME".into(), name),
        ("SHELL".into(), shell.into()),
        ("container".into(), "warren".into()),
    ];
    if let Some(t) = term {
        env.push(("TERM".into(), t));
    }
    let mut set = |k: &str, v: String| {
        env.retain(|(key, _)| key != k);
        env.push((k.to_string(), v));
    };
    for e in zone_env {
        if let Some((k, v)) = e.split_once('=') {
            set(k, v.to_string());
        }
    }
    for e in cli_env {
        match e.split_once('=') {
            Some(_) => {
                if let Some(p) = crate::config::env_problem(e) {
                    return Err(format!("-e {e:?}: {p}"));
                }
                let (k, v) = e.split_once('=').expect("checked");
                set(k, v.to_string());
            }
            None if e.is_empty() || e.contains('\0') => {
                return Err(format!("-e {e:?}: expected KEY=VALUE or KEY"));
            }
            None => {
                if let Some(v) = caller(e) {
                    set(e, v);
                }
            }
        }
    }
    Ok(env)
}

/// Read a small text file of the zone (the caller has joined its mount namespace):
/// non-blocking, regular files only, bounded. `None` when it is absent or unfit.
pub fn read_zone_file(path: &Path) -> Option<String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut buf = Vec::new();
    f.take(crate::fsutil::MAX_SMALL_FILE)
        .read_to_end(&mut buf)
        .ok()?;
    String::from_utf8(buf).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
        daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
        www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\n\
        broken line\n";
    const GROUP: &str = "root:x:0:\nwww-data:x:33:\nadm:x:4:www-data,daemon\nstaff:x:50:\n";

    #[test]
    fn names_resolve_with_their_groups_and_home() {
        let id = resolve("www-data", PASSWD, GROUP).unwrap();
        assert_eq!((id.uid, id.gid), (33, 33));
        assert_eq!(id.groups, vec![33, 4]);
        assert_eq!(id.home, "/var/www");
        assert_eq!(id.name.as_deref(), Some("www-data"));
    }

    #[test]
    fn numeric_ids_need_no_entry() {
        let id = resolve("1234", PASSWD, GROUP).unwrap();
        assert_eq!((id.uid, id.gid, id.home.as_str()), (1234, 0, "/"));
        assert_eq!(id.name, None);
        let id = resolve("1234:77", PASSWD, GROUP).unwrap();
        assert_eq!((id.uid, id.gid), (1234, 77));
        let id = resolve("33", PASSWD, GROUP).unwrap();
        assert_eq!(id.name.as_deref(), Some("www-data"));
    }

    #[test]
    fn groups_by_name_and_unknowns_are_refused_by_name() {
        let id = resolve("daemon:staff", PASSWD, GROUP).unwrap();
        assert_eq!((id.uid, id.gid), (1, 50));
        let e = resolve("nobody-here", PASSWD, GROUP).unwrap_err();
        assert!(e.contains("no user \"nobody-here\""), "{e}");
        let e = resolve("root:wheel", PASSWD, GROUP).unwrap_err();
        assert!(e.contains("no group \"wheel\""), "{e}");
        assert!(resolve(":0", PASSWD, GROUP).is_err());
        assert!(resolve("0:", PASSWD, GROUP).is_err());
    }

    #[test]
    fn environment_layers_zone_env_then_cli_env() {
        let bare = Identity::root("");
        assert_eq!(
            (bare.name.as_deref(), bare.home.as_str()),
            (Some("root"), "/root")
        );
        let root = Identity::root(PASSWD);
        assert_eq!(root.shell.as_deref(), Some("/bin/bash"));
        let env = environment(
            &root,
            "/bin/bash",
            Some("xterm".into()),
            &["LANG=C.UTF-8".into(), "A=zone".into()],
            &["A=cli".into(), "FROM_CALLER".into(), "UNSET".into()],
            |k| (k == "FROM_CALLER").then(|| "yes".to_string()),
        )
        .unwrap();
        let get = |k: &str| {
            env.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("LANG"), Some("C.UTF-8"));
        assert_eq!(get("A"), Some("cli"));
        assert_eq!(get("FROM_CALLER"), Some("yes"));
        assert_eq!(get("UNSET"), None);
        assert_eq!(get("HOME"), Some("/root"));
        assert_eq!(get("TERM"), Some("xterm"));
        assert_eq!(env.iter().filter(|(k, _)| k == "A").count(), 1);
        assert!(environment(&root, "/bin/sh", None, &[], &["=x".into()], |_| None).is_err());
    }
}
