//! Where things live: the state root and the host's /proc and /sys, all injectable.
//!
//! ```text
//! <root>/templates/<name>/template.toml   the template's manifest
//! <root>/templates/<name>/root/           its read-only root (a btrfs subvolume on btrfs)
//! <root>/zones/<name>/config.toml         the zone's config (warren's zonecfg)
//! <root>/zones/<name>/state.json          persisted lifecycle state (durable writes)
//! <root>/zones/<name>/runtime.json        runtime facts while booted (init pid, cgroups)
//! <root>/zones/<name>/upper, work         overlay backend: the private layer
//! <root>/zones/<name>/root/               btrfs / copy backends: the zone's own root
//! <root>/zones/<name>/console.log         what the zone's init writes
//! <root>/locks/<kind>-<name>.lock         flock(2) files serialising commands
//! ```

use std::path::{Path, PathBuf};

/// The default state root.
pub const DEFAULT_ROOT: &str = "/var/lib/warren";

/// Paths inside one state root.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        Layout { root: root.into() }
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn templates(&self) -> PathBuf {
        self.root.join("templates")
    }
    pub fn template_dir(&self, name: &str) -> PathBuf {
        self.templates().join(name)
    }
    pub fn zones(&self) -> PathBuf {
        self.root.join("zones")
    }
    pub fn zone_dir(&self, name: &str) -> PathBuf {
        self.zones().join(name)
    }
    pub fn locks(&self) -> PathBuf {
        self.root.join("locks")
    }
    pub fn lock_file(&self, kind: &str, name: &str) -> PathBuf {
        self.locks().join(format!("{kind}-{name}.lock"))
    }

    /// Make everything in the state root root's alone: each directory directly inside
    /// it (templates, zones, locks, id ranges, leases, …) becomes 0700, created so if
    /// missing. A template holds an image's setuid files, file capabilities and device
    /// nodes; a host user who could reach them could use them (docs/isolation.md,
    /// "Hostile images"). The root directory itself is left as it is (it may be a
    /// directory the operator shares); nothing below it is reachable by other users.
    pub fn secure(&self) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&self.root)?;
        for dir in [self.templates(), self.zones(), self.locks()] {
            match crate::fsutil::mkdir_mode(&dir, 0o700) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                other => other?,
            }
        }
        for entry in std::fs::read_dir(&self.root)? {
            let entry = entry?;
            // file_type does not follow symlinks: only real directories are touched.
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let meta = entry.metadata()?;
            if meta.permissions().mode() & 0o077 != 0 {
                std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o700))?;
            }
        }
        Ok(())
    }

    /// The name of the cgroup that holds this state root's zones, beneath warren's own
    /// cgroup: `warren` for the default root, `warren-<hash>` for any other, so that
    /// several state roots (parallel tests) never share a cgroup.
    pub fn cgroup_group(&self) -> String {
        if self.root == Path::new(DEFAULT_ROOT) {
            return "warren".into();
        }
        format!(
            "warren-{:08x}",
            fnv1a(self.root.as_os_str().as_encoded_bytes()) as u32
        )
    }
}

/// FNV-1a: a stable, dependency-free hash for naming.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The host's kernel interfaces, as paths so tests can point them at fixtures.
#[derive(Debug, Clone)]
pub struct HostPaths {
    /// Usually `/proc`.
    pub proc: PathBuf,
    /// Usually `/sys`.
    pub sys: PathBuf,
    /// Host-wide runtime state shared by every state root (a tmpfs, gone at reboot):
    /// `/run/warren`, or `$WARREN_RUN_DIR` (tests give each root its own).
    pub run: PathBuf,
    /// Usually `/etc`: the id ranges other tools declare (`subuid`, `subgid`).
    pub etc: PathBuf,
}

impl Default for HostPaths {
    fn default() -> Self {
        HostPaths {
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
            run: std::env::var_os("WARREN_RUN_DIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/run/warren")),
            etc: PathBuf::from("/etc"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_group_is_stable_and_distinct() {
        assert_eq!(Layout::new(DEFAULT_ROOT).cgroup_group(), "warren");
        let a = Layout::new("/tmp/a").cgroup_group();
        let b = Layout::new("/tmp/b").cgroup_group();
        assert_ne!(a, b);
        assert_eq!(a, Layout::new("/tmp/a").cgroup_group());
        assert!(a.starts_with("warren-") && a.len() == 15, "{a}");
    }
}
