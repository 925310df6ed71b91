//! Swap: `swapon(2)`, `swapoff(2)`, the page size, and inode flags (to see btrfs NOCOW).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::{cstring, cvt};

/// `swapon(path, 0)`: start swapping to a file or block device that carries a swap header.
pub fn swapon(path: &Path) -> io::Result<()> {
    let c = cstring(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call; flags 0 asks for the
    // default priority and no discard, which needs no further arguments.
    cvt(unsafe { libc::swapon(c.as_ptr(), 0) }).map(drop)
}

/// `swapoff(path)`: stop swapping to it (the kernel first swaps its pages back in).
pub fn swapoff(path: &Path) -> io::Result<()> {
    let c = cstring(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    cvt(unsafe { libc::swapoff(c.as_ptr()) }).map(drop)
}

/// The MMU page size (`sysconf(_SC_PAGESIZE)`), which a swap header is laid out in.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions; _SC_PAGESIZE is always supported on Linux.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// `FS_NOCOW_FL` from linux/fs.h: the file's data is written in place (btrfs `chattr +C`).
pub const FS_NOCOW_FL: u32 = 0x0080_0000;

/// The inode flags of an open file (`ioctl(FS_IOC_GETFLAGS)`, what `lsattr` shows).
pub fn inode_flags(file: &File) -> io::Result<u32> {
    let mut flags: libc::c_int = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one int through the pointer, which points at
    // `flags`, a live local of that size; the descriptor is open for the call.
    cvt(unsafe { libc::ioctl(file.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) })?;
    Ok(flags as u32)
}

/// Set inode flags on an open file (`ioctl(FS_IOC_SETFLAGS)`, what `chattr` does).
pub fn set_inode_flags(file: &File, flags: u32) -> io::Result<()> {
    let value = flags as libc::c_int;
    // SAFETY: FS_IOC_SETFLAGS reads one int through the pointer, which points at
    // `value`, a live local; the descriptor is open for the call.
    cvt(unsafe { libc::ioctl(file.as_raw_fd(), libc::FS_IOC_SETFLAGS, &value) }).map(drop)
}
