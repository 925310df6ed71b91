//! Escape attempts for the classes of issue 14 that the sandbox core fixed, tried as
//! the caller of `warren` (its descriptors, its working directory, its terminal), as a
//! hostile image against host users, as a tenant against the host's per-user kernel
//! counters, against the default limits, and against the state root's locks and the
//! host's warren binaries. Classes (issue 14): 1 caller's descriptors, 2 caller's
//! terminal, 4 hostile image / host users, 8 per-zone kernel counters, 9 defaults,
//! 10 locks and binaries.
//!
//! One module per class (`class1` … `class10`), one test each; what they share in one
//! place: the table and its row builders (`table`), host-side probes (`probes`), what a
//! careless caller holds open (`held`) and the OCI harness (`oci`).
//!
//! Each test prints a table `class | attempt | expected | result` and fails naming
//! every row that did not hold, with its class. A test that cannot run here (not root,
//! no `script`, no `setpriv`, …) fails saying why.
//!
//! Safety: every probe that would change something of the host's if it got through is
//! a harmless one: the host binaries are "chmod"ed to their current mode, "chown"ed to
//! their current owner, opened for appending without writing, truncated to their own
//! size; an injected terminal line only touches a file in the test's own temporary
//! directory; device nodes are those of /dev/null and /dev/zero; a zone fills its
//! inotify instances and message queues only after the test has checked that its user
//! namespace is owned by its own host uid (else it would starve host root's processes);
//! the host itself only creates one of each and removes it. Everything runs in a
//! temporary state root; the `Env` guard halts and deletes the zones (killing what
//! they left behind), the OCI guard deletes its containers, and the only host
//! processes the tests start are their own children, waited for or killed by pid.

#[path = "../common/mod.rs"]
mod common;

mod held;
mod oci;
mod probes;
mod table;

mod class1;
mod class10;
mod class2;
mod class4;
mod class8;
mod class9;

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{require_root, Env, Run, WARREN};
use warren_sys::libc;

use held::*;
use oci::*;
use probes::*;
use table::*;
