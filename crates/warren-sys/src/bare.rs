//! The kernel without the C library: system calls made directly (`syscall` on x86_64,
//! `svc 0` on aarch64), for `warren-init`, which starts at its own entry point so that
//! neither glibc's nor Rust's start-up runs in a zone's PID 1 (docs/scaling.md,
//! "warren-init"): no heap, no TLS block, no relocated data, no `errno`.
//!
//! Nothing here may call into libc or allocate: glibc was never initialised in that
//! process (its IFUNC'd string functions are unresolved, its TLS pointer is unset), and
//! Rust's allocator sits on glibc's malloc. The `libc` crate is used only for its
//! constants. Every call returns the kernel's result as is: `Err(Errno)` for the
//! negated error numbers the kernel returns.

use core::time::Duration;

/// An error number from the kernel (`ENOENT`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    /// What the C library would call it, for the console (no `strerror`: it needs the
    /// locale, in TLS). The numbers an init meets; any other is shown by its number.
    pub fn text(self) -> &'static str {
        match self.0 {
            libc::EPERM => "Operation not permitted",
            libc::ENOENT => "No such file or directory",
            libc::EINTR => "Interrupted system call",
            libc::EIO => "Input/output error",
            libc::E2BIG => "Argument list too long",
            libc::ENOEXEC => "Exec format error",
            libc::ECHILD => "No child processes",
            libc::EAGAIN => "Resource temporarily unavailable",
            libc::ENOMEM => "Cannot allocate memory",
            libc::EACCES => "Permission denied",
            libc::ENOTDIR => "Not a directory",
            libc::EISDIR => "Is a directory",
            libc::EINVAL => "Invalid argument",
            libc::EMFILE => "Too many open files",
            libc::ETXTBSY => "Text file busy",
            libc::ENAMETOOLONG => "File name too long",
            libc::ELOOP => "Too many levels of symbolic links",
            libc::EBADF => "Bad file descriptor",
            libc::EFAULT => "Bad address",
            libc::ENFILE => "Too many open files in system",
            libc::ENOSPC => "No space left on device",
            libc::EROFS => "Read-only file system",
            libc::ENOSYS => "Function not implemented",
            libc::ELIBBAD => "Accessing a corrupted shared library",
            _ => "Unknown error",
        }
    }
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} (os error {})", self.text(), self.0)
    }
}

pub type Result<T> = core::result::Result<T, Errno>;

#[cfg(target_arch = "x86_64")]
fn syscall6(n: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the `syscall` instruction with the kernel's x86_64 convention (number in
    // rax, arguments in rdi, rsi, rdx, r10, r8, r9; rcx and r11 clobbered). Every
    // caller below passes arguments valid for its call: pointers to live buffers of the
    // lengths given, or plain numbers. The asm may read and write memory those point to
    // (no `nomem`), so the compiler keeps them in place.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

#[cfg(target_arch = "aarch64")]
fn syscall6(n: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: `svc 0` with the kernel's aarch64 convention (number in x8, arguments in
    // x0-x5, result in x0). As for x86_64: every caller passes valid arguments.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") n,
            inlateout("x0") a[0] => ret,
            in("x1") a[1], in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5],
            options(nostack),
        );
    }
    ret
}

fn call(n: libc::c_long, a: [usize; 6]) -> Result<usize> {
    let r = syscall6(n, a);
    if (-4095..0).contains(&r) {
        Err(Errno(-r as i32))
    } else {
        Ok(r as usize)
    }
}

/// Retry on EINTR.
fn call_again(n: libc::c_long, a: [usize; 6]) -> Result<usize> {
    loop {
        match call(n, a) {
            Err(Errno(libc::EINTR)) => continue,
            r => return r,
        }
    }
}

/// Write all of `bytes` to `fd` (short writes continued); errors dropped: this is the
/// console, and there is nowhere to report its failure.
pub fn write_all(fd: i32, bytes: &[u8]) {
    let mut rest = bytes;
    while !rest.is_empty() {
        match call_again(
            libc::SYS_write,
            [fd as usize, rest.as_ptr() as usize, rest.len(), 0, 0, 0],
        ) {
            Ok(0) | Err(_) => return,
            Ok(n) => rest = rest.get(n..).unwrap_or_default(),
        }
    }
}

/// read(2) into `buf`, EINTR retried.
pub(crate) fn read(fd: i32, buf: &mut [u8]) -> Result<usize> {
    call_again(
        libc::SYS_read,
        [fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0],
    )
}

pub(crate) fn close(fd: i32) {
    let _ = call(libc::SYS_close, [fd as usize, 0, 0, 0, 0, 0]);
}

/// A pipe, both ends close-on-exec: (read, write).
pub(crate) fn pipe_cloexec() -> Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    call(
        libc::SYS_pipe2,
        [
            fds.as_mut_ptr() as usize,
            libc::O_CLOEXEC as usize,
            0,
            0,
            0,
            0,
        ],
    )?;
    Ok((fds[0], fds[1]))
}

/// fork(2) as the kernel does it (clone with SIGCHLD): 0 in the child.
///
/// # Safety
/// No fork handler of the C library runs: the child must only run code that takes no
/// lock and touches no state another thread of the parent could have held (the system
/// calls of this module, work on its own stack), then exec or [`exit`].
pub(crate) unsafe fn fork() -> Result<i32> {
    call(libc::SYS_clone, [libc::SIGCHLD as usize, 0, 0, 0, 0, 0]).map(|p| p as i32)
}

/// exit_group(2).
pub fn exit(code: i32) -> ! {
    loop {
        let _ = call(libc::SYS_exit_group, [code as usize, 0, 0, 0, 0, 0]);
    }
}

pub fn getpid() -> i32 {
    call(libc::SYS_getpid, [0; 6]).unwrap_or(0) as i32
}

/// The kernel's sigset for rt_sig* calls: 64 bits, not libc's 1024. All of them,
/// also 32 and 33, which glibc keeps out of `sigfillset` for its threads: warren-init
/// has none, and takes every signal with [`wait_signal`].
const ALL_SIGNALS: u64 = !0;
const SIGSET_SIZE: usize = 8;

/// Block every signal (to take them with [`wait_signal`]).
pub fn block_all_signals() -> Result<()> {
    let set = ALL_SIGNALS;
    call(
        libc::SYS_rt_sigprocmask,
        [
            libc::SIG_BLOCK as usize,
            &set as *const u64 as usize,
            0,
            SIGSET_SIZE,
            0,
            0,
        ],
    )
    .map(drop)
}

/// Wait up to `timeout` for any (blocked) signal: its number, or None on timeout or
/// interruption.
pub fn wait_signal(timeout: Duration) -> Result<Option<i32>> {
    let set = ALL_SIGNALS;
    let ts = timespec(timeout);
    match call(
        libc::SYS_rt_sigtimedwait,
        [
            &set as *const u64 as usize,
            0,
            ts.as_ptr() as usize,
            SIGSET_SIZE,
            0,
            0,
        ],
    ) {
        Ok(sig) => Ok(Some(sig as i32)),
        Err(Errno(libc::EAGAIN | libc::EINTR)) => Ok(None),
        Err(e) => Err(e),
    }
}

fn timespec(d: Duration) -> [i64; 2] {
    [
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        i64::from(d.subsec_nanos()),
    ]
}

/// Sleep for `d` (EINTR ends it early).
pub fn sleep(d: Duration) {
    let ts = timespec(d);
    let _ = call(libc::SYS_nanosleep, [ts.as_ptr() as usize, 0, 0, 0, 0, 0]);
}

/// CLOCK_MONOTONIC, by the system call (the vDSO's address is found by libc's
/// start-up, which did not run).
pub fn monotonic() -> Duration {
    let mut ts = [0i64; 2];
    let _ = call(
        libc::SYS_clock_gettime,
        [
            libc::CLOCK_MONOTONIC as usize,
            ts.as_mut_ptr() as usize,
            0,
            0,
            0,
            0,
        ],
    );
    Duration::new(
        u64::try_from(ts[0]).unwrap_or(0),
        u32::try_from(ts[1]).unwrap_or(0),
    )
}

/// How a child ended.
pub use crate::proc::ExitStatus;

fn decode(status: i32) -> Option<ExitStatus> {
    let sig = status & 0x7f;
    if sig == 0 {
        Some(ExitStatus::Exited((status >> 8) & 0xff))
    } else if sig != 0x7f {
        Some(ExitStatus::Signaled(sig))
    } else {
        None // stopped or continued: not asked for
    }
}

/// wait4(pid, WNOHANG): a child that ended, None while none has; ECHILD when there
/// is no child to wait for.
pub fn wait_nohang(pid: i32) -> Result<Option<(i32, ExitStatus)>> {
    wait(pid, libc::WNOHANG)
}

/// wait4(pid, 0): the next child that ends.
pub fn wait_blocking(pid: i32) -> Result<Option<(i32, ExitStatus)>> {
    wait(pid, 0)
}

fn wait(pid: i32, flags: i32) -> Result<Option<(i32, ExitStatus)>> {
    loop {
        let mut status = 0i32;
        let got = call_again(
            libc::SYS_wait4,
            [
                pid as isize as usize,
                &mut status as *mut i32 as usize,
                flags as usize,
                0,
                0,
                0,
            ],
        )? as i32;
        if got == 0 {
            return Ok(None);
        }
        if let Some(s) = decode(status) {
            return Ok(Some((got, s)));
        }
    }
}

pub fn kill(pid: i32, sig: i32) -> Result<()> {
    call(
        libc::SYS_kill,
        [pid as isize as usize, sig as usize, 0, 0, 0, 0],
    )
    .map(drop)
}

/// PR_SET_MEMORY_MERGE (Linux 6.4): KSM may merge this process's (and its children's)
/// anonymous memory.
pub fn set_memory_merge() -> Result<()> {
    const PR_SET_MEMORY_MERGE: usize = 67;
    call(libc::SYS_prctl, [PR_SET_MEMORY_MERGE, 1, 0, 0, 0, 0]).map(drop)
}

/// Open the directory `path` (NUL-terminated) read-only, close-on-exec.
pub fn open_dir(path: &[u8]) -> Result<i32> {
    if path.last() != Some(&0) {
        return Err(Errno(libc::EINVAL));
    }
    call_again(
        libc::SYS_openat,
        [
            libc::AT_FDCWD as isize as usize,
            path.as_ptr() as usize,
            (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) as usize,
            0,
            0,
            0,
        ],
    )
    .map(|fd| fd as i32)
}

/// Rewind a directory descriptor.
pub fn rewind(fd: i32) -> Result<()> {
    call(
        libc::SYS_lseek,
        [fd as usize, 0, libc::SEEK_SET as usize, 0, 0, 0],
    )
    .map(drop)
}

/// getdents64(2) into `buf`: the bytes of records read, 0 at the end.
pub fn getdents(fd: i32, buf: &mut [u8]) -> Result<usize> {
    call_again(
        libc::SYS_getdents64,
        [fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0],
    )
}

/// What a forked child does before it execs a service: default dispositions for
/// every signal, none blocked, its own session, `/` as its directory, /dev/null as its
/// stdin (stdout and stderr stay the console).
pub(crate) fn reset_for_exec() {
    let dfl = [0usize; 4]; // the kernel's sigaction: handler SIG_DFL, flags, restorer, mask
    for sig in 1..65usize {
        if sig != libc::SIGKILL as usize && sig != libc::SIGSTOP as usize {
            let _ = call(
                libc::SYS_rt_sigaction,
                [sig, dfl.as_ptr() as usize, 0, SIGSET_SIZE, 0, 0],
            );
        }
    }
    let empty = 0u64;
    let _ = call(
        libc::SYS_rt_sigprocmask,
        [
            libc::SIG_SETMASK as usize,
            &empty as *const u64 as usize,
            0,
            SIGSET_SIZE,
            0,
            0,
        ],
    );
    let _ = call(libc::SYS_setsid, [0; 6]);
    let _ = call(libc::SYS_chdir, [c"/".as_ptr() as usize, 0, 0, 0, 0, 0]);
    if let Ok(fd) = call(
        libc::SYS_openat,
        [
            libc::AT_FDCWD as isize as usize,
            c"/dev/null".as_ptr() as usize,
            libc::O_RDONLY as usize,
            0,
            0,
            0,
        ],
    ) {
        if fd != 0 {
            let _ = call(libc::SYS_dup3, [fd, 0, 0, 0, 0, 0]);
            close(fd as i32);
        }
    }
}

/// execve(2): returns only on failure. Each pointer array ends with a null pointer and
/// every pointer in it names a NUL-terminated string (what [`exec`]'s callers build).
fn execve(path: *const u8, argv: *const *const u8, envp: *const *const u8) -> Errno {
    match call(
        libc::SYS_execve,
        [path as usize, argv as usize, envp as usize, 0, 0, 0],
    ) {
        Err(e) => e,
        Ok(_) => Errno(libc::EIO),
    }
}

/// Exec `path` (NUL-terminated) with `argv` and `envp`: the error if it fails.
///
/// # Safety
/// Every pointer in `argv` and `envp` but their last (null, checked) points to a
/// NUL-terminated string that lives until the call returns.
pub(crate) unsafe fn exec(path: &[u8], argv: &[*const u8], envp: &[*const u8]) -> Errno {
    if path.last() != Some(&0)
        || argv.last() != Some(&core::ptr::null())
        || envp.last() != Some(&core::ptr::null())
    {
        return Errno(libc::EINVAL);
    }
    execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_decode_as_the_c_macros_do() {
        assert_eq!(decode(0), Some(ExitStatus::Exited(0)));
        assert_eq!(decode(7 << 8), Some(ExitStatus::Exited(7)));
        assert_eq!(decode(libc::SIGKILL), Some(ExitStatus::Signaled(9)));
        assert_eq!(decode(0x80 | libc::SIGSEGV), Some(ExitStatus::Signaled(11))); // core dumped
        assert_eq!(decode(0x137f), None); // stopped by SIGSTOP
    }

    #[test]
    fn calls_return_the_kernels_errors() {
        assert_eq!(getpid(), std::process::id() as i32);
        assert_eq!(open_dir(b"/nonexistent-warren\0"), Err(Errno(libc::ENOENT)));
        assert_eq!(open_dir(b"/proc"), Err(Errno(libc::EINVAL)));
        let fd = open_dir(b"/proc\0").unwrap();
        let mut buf = [0u8; 1024];
        assert!(getdents(fd, &mut buf).unwrap() > 0);
        rewind(fd).unwrap();
        close(fd);
        assert_eq!(
            format!("{}", Errno(libc::ENOENT)),
            "No such file or directory (os error 2)"
        );
        let a = monotonic();
        sleep(Duration::from_millis(2));
        assert!(monotonic() > a);
    }

    #[test]
    fn a_forked_child_execs_or_reports_why_not() {
        let (rd, wr) = pipe_cloexec().unwrap();
        close(rd);
        close(wr);
        // SAFETY: the child only makes this module's calls on its own stack, then exits.
        let pid = unsafe { fork() }.unwrap();
        if pid == 0 {
            let argv = [c"true".as_ptr().cast::<u8>(), core::ptr::null()];
            let envp = [core::ptr::null()];
            // SAFETY: argv[0] is a static C string; both arrays end with a null.
            let e = unsafe { exec(b"/nonexistent/true\0", &argv, &envp) };
            exit(if e == Errno(libc::ENOENT) { 3 } else { 4 });
        }
        assert_eq!(
            wait_blocking(pid).unwrap(),
            Some((pid, ExitStatus::Exited(3)))
        );
        assert_eq!(wait_nohang(pid), Err(Errno(libc::ECHILD)));
    }
}
