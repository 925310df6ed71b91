//! warren as an OCI runtime: runc's command line over warren's spawn, cgroup and
//! isolation code, so containerd, CRI-O and podman (and Kubernetes through a
//! RuntimeClass) can start zones.
//!
//! - [`cli`]: the runc-compatible command line (`warren oci …`, or the binary
//!   invoked as `warren-oci`), exit codes 0 / 1 as runc's, errors on stderr and in
//!   `--log` (text or runc's JSON lines).
//! - [`plan`]: config.json → the spawn plan of the container's init (pure, apart
//!   from reading the rootfs to resolve paths); [`seccomp`]: `linux.seccomp` → the one
//!   compiler's `Profile` (pure);
//!   [`cgroup`]: `linux.resources` → warren's `Limits`, `linux.cgroupsPath` → where
//!   the cgroups go (as the runtime spec says, or nested beneath the runtime's own
//!   cgroup); [`state`]: the record under `--root` and the status (pure).
//! - [`ops`]: the verbs; [`hooks`]: the lifecycle hooks; [`view`]: the containers
//!   as `warren list` / `warren stat` show them (kind `oci`).
//!
//! The create/start split: `create` clones the init into its namespaces, the parent
//! moves it into its cgroups, the init mounts and pivots, reports "ready" and blocks
//! opening `<root>/<id>/exec.fifo` for writing; `create` records it and exits (the
//! init is reparented to the caller's subreaper: conmon, the containerd shim).
//! `start` opens the fifo for reading, which lets the init apply the process's user,
//! capabilities and seccomp and exec.

pub mod cgroup;
pub mod cli;
pub mod hooks;
pub mod ops;
pub mod plan;
pub mod seccomp;
pub mod state;
pub mod view;

use std::io::Write;
use std::path::PathBuf;

/// The runtime-spec version warren implements.
pub const OCI_VERSION: &str = "1.2.0";

/// The default state root.
pub const DEFAULT_ROOT: &str = "/run/warren-oci";

/// Where the runtime writes its log (`--log`, `--log-format`, `--debug`).
pub struct Log {
    file: Option<std::fs::File>,
    json: bool,
    debug: bool,
}

impl Log {
    pub fn new(path: Option<&std::path::Path>, json: bool, debug: bool) -> Log {
        let file = path.and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
        });
        Log { file, json, debug }
    }

    fn write(&self, level: &str, msg: &str) {
        let Some(mut f) = self.file.as_ref() else {
            return;
        };
        let time = state::now_rfc3339();
        let line = if self.json {
            serde_json::json!({"level": level, "msg": msg, "time": time}).to_string()
        } else {
            format!("time=\"{time}\" level={level} msg={msg:?}")
        };
        let _ = writeln!(f, "{line}");
    }

    pub fn error(&self, msg: &str) {
        self.write("error", msg);
    }
    pub fn warn(&self, msg: &str) {
        self.write("warning", msg);
        if self.debug {
            eprintln!("warren-oci: warning: {msg}");
        }
    }
    pub fn debug(&self, msg: &str) {
        if self.debug {
            self.write("debug", msg);
        }
    }
}

/// What every verb gets: the global flags.
pub struct Ctx {
    pub root: PathBuf,
    pub log: Log,
    /// `--systemd-cgroup`: cgroupsPath is `slice:prefix:name`, made as the cgroupfs
    /// path systemd would use (see [`cgroup`]).
    pub systemd_cgroup: bool,
    /// `--cgroup-nest` / `WARREN_OCI_CGROUP_NEST`: containers' cgroups go beneath the
    /// runtime's own, in `warren-oci/<cgroupsPath>` (see [`cgroup`]).
    pub cgroup_nest: bool,
    pub proc_root: PathBuf,
}

/// `features`: what this runtime supports, as the runtime-spec's features document.
pub fn features() -> serde_json::Value {
    serde_json::json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": OCI_VERSION,
        "hooks": ["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"],
        "mountOptions": ["ro", "rw", "nosuid", "suid", "nodev", "dev", "noexec", "exec", "sync", "async",
            "dirsync", "mand", "nomand", "noatime", "atime", "nodiratime", "diratime", "relatime",
            "norelatime", "strictatime", "nostrictatime", "remount", "bind", "rbind", "private",
            "rprivate", "shared", "rshared", "slave", "rslave", "unbindable", "runbindable"],
        "linux": {
            "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "user", "uts"],
            "capabilities": crate::isolation::caps::NAMES.to_vec(),
            "cgroup": {"v1": true, "v2": true, "systemd": false, "systemdUser": false, "rdma": false},
            "seccomp": {
                "enabled": true,
                "actions": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS",
                    "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP"],
                "operators": ["SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT",
                    "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"],
                "archs": ["SCMP_ARCH_X86_64"]
            },
            "apparmor": {"enabled": false},
            "selinux": {"enabled": false}
        },
        "annotations": {"io.github.warren.runtime": "warren"}
    })
}
