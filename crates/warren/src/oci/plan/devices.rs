//! The device nodes and /dev links of a container (the one list in
//! `isolation::devices`, plus `linux.devices`).

use super::*;

/// The runtime-spec's default devices, then `linux.devices`; the /dev links.
pub(super) fn devices(
    p: &mut Plan,
    linux: &oci_spec::runtime::Linux,
    rootfs: &Path,
    userns: bool,
) -> Result<(), String> {
    let mut list: Vec<(PathBuf, libc::mode_t, u64, u64, u32, u32, u32)> =
        crate::isolation::devices::NODES
            .iter()
            .map(|n| {
                (
                    Path::new("/dev").join(n.name),
                    libc::S_IFCHR,
                    n.major as u64,
                    n.minor as u64,
                    n.mode,
                    0,
                    0,
                )
            })
            .collect();
    for d in linux.devices().iter().flatten() {
        use oci_spec::runtime::LinuxDeviceType as T;
        let kind = match d.typ() {
            T::C | T::U => libc::S_IFCHR,
            T::B => libc::S_IFBLK,
            T::P => libc::S_IFIFO,
            T::A => {
                return Err(format!(
                    "linux.devices {}: type must be c, b, u or p",
                    d.path().display()
                ))
            }
        };
        list.retain(|x| x.0 != *d.path());
        list.push((
            d.path().clone(),
            kind,
            d.major() as u64,
            d.minor() as u64,
            d.file_mode().unwrap_or(0o666),
            d.uid().unwrap_or(0),
            d.gid().unwrap_or(0),
        ));
    }
    // linux.devices get exactly their fileMode (and uid, gid), whatever the runtime's
    // umask: mknod under umask 0, the caller's umask back afterwards (runtime spec:
    // the process keeps it unless process.user.umask says otherwise).
    if !userns {
        p.push(Step::Umask(0), "clear the umask for the device nodes");
    }
    for (path, kind, major, minor, mode, uid, gid) in list {
        let at = secure_join(rootfs, &path);
        if let Some(parent) = at.parent() {
            super::mounts::mkdirs(p, rootfs, parent)?;
        }
        if userns {
            // mknod is refused in a user namespace: bind the host's node instead.
            p.push(
                Step::Tolerate(
                    libc::EEXIST,
                    Box::new(Step::CreateFile {
                        path: cpath(&at)?,
                        mode: 0o644,
                    }),
                ),
                format!("create {}", at.display()),
            );
            p.mount(
                Some(path.as_os_str().as_bytes()),
                &at,
                None,
                libc::MS_BIND,
                None,
            )?;
        } else {
            p.push(
                Step::Tolerate(
                    libc::EEXIST,
                    Box::new(Step::Mknod {
                        path: cpath(&at)?,
                        mode: kind | (mode & 0o7777),
                        dev: libc::makedev(major as u32, minor as u32),
                    }),
                ),
                format!("create device {}", path.display()),
            );
            if (uid, gid) != (0, 0) {
                p.push(
                    Step::Chown {
                        path: cpath(&at)?,
                        uid,
                        gid,
                    },
                    format!("give {} to {uid}:{gid}", path.display()),
                );
            }
        }
    }
    if !userns {
        p.push(
            Step::Umask(warren_sys::proc::current_umask() as libc::mode_t),
            "restore the caller's umask",
        );
    }
    for (name, target) in crate::isolation::devices::LINKS {
        let link = format!("/dev/{name}");
        let at = secure_join(rootfs, Path::new(&link));
        p.push(
            Step::Tolerate(
                libc::EEXIST,
                Box::new(Step::Symlink {
                    target: cstr(target)?,
                    link: cpath(&at)?,
                }),
            ),
            format!("link {link}"),
        );
    }
    Ok(())
}
