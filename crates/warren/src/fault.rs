//! Fault injection for crash-consistency tests.
//!
//! Every step of install, clone, boot, halt, uninstall, delete, create, rename, suspend
//! and resume that leaves a different picture on disk or in the kernel has a named point. When the environment
//! variable `WARREN_FAULT` names a point, warren kills itself with SIGKILL there, as a
//! crash or an operator's `kill -9` would. Nothing else reads the variable; unset, a
//! point costs one environment lookup.
//!
//! Races are tested with pause points instead: when `WARREN_PAUSE` names one, warren
//! stops itself with SIGSTOP there; the test sees it stopped (state `T` in
//! /proc/<pid>/stat), does the other side of the race, and resumes it with SIGCONT.

/// The variable tests set.
pub const ENV: &str = "WARREN_FAULT";

/// Every point, in the order the verbs pass them (tests iterate over this).
pub const POINTS: &[&str] = &[
    "create.after-mkdir",
    "create.after-config",
    "install.after-incomplete",
    "install.after-disk-image",
    "install.after-backend",
    "clone.after-mkdir",
    "clone.after-copy",
    "clone.after-state",
    "clone.after-sync",
    "boot.after-cgroups",
    "boot.after-lease",
    "boot.after-runtime",
    "boot.holder-alive",
    "boot.after-spawn",
    "halt.after-shutting-down",
    "halt.after-stop",
    "uninstall.after-incomplete",
    "uninstall.after-backend",
    "delete.after-rename",
    // Any atomic write, between its temp file and the rename (crash.rs: the first
    // write of a boot, runtime.json): the temp file is gc's to collect.
    "write.after-temp",
    "rename.after-record",
    "rename.after-dir",
    // `warren suspend` / `resume` (docs/suspend.md, "Crashes").
    "suspend.after-join",
    "suspend.after-intent",
    "suspend.after-freeze",
    "suspend.after-pageout",
    "resume.after-thaw",
    // Snapshots, export and import (docs/snapshots.md): gc removes what each leaves.
    "snapshot.after-copy",
    "snapshot.delete-after-rename",
    "restore.after-copy",
    "restore.after-swap",
    "export.after-write",
    "import.after-unpack",
];

/// The variable tests set to stop warren at a pause point.
pub const PAUSE_ENV: &str = "WARREN_PAUSE";

/// Every pause point: a window in which another command can race this one.
pub const PAUSE_POINTS: &[&str] = &[
    // `config set template=T`: T checked, the config not yet written.
    "config.after-template-check",
    // `login`: the zone's namespaces opened (pinned), its cgroups not yet joined.
    "login.before-join",
    // `login`: the zone's namespaces and cgroups joined, the command not yet forked.
    "login.before-spawn",
    // containerd-shim-warren-v1 `start`: the pod's socket bound, not yet listening
    // (under the socket's lock; a racing `start` must wait, not take it for stale).
    "shim.start-before-listen",
];

/// Stop here (SIGSTOP) until resumed, if the test asked for it.
pub fn pause(name: &str) {
    debug_assert!(
        PAUSE_POINTS.contains(&name),
        "unregistered pause point {name}"
    );
    if std::env::var_os(PAUSE_ENV).is_some_and(|v| v == name) {
        let _ = warren_sys::proc::kill(warren_sys::getpid(), warren_sys::libc::SIGSTOP);
    }
}

/// Die here if the test asked for it.
pub fn point(name: &str) {
    debug_assert!(POINTS.contains(&name), "unregistered fault point {name}");
    if std::env::var_os(ENV).is_some_and(|v| v == name) {
        let _ = warren_sys::proc::kill(warren_sys::getpid(), warren_sys::libc::SIGKILL);
    }
}
