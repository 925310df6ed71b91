//! Waking a suspended zone on demand (issue 19, item 2; docs/suspend.md, "Wake on
//! connection"): a client that connects to a suspended zone's listening TCP socket is
//! not lost — the kernel completes the handshake and queues the connection in the
//! socket's backlog even while every process of the zone is frozen — and the agent,
//! which reads each suspended zone's sockets every tick, resumes the zone as soon as
//! one has a connection waiting (or a UDP socket a datagram). The zone then accepts it.
//!
//! The sockets are read from the host through `/proc/<init>/net/{tcp,tcp6,udp,udp6}`,
//! which show the zone's network namespace: for a listening TCP socket (state `0A`)
//! the `rx_queue` column is its accept queue; for UDP, the bytes waiting. No process per
//! zone and nothing inside the zone. The cost is one small read per file per suspended
//! zone per tick; [`pending`] stops at the first hit. Unix sockets are not watched
//! (their queues are not in /proc).

use std::path::Path;

/// The files read, relative to `/proc/<pid>/net`.
pub const FILES: [&str; 4] = ["tcp", "tcp6", "udp", "udp6"];

/// Whether a /proc/net/{tcp,udp}[6] text has a listening TCP socket with a connection
/// in its accept queue, or a UDP socket with data waiting (pure).
pub fn waiting(text: &str, udp: bool) -> bool {
    text.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(st), Some(queues)) = (f.get(3), f.get(4)) else {
            return false;
        };
        let rx = queues
            .split_once(':')
            .and_then(|(_, rx)| u64::from_str_radix(rx, 16).ok())
            .unwrap_or(0);
        rx > 0 && (udp || *st == "0A")
    })
}

/// Whether the zone whose init is `pid` has a client waiting.
pub fn pending(proc_root: &Path, pid: i32) -> bool {
    FILES.iter().any(|f| {
        std::fs::read_to_string(proc_root.join(format!("{pid}/net/{f}")))
            .is_ok_and(|t| waiting(&t, f.starts_with("udp")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";

    #[test]
    fn a_listening_socket_with_a_queued_connection_is_waiting() {
        let idle = format!("{HEAD}   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 624 1\n");
        assert!(!waiting(&idle, false));
        let queued = format!("{HEAD}   0: 00000000:1F90 00000000:0000 0A 00000000:00000001 00:00000000 00000000     0        0 624 1\n");
        assert!(waiting(&queued, false));
        // An established connection with unread data is the zone's own business.
        let est = format!("{HEAD}   1: 0100007F:1F90 0100007F:A000 01 00000000:00000010 00:00000000 00000000     0        0 625 1\n");
        assert!(!waiting(&est, false));
        let udp = format!("{HEAD}   5: 00000000:0035 00000000:0000 07 00000000:00000300 00:00000000 00000000     0        0 626 2\n");
        assert!(waiting(&udp, true));
        assert!(!waiting(HEAD, false));
    }
}
