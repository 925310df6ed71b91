//! A small synchronous rtnetlink client: exactly the requests warren needs (links,
//! addresses, a default route), each one request and its acknowledgement on a
//! `NETLINK_ROUTE` socket. Messages are built with `netlink-packet-route`; the socket
//! is `netlink-sys`'s, used blocking. No `ip` is ever run.
//!
//! A netlink socket talks to the network namespace it was created in, so
//! [`Netlink::open_in`] enters a zone's namespace just for the `socket(2)` call and
//! returns at once; the socket then configures the zone from the host process.

use std::fs::File;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd;

use netlink_packet_core::{
    NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE,
    NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage, AddressScope};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// One rtnetlink socket in one network namespace.
pub struct Netlink {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

/// A link as the kernel describes it.
#[derive(Debug, Clone)]
pub struct Link {
    pub index: u32,
    pub up: bool,
    /// "bridge", "veth", … (`None` for devices without link info, such as `lo`).
    pub kind: Option<String>,
    /// The bridge (or other master) this link is a port of.
    pub master: Option<u32>,
}

fn is_errno(e: &io::Error, errno: i32) -> bool {
    e.raw_os_error() == Some(errno)
}

impl Netlink {
    /// A socket in this thread's network namespace.
    pub fn open() -> io::Result<Netlink> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        Ok(Netlink {
            sock,
            seq: 0,
            buf: Vec::with_capacity(32 << 10),
        })
    }

    /// A socket in the network namespace `netns` (an open `/proc/<pid>/ns/net`).
    /// This thread enters it for the `socket(2)` call only and goes back at once.
    pub fn open_in(netns: &File) -> io::Result<Netlink> {
        let home = File::open("/proc/thread-self/ns/net")?;
        warren_sys::proc::setns(netns.as_fd())?;
        let opened = Netlink::open();
        // Going back cannot fail for root with a descriptor of our own namespace; if it
        // somehow did, every later host-side call would act in the zone: stop here.
        warren_sys::proc::setns(home.as_fd()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("returning to the host's network namespace failed: {e}"),
            )
        })?;
        opened
    }

    /// Send one request and collect the replies up to its acknowledgement.
    fn request(
        &mut self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.seq = self.seq.wrapping_add(1);
        let mut nl = NetlinkMessage::from(msg);
        nl.header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        nl.header.sequence_number = self.seq;
        nl.finalize();
        let mut out = vec![0u8; nl.buffer_len()];
        nl.serialize(&mut out);
        self.sock.send(&out, 0)?;
        let mut replies = Vec::new();
        loop {
            self.buf.clear();
            let n = self.sock.recv(&mut self.buf, 0)?;
            let mut off = 0;
            while off < n.min(self.buf.len()) {
                let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.buf[off..])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let len = reply.header.length as usize;
                if len == 0 {
                    break;
                }
                off += (len + 3) & !3;
                if reply.header.sequence_number != self.seq {
                    continue;
                }
                match reply.payload {
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(replies),
                            Some(_) => Err(e.to_io()),
                        }
                    }
                    NetlinkPayload::Done(_) => return Ok(replies),
                    NetlinkPayload::InnerMessage(m) => replies.push(m),
                    _ => {}
                }
            }
        }
    }

    /// The link called `name`, if there is one.
    pub fn link(&mut self, name: &str) -> io::Result<Option<Link>> {
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::IfName(name.to_string()));
        let replies = match self.request(RouteNetlinkMessage::GetLink(m), 0) {
            Ok(r) => r,
            Err(e) if is_errno(&e, libc_enodev()) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(replies.into_iter().find_map(|r| match r {
            RouteNetlinkMessage::NewLink(l) => Some(describe(&l)),
            _ => None,
        }))
    }

    /// Create a bridge called `name`; `Ok(false)` if a link of that name exists.
    pub fn create_bridge(&mut self, name: &str) -> io::Result<bool> {
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::IfName(name.to_string()));
        m.attributes
            .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(
                InfoKind::Bridge,
            )]));
        match self.request(RouteNetlinkMessage::NewLink(m), NLM_F_CREATE | NLM_F_EXCL) {
            Ok(_) => Ok(true),
            Err(e) if is_errno(&e, libc_eexist()) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Set the link called `name` up (looked up by name in the socket's namespace).
    pub fn set_up_named(&mut self, name: &str) -> io::Result<()> {
        let mut m = LinkMessage::default();
        m.header.flags = LinkFlags::Up;
        m.header.change_mask = LinkFlags::Up;
        m.attributes.push(LinkAttribute::IfName(name.to_string()));
        self.request(RouteNetlinkMessage::SetLink(m), 0).map(drop)
    }

    /// Set link `index` up.
    pub fn set_up(&mut self, index: u32) -> io::Result<()> {
        let mut m = LinkMessage::default();
        m.header.index = index;
        m.header.flags = LinkFlags::Up;
        m.header.change_mask = LinkFlags::Up;
        self.request(RouteNetlinkMessage::SetLink(m), 0).map(drop)
    }

    fn address_message(index: u32, addr: Ipv4Addr, prefix: u8) -> AddressMessage {
        let mut m = AddressMessage::default();
        m.header.family = AddressFamily::Inet;
        m.header.prefix_len = prefix;
        m.header.scope = AddressScope::Universe;
        m.header.index = index;
        m.attributes.push(AddressAttribute::Local(IpAddr::V4(addr)));
        m.attributes
            .push(AddressAttribute::Address(IpAddr::V4(addr)));
        let bcast = u32::from(addr) | !(u32::MAX << (32 - prefix));
        m.attributes
            .push(AddressAttribute::Broadcast(Ipv4Addr::from(bcast)));
        m
    }

    /// Give link `index` the address `addr/prefix` (replacing the same address).
    pub fn add_address(&mut self, index: u32, addr: Ipv4Addr, prefix: u8) -> io::Result<()> {
        let m = Self::address_message(index, addr, prefix);
        self.request(
            RouteNetlinkMessage::NewAddress(m),
            NLM_F_CREATE | NLM_F_REPLACE,
        )
        .map(drop)
    }

    /// Remove `addr/prefix` from link `index`; a missing address is not an error.
    pub fn delete_address(&mut self, index: u32, addr: Ipv4Addr, prefix: u8) -> io::Result<()> {
        let m = Self::address_message(index, addr, prefix);
        match self.request(RouteNetlinkMessage::DelAddress(m), 0) {
            Err(e) if is_errno(&e, libc_eaddrnotavail()) => Ok(()),
            other => other.map(drop),
        }
    }

    /// Create a veth pair: `host` in this namespace, down and a port of bridge
    /// `bridge`; its peer named `peer`, with MAC `peer_mac`, in the network namespace `netns` (an open
    /// `/proc/<pid>/ns/net` or the zone's namespace descriptor).
    pub fn create_veth(
        &mut self,
        host: &str,
        bridge: u32,
        peer: &str,
        peer_mac: [u8; 6],
        netns: &std::fs::File,
    ) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let mut p = LinkMessage::default();
        p.attributes.push(LinkAttribute::IfName(peer.to_string()));
        p.attributes.push(LinkAttribute::Address(peer_mac.to_vec()));
        p.attributes.push(LinkAttribute::NetNsFd(netns.as_raw_fd()));
        // The host end is made down: the caller turns its IPv6 off before it goes up
        // (see `net::attach`), so it never gets addresses or routes.
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::IfName(host.to_string()));
        m.attributes.push(LinkAttribute::Controller(bridge));
        m.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Veth),
            LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(p))),
        ]));
        self.request(RouteNetlinkMessage::NewLink(m), NLM_F_CREATE | NLM_F_EXCL)
            .map(drop)
    }

    /// Delete the link called `name`; `Ok(false)` if there was none.
    pub fn delete_link(&mut self, name: &str) -> io::Result<bool> {
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::IfName(name.to_string()));
        match self.request(RouteNetlinkMessage::DelLink(m), 0) {
            Ok(_) => Ok(true),
            Err(e) if is_errno(&e, libc_enodev()) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `default via gateway` in the main table.
    pub fn add_default_route(&mut self, gateway: Ipv4Addr) -> io::Result<()> {
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet;
        m.header.table = RouteHeader::RT_TABLE_MAIN;
        m.header.protocol = RouteProtocol::Boot;
        m.header.scope = RouteScope::Universe;
        m.header.kind = RouteType::Unicast;
        m.attributes
            .push(RouteAttribute::Gateway(RouteAddress::Inet(gateway)));
        self.request(
            RouteNetlinkMessage::NewRoute(m),
            NLM_F_CREATE | NLM_F_REPLACE,
        )
        .map(drop)
    }
}

fn describe(l: &LinkMessage) -> Link {
    let mut link = Link {
        index: l.header.index,
        up: l.header.flags.contains(LinkFlags::Up),
        kind: None,
        master: None,
    };
    for a in &l.attributes {
        match a {
            LinkAttribute::Controller(m) => link.master = Some(*m),
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    if let LinkInfo::Kind(k) = i {
                        link.kind = Some(k.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    link
}

const fn libc_enodev() -> i32 {
    warren_sys::libc::ENODEV
}
const fn libc_eexist() -> i32 {
    warren_sys::libc::EEXIST
}
const fn libc_eaddrnotavail() -> i32 {
    warren_sys::libc::EADDRNOTAVAIL
}
