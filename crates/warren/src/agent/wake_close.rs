//! Closing the agent's copies of zones' sockets off its loop's thread (docs/suspend.md,
//! "One wait for all suspended zones"; [`super::wake_hold`] holds the copies).
//!
//! A copy is the zone's very socket, and a zone that runs again can make the agent's
//! close of it wait: a connection with `SO_LINGER` of a day whose last descriptor is
//! the agent's, or such a socket queued as `SCM_RIGHTS` on the held unix listener
//! (the listener's last close releases it in the closing thread). So every copy is
//! closed by a closer thread: up to [`CLOSERS`] in service, started as releases come,
//! with a queue of [`CLOSE_QUEUE`] releases; what waits for a release (a halt's
//! answer) runs once its copies are closed.
//!
//! A zone that makes its copy linger would hold its closer thread for the linger time,
//! and a few such zones all of them, so that other zones' releases waited (their ports
//! bound, their halts unanswered). So [`Closer::check`], called by the agent's loop at
//! each wait and each release, finds the closes that have lasted [`LINGER_AFTER`] with
//! their thread asleep in them (`/proc/self/task/<tid>/stat` not `R`: a thread that
//! merely waits for a CPU on a busy host is not lingering): each such thread is
//! written off — it ends once its close returns — and a fresh one serves the queue, up
//! to [`LINGERING_MAX`] written off at once (past that a lingering closer stays, and the
//! releases behind it wait for the others). Each is reported once, with its zone, which
//! the holder then never holds again.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Closer threads in service at most.
pub const CLOSERS: usize = 8;

/// How long a close may take, its thread asleep in it (not merely waiting for a CPU),
/// before the zone is taken to have made its copy linger: the thread is then written
/// off and a fresh one serves the other releases ([`Closer::check`]).
pub const LINGER_AFTER: Duration = Duration::from_millis(100);

/// Closer threads written off as lingering at once, at most: past them a lingering
/// closer is not replaced, and the releases behind it wait for the others.
pub const LINGERING_MAX: usize = 64;

/// Releases that may wait for a closer thread; past them, the holder sets the copies
/// aside.
pub const CLOSE_QUEUE: usize = 1024;

/// What follows a release once its copies are closed (a halt's answer): called with
/// whether there was a release of the zone to wait for.
pub type Then = Box<dyn FnOnce(bool) + Send>;

/// Releases whose copies a closer thread has not closed yet: by release, the zone's
/// init and what waits for the close.
type InFlightMap = HashMap<u64, (i32, Vec<Then>)>;

/// One release's copies, of zone `zone`; `release`: its entry in the in-flight map, if
/// it has one.
struct Closing {
    fds: Vec<OwnedFd>,
    release: Option<u64>,
    zone: Arc<str>,
}

/// What the closer threads share with the agent's loop.
struct Shared {
    rx: Mutex<mpsc::Receiver<Closing>>,
    /// Releases queued or being closed by a thread in service (not written off).
    outstanding: AtomicUsize,
    /// Descriptors queued or being closed: counted against the budget until closed.
    pending: AtomicU64,
    inflight: Mutex<InFlightMap>,
    /// Threads written off as lingering whose close has not returned yet.
    lingering: AtomicUsize,
}

/// The close one closer thread is in.
struct Job {
    since: Instant,
    zone: Arc<str>,
    /// Found lingering and said ([`Closer::check`]).
    said: bool,
}

/// What one closer thread is doing, for [`Closer::check`].
#[derive(Default)]
struct Busy {
    job: Option<Job>,
    /// Its thread id (`/proc/thread-self`), to tell a close it sleeps in from a thread
    /// that waits for a CPU; `None`: not known, the time alone decides.
    tid: Option<i32>,
    /// Written off as lingering: the thread ends once its close returns.
    written_off: bool,
}

/// Closes the agent's copies of zones' sockets off the agent's thread (module doc).
pub struct Closer {
    tx: Option<mpsc::SyncSender<Closing>>,
    shared: Arc<Shared>,
    /// The threads in service, each with what it does.
    live: Vec<Arc<Mutex<Busy>>>,
    proc_root: PathBuf,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// This thread's id, from `<proc_root>/thread-self` (`PID/task/TID`).
fn thread_id(proc_root: &Path) -> Option<i32> {
    std::fs::read_link(proc_root.join("thread-self"))
        .ok()?
        .file_name()?
        .to_str()?
        .parse()
        .ok()
}

/// Whether the kernel says this process's thread `tid` is running or waits for a CPU
/// (state `R` in its `stat`), rather than sleeping in a call.
fn runnable(proc_root: &Path, tid: i32) -> bool {
    std::fs::read_to_string(proc_root.join(format!("self/task/{tid}/stat")))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('R')))
        .unwrap_or(false)
}

impl Closer {
    pub fn new(proc_root: &Path) -> Closer {
        let (tx, rx) = mpsc::sync_channel(CLOSE_QUEUE);
        Closer {
            tx: Some(tx),
            shared: Arc::new(Shared {
                rx: Mutex::new(rx),
                outstanding: AtomicUsize::new(0),
                pending: AtomicU64::new(0),
                inflight: Mutex::new(HashMap::new()),
                lingering: AtomicUsize::new(0),
            }),
            live: Vec::new(),
            proc_root: proc_root.to_path_buf(),
        }
    }

    /// A closer thread's loop: close each release's copies, then run what waits; a
    /// thread written off meanwhile ends after its close.
    fn work(s: &Shared, me: &Mutex<Busy>, proc_root: &Path) {
        locked(me).tid = thread_id(proc_root);
        loop {
            let next = locked(&s.rx).recv();
            let Ok(Closing { fds, release, zone }) = next else {
                return;
            };
            locked(me).job = Some(Job {
                since: Instant::now(),
                zone,
                said: false,
            });
            let n = fds.len() as u64;
            drop(fds);
            s.pending.fetch_sub(n, Ordering::SeqCst);
            let written_off = {
                let mut b = locked(me);
                b.job = None;
                b.written_off
            };
            if written_off {
                s.lingering.fetch_sub(1, Ordering::SeqCst);
            } else {
                s.outstanding.fetch_sub(1, Ordering::SeqCst);
            }
            let waiting = release.and_then(|r| locked(&s.inflight).remove(&r));
            for then in waiting.map(|(_, t)| t).unwrap_or_default() {
                then(true);
            }
            if written_off {
                return;
            }
        }
    }

    /// Start closer threads while releases wait for one and fewer than [`CLOSERS`]
    /// serve.
    fn spawn_for_queue(&mut self) {
        while self.live.len() < CLOSERS
            && self.shared.outstanding.load(Ordering::SeqCst) > self.live.len()
        {
            let busy = Arc::new(Mutex::new(Busy::default()));
            let (s, b, root) = (self.shared.clone(), busy.clone(), self.proc_root.clone());
            let started = std::thread::Builder::new()
                .name("wake-hold-closer".into())
                .spawn(move || Closer::work(&s, &b, &root));
            if started.is_err() {
                return;
            }
            self.live.push(busy);
        }
    }

    /// Hand `fds`, copies of zone `zone`'s sockets, to a closer thread (a new one if
    /// every one is busy and there is room for one); what could not be handed over is
    /// returned (the queue is full, or no thread could be started).
    pub fn close(
        &mut self,
        fds: Vec<OwnedFd>,
        release: Option<u64>,
        zone: Arc<str>,
    ) -> Result<(), Vec<OwnedFd>> {
        if self.tx.is_none() {
            return Err(fds);
        }
        self.shared.outstanding.fetch_add(1, Ordering::SeqCst);
        self.spawn_for_queue();
        if self.live.is_empty() {
            self.shared.outstanding.fetch_sub(1, Ordering::SeqCst);
            return Err(fds);
        }
        let n = fds.len() as u64;
        self.shared.pending.fetch_add(n, Ordering::SeqCst);
        let tx = self.tx.as_ref().expect("checked above");
        match tx.try_send(Closing { fds, release, zone }) {
            Ok(()) => Ok(()),
            Err(mpsc::TrySendError::Full(c) | mpsc::TrySendError::Disconnected(c)) => {
                self.shared.pending.fetch_sub(n, Ordering::SeqCst);
                self.shared.outstanding.fetch_sub(1, Ordering::SeqCst);
                Err(c.fds)
            }
        }
    }

    /// The closes that have lasted [`LINGER_AFTER`] with their thread asleep in them,
    /// each found once: the zone whose copies they are, and whether its thread was
    /// written off and replaced by a fresh one (not while [`LINGERING_MAX`] linger).
    pub fn check(&mut self) -> Vec<(Arc<str>, bool)> {
        let mut found = Vec::new();
        let mut i = 0;
        while i < self.live.len() {
            let slot = self.live[i].clone();
            let mut b = locked(&slot);
            let tid = b.tid;
            let Some(job) = b
                .job
                .as_mut()
                .filter(|j| !j.said && j.since.elapsed() >= LINGER_AFTER)
            else {
                i += 1;
                continue;
            };
            // Waiting for a CPU on a busy host is not lingering.
            if tid.is_some_and(|t| runnable(&self.proc_root, t)) {
                i += 1;
                continue;
            }
            job.said = true;
            let zone = job.zone.clone();
            let replace = self.shared.lingering.load(Ordering::SeqCst) < LINGERING_MAX;
            if replace {
                b.written_off = true;
                self.shared.lingering.fetch_add(1, Ordering::SeqCst);
                self.shared.outstanding.fetch_sub(1, Ordering::SeqCst);
                drop(b);
                self.live.swap_remove(i);
            } else {
                i += 1;
            }
            found.push((zone, replace));
        }
        // Fresh threads for what waits behind the written-off ones.
        self.spawn_for_queue();
        found
    }

    /// Descriptors queued or being closed.
    pub fn pending(&self) -> u64 {
        self.shared.pending.load(Ordering::SeqCst)
    }

    /// Threads in service.
    pub fn in_service(&self) -> usize {
        self.live.len()
    }

    /// Threads written off as lingering whose close has not returned yet.
    pub fn lingering(&self) -> usize {
        self.shared.lingering.load(Ordering::SeqCst)
    }

    /// Release `id` of the zone whose init is `init` is about to be handed over
    /// ([`Closer::close`]): `waiting` runs once its copies are closed.
    pub fn expect(&self, id: u64, init: i32, waiting: Vec<Then>) {
        locked(&self.shared.inflight).insert(id, (init, waiting));
    }

    /// Release `id` will not be closed (it could not be handed over): what waits for
    /// it is dropped unanswered.
    pub fn forget(&self, id: u64) {
        locked(&self.shared.inflight).remove(&id);
    }

    /// Run `then` once the copies of a release of the zone whose init is `init` are
    /// closed (`then(true)`), or at once (`then(false)`) when none is being closed.
    pub fn when_closed(&self, init: i32, then: Then) {
        let mut f = locked(&self.shared.inflight);
        match f.values_mut().find(|(pid, _)| *pid == init) {
            Some((_, waiting)) => waiting.push(then),
            None => {
                drop(f);
                then(false);
            }
        }
    }
}

impl Drop for Closer {
    fn drop(&mut self) {
        // The threads close what is queued, then end; one held by a lingering socket
        // ends with the process (whose exit closes without lingering).
        self.tx = None;
    }
}
