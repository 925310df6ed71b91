//! `mounts[].options` → mount(2) flags, propagation and data (pure).

use super::*;

/// Mount flags, propagation flags and the fs-specific data of `options`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MountOptions {
    pub flags: libc::c_ulong,
    pub propagation: Vec<libc::c_ulong>,
    pub data: Vec<String>,
    pub bind: bool,
    pub recursive: bool,
}

pub fn parse_options(options: &[String]) -> MountOptions {
    let mut m = MountOptions::default();
    for o in options {
        let (set, clear): (libc::c_ulong, libc::c_ulong) = match o.as_str() {
            "ro" => (libc::MS_RDONLY, 0),
            "rw" => (0, libc::MS_RDONLY),
            "nosuid" => (libc::MS_NOSUID, 0),
            "suid" => (0, libc::MS_NOSUID),
            "nodev" => (libc::MS_NODEV, 0),
            "dev" => (0, libc::MS_NODEV),
            "noexec" => (libc::MS_NOEXEC, 0),
            "exec" => (0, libc::MS_NOEXEC),
            "sync" => (libc::MS_SYNCHRONOUS, 0),
            "async" => (0, libc::MS_SYNCHRONOUS),
            "dirsync" => (libc::MS_DIRSYNC, 0),
            "mand" => (libc::MS_MANDLOCK, 0),
            "nomand" => (0, libc::MS_MANDLOCK),
            "noatime" => (libc::MS_NOATIME, 0),
            "atime" => (0, libc::MS_NOATIME),
            "nodiratime" => (libc::MS_NODIRATIME, 0),
            "diratime" => (0, libc::MS_NODIRATIME),
            "relatime" => (libc::MS_RELATIME, 0),
            "norelatime" => (0, libc::MS_RELATIME),
            "strictatime" => (libc::MS_STRICTATIME, 0),
            "nostrictatime" => (0, libc::MS_STRICTATIME),
            "remount" => (libc::MS_REMOUNT, 0),
            "bind" => {
                m.bind = true;
                (0, 0)
            }
            "rbind" => {
                m.bind = true;
                m.recursive = true;
                (0, 0)
            }
            "private" | "rprivate" | "shared" | "rshared" | "slave" | "rslave" | "unbindable"
            | "runbindable" => {
                let base = match o.trim_start_matches('r') {
                    "private" => libc::MS_PRIVATE,
                    "shared" => libc::MS_SHARED,
                    "slave" => libc::MS_SLAVE,
                    _ => libc::MS_UNBINDABLE,
                };
                let rec = if o.starts_with('r') { libc::MS_REC } else { 0 };
                m.propagation.push(base | rec);
                (0, 0)
            }
            // Options of other runtimes' own features, not the kernel's.
            "tmpcopyup" | "notmpcopyup" | "copy-symlink" | "z" | "Z" | "U" => (0, 0),
            other => {
                m.data.push(other.to_string());
                (0, 0)
            }
        };
        m.flags = (m.flags | set) & !clear;
    }
    m
}
