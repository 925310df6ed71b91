//! A small nf_tables client over `NETLINK_NETFILTER`: exactly what the bridge filter
//! needs (tables, base and regular chains, verdict maps and their elements, rules made
//! of `meta`, `payload`, `cmp`, `lookup` and a drop verdict), sent as one atomic batch
//! per change. No `nft` binary, no libnftnl: the messages are
//! encoded here (the layout is the kernel's `include/uapi/linux/netfilter/nf_tables.h`)
//! and sent on a `netlink-sys` socket.
//!
//! A batch is `NFNL_MSG_BATCH_BEGIN`, the messages, `NFNL_MSG_BATCH_END`; the kernel
//! applies all of it or none of it, and acknowledges each message flagged
//! `NLM_F_ACK` (we flag all of them) with a zero or an error once the whole batch ran.

mod client;

pub use client::Nft;

/// `NFPROTO_BRIDGE`: the bridge family.
pub const FAMILY_BRIDGE: u8 = 7;
/// Bridge hooks (`NF_BR_PRE_ROUTING`, `NF_BR_FORWARD`).
pub const HOOK_PREROUTING: u32 = 0;
pub const HOOK_FORWARD: u32 = 2;
/// The bridge family's `filter` priority (`NF_BR_PRI_FILTER_BRIDGED`).
pub const PRIORITY_FILTER: i32 = -200;

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_GETTABLE: u16 = 1;
const NFT_MSG_DELTABLE: u16 = 2;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_GETCHAIN: u16 = 4;
const NFT_MSG_DELCHAIN: u16 = 5;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_NEWSET: u16 = 9;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_APPEND: u16 = 0x800;
const NLA_F_NESTED: u16 = 0x8000;

const NFTA_TABLE_NAME: u16 = 1;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_CHAIN_POLICY: u16 = 5;
const NFTA_CHAIN_TYPE: u16 = 7;
const NFTA_HOOK_HOOKNUM: u16 = 1;
const NFTA_HOOK_PRIORITY: u16 = 2;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_VERDICT_CHAIN: u16 = 2;
const NFTA_SET_TABLE: u16 = 1;
const NFTA_SET_NAME: u16 = 2;
const NFTA_SET_FLAGS: u16 = 3;
const NFTA_SET_KEY_TYPE: u16 = 4;
const NFTA_SET_KEY_LEN: u16 = 5;
const NFTA_SET_DATA_TYPE: u16 = 6;
const NFTA_SET_ID: u16 = 10;
const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
/// `NFT_SET_MAP`: a set whose elements carry data (here a verdict).
const NFT_SET_MAP: u32 = 0x8;
/// `NFT_DATA_VERDICT`, the data type of a verdict map.
const NFT_DATA_VERDICT: u32 = 0xffff_ff00;
/// nft's type id for interface names (`ifname`), so `nft list` prints the keys.
const TYPE_IFNAME: u32 = 41;
/// `NFT_JUMP`.
const NFT_JUMP: u32 = (-3i32) as u32;
/// `NFT_REG_1`: a 16-byte register (an interface name or an IPv6 address fits).
const NFT_REG_1: u32 = 1;
const NFT_REG_VERDICT: u32 = 0;
const NF_ACCEPT: u32 = 1;

/// `meta` keys used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaKey {
    IifName = 6,
    OifName = 7,
    L4Proto = 16,
}

/// Where a `payload` expression reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    Link = 0,
    Network = 1,
    Transport = 2,
}

/// `cmp` operators used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq = 0,
    Ne = 1,
}

/// One expression of a rule. Loads go to `NFT_REG_1`; `Cmp` compares it; `Map` looks
/// it up in a verdict map (the element's verdict, e.g. a jump, applies; no element:
/// the rule goes on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Meta(MetaKey),
    Payload { base: Base, offset: u32, len: u32 },
    Cmp(Op, Vec<u8>),
    Map(String),
    Drop,
}

/// A chain: a base chain (type `filter`, policy accept) on `hook` at `priority`, or a
/// regular chain (reached by jumps) when `hook` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub name: String,
    pub hook: Option<(u32, i32)>,
}

/// A verdict map keyed on interface names (16 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Map {
    pub name: String,
    /// Its id within one transaction (`NFTA_SET_ID`, non-zero).
    pub id: u32,
}

/// One change, applied atomically with the others of its batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<'a> {
    /// Create the table if it does not exist.
    AddTable,
    /// Create the table; fail with EEXIST if it exists.
    CreateTable,
    DeleteTable,
    AddMap(&'a Map),
    /// `map[key] = jump chain`.
    AddJump {
        map: &'a str,
        key: &'a [u8],
        chain: &'a str,
    },
    DeleteKey {
        map: &'a str,
        key: &'a [u8],
    },
    AddChain(&'a Chain),
    DeleteChain(&'a str),
    /// Append a rule to a chain.
    AddRule(&'a str, &'a [Expr]),
}

/// Append one netlink attribute (payload padded to 4 bytes).
fn attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(buf.len() + ((4 - len % 4) % 4), 0);
}

fn attr_str(buf: &mut Vec<u8>, kind: u16, s: &str) {
    let mut p = s.as_bytes().to_vec();
    p.push(0);
    attr(buf, kind, &p);
}

fn attr_be32(buf: &mut Vec<u8>, kind: u16, v: u32) {
    attr(buf, kind, &v.to_be_bytes());
}

fn nested(buf: &mut Vec<u8>, kind: u16, fill: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    fill(&mut inner);
    attr(buf, kind | NLA_F_NESTED, &inner);
}

fn expr_attrs(buf: &mut Vec<u8>, e: &Expr) {
    let (name, data): (&str, Vec<u8>) = match e {
        Expr::Meta(key) => ("meta", {
            let mut d = Vec::new();
            attr_be32(&mut d, 1, NFT_REG_1); // NFTA_META_DREG
            attr_be32(&mut d, 2, *key as u32); // NFTA_META_KEY
            d
        }),
        Expr::Payload { base, offset, len } => ("payload", {
            let mut d = Vec::new();
            attr_be32(&mut d, 1, NFT_REG_1); // NFTA_PAYLOAD_DREG
            attr_be32(&mut d, 2, *base as u32); // NFTA_PAYLOAD_BASE
            attr_be32(&mut d, 3, *offset); // NFTA_PAYLOAD_OFFSET
            attr_be32(&mut d, 4, *len); // NFTA_PAYLOAD_LEN
            d
        }),
        Expr::Cmp(op, value) => ("cmp", {
            let mut d = Vec::new();
            attr_be32(&mut d, 1, NFT_REG_1); // NFTA_CMP_SREG
            attr_be32(&mut d, 2, *op as u32); // NFTA_CMP_OP
            nested(&mut d, 3, |v| attr(v, NFTA_DATA_VALUE, value)); // NFTA_CMP_DATA
            d
        }),
        Expr::Map(set) => ("lookup", {
            let mut d = Vec::new();
            attr_str(&mut d, 1, set); // NFTA_LOOKUP_SET
            attr_be32(&mut d, 2, NFT_REG_1); // NFTA_LOOKUP_SREG
            attr_be32(&mut d, 3, NFT_REG_VERDICT); // NFTA_LOOKUP_DREG
            d
        }),
        Expr::Drop => ("immediate", {
            let mut d = Vec::new();
            attr_be32(&mut d, 1, NFT_REG_VERDICT); // NFTA_IMMEDIATE_DREG
            nested(&mut d, 2, |v| {
                nested(v, NFTA_DATA_VERDICT, |c| attr_be32(c, NFTA_VERDICT_CODE, 0))
            }); // NFTA_IMMEDIATE_DATA, NF_DROP
            d
        }),
    };
    nested(buf, NFTA_LIST_ELEM, |el| {
        attr_str(el, NFTA_EXPR_NAME, name);
        nested(el, NFTA_EXPR_DATA, |d| d.extend_from_slice(&data));
    });
}

/// The attributes of a set-element message with one element, filled by `elem`.
fn element_list(a: &mut Vec<u8>, table: &str, set: &str, elem: impl FnOnce(&mut Vec<u8>)) {
    attr_str(a, NFTA_SET_ELEM_LIST_TABLE, table);
    attr_str(a, NFTA_SET_ELEM_LIST_SET, set);
    nested(a, NFTA_SET_ELEM_LIST_ELEMENTS, |l| {
        nested(l, NFTA_LIST_ELEM, elem)
    });
}

/// One netlink message: header, `nfgenmsg`, attributes.
fn message(kind: u16, flags: u16, seq: u32, family: u8, res_id: u16, attrs: &[u8]) -> Vec<u8> {
    let len = 16 + 4 + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.push(family);
    m.push(0); // NFNETLINK_V0
    m.extend_from_slice(&res_id.to_be_bytes());
    m.extend_from_slice(attrs);
    m
}

fn nft_type(msg: u16) -> u16 {
    (NFNL_SUBSYS_NFTABLES << 8) | msg
}

/// The netlink message of one change to table `table` (pure; unit-tested).
pub fn encode(change: &Change<'_>, table: &str, seq: u32) -> Vec<u8> {
    let mut a = Vec::new();
    let (kind, flags) = match change {
        Change::AddTable => {
            attr_str(&mut a, NFTA_TABLE_NAME, table);
            (NFT_MSG_NEWTABLE, NLM_F_CREATE)
        }
        Change::CreateTable => {
            attr_str(&mut a, NFTA_TABLE_NAME, table);
            (NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL)
        }
        Change::AddMap(m) => {
            attr_str(&mut a, NFTA_SET_TABLE, table);
            attr_str(&mut a, NFTA_SET_NAME, &m.name);
            attr_be32(&mut a, NFTA_SET_FLAGS, NFT_SET_MAP);
            attr_be32(&mut a, NFTA_SET_KEY_TYPE, TYPE_IFNAME);
            attr_be32(&mut a, NFTA_SET_KEY_LEN, 16);
            attr_be32(&mut a, NFTA_SET_DATA_TYPE, NFT_DATA_VERDICT);
            attr_be32(&mut a, NFTA_SET_ID, m.id);
            (NFT_MSG_NEWSET, NLM_F_CREATE)
        }
        Change::AddJump { map, key, chain } => {
            element_list(&mut a, table, map, |e| {
                nested(e, NFTA_SET_ELEM_KEY, |k| attr(k, NFTA_DATA_VALUE, key));
                nested(e, NFTA_SET_ELEM_DATA, |d| {
                    nested(d, NFTA_DATA_VERDICT, |v| {
                        attr_be32(v, NFTA_VERDICT_CODE, NFT_JUMP);
                        attr_str(v, NFTA_VERDICT_CHAIN, chain);
                    })
                });
            });
            (NFT_MSG_NEWSETELEM, NLM_F_CREATE)
        }
        Change::DeleteKey { map, key } => {
            element_list(&mut a, table, map, |e| {
                nested(e, NFTA_SET_ELEM_KEY, |k| attr(k, NFTA_DATA_VALUE, key));
            });
            (NFT_MSG_DELSETELEM, 0)
        }
        Change::DeleteTable => {
            attr_str(&mut a, NFTA_TABLE_NAME, table);
            (NFT_MSG_DELTABLE, 0)
        }
        Change::AddChain(c) => {
            attr_str(&mut a, NFTA_CHAIN_TABLE, table);
            attr_str(&mut a, NFTA_CHAIN_NAME, &c.name);
            if let Some((hook, priority)) = c.hook {
                nested(&mut a, NFTA_CHAIN_HOOK, |h| {
                    attr_be32(h, NFTA_HOOK_HOOKNUM, hook);
                    attr_be32(h, NFTA_HOOK_PRIORITY, priority as u32);
                });
                attr_be32(&mut a, NFTA_CHAIN_POLICY, NF_ACCEPT);
                attr_str(&mut a, NFTA_CHAIN_TYPE, "filter");
            }
            (NFT_MSG_NEWCHAIN, NLM_F_CREATE)
        }
        Change::DeleteChain(name) => {
            attr_str(&mut a, NFTA_CHAIN_TABLE, table);
            attr_str(&mut a, NFTA_CHAIN_NAME, name);
            (NFT_MSG_DELCHAIN, 0)
        }
        Change::AddRule(chain, exprs) => {
            attr_str(&mut a, NFTA_RULE_TABLE, table);
            attr_str(&mut a, NFTA_RULE_CHAIN, chain);
            nested(&mut a, NFTA_RULE_EXPRESSIONS, |l| {
                for e in exprs.iter() {
                    expr_attrs(l, e);
                }
            });
            (NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND)
        }
    };
    message(
        nft_type(kind),
        NLM_F_REQUEST | NLM_F_ACK | flags,
        seq,
        FAMILY_BRIDGE,
        0,
        &a,
    )
}

#[cfg(test)]
mod tests {
    use super::client::{cstr, parse_attrs, split};
    use super::*;

    #[test]
    fn attributes_are_padded_and_nested() {
        let mut b = Vec::new();
        attr_str(&mut b, 1, "abc");
        assert_eq!(b, [8, 0, 1, 0, b'a', b'b', b'c', 0]);
        let mut b = Vec::new();
        attr(&mut b, 2, &[1, 2, 3, 4, 5]);
        assert_eq!(b.len(), 12);
        assert_eq!(u16::from_ne_bytes([b[0], b[1]]), 9);
        let mut n = Vec::new();
        nested(&mut n, 3, |i| attr_be32(i, 1, 7));
        assert_eq!(u16::from_ne_bytes([n[2], n[3]]), 3 | NLA_F_NESTED);
        assert_eq!(&n[8..12], &7u32.to_be_bytes());
    }

    #[test]
    fn a_rule_message_names_table_chain_and_expressions() {
        let exprs = [
            Expr::Meta(MetaKey::IifName),
            Expr::Cmp(Op::Eq, b"wz0123456789ab\0\0".to_vec()),
            Expr::Drop,
        ];
        let m = encode(
            &Change::AddRule("z-wz0123456789ab", &exprs),
            "warren_br0",
            9,
        );
        assert_eq!(
            u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize,
            m.len()
        );
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), (10 << 8) | 6);
        assert_eq!(u32::from_ne_bytes(m[8..12].try_into().unwrap()), 9);
        assert_eq!(m[16], FAMILY_BRIDGE);
        let attrs = parse_attrs(&m[20..]);
        assert_eq!(cstr(attrs[0].1), "warren_br0");
        assert_eq!(cstr(attrs[1].1), "z-wz0123456789ab");
        let list = parse_attrs(attrs[2].1);
        assert_eq!(list.len(), 3);
        let names: Vec<&str> = list
            .iter()
            .map(|(_, el)| cstr(parse_attrs(el)[0].1))
            .collect();
        assert_eq!(names, ["meta", "cmp", "immediate"]);
    }

    #[test]
    fn a_map_element_jumps_to_the_named_chain() {
        let key = b"wz0123456789ab\0\0".to_vec();
        let m = encode(
            &Change::AddJump {
                map: "zones",
                key: &key,
                chain: "z-wz0123456789ab",
            },
            "warren-br0",
            3,
        );
        assert_eq!(
            u16::from_ne_bytes([m[4], m[5]]),
            (10 << 8) | NFT_MSG_NEWSETELEM
        );
        let attrs = parse_attrs(&m[20..]);
        assert_eq!(cstr(attrs[0].1), "warren-br0");
        assert_eq!(cstr(attrs[1].1), "zones");
        let elem = parse_attrs(parse_attrs(attrs[2].1)[0].1);
        let k = parse_attrs(elem[0].1);
        assert_eq!(k[0].1, key.as_slice());
        let verdict = parse_attrs(parse_attrs(elem[1].1)[0].1);
        assert_eq!(verdict[0].1, NFT_JUMP.to_be_bytes());
        assert_eq!(cstr(verdict[1].1), "z-wz0123456789ab");
        // A map of ifname keys and verdicts, with an id for its transaction.
        let set = encode(
            &Change::AddMap(&Map {
                name: "zones".into(),
                id: 1,
            }),
            "warren-br0",
            4,
        );
        let a = parse_attrs(&set[20..]);
        let get = |t: u16| a.iter().find(|(k, _)| *k == t).unwrap().1;
        assert_eq!(get(NFTA_SET_FLAGS), NFT_SET_MAP.to_be_bytes());
        assert_eq!(get(NFTA_SET_KEY_LEN), 16u32.to_be_bytes());
        assert_eq!(get(NFTA_SET_DATA_TYPE), NFT_DATA_VERDICT.to_be_bytes());
        assert_eq!(get(NFTA_SET_ID), 1u32.to_be_bytes());
    }

    #[test]
    fn split_reads_back_what_message_wrote() {
        let mut b = message(2, 0, 5, 0, 0, &[1, 2, 3]);
        b.resize(24, 0);
        b.extend_from_slice(&message(3, 0, 6, 0, 0, &[]));
        let s = split(&b);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].0, s[0].1), (2, 5));
        assert_eq!((s[1].0, s[1].1), (3, 6));
    }
}
