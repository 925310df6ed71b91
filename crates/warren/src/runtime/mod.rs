//! The native runtime: start a zone's init in new namespaces, stop it, log into it.
//!
//! Boot is one `clone(2)` and one `execve(2)`: the child builds the zone's root *inside
//! its own mount namespace* (overlay or bind, the template's read-only binds, /proc,
//! read-only /sys, a tiny /dev) and pivots into it while the parent moves it into the
//! zone's cgroups (and wires its network); then the child enters a new cgroup namespace
//! and execs init. Nothing is mounted in the host's namespace and no helper process
//! stays on the host: when the zone's last process exits, the kernel tears down its
//! mounts and namespaces with it.
//!
//! This module builds the plan as data ([`plan`]); `warren_sys::spawn` executes it.

pub mod console;
pub mod init;
pub mod login;
mod userns;

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use self::userns::{userns_fds, UsernsFds};
use warren_sys::libc;
use warren_sys::spawn::{ExecTarget, IntoCgroup, SpawnError, SpawnPlan, Step};

use crate::cgroups::CgroupSet;
use crate::config::{NetMode, ZoneConfig};
use crate::error::{Error, IoContext, Result};
use crate::idmap::IdRange;
use crate::isolation::{self, Confinement};
use crate::net::NetRuntime;
use crate::state::InitId;
use crate::stats;
use crate::storage::template::Bind;
use crate::storage::RootMount;

/// The environment every zone process starts with.
pub const ZONE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The descriptor number the child gives the console log (close-on-exec).
const CONSOLE_FD: i32 = 900;

/// Everything needed to boot one zone.
pub struct BootSpec<'a> {
    pub zone: &'a str,
    pub config: &'a ZoneConfig,
    pub root: &'a RootMount,
    pub binds: &'a [Bind],
    pub cgroups: &'a CgroupSet,
    /// The host file the zone's console (init's stdout/stderr, /dev/console) writes to.
    pub console: &'a Path,
    /// The `warren-init` binary on the host (run by file descriptor).
    pub init_exe: &'a Path,
    pub proc_root: &'a Path,
    /// `net = "bridge"`: the leased address, attached right after the clone.
    pub net: Option<&'a NetRuntime>,
    /// The zone's host ids: boot it in its own user namespace (`userns = true`).
    pub idmap: Option<IdRange>,
    /// `disk.max`: the image holding the overlay's upper and work directories,
    /// mounted (from a loop device) before the overlay.
    pub disk: Option<&'a crate::quota::DiskMount>,
}

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("paths checked for NUL")
}

fn cs(s: &str) -> CString {
    CString::new(s).expect("strings checked for NUL")
}

/// Descriptors the child needs; they must stay open until the spawn returns.
struct Fds {
    procs: Vec<File>,
    /// The zone's console: its capped tmpfs (attached by the child) and the file.
    console: console::Console,
    null: File,
    init: Option<File>,
    userns: Option<UsernsFds>,
    /// A `disk.max` image's loop device (autoclear: detached when its last mount goes)
    /// and its ext4 filesystem, mounted by the parent as a detached mount.
    disk: Option<(warren_sys::loopdev::LoopDevice, std::os::fd::OwnedFd)>,
}

/// A step plus what it does, for error messages.
struct Plan {
    spawn: SpawnPlan,
    what: Vec<String>,
}

impl Plan {
    fn push(&mut self, step: Step, what: String) {
        self.spawn.steps.push(step);
        self.what.push(what);
    }
    fn mount(
        &mut self,
        src: Option<&str>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: Option<&str>,
    ) {
        let what = format!(
            "mount {} on {}",
            fstype.or(src).unwrap_or("(remount)"),
            target.display()
        );
        self.push(
            Step::Mount {
                source: src.map(cs),
                target: c(target),
                fstype: fstype.map(cs),
                flags,
                data: data.map(cs),
            },
            what,
        );
    }
    /// Refuse the boot unless `rel` is a real directory in the mounted root, reached
    /// without a symlink: a mount (or device node) must never land outside the zone's
    /// tree because an image or a tenant made `dev` a link to `/` (docs/isolation.md,
    /// "Host-side file operations"). No zone process exists yet, so nothing can
    /// change the tree between this check and the mount that follows.
    fn check_target(&mut self, root: &Path, rel: &str) {
        self.push(
            Step::CheckBeneath {
                root: c(root),
                rel: cs(rel),
            },
            format!(
                "check that /{rel} is a directory inside the zone's root {}, reached without symlinks; a root whose /{rel} is a symlink, a file or missing is refused: make it a directory in the template (or the zone)",
                root.display()
            ),
        );
    }
}

/// Overlay mount options, refusing paths the option syntax cannot carry.
pub fn overlay_options(lower: &Path, upper: &Path, work: &Path) -> Result<String> {
    for p in [lower, upper, work] {
        let s = p.to_string_lossy();
        if s.contains([',', ':', '\\']) || s.contains('\0') {
            return Err(Error::Invalid(format!(
                "path {} contains ',', ':' or '\\', which overlayfs options cannot carry; use a state root without them",
                p.display()
            )));
        }
    }
    Ok(format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    ))
}

fn build(spec: &BootSpec<'_>, fds: &Fds) -> Result<Plan> {
    let root = spec.root.target().to_path_buf();
    let own_net = spec.config.net != NetMode::Host;
    let us = fds.userns.as_ref();
    // With a user namespace, the network, UTS and IPC namespaces already exist (owned
    // by it, so the zone's root has capabilities there); the child joins them.
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID;
    if us.is_none() {
        flags |= libc::CLONE_NEWUTS | libc::CLONE_NEWIPC;
        if own_net {
            flags |= libc::CLONE_NEWNET;
        }
    }
    let (exec, argv) = match &spec.config.init {
        Some(cmd) => {
            let argv = cmd.argv();
            (ExecTarget::Path(cs(&argv[0])), argv)
        }
        None => (
            ExecTarget::Fd(
                fds.init
                    .as_ref()
                    .expect("opened for warren-init")
                    .as_raw_fd(),
            ),
            vec![init::ARGV0.to_string()],
        ),
    };
    let mut env = vec![
        format!("PATH={ZONE_PATH}"),
        "HOME=/root".to_string(),
        "TERM=linux".to_string(),
        "container=warren".to_string(),
        format!("WARREN_ZONE={}", spec.zone),
    ];
    if spec.config.init.is_none() {
        env.extend(init::encode_services(&spec.config.services));
    }
    for s in argv.iter().chain(env.iter()) {
        if s.contains('\0') {
            return Err(Error::config(
                spec.zone,
                "init and services may not contain NUL bytes",
            ));
        }
    }
    let mut p = Plan {
        spawn: SpawnPlan {
            clone_flags: flags,
            steps: Vec::new(),
            exec,
            argv: argv.iter().map(|a| cs(a)).collect(),
            envp: env.iter().map(|e| cs(e)).collect(),
            pass_fds: 0,
            into_cgroup: None,
        },
        what: Vec::new(),
    };
    p.mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    );
    if let (Some(d), Some((_, mnt))) = (spec.disk, fds.disk.as_ref()) {
        // Mounted by the parent: the child may already be in the zone's devices cgroup,
        // which (rightly) does not let it open the loop device.
        p.push(
            Step::MoveMount {
                fd: mnt.as_raw_fd(),
                target: c(&d.mountpoint),
            },
            format!("attach the disk.max image on {}", d.mountpoint.display()),
        );
    }
    match spec.root {
        RootMount::Overlay {
            lower,
            upper,
            work,
            target,
        } => {
            // v2host: the idmapped template is a detached mount. Overlay takes a
            // detached mount as a layer only from Linux 6.15 on ("failed to clone
            // lowerpath" on Debian 12's 6.1 and on 6.12), so the child first attaches
            // it over the template's path in its own (private) mount namespace, and
            // overlay takes that path: idmapped layers work from 5.19 on
            // (docs/cgroup-v2.md, "Kernel 6.1").
            if let Some(u) = us {
                p.push(
                    Step::MoveMount {
                        fd: u.root.as_raw_fd(),
                        target: c(lower),
                    },
                    format!("attach the idmapped template on {}", lower.display()),
                );
            }
            let opts = overlay_options(lower, upper, work)?;
            // nodev: an image's (or a zone's) device nodes open nothing, also for a
            // host user who reaches them through /proc/<pid>/root; the zone's /dev
            // is a tmpfs of its own where warren makes the nodes it allows.
            p.mount(
                Some("overlay"),
                target,
                Some("overlay"),
                libc::MS_NODEV,
                Some(&opts),
            );
        }
        RootMount::Bind { source } => match us {
            Some(u) => p.push(
                Step::MoveMount {
                    fd: u.root.as_raw_fd(),
                    target: c(source),
                },
                format!("attach the idmapped root on {}", source.display()),
            ),
            None => {
                let s = source.to_string_lossy();
                p.mount(Some(&s), source, None, libc::MS_BIND | libc::MS_REC, None);
                // nodev, as the overlay root above.
                p.mount(
                    None,
                    source,
                    None,
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_NODEV,
                    None,
                );
            }
        },
    }
    for (i, b) in spec.binds.iter().enumerate() {
        let target = root.join(&b.target);
        p.check_target(&root, &b.target);
        if let Some(u) = us {
            // Read-only and nodev were set with the id mapping (mount_setattr).
            p.push(
                Step::MoveMount {
                    fd: u.binds[i].as_raw_fd(),
                    target: c(&target),
                },
                format!(
                    "attach the idmapped {} on {}",
                    b.source.display(),
                    target.display()
                ),
            );
            continue;
        }
        let src = b.source.to_string_lossy();
        p.mount(
            Some(&src),
            &target,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        );
        if b.readonly {
            p.mount(
                None,
                &target,
                None,
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NODEV,
                None,
            );
        }
    }
    p.push(Step::Umask(0), "set umask".into());
    let nosuid_nodev_noexec = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    for rel in ["proc", "sys", "dev"] {
        p.check_target(&root, rel);
    }
    p.mount(
        Some("proc"),
        &root.join("proc"),
        Some("proc"),
        nosuid_nodev_noexec,
        None,
    );
    // /sys is the host's sysfs, bound read-only and without its submounts, rather than
    // a new sysfs instance: every superblock registers a shrinker, and every memory
    // cgroup keeps per-shrinker state, so per-zone superblocks cost O(zones²) kernel
    // memory. The price: /sys/class/net lists the host's devices (read-only).
    let sys = root.join("sys");
    p.mount(Some("/sys"), &sys, None, libc::MS_BIND, None);
    p.mount(
        None,
        &sys,
        None,
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | nosuid_nodev_noexec,
        None,
    );
    let dev = root.join("dev");
    // The zone's root owns /dev (and /dev/shm, the nodes, the ptys' tty group) as
    // it sees them: with a user namespace, that is the first id of its range.
    let base = us.map_or(0, |u| u.range.base);
    p.mount(
        Some("tmpfs"),
        &dev,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        // One tmpfs for the device nodes and /dev/shm (see /sys above for why not two).
        Some(&format!(
            "mode=755,size=65536k,nr_inodes=4096{}",
            if us.is_some() {
                format!(",uid={base},gid={base}")
            } else {
                String::new()
            }
        )),
    );
    let mut owned_by_zone_root = Vec::new();
    for n in crate::isolation::devices::NODES {
        let path = dev.join(n.name);
        p.push(
            Step::Mknod {
                path: c(&path),
                mode: libc::S_IFCHR | n.mode,
                dev: libc::makedev(n.major, n.minor),
            },
            format!("create device {}", path.display()),
        );
        owned_by_zone_root.push(path);
    }
    for (name, mode) in [("pts", 0o755), ("shm", 0o1777)] {
        let path = dev.join(name);
        p.push(
            Step::Mkdir {
                path: c(&path),
                mode,
            },
            format!("create {}", path.display()),
        );
        owned_by_zone_root.push(path);
    }
    if us.is_some() {
        for path in owned_by_zone_root {
            p.push(
                Step::Chown {
                    path: c(&path),
                    uid: base,
                    gid: base,
                },
                format!("give {} to the zone's root", path.display()),
            );
        }
    }
    p.mount(
        Some("devpts"),
        &dev.join("pts"),
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        // gid 5 is "tty" inside the zone.
        Some(&format!(
            "newinstance,ptmxmode=0666,mode=0620,gid={}",
            base + 5
        )),
    );
    for (link, target) in crate::isolation::devices::LINKS {
        let at = dev.join(link);
        p.push(
            Step::Symlink {
                target: cs(target),
                link: c(&at),
            },
            format!("create link {}", at.display()),
        );
    }
    // The console's own capped tmpfs (runtime::console), attached in a directory of
    // host root's that the zone cannot enter, its file opened as init's stdout.
    let console_dir = dev.join(console::MOUNT_DIR);
    p.push(
        Step::Mkdir {
            path: c(&console_dir),
            mode: 0o700,
        },
        format!("create {}", console_dir.display()),
    );
    p.push(
        Step::MoveMount {
            fd: fds.console.mount.as_raw_fd(),
            target: c(&console_dir),
        },
        format!("attach the console's tmpfs on {}", console_dir.display()),
    );
    let console_file = console_dir.join(console::FILE);
    p.push(
        Step::Open {
            path: c(&console_file),
            flags: libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            mode: 0,
            fd: CONSOLE_FD,
        },
        format!("open {}", console_file.display()),
    );
    let console = dev.join("console");
    p.push(
        Step::CreateFile {
            path: c(&console),
            mode: 0o600,
        },
        format!("create {}", console.display()),
    );
    let console_src = format!("/proc/self/fd/{CONSOLE_FD}");
    p.mount(Some(&console_src), &console, None, libc::MS_BIND, None);
    let masked = isolation::MASKED_FILES
        .iter()
        .chain(isolation::MASKED_DIRS.iter())
        .copied();
    let masks = crate::sandbox::masks::steps(&root, &dev, masked, isolation::READONLY_DIRS)
        .map_err(|e| Error::config(spec.zone, e))?;
    for (step, what) in masks {
        p.push(step, what);
    }
    if let Some(u) = us {
        let join = |p: &mut Plan, f: &Option<File>, nstype: libc::c_int, what: &str| {
            if let Some(f) = f {
                p.push(
                    Step::Setns {
                        fd: f.as_raw_fd(),
                        nstype,
                    },
                    format!("join the zone's {what} namespace"),
                );
            }
        };
        join(&mut p, &u.ns.uts, libc::CLONE_NEWUTS, "UTS");
        join(&mut p, &u.ns.ipc, libc::CLONE_NEWIPC, "IPC");
        join(&mut p, &u.ns.net, libc::CLONE_NEWNET, "network");
    }
    p.push(
        Step::Sethostname(spec.config.hostname_or(spec.zone).as_bytes().to_vec()),
        "set the hostname".into(),
    );
    if own_net {
        p.push(Step::LoopbackUp, "bring up lo".into());
    }
    p.push(
        Step::PivotRoot { new_root: c(&root) },
        format!("pivot_root into {}", root.display()),
    );
    p.push(Step::Umask(0o022), "set umask".into());
    for (from, to, what) in [
        (fds.null.as_raw_fd(), 0, "stdin"),
        (CONSOLE_FD, 1, "stdout"),
        (CONSOLE_FD, 2, "stderr"),
    ] {
        p.push(Step::Dup2 { from, to }, format!("set up {what}"));
    }
    // Last, so the host moves the child into the zone's cgroups (and sets up its
    // network) while the child mounts its root: on cgroup v1 the first migration into
    // a cgroup waits for an RCU grace period, which then overlaps the mounts.
    p.push(
        Step::WaitParent,
        "wait for the host to move it into its cgroups and set up its network".into(),
    );
    if let Some(u) = us {
        // Last of the host's privileges: from here on the child is the zone's root,
        // uid 0 inside and `base` outside, with capabilities only over what its user
        // namespace owns (not the mount namespace, which the host made and owns).
        p.push(
            Step::Setns {
                fd: u.ns.user.as_raw_fd(),
                nstype: libc::CLONE_NEWUSER,
            },
            "join the zone's user namespace".into(),
        );
        p.push(Step::BecomeRoot, "become root of the user namespace".into());
    }
    // After the move, so the namespace's root is the zone's own cgroup.
    p.push(
        Step::Unshare(libc::CLONE_NEWCGROUP),
        "create the cgroup namespace".into(),
    );
    for (name, l) in &spec.config.rlimits {
        if let Some(resource) = isolation::rlimits::resource(name) {
            p.push(
                Step::Rlimit {
                    resource,
                    soft: l.soft,
                    hard: l.hard,
                },
                format!("set rlimit.{name}"),
            );
        }
    }
    // Last of all, after every step that needs privilege (see docs/isolation.md).
    let confinement = Confinement::for_zone(spec.config);
    p.push(Step::KeepCaps(confinement.keep), "drop capabilities".into());
    p.push(Step::NoNewPrivs, "set no_new_privs".into());
    p.push(
        Step::Seccomp(confinement.filter),
        "load the seccomp filter".into(),
    );
    Ok(p)
}

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
    let console = console::make(spec.zone, spec.idmap.map(|r| r.base))?;
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
    let mut fds = Fds {
        procs,
        console,
        null,
        init,
        userns,
        disk,
    };
    let mut plan = build(spec, &fds)?;
    // On v2 the init is cloned straight into its cgroup (no migration).
    let cgroup_dir = spec.cgroups.clone_target()?;
    plan.spawn.into_cgroup = cgroup_dir.as_ref().map(|d| IntoCgroup::new(d.as_raw_fd()));
    let mut inside = vec![spec.root.target()];
    if let Some(d) = spec.disk {
        inside.push(&d.mountpoint);
    }
    // With a user namespace the idmapped template is attached over the template's own
    // path, in the child's private mount namespace only (see `build`).
    if let (RootMount::Overlay { lower, .. }, Some(_)) = (spec.root, spec.idmap) {
        inside.push(lower);
    }
    crate::sandbox::invariants::check(&plan.spawn, &inside)
        .map_err(|e| Error::Invalid(format!("zone '{}': internal error: {e}", spec.zone)))?;
    let zone_netns = fds.userns.as_ref().and_then(|u| u.ns.net.as_ref());
    let pid = warren_sys::spawn::spawn_zone_with(&plan.spawn, |pid| {
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
    .map_err(|e| spawn_error(spec.zone, &plan, e))?;
    if let Some(u) = fds.userns.as_mut() {
        u.ns.reap();
    }
    let alive = stats::proc_start_time(spec.proc_root, pid);
    if alive.is_none() {
        // What it printed before dying is on the console's tmpfs, gone with the zone
        // unless saved now.
        let _ = console::save(&fds.console.file, spec.console);
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

fn spawn_error(zone: &str, plan: &Plan, e: SpawnError<Error>) -> Error {
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
                context: format!("zone '{zone}': creating its namespaces failed{hint}"),
                source,
            }
        }
        SpawnError::Step { index, error } => Error::Io {
            context: format!(
                "zone '{zone}': boot step {} ({}) failed",
                index + 1,
                plan.what.get(index).map(String::as_str).unwrap_or("?")
            ),
            source: error,
        },
        SpawnError::Exec(source) => {
            let prog = match &plan.spawn.exec {
                ExecTarget::Path(p) => p.to_string_lossy().into_owned(),
                ExecTarget::Fd(_) => "warren-init".into(),
            };
            Error::Io {
                context: format!("zone '{zone}': starting init {prog} failed (is it present and executable inside the zone?)"),
                source,
            }
        }
        SpawnError::Pipe(source) => Error::Io {
            context: format!("zone '{zone}': talking to the new zone failed"),
            source,
        },
    }
}

/// Where the zone init binary is: `warren-init` beside this executable, else this
/// executable itself (it dispatches on argv[0]).
pub fn init_exe() -> Result<PathBuf> {
    let me = std::env::current_exe().ctx(|| "finding warren's own executable".to_string())?;
    let beside = me.with_file_name(init::ARGV0);
    Ok(if beside.is_file() { beside } else { me })
}

/// How a stop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopOutcome {
    /// Init exited on SIGTERM within the timeout.
    pub graceful: bool,
}

/// Stop a zone: SIGTERM to its init, wait up to `timeout`, then SIGKILL everything in
/// its cgroups, reap init if it is our child, and remove the cgroups. The console is
/// saved to `console_log` once the zone is gone (runtime::console).
pub fn stop(
    init: Option<InitId>,
    cgroups: &CgroupSet,
    timeout: Duration,
    proc_root: &Path,
    console_log: &Path,
) -> Result<StopOutcome> {
    let mut graceful = true;
    let pidfd = init.and_then(|i| {
        let fd = warren_sys::proc::pidfd_open(i.pid).ok()?;
        // The pidfd pins the process; if the start time matches now, it is our init.
        (stats::proc_start_time(proc_root, i.pid) == Some(i.start_time)).then_some(fd)
    });
    // Held open across the stop, so the shutdown messages are in the saved copy.
    let live_console = init
        .filter(|_| pidfd.is_some())
        .and_then(|i| console::open_live(proc_root, i));
    if let Some(fd) = &pidfd {
        use std::os::fd::AsFd;
        if warren_sys::proc::pidfd_send_signal(fd.as_fd(), libc::SIGTERM).is_ok() {
            graceful = warren_sys::proc::pidfd_wait(fd.as_fd(), timeout).unwrap_or(false);
        }
    }
    cgroups.kill_all(Duration::from_secs(10))?;
    if let (Some(fd), Some(i)) = (&pidfd, init) {
        use std::os::fd::AsFd;
        let _ = warren_sys::proc::pidfd_wait(fd.as_fd(), Duration::from_secs(5));
        // Reap it if we are its parent (a long-running warren such as the demo).
        let _ = warren_sys::proc::waitpid_nohang(i.pid);
    }
    cgroups.remove(Duration::from_secs(5))?;
    if let Some(f) = &live_console {
        // A log that cannot be saved does not make the halt fail.
        let _ = console::save(f, console_log);
    }
    Ok(StopOutcome { graceful })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_options_refuse_unsafe_paths() {
        let ok = overlay_options(Path::new("/l"), Path::new("/u"), Path::new("/w")).unwrap();
        assert_eq!(ok, "lowerdir=/l,upperdir=/u,workdir=/w");
        assert!(overlay_options(Path::new("/a,b"), Path::new("/u"), Path::new("/w")).is_err());
        assert!(overlay_options(Path::new("/l"), Path::new("/u:x"), Path::new("/w")).is_err());
    }
}
