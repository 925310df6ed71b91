//! The sandbox core: the pieces of a spawn plan that zones (`runtime`), `warren login`
//! and the OCI runtime (`oci::plan`) build the same way, so that a hardening fix is
//! made once. Each function returns `(Step, what)` pairs that a front end's plan
//! pushes in order; the policy they apply is data in `isolation`.
//!
//! Today: masked and read-only kernel paths ([`masks`]), the one join of `login` and
//! `oci exec` ([`join`]), what every plan must satisfy ([`invariants`]); the device nodes and /dev links
//! are one list in `isolation::devices`. The
//! spawn protocol itself (descriptor hygiene, single-thread check, the after-clone
//! and sync handshakes) is `warren_sys::spawn`, shared by every front end.

pub mod invariants;
pub mod join;
pub mod masks;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use warren_sys::spawn::Step;

/// A step and what it does (for error messages).
pub type Described = (Step, String);

/// `p` as a C string; a NUL byte is an error naming the path.
pub fn cpath(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| format!("{:?} contains a NUL byte", p.display()))
}
