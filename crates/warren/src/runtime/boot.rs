//! Boot a zone: open what its sandbox refers to, build the plan, spawn it (the child
//! enters its cgroups itself or is cloned into them, `sandbox::cgroup_entry`), and
//! move it into its network while it builds its root.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;

use warren_sys::libc;
use warren_sys::spawn::Event;

use super::userns::userns_fds;
use super::{console, BootSpec, Fds};
use crate::error::{Error, IoContext, Result};
use crate::sandbox::plan::spawn_error;
use crate::sandbox::CgroupEntry;
use crate::state::InitId;
use crate::stats;

/// A booted zone: its init, and the live console (kept open so that what an init
/// that dies during boot's watch printed can still be saved).
pub struct Booted {
    pub init: InitId,
    pub console: Option<File>,
}

/// Boot a zone: returns its init's identity once init is executing.
/// The caller must be single-threaded (see `warren_sys::spawn`).
pub fn boot(spec: &BootSpec<'_>) -> Result<Booted> {
    let cgroups = CgroupEntry::open(&format!("zone '{}'", spec.zone), spec.cgroups)?;
    let userns = match spec.idmap {
        Some(range) => Some(userns_fds(spec, range)?),
        None => None,
    };
    let null = File::open("/dev/null").ctx(|| "opening /dev/null".to_string())?;
    // The shared /dev: read-only, nosuid, noexec, its nodes usable (nodev cleared even
    // if the state root's filesystem is mounted nodev); with a user namespace mapped
    // through it, so the zone sees its nodes and directories as its root's.
    use warren_sys::userns::{
        MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY,
    };
    let dev = warren_sys::userns::open_tree_with(
        spec.dev,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
        MOUNT_ATTR_NODEV,
        userns.as_ref().map(|u| &u.ns.user),
    )
    .ctx(|| {
        format!(
            "zone '{}': binding the shared /dev {} (with a user namespace its filesystem must support idmapped mounts; else set userns = false)",
            spec.zone,
            spec.dev.display()
        )
    })?;
    // /dev/shm starts empty at each boot, as a tmpfs would (a disk.max zone's is on its
    // image, not mounted here: it keeps its files; docs/scaling.md). Emptied in place:
    // the child's mkdir then finds it, and gives it to the zone's root.
    if spec.disk.is_none() {
        let shm = super::spec::private_storage(spec.root).join(super::spec::SHM_DIR);
        crate::treeops::empty_dir(&shm, 0o1777)
            .ctx(|| format!("zone '{}': emptying {}", spec.zone, shm.display()))?;
    }
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
        cgroups,
        null,
        dev,
        init,
        userns,
        disk,
        views,
    };
    let mut plan = crate::sandbox::plan(super::spec::zone_spec(spec, &fds.descriptors())?)
        .map_err(|e| Error::config(spec.zone, e.to_string()))?;
    fds.cgroups.prepare(&mut plan);
    let zone_netns = fds.userns.as_ref().and_then(|u| u.ns.net.as_ref());
    // The console, opened through the child's stdout while it waits for its go: what
    // an init that dies at once printed is saved from it (runtime::console).
    let mut live_console = None;
    let mut child = 0;
    let pid = warren_sys::spawn::spawn_staged(&plan.spawn, |event| match event {
        Event::Cloned(pid) => {
            child = pid;
            fds.cgroups.after_clone(&plan, pid, "its init")?;
            if let Some(net) = spec.net {
                match zone_netns {
                    Some(ns) => crate::net::attach(spec.zone, net, ns)?,
                    None => {
                        let path = spec.proc_root.join(pid.to_string()).join("ns/net");
                        let ns = File::open(&path)
                            .ctx(|| format!("zone '{}': opening {}", spec.zone, path.display()))?;
                        crate::net::attach(spec.zone, net, &ns)?
                    }
                }
            }
            Ok(())
        }
        // The child built its root and pointed its stdout at the console, and waits
        // for this go (after the handler above: it is the plan's only one).
        Event::Sync(_) => {
            live_console = console::open_stdout(spec.proc_root, child);
            Ok(())
        }
    })
    .map_err(|e| spawn_error(("zone", spec.zone), "boot step", "init", &plan, e))?;
    if let Some(u) = fds.userns.as_mut() {
        u.ns.reap();
    }
    let alive = stats::proc_start_time(spec.proc_root, pid);
    let Some(start_time) = alive else {
        // What it printed before dying is on the zone's /dev tmpfs, gone with the zone
        // unless saved now; the boot is its parent, so its status is known.
        let status = warren_sys::proc::waitpid_nohang(pid).ok().flatten();
        return Err(init_exited(
            spec.zone,
            status.map(|(_, s)| s),
            live_console.as_ref(),
            spec.console,
        ));
    };
    Ok(Booted {
        init: InitId { pid, start_time },
        console: live_console,
    })
}

/// How long `warren boot` watches a new init before it reports the zone booted: an
/// init that fails at once (a missing program, a bad config) is reported with its
/// exit status rather than as a boot. 150 ms: a dynamically linked program that
/// cannot start fails within a few ms; what runs longer is the service's business.
pub const BOOT_WATCH: std::time::Duration = std::time::Duration::from_millis(150);

/// Watch init (a child of this process) for `dur`: its exit status if it ended.
/// `None` when it is still running or was not this process's child.
///
/// One wait on a pidfd, woken by the exit itself (a `boot --all` of 10,000 zones
/// watched each init with 30 wake-ups of a 5 ms poll); the poll stays for a kernel
/// without pidfds.
pub fn watch(pid: i32, dur: std::time::Duration) -> Option<warren_sys::proc::ExitStatus> {
    let deadline = std::time::Instant::now() + dur;
    if let Ok(fd) = warren_sys::proc::pidfd_open(pid) {
        use std::os::fd::AsFd;
        // Still running at the end: done. Ended (or the wait failed): the loop below
        // collects the status at once.
        if let Ok(false) = warren_sys::proc::pidfd_wait(fd.as_fd(), dur) {
            return None;
        }
    }
    loop {
        match warren_sys::proc::waitpid_nohang(pid) {
            Ok(Some((_, status))) => return Some(status),
            Ok(None) => {}
            Err(_) => return None,
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The error of an init that ended during boot: save the console (`console` is the
/// live file, when it could be opened) to `log` and quote its last lines.
pub fn init_exited(
    zone: &str,
    status: Option<warren_sys::proc::ExitStatus>,
    console: Option<&File>,
    log: &std::path::Path,
) -> Error {
    if let Some(f) = console {
        let _ = console::save(f, log);
    }
    let tail = crate::fsutil::read_bounded(log, console::CONSOLE_MAX)
        .map(|b| last_lines(&String::from_utf8_lossy(&b), 10))
        .unwrap_or_default();
    let (code, signal) = match status {
        Some(warren_sys::proc::ExitStatus::Exited(c)) => (Some(c), None),
        Some(warren_sys::proc::ExitStatus::Signaled(s)) => (None, Some(s)),
        None => (None, None),
    };
    Error::InitExited {
        zone: zone.to_string(),
        code,
        signal,
        how: match status {
            Some(warren_sys::proc::ExitStatus::Exited(c)) => format!("exited with status {c}"),
            Some(warren_sys::proc::ExitStatus::Signaled(s)) => format!("was killed by signal {s}"),
            None => "exited (status unknown)".into(),
        },
        console: if tail.is_empty() {
            "(the console is empty)".into()
        } else {
            tail
        },
        log: log.to_path_buf(),
    }
}

/// The last `n` lines of `text`.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
