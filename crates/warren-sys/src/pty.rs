//! Pseudo-terminals for interactive `warren login`.

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::path::PathBuf;

use crate::cvt;

/// Open a new pty master from `/dev/ptmx` as seen by this process (after joining a
/// zone's mount namespace that is the zone's devpts instance). Returns the master and
/// the slave's path.
pub fn open_master() -> io::Result<(File, PathBuf)> {
    // SAFETY: posix_openpt takes flags and returns a new descriptor or -1.
    let fd = cvt(unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) })?;
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let master = unsafe { File::from_raw_fd(fd) };
    // SAFETY: grantpt/unlockpt act on the master descriptor we own.
    unsafe {
        cvt(libc::grantpt(fd))?;
        cvt(libc::unlockpt(fd))?;
    }
    let mut buf = [0 as libc::c_char; 128];
    // SAFETY: `buf` is writable for its full length, which we pass.
    let rc = unsafe { libc::ptsname_r(fd, buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    // SAFETY: ptsname_r succeeded, so `buf` holds a NUL-terminated path.
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok((master, PathBuf::from(name.to_string_lossy().into_owned())))
}

/// Whether `fd` is a terminal.
pub fn isatty(fd: RawFd) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

/// Saved terminal attributes, restored on drop.
pub struct RawMode {
    fd: RawFd,
    saved: libc::termios,
}

/// Put terminal `fd` into raw mode until the returned guard is dropped.
pub fn raw_mode(fd: RawFd) -> io::Result<RawMode> {
    let mut t = std::mem::MaybeUninit::<libc::termios>::uninit();
    // SAFETY: tcgetattr fills the termios on success.
    cvt(unsafe { libc::tcgetattr(fd, t.as_mut_ptr()) })?;
    // SAFETY: tcgetattr succeeded, so `t` is initialised.
    let saved = unsafe { t.assume_init() };
    let mut raw = saved;
    // SAFETY: cfmakeraw edits the termios it is given.
    unsafe { libc::cfmakeraw(&mut raw) };
    // SAFETY: `raw` is a valid termios.
    cvt(unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) })?;
    Ok(RawMode { fd, saved })
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: restoring attributes read from this same descriptor.
        unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved) };
    }
}

/// Copy the window size of terminal `from` onto terminal `to`.
pub fn copy_winsize(from: RawFd, to: RawFd) -> io::Result<()> {
    // SAFETY: winsize is plain data; zero is valid.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills `ws`; TIOCSWINSZ reads it.
    unsafe {
        cvt(libc::ioctl(from, libc::TIOCGWINSZ, &mut ws))?;
        cvt(libc::ioctl(to, libc::TIOCSWINSZ, &ws))?;
    }
    Ok(())
}

/// Set the window size of terminal `fd` (a pty master: the kernel then sends SIGWINCH
/// to the foreground process group of its slave).
pub fn set_winsize(fd: RawFd, rows: u16, cols: u16) -> io::Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads the winsize we pass by reference.
    cvt(unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, &ws) })?;
    Ok(())
}

/// Read from `fd` into `buf`, retrying on EINTR; 0 means EOF (or EIO from a pty whose
/// other side closed).
pub fn read_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EIO) => return Ok(0),
            _ => return Err(e),
        }
    }
}

/// Write all of `buf` to `fd`.
pub fn write_fd(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is readable for its length.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// poll(2) on `fds` (POLLIN) for at most `timeout_ms`; returns the revents of each.
pub fn poll_in(fds: &[RawFd], timeout_ms: i32) -> io::Result<Vec<i16>> {
    let pairs: Vec<(RawFd, i16)> = fds.iter().map(|&fd| (fd, libc::POLLIN)).collect();
    poll(&pairs, timeout_ms)
}

/// poll(2) on `(fd, events)` pairs for at most `timeout_ms`; returns the revents of each.
pub fn poll(fds: &[(RawFd, i16)], timeout_ms: i32) -> io::Result<Vec<i16>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, events)| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `pfds` is a valid array of the given length.
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(pfds.iter().map(|p| p.revents).collect());
    }
}

/// Write what `fd` takes now without blocking (it must be O_NONBLOCK); returns how
/// many bytes were written (0 when the pipe is full).
pub fn write_some(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is readable for its length.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        match io::Error::last_os_error() {
            e if e.kind() == io::ErrorKind::Interrupted => continue,
            e if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
            e => return Err(e),
        }
    }
}

/// Set or clear `O_NONBLOCK` on `fd`.
pub fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL only read and set the descriptor's status flags.
    unsafe {
        let flags = cvt(libc::fcntl(fd, libc::F_GETFL))?;
        let flags = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        cvt(libc::fcntl(fd, libc::F_SETFL, flags)).map(drop)
    }
}

/// Keep `File` usable as a raw fd owner in callers.
pub fn raw(f: &File) -> RawFd {
    f.as_raw_fd()
}

/// Receive one descriptor sent with SCM_RIGHTS on the Unix socket `socket` (a
/// `--console-socket` listener's accepted connection). Returns it with the bytes.
pub fn recv_fd(socket: RawFd) -> io::Result<(std::os::fd::OwnedFd, Vec<u8>)> {
    #[repr(C, align(8))]
    struct Control([u8; 64]);
    let mut control = Control([0; 64]);
    let mut data = [0u8; 4096];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len();
    // SAFETY: `msg` points at live buffers of the lengths given.
    let n = cvt(unsafe { libc::recvmsg(socket, &mut msg, libc::MSG_CMSG_CLOEXEC) })?;
    // SAFETY: the kernel filled `msg`; CMSG_FIRSTHDR returns NULL or a header inside
    // `control`, whose data holds an int for SCM_RIGHTS.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "no descriptor in the message",
            ));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
        use std::os::fd::FromRawFd;
        Ok((
            std::os::fd::OwnedFd::from_raw_fd(fd),
            data[..n as usize].to_vec(),
        ))
    }
}
