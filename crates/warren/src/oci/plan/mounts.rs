//! `mounts[]` entries (and the cgroup filesystem) inside the rootfs, as the sandbox's
//! mount list.

use super::*;

fn entry(
    target: &Path,
    prepare: Prepare,
    source: Option<&[u8]>,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> MountEntry {
    MountEntry {
        target: target.to_path_buf(),
        prepare,
        kind: MountKind::Mount {
            source: source.map(<[u8]>::to_vec),
            fstype: fstype.map(str::to_string),
            flags,
            data: data.map(str::to_string),
        },
        then: Vec::new(),
    }
}

/// The entries of one `mounts[]` element: its target made, the mount, its remounts
/// and propagation.
pub(super) fn entries(m: &Mount, i: &InitInputs<'_>) -> Result<Vec<MountEntry>, PlanError> {
    let rootfs = i.rootfs;
    if !m.destination().is_absolute() {
        return Err(PlanError::field(
            "destination",
            "must be an absolute path inside the container",
        ));
    }
    let dest = secure_join(rootfs, m.destination());
    let typ = m.typ().clone().unwrap_or_default();
    let o = parse_options(&m.options().clone().unwrap_or_default());
    let data = (!o.data.is_empty()).then(|| o.data.join(","));
    let dirs = || Prepare::Dirs {
        root: rootfs.to_path_buf(),
    };
    let mut out = if typ == "bind" || o.bind {
        let src = m
            .source()
            .clone()
            .ok_or_else(|| PlanError::field("source", "a bind mount needs a source"))?;
        let src = if src.is_absolute() {
            src
        } else {
            i.bundle.join(src)
        };
        let meta = std::fs::metadata(&src)
            .map_err(|e| PlanError::field("source", format!("{}: {e}", src.display())))?;
        let prepare = if meta.is_dir() {
            dirs()
        } else {
            Prepare::File {
                root: rootfs.to_path_buf(),
            }
        };
        let rec = if o.recursive { libc::MS_REC } else { 0 };
        let mut e = entry(
            &dest,
            prepare,
            Some(src.as_os_str().as_bytes()),
            None,
            libc::MS_BIND | rec,
            data.as_deref(),
        );
        let extra = o.flags & !libc::MS_REMOUNT;
        if extra != 0 {
            e.then
                .push((libc::MS_BIND | libc::MS_REMOUNT | rec | extra, None));
        }
        vec![e]
    } else if typ == "cgroup" || typ == "cgroup2" {
        cgroup_entries(&dest, i.cgroups, o.flags, rootfs)?
    } else {
        let src = m
            .source()
            .clone()
            .map(|s| std::os::unix::ffi::OsStringExt::into_vec(s.into_os_string()))
            .unwrap_or_else(|| typ.clone().into_bytes());
        let fstype = (!typ.is_empty()).then_some(typ.as_str());
        vec![entry(
            &dest,
            dirs(),
            Some(&src),
            fstype,
            o.flags,
            data.as_deref(),
        )]
    };
    for prop in &o.propagation {
        out.push(entry(&dest, Prepare::AsIs, None, None, *prop, None));
    }
    Ok(out)
}

/// A cgroup mount: on v1, a tmpfs with a read-only bind of each of the container's
/// own cgroup directories (so it sees only itself, with or without a cgroup
/// namespace); on v2, a bind of its directory.
fn cgroup_entries(
    dest: &Path,
    set: &CgroupSet,
    flags: libc::c_ulong,
    rootfs: &Path,
) -> Result<Vec<MountEntry>, PlanError> {
    let ro = flags & libc::MS_RDONLY;
    let base = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let dirs = Prepare::Dirs {
        root: rootfs.to_path_buf(),
    };
    let bind_ro = |at: &Path, dir: &Path, prepare: Prepare| {
        let mut e = entry(
            at,
            prepare,
            Some(dir.as_os_str().as_bytes()),
            None,
            libc::MS_BIND,
            None,
        );
        e.then
            .push((libc::MS_BIND | libc::MS_REMOUNT | base | ro, None));
        e
    };
    match set.version {
        CgroupVersion::V2 => {
            let dir = &set
                .dirs
                .first()
                .ok_or_else(|| PlanError::field("type", "cgroup: the container has no cgroup"))?
                .1;
            Ok(vec![bind_ro(dest, dir, dirs)])
        }
        CgroupVersion::V1 => {
            let mut out = vec![entry(
                dest,
                dirs,
                Some(b"tmpfs"),
                Some("tmpfs"),
                base,
                Some("mode=755"),
            )];
            for (ctrls, dir) in &set.dirs {
                let at = dest.join(ctrls);
                out.push(MountEntry {
                    target: at.clone(),
                    prepare: Prepare::AsIs,
                    kind: MountKind::Dir {
                        mode: 0o755,
                        owner: None,
                    },
                    then: Vec::new(),
                });
                out.push(bind_ro(&at, dir, Prepare::AsIs));
                if ctrls.contains(',') {
                    for c in ctrls.split(',') {
                        out.push(MountEntry {
                            target: dest.join(c),
                            prepare: Prepare::AsIs,
                            kind: MountKind::Link { to: ctrls.clone() },
                            then: Vec::new(),
                        });
                    }
                }
            }
            if ro != 0 {
                out.push(MountEntry {
                    target: dest.to_path_buf(),
                    prepare: Prepare::AsIs,
                    kind: MountKind::Mount {
                        source: None,
                        fstype: None,
                        flags: libc::MS_REMOUNT | base | ro,
                        data: Some("mode=755".into()),
                    },
                    then: Vec::new(),
                });
            }
            Ok(out)
        }
    }
}
