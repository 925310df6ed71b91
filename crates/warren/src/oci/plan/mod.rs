//! config.json → the spawn plan of a container's init (and of `exec`'d processes).
//!
//! The same `warren_sys::spawn` machinery as a zone boot runs it: every path and
//! string is built here, before the clone; the child only walks the steps. Paths
//! inside the rootfs are resolved here too, with symlinks followed *inside* the
//! rootfs ([`secure_join`]), so a container's own links cannot aim a mount at a host
//! path. Order of the init's steps (runc's, where the spec leaves it open):
//!
//! 1. wait for the parent (uid/gid maps, cgroups); join a user namespace by path
//! 2. join the other namespaces given by path; a new cgroup namespace
//! 3. `/` rslave (or `rootfsPropagation`), the rootfs bound onto itself, `mounts[]`
//!    in order, device nodes, /dev links, the console pty
//! 4. hostname; [sync: createRuntime and createContainer hooks]; pivot_root
//! 5. sysctls, masked and read-only paths, read-only root; hold `exec.fifo`
//! 6. rlimits, (seccomp without no_new_privs), user and capabilities, cwd,
//!    controlling terminal: a failure here makes `create` fail with the reason
//! 7. ready: `create` returns; block on `exec.fifo` until `start`
//! 8. no_new_privs, seccomp, exec

use std::ffi::CString;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use oci_spec::runtime::{LinuxNamespaceType, Mount, Process, Spec};
use warren_sys::harden::{CapSets, SockFilter};
use warren_sys::libc;
use warren_sys::spawn::{ExecTarget, SpawnPlan, Step};

use crate::cgroups::{CgroupSet, CgroupVersion};

mod devices;
mod init;
mod mounts;
mod options;
mod paths;
mod process;
#[cfg(test)]
mod tests;

pub use init::{
    has_own_mount_namespace, host_id_of_root, init_plan, new_namespaces, InitInputs, HOOKS_SYNC,
};
pub use options::{parse_options, MountOptions};
pub use paths::{mount_holding, resolve_exec, secure_join};
pub use process::{cap_mask, process_steps, process_steps_around, ProcessInputs};

/// The fd the console pty's slave is kept at in the child until it becomes stdio.
pub const CONSOLE_SLAVE_FD: RawFd = 901;

/// The fd the exec fifo is held at (O_PATH) while the init is still root.
pub const FIFO_PATH_FD: RawFd = 903;

/// The PATH used when the process's env has none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Steps with what each does, for error messages.
#[derive(Debug)]
pub struct Plan {
    pub spawn: SpawnPlan,
    pub what: Vec<String>,
}

impl Plan {
    pub fn new(clone_flags: libc::c_int) -> Plan {
        Plan {
            spawn: SpawnPlan {
                clone_flags,
                steps: Vec::new(),
                exec: ExecTarget::Path(CString::default()),
                argv: Vec::new(),
                envp: Vec::new(),
                pass_fds: 0,
                into_cgroup: None,
            },
            what: Vec::new(),
        }
    }
    pub fn push(&mut self, step: Step, what: impl Into<String>) {
        self.spawn.steps.push(step);
        self.what.push(what.into());
    }
    fn mount(
        &mut self,
        src: Option<&[u8]>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: Option<&str>,
    ) -> Result<(), String> {
        let what = format!(
            "mount {} on {}",
            fstype
                .map(str::to_string)
                .or(src.map(|s| String::from_utf8_lossy(s).into_owned()))
                .unwrap_or_else(|| "(remount)".into()),
            target.display()
        );
        let step = Step::Mount {
            source: src.map(cbytes).transpose()?,
            target: cpath(target)?,
            fstype: fstype.map(cstr).transpose()?,
            flags,
            data: data.map(cstr).transpose()?,
        };
        self.push(step, what);
        Ok(())
    }
}

pub fn cbytes(b: &[u8]) -> Result<CString, String> {
    CString::new(b).map_err(|_| format!("{:?} contains a NUL byte", String::from_utf8_lossy(b)))
}

pub fn cstr(s: &str) -> Result<CString, String> {
    cbytes(s.as_bytes())
}

pub fn cpath(p: &Path) -> Result<CString, String> {
    cbytes(p.as_os_str().as_bytes())
}
