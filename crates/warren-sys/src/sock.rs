//! Sockets by descriptor: what one is (its type, whether it listens, who made its
//! peer), a unix connect that never waits, and a send that never raises SIGPIPE.
//!
//! The option reads are `getsockopt(2)` on sockfs: they never wait, and on a file
//! that is not a socket they fail with `ENOTSOCK` without calling into the file's own
//! filesystem (where `fstat` on a FUSE file asks the FUSE server, and may wait for it).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::cvt;

/// One `int` socket option at `SOL_SOCKET`.
fn int_option(fd: BorrowedFd<'_>, name: i32) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is open (borrowed for the call); `v` and `len` are valid, writable
    // and `len` holds `v`'s size, so the kernel writes at most that many bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(v)
}

/// `SO_TYPE`: `SOCK_STREAM`, `SOCK_DGRAM`, `SOCK_SEQPACKET`, …; `ENOTSOCK` (raw OS
/// error) for any other file.
pub fn socket_type(fd: BorrowedFd<'_>) -> io::Result<i32> {
    int_option(fd, libc::SO_TYPE)
}

/// `SO_ACCEPTCONN`: whether the socket is listening.
pub fn listening(fd: BorrowedFd<'_>) -> io::Result<bool> {
    int_option(fd, libc::SO_ACCEPTCONN).map(|v| v != 0)
}

/// `SO_PEERCRED`'s pid: on a connected unix stream socket, the process that made the
/// peer (for a client, the one that called `listen` on the server's socket).
pub fn peer_pid(fd: BorrowedFd<'_>) -> io::Result<i32> {
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `fd` is open; `c` and `len` are valid and writable, `len` holds `c`'s
    // size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    })?;
    Ok(c.pid)
}

/// Connect a new unix stream socket to `path` without waiting: the socket is
/// non-blocking and close-on-exec; a listener whose backlog is full fails with
/// `WouldBlock` (`EAGAIN`) instead of holding the caller until it accepts.
pub fn connect_unix_now(path: &Path) -> io::Result<OwnedFd> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain old data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: a unix socket path must be shorter than {} bytes, without NUL",
                path.display(),
                addr.sun_path.len()
            ),
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: socket takes plain integers and returns a new descriptor or -1.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    })?;
    // SAFETY: the kernel just returned this descriptor to us; nobody else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
    // SAFETY: `addr` is an initialised sockaddr_un and `len` does not exceed its size
    // (the path is shorter than sun_path, checked above).
    cvt(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    })?;
    Ok(fd)
}

/// `send(fd, buf, MSG_NOSIGNAL)`: a peer that went away is `EPIPE`, never a SIGPIPE
/// (warren restores SIGPIPE's default action so that a closed stdout ends it quietly).
pub fn send_nosignal(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `fd` is open and `buf` is a readable slice of the length passed.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    cvt(n).map(|n| n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::{UnixDatagram, UnixListener};

    #[test]
    fn options_tell_a_listener_a_datagram_socket_and_a_file_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let l = UnixListener::bind(dir.join("l.sock")).unwrap();
        assert_eq!(socket_type(l.as_fd()).unwrap(), libc::SOCK_STREAM);
        assert!(listening(l.as_fd()).unwrap());
        let d = UnixDatagram::unbound().unwrap();
        assert_eq!(socket_type(d.as_fd()).unwrap(), libc::SOCK_DGRAM);
        assert!(!listening(d.as_fd()).unwrap());
        let f = std::fs::File::open("/proc/self/status").unwrap();
        let e = socket_type(f.as_fd()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTSOCK));
        // A connect names the listener's process as the peer, and never waits.
        let c = connect_unix_now(&dir.join("l.sock")).unwrap();
        assert_eq!(peer_pid(c.as_fd()).unwrap(), std::process::id() as i32);
        let e = connect_unix_now(&dir.join("none.sock")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        drop(b);
        let e = send_nosignal(a.as_fd(), b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
    }
}
