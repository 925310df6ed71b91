//! Spawning a zone's init: `clone(2)` into new namespaces, then a precomputed list of
//! steps (mounts, device nodes, pivot_root, …), then `execve`.
//!
//! The child runs between `clone` and `execve` in a copy of the parent's address space.
//! It must not allocate, lock or touch anything another thread might hold, so every
//! string it needs is built by the parent *before* the clone ([`SpawnPlan`] owns them) and
//! the child only walks the plan issuing raw syscalls. A failing step is reported to the
//! parent as `(step index, errno)` over a close-on-exec pipe; EOF on that pipe means
//! `execve` succeeded.
//!
//! With [`SpawnPlan::into_cgroup`] the child is cloned straight into its cgroup v2
//! directory (`clone3(CLONE_INTO_CGROUP)`, see `clone.rs`), falling back to a plain
//! clone where the kernel cannot; the caller's after-clone handler migrates the child
//! only when [`SpawnPlan::placed_in_cgroup`] is false.
//!
//! Some setup can only happen from outside once the child exists (a veth pair moved
//! into its network namespace, by pid). [`spawn_staged`] tells a handler in the parent
//! when the child exists ([`Event::Cloned`], while the child walks its steps) and when
//! it reaches a [`Step::Sync`] (it says so on the report pipe and waits); a
//! [`Step::WaitParent`] blocks the child until the `Cloned` handler has succeeded, a
//! `Sync` until its own handler has (one byte on a second pipe each). If a handler
//! fails, the parent closes that pipe without writing, the child reads EOF and exits,
//! and the handler's error is returned. A zone's boot moves the child into its cgroups
//! and wires its network on `Cloned` and opens its console at its one `Sync`, after its
//! root is built; [`spawn_zone_with`] is the `Cloned`-only form.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;

use crate::cvt;

mod clone;
mod step;

pub use clone::{into_cgroup_supported, IntoCgroup};
use step::run_step;
pub use step::Step;

/// What the parent of [`spawn_staged`] is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The child exists (host pid); a [`Step::WaitParent`] waits for this handler.
    Cloned(i32),
    /// The child reached [`Step::Sync`] `n` and waits for this handler.
    Sync(u32),
}

/// What to execute once the steps are done.
#[derive(Debug)]
pub enum ExecTarget {
    /// A path resolved inside the zone's root.
    Path(CString),
    /// An open file descriptor (`execveat(fd, "", …, AT_EMPTY_PATH)`), so a host binary
    /// can run as the zone's init without being visible inside the zone.
    Fd(RawFd),
}

/// Everything the child needs, built by the parent.
#[derive(Debug)]
pub struct SpawnPlan {
    /// `CLONE_NEW*` flags for the clone.
    pub clone_flags: libc::c_int,
    pub steps: Vec<Step>,
    pub exec: ExecTarget,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    /// How many descriptors after stdio the process is meant to inherit (3 up to
    /// `3 + pass_fds`, e.g. OCI `--preserve-fds`). Every other descriptor is made
    /// close-on-exec as the child's last act before its seccomp filter and exec, whatever
    /// the steps opened (see [`crate::fds`]).
    pub pass_fds: u32,
    /// A cgroup v2 directory to clone the child into (`clone3(CLONE_INTO_CGROUP)`),
    /// so the parent need not migrate it; see [`IntoCgroup::placed`] for whether it
    /// happened (it falls back to a plain clone where the kernel cannot).
    pub into_cgroup: Option<IntoCgroup>,
}

impl SpawnPlan {
    /// Whether the last spawn cloned the child straight into
    /// [`SpawnPlan::into_cgroup`] (then nothing has to migrate it).
    pub fn placed_in_cgroup(&self) -> bool {
        self.into_cgroup.as_ref().is_some_and(IntoCgroup::placed)
    }
}

/// Why a spawn failed; `E` is the after-clone callback's error type.
#[derive(Debug)]
pub enum SpawnError<E = std::convert::Infallible> {
    /// `clone` itself failed (e.g. EAGAIN at pid_max, ENOSPC at a namespace limit).
    Clone(io::Error),
    /// Step `index` of the plan failed in the child.
    Step { index: usize, error: io::Error },
    /// The final exec failed.
    Exec(io::Error),
    /// Talking to the child failed.
    Pipe(io::Error),
    /// The parent's after-clone callback failed; the child was told to give up.
    Setup(E),
}

const EXEC_STEP: u32 = u32::MAX;

/// Report-pipe index of a [`Step::Sync`] message (the errno field carries `n`).
const SYNC_MARK: u32 = u32::MAX - 1;

/// Report-pipe index of a [`Step::Ready`] message.
const READY_MARK: u32 = u32::MAX - 2;

/// Clone a child into new namespaces, run `plan.steps` in it and exec `plan.exec`.
/// Returns the child's pid (in the caller's pid namespace) once the exec has succeeded.
pub fn spawn_zone(plan: &SpawnPlan) -> Result<i32, SpawnError> {
    spawn_zone_with(plan, |_| Ok(()))
}

/// [`spawn_zone`], running `after_clone(child_pid)` in the parent right after the
/// clone. A plan that needs the callback's work done before exec contains
/// [`Step::WaitParent`]; the child passes it only if the callback returned `Ok`.
/// One protocol: this is [`spawn_staged`] with a handler for [`Event::Cloned`] only.
pub fn spawn_zone_with<E>(
    plan: &SpawnPlan,
    after_clone: impl FnOnce(i32) -> Result<(), E>,
) -> Result<i32, SpawnError<E>> {
    let mut after_clone = Some(after_clone);
    spawn_staged(plan, |event| match event {
        Event::Cloned(pid) => after_clone.take().map_or(Ok(()), |f| f(pid)),
        Event::Sync(_) => Ok(()),
    })
}

/// A NULL-terminated array of pointers into `strings` (for execve), built before a
/// fork so the child need not allocate.
pub(crate) fn pointer_array(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(ptr::null()))
        .collect()
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The child's side: returns only on failure, with (step index, errno).
fn run_child(
    plan: &SpawnPlan,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    empty: *const libc::c_char,
    go_fd: RawFd,
    report_fd: RawFd,
) -> (u32, i32) {
    // Until it execs, the child is a copy of warren holding warren's descriptors (an
    // OCI init waits for `start` like that, reachable by processes exec'd into the
    // container): non-dumpable, no process of the sandbox may ptrace it or open its
    // /proc/<pid>/fd, /proc/<pid>/exe or memory. exec makes the new program dumpable
    // again as the kernel decides.
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } < 0 {
        return (0, errno());
    }
    let first_closed = 3 + plan.pass_fds.min(i32::MAX as u32 - 3) as RawFd;
    let mut sealed = false;
    for (i, step) in plan.steps.iter().enumerate() {
        // Nothing but stdio and the descriptors meant for the process survives exec:
        // flagged right before the seccomp filter (which may not allow close_range),
        // after every step that opens something.
        if !sealed && matches!(step, Step::Seccomp(_)) {
            if let Err(e) = crate::fds::cloexec_from_raw(first_closed) {
                return (i as u32, e);
            }
            sealed = true;
        }
        if run_step(step, go_fd, report_fd).is_err() {
            return (i as u32, errno());
        }
    }
    if !sealed {
        if let Err(e) = crate::fds::cloexec_from_raw(first_closed) {
            return (EXEC_STEP, e);
        }
    }
    // The new program starts with no signal blocked, whatever the caller blocked (a
    // blocked mask survives exec: the containerd shim blocks SIGCHLD in all its threads
    // for its reaper, and a startContainer hook must not inherit that).
    // SAFETY: sigemptyset initialises the set before sigprocmask reads it.
    unsafe {
        let mut empty_set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(empty_set.as_mut_ptr());
        libc::sigprocmask(libc::SIG_SETMASK, empty_set.as_ptr(), std::ptr::null_mut());
    }
    match plan.exec {
        // SAFETY: `argv`/`envp` are NULL-terminated arrays of pointers into CStrings owned
        // by `plan`, alive until exec replaces the image; the path is NUL-terminated.
        ExecTarget::Path(ref path) => unsafe {
            libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        },
        // SAFETY: as above; `empty` is a NUL-terminated "" required by AT_EMPTY_PATH.
        ExecTarget::Fd(fd) => unsafe {
            libc::syscall(
                libc::SYS_execveat,
                fd,
                empty,
                argv.as_ptr(),
                envp.as_ptr(),
                libc::AT_EMPTY_PATH,
            );
        },
    }
    (EXEC_STEP, errno())
}

/// Write an 8-byte (index, value) message on the report pipe.
fn report(fd: RawFd, index: u32, value: i32) -> Result<(), ()> {
    let mut buf = [0u8; 8];
    buf[..4].copy_from_slice(&index.to_ne_bytes());
    buf[4..].copy_from_slice(&value.to_ne_bytes());
    // SAFETY: `buf` is 8 readable bytes; a pipe write of 8 bytes is atomic.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n == 8 {
        Ok(())
    } else {
        Err(())
    }
}

/// Clone a child, run `plan.steps` in it and exec, telling `on_event` when the child
/// exists ([`Event::Cloned`]) and whenever it reaches a [`Step::Sync`]. Returns the
/// child's pid when it has exec'd, or as soon as it reaches [`Step::Ready`] (then it
/// goes on alone and a later failure is no longer reported). A handler error makes
/// the child give up at its next wait and is returned as [`SpawnError::Setup`].
/// The caller must be single-threaded; it is checked, and a spawn from a process with
/// more threads fails with [`SpawnError::Clone`].
pub fn spawn_staged<E>(
    plan: &SpawnPlan,
    mut on_event: impl FnMut(Event) -> Result<(), E>,
) -> Result<i32, SpawnError<E>> {
    let argv = pointer_array(&plan.argv);
    let envp = pointer_array(&plan.envp);
    let empty = c"";
    let (rd, wr) = pipe_cloexec().map_err(SpawnError::Pipe)?;
    let (go_rd, go_wr) = pipe_cloexec().map_err(SpawnError::Pipe)?;
    let waits_for_clone = plan.steps.iter().any(|s| matches!(s, Step::WaitParent));
    crate::fds::ensure_single_threaded().map_err(SpawnError::Clone)?;

    // SAFETY: a fork-like clone (the child continues on a copy of this stack). The
    // process is single-threaded (checked just above), and the child touches nothing
    // but the pre-built `plan`, `argv`, `envp` and raw syscalls (no allocation, no
    // locks) before it execs or calls _exit.
    let pid = unsafe { clone::clone_child(plan.clone_flags, plan.into_cgroup.as_ref()) }
        .map_err(SpawnError::Clone)?;
    if pid == 0 {
        drop(go_wr);
        drop(rd);
        let (index, errno) = run_child(
            plan,
            &argv,
            &envp,
            empty.as_ptr(),
            go_rd.as_raw_fd(),
            wr.as_raw_fd(),
        );
        let _ = report(wr.as_raw_fd(), index, errno);
        crate::exit_now(127);
    }
    drop(wr);
    let mut go_wr = Some(go_wr);
    let mut failed: Option<E> = None;
    let go = |go_wr: &mut Option<OwnedFd>, failed: &mut Option<E>, r: Result<(), E>| {
        match r {
            Ok(()) => {
                if let Some(w) = go_wr.as_ref() {
                    let b = [1u8];
                    // SAFETY: `w` is our open pipe end and `b` one readable byte; the
                    // read end stays open in this process, so no EPIPE.
                    unsafe { libc::write(w.as_raw_fd(), b.as_ptr().cast(), 1) };
                }
            }
            Err(e) => {
                *failed = Some(e);
                *go_wr = None;
            }
        }
    };
    let r = on_event(Event::Cloned(pid));
    if r.is_err() || waits_for_clone {
        go(&mut go_wr, &mut failed, r);
    }
    let give_up = |e: E| {
        let _ = crate::proc::kill(pid, libc::SIGKILL);
        let _ = crate::proc::waitpid_blocking(pid);
        SpawnError::Setup(e)
    };
    loop {
        let mut buf = [0u8; 8];
        let n = read_full(rd.as_raw_fd(), &mut buf).map_err(SpawnError::Pipe)?;
        if n == 0 {
            return match failed {
                None => Ok(pid),
                Some(e) => Err(give_up(e)),
            };
        }
        let index = u32::from_ne_bytes(buf[..4].try_into().expect("4 bytes"));
        let value = i32::from_ne_bytes(buf[4..].try_into().expect("4 bytes"));
        match index {
            SYNC_MARK => {
                if failed.is_none() {
                    let r = on_event(Event::Sync(value as u32));
                    go(&mut go_wr, &mut failed, r);
                }
            }
            READY_MARK => {
                return match failed {
                    None => Ok(pid),
                    Some(e) => Err(give_up(e)),
                }
            }
            _ => {
                let _ = crate::proc::waitpid_blocking(pid);
                let error = io::Error::from_raw_os_error(value);
                let waited = plan
                    .steps
                    .get(index as usize)
                    .is_some_and(|s| matches!(s, Step::WaitParent | Step::Sync(_)));
                return match failed {
                    Some(e) if waited => Err(SpawnError::Setup(e)),
                    _ if index == EXEC_STEP => Err(SpawnError::Exec(error)),
                    _ => Err(SpawnError::Step {
                        index: index as usize,
                        error,
                    }),
                };
            }
        }
    }
}

/// Read one byte from the go pipe; EOF (the parent failed) is ECANCELED.
fn wait_parent(go_fd: RawFd) -> Result<(), ()> {
    let mut b = [0u8; 1];
    loop {
        // SAFETY: `b` is one writable byte; `go_fd` is the go pipe's read end.
        let n = unsafe { libc::read(go_fd, b.as_mut_ptr().cast(), 1) };
        if n == 1 {
            return Ok(());
        }
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n == 0 {
            // SAFETY: __errno_location returns this thread's errno slot.
            unsafe { *libc::__errno_location() = libc::ECANCELED };
        }
        return Err(());
    }
}

/// A close-on-exec pipe `(read, write)`.
pub fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn read_full(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: the destination range lies inside `buf`.
        let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        got += n as usize;
    }
    Ok(got)
}
