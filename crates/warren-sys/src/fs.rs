//! Filesystem syscalls std does not offer: reflinks, statfs, xattrs, device nodes,
//! ownership and times without following symlinks, btrfs subvolumes, mounts.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::{cstring, cvt};

fn cpath(p: &Path) -> io::Result<CString> {
    cstring(p.as_os_str().as_bytes())
}

/// `ioctl(dst, FICLONE, src)`: share `src`'s extents with `dst` (btrfs, XFS with reflink).
pub fn reflink(src: &File, dst: &File) -> io::Result<()> {
    // SAFETY: FICLONE takes the source descriptor as its argument; both are open files.
    cvt(unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) }).map(drop)
}

/// The filesystem magic number of the filesystem holding `path` (`statfs.f_type`).
pub fn fs_magic(path: &Path) -> io::Result<i64> {
    let c = cpath(path)?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c` is NUL-terminated; statfs fills `st` on success.
    cvt(unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) })?;
    // SAFETY: statfs succeeded, so `st` is initialised.
    Ok(unsafe { st.assume_init() }.f_type)
}

/// Space of the filesystem holding `path`, from `statvfs(2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsSpace {
    /// Bytes an unprivileged user may still allocate (f_bavail × f_frsize).
    pub avail_bytes: u64,
    /// Bytes free including the root reserve (f_bfree × f_frsize).
    pub free_bytes: u64,
    pub total_bytes: u64,
    /// Inodes still free (f_favail); 0 on filesystems without a fixed inode table.
    pub avail_inodes: u64,
}

/// `statvfs(path)`.
pub fn statvfs(path: &Path) -> io::Result<FsSpace> {
    let c = cpath(path)?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is NUL-terminated; statvfs fills `st` on success.
    cvt(unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) })?;
    // SAFETY: statvfs succeeded, so `st` is initialised.
    let st = unsafe { st.assume_init() };
    let unit = st.f_frsize;
    Ok(FsSpace {
        avail_bytes: st.f_bavail.saturating_mul(unit),
        free_bytes: st.f_bfree.saturating_mul(unit),
        total_bytes: st.f_blocks.saturating_mul(unit),
        avail_inodes: st.f_favail,
    })
}

pub const BTRFS_MAGIC: i64 = 0x9123_683E;
pub const OVERLAYFS_MAGIC: i64 = 0x794C_7630;
pub const TMPFS_MAGIC: i64 = 0x0102_1994;
pub const EXT4_MAGIC: i64 = 0xEF53;
pub const XFS_MAGIC: i64 = 0x5846_5342;

/// Names of the extended attributes of `path` (not following a symlink).
pub fn llistxattr(path: &Path) -> io::Result<Vec<Vec<u8>>> {
    let c = cpath(path)?;
    // SAFETY: `buf` is writable for its length; `c` is NUL-terminated.
    xattr_names(|buf| unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })
}

/// Names of the extended attributes of the open file `fd`.
pub fn flistxattr(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<Vec<Vec<u8>>> {
    use std::os::fd::AsRawFd;
    // SAFETY: `buf` is writable for its length; `fd` is open for the call.
    xattr_names(|buf| unsafe {
        libc::flistxattr(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
    })
}

/// The names a `*listxattr` call writes (NUL-separated), growing the buffer on ERANGE;
/// none where the filesystem has no extended attributes.
fn xattr_names(mut list: impl FnMut(&mut [u8]) -> isize) -> io::Result<Vec<Vec<u8>>> {
    let mut buf = vec![0u8; 1024];
    loop {
        let n = list(&mut buf);
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ERANGE) {
                buf.resize(buf.len() * 4, 0);
                continue;
            }
            if e.raw_os_error() == Some(libc::ENOTSUP) {
                return Ok(Vec::new());
            }
            return Err(e);
        }
        buf.truncate(n as usize);
        return Ok(buf
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| s.to_vec())
            .collect());
    }
}

/// The value of extended attribute `name` of `path` (not following a symlink).
pub fn lgetxattr(path: &Path, name: &[u8]) -> io::Result<Vec<u8>> {
    let c = cpath(path)?;
    let n_c = cstring(name)?;
    let mut buf = vec![0u8; 256];
    loop {
        // SAFETY: `buf` is writable for its length; names are NUL-terminated.
        let n = unsafe {
            libc::lgetxattr(c.as_ptr(), n_c.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ERANGE) {
                buf.resize(buf.len() * 16, 0);
                continue;
            }
            return Err(e);
        }
        buf.truncate(n as usize);
        return Ok(buf);
    }
}

/// Set extended attribute `name` of `path` (not following a symlink).
pub fn lsetxattr(path: &Path, name: &[u8], value: &[u8]) -> io::Result<()> {
    let c = cpath(path)?;
    let n_c = cstring(name)?;
    // SAFETY: `value` is readable for its length; names are NUL-terminated.
    cvt(unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n_c.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    })
    .map(drop)
}

/// `lchown(path, uid, gid)`.
pub fn lchown(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let c = cpath(path)?;
    // SAFETY: `c` is NUL-terminated.
    cvt(unsafe { libc::lchown(c.as_ptr(), uid, gid) }).map(drop)
}

/// `mount(2)`.
pub fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let src = source.map(cpath).transpose()?;
    let tgt = cpath(target)?;
    let fst = fstype.map(cstring).transpose()?;
    let dat = data.map(cstring).transpose()?;
    let p = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: every pointer is NUL-terminated or NULL, as mount(2) accepts.
    cvt(unsafe { libc::mount(p(&src), tgt.as_ptr(), p(&fst), flags, p(&dat).cast()) }).map(drop)
}

/// `chroot(path)` then `chdir("/")`: the caller's `/` becomes `path`.
pub fn chroot(path: &Path) -> io::Result<()> {
    let c = cpath(path)?;
    // SAFETY: both paths are NUL-terminated.
    cvt(unsafe { libc::chroot(c.as_ptr()) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::chdir(c"/".as_ptr()) }).map(drop)
}

/// `umount2(target, flags)`.
pub fn umount2(target: &Path, flags: libc::c_int) -> io::Result<()> {
    let c = cpath(target)?;
    // SAFETY: `c` is NUL-terminated.
    cvt(unsafe { libc::umount2(c.as_ptr(), flags) }).map(drop)
}

// btrfs ioctls (linux/btrfs.h). Both argument structs are 4096 bytes.
const BTRFS_IOCTL_MAGIC: u64 = 0x94;
const BTRFS_PATH_NAME_MAX: usize = 4087;
const BTRFS_SUBVOL_NAME_MAX: usize = 4039;

const fn iow(nr: u64, size: u64) -> u64 {
    (1 << 30) | (size << 16) | (BTRFS_IOCTL_MAGIC << 8) | nr
}
const BTRFS_IOC_SNAP_CREATE: u64 = iow(1, 4096);
const BTRFS_IOC_SUBVOL_CREATE: u64 = iow(14, 4096);
const BTRFS_IOC_SNAP_DESTROY: u64 = iow(15, 4096);

#[repr(C)]
struct BtrfsVolArgs {
    fd: i64,
    name: [u8; BTRFS_PATH_NAME_MAX + 1],
}

fn vol_args(fd: i64, name: &[u8]) -> io::Result<Box<BtrfsVolArgs>> {
    if name.len() > BTRFS_SUBVOL_NAME_MAX || name.contains(&0) || name.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad btrfs subvolume name",
        ));
    }
    let mut a = Box::new(BtrfsVolArgs {
        fd,
        name: [0; BTRFS_PATH_NAME_MAX + 1],
    });
    a.name[..name.len()].copy_from_slice(name);
    Ok(a)
}

fn split_parent(path: &Path) -> io::Result<(File, Vec<u8>)> {
    let parent = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no name"))?;
    Ok((File::open(parent)?, name.as_bytes().to_vec()))
}

/// Create a btrfs subvolume at `path`.
pub fn btrfs_subvol_create(path: &Path) -> io::Result<()> {
    let (dir, name) = split_parent(path)?;
    let args = vol_args(0, &name)?;
    // SAFETY: `args` is a valid, 4096-byte btrfs_ioctl_vol_args for this ioctl.
    cvt(unsafe {
        libc::ioctl(
            dir.as_raw_fd(),
            BTRFS_IOC_SUBVOL_CREATE as _,
            &*args as *const BtrfsVolArgs,
        )
    })
    .map(drop)
}

/// Snapshot subvolume `src` to `dst` (writable).
pub fn btrfs_snapshot(src: &Path, dst: &Path) -> io::Result<()> {
    let source = File::open(src)?;
    let (dir, name) = split_parent(dst)?;
    let args = vol_args(source.as_raw_fd() as i64, &name)?;
    // SAFETY: `args` is a valid btrfs_ioctl_vol_args whose fd names the source subvolume.
    cvt(unsafe {
        libc::ioctl(
            dir.as_raw_fd(),
            BTRFS_IOC_SNAP_CREATE as _,
            &*args as *const BtrfsVolArgs,
        )
    })
    .map(drop)
}

/// Delete subvolume `path` (it need not be empty).
pub fn btrfs_subvol_delete(path: &Path) -> io::Result<()> {
    let (dir, name) = split_parent(path)?;
    let args = vol_args(0, &name)?;
    // SAFETY: `args` is a valid btrfs_ioctl_vol_args naming a child of `dir`.
    cvt(unsafe {
        libc::ioctl(
            dir.as_raw_fd(),
            BTRFS_IOC_SNAP_DESTROY as _,
            &*args as *const BtrfsVolArgs,
        )
    })
    .map(drop)
}

/// Whether `path` is the root of a btrfs subvolume (inode 256 on btrfs).
pub fn is_btrfs_subvol(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    matches!(fs_magic(path), Ok(BTRFS_MAGIC))
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir() && m.ino() == 256)
}

/// `mkfifo(path, mode)`.
pub fn mkfifo(path: &Path, mode: u32) -> io::Result<()> {
    let c = crate::cstring(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is a NUL-terminated path alive for the call.
    crate::cvt(unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) }).map(|_| ())
}

/// Create (or open) the regular file `name` directly in the directory `dir` (no path
/// walk, no symlink followed: `O_NOFOLLOW`), readable and writable, appending,
/// close-on-exec, with `mode`, owned by `owner` when given.
pub fn create_in(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::CStr,
    mode: u32,
    owner: Option<(u32, u32)>,
) -> io::Result<File> {
    use std::os::fd::FromRawFd;
    // SAFETY: `name` is NUL-terminated; openat returns a new descriptor or -1.
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_CREAT | libc::O_RDWR | libc::O_APPEND | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: openat succeeded, so `fd` is a new descriptor owned by nobody else.
    let file = unsafe { File::from_raw_fd(fd) };
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::fchown(&file, Some(uid), Some(gid))?;
    }
    Ok(file)
}

/// Swap `a` and `b` atomically (`renameat2(RENAME_EXCHANGE)`): both must exist, on one
/// filesystem. Neither name is followed if it is a symlink; a crash leaves either the
/// old pair or the swapped pair, never one name missing.
pub fn rename_exchange(a: &Path, b: &Path) -> io::Result<()> {
    let (a, b) = (
        cstring(a.as_os_str().as_bytes())?,
        cstring(b.as_os_str().as_bytes())?,
    );
    // SAFETY: both are valid NUL-terminated paths that outlive the call; the syscall
    // only reads them.
    cvt(unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    })
    .map(drop)
}

/// `syncfs(fd)`: write back everything cached for the filesystem holding `file`.
pub fn syncfs(file: &File) -> io::Result<()> {
    // SAFETY: `file` is an open descriptor for the duration of the call; syncfs takes
    // nothing else.
    cvt(unsafe { libc::syncfs(file.as_raw_fd()) }).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statvfs_of_the_root_filesystem() {
        let s = statvfs(Path::new("/")).unwrap();
        assert!(
            s.total_bytes > 0 && s.avail_bytes <= s.free_bytes && s.free_bytes <= s.total_bytes
        );
        assert!(statvfs(Path::new("/no/such/path")).is_err());
    }
}
