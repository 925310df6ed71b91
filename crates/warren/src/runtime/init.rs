//! warren-init: the tiny PID 1 of a zone.
//!
//! It blocks every signal and takes them synchronously (`sigtimedwait`), so it costs no
//! CPU while idle and has no handler races. It starts the zone's services, reaps every
//! orphan (SIGCHLD), and on SIGTERM / SIGINT / SIGPWR sends SIGTERM to every process in
//! the zone, waits up to its stop grace for them, SIGKILLs the rest and exits 0.
//!
//! Services arrive in the environment as `WARREN_SERVICE_<n>`, each an argv joined by
//! the unit separator (0x1f); they are removed before the services start.
//!
//! It never allocates and never calls the C library: the environment is read where
//! the kernel put it (`warren_sys::init::environment`), console lines are formatted
//! into a fixed buffer, the services it follows live in a fixed table, each service's
//! argv and environment are built on the forked child's stack, and every system call
//! is made directly (`warren_sys::bare`). So the `warren-init` binary starts at its own
//! entry point ([`run`]), not the C runtime's `_start`: neither glibc's start-up nor Rust's runs, PID 1 has no heap at
//! all, and each zone pays for little more than init's stack (docs/scaling.md,
//! "warren-init"). `warren` itself, when started under this name, runs the same loop
//! after the usual start-up ([`main`]).

use std::time::Duration;

use warren_sys::bare;

use crate::config::Command;

/// The name the binary answers to as a zone's init.
pub const ARGV0: &str = "warren-init";

const SEP: char = '\u{1f}';
const PREFIX: &str = "WARREN_SERVICE_";
/// How long init waits for processes after SIGTERM before SIGKILL.
const GRACE_ENV: &str = "WARREN_STOP_GRACE";
/// `1`: `memory.merge` — PR_SET_MEMORY_MERGE before the services start (they inherit it).
pub const MERGE_ENV: &str = "WARREN_MEMORY_MERGE";

/// Environment entries (`KEY=VALUE`) carrying `services` to init.
pub fn encode_services(services: &[Command]) -> Vec<String> {
    services
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let argv: Vec<String> = s.argv();
            format!("{PREFIX}{i:04}={}", argv.join(&SEP.to_string()))
        })
        .collect()
}

/// The services among environment entries (`KEY=VALUE` bytes), in the order of their
/// numbers: (number, value with argv joined by the unit separator).
fn services<'a>(env: impl Iterator<Item = &'a [u8]>) -> impl Iterator<Item = (u32, &'a [u8])> {
    env.filter_map(|e| {
        let rest = e.strip_prefix(PREFIX.as_bytes())?;
        let eq = rest.iter().position(|&b| b == b'=')?;
        let n = std::str::from_utf8(&rest[..eq]).ok()?.parse().ok()?;
        Some((n, &rest[eq + 1..]))
    })
}

/// The lowest-numbered service above `after` (the first one for `None`): the services
/// in order without sorting, which would need a heap; O(services²), services are few.
fn next_service<'a>(
    env: impl Iterator<Item = &'a [u8]>,
    after: Option<u32>,
) -> Option<(u32, &'a [u8])> {
    services(env)
        .filter(|(n, _)| after.is_none_or(|a| *n > a))
        .min_by_key(|(n, _)| *n)
}

/// Decode the services from environment entries, in order (for tests and tools; init
/// itself walks them with [`next_service`] and never allocates).
pub fn decode_services<'a>(env: impl Iterator<Item = &'a [u8]> + Clone) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut after = None;
    while let Some((n, v)) = next_service(env.clone(), after) {
        out.push(
            v.split(|&b| b == SEP as u8)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect(),
        );
        after = Some(n);
    }
    out
}

/// The value of `key` among environment entries.
fn env_value<'a>(mut env: impl Iterator<Item = &'a [u8]>, key: &str) -> Option<&'a [u8]> {
    env.find_map(|e| {
        e.strip_prefix(key.as_bytes())
            .and_then(|rest| rest.strip_prefix(b"="))
    })
}

/// What a service's environment keeps: everything but init's own instructions.
fn passed_on(entry: &[u8]) -> bool {
    let is = |key: &str| {
        entry
            .strip_prefix(key.as_bytes())
            .is_some_and(|rest| rest.starts_with(b"="))
    };
    !entry.starts_with(PREFIX.as_bytes()) && !is(GRACE_ENV) && !is(MERGE_ENV)
}

/// A line for the console, formatted into a fixed buffer (longer lines are cut): no
/// heap, no lock; written with one write(2).
struct Line {
    buf: [u8; 512],
    len: usize,
}

impl Line {
    fn new() -> Line {
        let mut l = Line {
            buf: [0; 512],
            len: 0,
        };
        l.push(b"warren-init: ");
        l
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = self.buf.len() - 1 - self.len; // one byte kept for the newline
        let n = bytes.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    /// Bytes as text, invalid UTF-8 as U+FFFD (as `String::from_utf8_lossy` shows it,
    /// without its allocation).
    fn lossy(&mut self, bytes: &[u8]) {
        for chunk in bytes.utf8_chunks() {
            self.push(chunk.valid().as_bytes());
            if !chunk.invalid().is_empty() {
                self.push("\u{fffd}".as_bytes());
            }
        }
    }

    /// A command as the console has always shown it: its argv joined by spaces, quoted
    /// and escaped as Rust's `{:?}` does.
    fn command(&mut self, joined: &[u8]) {
        use std::fmt::Write;
        self.push(b"\"");
        for (i, arg) in joined.split(|&b| b == SEP as u8).enumerate() {
            if i > 0 {
                self.push(b" ");
            }
            for chunk in arg.utf8_chunks() {
                let _ = write!(self, "{}", chunk.valid().escape_debug());
                for b in chunk.invalid() {
                    let _ = write!(self, "\\x{b:02x}");
                }
            }
        }
        self.push(b"\"");
    }

    fn send(mut self) {
        self.buf[self.len] = b'\n';
        warren_sys::init::write_stderr(&self.buf[..=self.len]);
    }
}

impl std::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

macro_rules! log {
    ($($arg:tt)*) => {{
        let mut line = Line::new();
        let _ = std::fmt::Write::write_fmt(&mut line, format_args!($($arg)*));
        line.send();
    }};
}

/// The services init follows, by pid (fixed room: an init must not allocate; a service
/// beyond it still runs and is reaped, its end is just not named on the console).
const TRACKED: usize = 128;

struct Running {
    /// (pid, service number); pid 0 is a free slot.
    slots: [(i32, u32); TRACKED],
}

impl Running {
    fn add(&mut self, pid: i32, n: u32) {
        if let Some(slot) = self.slots.iter_mut().find(|(p, _)| *p == 0) {
            *slot = (pid, n);
        }
    }

    fn take(&mut self, pid: i32) -> Option<u32> {
        let slot = self.slots.iter_mut().find(|(p, _)| *p == pid)?;
        let n = slot.1;
        *slot = (0, 0);
        Some(n)
    }
}

/// Reap every ended child; a service's end goes to the console (`warren logs`), the
/// only record of it: warren-init's own parent is not warren.
fn reap_all(running: &mut Running) {
    while let Ok(Some((pid, status))) = bare::wait_nohang(-1) {
        let Some(n) = running.take(pid) else {
            continue;
        };
        let cmd = next_service(warren_sys::init::environment(), n.checked_sub(1))
            .filter(|(m, _)| *m == n)
            .map_or(&b""[..], |(_, v)| v);
        let mut line = Line::new();
        line.push(b"service ");
        line.command(cmd);
        let _ = match status {
            bare::ExitStatus::Exited(c) => std::fmt::Write::write_fmt(
                &mut line,
                format_args!(" (pid {pid}) exited with status {c}"),
            ),
            bare::ExitStatus::Signaled(s) => std::fmt::Write::write_fmt(
                &mut line,
                format_args!(" (pid {pid}) was killed by signal {s}"),
            ),
        };
        line.send();
    }
}

/// Run as PID 1 from `warren` (started under the name [`ARGV0`], after the C
/// library's and Rust's start-up): the same loop as the `warren-init` binary's.
pub fn main() -> ! {
    run()
}

/// Run as PID 1. Never returns, never allocates, calls no C library function (the
/// `warren-init` binary's entry point comes here with glibc uninitialised; docs/scaling.md,
/// "warren-init").
pub fn run() -> ! {
    use warren_sys::libc;
    // Outside a zone, shutting down would kill(-1) every process of the caller's user.
    if bare::getpid() != 1 {
        warren_sys::init::write_stderr(b"warren-init: refusing to run: this is a zone's PID 1 and only runs as PID 1 of a new pid namespace (warren boot starts it)\n");
        bare::exit(2);
    }
    if let Err(e) = bare::block_all_signals() {
        log!("cannot block signals: {e}");
    }
    let env = warren_sys::init::environment;
    if env_value(env(), MERGE_ENV) == Some(b"1") {
        if let Err(e) = bare::set_memory_merge() {
            log!("memory.merge: PR_SET_MEMORY_MERGE failed ({e}); the zone's memory is not merged");
        }
    }
    let grace = env_value(env(), GRACE_ENV)
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(5));
    let path_var = env_value(env(), "PATH").unwrap_or(super::ZONE_PATH.as_bytes());
    let mut running = Running {
        slots: [(0, 0); TRACKED],
    };
    let mut after = None;
    while let Some((n, cmd)) = next_service(env(), after) {
        after = Some(n);
        let prog = cmd.split(|&b| b == SEP as u8).next().unwrap_or_default();
        let mut line = Line::new();
        match warren_sys::init::spawn_service(cmd, SEP as u8, path_var, passed_on) {
            Ok(pid) => {
                line.push(b"started ");
                line.lossy(prog);
                let _ = std::fmt::Write::write_fmt(&mut line, format_args!(" (pid {pid})"));
                running.add(pid, n);
            }
            Err(e) => {
                line.push(b"cannot start ");
                line.lossy(prog);
                if e.0 == libc::ENOENT && !prog.contains(&b'/') {
                    line.push(b": not found in PATH");
                } else {
                    let _ = std::fmt::Write::write_fmt(&mut line, format_args!(": {e}"));
                }
            }
        }
        line.send();
    }
    loop {
        match bare::wait_signal(Duration::from_secs(3600)) {
            Ok(Some(libc::SIGCHLD)) | Ok(None) => reap_all(&mut running),
            Ok(Some(libc::SIGTERM | libc::SIGINT | libc::SIGPWR)) => shutdown(grace),
            Ok(Some(_)) => {}
            Err(e) => {
                log!("waiting for signals failed: {e}");
                bare::sleep(Duration::from_secs(1));
            }
        }
    }
}

fn shutdown(grace: Duration) -> ! {
    use warren_sys::libc;
    // The zone's /proc is its pid namespace's procfs, and nothing in the zone can mount
    // over it (its mount namespace belongs to the host's user namespace); opened only
    // now, so that no descriptor but 0-2 is init's while the zone runs. It says whether
    // anyone but init is left (warren_sys::init::others_in_pid_namespace): children,
    // and processes that joined the zone (`warren exec`, `login`), which are not.
    let proc_dir = bare::open_dir(b"/proc\0").ok();
    let others = || proc_dir.is_some_and(warren_sys::init::others_in_pid_namespace);
    // Alone: nothing to signal or wait for (kill(-1) would look at every process on
    // the host to find none).
    if proc_dir.is_some() && !others() {
        bare::exit(0)
    }
    // From PID 1, kill(-1) reaches every other process in the zone's pid namespace.
    let _ = bare::kill(-1, libc::SIGTERM);
    // A grace from the zone's environment may be any number of seconds: no overflow.
    let deadline = bare::monotonic()
        .checked_add(grace)
        .unwrap_or(Duration::MAX);
    loop {
        // Children are reaped (SIGCHLD wakes the wait); once none is left, the grace
        // period goes on while a process that joined the zone still runs (polled: its
        // end sends init no signal).
        let poll = match bare::wait_nohang(-1) {
            Ok(Some(_)) => continue,
            Ok(None) => Duration::from_millis(100),
            Err(_) if others() => Duration::from_millis(20),
            Err(_) => break, // ECHILD and nobody else: done
        };
        let now = bare::monotonic();
        if now >= deadline {
            let _ = bare::kill(-1, libc::SIGKILL);
            while bare::wait_blocking(-1).is_ok() {}
            break;
        }
        let _ = bare::wait_signal((deadline - now).min(poll));
    }
    bare::exit(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_round_trip_through_the_environment() {
        let services = vec![
            Command::Shell("sleep 1 && echo 'a b'".into()),
            Command::Argv(vec!["/bin/x".into(), "--flag=1 2".into()]),
        ];
        let mut env = encode_services(&services);
        env.reverse();
        env.push("PATH=/bin".into());
        env.push("WARREN_SERVICE_X=not a service".into());
        let decoded = decode_services(env.iter().map(|e| e.as_bytes()));
        assert_eq!(
            decoded,
            vec![
                vec![
                    "/bin/sh".to_string(),
                    "-c".into(),
                    "sleep 1 && echo 'a b'".into()
                ],
                vec!["/bin/x".to_string(), "--flag=1 2".into()],
            ]
        );
    }

    #[test]
    fn services_keep_the_environment_but_inits_own_keys() {
        assert!(passed_on(b"PATH=/bin"));
        assert!(passed_on(b"WARREN_STOP_GRACEFUL=1"));
        assert!(!passed_on(b"WARREN_STOP_GRACE=5"));
        assert!(!passed_on(b"WARREN_SERVICE_0001=/bin/x"));
        assert_eq!(
            env_value([&b"PATHX=1"[..], b"PATH=/a"].into_iter(), "PATH"),
            Some(&b"/a"[..])
        );
    }

    #[test]
    fn a_console_line_quotes_the_command_and_is_cut_at_its_room() {
        let mut l = Line::new();
        l.push(b"service ");
        l.command(b"/bin/sh\x1f-c\x1fecho \"hi\"\xff");
        assert_eq!(
            std::str::from_utf8(&l.buf[..l.len]).unwrap(),
            r#"warren-init: service "/bin/sh -c echo \"hi\"\xff""#
        );
        let mut long = Line::new();
        long.push(&[b'a'; 2000]);
        assert_eq!(long.len, 511);
    }
}
