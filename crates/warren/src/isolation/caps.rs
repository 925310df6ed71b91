//! Capability names and the default set a zone's root keeps.

/// Every capability this kernel generation knows, by number (index = bit).
pub const NAMES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// What a zone's root keeps by default: Docker's default set without CAP_MKNOD
/// (warren makes /dev itself, and on cgroup v2 there is no device cgroup to stop a
/// block device node). See docs/isolation.md for why each other one is dropped.
pub const DEFAULT_KEEP: [&str; 13] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_RAW",
    "CAP_SYS_CHROOT",
    "CAP_AUDIT_WRITE",
    "CAP_SETFCAP",
];

/// The canonical name (`CAP_SYS_NICE`) of `name`, which may be given in any case and
/// without the `CAP_` prefix; `None` if no such capability exists.
pub fn canonical(name: &str) -> Option<&'static str> {
    let upper = name.trim().to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    };
    NAMES.iter().copied().find(|n| *n == full)
}

/// The bit of a canonical name.
pub fn bit(name: &str) -> u64 {
    let i = NAMES
        .iter()
        .position(|n| *n == name)
        .expect("canonical names only");
    1u64 << i
}

/// The mask of capabilities a zone keeps: the default set plus `add` minus `drop`
/// (names already canonical).
pub fn keep_mask(add: &[String], drop: &[String]) -> u64 {
    let mut m = DEFAULT_KEEP.iter().fold(0, |m, n| m | bit(n));
    for a in add {
        m |= bit(a);
    }
    for d in drop {
        m &= !bit(d);
    }
    m
}

/// The names in a mask, in number order (for docs and messages).
pub fn names(mask: u64) -> Vec<&'static str> {
    NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_masks() {
        assert_eq!(canonical("sys_nice"), Some("CAP_SYS_NICE"));
        assert_eq!(canonical("CAP_NET_RAW"), Some("CAP_NET_RAW"));
        assert_eq!(canonical("CAP_FLY"), None);
        // Docker's default CapEff is 0xa80425fb; ours is that without CAP_MKNOD (27).
        assert_eq!(keep_mask(&[], &[]), 0xa804_25fb & !(1 << 27));
        assert_eq!(keep_mask(&[], &[]), 0xa004_25fb);
        let m = keep_mask(&["CAP_SYS_NICE".into()], &["CAP_NET_RAW".into()]);
        assert!(m & (1 << 23) != 0 && m & (1 << 13) == 0);
        assert!(names(keep_mask(&[], &[])).contains(&"CAP_KILL"));
        assert!(!names(keep_mask(&[], &[])).contains(&"CAP_SYS_ADMIN"));
    }
}
