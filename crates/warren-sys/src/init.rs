//! What a zone's init (warren-init, PID 1 of every zone) needs from the kernel without
//! touching the heap: its environment as the kernel laid it out, a line to stderr, and
//! a service started by fork + exec where only the child allocates.
//!
//! Why: every page PID 1 dirties is paid once per zone, and an init that never calls
//! malloc keeps its heap at what the C library took before `main` (docs/scaling.md,
//! "warren-init").
//! Nothing here decides anything: what to start, what to log and when to stop are
//! `warren::runtime::init`'s.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

extern "C" {
    /// The C library's environment array (NULL-terminated `KEY=VALUE` strings).
    static environ: *const *const libc::c_char;
}

/// The process's environment entries (`KEY=VALUE`, without the NUL), in order, as the
/// kernel put them on the initial stack. Single-threaded callers that never change the
/// environment (warren-init) only: the strings live as long as the process then.
pub fn environment() -> impl Iterator<Item = &'static [u8]> {
    // SAFETY: reading the pointer value of `environ`; the caller does not modify the
    // environment (documented above), so no other write races with this read.
    let mut p = unsafe { environ };
    std::iter::from_fn(move || {
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` points into the NULL-terminated environ array (checked non-NULL
        // above, and never advanced past the terminator).
        let entry = unsafe { *p };
        if entry.is_null() {
            p = std::ptr::null();
            return None;
        }
        // SAFETY: `entry` is a NUL-terminated string of the environment block, which is
        // never freed or changed in this process (see the function's contract).
        let s = unsafe { CStr::from_ptr(entry) };
        // SAFETY: the array has a further element (at least the terminating NULL).
        p = unsafe { p.add(1) };
        Some(s.to_bytes())
    })
}

/// Write `line` to stderr whole (retrying short writes and EINTR); errors are dropped,
/// as PID 1 has nowhere else to report them.
pub fn write_stderr(line: &[u8]) {
    let mut rest = line;
    while !rest.is_empty() {
        // SAFETY: the source range lies inside `rest`; fd 2 may be closed (then EBADF).
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if n == 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

/// Start a service: fork, and in the child (which may allocate: it is a copy that execs
/// or exits) split `command` at `sep` into argv, find argv[0] in `path` (a PATH value)
/// unless it holds a '/', pass the entries of [`environment`] that `keep` accepts, put
/// every signal back to its default and unblocked, stdin on /dev/null, a new session,
/// cwd "/", and exec. The parent allocates nothing. Returns the child's pid, or the
/// errno of the exec that failed (ENOENT when argv[0] is in no directory of `path`).
/// Single-threaded callers only (checked, as [`crate::proc::fork`]).
pub fn spawn_service(
    command: &[u8],
    sep: u8,
    path: &[u8],
    keep: fn(&[u8]) -> bool,
) -> io::Result<i32> {
    let (rd, wr) = crate::spawn::pipe_cloexec()?;
    let pid = crate::proc::fork()?;
    if pid == 0 {
        let errno = service_child(command, sep, path, keep);
        let bytes = errno.to_ne_bytes();
        // SAFETY: a 4-byte write from a live buffer to the pipe's write end, then _exit
        // (no destructors or atexit handlers of the parent's copy run in the child).
        unsafe {
            libc::write(wr.as_raw_fd(), bytes.as_ptr().cast(), 4);
            libc::_exit(127);
        }
    }
    drop(wr);
    let mut buf = [0u8; 4];
    // A successful exec closes the write end (close-on-exec): EOF, no bytes.
    let n = loop {
        // SAFETY: the destination is `buf`, 4 bytes long.
        let n = unsafe { libc::read(rd.as_raw_fd(), buf.as_mut_ptr().cast(), 4) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        break n;
    };
    if n == 4 {
        let _ = crate::proc::waitpid_blocking(pid);
        return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(buf)));
    }
    Ok(pid)
}

/// The child's side of [`spawn_service`]: returns only on failure, with the errno.
fn service_child(command: &[u8], sep: u8, path: &[u8], keep: fn(&[u8]) -> bool) -> i32 {
    let Ok(argv) = command
        .split(|&b| b == sep)
        .map(CString::new)
        .collect::<Result<Vec<CString>, _>>()
    else {
        return libc::EINVAL;
    };
    let Some(prog) = argv.first() else {
        return libc::EINVAL;
    };
    let envp: Vec<CString> = environment()
        .filter(|e| keep(e))
        .filter_map(|e| CString::new(e).ok())
        .collect();
    let argv_p = crate::spawn::pointer_array(&argv);
    let envp_p = crate::spawn::pointer_array(&envp);
    // SAFETY: plain calls on valid arguments in the single-threaded child; the signal
    // set is initialised by sigemptyset before use, the paths are NUL-terminated.
    unsafe {
        let mut empty = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(empty.as_mut_ptr());
        for sig in 1..libc::SIGRTMIN() {
            libc::signal(sig, libc::SIG_DFL);
        }
        libc::sigprocmask(libc::SIG_SETMASK, empty.as_ptr(), std::ptr::null_mut());
        libc::setsid();
        libc::chdir(c"/".as_ptr());
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if fd > 0 {
            libc::dup2(fd, 0);
            libc::close(fd);
        }
    }
    let exec = |file: &CStr| -> i32 {
        // SAFETY: `file`, `argv_p` and `envp_p` are NUL-terminated and alive; execve
        // returns only on failure.
        unsafe { libc::execve(file.as_ptr(), argv_p.as_ptr(), envp_p.as_ptr()) };
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    if prog.as_bytes().contains(&b'/') {
        return exec(prog);
    }
    // As execvp: the first directory holding it wins; "not there" errors let the search
    // go on, and EACCES is reported if no later directory had it either.
    let mut result = libc::ENOENT;
    for dir in path.split(|&b| b == b':') {
        let mut full = Vec::with_capacity(dir.len() + 1 + prog.as_bytes().len());
        full.extend_from_slice(if dir.is_empty() { b"." } else { dir });
        full.push(b'/');
        full.extend_from_slice(prog.as_bytes());
        let Ok(full) = CString::new(full) else {
            continue;
        };
        match exec(&full) {
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
            libc::EACCES => result = libc::EACCES,
            other => return other,
        }
    }
    result
}

/// Whether the pid namespace whose procfs root `proc_dir` is open on holds a process
/// other than PID 1 (a numeric entry but "1"), read with `getdents64` into a buffer on
/// the stack. An error answers yes (the caller then signals, as it would without this).
///
/// Why: PID 1's `kill(-1, sig)` reaches every other process of its namespace, but the
/// kernel finds them by looking at every process on the *host*; with 10,000 zones each
/// halt paid that walk even when init was alone.
pub fn others_in_pid_namespace(proc_dir: BorrowedFd<'_>) -> bool {
    let fd = proc_dir.as_raw_fd();
    // SAFETY: lseek on a descriptor the caller keeps open; no memory is passed.
    if unsafe { libc::lseek(fd, 0, libc::SEEK_SET) } < 0 {
        return true;
    }
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: getdents64 writes at most `buf.len()` bytes into `buf`, which lives
        // for the call.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        if n < 0 {
            return true;
        }
        if n == 0 {
            return false;
        }
        if entries_name_another_process(&buf[..n as usize]) {
            return true;
        }
    }
}

/// The pure part of [`others_in_pid_namespace`]: whether the `linux_dirent64` records
/// in `records` (d_ino u64, d_off i64, d_reclen u16, d_type u8, the NUL-terminated name)
/// name a process other than "1". A malformed record answers yes.
fn entries_name_another_process(records: &[u8]) -> bool {
    let mut at = 0;
    while at < records.len() {
        let Some(rec) = records.get(at..) else {
            return true;
        };
        let Some(len) = rec
            .get(16..18)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]) as usize)
        else {
            return true;
        };
        if len < 20 || len > rec.len() {
            return true;
        }
        let name = &rec[19..len];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if !name.is_empty() && name.iter().all(u8::is_ascii_digit) && name != b"1" {
            return true;
        }
        at += len;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_read_in_order_without_copying() {
        let ours: Vec<Vec<u8>> = std::env::vars_os()
            .map(|(k, v)| {
                let mut e = k.into_encoded_bytes();
                e.push(b'=');
                e.extend_from_slice(v.as_encoded_bytes());
                e
            })
            .collect();
        let raw: Vec<Vec<u8>> = environment().map(<[u8]>::to_vec).collect();
        assert_eq!(raw, ours);
    }

    fn record(name: &str) -> Vec<u8> {
        let len = (19 + name.len() + 1).div_ceil(8) * 8;
        let mut r = vec![0u8; len];
        r[16..18].copy_from_slice(&(len as u16).to_ne_bytes());
        r[18] = 4;
        r[19..19 + name.len()].copy_from_slice(name.as_bytes());
        r
    }

    #[test]
    fn only_pid_1_and_other_entries_mean_alone() {
        let alone: Vec<u8> = [".", "..", "1", "self", "sys", "10x"]
            .iter()
            .flat_map(|n| record(n))
            .collect();
        assert!(!entries_name_another_process(&alone));
        let mut busy = alone.clone();
        busy.extend(record("42"));
        assert!(entries_name_another_process(&busy));
        // A record that claims more than there is: yes (signal, as without the check).
        let mut bad = record("1");
        bad[16] = 200;
        assert!(entries_name_another_process(&bad));
    }

    #[test]
    fn the_hosts_proc_has_other_processes() {
        let d = std::fs::File::open("/proc").unwrap();
        use std::os::fd::AsFd;
        assert!(others_in_pid_namespace(d.as_fd()));
        // Read twice: the descriptor is rewound.
        assert!(others_in_pid_namespace(d.as_fd()));
    }
}
