//! `mounts[]` entries (and the cgroup filesystem) inside the rootfs.

use super::*;

/// mkdir -p of `dir` inside the rootfs, one step per component (existing is fine).
pub(super) fn mkdirs(p: &mut Plan, rootfs: &Path, dir: &Path) -> Result<(), String> {
    let rel = dir
        .strip_prefix(rootfs)
        .map_err(|_| format!("{} is outside the rootfs", dir.display()))?;
    let mut at = rootfs.to_path_buf();
    for c in rel.components() {
        at.push(c);
        p.push(
            Step::Mkdir {
                path: cpath(&at)?,
                mode: 0o755,
            },
            format!("create {}", at.display()),
        );
    }
    Ok(())
}

pub(super) fn mount_entry(
    p: &mut Plan,
    m: &Mount,
    i: &InitInputs<'_>,
    userns: bool,
) -> Result<(), String> {
    let rootfs = i.rootfs;
    if !m.destination().is_absolute() {
        return Err("destination must be an absolute path".into());
    }
    let dest = secure_join(rootfs, m.destination());
    let typ = m.typ().clone().unwrap_or_default();
    let o = parse_options(&m.options().clone().unwrap_or_default());
    let data = (!o.data.is_empty()).then(|| o.data.join(","));
    if typ == "bind" || o.bind {
        let src = m.source().clone().ok_or("a bind mount needs a source")?;
        let src = if src.is_absolute() {
            src
        } else {
            i.bundle.join(src)
        };
        let meta = std::fs::metadata(&src).map_err(|e| format!("source {}: {e}", src.display()))?;
        if meta.is_dir() {
            mkdirs(p, rootfs, &dest)?;
        } else {
            if let Some(parent) = dest.parent() {
                mkdirs(p, rootfs, parent)?;
            }
            p.push(
                Step::Tolerate(
                    libc::EEXIST,
                    Box::new(Step::CreateFile {
                        path: cpath(&dest)?,
                        mode: 0o644,
                    }),
                ),
                format!("create {}", dest.display()),
            );
        }
        let rec = if o.recursive { libc::MS_REC } else { 0 };
        p.mount(
            Some(src.as_os_str().as_bytes()),
            &dest,
            None,
            libc::MS_BIND | rec,
            data.as_deref(),
        )?;
        let extra = o.flags & !libc::MS_REMOUNT;
        if extra != 0 {
            p.mount(
                None,
                &dest,
                None,
                libc::MS_BIND | libc::MS_REMOUNT | rec | extra,
                None,
            )?;
        }
    } else if typ == "cgroup" || typ == "cgroup2" {
        cgroup_mount(p, &dest, i.cgroups, o.flags, rootfs, userns)?;
    } else {
        mkdirs(p, rootfs, &dest)?;
        let src = m
            .source()
            .clone()
            .map(|s| std::os::unix::ffi::OsStringExt::into_vec(s.into_os_string()))
            .unwrap_or_else(|| typ.clone().into_bytes());
        let fstype = if typ.is_empty() {
            None
        } else {
            Some(typ.as_str())
        };
        p.mount(Some(&src), &dest, fstype, o.flags, data.as_deref())?;
    }
    for prop in &o.propagation {
        p.mount(None, &dest, None, *prop, None)?;
    }
    Ok(())
}

/// A cgroup mount: on v1, a tmpfs with a read-only bind of each of the container's
/// own cgroup directories (so it sees only itself, with or without a cgroup
/// namespace); on v2, a bind of its directory.
fn cgroup_mount(
    p: &mut Plan,
    dest: &Path,
    set: &CgroupSet,
    flags: libc::c_ulong,
    rootfs: &Path,
    _userns: bool,
) -> Result<(), String> {
    mkdirs(p, rootfs, dest)?;
    let ro = flags & libc::MS_RDONLY;
    let base = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    match set.version {
        CgroupVersion::V2 => {
            let dir = &set.dirs.first().ok_or("the container has no cgroup")?.1;
            p.mount(
                Some(dir.as_os_str().as_bytes()),
                dest,
                None,
                libc::MS_BIND,
                None,
            )?;
            p.mount(
                None,
                dest,
                None,
                libc::MS_BIND | libc::MS_REMOUNT | base | ro,
                None,
            )?;
        }
        CgroupVersion::V1 => {
            p.mount(Some(b"tmpfs"), dest, Some("tmpfs"), base, Some("mode=755"))?;
            for (ctrls, dir) in &set.dirs {
                let at = dest.join(ctrls);
                p.push(
                    Step::Mkdir {
                        path: cpath(&at)?,
                        mode: 0o755,
                    },
                    format!("create {}", at.display()),
                );
                p.mount(
                    Some(dir.as_os_str().as_bytes()),
                    &at,
                    None,
                    libc::MS_BIND,
                    None,
                )?;
                p.mount(
                    None,
                    &at,
                    None,
                    libc::MS_BIND | libc::MS_REMOUNT | base | ro,
                    None,
                )?;
                if ctrls.contains(',') {
                    for c in ctrls.split(',') {
                        let link = dest.join(c);
                        p.push(
                            Step::Tolerate(
                                libc::EEXIST,
                                Box::new(Step::Symlink {
                                    target: cstr(ctrls)?,
                                    link: cpath(&link)?,
                                }),
                            ),
                            format!("link {}", link.display()),
                        );
                    }
                }
            }
            if ro != 0 {
                p.mount(
                    None,
                    dest,
                    None,
                    libc::MS_REMOUNT | base | ro,
                    Some("mode=755"),
                )?;
            }
        }
    }
    Ok(())
}
