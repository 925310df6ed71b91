//! Waking a suspended zone when a client waits on one of its sockets, by `sock_diag`
//! (issue 19, item 2; docs/suspend.md, "Wake on connection"). A client that connects
//! to a suspended zone's listening TCP or unix stream socket is queued by the kernel on
//! the listener while the zone is frozen (a unix socket in the zone's filesystem is
//! reached from the host through the zone's root, or bind-mounted out); a datagram to
//! its UDP socket waits in the receive queue. The agent sees it and resumes the zone,
//! which then accepts it.
//!
//! Per suspended zone and tick, five `sock_diag` netlink dumps (`SOCK_DIAG_BY_FAMILY`)
//! on one netlink socket opened once in the zone's network namespace (a socket belongs
//! to the namespace it was made in; as `net::netlink` does for links): listening unix
//! sockets with `UDIAG_SHOW_RQLEN` (a listener's pending connections), listening TCP
//! sockets over IPv4 and IPv6 (`idiag_rqueue`: the accept queue), and UDP sockets over
//! both (`idiag_rqueue`: bytes waiting). A listener dump walks only the listening hash,
//! where `/proc/PID/net/tcp` (the first version, [`super::wake`]) walks every socket of
//! the host: at 900 suspended zones that made a sweep take seconds. The dumps hold
//! every such socket of the namespace — for a host-network zone, the host's — so the
//! zone's own are picked by inode: the sockets its processes hold (`/proc/PID/fd`, read
//! once when the zone is first watched: a frozen zone makes no new ones). So
//! host-network zones are watched too. The encoding and parsing are pure and
//! unit-tested.
//!
//! A wake is a queue longer than its baseline ([`super::wake::Baseline`]: what waited
//! at suspension). The same sweep serves a zone held in the agent's one wait
//! ([`super::wake_hold`]): there it runs only when one of the zone's sockets became
//! readable, to tell a new client from a backlog that was already there; and
//! [`queues_now`] gives the suspend its record of that backlog.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr};

use super::wake::Baseline;
use crate::cgroups::CgroupSet;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const AF_UNIX: u8 = 1;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
/// `TCP_LISTEN`, the state a listening unix socket reports.
const LISTEN: u8 = 10;
const UDIAG_SHOW_RQLEN: u32 = 0x10;
const UNIX_DIAG_RQLEN: u16 = 4;

/// A `SOCK_DIAG_BY_FAMILY` dump request for listening unix sockets with their queue
/// lengths (pure): `nlmsghdr` then `unix_diag_req`.
pub fn request(seq: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(40);
    b.extend_from_slice(&40u32.to_ne_bytes());
    b.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    // unix_diag_req: family, protocol, pad, states, ino, show, cookie[2].
    b.extend_from_slice(&[AF_UNIX, 0, 0, 0]);
    b.extend_from_slice(&(1u32 << LISTEN).to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&UDIAG_SHOW_RQLEN.to_ne_bytes());
    b.extend_from_slice(&[0xff; 8]);
    b
}

/// The dumps of one sweep: (family, protocol). Protocol 0 with `AF_UNIX`.
pub const DUMPS: [(u8, u8); 5] = [
    (AF_UNIX, 0),
    (AF_INET, IPPROTO_TCP),
    (AF_INET6, IPPROTO_TCP),
    (AF_INET, IPPROTO_UDP),
    (AF_INET6, IPPROTO_UDP),
];

/// A `SOCK_DIAG_BY_FAMILY` dump request for the `family`/`protocol` sockets a wake
/// cares about (pure): unix listeners ([`request`]), TCP listeners, or every UDP
/// socket; `nlmsghdr` then `inet_diag_req_v2` (family, protocol, ext, pad, states, a
/// zero `inet_diag_sockid`).
pub fn request_for(family: u8, protocol: u8, seq: u32) -> Vec<u8> {
    if family == AF_UNIX {
        return request(seq);
    }
    let mut b = Vec::with_capacity(72);
    b.extend_from_slice(&72u32.to_ne_bytes());
    b.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&[family, protocol, 0, 0]);
    let states: u32 = if protocol == IPPROTO_TCP {
        1 << LISTEN
    } else {
        u32::MAX
    };
    b.extend_from_slice(&states.to_ne_bytes());
    b.extend_from_slice(&[0; 48]);
    b
}

/// What one buffer of the dump's replies said.
#[derive(Debug, PartialEq, Eq)]
pub enum Replies {
    /// More buffers follow.
    More,
    /// The dump is complete.
    Done,
    /// The kernel refused the request (errno).
    Error(i32),
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Parse one received buffer of a unix dump (pure): each listening socket's (inode,
/// connections waiting) goes into `out`.
pub fn parse(buf: &[u8], seq: u32, out: &mut Vec<(u32, u32)>) -> Replies {
    parse_with(buf, seq, out, unix_entry)
}

/// Parse one received buffer of a TCP or UDP dump (pure): each socket's (inode, queue)
/// — a TCP listener's accept queue, a UDP socket's bytes waiting — goes into `out`.
pub fn parse_inet(buf: &[u8], seq: u32, out: &mut Vec<(u32, u32)>) -> Replies {
    parse_with(buf, seq, out, inet_entry)
}

/// `unix_diag_msg` (family, type, state, pad, ino, cookie[2]) and its attributes: a
/// listener's (inode, pending connections).
fn unix_entry(msg: &[u8]) -> Option<(u32, u32)> {
    let (&state, ino) = (msg.get(18)?, u32_at(msg, 20)?);
    let mut a = 32;
    let mut rq = 0;
    while a + 4 <= msg.len() {
        let (Some(alen), Some(atype)) = (u16_at(msg, a), u16_at(msg, a + 2)) else {
            break;
        };
        let alen = alen as usize;
        if alen < 4 {
            break;
        }
        if atype == UNIX_DIAG_RQLEN {
            rq = u32_at(msg, a + 4).unwrap_or(0);
        }
        a += (alen + 3) & !3;
    }
    (state == LISTEN).then_some((ino, rq))
}

/// `inet_diag_msg`: family, state, timer, retrans, the 48-byte `inet_diag_sockid`,
/// then expires, rqueue, wqueue, uid, inode.
fn inet_entry(msg: &[u8]) -> Option<(u32, u32)> {
    Some((u32_at(msg, 16 + 68)?, u32_at(msg, 16 + 56)?))
}

fn parse_with(
    buf: &[u8],
    seq: u32,
    out: &mut Vec<(u32, u32)>,
    entry: fn(&[u8]) -> Option<(u32, u32)>,
) -> Replies {
    let mut off = 0;
    while off + 16 <= buf.len() {
        let (Some(len), Some(kind), Some(s)) =
            (u32_at(buf, off), u16_at(buf, off + 4), u32_at(buf, off + 8))
        else {
            break;
        };
        let len = len as usize;
        if len < 16 || off + len > buf.len() {
            break;
        }
        let msg = &buf[off..off + len];
        off += (len + 3) & !3;
        if s != seq {
            continue;
        }
        match kind {
            NLMSG_DONE => return Replies::Done,
            NLMSG_ERROR => {
                let errno = u32_at(msg, 16).map_or(0, |e| -(e as i32));
                return if errno == 0 {
                    Replies::Done
                } else {
                    Replies::Error(errno)
                };
            }
            SOCK_DIAG_BY_FAMILY => out.extend(entry(msg)),
            _ => {}
        }
    }
    Replies::More
}

/// The sockets held by `pids`, by inode (`socket:[N]` links in `/proc/PID/fd`), each
/// with one (pid, descriptor number) that holds it.
pub fn socket_fds(proc_root: &Path, pids: &[i32]) -> HashMap<u32, (i32, i32)> {
    let mut out = HashMap::new();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(proc_root.join(format!("{pid}/fd"))) else {
            continue;
        };
        for fd in fds.flatten() {
            let Some(num) = fd.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Ok(target) = std::fs::read_link(fd.path()) {
                let t = target.to_string_lossy();
                if let Some(n) = t
                    .strip_prefix("socket:[")
                    .and_then(|r| r.strip_suffix(']'))
                    .and_then(|n| n.parse().ok())
                {
                    out.entry(n).or_insert((*pid, num));
                }
            }
        }
    }
    out
}

/// A `NETLINK_SOCK_DIAG` socket in the network namespace `netns`; this thread enters it
/// for the `socket(2)` call only.
fn open_in(netns: &File) -> io::Result<Socket> {
    let home = File::open("/proc/thread-self/ns/net")?;
    warren_sys::proc::setns(netns.as_fd())?;
    let opened = Socket::new(NETLINK_SOCK_DIAG);
    warren_sys::proc::setns(home.as_fd()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("returning to the host's network namespace failed: {e}"),
        )
    })?;
    let s = opened?;
    s.connect(&SocketAddr::new(0, 0))?;
    Ok(s)
}

/// What kind of socket a dump's (family, protocol) is, as a wake's reason says it.
fn kind(protocol: u8) -> &'static str {
    match protocol {
        0 => UNIX,
        IPPROTO_TCP => TCP,
        _ => UDP,
    }
}

/// The kinds of [`Watched`] sockets, as a wake's reason says them.
pub const UNIX: &str = "a unix socket";
pub const TCP: &str = "a TCP socket";
pub const UDP: &str = "a UDP socket";

/// One of the zone's sockets that a wake watches: a unix or TCP listener, or a UDP
/// socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watched {
    pub inode: u32,
    pub kind: &'static str,
    /// A process of the zone holding it, and the descriptor number there.
    pub held_by: (i32, i32),
}

/// One suspended zone's sockets, watched.
pub struct SocketWatch {
    /// The sock_diag socket in the zone's network namespace; `None` while parked.
    sock: Option<Socket>,
    /// The zone's network namespace, to open one again (`/proc/<init>/ns/net`).
    netns: std::path::PathBuf,
    /// Held in the agent's one wait ([`SocketWatch::park`]): a sweep is rare (a held
    /// socket became readable), so its socket is opened for it and closed after.
    parked: bool,
    fds: HashMap<u32, (i32, i32)>,
    /// The listeners and UDP sockets among them (the first sweep's).
    pub watched: Vec<Watched>,
    /// What waited at suspension (or at the first sweep): a wake is growth past it.
    pub baseline: Baseline,
    seq: u32,
    buf: Vec<u8>,
    /// Its netlink socket, counted in the agent's descriptor budget while the watch
    /// lives ([`super::wake_hold::Holder::counted`]).
    pub counted: Option<super::wake_hold::Counted>,
}

impl SocketWatch {
    /// Watch the zone whose init is `pid` and whose processes are in `cgroups`, waking
    /// it on growth past `recorded` (the suspension's record) or, without one, past
    /// what waits now; `None` when its processes hold no socket at all.
    pub fn new(
        proc_root: &Path,
        pid: i32,
        cgroups: &CgroupSet,
        recorded: Option<&BTreeMap<u32, u32>>,
    ) -> io::Result<Option<SocketWatch>> {
        let pids = cgroups.pids().map_err(io::Error::other)?;
        let fds = socket_fds(proc_root, &pids);
        if fds.is_empty() {
            return Ok(None);
        }
        let netns = proc_root.join(format!("{pid}/ns/net"));
        let mut w = SocketWatch {
            sock: Some(open_in(&File::open(&netns)?)?),
            netns,
            parked: false,
            fds,
            watched: Vec::new(),
            baseline: Baseline::default(),
            seq: 0,
            buf: Vec::with_capacity(64 << 10),
            counted: None,
        };
        let now = w.sweep()?;
        w.baseline = match recorded {
            Some(r) => Baseline::recorded(r),
            None => Baseline::new(now.iter().map(|(_, ino, q)| (*ino, *q))),
        };
        w.watched = now
            .iter()
            .map(|(kind, inode, _)| Watched {
                inode: *inode,
                kind,
                held_by: w.fds[inode],
            })
            .collect();
        Ok(Some(w))
    }

    /// Close the sock_diag socket until a sweep needs it (the zone is held: its
    /// sweeps are rare), so a held zone costs the agent no descriptor for it. Each
    /// sweep while parked opens one in the zone's namespace (through its init's
    /// `/proc/<pid>/ns/net`; a reused pid names another namespace, whose sockets are
    /// not the zone's inodes: nothing found) and closes it after.
    pub fn park(&mut self) {
        self.parked = true;
        self.sock = None;
        if let Some(c) = self.counted.as_mut() {
            c.set_open(false);
        }
    }

    /// Keep the socket open again (the zone is swept every tick: no longer held).
    pub fn unpark(&mut self) {
        if self.parked {
            self.parked = false;
            if let Some(c) = self.counted.as_mut() {
                c.set_open(true);
            }
        }
    }

    /// One sweep: every listener and UDP socket of the zone, (kind, inode, queue).
    fn sweep(&mut self) -> io::Result<Vec<(&'static str, u32, u32)>> {
        let sock = match self.sock.take() {
            Some(s) => s,
            None => open_in(&File::open(&self.netns)?)?,
        };
        let r = self.sweep_with(&sock);
        if !self.parked {
            self.sock = Some(sock);
        }
        r
    }

    /// [`SocketWatch::sweep`] on `sock`.
    fn sweep_with(&mut self, sock: &Socket) -> io::Result<Vec<(&'static str, u32, u32)>> {
        let mut mine = Vec::new();
        for (family, protocol) in DUMPS {
            self.seq = self.seq.wrapping_add(1);
            sock.send(&request_for(family, protocol, self.seq), 0)?;
            let mut found = Vec::new();
            loop {
                self.buf.clear();
                let n = sock.recv(&mut self.buf, 0)?;
                let got = &self.buf[..n.min(self.buf.len())];
                let r = if family == AF_UNIX {
                    parse(got, self.seq, &mut found)
                } else {
                    parse_inet(got, self.seq, &mut found)
                };
                match r {
                    Replies::More if n > 0 => {}
                    Replies::More | Replies::Done => break,
                    // A protocol this kernel does not dump (e.g. no IPv6): nothing waits there.
                    Replies::Error(_) => break,
                }
            }
            mine.extend(
                found
                    .into_iter()
                    .filter(|(ino, _)| self.fds.contains_key(ino))
                    .map(|(ino, q)| (kind(protocol), ino, q)),
            );
        }
        Ok(mine)
    }

    /// Which kind of the zone's sockets has a client waiting beyond the baseline, if
    /// one does: "a unix socket", "a TCP socket" or "a UDP socket".
    pub fn pending(&mut self) -> io::Result<Option<&'static str>> {
        if self.watched.is_empty() {
            // No listener and no UDP socket: nothing a client can wait on (a frozen
            // zone makes no new socket), so no sweep.
            return Ok(None);
        }
        let now = self.sweep()?;
        // Every queue is compared (no early stop), so each lowered baseline is kept.
        Ok(now.into_iter().fold(None, |hit, (kind, ino, q)| {
            if self.baseline.grew(ino, q) {
                hit.or(Some(kind))
            } else {
                hit
            }
        }))
    }
}

/// The queues of the zone's sockets that hold something now (for the suspension's
/// record: the agent's baseline).
pub fn queues_now(
    proc_root: &Path,
    pid: i32,
    cgroups: &CgroupSet,
) -> io::Result<BTreeMap<u32, u32>> {
    Ok(SocketWatch::new(proc_root, pid, cgroups, None)?
        .map(|w| w.baseline.to_record())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&2u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(body);
        m
    }

    fn listener(ino: u32, state: u8, rq: Option<u32>) -> Vec<u8> {
        let mut b = vec![AF_UNIX, 1, state, 0];
        b.extend_from_slice(&ino.to_ne_bytes());
        b.extend_from_slice(&[0; 8]);
        // An attribute before the queue lengths (UNIX_DIAG_NAME, 5 bytes, padded).
        b.extend_from_slice(&9u16.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(b"/a.s\0\0\0\0");
        if let Some(rq) = rq {
            b.extend_from_slice(&12u16.to_ne_bytes());
            b.extend_from_slice(&UNIX_DIAG_RQLEN.to_ne_bytes());
            b.extend_from_slice(&rq.to_ne_bytes());
            b.extend_from_slice(&128u32.to_ne_bytes());
        }
        b
    }

    fn inet(ino: u32, rq: u32) -> Vec<u8> {
        let mut b = vec![AF_INET6, LISTEN, 0, 0];
        b.extend_from_slice(&[0; 48]);
        for v in [0u32, rq, 128, 0, ino] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b
    }

    #[test]
    fn tcp_and_udp_requests_and_replies() {
        let tcp = request_for(AF_INET6, IPPROTO_TCP, 9);
        assert_eq!((tcp.len(), u32_at(&tcp, 0)), (72, Some(72)));
        assert_eq!(&tcp[16..18], &[AF_INET6, IPPROTO_TCP]);
        assert_eq!(u32_at(&tcp, 20), Some(1 << LISTEN));
        assert_eq!(
            u32_at(&request_for(AF_INET, IPPROTO_UDP, 9), 20),
            Some(u32::MAX)
        );
        assert_eq!(request_for(AF_UNIX, 0, 9), request(9));
        let mut buf = msg(SOCK_DIAG_BY_FAMILY, 9, &inet(500, 3));
        buf.extend(msg(SOCK_DIAG_BY_FAMILY, 9, &inet(501, 0)));
        let mut out = Vec::new();
        assert_eq!(parse_inet(&buf, 9, &mut out), Replies::More);
        assert_eq!(out, vec![(500, 3), (501, 0)]);
    }

    #[test]
    fn the_request_asks_for_listening_unix_sockets_with_their_queues() {
        let r = request(7);
        assert_eq!(r.len(), 40);
        assert_eq!(u32_at(&r, 0), Some(40));
        assert_eq!(u16_at(&r, 4), Some(SOCK_DIAG_BY_FAMILY));
        assert_eq!(u32_at(&r, 8), Some(7));
        assert_eq!(r[16], AF_UNIX);
        assert_eq!(u32_at(&r, 20), Some(1 << 10));
        assert_eq!(u32_at(&r, 28), Some(UDIAG_SHOW_RQLEN));
    }

    #[test]
    fn listeners_and_their_waiting_connections_are_parsed() {
        let mut buf = msg(SOCK_DIAG_BY_FAMILY, 3, &listener(100, LISTEN, Some(2)));
        buf.extend(msg(SOCK_DIAG_BY_FAMILY, 3, &listener(101, LISTEN, Some(0))));
        // Another request's reply, and a connected socket: not counted.
        buf.extend(msg(SOCK_DIAG_BY_FAMILY, 2, &listener(102, LISTEN, Some(5))));
        buf.extend(msg(SOCK_DIAG_BY_FAMILY, 3, &listener(103, 1, Some(5))));
        buf.extend(msg(SOCK_DIAG_BY_FAMILY, 3, &listener(104, LISTEN, None)));
        let mut out = Vec::new();
        assert_eq!(parse(&buf, 3, &mut out), Replies::More);
        assert_eq!(out, vec![(100, 2), (101, 0), (104, 0)]);
        let done = msg(NLMSG_DONE, 3, &0u32.to_ne_bytes());
        assert_eq!(parse(&done, 3, &mut out), Replies::Done);
        let err = msg(NLMSG_ERROR, 3, &(-22i32).to_ne_bytes());
        assert_eq!(parse(&err, 3, &mut out), Replies::Error(22));
        // A truncated message ends the buffer without panicking.
        assert_eq!(parse(&buf[..30], 3, &mut Vec::new()), Replies::More);
    }
}
