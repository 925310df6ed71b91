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
//!   `halt`, `reboot` and `delete` also ask the agent to let go before they return
//!   ([`super::control`]), so a boot right after them finds the port free.
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
//!   asked) before anything else, then checks the freezer again. No call that reaches
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
use std::time::Duration;

use warren_sys::notify::{self, Epoll};

use super::wake_diag::Watched;

/// Descriptors left free for the agent's own work (zone records, locks, cgroup files,
/// netlink sockets of swept zones).
pub const RESERVE: u64 = 256;

/// A zone's sockets and init, held.
struct Held {
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
    /// Non-sockets taken by a race with a thaw: never closed here ([`Holder::hold`]).
    set_aside: Vec<OwnedFd>,
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
    /// A socket, of another kind or inode (closing it never waits).
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
        })
    }

    /// Put the agent's control socket (a listener, [`super::control`]) in the set: the
    /// wait returns [`Ready::Control`] while a connection waits on it.
    pub fn watch_control(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ep.add(fd, notify::IN, CONTROL)
    }

    /// Whether a zone with `sockets` watched sockets fits in the budget now.
    pub fn fits(&self, sockets: usize) -> bool {
        self.used + sockets as u64 + 3 <= self.budget
    }

    /// Descriptors held now, and the budget.
    pub fn usage(&self) -> (u64, u64) {
        (self.used, self.budget)
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
    /// asked before anything is taken and again after.
    pub fn hold(
        &mut self,
        init: i32,
        watched: &[Watched],
        frozen: &dyn Fn() -> bool,
    ) -> Result<u64, NotHeld> {
        // Its sockets, init's pidfd, the zone's sock_diag socket (held by its watch,
        // counted here), and one pidfd at a time to take them with.
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
        let mut socks = Vec::with_capacity(watched.len());
        let mut pidfds: HashMap<i32, OwnedFd> = HashMap::new();
        for w in watched {
            let (pid, fd) = w.held_by;
            if !pidfds.contains_key(&pid) {
                // One pidfd open at a time: the budget counted one.
                pidfds.clear();
                pidfds.insert(pid, warren_sys::proc::pidfd_open(pid).map_err(fail)?);
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
            match what_was_taken(dup.as_fd(), w).map_err(fail)? {
                Taken::Socket => socks.push(dup),
                Taken::OtherSocket(what) => {
                    return Err(NotHeld::Failed(io::Error::other(format!(
                        "descriptor {fd} of process {pid} is {what}, not socket {} of the scan; not held",
                        w.inode
                    ))))
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
        // only, so dropping it never waits).
        if !frozen() {
            return Err(NotHeld::NotFrozen);
        }
        let id = self.next;
        self.next += 1;
        let mut added: Vec<&OwnedFd> = Vec::new();
        let mut r = self.ep.add(init_fd.as_fd(), notify::IN, id << 1 | 1);
        if r.is_ok() {
            added.push(&init_fd);
            for s in &socks {
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
        self.used += socks.len() as u64 + 2;
        self.held.insert(
            id,
            Held {
                init: init_fd,
                socks,
            },
        );
        Ok(id)
    }

    /// Release holding `id`: out of the set, then closed.
    pub fn release(&mut self, id: u64) {
        if let Some(h) = self.held.remove(&id) {
            for fd in h.socks.iter().chain([&h.init]) {
                let _ = self.ep.remove(fd.as_fd());
            }
            self.used -= h.socks.len() as u64 + 2;
        }
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
        // Not closed by us (a close could wait on the file's filesystem); the kernel
        // closes them as the process exits.
        for fd in self.set_aside.drain(..) {
            let _ = fd.into_raw_fd();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let r = h.hold(me, &[w(l.as_raw_fd())], &|| false);
        assert!(matches!(r, Err(NotHeld::NotFrozen)), "{r:?}");
        // The number names a file now: not taken (nothing set aside either).
        let r = h.hold(me, &[w(file.as_raw_fd())], &|| true);
        let Err(NotHeld::Failed(e)) = r else {
            panic!("{r:?}")
        };
        assert!(e.to_string().contains("no longer socket"), "{e}");
        assert!(h.set_aside.is_empty());
        // Thawed while being taken: what was taken is let go.
        let n = std::cell::Cell::new(0);
        let r = h.hold(me, &[w(l.as_raw_fd())], &|| {
            n.set(n.get() + 1);
            n.get() == 1
        });
        assert!(matches!(r, Err(NotHeld::NotFrozen)), "{r:?}");
        assert_eq!(h.usage().0, 0);
        // The socket itself, frozen throughout: held.
        let id = h.hold(me, &[w(l.as_raw_fd())], &|| true).unwrap();
        assert_eq!(h.usage().0, 3);
        h.release(id);
        assert_eq!(h.usage().0, 0);
    }
}
