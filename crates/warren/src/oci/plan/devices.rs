//! The device nodes and /dev links of a container (the one list in
//! `isolation::devices`, plus `linux.devices`), as the sandbox's nodes.

use super::*;

/// The runtime-spec's default devices, then `linux.devices` (exactly their fileMode,
/// uid and gid: the root's steps run under umask 0); the /dev links.
pub(super) fn nodes(
    linux: &oci_spec::runtime::Linux,
    rootfs: &Path,
    userns: bool,
) -> Result<(Vec<Node>, Vec<Link>), PlanError> {
    let node = |path: &Path, kind, major, minor, mode, uid, gid| Node {
        at: secure_join(rootfs, path),
        host: path.to_path_buf(),
        kind,
        major,
        minor,
        mode,
        uid,
        gid,
        dirs_beneath: Some(rootfs.to_path_buf()),
        // mknod is refused in a user namespace: bind the host's node instead.
        bind: userns,
    };
    let mut list: Vec<Node> = crate::isolation::devices::NODES
        .iter()
        .map(|n| {
            node(
                &Path::new("/dev").join(n.name),
                libc::S_IFCHR,
                n.major,
                n.minor,
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
                return Err(PlanError::field(
                    format!("linux.devices {}", d.path().display()),
                    "type must be c, b, u or p",
                ))
            }
        };
        list.retain(|x| x.host != *d.path());
        list.push(node(
            d.path(),
            kind,
            d.major() as u32,
            d.minor() as u32,
            d.file_mode().unwrap_or(0o666),
            d.uid().unwrap_or(0),
            d.gid().unwrap_or(0),
        ));
    }
    let links = crate::isolation::devices::LINKS
        .iter()
        .map(|(name, target)| {
            (
                secure_join(rootfs, &Path::new("/dev").join(name)),
                target.to_string(),
            )
        })
        .collect();
    Ok((list, links))
}
