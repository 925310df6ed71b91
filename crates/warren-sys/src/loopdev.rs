//! Loop devices: attach a file as a block device (for `disk.max`, a size-capped
//! filesystem image holding a zone's private layer).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;

use crate::cvt;

const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LO_FLAGS_AUTOCLEAR: u32 = 4;

/// `struct loop_info64` (linux/loop.h).
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

/// `struct loop_config`.
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

/// An attached loop device: `/dev/loop<number>`, open. With autoclear, the kernel
/// detaches it when the last opener (this descriptor, or a mount of it) goes away, so
/// nothing needs detaching by hand, also after a crash.
#[derive(Debug)]
pub struct LoopDevice {
    pub number: u32,
    pub path: std::path::PathBuf,
    pub file: File,
}

/// Attach `image` to a free loop device with `LO_FLAGS_AUTOCLEAR`.
pub fn attach(image: &File) -> io::Result<LoopDevice> {
    let ctl = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/loop-control")?;
    for _ in 0..16 {
        // SAFETY: LOOP_CTL_GET_FREE takes no argument and returns a device number.
        let n = cvt(unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_GET_FREE) })?;
        let path = std::path::PathBuf::from(format!("/dev/loop{n}"));
        let dev = OpenOptions::new().read(true).write(true).open(&path)?;
        let mut cfg = LoopConfig {
            fd: image.as_raw_fd() as u32,
            block_size: 0,
            // SAFETY: loop_info64 is plain integers and byte arrays; zero is valid.
            info: unsafe { std::mem::zeroed() },
            reserved: [0; 8],
        };
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        // SAFETY: `cfg` is a valid struct loop_config that outlives the call.
        let rc = unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_CONFIGURE, &cfg as *const LoopConfig) };
        if rc == 0 {
            return Ok(LoopDevice {
                number: n as u32,
                path,
                file: dev,
            });
        }
        let e = io::Error::last_os_error();
        // Another process took the device between GET_FREE and CONFIGURE: try again.
        if e.raw_os_error() != Some(libc::EBUSY) {
            return Err(e);
        }
    }
    Err(io::Error::from_raw_os_error(libc::EBUSY))
}

/// `unshare(flags)` for the calling process (single-threaded callers).
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes flags only.
    cvt(unsafe { libc::unshare(flags) }).map(drop)
}

const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;

/// Mount filesystem `fstype` from block device `source` as a detached mount (new mount
/// API: fsopen, fsconfig, fsmount) with `attrs` (MOUNT_ATTR_*), close-on-exec. Nothing
/// appears in any mount table until the descriptor is attached with `move_mount`; the
/// device is opened here, by the caller, so the caller's devices cgroup applies, not
/// that of the process that later attaches the mount.
pub fn mount_detached(
    fstype: &str,
    source: &std::path::Path,
    attrs: u64,
) -> io::Result<std::os::fd::OwnedFd> {
    let source = std::os::unix::ffi::OsStrExt::as_bytes(source.as_os_str());
    mount_detached_with(fstype, &[(b"source".as_slice(), source)], attrs)
}

/// A detached mount of `fstype` configured with string `options` (key, value): see
/// [`mount_detached`], its one caller since the console left its own tmpfs.
fn mount_detached_with(
    fstype: &str,
    options: &[(&[u8], &[u8])],
    attrs: u64,
) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let fstype = crate::cstring(fstype)?;
    let options = options
        .iter()
        .map(|(k, v)| Ok((crate::cstring(*k)?, crate::cstring(*v)?)))
        .collect::<io::Result<Vec<_>>>()?;
    // SAFETY: `fstype` is NUL-terminated; fsopen returns a new descriptor or -1.
    let fs = cvt(
        unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), FSOPEN_CLOEXEC) } as libc::c_int,
    )?;
    // SAFETY: fsopen succeeded, so `fs` is a new descriptor owned by nobody else.
    let fs = unsafe { OwnedFd::from_raw_fd(fs) };
    for (key, value) in &options {
        // SAFETY: key and value are NUL-terminated strings alive for the call.
        cvt(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            )
        } as libc::c_int)?;
    }
    // SAFETY: CMD_CREATE takes no key or value.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    } as libc::c_int)?;
    // SAFETY: fsmount takes the context descriptor and flags; returns a new fd or -1.
    let m = cvt(unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            attrs as libc::c_uint,
        )
    } as libc::c_int)?;
    // SAFETY: fsmount succeeded, so `m` is a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(m) })
}
