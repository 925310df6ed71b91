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
    /// halt: the zone's emptied cgroups and its id-range claim, which [`halt_many`]
    /// removes and releases once every zone is stopped (never handed to its caller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<super::lifecycle::Kept>,
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
/// removed, and their id-range claims released, after all of them are stopped
/// ([`super::halt_keeping_cgroups`] says why); a zone whose cgroups could not be
/// removed then gets a warning of its own on stderr.
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
            d.kept = h.kept;
            Ok(d)
        },
        |z, mut r| {
            if let Ok(d) = &mut r {
                if let Some(k) = d.kept.take() {
                    kept.push((z.to_string(), k));
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
    let mut pool: HashMap<i32, Worker> = HashMap::new();
    let cap = (jobs * MAX_WATCHED_PER_SLOT).min(MAX_WORKERS);
    let (mut next, mut emitted) = (0, 0);
    while emitted < zones.len() {
        // A worker that released its slot (boot's watch of a started init) still
        // works on its zone, but no longer counts against `jobs`.
        while pool
            .values()
            .filter(|w| w.index.is_some() && !w.released)
            .count()
            < jobs
            && next < zones.len()
        {
            let idle = pool
                .iter()
                .find(|(_, w)| w.index.is_none() && !w.broken)
                .map(|(pid, _)| *pid);
            let pid = match idle {
                Some(pid) => pid,
                None if pool.len() < cap => match fork_worker(zones, &op, &mut pool) {
                    Ok((pid, w)) => {
                        pool.insert(pid, w);
                        pid
                    }
                    Err(e) => {
                        let e = Error::Relayed {
                            message: format!("zone '{}': {}", zones[next], chain(&e)),
                            exit: e.exit_code(),
                        };
                        finished.insert(next, Err(e));
                        next += 1;
                        continue;
                    }
                },
                None => break,
            };
            if let Some(w) = pool.get_mut(&pid) {
                w.assign(next);
            }
            next += 1;
        }
        while let Some(r) = finished.remove(&emitted) {
            report(&zones[emitted], r);
            emitted += 1;
        }
        if !pool.values().any(|w| w.index.is_some()) {
            continue;
        }
        // Wait for a worker to say something (a release, a result) or to end. Every
        // worker's pipe is watched, idle ones too: a worker's end closes its pipe
        // (hung up), and only then is it reaped, by pid: a pipeline never waits for
        // a child that is not its own worker (its caller may have others).
        let ids: Vec<(i32, RawFd)> = pool.iter().map(|(p, w)| (*p, w.rd.as_raw_fd())).collect();
        let fds: Vec<RawFd> = ids.iter().map(|(_, fd)| *fd).collect();
        let Ok(events) = warren_sys::pty::poll_in(&fds, TICK_MS) else {
            continue;
        };
        for ((pid, _), ev) in ids.into_iter().zip(events) {
            let Some(w) = pool.get_mut(&pid) else {
                continue;
            };
            if ev != 0 {
                w.read_available();
                match w.take_reply() {
                    Some((i, line)) => {
                        finished.insert(i, parse_reply(&zones[i], &line));
                    }
                    // An idle worker has nothing to say: whatever it wrote is dropped
                    // (left in the pipe, it would wake every poll at once).
                    None if w.index.is_none() => w.got.clear(),
                    None => {}
                }
            }
            if ev
                & (warren_sys::libc::POLLHUP
                    | warren_sys::libc::POLLERR
                    | warren_sys::libc::POLLNVAL)
                == 0
            {
                continue;
            }
            let Some(w) = pool.remove(&pid) else { continue };
            let status = warren_sys::proc::waitpid_blocking(pid);
            let Some(i) = w.index else { continue };
            let r = match status {
                Ok(status) => collect(&zones[i], w, status),
                Err(e) => Err(Error::Relayed {
                    message: format!(
                        "zone '{}': lost its worker process ({e}); see 'warren list' for the zone's state",
                        zones[i]
                    ),
                    exit: ExitCode::Failure,
                }),
            };
            finished.insert(i, r);
        }
    }
    // Every zone is done: closing a worker's command pipe is its end.
    let pids: Vec<i32> = pool.keys().copied().collect();
    drop(pool);
    for pid in pids {
        let _ = warren_sys::proc::waitpid_blocking(pid);
    }
    failed
}

/// Workers alive at once, watching or not, per slot: each holds a process and two
/// pipes in the parent, so released ones are bounded too (a boot is ~15–35 ms of a
/// 150 ms watch, so about 4–10 watch per slot in a steady stream).
const MAX_WATCHED_PER_SLOT: usize = 8;

/// And in all, so that a large `--jobs` stays well inside the usual 1024 descriptors.
const MAX_WORKERS: usize = 512;

/// How long the parent waits for its workers' pipes at a time (a worker's reply or
/// end wakes it at once).
const TICK_MS: i32 = 20;

/// The line a worker writes when it no longer needs its slot (see [`release_slot`]).
const RELEASED: &[u8] = b"released\n";

/// The line a worker writes before its last reply (its verb panicked: it exits after
/// the reply), so that the parent gives it no other zone.
const ENDING: &[u8] = b"ending\n";

/// A worker as the parent sees it (keyed by its pid): the read end of its reply pipe,
/// the write end of its command pipe, the zone it works on (by index) and what it has
/// sent of it so far, and whether it released its slot.
struct Worker {
    rd: OwnedFd,
    cmd: Option<OwnedFd>,
    index: Option<usize>,
    got: Vec<u8>,
    released: bool,
    /// It ends (it said so, or its command pipe would not take a zone): never given
    /// another.
    broken: bool,
}

impl Worker {
    fn new(rd: OwnedFd, cmd: Option<OwnedFd>) -> Worker {
        // Read without blocking: the parent polls every worker's pipe at once.
        let _ = warren_sys::pty::set_nonblocking(rd.as_raw_fd(), true);
        Worker {
            rd,
            cmd,
            index: None,
            got: Vec::new(),
            released: false,
            broken: false,
        }
    }

    /// Give it zone `index`: one line on its command pipe. If the worker ended, the
    /// zone stays assigned and is reported with the worker's end when it is reaped.
    fn assign(&mut self, index: usize) {
        self.index = Some(index);
        self.released = false;
        self.got.clear();
        let line = format!("{index}\n");
        let sent = self
            .cmd
            .as_ref()
            .is_some_and(|fd| warren_sys::pty::write_fd(fd.as_raw_fd(), line.as_bytes()).is_ok());
        if !sent {
            self.broken = true;
        }
    }

    /// Read what the pipe holds now and note a release at its start.
    fn read_available(&mut self) {
        let mut buf = [0u8; 4096];
        while let Ok(n) = warren_sys::pty::read_fd(self.rd.as_raw_fd(), &mut buf) {
            if n == 0 {
                break;
            }
            self.got.extend_from_slice(&buf[..n]);
        }
        loop {
            if self.got.starts_with(RELEASED) {
                self.got.drain(..RELEASED.len());
                self.released = true;
            } else if self.got.starts_with(ENDING) {
                self.got.drain(..ENDING.len());
                self.broken = true;
            } else {
                break;
            }
        }
    }

    /// Its zone's index and reply line once the whole line is in, leaving the worker
    /// idle (free for the next zone).
    fn take_reply(&mut self) -> Option<(usize, Vec<u8>)> {
        let end = self.got.iter().position(|b| *b == b'\n')?;
        let i = self.index.take()?;
        let line = self.got.drain(..=end).take(end).collect();
        self.released = false;
        Some((i, line))
    }
}

/// Set in a worker: the write end of its pipe to the parent.
static SLOT: std::sync::OnceLock<RawFd> = std::sync::OnceLock::new();

/// Set in a worker once its zone's release was sent (cleared for each zone).
static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// In a pipeline's worker: tell the parent that this zone no longer needs its slot
/// (the boot is done; what remains is the watch of its init, which waits without
/// computing), so the next zone starts while this one is watched. Elsewhere a no-op.
pub fn release_slot() {
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

/// Fork a worker. **A worker serves many zones, one after another**: it reads a zone's
/// index from its command pipe, runs `op` on it, writes one [`Reply`] line (after a
/// release, if `op` made one) on its reply pipe, and reads the next, until the parent
/// closes the command pipe. One fork per slot rather than per zone: at 10,000 zones
/// the workers' forks and exits (page tables copied, the binary's pages faulted in and
/// unmapped again) were ~15 % of all CPU of `halt --all` (docs/scaling.md). Each zone
/// is still what `warren <verb> Z` would do: the worker takes the zone's lock, and a
/// zone's init it spawns is its child until the pipeline ends (a boot's watch reaps
/// one that dies; the rest are reparented when the worker exits, as after `warren
/// boot Z`). A worker whose `op` panicked says it ends ([`ENDING`]), replies and
/// exits: the parent gives it no other zone.
fn fork_worker<T: Serialize>(
    zones: &[String],
    op: &impl Fn(&str) -> Result<T>,
    pool: &mut HashMap<i32, Worker>,
) -> Result<(i32, Worker)> {
    let what = || "starting a worker process".to_string();
    // Nothing buffered may be printed twice (by the parent and by the copy).
    let _ = std::io::stdout().flush();
    let (rd, wr) = warren_sys::spawn::pipe_cloexec().ctx(what)?;
    let (cmd_rd, cmd_wr) = warren_sys::spawn::pipe_cloexec().ctx(what)?;
    let pid = warren_sys::proc::fork().ctx(what)?;
    if pid != 0 {
        return Ok((pid, Worker::new(rd, Some(cmd_wr))));
    }
    // The worker: none of the other workers' pipes (a command pipe's write end held
    // here would keep that worker from ever seeing its end), nor its own parent ends.
    pool.clear();
    drop((rd, cmd_wr));
    let _ = SLOT.set(wr.as_raw_fd());
    crate::lock::in_pipeline_of(warren_sys::proc::getppid());
    let mut wr = std::fs::File::from(wr);
    let mut cmd = std::io::BufReader::new(std::fs::File::from(cmd_rd));
    loop {
        let mut line = String::new();
        let index = match std::io::BufRead::read_line(&mut cmd, &mut line) {
            Ok(n) if n > 0 => line.trim().parse::<usize>().ok(),
            _ => warren_sys::exit_now(0),
        };
        let Some(zone) = index.and_then(|i| zones.get(i)) else {
            warren_sys::exit_now(1)
        };
        SAID.store(false, Ordering::Relaxed);
        // A panic must never unwind into the parent's loop (this is a copy of it).
        let mut panicked = false;
        let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| op(zone)))
            .unwrap_or_else(|_| {
                panicked = true;
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
        let mut line = if panicked {
            ENDING.to_vec()
        } else {
            Vec::new()
        };
        line.extend(serde_json::to_vec(&reply).unwrap_or_default());
        line.push(b'\n');
        // Flushed before the result is sent: the parent must not wait for this zone
        // while this waits on a full stdout.
        let _ = std::io::stdout().flush();
        if wr.write_all(&line).is_err() || panicked {
            warren_sys::exit_now(1)
        }
    }
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

/// A reply line as the worker wrote it, for `zone`.
fn parse_reply<T: DeserializeOwned>(zone: &str, line: &[u8]) -> Result<T> {
    match serde_json::from_slice::<Reply<T>>(line) {
        Ok(Reply::Ok(v)) => Ok(v),
        Ok(Reply::Err { message, exit }) => Err(Error::Relayed {
            message,
            exit: ExitCode::from_number(exit),
        }),
        Ok(Reply::NoSuchZone(n)) => Err(Error::NoSuchZone(n)),
        Ok(Reply::NoSuchTemplate(n)) => Err(Error::NoSuchTemplate(n)),
        Err(e) => Err(Error::Relayed {
            message: format!("zone '{zone}': its worker's reply could not be read ({e})"),
            exit: ExitCode::Failure,
        }),
    }
}

/// The result for `zone` of the worker `w` that ended with `status` while working on
/// it: its reply line if it wrote one before it ended (after what it sent before),
/// else the error that says how it ended.
fn collect<T: DeserializeOwned>(
    zone: &str,
    mut w: Worker,
    status: warren_sys::proc::ExitStatus,
) -> Result<T> {
    // Everything was written before the worker ended (the pipe does not block): a
    // zone's process that inherited the pipe before its exec must not keep this
    // waiting for EOF.
    w.read_available();
    match w.take_reply() {
        Some((_, line)) => parse_reply(zone, &line),
        None => Err(Error::Relayed {
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
        let mut w = Worker::new(rd, None);
        w.assign(0);
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
        let mut w = Worker::new(rd, None);
        w.assign(1);
        w.read_available();
        assert!(w.released && w.got.is_empty());
        assert!(w.take_reply().is_none());
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
    fn a_worker_that_says_it_ends_gets_no_other_zone() {
        // A panicked worker's last reply, with its release before: the reply is read,
        // and the worker, idle again, is not one to give the next zone to.
        let (rd, wr) = warren_sys::spawn::pipe_cloexec().unwrap();
        let reply: Reply<Done> = Reply::Err {
            message: "zone 'z': warren panicked".into(),
            exit: ExitCode::Failure as u8,
        };
        let mut bytes = RELEASED.to_vec();
        bytes.extend(ENDING);
        bytes.extend(serde_json::to_vec(&reply).unwrap());
        bytes.push(b'\n');
        std::fs::File::from(wr).write_all(&bytes).unwrap();
        let (cmd_rd, cmd_wr) = warren_sys::spawn::pipe_cloexec().unwrap();
        let mut w = Worker::new(rd, Some(cmd_wr));
        w.assign(7);
        assert!(!w.broken);
        w.read_available();
        assert!(w.released && w.broken);
        let (i, line) = w.take_reply().unwrap();
        assert_eq!(i, 7);
        assert!(matches!(
            parse_reply::<Done>("z", &line),
            Err(Error::Relayed { .. })
        ));
        assert!(w.index.is_none() && w.broken);
        drop(cmd_rd);
    }

    #[test]
    fn exit_codes_survive_the_pipe() {
        for c in [ExitCode::NotFound, ExitCode::WrongState, ExitCode::System] {
            assert_eq!(ExitCode::from_number(c as u8), c);
        }
        assert_eq!(ExitCode::from_number(200), ExitCode::Failure);
    }
}
