//! The crun column of `warren bench density --compare crun`: the same steps with OCI
//! containers on a busybox root (the bench's busybox template, shared read-only), no
//! network beyond crun's default namespaces, `/bin/sleep` as the container's process.
//!
//! crun 1.8 refuses hybrid cgroup hosts whose unified hierarchy holds a controller
//! ("cgroups in hybrid mode not supported, drop all controllers from cgroupv2"), with
//! every cgroup manager. So on such a host crun runs in a private mount namespace in
//! which /sys/fs/cgroup/unified is unmounted (a helper `unshare -m` process holds it;
//! crun is started through `nsenter`; the host's mounts are untouched), and with
//! `--cgroup-manager=disabled` so that it creates no cgroup outside warren's own. That
//! makes crun cheaper than it would be with cgroups: no cgroup creation or migration.
//! nsenter's own cost is measured and subtracted from every timed crun command.
//!
//! The steps are the runc-CLI stepper's ([`super::runc_cli`]) with crun as the
//! binary and `--cgroup-manager=disabled`; every container is deleted when the step
//! ends, also on failure, and the helper is killed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::runc_cli::{Launcher, RuncCli, Runtime};
use super::system::{Failure, Needs, System};
use crate::measure::{ms, summarize, Progress};

/// The launcher for crun on this host: direct, or (hybrid cgroup host) through
/// nsenter into a helper's mount namespace without /sys/fs/cgroup/unified, with
/// nsenter's median cost measured.
fn launcher(proc_root: &Path) -> Result<Launcher, Failure> {
    let mountinfo = std::fs::read_to_string(proc_root.join("self/mountinfo")).unwrap_or_default();
    let hybrid = mountinfo
        .lines()
        .any(|l| l.split(' ').nth(4) == Some("/sys/fs/cgroup/unified"));
    if !hybrid {
        return Ok(Launcher::direct());
    }
    let mut child = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg("umount /sys/fs/cgroup/unified && echo ready && exec sleep 1000000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(Failure::spawn("unshare (util-linux)"))?;
    let mut line = String::new();
    let out = child.stdout.take().expect("piped");
    let _ = BufReader::new(out).read_line(&mut line);
    // From here the helper is killed on every path (the launcher's drop).
    let mut l = Launcher {
        helper: Some(child),
        overhead_ms: 0.0,
    };
    if line.trim() != "ready" {
        return Err(
            "could not unmount /sys/fs/cgroup/unified in a private mount namespace"
                .to_string()
                .into(),
        );
    }
    let mut t = Vec::new();
    for _ in 0..10 {
        let s = Instant::now();
        l.command(Path::new("true"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .map_err(Failure::spawn("nsenter"))?;
        t.push(ms(s.elapsed()));
    }
    l.overhead_ms = summarize(&t).median;
    Ok(l)
}

/// What crun needs on the host.
pub const NEEDS: Needs = Needs {
    command: "crun",
    package: "crun",
};

/// crun as a compared system, under `scratch`, from `rootfs`.
pub fn open(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    _: &mut dyn Progress,
) -> Result<Box<dyn System>, Failure> {
    let launcher = launcher(proc_root)?;
    let how = match launcher.helper {
        Some(_) => format!(
            "crun 1.8 refuses this hybrid cgroup host, so it ran in a private mount namespace without /sys/fs/cgroup/unified (via nsenter, {:.2} ms per call, subtracted)",
            launcher.overhead_ms
        ),
        None => "crun run directly".into(),
    };
    let rt = Runtime {
        name: "crun",
        program: PathBuf::from("crun"),
        before_root: Vec::new(),
        after_root: vec!["--cgroup-manager=disabled".into()],
        spec: vec!["spec".into()],
        id_letter: 'c',
        launcher,
        note: format!(
            "busybox root shared read-only, /bin/sleep, default namespaces, --cgroup-manager=disabled (no cgroups: cheaper than crun with cgroups); {how}; 'clone' is writing the bundle, 'boot' create+start, 'halt' kill"
        ),
    };
    Ok(Box::new(RuncCli::open(rt, scratch, rootfs)?))
}
