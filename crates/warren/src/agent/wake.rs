//! Waking a suspended zone on demand (issue 19, item 2; docs/suspend.md, "Wake on
//! connection"): a client that connects to a suspended zone's listening TCP socket is
//! not lost — the kernel completes the handshake and queues the connection in the
//! socket's backlog even while every process of the zone is frozen — and the agent
//! resumes the zone as soon as a queue grows (a new connection waiting, or a UDP
//! datagram). The zone then accepts it.
//!
//! **On growth only** ([`Baseline`]): what already waited when the zone was frozen (a
//! connection its tenant left unaccepted, a datagram unread) is recorded with the
//! suspension (`suspension.socket_queues`, by socket inode), or taken when the agent
//! first watches the zone; a zone is woken when a queue is longer than that, so such a
//! tenant is not thawed at every tick only to be frozen again.
//!
//! This module is the fallback reader: `/proc/<init>/net/{tcp,tcp6,udp,udp6}`, which
//! show the zone's network namespace (for a listening TCP socket, state `0A`, the
//! `rx_queue` column is its accept queue; for UDP, the bytes waiting). The agent uses
//! it for a bridged zone whose sockets cannot be read by sock_diag ([`super::wake_diag`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The files read, relative to `/proc/<pid>/net`.
pub const FILES: [&str; 4] = ["tcp", "tcp6", "udp", "udp6"];

/// The queues of a zone's sockets when it was suspended, by socket inode: a wake is a
/// queue longer than this (pure).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline(HashMap<u32, u32>);

impl Baseline {
    /// From (inode, queue) pairs; empty queues need no entry.
    pub fn new(queues: impl IntoIterator<Item = (u32, u32)>) -> Baseline {
        Baseline(queues.into_iter().filter(|(_, q)| *q > 0).collect())
    }

    /// From a suspension's record.
    pub fn recorded(queues: &BTreeMap<u32, u32>) -> Baseline {
        Baseline::new(queues.iter().map(|(i, q)| (*i, *q)))
    }

    /// The record's form: only the queues that are not empty.
    pub fn to_record(&self) -> BTreeMap<u32, u32> {
        self.0.iter().map(|(i, q)| (*i, *q)).collect()
    }

    /// Whether socket `ino` now holding `queue` has grown past its baseline. A queue
    /// found shorter lowers the baseline (a frozen zone cannot drain one, but a client
    /// may go away before it was accepted): a later growth back is still a wake.
    pub fn grew(&mut self, ino: u32, queue: u32) -> bool {
        let base = self.0.get(&ino).copied().unwrap_or(0);
        if queue == 0 {
            self.0.remove(&ino);
        } else if queue < base {
            self.0.insert(ino, queue);
        }
        queue > base
    }
}

/// The (inode, queue) of each listening TCP socket (its accept queue) or, with `udp`,
/// of every UDP socket (bytes waiting) in a /proc/net/{tcp,udp}[6] text (pure).
pub fn queues(text: &str, udp: bool) -> Vec<(u32, u32)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (st, queues, ino) = (f.get(3)?, f.get(4)?, f.get(9)?);
            if !udp && *st != "0A" {
                return None;
            }
            let rx = u32::from_str_radix(queues.split_once(':')?.1, 16).ok()?;
            Some((ino.parse().ok()?, rx))
        })
        .collect()
}

/// The queues of the zone whose init is `pid` (its network namespace's sockets).
pub fn read(proc_root: &Path, pid: i32) -> Vec<(u32, u32)> {
    FILES
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(proc_root.join(format!("{pid}/net/{f}")))
                .map(|t| queues(&t, f.starts_with("udp")))
                .unwrap_or_default()
        })
        .collect()
}

/// Whether the zone whose init is `pid` has a client waiting beyond `base`.
pub fn pending(proc_root: &Path, pid: i32, base: &mut Baseline) -> bool {
    // Every queue is compared (no early stop), so each lowered baseline is kept.
    read(proc_root, pid)
        .into_iter()
        .fold(false, |any, (ino, q)| base.grew(ino, q) || any)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";

    #[test]
    fn listening_and_udp_queues_are_read_by_inode() {
        let idle = format!("{HEAD}   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 624 1\n");
        assert_eq!(queues(&idle, false), vec![(624, 0)]);
        let queued = format!("{HEAD}   0: 00000000:1F90 00000000:0000 0A 00000000:00000001 00:00000000 00000000     0        0 624 1\n");
        assert_eq!(queues(&queued, false), vec![(624, 1)]);
        // An established connection with unread data is the zone's own business.
        let est = format!("{HEAD}   1: 0100007F:1F90 0100007F:A000 01 00000000:00000010 00:00000000 00000000     0        0 625 1\n");
        assert!(queues(&est, false).is_empty());
        let udp = format!("{HEAD}   5: 00000000:0035 00000000:0000 07 00000000:00000300 00:00000000 00000000     0        0 626 2\n");
        assert_eq!(queues(&udp, true), vec![(626, 0x300)]);
        assert!(queues(HEAD, false).is_empty());
    }

    #[test]
    fn only_a_queue_longer_than_at_suspension_is_a_wake() {
        // One connection left unaccepted before the suspend, on listener 10.
        let mut b = Baseline::new([(10, 1), (11, 0)]);
        assert_eq!(b.to_record(), BTreeMap::from([(10, 1)]));
        assert!(!b.grew(10, 1), "the connection that was already there");
        assert!(!b.grew(11, 0));
        assert!(b.grew(10, 2), "a new connection on the same listener");
        assert!(b.grew(11, 1), "a first one on another");
        assert!(
            b.grew(12, 5),
            "a socket not seen before, with something waiting"
        );
        // A queue that shrank (its client went away) lowers the baseline.
        assert!(!b.grew(10, 0));
        assert!(b.grew(10, 1));
        assert_eq!(Baseline::recorded(&b.to_record()), b);
    }
}
