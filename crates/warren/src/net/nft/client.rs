//! The socket side of [`super`]: one `NETLINK_NETFILTER` socket, batches sent as one
//! transaction and their acknowledgements counted, GET requests and chain dumps, and
//! the parsing of what comes back.

use std::io;

use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr};

use super::*;

/// An nf_tables netlink socket in this thread's network namespace.
pub struct Nft {
    sock: Socket,
    seq: u32,
}

impl Nft {
    pub fn open() -> io::Result<Nft> {
        let mut sock = Socket::new(NETLINK_NETFILTER)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        Ok(Nft { sock, seq: 0 })
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Apply `changes` to bridge-family table `table` as one transaction: all or
    /// nothing. The error is the first one the kernel reported.
    pub fn apply(&mut self, table: &str, changes: &[Change<'_>]) -> io::Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let begin_seq = self.next_seq();
        let mut batch = message(
            NFNL_MSG_BATCH_BEGIN,
            NLM_F_REQUEST,
            begin_seq,
            0,
            NFNL_SUBSYS_NFTABLES,
            &[],
        );
        let first = begin_seq.wrapping_add(1);
        for c in changes {
            let seq = self.next_seq();
            batch.extend_from_slice(&encode(c, table, seq));
        }
        let end_seq = self.next_seq();
        batch.extend_from_slice(&message(
            NFNL_MSG_BATCH_END,
            NLM_F_REQUEST,
            end_seq,
            0,
            NFNL_SUBSYS_NFTABLES,
            &[],
        ));
        self.sock.send(&batch, 0)?;
        let mut pending = changes.len();
        let mut first_err: Option<(u32, i32)> = None;
        let mut buf = Vec::with_capacity(64 << 10);
        while pending > 0 {
            buf.clear();
            let n = self.sock.recv(&mut buf, 0)?;
            for (kind, seq, body) in split(&buf[..n.min(buf.len())]) {
                if kind != NLMSG_ERROR || body.len() < 4 {
                    continue;
                }
                let code = i32::from_ne_bytes([body[0], body[1], body[2], body[3]]);
                if seq == begin_seq {
                    // The batch as a whole was refused (no nf_tables, no memory).
                    return Err(io::Error::from_raw_os_error(-code));
                }
                if !(first..end_seq).contains(&seq) {
                    continue;
                }
                pending -= 1;
                if code != 0 && first_err.is_none_or(|(s, _)| seq < s) {
                    first_err = Some((seq, -code));
                }
            }
        }
        match first_err {
            Some((_, errno)) => Err(io::Error::from_raw_os_error(errno)),
            None => Ok(()),
        }
    }

    /// Whether bridge-family table `table` exists.
    pub fn table_exists(&mut self, table: &str) -> io::Result<bool> {
        let mut a = Vec::new();
        attr_str(&mut a, NFTA_TABLE_NAME, table);
        self.exists(NFT_MSG_GETTABLE, NFT_MSG_NEWTABLE, &a)
    }

    /// Whether chain `chain` of bridge-family table `table` exists (a read: no
    /// transaction, unlike deleting a missing chain, whose abort waits for RCU).
    pub fn chain_exists(&mut self, table: &str, chain: &str) -> io::Result<bool> {
        let mut a = Vec::new();
        attr_str(&mut a, NFTA_CHAIN_TABLE, table);
        attr_str(&mut a, NFTA_CHAIN_NAME, chain);
        self.exists(NFT_MSG_GETCHAIN, NFT_MSG_NEWCHAIN, &a)
    }

    /// One GET request: `Ok(true)` if the kernel answers with the object, `Ok(false)`
    /// on ENOENT.
    fn exists(&mut self, get: u16, answer: u16, attrs: &[u8]) -> io::Result<bool> {
        let seq = self.next_seq();
        let req = message(nft_type(get), NLM_F_REQUEST, seq, FAMILY_BRIDGE, 0, attrs);
        self.sock.send(&req, 0)?;
        let mut buf = Vec::with_capacity(16 << 10);
        loop {
            buf.clear();
            let n = self.sock.recv(&mut buf, 0)?;
            for (kind, s, body) in split(&buf[..n.min(buf.len())]) {
                if s != seq {
                    continue;
                }
                if kind == nft_type(answer) {
                    return Ok(true);
                }
                if kind == NLMSG_ERROR && body.len() >= 4 {
                    let code = i32::from_ne_bytes([body[0], body[1], body[2], body[3]]);
                    return match -code {
                        e if e == warren_sys::libc::ENOENT => Ok(false),
                        0 => Ok(true),
                        e => Err(io::Error::from_raw_os_error(e)),
                    };
                }
            }
        }
    }

    /// The names of the chains of bridge-family table `table` (none if it is missing).
    pub fn chains(&mut self, table: &str) -> io::Result<Vec<String>> {
        let seq = self.next_seq();
        let mut a = Vec::new();
        attr_str(&mut a, NFTA_CHAIN_TABLE, table);
        let req = message(
            nft_type(NFT_MSG_GETCHAIN),
            NLM_F_REQUEST | NLM_F_DUMP,
            seq,
            FAMILY_BRIDGE,
            0,
            &a,
        );
        self.sock.send(&req, 0)?;
        let mut names = Vec::new();
        let mut buf = Vec::with_capacity(64 << 10);
        loop {
            buf.clear();
            let n = self.sock.recv(&mut buf, 0)?;
            for (kind, s, body) in split(&buf[..n.min(buf.len())]) {
                if s != seq {
                    continue;
                }
                match kind {
                    NLMSG_DONE => return Ok(names),
                    NLMSG_ERROR => {
                        let code = i32::from_ne_bytes([body[0], body[1], body[2], body[3]]);
                        return match -code {
                            0 => Ok(names),
                            e if e == warren_sys::libc::ENOENT => Ok(Vec::new()),
                            e => Err(io::Error::from_raw_os_error(e)),
                        };
                    }
                    k if k == nft_type(NFT_MSG_NEWCHAIN) && body.len() >= 4 => {
                        let attrs = parse_attrs(&body[4..]);
                        let of_table = attrs
                            .iter()
                            .any(|(t, v)| *t == NFTA_CHAIN_TABLE && cstr(v) == table);
                        if let Some((_, v)) = attrs.iter().find(|(t, _)| *t == NFTA_CHAIN_NAME) {
                            if of_table {
                                names.push(cstr(v).to_string());
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

/// Split a receive buffer into (type, seq, body) messages.
pub(super) fn split(buf: &[u8]) -> Vec<(u16, u32, &[u8])> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 16 <= buf.len() {
        let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap_or([0; 4])) as usize;
        if len < 16 || off + len > buf.len() {
            break;
        }
        let kind = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
        let seq = u32::from_ne_bytes(buf[off + 8..off + 12].try_into().unwrap_or([0; 4]));
        out.push((kind, seq, &buf[off + 16..off + len]));
        off += (len + 3) & !3;
    }
    out
}

/// Top-level attributes of a message body: (type without flags, payload).
pub(super) fn parse_attrs(mut b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
        let kind = u16::from_ne_bytes([b[2], b[3]]) & 0x3fff;
        if len < 4 || len > b.len() {
            break;
        }
        out.push((kind, &b[4..len]));
        b = &b[((len + 3) & !3).min(b.len())..];
    }
    out
}

pub(super) fn cstr(v: &[u8]) -> &str {
    let end = v.iter().position(|&c| c == 0).unwrap_or(v.len());
    std::str::from_utf8(&v[..end]).unwrap_or("")
}
