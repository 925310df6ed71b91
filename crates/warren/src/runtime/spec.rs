//! A zone as a sandbox: its config and template converted into a
//! [`SandboxSpec`] (pure, given the descriptors `boot` opened).
//!
//! The zone's choices: the root is an overlay of the template (or a bind of the
//! zone's own tree), mounted with the host's privileges in a mount namespace the host
//! owns; every mount target in the tree is checked in the child to be a directory
//! reached without a symlink ([`Prepare::CheckBeneath`]); /sys is the host's sysfs
//! bound read-only; /dev is the state root's one shared template of the nodes of
//! `isolation::devices` (`super::devdir`), bound read-only, with the zone's own
//! devpts, its /dev/shm and its console (both in the zone's own storage beside its
//! root: [`private_storage`]) bound on it; the parent's go comes after the root is
//! built ([`SyncPoint::AfterRoot`]), then the user namespace is joined.
//!
//! [`SUPERBLOCKS`] lists the filesystems a zone's boot makes (docs/scaling.md): the
//! golden test checks the plan against it and `warren doctor` predicts memory from it.

use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use warren_sys::libc;
use warren_sys::spawn::ExecTarget;

use super::{console, init, BootSpec, Fds, CONSOLE_FD, SHM_FD, ZONE_PATH};
use crate::config::NetMode;
use crate::error::{Error, Result};
use crate::idmap::IdRange;
use crate::isolation::{self, Confinement};
use crate::sandbox::plan::{cstr, PlanError};
use crate::sandbox::spec::*;
use crate::sandbox::SandboxSpec;
use crate::storage::RootMount;

/// The superblocks (filesystem instances) one zone makes, each a shrinker id that every
/// memory cgroup on the host keeps state for (docs/scaling.md): the overlay of its root
/// (overlay backend; a bind of its own tree otherwise makes none), its /proc (one per
/// PID namespace), its devpts (its own ptys), and the mqueue the kernel makes for every
/// IPC namespace, mounted or not. /dev, /sys, /dev/shm and the console make none (binds).
pub const SUPERBLOCKS: [&str; 4] = ["overlay", "proc", "devpts", "mqueue"];

/// Where a zone keeps what is its own but not part of its root (its /dev/shm and its
/// live console): the directory holding its private layer, beside the root (the zone's
/// directory, or the root of its `disk.max` image). The root mount covers it in the
/// zone's mount namespace, so nothing in it is reachable from inside by a path.
pub(super) fn private_storage(root: &RootMount) -> &Path {
    let layer = match root {
        RootMount::Overlay { upper, .. } => upper,
        RootMount::Bind { source } => source,
    };
    layer.parent().unwrap_or(Path::new("/"))
}

/// The zone's /dev/shm in [`private_storage`].
pub(super) const SHM_DIR: &str = "dev-shm";

fn plan_err(zone: &str, e: PlanError) -> Error {
    Error::config(zone, e.to_string())
}

fn mount(
    target: &Path,
    prepare: Prepare,
    source: Option<&str>,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<String>,
) -> MountEntry {
    MountEntry {
        target: target.to_path_buf(),
        prepare,
        kind: MountKind::Mount {
            source: source.map(|s| s.as_bytes().to_vec()),
            fstype: fstype.map(str::to_string),
            flags,
            data,
        },
        then: Vec::new(),
    }
}

fn attach(target: &Path, prepare: Prepare, fd: i32, what: String) -> MountEntry {
    MountEntry {
        target: target.to_path_buf(),
        prepare,
        kind: MountKind::Attach { fd, what },
        then: Vec::new(),
    }
}

/// The descriptors a zone's sandbox refers to, by number (held open by `boot`).
pub(super) struct Descriptors {
    pub null: RawFd,
    /// `warren-init`, run by descriptor (no `init` in the config).
    pub init: Option<RawFd>,
    /// The mounted disk.max image (a detached mount).
    pub disk: Option<RawFd>,
    /// The shared /dev template, a detached read-only bind.
    pub dev: RawFd,
    pub userns: Option<UsernsDescriptors>,
    /// lxcfs's views (`crate::procviews`), by their path in the zone's root.
    pub views: Vec<(&'static str, RawFd)>,
}

/// A user-namespaced zone's namespaces and idmapped mounts.
pub(super) struct UsernsDescriptors {
    pub range: IdRange,
    pub user: RawFd,
    pub uts: Option<RawFd>,
    pub ipc: Option<RawFd>,
    pub net: Option<RawFd>,
    /// The idmapped template (overlay) or zone root (bind).
    pub root: RawFd,
    /// The idmapped template binds, in order.
    pub binds: Vec<RawFd>,
}

impl Fds {
    pub(super) fn descriptors(&self) -> Descriptors {
        let raw = |f: &Option<std::fs::File>| f.as_ref().map(AsRawFd::as_raw_fd);
        Descriptors {
            null: self.null.as_raw_fd(),
            init: raw(&self.init),
            dev: self.dev.as_raw_fd(),
            disk: self.disk.as_ref().map(|(_, m)| m.as_raw_fd()),
            userns: self.userns.as_ref().map(|u| UsernsDescriptors {
                range: u.range,
                user: u.ns.user.as_raw_fd(),
                uts: raw(&u.ns.uts),
                ipc: raw(&u.ns.ipc),
                net: raw(&u.ns.net),
                root: u.root.as_raw_fd(),
                binds: u.binds.iter().map(AsRawFd::as_raw_fd).collect(),
            }),
            views: self
                .views
                .iter()
                .map(|(rel, fd)| (*rel, fd.as_raw_fd()))
                .collect(),
        }
    }
}

/// The zone `spec` as a sandbox.
pub(super) fn zone_spec(spec: &BootSpec<'_>, fds: &Descriptors) -> Result<SandboxSpec> {
    let zone = spec.zone;
    let root = spec.root.target().to_path_buf();
    let own_net = spec.config.net != NetMode::Host;
    let us = fds.userns.as_ref();
    // With a user namespace, the network, UTS and IPC namespaces already exist (owned
    // by it, so the zone's root has capabilities there); the child joins them.
    let mut new = libc::CLONE_NEWNS | libc::CLONE_NEWPID;
    let mut join = Vec::new();
    match us {
        None => {
            new |= libc::CLONE_NEWUTS | libc::CLONE_NEWIPC;
            if own_net {
                new |= libc::CLONE_NEWNET;
            }
        }
        Some(u) => {
            for (fd, nstype, name) in [
                (u.uts, libc::CLONE_NEWUTS, "UTS"),
                (u.ipc, libc::CLONE_NEWIPC, "IPC"),
                (u.net, libc::CLONE_NEWNET, "network"),
            ] {
                if let Some(fd) = fd {
                    join.push((nstype, fd, format!("zone's {name}")));
                }
            }
        }
    }
    // The zone's own init wins; else the image's command (run as the image's user in
    // its working directory); else warren's init.
    let image = spec.image;
    let image_init = image.filter(|i| spec.config.init.is_none() && !i.init.is_empty());
    let (exec, argv) = match (&spec.config.init, image_init) {
        (Some(cmd), _) => {
            let argv = cmd.argv();
            (
                ExecTarget::Path(cstr(&argv[0]).map_err(|e| plan_err(zone, e))?),
                argv,
            )
        }
        (None, Some(i)) => (
            ExecTarget::Path(cstr(&i.init[0]).map_err(|e| plan_err(zone, e))?),
            i.init.clone(),
        ),
        (None, None) => (
            ExecTarget::Fd(fds.init.expect("opened for warren-init")),
            vec![init::ARGV0.to_string()],
        ),
    };
    let mut env = vec![
        format!("PATH={ZONE_PATH}"),
        "HOME=/root".to_string(),
        "TERM=linux".to_string(),
        "container=warren".to_string(),
        format!("WARREN_ZONE={zone}"),
    ];
    // The image's command runs with its user's home (from the image's /etc/passwd).
    if let Some(home) = image_init.and_then(|i| i.home.as_ref()) {
        env[1] = format!("HOME={home}");
    }
    // The image's `Env`, then the zone's own `env`: an entry replaces an earlier one
    // of the same name.
    let image_env = image.map(|i| i.env.as_slice()).unwrap_or_default();
    for entry in image_env.iter().chain(&spec.config.env) {
        let key = entry.split_once('=').map_or(entry.as_str(), |(k, _)| k);
        env.retain(|e| e.split_once('=').map_or(e.as_str(), |(k, _)| k) != key);
        env.push(entry.clone());
    }
    if spec.config.init.is_none() {
        env.extend(init::encode_services(&spec.config.services));
        if spec.config.memory_merge {
            env.push(format!("{}=1", init::MERGE_ENV));
        }
    } else if spec.config.memory_merge {
        return Err(Error::config(
            zone,
            "memory.merge is set by warren-init, and this zone has its own init: unset 'init' (run the program as a service) or unset memory.merge",
        ));
    }
    for s in argv.iter().chain(env.iter()) {
        if s.contains('\0') {
            return Err(Error::config(
                zone,
                "init and services may not contain NUL bytes",
            ));
        }
    }
    let cs = |v: &[String]| -> Result<Vec<_>> {
        v.iter()
            .map(|s| cstr(s).map_err(|e| plan_err(zone, e)))
            .collect()
    };
    let confinement = Confinement::for_zone(spec.config);
    let (cwd, ids) = match image_init {
        Some(i) => (
            i.workdir.as_ref().map(std::path::PathBuf::from),
            ((i.uid, i.gid) != (0, 0)).then(|| (i.uid, i.gid, vec![i.gid])),
        ),
        None => (None, None),
    };
    let process = Process {
        exec,
        argv: cs(&argv)?,
        envp: cs(&env)?,
        rlimits: spec
            .config
            .rlimits
            .iter()
            .filter_map(|(name, l)| {
                isolation::rlimits::resource(name)
                    .map(|r| (r, l.soft, l.hard, format!("rlimit.{name}")))
            })
            .collect(),
        caps: Caps::keep(confinement.keep),
        umask: None,
        cwd,
        ids,
        ctty: None,
        setsid: false,
        gate: Vec::new(),
        no_new_privs: true,
        seccomp: Some(confinement.filter),
    };
    let mut inside = vec![root.clone()];
    if let Some(d) = spec.disk {
        inside.push(d.mountpoint.clone());
    }
    let own = private_storage(spec.root).to_path_buf();
    if !inside.iter().any(|i| own.starts_with(i)) {
        inside.push(own.clone());
    }
    // With a user namespace the idmapped template is attached over the template's own
    // path, in the child's private mount namespace only (see `root_mounts`).
    if let (RootMount::Overlay { lower, .. }, Some(_)) = (spec.root, us) {
        inside.push(lower.clone());
    }
    let dev = root.join("dev");
    // The zone's root owns its /dev/shm, its console and its ptys' tty group as it sees
    // them: with a user namespace, that is the first id of its range.
    let base = us.map_or(0, |u| u.range.base);
    let owner = us.map(|_| (base, base));
    let mut mounts = Vec::new();
    if let (Some(d), Some(mnt)) = (spec.disk, fds.disk) {
        // Mounted by the parent: the child may already be in the zone's devices cgroup,
        // which (rightly) does not let it open the loop device.
        mounts.push(attach(
            &d.mountpoint,
            Prepare::AsIs,
            mnt,
            "the disk.max image".into(),
        ));
    }
    mounts.extend(own_storage(&own, owner));
    mounts.extend(root_mounts(spec, fds)?);
    mounts.extend(kernel_mounts(&root, fds.dev, owner.map(|_| base)));
    // lxcfs's views over the fresh /proc and the read-only /sys (neither reachable by
    // the zone yet), from binds the booting process opened on the host's lxcfs mount.
    for (rel, fd) in &fds.views {
        mounts.push(attach(
            &root.join(rel),
            Prepare::AsIs,
            *fd,
            format!("lxcfs's view of /{rel} (proc-views)"),
        ));
    }
    Ok(SandboxSpec {
        namespaces: Namespaces {
            new,
            user: match us {
                Some(u) => UserNs::Join(u.user),
                None => UserNs::Inherit,
            },
            join,
            cgroup: true,
        },
        sync: Some(SyncPoint::AfterRoot),
        root: Some(Root {
            path: root.clone(),
            inside,
            propagation: libc::MS_REC | libc::MS_PRIVATE,
            private_parent: None,
            mounts,
            // The nodes and links are the shared /dev's (super::devdir).
            nodes: Vec::new(),
            links: Vec::new(),
            change: RootChange::PivotRoot,
            propagation_after: None,
            masked: isolation::MASKED_FILES
                .iter()
                .chain(isolation::MASKED_DIRS.iter())
                .map(|s| s.to_string())
                .collect(),
            readonly_paths: isolation::READONLY_DIRS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            readonly: false,
            umask_after: 0o022,
        }),
        hostname: Some(spec.config.hostname_or(zone).as_bytes().to_vec()),
        loopback_up: own_net,
        hooks_sync: None,
        sysctls: Vec::new(),
        oom_score_adj: None,
        // The console, a file in the zone's own storage opened by `own_storage`
        // (runtime::console), bound on the shared /dev's mount point.
        console: Some(Console::Log {
            fd: CONSOLE_FD,
            dev_console: dev.join(super::devdir::CONSOLE),
        }),
        stdio: vec![(fds.null.as_raw_fd(), 0), (CONSOLE_FD, 1), (CONSOLE_FD, 2)],
        hold: None,
        pass_fds: 0,
        process,
    })
}

/// The zone's root: the overlay (or bind) of the template, the template's binds.
fn root_mounts(spec: &BootSpec<'_>, fds: &Descriptors) -> Result<Vec<MountEntry>> {
    let root = spec.root.target();
    let us = fds.userns.as_ref();
    let mut out = Vec::new();
    match spec.root {
        RootMount::Overlay {
            lower,
            upper,
            work,
            target,
        } => {
            // The idmapped template is a detached mount. Overlay takes a detached mount
            // as a layer only from Linux 6.15 on ("failed to clone lowerpath" on Debian
            // 12's 6.1 and on 6.12), so the child first attaches it over the
            // template's path in its own (private) mount namespace, and overlay takes
            // that path: idmapped layers work from 5.19 on (docs/cgroup-v2.md).
            if let Some(u) = us {
                out.push(attach(
                    lower,
                    Prepare::AsIs,
                    u.root,
                    "the idmapped template".into(),
                ));
            }
            let opts = super::overlay_options(lower, upper, work)?;
            // nodev: an image's (or a zone's) device nodes open nothing, also for a
            // host user who reaches them through /proc/<pid>/root; the zone's /dev
            // is the shared template of the nodes warren allows.
            out.push(mount(
                target,
                Prepare::AsIs,
                Some("overlay"),
                Some("overlay"),
                libc::MS_NODEV,
                Some(opts),
            ));
        }
        RootMount::Bind { source } => match us {
            Some(u) => out.push(attach(
                source,
                Prepare::AsIs,
                u.root,
                "the idmapped root".into(),
            )),
            None => {
                let mut m = mount(
                    source,
                    Prepare::AsIs,
                    Some(&source.to_string_lossy()),
                    None,
                    libc::MS_BIND | libc::MS_REC,
                    None,
                );
                // nodev, as the overlay root above.
                m.then
                    .push((libc::MS_BIND | libc::MS_REMOUNT | libc::MS_NODEV, None));
                out.push(m);
            }
        },
    }
    for (i, b) in spec.binds.iter().enumerate() {
        let target = root.join(&b.target);
        let check = Prepare::CheckBeneath {
            root: root.to_path_buf(),
            rel: b.target.clone(),
        };
        if let Some(u) = us {
            // Read-only and nodev were set with the id mapping (mount_setattr).
            out.push(attach(
                &target,
                check,
                u.binds[i],
                format!("the idmapped {}", b.source.display()),
            ));
            continue;
        }
        let mut m = mount(
            &target,
            check,
            Some(&b.source.to_string_lossy()),
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        );
        if b.readonly {
            m.then.push((
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NODEV,
                None,
            ));
        }
        out.push(m);
    }
    Ok(out)
}

/// The zone's own storage beside its root ([`private_storage`], before the root
/// covers it): its /dev/shm directory and its console file, opened and kept at
/// [`SHM_FD`] and [`CONSOLE_FD`] for the binds on /dev. Both count against the zone's
/// `disk.max` when it has one (they are on its image). The console is truncated at
/// each boot (halt saved it); `O_NOFOLLOW` refuses a link there, though only the host
/// writes this directory.
fn own_storage(own: &Path, owner: Option<(u32, u32)>) -> Vec<MountEntry> {
    let entry = |target: PathBuf, kind| MountEntry {
        target,
        prepare: Prepare::AsIs,
        kind,
        then: Vec::new(),
    };
    let shm = own.join(SHM_DIR);
    vec![
        entry(
            shm.clone(),
            MountKind::Dir {
                mode: 0o1777,
                owner,
            },
        ),
        entry(
            shm,
            MountKind::Keep {
                flags: libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode: 0,
                owner: None,
                fd: SHM_FD,
            },
        ),
        entry(
            own.join(console::FILE),
            MountKind::Keep {
                flags: libc::O_WRONLY
                    | libc::O_APPEND
                    | libc::O_CREAT
                    | libc::O_TRUNC
                    | libc::O_NOFOLLOW
                    | libc::O_CLOEXEC,
                mode: 0o600,
                owner,
                fd: CONSOLE_FD,
            },
        ),
    ]
}

/// /proc, /sys (the host's sysfs, read-only), /dev (the shared template `dev`, a
/// detached read-only bind) with the zone's devpts and /dev/shm on it. `owner`: the
/// zone root's host id when it has a user namespace.
fn kernel_mounts(root: &Path, dev_fd: RawFd, owner: Option<u32>) -> Vec<MountEntry> {
    let check = |rel: &str| Prepare::CheckBeneath {
        root: root.to_path_buf(),
        rel: rel.to_string(),
    };
    let nosuid_nodev_noexec = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let mut out = vec![mount(
        &root.join("proc"),
        check("proc"),
        Some("proc"),
        Some("proc"),
        nosuid_nodev_noexec,
        None,
    )];
    // /sys is the host's sysfs, bound read-only and without its submounts, rather than
    // a new sysfs instance: every superblock registers a shrinker, and every memory
    // cgroup keeps per-shrinker state, so per-zone superblocks cost O(zones²) kernel
    // memory. The price: /sys/class/net lists the host's devices (read-only).
    let mut sys = mount(
        &root.join("sys"),
        check("sys"),
        Some("/sys"),
        None,
        libc::MS_BIND,
        None,
    );
    sys.then.push((
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | nosuid_nodev_noexec,
        None,
    ));
    out.push(sys);
    let dev = root.join("dev");
    let base = owner.unwrap_or(0);
    // The shared /dev (read-only, nosuid, noexec, its nodes usable), for the same
    // reason: a tmpfs per zone was a superblock per zone.
    out.push(attach(
        &dev,
        check("dev"),
        dev_fd,
        "the shared /dev (read-only)".into(),
    ));
    out.push(mount(
        &dev.join(super::devdir::PTS),
        Prepare::AsIs,
        Some("devpts"),
        Some("devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        // gid 5 is "tty" inside the zone.
        Some(format!(
            "newinstance,ptmxmode=0666,mode=0620,gid={}",
            base + 5
        )),
    ));
    // /dev/shm: the directory kept open by `own_storage`, in the zone's own storage.
    let mut shm = mount(
        &dev.join(super::devdir::SHM),
        Prepare::AsIs,
        Some(&format!("/proc/self/fd/{SHM_FD}")),
        None,
        libc::MS_BIND,
        None,
    );
    shm.then
        .push((libc::MS_BIND | libc::MS_REMOUNT | nosuid_nodev_noexec, None));
    out.push(shm);
    out
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
