//! Unix stream sockets bound and set listening in two steps (std's
//! `UnixListener::bind` does both at once): a caller that must act between the two,
//! or a test that must stand in that window, uses [`bind_unix`] then [`listen`].

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::cvt;

/// A new close-on-exec Unix stream socket bound to `path`, not listening yet: until
/// [`listen`], a connect to `path` is refused.
pub fn bind_unix(path: &Path) -> io::Result<OwnedFd> {
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
    // SAFETY: socket takes plain integers; a non-negative result is a new descriptor
    // that nothing else owns.
    let fd =
        cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by socket and is owned by no one else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    // SAFETY: `addr` is a valid sockaddr_un that outlives the call, and `len` (family,
    // path, NUL) is within its size (checked above).
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const addr).cast::<libc::sockaddr>(),
            len as libc::socklen_t,
        )
    })?;
    Ok(fd)
}

/// `listen(2)` on a bound socket, with the largest backlog the kernel allows
/// (`net.core.somaxconn`; larger values are cut to it).
pub fn listen(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: listen takes a descriptor (borrowed, so open) and an integer.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), libc::SOMAXCONN) })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::{UnixListener, UnixStream};

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
}
