//! One wait for all suspended zones (issue 19, item 2; docs/suspend.md, "One wait for
//! all suspended zones").
//!
//! Sweeping every suspended zone's sockets each tick ([`super::wake_diag`]: five
//! sock_diag dumps a zone) costs time linear in the suspended zones, all of it spent to
//! learn that nothing happened. Instead the agent takes each suspended zone's
//! listening TCP and unix sockets and its UDP sockets into its own process with
//! `pidfd_getfd(2)` — duplicates of the zone's open files, found by the inodes the
//! first sweep names — and puts them in one epoll set, edge-triggered for `EPOLLIN`
//! (on a listener: a connection queued; on UDP: a datagram). The zone's init's pidfd
//! is in the set too (readable when it exits). A tick then costs one `epoll_wait`,
//! and the agent sleeps in it, so a connection wakes it at once instead of at the next
//! tick.
//!
//! Rules for the duplicates:
//! - **Only watched.** The agent never accepts, reads or writes on them; it only waits
//!   for readiness and then asks sock_diag for that zone alone whether a queue grew
//!   past the baseline ([`super::wake::Baseline`]): an edge also fires when a zone is
//!   first added with a backlog that was already there.
//! - **Never outliving the zone's suspension.** A holding is released (removed from the
//!   set, then closed — epoll forgets an entry only when the file's last descriptor
//!   closes, and the zone holds the file too) when the agent wakes the zone, when its
//!   init exits (halt, delete, a crash: the pidfd's event), when the zone is no longer
//!   among the suspended ones (another command resumed it), and when the agent stops.
//!   A halted zone's port is free again; a held socket never keeps it bound.
//!   `halt`, `reboot` and `delete` of a suspended zone also ask the agent to let go
//!   before they return ([`super::control`]), so a boot right after them finds the
//!   port free.
//! - **Never closed on the agent's thread.** The agent's copy is the zone's very
//!   socket, and a zone that runs again (a `resume`, or the thaw a halt does for a
//!   graceful stop) can change what closing it costs: it can turn its listener into a
//!   connected TCP socket (`connect(AF_UNSPEC)`, then a connect to a peer that never
//!   reads), set `SO_LINGER` to a day and close its own descriptor, so that the
//!   agent's close is the last and waits in `tcp_close` for the linger time; or queue
//!   such a socket, or a FUSE file, as `SCM_RIGHTS` on a connection to its own unix
//!   listener, which the listener's last close releases (in the closing thread). No
//!   socket option the agent could read first rules that out without a race (another
//!   process of the zone can change the socket between the read and the close), and
//!   the agent must not change the tenant's options (`SO_LINGER {0,0}` would reset its
//!   connection). So every copy is closed by a closer thread ([`Closer`]: up to
//!   [`CLOSERS`] of them, spawned as releases come, with a bounded queue), counted
//!   against the descriptor budget until it is closed; a halt's answer
//!   ([`Holder::release_then`]) is sent once the copies are closed. A zone that makes
//!   its copy linger costs one closer thread until the linger time ends (or the agent
//!   exits: the kernel closes an exiting process's sockets without lingering); with
//!   all of them busy, copies wait in the queue, and past it they are set aside
//!   unclosed like a non-socket (below). Only init's pidfd is closed on the agent's
//!   thread (a pidfd's release never waits).
//! - **Within the descriptor limit.** Holdings take at most the soft `RLIMIT_NOFILE`
//!   less what the agent had open at start and [`RESERVE`] for its own work; a zone
//!   that does not fit is swept every tick as before, and the agent says how many. It
//!   is held as soon as a release makes room for it ([`Holder::fits`]).
//! - **Only sockets, only from a frozen zone.** The descriptor numbers come from an
//!   earlier scan of `/proc/PID/fd`; a frozen zone cannot change them, but a zone
//!   thawed behind the agent's back (a `resume` that crashed before recording it)
//!   can put any file at that number. So [`Holder::hold`] reads the zone's freezer
//!   state first (not frozen: not held, tried again at the next re-read), checks right
//!   before each `pidfd_getfd` that the number still links to `socket:[inode]` of the
//!   scan, and after it asks the duplicate `getsockopt(SO_TYPE)` / `SO_ACCEPTCONN`
//!   (sockfs answers; a file of another filesystem fails with `ENOTSOCK` without being
//!   asked) before anything else, then checks the freezer again. The process named by
//!   the scan must still be in the zone's cgroup once its pidfd pins it (a pid reused
//!   by a process outside the zone is never taken from), and a zone found frozen again
//!   after it was not is scanned afresh before it is held. No call that reaches
//!   another filesystem is made on a taken descriptor: even `close(2)` of a FUSE file
//!   sends a FLUSH to its server, which a frozen zone never answers. A non-socket taken
//!   all the same (the zone thawed and swapped the file in the microseconds between
//!   the check and the take) is therefore set aside, never closed by the agent (the
//!   kernel closes it when the agent exits), counted against the budget and said on
//!   stderr.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use warren_sys::notify::{self, Epoll};

use super::wake_diag::Watched;

/// Descriptors left free for the agent's own work (zone records, locks, cgroup files,
/// netlink sockets of swept zones).
pub const RESERVE: u64 = 256;

/// A zone's sockets and init, held.
struct Held {
    pid: i32,
    init: OwnedFd,
    socks: Vec<OwnedFd>,
}

/// Closer threads at most: each can be held for a linger time by a zone that made its
/// copy linger (module doc).
pub const CLOSERS: usize = 8;

/// Releases that may wait for a closer thread; past them, copies are set aside.
const CLOSE_QUEUE: usize = 1024;

/// What follows a release once its copies are closed (a halt's answer): called with
/// whether there was a release of the zone to wait for.
pub type Then = Box<dyn FnOnce(bool) + Send>;

/// Releases whose copies a closer thread has not closed yet: by release, the zone's
/// init and what waits for the close.
type InFlight = Arc<Mutex<InFlightMap>>;
type InFlightMap = HashMap<u64, (i32, Vec<Then>)>;

/// One release's copies; `release`: its entry in [`InFlight`], if it has one.
struct Closing {
    fds: Vec<OwnedFd>,
    release: Option<u64>,
}

/// Closes the agent's copies of zones' sockets off the agent's thread (module doc).
struct Closer {
    tx: Option<mpsc::SyncSender<Closing>>,
    rx: Arc<Mutex<mpsc::Receiver<Closing>>>,
    threads: usize,
    /// Releases queued or being closed.
    outstanding: Arc<AtomicUsize>,
    /// Descriptors queued or being closed: counted against the budget until closed.
    pending: Arc<AtomicU64>,
    inflight: InFlight,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Closer {
    fn new() -> Closer {
        let (tx, rx) = mpsc::sync_channel(CLOSE_QUEUE);
        Closer {
            tx: Some(tx),
            rx: Arc::new(Mutex::new(rx)),
            threads: 0,
            outstanding: Arc::new(AtomicUsize::new(0)),
            pending: Arc::new(AtomicU64::new(0)),
            inflight: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// A closer thread's loop: close each release's copies, then run what waits.
    fn work(
        rx: &Mutex<mpsc::Receiver<Closing>>,
        outstanding: &AtomicUsize,
        pending: &AtomicU64,
        inflight: &Mutex<InFlightMap>,
    ) {
        loop {
            let next = locked(rx).recv();
            let Ok(c) = next else {
                return;
            };
            let n = c.fds.len() as u64;
            drop(c.fds);
            pending.fetch_sub(n, Ordering::SeqCst);
            outstanding.fetch_sub(1, Ordering::SeqCst);
            let waiting = c.release.and_then(|r| locked(inflight).remove(&r));
            for then in waiting.map(|(_, t)| t).unwrap_or_default() {
                then(true);
            }
        }
    }

    /// Hand `fds` to a closer thread (a new one if every one is busy and there is room
    /// for one); what could not be handed over is returned (the queue is full, or no
    /// thread could be started).
    fn close(&mut self, fds: Vec<OwnedFd>, release: Option<u64>) -> Result<(), Vec<OwnedFd>> {
        let Some(tx) = &self.tx else {
            return Err(fds);
        };
        let busy = self.outstanding.fetch_add(1, Ordering::SeqCst) + 1;
        if busy > self.threads && self.threads < CLOSERS {
            let (rx, o, p, f) = (
                self.rx.clone(),
                self.outstanding.clone(),
                self.pending.clone(),
                self.inflight.clone(),
            );
            let started = std::thread::Builder::new()
                .name("wake-hold-closer".into())
                .spawn(move || Closer::work(&rx, &o, &p, &f));
            if started.is_ok() {
                self.threads += 1;
            }
        }
        if self.threads == 0 {
            self.outstanding.fetch_sub(1, Ordering::SeqCst);
            return Err(fds);
        }
        let n = fds.len() as u64;
        self.pending.fetch_add(n, Ordering::SeqCst);
        match tx.try_send(Closing { fds, release }) {
            Ok(()) => Ok(()),
            Err(mpsc::TrySendError::Full(c) | mpsc::TrySendError::Disconnected(c)) => {
                self.pending.fetch_sub(n, Ordering::SeqCst);
                self.outstanding.fetch_sub(1, Ordering::SeqCst);
                Err(c.fds)
            }
        }
    }

    /// Descriptors queued or being closed.
    fn pending(&self) -> u64 {
        self.pending.load(Ordering::SeqCst)
    }
}

impl Drop for Closer {
    fn drop(&mut self) {
        // The threads close what is queued, then end; one held by a lingering socket
        // ends with the process (whose exit closes without lingering).
        self.tx = None;
    }
}

/// What the wait saw for a holding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// One of its sockets became readable: ask sock_diag whether a queue grew.
    Socket(u64),
    /// Its init exited: release it.
    Exited(u64),
    /// The control socket ([`Holder::watch_control`]) has a connection waiting.
    Control,
}

/// The token of the control socket (a holding's are `id << 1 | bit`).
const CONTROL: u64 = u64::MAX;

/// Why a zone was not held.
#[derive(Debug)]
pub enum NotHeld {
    /// Its descriptors would pass the budget (or the kernel said EMFILE/ENFILE).
    Full,
    /// Its cgroup is not frozen (thawed behind its record's back): nothing taken.
    NotFrozen,
    /// Taking them failed otherwise (the process went away, no ptrace access, …).
    Failed(io::Error),
}

impl std::fmt::Display for NotHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotHeld::Full => write!(f, "the agent's descriptor budget is used up"),
            NotHeld::NotFrozen => write!(
                f,
                "its record says suspended but its cgroup is not frozen (a resume that did not finish?); tried again at the next re-read"
            ),
            NotHeld::Failed(e) => write!(f, "{e}"),
        }
    }
}

/// Every held zone in one epoll set.
pub struct Holder {
    ep: Epoll,
    held: HashMap<u64, Held>,
    next: u64,
    /// Descriptors holdings may take in all, and take now.
    budget: u64,
    used: u64,
    tokens: Vec<u64>,
    proc_root: PathBuf,
    /// Suspended zones watched, held or not ([`Holder::set_watches`]).
    watches: u64,
    /// Non-sockets taken by a race with a thaw, and copies no closer thread could take:
    /// never closed by the agent ([`Holder::hold`], [`Closer`]).
    set_aside: Vec<OwnedFd>,
    closer: Closer,
    /// The control socket is out of the set until [`Holder::resume_control`].
    control_paused: bool,
}

/// The descriptors this process has open now.
fn open_fds(proc_root: &Path) -> u64 {
    std::fs::read_dir(proc_root.join("self/fd")).map_or(0, |d| d.count() as u64)
}

/// How many descriptors holdings may take (pure): the soft limit less what is open
/// and [`RESERVE`].
pub fn budget(nofile: u64, open: u64) -> u64 {
    nofile.saturating_sub(open).saturating_sub(RESERVE)
}

/// Whether `link`, what `/proc/PID/fd/N` links to, is socket `inode` (pure).
pub fn names_socket(link: &str, inode: u32) -> bool {
    link.strip_prefix("socket:[")
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|n| n.parse::<u32>().ok())
        == Some(inode)
}

/// Whether a taken socket of `so_type` (listening or not) is what the sweep found
/// (pure): a UDP socket is a datagram socket; a TCP or unix listener listens.
pub fn is_kind(kind: &str, so_type: i32, listening: bool) -> bool {
    use warren_sys::libc::{SOCK_DGRAM, SOCK_SEQPACKET, SOCK_STREAM};
    if kind == super::wake_diag::UDP {
        so_type == SOCK_DGRAM
    } else {
        listening && (so_type == SOCK_STREAM || so_type == SOCK_SEQPACKET)
    }
}

/// What a taken descriptor turned out to be.
#[derive(Debug, PartialEq, Eq)]
enum Taken {
    /// The socket the sweep found.
    Socket,
    /// A socket, of another kind or inode (closed by a closer thread all the same).
    OtherSocket(String),
    /// Not a socket at all: it must not be closed ([`Holder::hold`]).
    NotSocket,
}

/// Ask the duplicate `fd` what it is: socket options first (sockfs; `ENOTSOCK` for any
/// other file, without asking that file's filesystem), its inode only once it is known
/// to be a socket.
fn what_was_taken(fd: BorrowedFd<'_>, w: &Watched) -> io::Result<Taken> {
    let so_type = match warren_sys::sock::socket_type(fd) {
        Ok(t) => t,
        Err(e) if e.raw_os_error() == Some(warren_sys::libc::ENOTSOCK) => {
            return Ok(Taken::NotSocket)
        }
        Err(e) => return Err(e),
    };
    let listening = warren_sys::sock::listening(fd)?;
    if !is_kind(w.kind, so_type, listening) {
        return Ok(Taken::OtherSocket(format!(
            "a socket of type {so_type}{}, not {}",
            if listening { " (listening)" } else { "" },
            w.kind
        )));
    }
    // A socket: fstat is answered by sockfs.
    let ino = File::from(fd.try_clone_to_owned()?).metadata()?.ino();
    if ino != u64::from(w.inode) {
        return Ok(Taken::OtherSocket(format!("socket {ino}")));
    }
    Ok(Taken::Socket)
}

fn full(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(warren_sys::libc::EMFILE | warren_sys::libc::ENFILE)
    )
}

impl Holder {
    /// An empty set, its budget from the soft `RLIMIT_NOFILE` (`limit` overrides it).
    pub fn new(proc_root: &Path, limit: Option<u64>) -> io::Result<Holder> {
        let nofile = match limit {
            Some(l) => l,
            None => warren_sys::fds::nofile_limit()?,
        };
        Ok(Holder {
            ep: Epoll::new()?,
            held: HashMap::new(),
            next: 0,
            budget: budget(nofile, open_fds(proc_root)),
            used: 0,
            tokens: Vec::new(),
            proc_root: proc_root.to_path_buf(),
            set_aside: Vec::new(),
            closer: Closer::new(),
            control_paused: false,
            watches: 0,
        })
    }

    /// Close `fds` (copies of a zone's sockets) on a closer thread (`release`: its
    /// entry in the in-flight releases, removed once they are closed); what no closer
    /// can take is set aside (never closed here) and said.
    fn close_later(&mut self, fds: Vec<OwnedFd>, release: Option<u64>) {
        let Err(fds) = self.closer.close(fds, release) else {
            return;
        };
        // Nothing waits on a close that will not come: dropped unanswered (a halt
        // then says the agent did not confirm).
        if let Some(r) = release {
            locked(&self.closer.inflight).remove(&r);
        }
        let n = fds.len();
        self.used += n as u64;
        self.set_aside.extend(fds);
        eprintln!(
            "warren: agent: no closer thread could take {n} copies of a zone's sockets (all {CLOSERS} busy, most likely closing sockets a zone made linger, and {CLOSE_QUEUE} releases queued); they stay open until the agent exits ({} set aside)",
            self.set_aside.len()
        );
    }

    /// Run `then` once the copies of a released holding of the zone whose init is
    /// `init` are closed (`then(true)`), or at once (`then(false)`) when none is being
    /// closed: a halt's request that comes after the agent let go on its own (the
    /// init's exit) is answered only once the copies are really gone.
    pub fn when_closed(&self, init: i32, then: Then) {
        let mut f = locked(&self.closer.inflight);
        match f.values_mut().find(|(pid, _)| *pid == init) {
            Some((_, waiting)) => waiting.push(then),
            None => {
                drop(f);
                then(false);
            }
        }
    }

    /// Put the agent's control socket (a listener, [`super::control`]) in the set: the
    /// wait returns [`Ready::Control`] while a connection waits on it (level-triggered:
    /// until it is accepted, or [`Holder::pause_control`]).
    pub fn watch_control(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ep.add(fd, notify::IN, CONTROL)
    }

    /// Take the control socket out of the set (its accept failed: a waiting connection
    /// would make every wait return at once) until [`Holder::resume_control`].
    pub fn pause_control(&mut self, fd: BorrowedFd<'_>) {
        if !self.control_paused && self.ep.remove(fd).is_ok() {
            self.control_paused = true;
        }
    }

    /// Put a paused control socket back in the set (at the next tick).
    pub fn resume_control(&mut self, fd: BorrowedFd<'_>) {
        if self.control_paused && self.ep.add(fd, notify::IN, CONTROL).is_ok() {
            self.control_paused = false;
        }
    }

    /// How many suspended zones the agent watches (each watch holds one sock_diag
    /// socket, held zone or not): the budget leaves one descriptor for each zone it
    /// does not hold, so holding never starves the sweep of the others.
    pub fn set_watches(&mut self, zones: usize) {
        self.watches = zones as u64;
    }

    /// Whether a zone with `sockets` watched sockets fits in the budget now: its
    /// sockets, init's pidfd and one pidfd to take them with, on top of what is held
    /// (a held zone's sockets and pidfd: its sock_diag socket is closed while it is
    /// held, and a sweep of it opens one for the sweep only), the copies waiting to
    /// be closed, and one sock_diag socket for each watched zone not held (this one's
    /// among them).
    pub fn fits(&self, sockets: usize) -> bool {
        let unheld = self.watches.saturating_sub(self.held.len() as u64).max(1);
        self.used + self.closer.pending() + unheld + sockets as u64 + 2 <= self.budget
    }

    /// Descriptors held now (copies waiting to be closed included), and the budget.
    pub fn usage(&self) -> (u64, u64) {
        (self.used + self.closer.pending(), self.budget)
    }

    /// Zones held now.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Hold the zone whose init is `init`: a duplicate of each `watched` socket (from
    /// the process that holds it) and init's pidfd, all in the set. Returns the
    /// holding's id (in [`Ready`]). `frozen` reads the zone's freezer state: it is
    /// asked before anything is taken and again after; `in_zone` says whether a pid is
    /// one of the zone's processes (asked once its pidfd pins it).
    pub fn hold(
        &mut self,
        init: i32,
        watched: &[Watched],
        frozen: &dyn Fn() -> bool,
        in_zone: &dyn Fn(i32) -> bool,
    ) -> Result<u64, NotHeld> {
        let mut socks = Vec::with_capacity(watched.len());
        let r = self.take(init, watched, frozen, in_zone, &mut socks);
        if r.is_err() && !socks.is_empty() {
            // What was taken is let go, off this thread like any copy.
            self.close_later(socks, None);
        }
        r
    }

    /// [`Holder::hold`]'s work; the copies taken so far are in `socks`.
    fn take(
        &mut self,
        init: i32,
        watched: &[Watched],
        frozen: &dyn Fn() -> bool,
        in_zone: &dyn Fn(i32) -> bool,
        socks: &mut Vec<OwnedFd>,
    ) -> Result<u64, NotHeld> {
        // Its sockets, init's pidfd, and one pidfd at a time to take them with (its
        // sock_diag socket, counted among the zones not held, is closed once held).
        if !self.fits(watched.len()) {
            return Err(NotHeld::Full);
        }
        // A thawed zone can have put anything at the numbers the scan found.
        if !frozen() {
            return Err(NotHeld::NotFrozen);
        }
        let fail = |e: io::Error| {
            if full(&e) {
                NotHeld::Full
            } else {
                NotHeld::Failed(e)
            }
        };
        let init_fd = warren_sys::proc::pidfd_open(init).map_err(fail)?;
        let mut pidfds: HashMap<i32, OwnedFd> = HashMap::new();
        for w in watched {
            let (pid, fd) = w.held_by;
            if !pidfds.contains_key(&pid) {
                // One pidfd open at a time: the budget counted one.
                pidfds.clear();
                let pidfd = warren_sys::proc::pidfd_open(pid).map_err(fail)?;
                // Pinned by its pidfd: a pid the scan found must still be the zone's
                // (not reused by a process outside it since).
                if !in_zone(pid) {
                    return Err(NotHeld::Failed(io::Error::other(format!(
                        "process {pid}, which held socket {} at the scan, is no longer in the zone; not taken",
                        w.inode
                    ))));
                }
                pidfds.insert(pid, pidfd);
            }
            // Right before taking it, with the zone frozen: the number must still link
            // to the socket the scan found. Anything else is never taken.
            let link = self.proc_root.join(format!("{pid}/fd/{fd}"));
            let now = std::fs::read_link(&link).map_err(fail)?;
            let now = now.to_string_lossy();
            if !names_socket(&now, w.inode) {
                return Err(NotHeld::Failed(io::Error::other(format!(
                    "descriptor {fd} of process {pid} is no longer socket {} (now {now}); not taken",
                    w.inode
                ))));
            }
            let dup = warren_sys::proc::pidfd_getfd(pidfds[&pid].as_fd(), fd).map_err(fail)?;
            let what = match what_was_taken(dup.as_fd(), w) {
                Ok(what) => what,
                Err(e) => {
                    // A socket (getsockopt answered) whose fstat failed: a closer's.
                    socks.push(dup);
                    return Err(fail(e));
                }
            };
            match what {
                Taken::Socket => socks.push(dup),
                Taken::OtherSocket(what) => {
                    socks.push(dup);
                    return Err(NotHeld::Failed(io::Error::other(format!(
                        "descriptor {fd} of process {pid} is {what}, not socket {} of the scan; not held",
                        w.inode
                    ))));
                }
                Taken::NotSocket => {
                    // Its close could wait on its filesystem (a FUSE FLUSH): kept.
                    self.set_aside.push(dup);
                    self.used += 1;
                    return Err(NotHeld::Failed(io::Error::other(format!(
                        "descriptor {fd} of process {pid} became a file that is not a socket between the check and the take (the zone was thawed meanwhile); the agent keeps that descriptor unclosed until it exits ({} set aside)",
                        self.set_aside.len()
                    ))));
                }
            }
        }
        drop(pidfds);
        // Still frozen: no thaw raced the checks above (what was taken is sockets
        // only, closed by a closer thread: [`Holder::hold`]).
        if !frozen() {
            return Err(NotHeld::NotFrozen);
        }
        let id = self.next;
        self.next += 1;
        let mut added: Vec<&OwnedFd> = Vec::new();
        let mut r = self.ep.add(init_fd.as_fd(), notify::IN, id << 1 | 1);
        if r.is_ok() {
            added.push(&init_fd);
            for s in socks.iter() {
                r = self.ep.add(s.as_fd(), notify::IN | notify::EDGE, id << 1);
                if r.is_err() {
                    break;
                }
                added.push(s);
            }
        }
        if let Err(e) = r {
            for fd in added {
                let _ = self.ep.remove(fd.as_fd());
            }
            return Err(fail(e));
        }
        // Its sockets and init's pidfd; the zone's sock_diag socket is closed once it
        // is held (`SocketWatch::park`).
        self.used += socks.len() as u64 + 1;
        self.held.insert(
            id,
            Held {
                pid: init,
                init: init_fd,
                socks: std::mem::take(socks),
            },
        );
        Ok(id)
    }

    /// Release holding `id`: out of the set, then closed (its sockets by a closer
    /// thread, module doc).
    pub fn release(&mut self, id: u64) {
        self.release_with(id, Vec::new());
    }

    /// [`Holder::release`], then `then(true)` once the copies are closed
    /// (`then(false)` at once when nothing is held under `id`).
    pub fn release_then(&mut self, id: u64, then: Then) {
        if !self.held.contains_key(&id) {
            then(false);
            return;
        }
        self.release_with(id, vec![then]);
    }

    fn release_with(&mut self, id: u64, waiting: Vec<Then>) {
        let Some(h) = self.held.remove(&id) else {
            return;
        };
        for fd in h.socks.iter().chain([&h.init]) {
            let _ = self.ep.remove(fd.as_fd());
        }
        self.used -= h.socks.len() as u64 + 1;
        // A pidfd's release never waits: closed here.
        drop(h.init);
        if h.socks.is_empty() {
            for then in waiting {
                then(true);
            }
            return;
        }
        locked(&self.closer.inflight).insert(id, (h.pid, waiting));
        self.close_later(h.socks, Some(id));
    }

    /// Wait at most `timeout` for the held zones; what came, one entry per holding.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<Vec<Ready>> {
        self.tokens = self.ep.wait(Some(timeout))?;
        let mut out: Vec<Ready> = Vec::new();
        for t in &self.tokens {
            if *t == CONTROL {
                if !out.contains(&Ready::Control) {
                    out.push(Ready::Control);
                }
                continue;
            }
            let id = t >> 1;
            if !self.held.contains_key(&id) {
                continue;
            }
            let r = if t & 1 == 1 {
                Ready::Exited(id)
            } else {
                Ready::Socket(id)
            };
            if !out.contains(&r) {
                out.push(r);
            }
        }
        Ok(out)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let ids: Vec<u64> = self.held.keys().copied().collect();
        for id in ids {
            self.release(id);
        }
        // Not closed by us (a close could wait on the file's filesystem, or linger);
        // the kernel closes them as the process exits.
        for fd in self.set_aside.drain(..) {
            let _ = fd.into_raw_fd();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_leaves_a_sock_diag_socket_for_each_zone_not_held() {
        let h0 = Holder::new(Path::new("/proc"), Some(10_000)).unwrap();
        let (used, b) = h0.usage();
        assert_eq!(used, 0);
        let mut h = h0;
        // One zone watched (this one): its sock_diag socket, one socket, two pidfds.
        h.set_watches(1);
        assert!(h.fits(1));
        // b − 3 watched zones, none held: (b − 3) + 1 + 2 = b fits, one more does not.
        let b = b as usize;
        h.set_watches(b - 3);
        assert!(h.fits(1));
        h.set_watches(b - 2);
        assert!(
            !h.fits(1),
            "the last zone's sock_diag socket would have no descriptor"
        );
        assert!(h.fits(0));
    }

    #[test]
    fn the_budget_keeps_a_reserve() {
        assert_eq!(budget(20_000, 10), 20_000 - 10 - RESERVE);
        assert_eq!(budget(300, 100), 0);
        assert_eq!(budget(0, 5), 0);
    }

    #[test]
    fn only_the_scanned_socket_at_that_number_is_taken() {
        assert!(names_socket("socket:[81234]", 81234));
        // Another socket, a file (a FUSE mount the zone serves), a pipe, garbage.
        assert!(!names_socket("socket:[81235]", 81234));
        assert!(!names_socket("/srv/fuse/data", 81234));
        assert!(!names_socket("pipe:[81234]", 81234));
        assert!(!names_socket("socket:[81234", 81234));
        assert!(!names_socket("socket:[]", 81234));
    }

    #[test]
    fn a_taken_socket_must_be_the_kind_the_sweep_found() {
        use super::super::wake_diag::{TCP, UDP, UNIX};
        use warren_sys::libc::{SOCK_DGRAM, SOCK_SEQPACKET, SOCK_STREAM};
        assert!(is_kind(TCP, SOCK_STREAM, true));
        assert!(is_kind(UNIX, SOCK_SEQPACKET, true));
        assert!(is_kind(UDP, SOCK_DGRAM, false));
        // A connected stream socket now at the listener's number, or a stream where
        // a datagram socket was.
        assert!(!is_kind(TCP, SOCK_STREAM, false));
        assert!(!is_kind(UDP, SOCK_STREAM, false));
        assert!(!is_kind(UNIX, SOCK_DGRAM, false));
    }

    /// A frozen-looking zone whose scanned number now holds a non-socket, and one not
    /// frozen: nothing is taken (as root: pidfd_getfd of this very process).
    #[test]
    fn a_number_that_is_no_longer_the_socket_or_a_thawed_zone_is_not_taken() {
        let me = std::process::id() as i32;
        let mut h = Holder::new(Path::new("/proc"), Some(10_000)).unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ino = File::from(l.as_fd().try_clone_to_owned().unwrap())
            .metadata()
            .unwrap()
            .ino() as u32;
        let file = File::open("/proc/self/status").unwrap();
        use std::os::fd::AsRawFd;
        let w = |fd: i32| Watched {
            inode: ino,
            kind: super::super::wake_diag::TCP,
            held_by: (me, fd),
        };
        // Not frozen: nothing is looked at.
        let r = h.hold(me, &[w(l.as_raw_fd())], &|| false, &|_| true);
        assert!(matches!(r, Err(NotHeld::NotFrozen)), "{r:?}");
        // The number names a file now: not taken (nothing set aside either).
        let r = h.hold(me, &[w(file.as_raw_fd())], &|| true, &|_| true);
        let Err(NotHeld::Failed(e)) = r else {
            panic!("{r:?}")
        };
        assert!(e.to_string().contains("no longer socket"), "{e}");
        assert!(h.set_aside.is_empty());
        // Thawed while being taken: what was taken is let go.
        let n = std::cell::Cell::new(0);
        let r = h.hold(
            me,
            &[w(l.as_raw_fd())],
            &|| {
                n.set(n.get() + 1);
                n.get() == 1
            },
            &|_| true,
        );
        assert!(matches!(r, Err(NotHeld::NotFrozen)), "{r:?}");
        closed(&h);
        // The socket itself, frozen throughout: held.
        // A pid that is not the zone's (reused since the scan): nothing is taken.
        let r = h.hold(me, &[w(l.as_raw_fd())], &|| true, &|_| false);
        let Err(NotHeld::Failed(e)) = r else {
            panic!("{r:?}")
        };
        assert!(e.to_string().contains("no longer in the zone"), "{e}");
        closed(&h);
        let id = h
            .hold(me, &[w(l.as_raw_fd())], &|| true, &|_| true)
            .unwrap();
        // The socket's copy and init's pidfd (the zone's sock_diag socket is closed
        // while it is held).
        assert_eq!(h.usage().0, 2);
        h.release(id);
        closed(&h);
    }

    /// A control socket whose accept failed is out of the set until resumed: a
    /// connection waiting on it no longer makes every wait return at once.
    #[test]
    fn a_paused_control_socket_is_not_waited_on() {
        let tmp = tempfile::tempdir().unwrap();
        let mut h = Holder::new(Path::new("/proc"), Some(10_000)).unwrap();
        let l = std::os::unix::net::UnixListener::bind(tmp.path().join("c.sock")).unwrap();
        h.watch_control(l.as_fd()).unwrap();
        let _waiting = std::os::unix::net::UnixStream::connect(tmp.path().join("c.sock")).unwrap();
        let ms = Duration::from_millis(100);
        assert_eq!(h.wait(ms).unwrap(), [Ready::Control]);
        // Level-triggered: again and again while it waits.
        assert_eq!(h.wait(ms).unwrap(), [Ready::Control]);
        h.pause_control(l.as_fd());
        let t = std::time::Instant::now();
        assert!(h.wait(ms).unwrap().is_empty());
        assert!(
            t.elapsed() >= Duration::from_millis(90),
            "{:?}",
            t.elapsed()
        );
        h.resume_control(l.as_fd());
        assert_eq!(h.wait(ms).unwrap(), [Ready::Control]);
    }

    /// Wait (at most 10 s) until the closer threads closed every copy handed to them.
    fn closed(h: &Holder) {
        let t = std::time::Instant::now();
        while h.usage().0 != h.used {
            assert!(t.elapsed() < Duration::from_secs(10), "copies never closed");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(h.usage().0, h.set_aside.len() as u64);
    }

    /// A non-socket taken at a number that named the socket right before (a thaw
    /// raced the check): set aside, never closed, counted. The race is staged with a
    /// `/proc` whose link says socket while the real number holds a file.
    #[test]
    fn a_non_socket_taken_in_a_race_is_set_aside_unclosed() {
        use std::os::fd::AsRawFd;
        let me = std::process::id() as i32;
        let fake = tempfile::tempdir().unwrap();
        let file = File::open("/proc/self/status").unwrap();
        let fd = file.as_raw_fd();
        std::fs::create_dir_all(fake.path().join(format!("{me}/fd"))).unwrap();
        std::os::unix::fs::symlink("socket:[4242]", fake.path().join(format!("{me}/fd/{fd}")))
            .unwrap();
        let mut h = Holder::new(fake.path(), Some(10_000)).unwrap();
        let w = Watched {
            inode: 4242,
            kind: super::super::wake_diag::TCP,
            held_by: (me, fd),
        };
        let r = h.hold(me, &[w], &|| true, &|_| true);
        let Err(NotHeld::Failed(e)) = r else {
            panic!("{r:?}")
        };
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert_eq!(h.set_aside.len(), 1);
        assert_eq!(
            h.usage().0,
            1,
            "a set-aside descriptor counts against the budget"
        );
        // Still open after the holder is gone: the kernel closes it when the process
        // (here the test binary, there the agent) exits.
        let dup = h.set_aside[0].as_raw_fd();
        assert_ne!(dup, fd);
        drop(h);
        let link = std::fs::read_link(format!("/proc/self/fd/{dup}")).unwrap();
        assert!(link.ends_with("status"), "{link:?}");
    }

    /// Issue 19 review, finding 1: a zone that runs again can make the agent's close
    /// of its copy wait: here it queues a TCP socket with `SO_LINGER` of a day (a
    /// connection to a peer that never reads, its buffers full) as `SCM_RIGHTS` on a
    /// connection to its own held unix listener, then closes every descriptor of its
    /// own; the listener's last close releases the socket in the closing thread, which
    /// lingers. (The other way, `connect(AF_UNSPEC)` on the listener and a connect to
    /// the peer, fails with EINVAL on this machine's kernel.) Releasing must not wait:
    /// the close is a closer thread's. Staged with a python3 process as the zone.
    #[test]
    fn releasing_a_copy_the_zone_made_linger_never_waits() {
        use std::io::{BufRead, BufReader, Write};
        let peer = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = peer.local_addr().unwrap().port();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("l.sock");
        let script = format!(
            "import socket, os, sys, struct, array\n\
            u = socket.socket(socket.AF_UNIX)\n\
            u.bind({path:?})\n\
            u.listen(8)\n\
            print(u.fileno(), os.fstat(u.fileno()).st_ino, flush=True)\n\
            sys.stdin.readline()\n\
            t = socket.socket()\n\
            t.connect(('127.0.0.1', {port}))\n\
            t.setblocking(False)\n\
            try:\n\
            \x20   while True: t.send(b'x' * 65536)\n\
            except BlockingIOError: pass\n\
            t.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 86400))\n\
            c = socket.socket(socket.AF_UNIX)\n\
            c.connect({path:?})\n\
            c.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [t.fileno()]))])\n\
            t.close(); c.close(); u.close()\n\
            print('lingering', flush=True)\n\
            sys.stdin.readline()\n",
            path = path.to_str().unwrap()
        );
        let mut zone = match std::process::Command::new("python3")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => panic!("this test needs python3 on the host to stage the zone: {e}"),
        };
        let mut out = BufReader::new(zone.stdout.take().unwrap());
        let mut stdin = zone.stdin.take().unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let mut it = line.split_whitespace().map(|x| x.parse::<u64>().unwrap());
        let (fd, ino) = (it.next().unwrap() as i32, it.next().unwrap() as u32);
        let pid = zone.id() as i32;
        let mut h = Holder::new(Path::new("/proc"), Some(10_000)).unwrap();
        let w = Watched {
            inode: ino,
            kind: super::super::wake_diag::UNIX,
            held_by: (pid, fd),
        };
        let id = h.hold(pid, &[w], &|| true, &|_| true).unwrap();
        // The peer goes after 5 s (its reset ends any linger): without a closer thread
        // the release below would wait that long.
        let peer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(5));
            drop(peer);
        });
        // The zone "runs again" and makes the copy linger.
        stdin.write_all(b"go\n").unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "lingering");
        let t = std::time::Instant::now();
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        h.release_then(id, Box::new(move |held| tx.send(("halt", held)).unwrap()));
        // A second request for the same suspension, after the release: it too is
        // answered once the copy is closed.
        h.when_closed(pid, Box::new(move |held| tx2.send(("late", held)).unwrap()));
        let took = t.elapsed();
        // The copy lingers (the staging worked): no answer while it does.
        let early = rx.recv_timeout(Duration::from_millis(500));
        let mut answers = vec![
            rx.recv_timeout(Duration::from_secs(20)),
            rx.recv_timeout(Duration::from_secs(20)),
        ];
        answers.sort_by_key(|a| format!("{a:?}"));
        drop(h);
        let _ = zone.kill();
        let _ = zone.wait();
        peer.join().unwrap();
        assert!(
            took < Duration::from_secs(2),
            "releasing the copy waited {took:?} (its close lingered on the agent's thread)"
        );
        assert!(
            early.is_err(),
            "answered before the copy was closed: {early:?}"
        );
        assert_eq!(answers, [Ok(("halt", true)), Ok(("late", true))]);
        // Nothing in flight for it now: answered at once, nothing held.
        let (tx, rx) = mpsc::channel();
        let h = Holder::new(Path::new("/proc"), Some(10_000)).unwrap();
        h.when_closed(pid, Box::new(move |held| tx.send(held).unwrap()));
        assert_eq!(rx.try_recv(), Ok(false));
    }
}
