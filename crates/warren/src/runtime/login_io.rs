//! The relay of a login's stdio: a pty of the zone's devpts whose window size follows
//! the caller's terminal (its size copied at start and again on every SIGWINCH, which
//! the kernel passes on to the command's foreground process group), or three pipes.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use warren_sys::libc;

use super::login::{Command, Stdio};
use crate::error::{IoContext, Result};

/// The caller's terminal: the first of stdin, stdout and stderr that is one.
fn caller_terminal() -> Option<RawFd> {
    (0..3).find(|fd| warren_sys::pty::isatty(*fd))
}

/// Run the command on a pty of the zone's devpts and relay it to our terminal.
pub(super) fn run_on_pty(c: &Command<'_>) -> Result<i32> {
    let zone = c.zone;
    let (master, slave_path) =
        warren_sys::pty::open_master().ctx(|| format!("zone '{zone}': opening a pty"))?;
    let slave = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&slave_path)
        .ctx(|| format!("zone '{zone}': opening {}", slave_path.display()))?;
    let term = caller_terminal();
    if let Some(t) = term {
        let _ = warren_sys::pty::copy_winsize(t, master.as_raw_fd());
    }
    let pid = c.spawn(Stdio::Pty(slave.as_raw_fd()))?;
    drop(slave);
    // Blocked only now, so the command does not inherit the mask; taken in the loop.
    let mask = warren_sys::signal::block(&[libc::SIGWINCH])
        .ctx(|| "blocking SIGWINCH to follow the terminal's size".to_string())?;
    let m = master.as_raw_fd();
    let resize = || {
        if let Some(t) = term {
            let _ = warren_sys::pty::copy_winsize(t, m);
        }
    };
    // A resize between the first copy and the block above.
    resize();
    let raw = warren_sys::pty::isatty(0)
        .then(|| warren_sys::pty::raw_mode(0).ok())
        .flatten();
    let mut buf = [0u8; 8192];
    let mut stdin_open = true;
    loop {
        if warren_sys::signal::take(&[libc::SIGWINCH]).is_some() {
            resize();
        }
        let fds: Vec<i32> = if stdin_open { vec![m, 0] } else { vec![m] };
        let revents = warren_sys::pty::poll_in(&fds, 50).ctx(|| "polling the pty".to_string())?;
        if revents[0] != 0 {
            let n = warren_sys::pty::read_fd(m, &mut buf).unwrap_or(0);
            if n == 0 {
                break;
            }
            if warren_sys::pty::write_fd(1, &buf[..n]).is_err() {
                break;
            }
        }
        if stdin_open && revents.get(1).copied().unwrap_or(0) != 0 {
            let n = warren_sys::pty::read_fd(0, &mut buf).unwrap_or(0);
            if n == 0 {
                stdin_open = false;
            } else {
                let _ = warren_sys::pty::write_fd(m, &buf[..n]);
            }
        }
        if revents[0] & (libc::POLLHUP | libc::POLLERR) != 0 && revents[0] & libc::POLLIN == 0 {
            break;
        }
    }
    drop(raw);
    let _ = warren_sys::signal::restore(&mask);
    let status =
        warren_sys::proc::waitpid_blocking(pid).ctx(|| "waiting for the command".to_string())?;
    Ok(status.code())
}

/// Run the command on three pipes in a new session and relay them to this process's
/// stdio until it exits (and its output is drained).
pub(super) fn run_on_pipes(c: &Command<'_>) -> Result<i32> {
    let zone = c.zone;
    let pipe = || warren_sys::spawn::pipe_cloexec().ctx(|| format!("zone '{zone}': making a pipe"));
    let (in_r, in_w) = pipe()?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let pid = c.spawn(Stdio::Pipes([
        in_r.as_raw_fd(),
        out_w.as_raw_fd(),
        err_w.as_raw_fd(),
    ]))?;
    drop((in_r, out_w, err_w));
    warren_sys::pty::set_nonblocking(in_w.as_raw_fd(), true)
        .ctx(|| "making the command's stdin non-blocking".to_string())?;
    let mut status = None;
    let relay = relay(Some(in_w), out_r, err_r, || {
        if status.is_none() {
            status = warren_sys::proc::waitpid_nohang(pid)
                .ok()
                .flatten()
                .map(|(_, s)| s);
        }
        status.is_some()
    })
    .ctx(|| format!("zone '{zone}': relaying the command's stdio"));
    let status = match status {
        Some(s) => s,
        None => warren_sys::proc::waitpid_blocking(pid)
            .ctx(|| format!("zone '{zone}': waiting for {}", c.program.display()))?,
    };
    relay?;
    Ok(status.code())
}

/// Pump between this process's stdio and a command's pipes until both output pipes
/// reach EOF, or the command has exited and its pipes stayed quiet for a moment (a
/// background process of the zone may hold them open forever; login does not wait).
fn relay(
    mut to_child: Option<OwnedFd>,
    out: OwnedFd,
    err: OwnedFd,
    mut exited: impl FnMut() -> bool,
) -> std::io::Result<()> {
    use warren_sys::pty::{poll, read_fd, write_fd, write_some};
    let (out, err) = (File::from(out), File::from(err));
    let (out, err) = (out.as_raw_fd(), err.as_raw_fd());
    let mut buf = [0u8; 8192];
    let mut pending: Vec<u8> = Vec::new();
    let mut our_stdin_open = true;
    let mut open = [true, true];
    let mut quiet_after_exit = 0;
    while open.iter().any(|o| *o) {
        let mut fds = Vec::with_capacity(4);
        for (i, fd) in [out, err].into_iter().enumerate() {
            if open[i] {
                fds.push((fd, libc::POLLIN));
            }
        }
        let child_in = to_child.as_ref().map(|s| s.as_raw_fd());
        if let Some(c) = child_in {
            if !pending.is_empty() {
                fds.push((c, libc::POLLOUT));
            } else if our_stdin_open {
                fds.push((0, libc::POLLIN));
            }
        }
        let revents = poll(&fds, 100)?;
        let mut busy = false;
        for (&(fd, _), &ev) in fds.iter().zip(&revents) {
            if ev == 0 {
                continue;
            }
            busy = true;
            if fd == out || fd == err {
                let n = read_fd(fd, &mut buf)?;
                let i = usize::from(fd == err);
                if n == 0 || write_fd(if i == 0 { 1 } else { 2 }, &buf[..n]).is_err() {
                    // EOF, or our reader went away: stop relaying this stream.
                    open[i] = false;
                }
            } else if fd == 0 {
                let n = read_fd(0, &mut buf).unwrap_or(0);
                if n == 0 {
                    our_stdin_open = false;
                    to_child = None;
                } else {
                    pending.extend_from_slice(&buf[..n]);
                }
            } else if Some(fd) == child_in {
                match write_some(fd, &pending) {
                    Ok(n) => {
                        pending.drain(..n);
                        if pending.is_empty() && !our_stdin_open {
                            to_child = None;
                        }
                    }
                    // The command closed its stdin: drop what it will never read.
                    Err(_) => {
                        pending.clear();
                        to_child = None;
                    }
                }
            }
        }
        if !busy && exited() {
            quiet_after_exit += 1;
            if quiet_after_exit >= 2 {
                break;
            }
        }
    }
    Ok(())
}
