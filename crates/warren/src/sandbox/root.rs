//! The root part of a plan (`sandbox::plan`): before the root change, `/`'s
//! propagation, the mount list, device nodes, links and the console; the root change;
//! after it, masks, a read-only `/` and the umask.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use warren_sys::libc;
use warren_sys::spawn::Step;

use super::plan::{cpath, cstr, Plan, PlanError};
use super::spec::*;

/// Before the root change: propagation, mounts, nodes, links.
pub(super) fn build_root(p: &mut Plan, root: &Root) -> Result<(), PlanError> {
    p.push(Step::Umask(0), "clear the umask (modes are exact)");
    p.mount(None, Path::new("/"), None, root.propagation, None)?;
    if let Some(parent) = &root.private_parent {
        p.mount(None, parent, None, libc::MS_PRIVATE, None)?;
    }
    for m in &root.mounts {
        mount_entry(p, m)?;
    }
    for n in &root.nodes {
        node(p, n)?;
    }
    for (link, to) in &root.links {
        p.tolerate_exists(
            Step::Symlink {
                target: cstr(to)?,
                link: cpath(link)?,
            },
            format!("create link {}", link.display()),
        );
    }
    Ok(())
}

fn mount_entry(p: &mut Plan, m: &MountEntry) -> Result<(), PlanError> {
    let target = &m.target;
    match &m.prepare {
        Prepare::AsIs => {}
        Prepare::CheckBeneath { root, rel } => p.push(
            Step::CheckBeneath {
                root: cpath(root)?,
                rel: cstr(rel)?,
            },
            format!(
                "check that /{rel} is a directory inside the root {}, reached without symlinks; a root whose /{rel} is a symlink, a file or missing is refused: make it a directory in the template (or the zone)",
                root.display()
            ),
        ),
        Prepare::Dirs { root } => p.dirs(root, target)?,
        Prepare::File { root } => {
            if let Some(parent) = target.parent() {
                p.dirs(root, parent)?;
            }
            p.tolerate_exists(
                Step::CreateFile {
                    path: cpath(target)?,
                    mode: 0o644,
                },
                format!("create {}", target.display()),
            );
        }
    }
    match &m.kind {
        MountKind::Mount {
            source,
            fstype,
            flags,
            data,
        } => p.mount(
            source.as_deref(),
            target,
            fstype.as_deref(),
            *flags,
            data.as_deref(),
        )?,
        MountKind::Attach { fd, what } => p.push(
            Step::MoveMount {
                fd: *fd,
                target: cpath(target)?,
            },
            format!("attach {what} on {}", target.display()),
        ),
        MountKind::Dir { mode, owner } => {
            p.tolerate_exists(
                Step::Mkdir {
                    path: cpath(target)?,
                    mode: *mode,
                },
                format!("create {}", target.display()),
            );
            if let Some((uid, gid)) = owner {
                p.push(
                    Step::Chown {
                        path: cpath(target)?,
                        uid: *uid,
                        gid: *gid,
                    },
                    format!("give {} to {uid}:{gid}", target.display()),
                );
            }
        }
        MountKind::Link { to } => p.tolerate_exists(
            Step::Symlink {
                target: cstr(to)?,
                link: cpath(target)?,
            },
            format!("create link {}", target.display()),
        ),
        MountKind::Keep {
            flags,
            mode,
            owner,
            fd,
        } => {
            p.push(
                Step::Open {
                    path: cpath(target)?,
                    flags: *flags,
                    mode: *mode,
                    fd: *fd,
                },
                format!("open {}", target.display()),
            );
            if let Some((uid, gid)) = owner {
                p.push(
                    Step::Chown {
                        path: cpath(target)?,
                        uid: *uid,
                        gid: *gid,
                    },
                    format!("give {} to {uid}:{gid}", target.display()),
                );
            }
        }
    }
    for (flags, data) in &m.then {
        p.mount(None, target, None, *flags, data.as_deref())?;
    }
    Ok(())
}

fn node(p: &mut Plan, n: &Node) -> Result<(), PlanError> {
    if let (Some(root), Some(parent)) = (&n.dirs_beneath, n.at.parent()) {
        p.dirs(root, parent)?;
    }
    if n.bind {
        p.tolerate_exists(
            Step::CreateFile {
                path: cpath(&n.at)?,
                mode: 0o644,
            },
            format!("create {}", n.at.display()),
        );
        return p.mount(
            Some(n.host.as_os_str().as_bytes()),
            &n.at,
            None,
            libc::MS_BIND,
            None,
        );
    }
    p.tolerate_exists(
        Step::Mknod {
            path: cpath(&n.at)?,
            mode: n.kind | (n.mode & 0o7777),
            dev: libc::makedev(n.major, n.minor),
        },
        format!("create device {}", n.at.display()),
    );
    if (n.uid, n.gid) != (0, 0) {
        p.push(
            Step::Chown {
                path: cpath(&n.at)?,
                uid: n.uid,
                gid: n.gid,
            },
            format!("give {} to {}:{}", n.at.display(), n.uid, n.gid),
        );
    }
    Ok(())
}

/// The console: a log file or a pty, bound on the root's /dev/console.
pub(super) fn console(p: &mut Plan, spec: &SandboxSpec) -> Result<(), PlanError> {
    let (fd, dev_console) = match &spec.console {
        None => return Ok(()),
        // The log was opened by the mount list; its dev_console is there already. The
        // bind is nosuid, nodev and noexec, as a /dev is.
        Some(Console::Log { fd, dev_console }) => {
            let src = format!("/proc/self/fd/{fd}");
            p.mount(Some(src.as_bytes()), dev_console, None, libc::MS_BIND, None)?;
            return p.mount(
                None,
                dev_console,
                None,
                libc::MS_BIND
                    | libc::MS_REMOUNT
                    | libc::MS_NOSUID
                    | libc::MS_NODEV
                    | libc::MS_NOEXEC,
                None,
            );
        }
        Some(Console::Pty {
            ptmx,
            socket,
            slave_fd,
            rows,
            cols,
            dev_console,
        }) => {
            p.push(
                Step::Console {
                    ptmx: cpath(ptmx)?,
                    socket: *socket,
                    slave_fd: *slave_fd,
                    rows: *rows,
                    cols: *cols,
                },
                "allocate the console pty (needs a devpts mount at /dev/pts) and send it to the console socket",
            );
            (*slave_fd, dev_console.as_ref())
        }
    };
    if let Some(at) = dev_console {
        p.tolerate_exists(
            Step::CreateFile {
                path: cpath(at)?,
                mode: 0o600,
            },
            format!("create {}", at.display()),
        );
        let src = format!("/proc/self/fd/{fd}");
        p.mount(Some(src.as_bytes()), at, None, libc::MS_BIND, None)?;
    }
    Ok(())
}

pub(super) fn change_root(p: &mut Plan, root: &Root) -> Result<(), PlanError> {
    let new_root = cpath(&root.path)?;
    match root.change {
        RootChange::PivotRoot => p.push(
            Step::PivotRoot { new_root },
            format!("pivot_root into {}", root.path.display()),
        ),
        RootChange::MoveRoot => p.push(
            Step::MoveRoot { new_root },
            "move the root onto / and chroot (--no-pivot)",
        ),
    }
    if let Some(prop) = root.propagation_after {
        // The root's own propagation, which exists as "/" only now (as runc).
        p.mount(None, Path::new("/"), None, prop, None)?;
    }
    Ok(())
}

/// After the root change: masks, a read-only `/`, the umask back.
pub(super) fn after_root_change(p: &mut Plan, root: &Root) -> Result<(), PlanError> {
    let masks = super::masks::steps(
        Path::new("/"),
        Path::new("/dev"),
        root.masked.iter().map(String::as_str),
        root.readonly_paths.iter().map(String::as_str),
    )?;
    for (step, what) in masks {
        p.push(step, what);
    }
    if root.readonly {
        p.mount(
            None,
            Path::new("/"),
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
            None,
        )?;
    }
    p.push(Step::Umask(root.umask_after), "set the umask");
    Ok(())
}
