//! Spawn steps used by the OCI runtime (see [`crate::spawn::Step`]): raw syscalls
//! only, allocation-free, errno on failure, because they run in the cloned child.

use std::ffi::CStr;
use std::os::fd::RawFd;

fn ok(rc: libc::c_int) -> Result<(), ()> {
    if rc < 0 {
        Err(())
    } else {
        Ok(())
    }
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

fn set_errno(e: i32) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e };
}

/// Move descriptor `got` to number `fd` (keeping close-on-exec as `flags` say).
fn move_fd(got: RawFd, fd: RawFd, flags: libc::c_int) -> Result<(), ()> {
    if got == fd {
        return Ok(());
    }
    // SAFETY: both are descriptor numbers; dup3 fails cleanly on bad ones.
    let rc = unsafe { libc::dup3(got, fd, flags & libc::O_CLOEXEC) };
    let saved = errno();
    // SAFETY: `got` is ours to close.
    unsafe { libc::close(got) };
    if rc < 0 {
        set_errno(saved);
        return Err(());
    }
    Ok(())
}

pub(crate) fn open_at(dirfd: RawFd, path: &CStr, flags: libc::c_int, fd: RawFd) -> Result<(), ()> {
    loop {
        // SAFETY: `path` is NUL-terminated; `dirfd` is a descriptor.
        let got = unsafe { libc::openat(dirfd, path.as_ptr(), flags) };
        if got >= 0 {
            return move_fd(got, fd, flags);
        }
        if errno() != libc::EINTR {
            return Err(());
        }
    }
}

pub(crate) fn open_and_write(path: &CStr, data: &[u8]) -> Result<(), ()> {
    let fd = loop {
        // SAFETY: `path` is NUL-terminated.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd >= 0 {
            break fd;
        }
        if errno() != libc::EINTR {
            return Err(());
        }
    };
    // SAFETY: `data` is readable for its length; `fd` stays open on purpose.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    if n < 0 {
        Err(())
    } else {
        Ok(())
    }
}

pub(crate) fn write_file(path: &CStr, data: &[u8]) -> Result<(), ()> {
    // SAFETY: `path` is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(());
    }
    // SAFETY: `data` is readable for its length.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let saved = errno();
    // SAFETY: `fd` was opened above.
    unsafe { libc::close(fd) };
    if n < 0 {
        set_errno(saved);
        return Err(());
    }
    Ok(())
}

pub(crate) fn rlimit(resource: libc::c_int, soft: u64, hard: u64) -> Result<(), ()> {
    let r = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `r` is a valid rlimit for the call.
    ok(unsafe { libc::setrlimit(resource as libc::__rlimit_resource_t, &r) })
}

/// Send `fd` over the connected Unix socket `socket` with SCM_RIGHTS, with `name`
/// as the message's bytes (runc sends the pty's name; receivers ignore it).
/// Allocation-free: the control buffer is on the stack.
pub(crate) fn send_fd_raw(socket: RawFd, fd: RawFd, name: &[u8]) -> Result<(), ()> {
    // Room for one cmsghdr carrying one int, 8-byte aligned.
    #[repr(C, align(8))]
    struct Control([u8; 64]);
    let mut control = Control([0; 64]);
    let mut iov = libc::iovec {
        iov_base: name.as_ptr() as *mut libc::c_void,
        iov_len: name.len(),
    };
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure size computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    // SAFETY: `msg` points at `control`, which holds at least CMSG_SPACE(int) bytes,
    // so the first header and its data lie inside it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
    }
    loop {
        // SAFETY: `msg` and everything it points to live for the call.
        let n = unsafe { libc::sendmsg(socket, &msg, 0) };
        if n >= 0 {
            return Ok(());
        }
        if errno() != libc::EINTR {
            return Err(());
        }
    }
}

pub(crate) fn console(
    ptmx: &CStr,
    socket: RawFd,
    slave_fd: RawFd,
    rows: u16,
    cols: u16,
) -> Result<(), ()> {
    // SAFETY: `ptmx` is NUL-terminated.
    let master = unsafe {
        libc::open(
            ptmx.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if master < 0 {
        return Err(());
    }
    let result = (|| {
        let unlock: libc::c_int = 0;
        // SAFETY: TIOCSPTLCK reads an int; `unlock` lives for the call.
        ok(unsafe { libc::ioctl(master, libc::TIOCSPTLCK, &unlock) })?;
        if rows > 0 || cols > 0 {
            let ws = libc::winsize {
                ws_row: rows,
                ws_col: cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            // SAFETY: TIOCSWINSZ reads a winsize that lives for the call.
            ok(unsafe { libc::ioctl(master, libc::TIOCSWINSZ, &ws) })?;
        }
        // SAFETY: TIOCGPTPEER takes open flags and returns a new descriptor.
        let slave = unsafe {
            libc::ioctl(
                master,
                libc::TIOCGPTPEER,
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            )
        };
        if slave < 0 {
            return Err(());
        }
        move_fd(slave, slave_fd, libc::O_CLOEXEC)?;
        send_fd_raw(socket, master, b"/dev/console")
    })();
    let saved = errno();
    // SAFETY: `master` was opened above; the receiver has its own copy now.
    unsafe { libc::close(master) };
    set_errno(saved);
    result
}

pub(crate) fn ctty(fd: RawFd) -> Result<(), ()> {
    // SAFETY: setsid and ioctl/dup2 on descriptors, no pointers.
    unsafe {
        ok(libc::setsid())?;
        ok(libc::ioctl(fd, libc::TIOCSCTTY, 0))?;
        for to in 0..3 {
            ok(libc::dup2(fd, to))?;
        }
    }
    Ok(())
}

pub(crate) fn mask(path: &CStr, null: &CStr, empty: &CStr) -> Result<(), ()> {
    let bind = |src: &CStr, flags: libc::c_ulong| {
        // SAFETY: both strings are NUL-terminated; NULL is allowed for fstype and data.
        ok(unsafe {
            libc::mount(
                src.as_ptr(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | flags,
                std::ptr::null(),
            )
        })
    };
    if bind(null, 0).is_ok() {
        return Ok(());
    }
    match errno() {
        libc::ENOENT => Ok(()),
        libc::ENOTDIR => {
            let ro = libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
            if bind(empty, 0).is_ok() {
                // SAFETY: a remount of the bind just made: NUL-terminated target, NULLs.
                return ok(unsafe {
                    libc::mount(
                        std::ptr::null(),
                        path.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND | ro | libc::MS_NOEXEC,
                        std::ptr::null(),
                    )
                });
            }
            let tmpfs = c"tmpfs";
            // SAFETY: NUL-terminated strings; NULL data.
            ok(unsafe {
                libc::mount(
                    tmpfs.as_ptr(),
                    path.as_ptr(),
                    tmpfs.as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                )
            })
        }
        _ => Err(()),
    }
}

pub(crate) fn move_root(new_root: &CStr) -> Result<(), ()> {
    let slash = c"/";
    let dot = c".";
    // SAFETY: NUL-terminated strings alive for each call.
    unsafe {
        ok(libc::chdir(new_root.as_ptr()))?;
        ok(libc::mount(
            dot.as_ptr(),
            slash.as_ptr(),
            std::ptr::null(),
            libc::MS_MOVE,
            std::ptr::null(),
        ))?;
        ok(libc::chroot(dot.as_ptr()))?;
        ok(libc::chdir(slash.as_ptr()))
    }
}

/// Whether `rel` is a directory beneath `root` reached without any symlink:
/// `openat2(root, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW, RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`. Allocation-free.
pub(crate) fn check_beneath(root: &CStr, rel: &CStr) -> Result<(), ()> {
    // SAFETY: `root` is NUL-terminated; the descriptor is closed below.
    let dir = unsafe {
        libc::open(
            root.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if dir < 0 {
        return Err(());
    }
    // SAFETY: open_how is plain data; zero is valid for every field.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
    how.resolve = crate::tree::STRICT;
    // SAFETY: `rel` is NUL-terminated, `how` lives for the call and its size is given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            rel.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    let saved = errno();
    // SAFETY: `dir` was opened above and `fd`, if any, by openat2; each closed once.
    unsafe {
        libc::close(dir);
        if fd >= 0 {
            libc::close(fd as libc::c_int);
        }
    }
    if fd < 0 {
        set_errno(saved);
        return Err(());
    }
    Ok(())
}
