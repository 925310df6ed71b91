//! What a zone's init (warren-init, PID 1 of every zone) needs from the kernel without
//! the heap or the C library: its environment as the kernel laid it out, a line to
//! stderr, a service started by fork + exec, and whether its pid namespace holds anyone
//! else. All of it through [`crate::bare`]: warren-init starts at its own entry point
//! ([`start`]), not the C runtime's `_start`, so neither glibc's start-up nor Rust's runs in a zone's PID 1.
//!
//! Why: every page PID 1 dirties is paid once per zone (docs/scaling.md,
//! "warren-init"). Nothing here decides anything: what to start, what to log and when
//! to stop are `warren::runtime::init`'s.

use core::sync::atomic::{AtomicPtr, Ordering};

use crate::bare::{self, Errno};

extern "C" {
    /// The C library's environment array (NULL-terminated `KEY=VALUE` strings).
    static environ: *const *const libc::c_char;
}

/// The environment array warren-init's entry point found on its initial stack. While it
/// is null (no [`start`]: `warren` under init's name, tests), [`environment`] reads the
/// C library's `environ` instead.
static ENVP: AtomicPtr<*const u8> = AtomicPtr::new(core::ptr::null_mut());

/// The entry of a process started at its own entry point (warren-init): record the
/// environment array from the initial stack the kernel laid out at `sp` (argc, argv's
/// pointers and a null, then envp's and a null) for [`environment`].
///
/// # Safety
/// `sp` must be the stack pointer the kernel handed to the entry point, unchanged; called once,
/// before anything reads [`environment`].
pub unsafe fn start(sp: *const usize) {
    // SAFETY: per the contract, sp[0] is argc and the argv array of argc pointers and
    // its terminating null follow it; envp starts right after that null.
    let envp = unsafe {
        let argc = *sp;
        sp.add(1 + argc + 1)
    };
    ENVP.store(envp as *mut *const u8, Ordering::Relaxed);
}

/// The process's environment entries (`KEY=VALUE`, without the NUL), in order, as the
/// kernel put them on the initial stack. Single-threaded callers that never change the
/// environment (warren-init) only: the strings live as long as the process then.
pub fn environment() -> impl Iterator<Item = &'static [u8]> {
    let mut p = ENVP.load(Ordering::Relaxed) as *const *const u8;
    if p.is_null() {
        // SAFETY: reading the pointer value of `environ`; the caller does not modify
        // the environment (documented above), so no other write races with this read.
        p = unsafe { environ }.cast();
    }
    core::iter::from_fn(move || {
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` points into the NULL-terminated environment array (checked
        // non-NULL above, and never advanced past the terminator).
        let entry = unsafe { *p };
        if entry.is_null() {
            p = core::ptr::null();
            return None;
        }
        let mut len = 0;
        // SAFETY: `entry` is a NUL-terminated string of the environment block, which is
        // never freed or changed in this process (see the function's contract); the
        // walk stops at its NUL. (The optimiser turns this loop into a call to `strlen`:
        // warren-init defines its own, the C library's being an IFUNC it never
        // resolves.)
        let s = unsafe {
            while *entry.add(len) != 0 {
                len += 1;
            }
            core::slice::from_raw_parts(entry, len)
        };
        // SAFETY: the next slot of the array, at most its terminator (this one was not).
        p = unsafe { p.add(1) };
        Some(s)
    })
}

/// Write `line` to stderr whole (retrying short writes and EINTR); errors are dropped,
/// as PID 1 has nowhere else to report them.
pub fn write_stderr(line: &[u8]) {
    bare::write_all(2, line);
}

/// Room in the child of [`spawn_service`], on its stack (the parent's stack is not
/// touched): the command with its separators made NULs, argv's and envp's pointers, and
/// one PATH candidate. A service past them fails with E2BIG: a command over 32 KiB,
/// 255 arguments, or 1,023 environment entries passed on (the kernel itself would take
/// more); a PATH entry too long for the room is skipped, as execvp skips one. The
/// child's frame is ~46 KiB: a zone whose `rlimit.stack` is below ~64 KiB has its
/// services die of SIGSEGV before their exec (the console says so).
const COMMAND_ROOM: usize = 32 * 1024;
const ARGS_ROOM: usize = 256;
const ENV_ROOM: usize = 1024;
const PATH_ROOM: usize = 4096;

/// Start a service: fork, and in the child split `command` at `sep` into argv, find
/// argv[0] in `path` (a PATH value) unless it holds a '/', pass the entries of
/// [`environment`] that `keep` accepts, put every signal back to its default and
/// unblocked, stdin on /dev/null, a new session, cwd "/", and exec. Nothing allocates,
/// in the parent or the child. Returns the child's pid, or the errno of the exec that
/// failed (ENOENT when argv[0] is in no directory of `path`). `keep` runs in the child:
/// a pure filter, which takes no lock.
pub fn spawn_service(
    command: &[u8],
    sep: u8,
    path: &[u8],
    keep: fn(&[u8]) -> bool,
) -> Result<i32, Errno> {
    let (rd, wr) = bare::pipe_cloexec()?;
    // SAFETY: the child runs only `service_child` (work on its own stack, this crate's
    // system calls, the caller's `keep`, a pure filter) and then execs or exits.
    let pid = match unsafe { bare::fork() } {
        Ok(p) => p,
        Err(e) => {
            bare::close(rd);
            bare::close(wr);
            return Err(e);
        }
    };
    if pid == 0 {
        bare::close(rd);
        let errno = service_child(command, sep, path, keep);
        bare::write_all(wr, &errno.0.to_ne_bytes());
        bare::exit(127);
    }
    bare::close(wr);
    // The child's exec closes the write end (close-on-exec): EOF means it ran; four
    // bytes are the errno of its failure.
    let mut buf = [0u8; 4];
    let n = bare::read(rd, &mut buf);
    bare::close(rd);
    if n == Ok(4) {
        let _ = bare::wait_blocking(pid);
        return Err(Errno(i32::from_ne_bytes(buf)));
    }
    Ok(pid)
}

/// The child's side of [`spawn_service`]: returns only on failure, with the errno.
/// Never inlined: its frame (the rooms above, ~46 KiB) is then entered, and its stack
/// pages probed, only in the child, never in PID 1.
#[inline(never)]
fn service_child(command: &[u8], sep: u8, path: &[u8], keep: fn(&[u8]) -> bool) -> Errno {
    let mut text = [0u8; COMMAND_ROOM];
    let mut argv = [core::ptr::null::<u8>(); ARGS_ROOM];
    let mut envp = [core::ptr::null::<u8>(); ENV_ROOM];
    let Some(argc) = split_command(command, sep, &mut text, &mut argv) else {
        return Errno(libc::E2BIG);
    };
    if argc == 0 {
        return Errno(libc::EINVAL);
    }
    let mut envc = 0;
    for e in environment().filter(|e| keep(e)) {
        // Each entry is NUL-terminated where the kernel put it.
        if envc + 1 >= ENV_ROOM {
            return Errno(libc::E2BIG);
        }
        envp[envc] = e.as_ptr();
        envc += 1;
    }
    bare::reset_for_exec();
    let prog_len = command
        .iter()
        .position(|&b| b == sep)
        .unwrap_or(command.len());
    let prog = &text[..=prog_len];
    let (argv, envp) = (&argv[..=argc], &envp[..=envc]);
    if prog.contains(&b'/') {
        // SAFETY: argv's pointers point into `text`, envp's at environment entries
        // (NUL-terminated where the kernel put them, never freed); both live here.
        return unsafe { bare::exec(prog, argv, envp) };
    }
    let mut result = Errno(libc::ENOENT);
    let mut full = [0u8; PATH_ROOM];
    for dir in path.split(|&b| b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let len = dir.len() + 1 + prog.len(); // prog ends with its NUL
        if len > full.len() {
            continue;
        }
        full[..dir.len()].copy_from_slice(dir);
        full[dir.len()] = b'/';
        full[dir.len() + 1..len].copy_from_slice(prog);
        // SAFETY: as above.
        match unsafe { bare::exec(&full[..len], argv, envp) } {
            Errno(libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT) => {
            }
            Errno(libc::EACCES) => result = Errno(libc::EACCES),
            other => return other,
        }
    }
    result
}

/// Copy `command` into `text` with each `sep` (and the end) a NUL, and point `argv` at
/// each argument, then a null: the number of arguments, None when `text` or `argv`
/// has no room, or an argument holds a NUL.
fn split_command(
    command: &[u8],
    sep: u8,
    text: &mut [u8],
    argv: &mut [*const u8],
) -> Option<usize> {
    if command.len() + 1 > text.len() || command.contains(&0) {
        return None;
    }
    text[..command.len()].copy_from_slice(command);
    text[command.len()] = 0;
    let mut argc = 0;
    let mut start = 0;
    for i in 0..=command.len() {
        if i == command.len() || text[i] == sep {
            text[i] = 0;
            if argc + 1 >= argv.len() {
                return None;
            }
            argv[argc] = text[start..].as_ptr();
            argc += 1;
            start = i + 1;
        }
    }
    argv[argc] = core::ptr::null();
    Some(argc)
}

/// Whether the pid namespace whose procfs root `proc_dir` is open on holds a process
/// other than PID 1 (a numeric entry but "1"), read with `getdents64` into a buffer on
/// the stack. An error answers yes (the caller then signals, as it would without this).
///
/// Why: PID 1's `kill(-1, sig)` reaches every other process of its namespace, but the
/// kernel finds them by looking at every process on the *host*; with 10,000 zones each
/// halt paid that walk even when init was alone.
pub fn others_in_pid_namespace(proc_dir: i32) -> bool {
    if bare::rewind(proc_dir).is_err() {
        return true;
    }
    let mut buf = [0u8; 4096];
    loop {
        match bare::getdents(proc_dir, &mut buf) {
            Err(_) => return true,
            Ok(0) => return false,
            Ok(n) => {
                if entries_name_another_process(&buf[..n]) {
                    return true;
                }
            }
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
        let d = bare::open_dir(b"/proc\0").unwrap();
        assert!(others_in_pid_namespace(d));
        // Read twice: the descriptor is rewound.
        assert!(others_in_pid_namespace(d));
        bare::close(d);
    }

    #[test]
    fn a_command_splits_into_argv_in_its_room() {
        let mut text = [0u8; 32];
        let mut argv = [std::ptr::null::<u8>(); 4];
        let n = split_command(b"/bin/sh\x1f-c\x1fecho hi", 0x1f, &mut text, &mut argv).unwrap();
        assert_eq!(n, 3);
        assert_eq!(&text[..19], b"/bin/sh\0-c\0echo hi\0");
        assert_eq!(argv[1], text[8..].as_ptr());
        assert!(argv[3].is_null());
        // No room in the text, none in argv; a NUL inside an argument.
        assert_eq!(split_command(&[b'a'; 32], 0x1f, &mut text, &mut argv), None);
        assert_eq!(
            split_command(b"a\x1fb\x1fc\x1fd", 0x1f, &mut text, &mut argv),
            None
        );
        assert_eq!(split_command(b"a\0b", 0x1f, &mut text, &mut argv), None);
    }

    #[test]
    fn a_service_starts_or_names_why_not() {
        fn all(_: &[u8]) -> bool {
            true
        }
        let pid = spawn_service(b"true", 0x1f, b"/nonexistent:/bin:/usr/bin", all).unwrap();
        assert_eq!(
            bare::wait_blocking(pid).unwrap(),
            Some((pid, bare::ExitStatus::Exited(0)))
        );
        let pid = spawn_service(b"sh\x1f-c\x1fexit 5", 0x1f, b"/bin", all).unwrap();
        assert_eq!(
            bare::wait_blocking(pid).unwrap(),
            Some((pid, bare::ExitStatus::Exited(5)))
        );
        assert_eq!(
            spawn_service(b"no-such-program-w", 0x1f, b"/bin:/usr/bin", all),
            Err(Errno(libc::ENOENT))
        );
        // Not executable (mode 0644: not even root may exec it).
        let f = tempfile::NamedTempFile::new().unwrap();
        let path = f.path().to_str().unwrap().as_bytes();
        assert_eq!(
            spawn_service(path, 0x1f, b"", all),
            Err(Errno(libc::EACCES))
        );
    }
}
