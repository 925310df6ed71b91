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
//! - **Within the descriptor limit.** Holdings take at most the soft `RLIMIT_NOFILE`
//!   less what the agent had open at start and [`RESERVE`] for its own work; a zone
//!   that does not fit is swept every tick as before, and the agent says how many.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
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
}

/// Why a zone was not held.
#[derive(Debug)]
pub enum NotHeld {
    /// Its descriptors would pass the budget (or the kernel said EMFILE/ENFILE).
    Full,
    /// Taking them failed otherwise (the process went away, no ptrace access, …).
    Failed(io::Error),
}

impl std::fmt::Display for NotHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotHeld::Full => write!(f, "the agent's descriptor budget is used up"),
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
        })
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
    /// holding's id (in [`Ready`]).
    pub fn hold(&mut self, init: i32, watched: &[Watched]) -> Result<u64, NotHeld> {
        // Its sockets, init's pidfd, the zone's sock_diag socket (held by its watch,
        // counted here), and one pidfd at a time to take them with.
        let need = watched.len() as u64 + 3;
        if self.used + need > self.budget {
            return Err(NotHeld::Full);
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
            let dup = warren_sys::proc::pidfd_getfd(pidfds[&pid].as_fd(), fd).map_err(fail)?;
            // The zone is frozen, so the number still names that socket; checked anyway.
            let file = File::from(dup);
            let ino = file.metadata().map_err(fail)?.ino();
            if ino != u64::from(w.inode) {
                return Err(NotHeld::Failed(io::Error::other(format!(
                    "descriptor {fd} of process {pid} is no longer socket {} (now inode {ino})",
                    w.inode
                ))));
            }
            socks.push(OwnedFd::from(file));
        }
        drop(pidfds);
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
}
