//! `warren bench density --via oci`: the density steps with every zone created the
//! way containerd, CRI-O or podman create one: `warren oci create` + `warren oci
//! start` on a bundle (the bench's busybox template as a shared read-only root,
//! `/bin/sleep` as the process, the default namespaces of `warren oci spec`, and the
//! container's cgroups beneath warren's own cgroup, as for zones).
//!
//! The steps are the runc-CLI stepper's ([`super::runc_cli`]) with this binary's
//! `oci` subcommand as the runtime: 'clone' is writing the bundle, 'boot' is create +
//! start (two runs of this binary), 'halt' is `kill KILL`, 'delete' is `delete
//! --force`. Every container of a step is deleted when the step ends, also on failure.

use std::path::Path;

use super::runc_cli::{Launcher, RuncCli, Runtime};
use super::system::{Failure, System};
use crate::measure::Progress;

/// `warren oci` as a measured system, under `scratch`, from `rootfs`.
pub fn open(
    scratch: &Path,
    rootfs: &Path,
    _: &Path,
    _: &mut dyn Progress,
) -> Result<Box<dyn System>, Failure> {
    let exe = std::env::current_exe().map_err(Failure::io(Path::new("/proc/self/exe")))?;
    let dir = scratch.join("warren-oci");
    let rt = Runtime {
        name: "warren-oci",
        program: exe,
        before_root: vec!["oci".into()],
        after_root: Vec::new(),
        spec: vec!["oci".into(), "spec".into(), "--bundle".into(), dir.into()],
        id_letter: 'o',
        launcher: Launcher::direct(),
        note: "through the OCI runtime: busybox root shared read-only, /bin/sleep, the namespaces of 'warren oci spec', cgroups beneath warren's own; 'clone' is writing the bundle, 'boot' create+start (two runs of warren oci), 'halt' kill, 'delete' delete".into(),
    };
    Ok(Box::new(RuncCli::open(rt, scratch, rootfs)?))
}
