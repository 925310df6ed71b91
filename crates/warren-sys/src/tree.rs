//! Descriptor-relative file operations for trees a zone or an image controls.
//!
//! Every function here acts on one name inside a directory descriptor and never
//! follows a symlink in that name (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`), or resolves a
//! relative path strictly beneath a directory with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`. Whoever controls the tree (a tenant
//! renaming a directory for a symlink, an image shipping `dev -> /`) cannot make these
//! calls reach a host file. The bounded walker built on them is [`crate::walk`].

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::{cstring, cvt};

fn cname(name: &OsStr) -> io::Result<CString> {
    if name.is_empty() || name.as_bytes().contains(&b'/') || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a single file name"),
        ));
    }
    cstring(name.as_bytes())
}

/// `openat2(dir, path, {flags | O_CLOEXEC, mode, resolve})`.
pub fn openat2(
    dir: BorrowedFd<'_>,
    path: &Path,
    flags: libc::c_int,
    mode: libc::mode_t,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let c = cstring(path.as_os_str().as_bytes())?;
    // SAFETY: open_how is plain data; zeroed is a valid value (and zero padding is
    // what the kernel demands of unknown fields).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 {
        u64::from(mode)
    } else {
        0
    };
    how.resolve = resolve;
    loop {
        // SAFETY: `c` is NUL-terminated, `how` lives for the call and its size is
        // passed; the kernel returns a new descriptor that we own.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                c.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: a successful openat2 returns a descriptor nobody else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) && e.raw_os_error() != Some(libc::EAGAIN) {
            return Err(e);
        }
    }
}

/// The resolve flags of [`open_beneath`]: no symlink at all, nothing above `dir`.
pub const STRICT: u64 =
    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;

/// Open `rel` beneath `dir` with no symlink in any component and no `..` above `dir`:
/// ELOOP if a component is a symlink, EXDEV if `rel` would leave `dir`.
pub fn open_beneath(dir: BorrowedFd<'_>, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    openat2(dir, rel, flags | libc::O_NOFOLLOW, 0, STRICT)
}

/// Open the directory at `path` (a host path warren owns, e.g. under the state root);
/// its last component must not be a symlink.
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = cstring(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is NUL-terminated; a successful open returns a descriptor we own.
    let fd = cvt(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Open `name` in `dir` with `flags | O_NOFOLLOW | O_CLOEXEC` (and `mode` if creating).
pub fn open_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let c = cname(name)?;
    loop {
        // SAFETY: `c` is NUL-terminated; `dir` is an open descriptor.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        if fd >= 0 {
            // SAFETY: a new descriptor nobody else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Open the directory `name` in `dir` (not a symlink to one).
pub fn open_dir_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0)
}

/// Open the parent of `dir` (`..`), for climbing back up a walk.
pub fn open_parent(dir: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: ".." is NUL-terminated; `dir` is an open descriptor.
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c"..".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What warren needs of a `struct stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    pub mode: u32,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: u64,
    pub blocks: u64,
    pub atime: (i64, i64),
    pub mtime: (i64, i64),
}

impl Stat {
    fn from(st: &libc::stat) -> Stat {
        Stat {
            dev: st.st_dev,
            ino: st.st_ino,
            mode: st.st_mode,
            nlink: st.st_nlink,
            uid: st.st_uid,
            gid: st.st_gid,
            rdev: st.st_rdev,
            size: st.st_size as u64,
            blocks: st.st_blocks as u64,
            atime: (st.st_atime, st.st_atime_nsec),
            mtime: (st.st_mtime, st.st_mtime_nsec),
        }
    }
    /// The file type bits (`S_IFMT`).
    pub fn kind(&self) -> u32 {
        self.mode & libc::S_IFMT
    }
    pub fn is_dir(&self) -> bool {
        self.kind() == libc::S_IFDIR
    }
    pub fn is_file(&self) -> bool {
        self.kind() == libc::S_IFREG
    }
    pub fn is_symlink(&self) -> bool {
        self.kind() == libc::S_IFLNK
    }
    /// Whether `other` is the same inode.
    pub fn same_inode(&self, other: &Stat) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}

fn stat_raw(fd: RawFd, name: &CString, flags: libc::c_int) -> io::Result<Stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `name` is NUL-terminated; fstatat fills `st` on success.
    cvt(unsafe { libc::fstatat(fd, name.as_ptr(), st.as_mut_ptr(), flags) })?;
    // SAFETY: fstatat succeeded, so `st` is initialised.
    Ok(Stat::from(unsafe { &st.assume_init() }))
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
pub fn stat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Stat> {
    stat_raw(dir.as_raw_fd(), &cname(name)?, libc::AT_SYMLINK_NOFOLLOW)
}

/// `fstat(fd)`.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    stat_raw(fd.as_raw_fd(), &CString::default(), libc::AT_EMPTY_PATH)
}

/// The names in directory `dir`, without `.` and `..` (reads from the start; `dir`'s
/// own offset is left at the end).
pub fn read_names(dir: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    // SAFETY: dup of an open descriptor returns a new one that we own.
    let dup = cvt(unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) })?;
    // SAFETY: `dup` is ours; fdopendir takes ownership of it on success.
    let d = unsafe { libc::fdopendir(dup) };
    if d.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `dup` is still ours to close.
        unsafe { libc::close(dup) };
        return Err(e);
    }
    // SAFETY: `d` is a valid DIR*; the dup shares the offset, so start from 0.
    unsafe { libc::rewinddir(d) };
    let mut names = Vec::new();
    let result = loop {
        // SAFETY: errno is this thread's; reset it to tell the end from an error.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `d` is a valid DIR* until closedir below.
        let ent = unsafe { libc::readdir64(d) };
        if ent.is_null() {
            // SAFETY: as above.
            let errno = unsafe { *libc::__errno_location() };
            break if errno == 0 {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(errno))
            };
        }
        // SAFETY: readdir returned a valid dirent whose d_name is NUL-terminated and
        // stays valid until the next readdir call; we copy it out now.
        let name = unsafe { std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name.to_vec()));
        }
    };
    // SAFETY: `d` is valid and closed once (this also closes `dup`).
    unsafe { libc::closedir(d) };
    result.map(|()| names)
}

/// `mkdirat(dir, name, mode)` (the umask applies; set the mode afterwards if it matters).
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    let c = cname(name)?;
    // SAFETY: `c` is NUL-terminated.
    cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode) }).map(drop)
}

/// `unlinkat(dir, name, AT_REMOVEDIR if is_dir)`: never follows `name`.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr, is_dir: bool) -> io::Result<()> {
    let c = cname(name)?;
    let flags = if is_dir { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: `c` is NUL-terminated.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) }).map(drop)
}

/// `fchownat(dir, name, uid, gid, AT_SYMLINK_NOFOLLOW)`.
pub fn chown_at(dir: BorrowedFd<'_>, name: &OsStr, uid: u32, gid: u32) -> io::Result<()> {
    let c = cname(name)?;
    // SAFETY: `c` is NUL-terminated.
    cvt(unsafe {
        libc::fchownat(
            dir.as_raw_fd(),
            c.as_ptr(),
            uid,
            gid,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// `fchown(fd, uid, gid)`.
pub fn fchown(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain descriptor call.
    cvt(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) }).map(drop)
}

/// `fchmod(fd, mode)`.
pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    // SAFETY: plain descriptor call.
    cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }).map(drop)
}

/// `fchmodat2(dir, name, mode, AT_SYMLINK_NOFOLLOW)` (Linux 6.6): the mode of `name`
/// itself; a symlink fails with EOPNOTSUPP instead of changing its target.
pub fn chmod_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    let c = cname(name)?;
    // SAFETY: `c` is NUL-terminated; fchmodat2 takes (dirfd, path, mode, flags).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fchmodat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            mode,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc >= 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOSYS) {
        return Err(e);
    }
    chmod_through_proc(dir, OsStr::from_bytes(c.as_bytes()), mode)
}

/// Before Linux 6.6 (no fchmodat2): open the inode itself (O_PATH, not following) and
/// change it through its /proc/self/fd link, which names exactly that inode.
fn chmod_through_proc(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    let fd = open_at(dir, name, libc::O_PATH, 0)?;
    if fstat(fd.as_fd())?.is_symlink() {
        return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
    }
    let p = cstring(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    // SAFETY: `p` is NUL-terminated; it names the inode `fd` holds, not a symlink.
    cvt(unsafe { libc::chmod(p.as_ptr(), mode) }).map(drop)
}

/// `mknodat(dir, name, mode, rdev)`.
pub fn mknod_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32, rdev: u64) -> io::Result<()> {
    let c = cname(name)?;
    // SAFETY: `c` is NUL-terminated.
    cvt(unsafe { libc::mknodat(dir.as_raw_fd(), c.as_ptr(), mode, rdev) }).map(drop)
}

/// `symlinkat(target, dir, name)`: the link's text is stored, never resolved.
pub fn symlink_at(target: &OsStr, dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let (t, c) = (cstring(target.as_bytes())?, cname(name)?);
    // SAFETY: both strings are NUL-terminated.
    cvt(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), c.as_ptr()) }).map(drop)
}

/// `readlinkat(dir, name)`.
pub fn readlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OsString> {
    let c = cname(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: `buf` is writable for its length; `c` is NUL-terminated.
    let n = cvt(unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })?;
    buf.truncate(n as usize);
    Ok(OsString::from_vec(buf))
}

/// `linkat(old_dir, old, new_dir, new, 0)`: a hard link, never following `old`.
pub fn link_at(
    old_dir: BorrowedFd<'_>,
    old: &OsStr,
    new_dir: BorrowedFd<'_>,
    new: &OsStr,
) -> io::Result<()> {
    let (o, n) = (cname(old)?, cname(new)?);
    // SAFETY: both names are NUL-terminated; flags 0 does not follow `old`.
    cvt(unsafe {
        libc::linkat(
            old_dir.as_raw_fd(),
            o.as_ptr(),
            new_dir.as_raw_fd(),
            n.as_ptr(),
            0,
        )
    })
    .map(drop)
}

/// Set the times of `name` in `dir` without following it.
pub fn utimes_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    atime: (i64, i64),
    mtime: (i64, i64),
) -> io::Result<()> {
    let c = cname(name)?;
    let ts = [
        libc::timespec {
            tv_sec: atime.0,
            tv_nsec: atime.1,
        },
        libc::timespec {
            tv_sec: mtime.0,
            tv_nsec: mtime.1,
        },
    ];
    // SAFETY: `c` is NUL-terminated and `ts` holds the two timespecs utimensat reads.
    cvt(unsafe {
        libc::utimensat(
            dir.as_raw_fd(),
            c.as_ptr(),
            ts.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

/// A path naming `name` inside the directory `dir` through `/proc/self/fd`, for the
/// calls that have no `*at` form (the `l*xattr` family): the directory is the one the
/// descriptor holds, and `name` is a single component the `l*` calls do not follow.
pub fn fd_path(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<PathBuf> {
    cname(name)?;
    let mut p = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    p.push(name);
    Ok(p)
}

/// Copy `len` bytes of `from` into the empty `to`, keeping holes: only the data
/// ranges (`SEEK_DATA`/`SEEK_HOLE`) are copied, with `copy_file_range` (which shares
/// extents where the filesystem can); the length is set with `ftruncate`.
pub fn copy_sparse(from: &File, to: &File, len: u64) -> io::Result<()> {
    let (src, dst) = (from.as_raw_fd(), to.as_raw_fd());
    let mut off: i64 = 0;
    let end = len as i64;
    while off < end {
        // SAFETY: lseek on an open descriptor.
        let data = unsafe { libc::lseek(src, off, libc::SEEK_DATA) };
        if data < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENXIO) {
                break; // only a hole is left
            }
            return Err(e);
        }
        // SAFETY: as above.
        let hole = cvt(unsafe { libc::lseek(src, data, libc::SEEK_HOLE) })?.min(end);
        let (mut i, mut o) = (data, data);
        while i < hole {
            // SAFETY: offsets are valid pointers to local i64s for the call.
            let n =
                unsafe { libc::copy_file_range(src, &mut i, dst, &mut o, (hole - i) as usize, 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // Across filesystems (or where it is not offered): read and write.
                    Some(libc::EXDEV | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => {
                        copy_range(from, to, i as u64, hole as u64)?;
                        break;
                    }
                    _ => return Err(e),
                }
            }
            if n == 0 {
                break; // the source shrank under us
            }
        }
        off = hole;
    }
    // SAFETY: plain descriptor call.
    cvt(unsafe { libc::ftruncate(dst, end) }).map(drop)
}

/// Copy bytes `[start, end)` of `from` to the same offsets of `to` with pread/pwrite.
fn copy_range(from: &File, to: &File, start: u64, end: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 1 << 20];
    let mut off = start;
    while off < end {
        let want = ((end - off) as usize).min(buf.len());
        let n = from.read_at(&mut buf[..want], off)?;
        if n == 0 {
            break; // the source shrank under us
        }
        to.write_all_at(&buf[..n], off)?;
        off += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_beneath_refuses_symlinks_and_dotdot() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("a")).unwrap();
        std::os::unix::fs::symlink("/", d.path().join("up")).unwrap();
        let root = open_dir(d.path()).unwrap();
        assert!(open_beneath(root.as_fd(), Path::new("a"), libc::O_PATH).is_ok());
        let e = open_beneath(root.as_fd(), Path::new("up/etc"), libc::O_PATH).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        let e = open_beneath(root.as_fd(), Path::new("a/../.."), libc::O_PATH).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EXDEV));
        let e = stat_at(root.as_fd(), OsStr::new("a/b")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let mut names = read_names(root.as_fd()).unwrap();
        names.sort();
        assert_eq!(names, vec![OsString::from("a"), OsString::from("up")]);
    }

    #[test]
    fn chmod_never_reaches_a_symlink_target() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("target"), b"").unwrap();
        std::fs::set_permissions(
            d.path().join("target"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        std::os::unix::fs::symlink(d.path().join("target"), d.path().join("link")).unwrap();
        std::fs::write(d.path().join("f"), b"").unwrap();
        let root = open_dir(d.path()).unwrap();
        for f in [chmod_at, chmod_through_proc] {
            assert!(f(root.as_fd(), OsStr::new("link"), 0o4777).is_err());
            f(root.as_fd(), OsStr::new("f"), 0o4750).unwrap();
            let mode = |n: &str| {
                std::fs::symlink_metadata(d.path().join(n))
                    .unwrap()
                    .permissions()
                    .mode()
                    & 0o7777
            };
            assert_eq!((mode("target"), mode("f")), (0o600, 0o4750));
        }
    }

    #[test]
    fn copy_sparse_keeps_holes() {
        use std::io::{Seek, SeekFrom, Write};
        let d = tempfile::tempdir().unwrap();
        let mut a = File::create(d.path().join("a")).unwrap();
        a.seek(SeekFrom::Start(64 << 20)).unwrap();
        a.write_all(b"end").unwrap();
        drop(a);
        let a = File::open(d.path().join("a")).unwrap();
        let b = File::create(d.path().join("b")).unwrap();
        copy_sparse(&a, &b, (64 << 20) + 3).unwrap();
        let st = fstat(b.as_fd()).unwrap();
        assert_eq!(st.size, (64 << 20) + 3);
        assert!(st.blocks * 512 < 1 << 20, "{} blocks", st.blocks);
        let data = std::fs::read(d.path().join("b")).unwrap();
        assert_eq!(&data[64 << 20..], b"end");
    }
}
