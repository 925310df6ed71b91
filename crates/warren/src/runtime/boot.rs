//! Boot a zone: open what its sandbox refers to, build the plan, spawn it, and move
//! it into its cgroups and network while it builds its root.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use std::os::fd::AsRawFd;

use warren_sys::libc;
use warren_sys::spawn::IntoCgroup;

use super::userns::userns_fds;
use super::{console, BootSpec, Fds};
use crate::error::{Error, IoContext, Result};
use crate::sandbox::plan::spawn_error;
use crate::state::InitId;
use crate::stats;

/// Boot a zone: returns its init's identity once init is executing.
/// The caller must be single-threaded (see `warren_sys::spawn`).
pub fn boot(spec: &BootSpec<'_>) -> Result<InitId> {
    let mut procs = Vec::new();
    for f in spec.cgroups.procs_files() {
        procs.push(
            OpenOptions::new()
                .write(true)
                .open(&f)
                .ctx(|| format!("zone '{}': opening {}", spec.zone, f.display()))?,
        );
    }
    let userns = match spec.idmap {
        Some(range) => Some(userns_fds(spec, range)?),
        None => None,
    };
    let null = File::open("/dev/null").ctx(|| "opening /dev/null".to_string())?;
    let init = match spec.config.init {
        Some(_) => None,
        // Through a read-only detached bind: the zone's /proc/1/exe then points into
        // a mount nobody can write, so no zone can change the host's binary.
        None => Some(File::from(
            warren_sys::userns::open_tree_readonly(spec.init_exe)
                .ctx(|| format!("opening the zone init {}", spec.init_exe.display()))?,
        )),
    };
    let disk = match spec.disk {
        Some(d) => {
            let image = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&d.image)
                .ctx(|| format!("zone '{}': opening {}", spec.zone, d.image.display()))?;
            let dev = warren_sys::loopdev::attach(&image).ctx(|| {
                format!(
                    "zone '{}': attaching its disk.max image {} to a loop device",
                    spec.zone,
                    d.image.display()
                )
            })?;
            let mnt = warren_sys::loopdev::mount_detached(
                "ext4",
                &dev.path,
                warren_sys::userns::MOUNT_ATTR_NOSUID | warren_sys::userns::MOUNT_ATTR_NODEV,
            )
            .ctx(|| {
                format!(
                    "zone '{}': mounting its disk.max image {} ({})",
                    spec.zone,
                    d.image.display(),
                    dev.path.display()
                )
            })?;
            Some((dev, mnt))
        }
        None => None,
    };
    let views = match spec.views {
        Some(src) => crate::procviews::open_for_boot(spec.zone, src)?,
        None => Vec::new(),
    };
    let mut fds = Fds {
        procs,
        null,
        init,
        userns,
        disk,
        views,
    };
    let mut plan = crate::sandbox::plan(super::spec::zone_spec(spec, &fds.descriptors())?)
        .map_err(|e| Error::config(spec.zone, e.to_string()))?;
    // On v2 the init is cloned straight into its cgroup (no migration).
    let cgroup_dir = spec.cgroups.clone_target()?;
    plan.spawn.into_cgroup = cgroup_dir.as_ref().map(|d| IntoCgroup::new(d.as_raw_fd()));
    let zone_netns = fds.userns.as_ref().and_then(|u| u.ns.net.as_ref());
    // The console, opened through the child's stdout while it waits for its go: what
    // an init that dies at once printed is saved from it (runtime::console).
    let mut live_console = None;
    let pid = warren_sys::spawn::spawn_zone_with(&plan.spawn, |pid| {
        live_console = console::open_stdout(spec.proc_root, pid);
        if !plan.spawn.placed_in_cgroup() {
            join_cgroups(spec, &fds.procs, pid)?;
        }
        let Some(net) = spec.net else {
            return Ok(());
        };
        match zone_netns {
            Some(ns) => crate::net::attach(spec.zone, net, ns),
            None => {
                let path = spec.proc_root.join(pid.to_string()).join("ns/net");
                let ns = File::open(&path)
                    .ctx(|| format!("zone '{}': opening {}", spec.zone, path.display()))?;
                crate::net::attach(spec.zone, net, &ns)
            }
        }
    })
    .map_err(|e| spawn_error(("zone", spec.zone), "boot step", "init", &plan, e))?;
    if let Some(u) = fds.userns.as_mut() {
        u.ns.reap();
    }
    let alive = stats::proc_start_time(spec.proc_root, pid);
    if alive.is_none() {
        // What it printed before dying is on the zone's /dev tmpfs, gone with the
        // zone unless saved now.
        if let Some(f) = &live_console {
            let _ = console::save(f, spec.console);
        }
    }
    let start_time = alive.ok_or_else(|| Error::Io {
        context: format!(
            "zone '{}': its init (pid {pid}) exited right after starting; see its console log {}",
            spec.zone,
            spec.console.display()
        ),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    })?;
    Ok(InitId { pid, start_time })
}

/// Move the zone's new process into each of its cgroups (from the parent).
fn join_cgroups(spec: &BootSpec<'_>, procs: &[File], pid: i32) -> Result<()> {
    let text = pid.to_string();
    for (mut f, path) in procs.iter().zip(spec.cgroups.procs_files()) {
        f.write_all(text.as_bytes()).ctx(|| {
            format!(
                "zone '{}': moving its init into {}",
                spec.zone,
                path.display()
            )
        })?;
    }
    Ok(())
}
