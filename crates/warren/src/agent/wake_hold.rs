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
//!   before they return, and `resume` before it thaws ([`super::control`]), so a boot
//!   right after them finds the port free.
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
//!   connection). So every copy is closed by a closer thread ([`super::wake_close`]),
//!   counted against the descriptor budget until it is closed; a halt's answer
//!   ([`Holder::release_then`]) is sent once the copies are closed. A close that has
//!   lasted [`LINGER_AFTER`] with its thread asleep in it is taken as lingering
//!   ([`Closer::check`], at each wait and each release): its thread is replaced by a
//!   fresh one (up to [`LINGERING_MAX`] written off at once), and the zone is said on
//!   stderr and never held again while the agent runs ([`NotHeld::Lingered`]: swept
//!   instead). Copies that no closer can take (all [`CLOSERS`] stuck past that bound,
//!   and the queue full) are set aside unclosed like a non-socket (below). Only init's
//!   pidfd is closed on the agent's thread (a pidfd's release never waits).
//! - **Within the descriptor limit.** Holdings take at most the soft `RLIMIT_NOFILE`
//!   less what the agent had open at start and [`RESERVE`] for its own work, less one
//!   descriptor for each watched zone's sock_diag socket (held or not: counted while
//!   it is open, [`Holder::counted`]); a zone that does not fit is swept every tick as
//!   before, and the agent says how many. It is held as soon as a release makes room
//!   for it ([`Holder::fits`]).
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
//!   after it was not, or whose scan no longer matched it (a number that no longer
//!   names the socket, a process gone: [`NotHeld::Stale`]), is scanned afresh before
//!   it is tried again, at the next re-read. No call that reaches
//!   another filesystem is made on a taken descriptor: even `close(2)` of a FUSE file
//!   sends a FLUSH to its server, which a frozen zone never answers. A non-socket taken
//!   all the same (the zone thawed and swapped the file in the microseconds between
//!   the check and the take) is therefore set aside, never closed by the agent (the
//!   kernel closes it when the agent exits), counted against the budget and said on
//!   stderr.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use warren_sys::notify::{self, Epoll};

use super::wake_close::{Closer, Then, CLOSERS, CLOSE_QUEUE, LINGERING_MAX, LINGER_AFTER};
use super::wake_diag::Watched;

/// Descriptors left free for the agent's own work (zone records, locks, cgroup files,
/// netlink sockets being opened).
pub const RESERVE: u64 = 256;

/// A zone's sockets and init, held.
struct Held {
    zone: Arc<str>,
    pid: i32,
    init: OwnedFd,
    socks: Vec<OwnedFd>,
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
    /// The agent's close of a copy of its sockets lingered before ([`Closer::check`]):
    /// it is swept, never held again while this agent runs.
    Lingered,
    /// The scan no longer matches the zone (a number that no longer names the scanned
    /// socket, a process gone or no longer the zone's): nothing kept; scanned afresh
    /// and tried again at the next re-read.
    Stale(io::Error),
    /// Taking them failed otherwise (no ptrace access, a non-socket taken in a race, …).
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
            NotHeld::Lingered => write!(
                f,
                "the agent's close of a copy of its sockets lingered before (the zone made it linger), so this agent sweeps it rather than hold it"
            ),
            NotHeld::Stale(e) => write!(
                f,
                "{e}; its sockets are scanned afresh and held at the next re-read"
            ),
            NotHeld::Failed(e) => write!(f, "{e}"),
        }
    }
}

/// A descriptor the agent keeps open for a watched zone outside its holdings (the
/// zone's sock_diag socket), counted against the budget while this lives and the
/// socket is open ([`Holder::counted`]; a held zone's is closed: `set_open(false)`).
pub struct Counted {
    count: Arc<AtomicU64>,
    open: bool,
}

impl Counted {
    /// The socket was closed (`false`: a held zone's watch, parked) or is open again.
    pub fn set_open(&mut self, open: bool) {
        if open != self.open {
            if open {
                self.count.fetch_add(1, Ordering::SeqCst);
            } else {
                self.count.fetch_sub(1, Ordering::SeqCst);
            }
            self.open = open;
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.set_open(false);
    }
}

/// Every held zone in one epoll set.
pub struct Holder {
    ep: Epoll,
    held: HashMap<u64, Held>,
    next: u64,
    /// Descriptors holdings may take in all, and those held now: each holding's copies
    /// and init's pidfd, and the descriptors set aside.
    budget: u64,
    used: u64,
    /// The watched zones' sock_diag sockets open now, held zones' and others'
    /// ([`Counted`]).
    counted: Arc<AtomicU64>,
    tokens: Vec<u64>,
    proc_root: PathBuf,
    /// Non-sockets taken by a race with a thaw, and copies no closer thread could take:
    /// never closed by the agent ([`Holder::hold`], [`Closer`]).
    set_aside: Vec<OwnedFd>,
    closer: Closer,
    /// Zones whose copies lingered in a close: never held again ([`NotHeld::Lingered`]),
    /// and those not yet handed to the agent's loop ([`Holder::take_lingered`]).
    lingered: HashSet<Arc<str>>,
    newly_lingered: Vec<String>,
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

/// Whether `e` says a process or descriptor of the scan is gone (the scan is stale).
fn gone(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(warren_sys::libc::ESRCH | warren_sys::libc::ENOENT | warren_sys::libc::EBADF)
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
            counted: Arc::new(AtomicU64::new(0)),
            tokens: Vec::new(),
            proc_root: proc_root.to_path_buf(),
            set_aside: Vec::new(),
            closer: Closer::new(proc_root),
            lingered: HashSet::new(),
            newly_lingered: Vec::new(),
            control_paused: false,
        })
    }

    /// Close `fds` (copies of zone `zone`'s sockets) on a closer thread (`release`:
    /// its entry in the in-flight releases, removed once they are closed); what no
    /// closer can take is set aside (never closed here) and said.
    fn close_later(&mut self, fds: Vec<OwnedFd>, release: Option<u64>, zone: Arc<str>) {
        // Closers held by lingering copies are replaced first.
        self.check_closers();
        let Err(fds) = self.closer.close(fds, release, zone.clone()) else {
            return;
        };
        // Nothing waits on a close that will not come: dropped unanswered (a halt
        // then says the agent did not confirm).
        if let Some(r) = release {
            self.closer.forget(r);
        }
        let n = fds.len();
        self.used += n as u64;
        self.set_aside.extend(fds);
        eprintln!(
            "warren: agent: zone '{zone}': no closer thread could take {n} copies of its sockets (all {CLOSERS} busy, most likely closing sockets zones made linger, {} more written off as lingering, and {CLOSE_QUEUE} releases queued); they stay open until the agent exits ({} set aside)",
            self.closer.lingering(),
            self.set_aside.len()
        );
    }

    /// Find the closes that linger ([`Closer::check`]): each one's zone is never held
    /// again, said on stderr, and handed to the agent's loop ([`Holder::take_lingered`]).
    fn check_closers(&mut self) {
        for (zone, replaced) in self.closer.check() {
            let lingering = self.closer.lingering();
            let after = if replaced {
                format!(
                    "a fresh closer thread serves the other releases ({lingering} written off as lingering, at most {LINGERING_MAX})"
                )
            } else {
                format!(
                    "{LINGERING_MAX} closer threads linger already, the most there may be, so it is not replaced and releases wait for the others"
                )
            };
            eprintln!(
                "warren: agent: zone '{zone}': closing the agent's copies of its sockets has taken over {} ms (the zone made them linger: a socket with SO_LINGER, or files in flight on a unix listener); {after}; the zone's sockets are swept every tick, never held, while this agent runs",
                LINGER_AFTER.as_millis()
            );
            self.newly_lingered.push(zone.to_string());
            self.lingered.insert(zone);
        }
    }

    /// The zones found lingering since the last call (each once): the agent stops
    /// holding them ([`NotHeld::Lingered`]).
    pub fn take_lingered(&mut self) -> Vec<String> {
        std::mem::take(&mut self.newly_lingered)
    }

    /// Closer threads in service, and those written off as lingering whose close has
    /// not returned yet.
    pub fn closers(&self) -> (usize, usize) {
        (self.closer.in_service(), self.closer.lingering())
    }

    /// Run `then` once the copies of a released holding of the zone whose init is
    /// `init` are closed (`then(true)`), or at once (`then(false)`) when none is being
    /// closed: a halt's request that comes after the agent let go on its own (the
    /// init's exit) is answered only once the copies are really gone.
    pub fn when_closed(&self, init: i32, then: Then) {
        self.closer.when_closed(init, then);
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

    /// Count one watched zone's sock_diag socket against the budget while the
    /// returned guard lives (kept beside the socket: [`super::wake_diag::SocketWatch`]),
    /// held zone or not: so holding never takes the descriptors the sweep of the
    /// zones not held needs, and each is counted once, from what is open.
    pub fn counted(&self) -> Counted {
        self.counted.fetch_add(1, Ordering::SeqCst);
        Counted {
            count: self.counted.clone(),
            open: true,
        }
    }

    /// Whether a watched zone with `sockets` watched sockets fits in the budget now:
    /// its sockets, init's pidfd and one pidfd to take them with, on top of what is
    /// held, the copies waiting to be closed and every watched zone's sock_diag socket
    /// (this one's among them).
    pub fn fits(&self, sockets: usize) -> bool {
        self.usage().0 + sockets as u64 + 2 <= self.budget
    }

    /// Descriptors taken now (holdings, copies waiting to be closed, those set aside,
    /// the watched zones' sock_diag sockets), and the budget.
    pub fn usage(&self) -> (u64, u64) {
        (
            self.used + self.closer.pending() + self.counted.load(Ordering::SeqCst),
            self.budget,
        )
    }

    /// Zones held now.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Hold zone `zone`, whose init is `init`: a duplicate of each `watched` socket
    /// (from the process that holds it) and init's pidfd, all in the set. Returns the
    /// holding's id (in [`Ready`]). `frozen` reads the zone's freezer state: it is
    /// asked before anything is taken and again after; `in_zone` says whether a pid is
    /// one of the zone's processes (asked once its pidfd pins it).
    pub fn hold(
        &mut self,
        zone: &str,
        init: i32,
        watched: &[Watched],
        frozen: &dyn Fn() -> bool,
        in_zone: &dyn Fn(i32) -> bool,
    ) -> Result<u64, NotHeld> {
        if self.lingered.contains(zone) {
            return Err(NotHeld::Lingered);
        }
        let zone: Arc<str> = Arc::from(zone);
        let mut socks = Vec::with_capacity(watched.len());
        let r = self.take(&zone, init, watched, frozen, in_zone, &mut socks);
        if r.is_err() && !socks.is_empty() {
            // What was taken is let go, off this thread like any copy.
            self.close_later(socks, None, zone);
        }
        r
    }

    /// [`Holder::hold`]'s work; the copies taken so far are in `socks`.
    fn take(
        &mut self,
        zone: &Arc<str>,
        init: i32,
        watched: &[Watched],
        frozen: &dyn Fn() -> bool,
        in_zone: &dyn Fn(i32) -> bool,
        socks: &mut Vec<OwnedFd>,
    ) -> Result<u64, NotHeld> {
        // Its sockets, init's pidfd, and one pidfd at a time to take them with (its
        // sock_diag socket is counted already, and closed once it is held:
        // `SocketWatch::park`).
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
            } else if gone(&e) {
                NotHeld::Stale(e)
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
                    return Err(NotHeld::Stale(io::Error::other(format!(
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
                return Err(NotHeld::Stale(io::Error::other(format!(
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
                    return Err(NotHeld::Stale(io::Error::other(format!(
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
        self.used += socks.len() as u64 + 1;
        self.held.insert(
            id,
            Held {
                zone: zone.clone(),
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
        self.closer.expect(id, h.pid, waiting);
        self.close_later(h.socks, Some(id), h.zone);
    }

    /// Wait at most `timeout` for the held zones; what came, one entry per holding.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<Vec<Ready>> {
        self.check_closers();
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
mod tests;
