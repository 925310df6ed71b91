//! Many zones at once: `warren boot Z1 Z2 …` / `boot --all`, `warren clone SRC NEW1
//! NEW2 …`, `warren halt --all`, and `warren demo`, as a bounded pipeline.
//!
//! A zone's boot is mostly waiting on the kernel, not computing: the RCU grace period
//! of the move into its cgroups, the mounts of its root, the child's wait for its go,
//! then boot's watch of the new init (150 ms); halt waits for init to die and for its
//! cgroups and network namespace to go. One zone after another, those waits add up;
//! here up to `jobs` zones are in flight at once, so they overlap.
//!
//! **Workers are processes, forked one per zone**, not threads: spawning a zone needs
//! a single-threaded caller (a clone without a new stack, `setns` into mount
//! namespaces; `warren_sys::spawn` checks it), and a forked copy of this process is
//! exactly one `warren boot Z`, with the cgroup driver and boot id already probed.
//! Each worker takes its zone's lock as the verb always does, so a pipeline never
//! does anything that N separate commands could not; the shared locks (id ranges,
//! leases, the host's id-range registry, the journal) serialize only their short
//! critical sections. A worker sends its result back as one JSON line on a pipe and
//! exits; the parent polls every worker's pipe, reaps any worker that ends
//! (`waitpid(-1, WNOHANG)`), and hands the results to its caller **in the zones'
//! order** (a finished zone waits for those before it), so output reads as a
//! sequential run's. A boot's worker **releases its slot** once the zone runs
//! ([`release_slot`]: a `released` line before its result): its 150 ms watch of the
//! new init only waits, so the next zone starts meanwhile; `--jobs` bounds the zones
//! being booted, not those being watched. At 10,000 zones the watch held every slot
//! for 150 ms of each zone's ~175 and made `boot --all` 132 s (docs/scaling.md). One
//! zone's failure stops nothing else; the caller counts them (the CLI exits non-zero,
//! naming how many failed).
//!
//! `jobs` of 1, or a single zone, runs in this process without forking: the verbs
//! behave exactly as before. The numbers: docs/scaling.md ("Pipelined boot, clone and
//! halt") and SPEC.md ("Issue 18, pipeline").

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use super::{Context, Outcome};
use crate::error::{Error, ExitCode, IoContext, Result};

/// Zones in flight by default: 8 per online CPU (a boot, clone or halt computes for a
/// few ms and otherwise waits on the kernel: RCU grace periods, mounts, syncs), at
/// most [`MAX_DEFAULT_JOBS`].
pub fn default_jobs(cpus: usize) -> usize {
    (cpus.max(1) * 8).min(MAX_DEFAULT_JOBS)
}

/// The default's cap: each worker is a process (a copy-on-write fork of warren).
pub const MAX_DEFAULT_JOBS: usize = 32;

/// The largest error message a worker sends back (a pipe holds 64 KiB; the parent
/// reads only after the worker ended).
const MAX_MESSAGE: usize = 32 * 1024;

/// What a verb did to one zone, as a worker reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Done {
    /// `Some(why)`: nothing to do (the zone already was where the verb takes it).
    pub already: Option<String>,
    /// The verb's own time for this zone, in its worker.
    pub ms: f64,
    /// boot: the zone's init.
    pub init_pid: Option<i32>,
    /// halt: init stopped on SIGTERM within the timeout.
    pub graceful: Option<bool>,
    /// What the verb says beside its result (it is done all the same).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// halt: the zone's emptied cgroups, which [`halt_many`] removes once every zone
    /// is stopped (never handed to its caller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroups: Option<crate::cgroups::CgroupSet>,
}

impl Done {
    fn of(outcome: Outcome, ms: f64) -> Done {
        Done {
            already: match outcome {
                Outcome::Done => None,
                Outcome::AlreadyDone(why) => Some(why.to_string()),
            },
            ms,
            ..Done::default()
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Boot `zones` (see [`super::boot_watched`]), up to `jobs` at once; `done` gets each
/// zone's result in order. Returns how many failed.
pub fn boot_many(
    ctx: &Context,
    zones: &[String],
    jobs: usize,
    watch: Duration,
    done: impl FnMut(&str, Result<Done>),
) -> usize {
    run(
        ctx,
        zones,
        jobs,
        |z| {
            let (o, r) = super::boot_watched(ctx, z, watch)?;
            let booted = o == Outcome::Done;
            let mut d = Done::of(o, ms(r.total));
            d.init_pid = r.init_pid.filter(|_| booted);
            Ok(d)
        },
        done,
    )
}

/// Clone `src` (or its snapshot) to each of `news` (see [`super::clone_from`]), up to
/// `jobs` at once.
pub fn clone_many(
    ctx: &Context,
    src: &str,
    news: &[String],
    snapshot: Option<&str>,
    jobs: usize,
    done: impl FnMut(&str, Result<Done>),
) -> usize {
    run(
        ctx,
        news,
        jobs,
        |z| {
            let t = Instant::now();
            super::clone_from(ctx, src, z, snapshot)?;
            Ok(Done::of(Outcome::Done, ms(t.elapsed())))
        },
        done,
    )
}

/// Halt `zones` (see [`super::halt`]), up to `jobs` at once. The zones' cgroups are
/// removed after all of them are stopped ([`super::halt_keeping_cgroups`] says why);
/// a zone whose cgroups could not be removed then gets a warning of its own on stderr.
pub fn halt_many(
    ctx: &Context,
    zones: &[String],
    jobs: usize,
    timeout: Option<Duration>,
    mut done: impl FnMut(&str, Result<Done>),
) -> usize {
    let mut kept = Vec::new();
    let failed = run(
        ctx,
        zones,
        jobs,
        |z| {
            let t = Instant::now();
            let (o, h) = super::halt_keeping_cgroups(ctx, z, timeout)?;
            let halted = o == Outcome::Done;
            let mut d = Done::of(o, ms(t.elapsed()));
            d.graceful = halted.then_some(h.graceful);
            d.warnings = h.warnings;
            d.cgroups = h.kept;
            Ok(d)
        },
        |z, mut r| {
            if let Ok(d) = &mut r {
                if let Some(set) = d.cgroups.take() {
                    kept.push((z.to_string(), set));
                }
            }
            done(z, r)
        },
    );
    for w in super::remove_kept_cgroups(ctx, kept) {
        eprintln!("warren: warning: {w}");
    }
    failed
}

/// Run `op` on every zone, up to `jobs` at once in forked workers (in this process
/// when `jobs` is 1 or there is one zone), handing each result to `done` in the
/// zones' order. Returns how many failed.
pub fn run<T: Serialize + DeserializeOwned>(
    ctx: &Context,
    zones: &[String],
    jobs: usize,
    op: impl Fn(&str) -> Result<T>,
    mut done: impl FnMut(&str, Result<T>),
) -> usize {
    let mut failed = 0;
    let mut report = |z: &str, r: Result<T>| {
        failed += usize::from(r.is_err());
        done(z, r);
    };
    if jobs <= 1 || zones.len() <= 1 {
        for z in zones {
            report(z, op(z));
        }
        return failed;
    }
    // Probed once here, inherited by every worker.
    let _ = ctx.cgroups();
    let _ = ctx.boot_id();
    let mut finished: BTreeMap<usize, Result<T>> = BTreeMap::new();
    let mut running: HashMap<i32, Worker> = HashMap::new();
    let (mut next, mut emitted) = (0, 0);
    while emitted < zones.len() {
        // A worker that released its slot (boot's watch of a started init) still
        // runs, but no longer counts against `jobs`.
        while running.values().filter(|w| !w.released).count() < jobs
            && running.len() < (jobs * MAX_WATCHED_PER_SLOT).min(MAX_WORKERS)
            && next < zones.len()
        {
            match fork_worker(&zones[next], &op) {
                Ok((pid, rd)) => {
                    running.insert(pid, Worker::new(next, rd));
                }
                Err(e) => {
                    finished.insert(next, Err(e));
                }
            }
            next += 1;
        }
        while let Some(r) = finished.remove(&emitted) {
            report(&zones[emitted], r);
            emitted += 1;
        }
        if running.is_empty() {
            continue;
        }
        // Wait for a worker to say something (a release, its result) or to end.
        let fds: Vec<RawFd> = running.values().map(|w| w.rd.as_raw_fd()).collect();
        if warren_sys::pty::poll_in(&fds, TICK_MS).is_ok() {
            for w in running.values_mut() {
                w.take_release();
            }
        }
        loop {
            match warren_sys::proc::waitpid_nohang(-1) {
                Ok(Some((pid, status))) => {
                    if let Some(w) = running.remove(&pid) {
                        let i = w.index;
                        finished.insert(i, collect(&zones[i], w, status));
                    }
                }
                Ok(None) => break,
                // No child left to wait for (someone else reaped ours): what is still
                // running is reported as lost, never waited for forever.
                Err(e) => {
                    for (_, w) in running.drain() {
                        let lost = Err(Error::Relayed {
                            message: format!(
                                "zone '{}': lost its worker process ({e}); see 'warren list' for the zone's state",
                                zones[w.index]
                            ),
                            exit: ExitCode::Failure,
                        });
                        finished.insert(w.index, lost);
                    }
                    break;
                }
            }
        }
    }
    failed
}

/// Workers alive at once, watching or not, per slot: each holds a process and a pipe
/// in the parent, so released ones are bounded too (a boot is ~15–35 ms of a 150 ms
/// watch, so about 4–10 watch per slot in a steady stream).
const MAX_WATCHED_PER_SLOT: usize = 8;

/// And in all, so that a large `--jobs` stays well inside the usual 1024 descriptors.
const MAX_WORKERS: usize = 512;

/// How long the parent waits for its workers' pipes before it reaps whoever ended
/// (a worker's exit is seen at the latest this much after it).
const TICK_MS: i32 = 20;

/// The line a worker writes when it no longer needs its slot (see [`release_slot`]).
const RELEASED: &[u8] = b"released\n";

/// A worker as the parent sees it: its zone's index, the read end of its pipe, what
/// it has sent so far, and whether it released its slot.
struct Worker {
    index: usize,
    rd: OwnedFd,
    got: Vec<u8>,
    released: bool,
}

impl Worker {
    fn new(index: usize, rd: OwnedFd) -> Worker {
        // Read without blocking: the parent polls every worker's pipe at once.
        let _ = warren_sys::pty::set_nonblocking(rd.as_raw_fd(), true);
        Worker {
            index,
            rd,
            got: Vec::new(),
            released: false,
        }
    }

    /// Read what the pipe holds now and note a release at its start.
    fn take_release(&mut self) {
        let mut buf = [0u8; 4096];
        while let Ok(n) = warren_sys::pty::read_fd(self.rd.as_raw_fd(), &mut buf) {
            if n == 0 {
                break;
            }
            self.got.extend_from_slice(&buf[..n]);
        }
        if self.got.starts_with(RELEASED) {
            self.got.drain(..RELEASED.len());
            self.released = true;
        }
    }
}

/// Set in a worker: the write end of its pipe to the parent.
static SLOT: std::sync::OnceLock<RawFd> = std::sync::OnceLock::new();

/// In a pipeline's worker: tell the parent that this zone no longer needs its slot
/// (the boot is done; what remains is the watch of its init, which waits without
/// computing), so the next zone starts while this one is watched. Elsewhere a no-op.
pub fn release_slot() {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Some(fd) = SLOT.get().filter(|_| !SAID.swap(true, Ordering::Relaxed)) {
        let _ = warren_sys::pty::write_fd(*fd, RELEASED);
    }
}

/// What a worker writes: its result or its error.
#[derive(Serialize, Deserialize)]
enum Reply<T> {
    Ok(T),
    Err {
        message: String,
        exit: u8,
    },
    /// A name that does not exist, sent as such so that the parent's error is the
    /// typed one (the CLI's "did you mean" works on it).
    NoSuchZone(String),
    NoSuchTemplate(String),
}

/// Fork the worker for `zone`: it runs `op`, writes one [`Reply`] line on the pipe
/// and exits. Returns its pid and the pipe's read end.
fn fork_worker<T: Serialize>(
    zone: &str,
    op: &impl Fn(&str) -> Result<T>,
) -> Result<(i32, OwnedFd)> {
    let what = || format!("zone '{zone}': starting its worker process");
    // Nothing buffered may be printed twice (by the parent and by the copy).
    let _ = std::io::stdout().flush();
    let (rd, wr) = warren_sys::spawn::pipe_cloexec().ctx(what)?;
    let pid = warren_sys::proc::fork().ctx(what)?;
    if pid != 0 {
        return Ok((pid, rd));
    }
    drop(rd);
    let _ = SLOT.set(wr.as_raw_fd());
    crate::lock::in_pipeline_of(warren_sys::proc::getppid());
    // A panic must never unwind into the parent's loop (this is a copy of it).
    let reply =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| op(zone))).unwrap_or_else(|_| {
            Err(Error::Relayed {
                message: format!("zone '{zone}': warren panicked (a bug; please report it)"),
                exit: ExitCode::Failure,
            })
        });
    let reply = match reply {
        Ok(v) => Reply::Ok(v),
        Err(Error::NoSuchZone(n)) => Reply::NoSuchZone(n),
        Err(Error::NoSuchTemplate(n)) => Reply::NoSuchTemplate(n),
        Err(e) => Reply::Err {
            message: truncate(chain(&e)),
            exit: e.exit_code() as u8,
        },
    };
    let mut line = serde_json::to_vec(&reply).unwrap_or_default();
    line.push(b'\n');
    // Flushed before the result is sent: once the pipe's write end closes the parent
    // polls it as hung up, and it must not spin while this waits on a full stdout.
    let _ = std::io::stdout().flush();
    let ok = std::fs::File::from(wr).write_all(&line).is_ok();
    warren_sys::exit_now(if ok { 0 } else { 1 })
}

/// The error and its numbered causes, as the CLI prints them.
fn chain(e: &Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    let mut n = 1;
    while let Some(c) = source {
        s.push_str(&format!("\n  {n}: {c}"));
        source = c.source();
        n += 1;
    }
    s
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str(" […]");
    }
    s
}

/// The result of the worker `w` for `zone` that ended with `status`: its reply line
/// (after what it sent before, if anything).
fn collect<T: DeserializeOwned>(
    zone: &str,
    w: Worker,
    status: warren_sys::proc::ExitStatus,
) -> Result<T> {
    let mut text = w.got;
    let mut buf = [0u8; 4096];
    // Up to the result's line end (everything was written before the worker ended; the
    // pipe does not block): a zone's process that inherited the pipe before its exec
    // must not keep this waiting for EOF. A release not read yet comes first.
    loop {
        if text.starts_with(RELEASED) {
            text.drain(..RELEASED.len());
        }
        if text.contains(&b'\n') {
            break;
        }
        match warren_sys::pty::read_fd(w.rd.as_raw_fd(), &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
        }
    }
    match serde_json::from_slice::<Reply<T>>(text.split(|b| *b == b'\n').next().unwrap_or(&[])) {
        Ok(Reply::Ok(v)) => Ok(v),
        Ok(Reply::Err { message, exit }) => Err(Error::Relayed {
            message,
            exit: ExitCode::from_number(exit),
        }),
        Ok(Reply::NoSuchZone(n)) => Err(Error::NoSuchZone(n)),
        Ok(Reply::NoSuchTemplate(n)) => Err(Error::NoSuchTemplate(n)),
        Err(_) => Err(Error::Relayed {
            message: format!(
                "zone '{zone}': its worker process ended ({}) without a result; see 'warren list' and 'warren logs {zone}' for the zone's state",
                match status {
                    warren_sys::proc::ExitStatus::Exited(c) => format!("exit status {c}"),
                    warren_sys::proc::ExitStatus::Signaled(s) => format!("signal {s}"),
                }
            ),
            exit: ExitCode::Failure,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_jobs_grow_with_cpus_up_to_the_cap() {
        assert_eq!(default_jobs(0), 8);
        assert_eq!(default_jobs(2), 16);
        assert_eq!(default_jobs(64), MAX_DEFAULT_JOBS);
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let s = truncate("é".repeat(MAX_MESSAGE));
        assert!(s.len() <= MAX_MESSAGE + 8 && s.ends_with(" […]"));
        assert_eq!(truncate("short".into()), "short");
    }

    #[test]
    fn a_long_result_behind_a_release_is_read_whole() {
        // The release and a result longer than one read, all in the pipe before the
        // parent looks (the worker wrote both and ended between two polls).
        let (rd, wr) = warren_sys::spawn::pipe_cloexec().unwrap();
        let message = format!("zone 'z': {}", "x".repeat(20_000));
        let reply: Reply<Done> = Reply::Err {
            message: message.clone(),
            exit: ExitCode::WrongState as u8,
        };
        let mut bytes = RELEASED.to_vec();
        bytes.extend(serde_json::to_vec(&reply).unwrap());
        bytes.push(b'\n');
        std::fs::File::from(wr).write_all(&bytes).unwrap();
        let w = Worker::new(0, rd);
        match collect::<Done>("z", w, warren_sys::proc::ExitStatus::Exited(0)) {
            Err(Error::Relayed { message: m, exit }) => {
                assert_eq!(m, message);
                assert_eq!(exit, ExitCode::WrongState);
            }
            other => panic!("{other:?}"),
        }
        // Read in two turns: the release first, then the result.
        let (rd, wr) = warren_sys::spawn::pipe_cloexec().unwrap();
        let mut wr = std::fs::File::from(wr);
        wr.write_all(RELEASED).unwrap();
        let mut w = Worker::new(1, rd);
        w.take_release();
        assert!(w.released && w.got.is_empty());
        let done = Done {
            ms: 2.5,
            ..Done::default()
        };
        let mut line = serde_json::to_vec(&Reply::Ok(done.clone())).unwrap();
        line.push(b'\n');
        wr.write_all(&line).unwrap();
        let got = collect::<Done>("z", w, warren_sys::proc::ExitStatus::Exited(0)).unwrap();
        assert_eq!(got, done);
    }

    #[test]
    fn exit_codes_survive_the_pipe() {
        for c in [ExitCode::NotFound, ExitCode::WrongState, ExitCode::System] {
            assert_eq!(ExitCode::from_number(c as u8), c);
        }
        assert_eq!(ExitCode::from_number(200), ExitCode::Failure);
    }
}
