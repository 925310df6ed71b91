//! A zone as a sandbox: its config and template converted into a
//! [`SandboxSpec`] (pure, given the descriptors `boot` opened).
//!
//! The zone's choices: the root is an overlay of the template (or a bind of the
//! zone's own tree), mounted with the host's privileges in a mount namespace the host
//! owns; every mount target in the tree is checked in the child to be a directory
//! reached without a symlink ([`Prepare::CheckBeneath`]); /sys is the host's sysfs
//! bound read-only; /dev is one small tmpfs with the nodes of `isolation::devices`
//! and the console; the parent's go comes after the root is
//! built ([`SyncPoint::AfterRoot`]), then the user namespace is joined.

use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;

use warren_sys::libc;
use warren_sys::spawn::ExecTarget;

use super::{console, init, BootSpec, Fds, CONSOLE_FD, ZONE_PATH};
use crate::config::NetMode;
use crate::error::{Error, Result};
use crate::idmap::IdRange;
use crate::isolation::{self, Confinement};
use crate::sandbox::plan::{cstr, PlanError};
use crate::sandbox::spec::*;
use crate::sandbox::SandboxSpec;
use crate::storage::RootMount;

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
    // With a user namespace the idmapped template is attached over the template's own
    // path, in the child's private mount namespace only (see `root_mounts`).
    if let (RootMount::Overlay { lower, .. }, Some(_)) = (spec.root, us) {
        inside.push(lower.clone());
    }
    let dev = root.join("dev");
    // The zone's root owns /dev (and /dev/shm, the nodes, the ptys' tty group) as it
    // sees them: with a user namespace, that is the first id of its range.
    let base = us.map_or(0, |u| u.range.base);
    let mut mounts = root_mounts(spec, fds)?;
    mounts.extend(kernel_mounts(&root, us.map(|_| base)));
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
    let nodes = isolation::devices::NODES
        .iter()
        .map(|n| Node {
            at: dev.join(n.name),
            host: Path::new("/dev").join(n.name),
            kind: libc::S_IFCHR,
            major: n.major,
            minor: n.minor,
            mode: n.mode,
            uid: base,
            gid: base,
            dirs_beneath: None,
            bind: false,
        })
        .collect();
    let links = isolation::devices::LINKS
        .iter()
        .map(|(link, to)| (dev.join(link), to.to_string()))
        .collect();
    let console_dir = dev.join(console::MOUNT_DIR);
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
            nodes,
            links,
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
        // The console on the zone's /dev tmpfs (runtime::console), in a directory of
        // host root's that the zone cannot enter, its file opened as init's stdout.
        console: Some(Console::Log {
            file: console_dir.join(console::FILE),
            dir: console_dir,
            owner: us.map(|_| (base, base)),
            fd: CONSOLE_FD,
            dev_console: dev.join("console"),
        }),
        stdio: vec![(fds.null.as_raw_fd(), 0), (CONSOLE_FD, 1), (CONSOLE_FD, 2)],
        hold: None,
        pass_fds: 0,
        process,
    })
}

/// The zone's root: the disk.max image, the overlay (or bind) of the template, the
/// template's binds.
fn root_mounts(spec: &BootSpec<'_>, fds: &Descriptors) -> Result<Vec<MountEntry>> {
    let root = spec.root.target();
    let us = fds.userns.as_ref();
    let mut out = Vec::new();
    if let (Some(d), Some(mnt)) = (spec.disk, fds.disk) {
        // Mounted by the parent: the child may already be in the zone's devices cgroup,
        // which (rightly) does not let it open the loop device.
        out.push(attach(
            &d.mountpoint,
            Prepare::AsIs,
            mnt,
            "the disk.max image".into(),
        ));
    }
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
            // is a tmpfs of its own where warren makes the nodes it allows.
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

/// /proc, /sys (the host's sysfs, read-only), /dev (a tmpfs with /dev/pts and
/// /dev/shm). `owner`: the zone root's host id when it has a user namespace.
fn kernel_mounts(root: &Path, owner: Option<u32>) -> Vec<MountEntry> {
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
    // One tmpfs for the device nodes, /dev/shm and the console (see /sys above for why
    // not three).
    out.push(mount(
        &dev,
        check("dev"),
        Some("tmpfs"),
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some(format!(
            "mode=755,size={},nr_inodes=4096{}",
            console::DEV_TMPFS_SIZE,
            owner.map_or(String::new(), |b| format!(",uid={b},gid={b}"))
        )),
    ));
    for (name, mode) in [("pts", 0o755), ("shm", 0o1777)] {
        out.push(MountEntry {
            target: dev.join(name),
            prepare: Prepare::AsIs,
            kind: MountKind::Dir {
                mode,
                owner: owner.map(|b| (b, b)),
            },
            then: Vec::new(),
        });
    }
    out.push(mount(
        &dev.join("pts"),
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
    out
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
