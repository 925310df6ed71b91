//! Sockets by descriptor: what one is (its type, whether it listens, who made its
//! peer), a unix connect that never waits, a send that never raises SIGPIPE, and a
//! unix stream socket bound and set listening in two steps (std's `UnixListener::bind`
//! does both at once: a caller that must act between the two, or a test that must
//! stand in that window, uses [`bind_unix`] then [`listen`]).
//!
//! The option reads are `getsockopt(2)` on sockfs: they never wait, and on a file
//! that is not a socket they fail with `ENOTSOCK` without calling into the file's own
//! filesystem (where `fstat` on a FUSE file asks the FUSE server, and may wait for it).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::cvt;

/// `path` as a `sockaddr_un` and the length to pass with it (family, path, NUL).
fn unix_addr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain old data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    // One byte is left for the terminating NUL (the zeroed array's last).
    if bytes.is_empty() || bytes.contains(&0) || bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "socket path {} is empty, holds a NUL or is longer than {} bytes",
                path.display(),
                addr.sun_path.len() - 1
            ),
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

/// A new close-on-exec unix stream socket with `flags` added to its type.
fn unix_stream(flags: i32) -> io::Result<OwnedFd> {
    // SAFETY: socket takes plain integers; a non-negative result is a new descriptor
    // that nothing else owns.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | flags,
            0,
        )
    })?;
    // SAFETY: `fd` was just returned by socket and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new close-on-exec Unix stream socket bound to `path`, not listening yet: until
/// [`listen`], a connect to `path` is refused.
pub fn bind_unix(path: &Path) -> io::Result<OwnedFd> {
    let (addr, len) = unix_addr(path)?;
    let fd = unix_stream(0)?;
    // SAFETY: `addr` is a valid sockaddr_un that outlives the call, and `len` (family,
    // path, NUL) is within its size (checked by unix_addr).
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const addr).cast::<libc::sockaddr>(),
            len,
        )
    })?;
    Ok(fd)
}

/// `listen(2)` on a bound socket, with the largest backlog the kernel allows
/// (`net.core.somaxconn`; larger values are cut to it).
pub fn listen(fd: BorrowedFd<'_>) -> io::Result<()> {
    listen_backlog(fd, libc::SOMAXCONN)
}

/// `listen(2)` with the backlog `backlog` (again on a listening socket: a new
/// backlog). A unix socket's is full past `backlog` pending connections: a test fills
/// one with a single connect to a backlog of 0.
pub fn listen_backlog(fd: BorrowedFd<'_>, backlog: i32) -> io::Result<()> {
    // SAFETY: listen takes a descriptor (borrowed, so open) and an integer.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) })?;
    Ok(())
}

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
    let (addr, len) = unix_addr(path)?;
    let fd = unix_stream(libc::SOCK_NONBLOCK)?;
    // SAFETY: `addr` is an initialised sockaddr_un and `len` does not exceed its size
    // (checked by unix_addr).
    cvt(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&raw const addr).cast::<libc::sockaddr>(),
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
    use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};

    #[test]
    fn a_bound_socket_refuses_until_it_listens() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let fd = bind_unix(&path).unwrap();
        let e = UnixStream::connect(&path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
        listen(fd.as_fd()).unwrap();
        let l = UnixListener::from(fd);
        let _c = UnixStream::connect(&path).unwrap();
        l.accept().unwrap();
    }

    #[test]
    fn a_path_too_long_for_sun_path_is_refused() {
        let long = format!("/tmp/{}", "x".repeat(200));
        let e = bind_unix(Path::new(&long)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

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
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        let e = send_nosignal(a.as_fd(), b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
    }
}
