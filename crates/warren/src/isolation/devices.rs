//! The one device policy of zones and OCI containers, as data.
//!
//! [`NODES`] are the character devices every sandbox gets in its `/dev` (the OCI
//! runtime spec's default devices; zones make the same). [`ALLOWED`] is what a
//! sandbox may open: those nodes plus the console, `/dev/ptmx` and its own ptys. The
//! cgroup v1 `devices.allow` lines ([`v1_lines`]) are derived from it, and so is any
//! other enforcement (a cgroup v2 device program takes the same rules).

/// A device node made in every sandbox's `/dev`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    /// The name under `/dev`.
    pub name: &'static str,
    pub major: u32,
    pub minor: u32,
    /// Permission bits (the node is a character device).
    pub mode: u32,
}

const fn node(name: &'static str, major: u32, minor: u32) -> Node {
    Node {
        name,
        major,
        minor,
        mode: 0o666,
    }
}

/// The nodes made in every sandbox: null, zero, full, random, urandom, tty.
pub const NODES: [Node; 6] = [
    node("null", 1, 3),
    node("zero", 1, 5),
    node("full", 1, 7),
    node("random", 1, 8),
    node("urandom", 1, 9),
    node("tty", 5, 0),
];

/// The links every sandbox's `/dev` has: (name, target).
pub const LINKS: [(&str, &str); 5] = [
    ("ptmx", "pts/ptmx"),
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// A device a sandbox may use: character device `major`:`minor` (`None`: any minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allow {
    pub major: u32,
    pub minor: Option<u32>,
}

const fn allow(major: u32, minor: u32) -> Allow {
    Allow {
        major,
        minor: Some(minor),
    }
}

/// What every sandbox may open and create: [`NODES`], /dev/console (5:1), /dev/ptmx
/// (5:2) and the ptys of its devpts (136:*).
pub const ALLOWED: [Allow; 9] = [
    allow(1, 3),
    allow(1, 5),
    allow(1, 7),
    allow(1, 8),
    allow(1, 9),
    allow(5, 0),
    allow(5, 1),
    allow(5, 2),
    Allow {
        major: 136,
        minor: None,
    },
];

/// The cgroup v1 `devices.allow` lines of [`ALLOWED`] (read, write, mknod).
pub fn v1_lines() -> Vec<String> {
    ALLOWED
        .iter()
        .map(|a| match a.minor {
            Some(m) => format!("c {}:{m} rwm", a.major),
            None => format!("c {}:* rwm", a.major),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_is_allowed_and_the_lines_read_as_v1_wants() {
        for n in NODES {
            assert!(
                ALLOWED
                    .iter()
                    .any(|a| a.major == n.major && a.minor.is_none_or(|m| m == n.minor)),
                "{} is made but not allowed",
                n.name
            );
        }
        let lines = v1_lines();
        assert_eq!(lines[0], "c 1:3 rwm");
        assert_eq!(lines.last().unwrap(), "c 136:* rwm");
        assert_eq!(lines.len(), ALLOWED.len());
    }
}
