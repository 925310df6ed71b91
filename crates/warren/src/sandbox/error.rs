//! Why a sandbox spec could not become a plan, the strings every step carries, and a
//! failed spawn in words (one mapping for zones and OCI containers).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use warren_sys::libc;
use warren_sys::spawn::{ExecTarget, SpawnError};

use super::invariants::Violation;
use super::plan::Plan;

/// Why a spec could not become a plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A string or path that cannot reach the kernel.
    #[error("{0:?} contains a NUL byte")]
    Nul(String),
    /// A field of the front end's config (`process.args`, `linux.devices`, ...) and
    /// what is wrong with it, with the fix.
    #[error("{field}: {problem}")]
    Field { field: String, problem: String },
    /// The builder broke one of its own invariants (a bug in warren).
    #[error("internal error: {0}")]
    Invariant(#[from] Violation),
}

impl PlanError {
    pub fn field(field: impl Into<String>, problem: impl Into<String>) -> PlanError {
        PlanError::Field {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// `b` as a C string.
pub fn cbytes(b: &[u8]) -> Result<CString, PlanError> {
    CString::new(b).map_err(|_| PlanError::Nul(String::from_utf8_lossy(b).into_owned()))
}

pub fn cstr(s: &str) -> Result<CString, PlanError> {
    cbytes(s.as_bytes())
}

pub fn cpath(p: &Path) -> Result<CString, PlanError> {
    cbytes(p.as_os_str().as_bytes())
}

/// A failed spawn in words: the sandbox (`kind` "zone" or "container", its name),
/// what it was doing ("boot step", "setup step") and what it runs ("init",
/// "process"); the clone's errno gets the host limit it points at.
pub fn spawn_error(
    (kind, name): (&str, &str),
    doing: &str,
    runs: &str,
    plan: &Plan,
    e: SpawnError<crate::error::Error>,
) -> crate::error::Error {
    use crate::error::Error;
    let who = format!("{kind} '{name}'");
    match e {
        SpawnError::Setup(e) => e,
        SpawnError::Clone(source) => {
            let hint = match source.raw_os_error() {
                Some(libc::EAGAIN) => " (a process limit was reached: check kernel.pid_max, kernel.threads-max and the pids cgroup)",
                Some(libc::ENOSPC) => " (a namespace limit was reached: check user.max_*_namespaces)",
                Some(libc::ENOMEM) => " (out of memory)",
                _ => "",
            };
            Error::Io {
                context: format!("{who}: creating its namespaces failed{hint}"),
                source,
            }
        }
        SpawnError::Step { index, error } => Error::Io {
            context: format!(
                "{who}: {doing} {} ({}) failed",
                index + 1,
                plan.describe(index)
            ),
            source: error,
        },
        SpawnError::Exec(source) => {
            let prog = match &plan.spawn.exec {
                ExecTarget::Path(p) => p.to_string_lossy().into_owned(),
                ExecTarget::Fd(_) => "warren-init".into(),
            };
            Error::Io {
                context: format!(
                    "{who}: starting {runs} {prog} failed (is it present and executable inside the {kind}?)"
                ),
                source,
            }
        }
        SpawnError::Pipe(source) => Error::Io {
            context: format!("{who}: talking to its new process failed"),
            source,
        },
    }
}
