//! An OCI `linux.seccomp` profile compiled to a classic BPF program (pure).
//!
//! Shape (x86_64 only; another architecture's calls get the default action, the
//! x32 ABI too):
//!
//! ```text
//!   ld arch ; jeq X86_64 ? next : ret DEFAULT
//!   ld nr   ; jge 0x40000000 ? ret DEFAULT
//!   per (rule, syscall name): jeq nr ? block : next rule
//!     block: the rule's argument conditions, each jumping to the next rule when
//!            false (64-bit values compared as two 32-bit halves), then ret ACTION
//!   ret DEFAULT
//! ```
//!
//! Rules keep the profile's order and the first whose conditions all hold decides,
//! as libseccomp does for rules of one syscall. Jumps go forward past one block at
//! most, so u8 offsets never overflow. Names this table does not know (newer or
//! other-architecture syscalls) are skipped, as runc skips them.

use oci_spec::runtime::{LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompOperator};
use warren_sys::harden::SockFilter;

const LD_W_ABS: u16 = 0x20;
const ALU_AND_K: u16 = 0x54;
const JEQ_K: u16 = 0x15;
const JGT_K: u16 = 0x25;
const JGE_K: u16 = 0x35;
const RET_K: u16 = 0x06;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const fn off_lo(i: usize) -> u32 {
    16 + 8 * i as u32
}
const fn off_hi(i: usize) -> u32 {
    20 + 8 * i as u32
}

/// A jump target inside a block: fall through, skip forward, or leave the block.
#[derive(Clone, Copy)]
enum T {
    Next,
    Skip(u8),
    Fail,
}

struct Ins {
    code: u16,
    k: u32,
    jt: T,
    jf: T,
}

fn s(code: u16, k: u32) -> Ins {
    Ins {
        code,
        k,
        jt: T::Next,
        jf: T::Next,
    }
}

fn j(code: u16, k: u32, jt: T, jf: T) -> Ins {
    Ins { code, k, jt, jf }
}

/// The instructions testing one condition; falling off the end means it held.
fn condition(a: &LinuxSeccompArg) -> Result<Vec<Ins>, String> {
    let i = a.index();
    if i > 5 {
        return Err(format!("argument index {i} is out of range 0-5"));
    }
    let v = a.value();
    let (vhi, vlo) = ((v >> 32) as u32, v as u32);
    use LinuxSeccompOperator::*;
    Ok(match a.op() {
        ScmpCmpEq => vec![
            s(LD_W_ABS, off_hi(i)),
            j(JEQ_K, vhi, T::Next, T::Fail),
            s(LD_W_ABS, off_lo(i)),
            j(JEQ_K, vlo, T::Next, T::Fail),
        ],
        ScmpCmpNe => vec![
            s(LD_W_ABS, off_hi(i)),
            j(JEQ_K, vhi, T::Next, T::Skip(2)),
            s(LD_W_ABS, off_lo(i)),
            j(JEQ_K, vlo, T::Fail, T::Next),
        ],
        ScmpCmpMaskedEq => {
            let want = a.value_two().unwrap_or(0);
            vec![
                s(LD_W_ABS, off_hi(i)),
                s(ALU_AND_K, vhi),
                j(JEQ_K, (want >> 32) as u32, T::Next, T::Fail),
                s(LD_W_ABS, off_lo(i)),
                s(ALU_AND_K, vlo),
                j(JEQ_K, want as u32, T::Next, T::Fail),
            ]
        }
        // a > v: hi > vhi, or hi == vhi and lo > vlo (>= for GE).
        op @ (ScmpCmpGt | ScmpCmpGe) => vec![
            s(LD_W_ABS, off_hi(i)),
            j(JGT_K, vhi, T::Skip(3), T::Next),
            j(JEQ_K, vhi, T::Next, T::Fail),
            s(LD_W_ABS, off_lo(i)),
            j(
                if op == ScmpCmpGt { JGT_K } else { JGE_K },
                vlo,
                T::Next,
                T::Fail,
            ),
        ],
        // a < v: hi < vhi, or hi == vhi and lo < vlo (<= for LE).
        op @ (ScmpCmpLt | ScmpCmpLe) => vec![
            s(LD_W_ABS, off_hi(i)),
            j(JGE_K, vhi, T::Next, T::Skip(3)),
            j(JGT_K, vhi, T::Fail, T::Next),
            s(LD_W_ABS, off_lo(i)),
            j(
                if op == ScmpCmpLt { JGE_K } else { JGT_K },
                vlo,
                T::Fail,
                T::Next,
            ),
        ],
    })
}

fn action(a: LinuxSeccompAction, errno: Option<u32>) -> Result<u32, String> {
    match a {
        LinuxSeccompAction::ScmpActNotify => Err(
            "SCMP_ACT_NOTIFY needs a seccomp agent (listenerPath), which warren does not support; use SCMP_ACT_ERRNO".into(),
        ),
        other => Ok(other.as_u32(errno.map(|e| e & 0xffff))),
    }
}

/// Compile a profile. `lookup` gives a syscall's x86_64 number by name.
pub fn compile(
    profile: &LinuxSeccomp,
    lookup: impl Fn(&str) -> Option<u32>,
) -> Result<Vec<SockFilter>, String> {
    let default = action(profile.default_action(), profile.default_errno_ret())?;
    let mut p = vec![
        SockFilter {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: OFF_ARCH,
        },
        SockFilter {
            code: JEQ_K,
            jt: 1,
            jf: 0,
            k: crate::isolation::seccomp::AUDIT_ARCH_X86_64,
        },
        SockFilter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: default,
        },
        SockFilter {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: OFF_NR,
        },
        SockFilter {
            code: JGE_K,
            jt: 0,
            jf: 1,
            k: crate::isolation::seccomp::X32_SYSCALL_BIT,
        },
        SockFilter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: default,
        },
    ];
    for (n, rule) in profile.syscalls().iter().flatten().enumerate() {
        let act = action(rule.action(), rule.errno_ret())
            .map_err(|e| format!("linux.seccomp.syscalls[{n}]: {e}"))?;
        if act == default && rule.args().as_ref().is_none_or(|a| a.is_empty()) {
            continue; // same as no rule
        }
        let mut conds = Vec::new();
        for a in rule.args().iter().flatten() {
            conds.extend(condition(a).map_err(|e| format!("linux.seccomp.syscalls[{n}]: {e}"))?);
        }
        for name in rule.names() {
            let Some(nr) = lookup(name) else { continue };
            // The block after the jeq: conditions, reload nr for the next rule, ret.
            // A failed condition jumps to the reload, which also ends the block.
            let mut block: Vec<Ins> = Vec::new();
            block.extend(conds.iter().map(|c| Ins {
                code: c.code,
                k: c.k,
                jt: c.jt,
                jf: c.jf,
            }));
            block.push(s(RET_K, act));
            // `Fail` must land on the reload after the ret, so add the reload as the
            // block's last instruction and make ret skip nothing (it returns).
            block.push(s(LD_W_ABS, OFF_NR));
            let resolved = resolve_with_reload(block);
            if resolved.len() > 250 {
                return Err(format!(
                    "linux.seccomp.syscalls[{n}]: too many argument conditions"
                ));
            }
            p.push(SockFilter {
                code: JEQ_K,
                jt: 0,
                jf: resolved.len() as u8,
                k: nr,
            });
            p.extend(resolved);
        }
    }
    p.push(SockFilter {
        code: RET_K,
        jt: 0,
        jf: 0,
        k: default,
    });
    if p.len() > 4096 {
        return Err(format!(
            "linux.seccomp: the profile compiles to {} instructions, more than the kernel's 4096",
            p.len()
        ));
    }
    Ok(p)
}

/// Like [`resolve`], with `Fail` landing on the block's last instruction (the reload
/// of the syscall number, since conditions overwrote the accumulator).
fn resolve_with_reload(block: Vec<Ins>) -> Vec<SockFilter> {
    let len = block.len();
    block
        .iter()
        .enumerate()
        .map(|(at, i)| {
            let off = |t: T| -> u8 {
                match t {
                    T::Next => 0,
                    T::Skip(n) => n,
                    T::Fail => (len - at - 2) as u8,
                }
            };
            SockFilter {
                code: i.code,
                jt: off(i.jt),
                jf: off(i.jf),
                k: i.k,
            }
        })
        .collect()
}

/// The x86_64 number of a syscall name.
pub fn number(name: &str) -> Option<u32> {
    super::syscalls::X86_64
        .binary_search_by(|(n, _)| n.cmp(&name))
        .ok()
        .map(|i| super::syscalls::X86_64[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic BPF interpreter for what `compile` emits.
    fn run(prog: &[SockFilter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut pc = 0;
        let mut a = 0u32;
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => {
                    a = match i.k {
                        OFF_NR => nr,
                        OFF_ARCH => arch,
                        k => {
                            let idx = ((k - 16) / 8) as usize;
                            if (k - 16) % 8 == 0 {
                                args[idx] as u32
                            } else {
                                (args[idx] >> 32) as u32
                            }
                        }
                    }
                }
                ALU_AND_K => a &= i.k,
                JEQ_K | JGT_K | JGE_K => {
                    let t = match i.code {
                        JEQ_K => a == i.k,
                        JGT_K => a > i.k,
                        _ => a >= i.k,
                    };
                    pc += if t { i.jt } else { i.jf } as usize;
                }
                RET_K => return i.k,
                c => panic!("opcode {c:#x}"),
            }
        }
    }

    fn profile(json: &str) -> LinuxSeccomp {
        serde_json::from_str(json).unwrap()
    }

    const X86: u32 = crate::isolation::seccomp::AUDIT_ARCH_X86_64;
    const ALLOW: u32 = 0x7fff_0000;
    const EPERM: u32 = 0x0005_0001;

    #[test]
    fn allowlist_with_conditions_behaves_like_libseccomp() {
        let p = profile(
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
                {"names":["read","write","no_such_call"],"action":"SCMP_ACT_ALLOW"},
                {"names":["personality"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":8,"op":"SCMP_CMP_EQ"}]},
                {"names":["socket"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":40,"op":"SCMP_CMP_NE"}]},
                {"names":["clone"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":2114060288,"valueTwo":0,"op":"SCMP_CMP_MASKED_EQ"}]},
                {"names":["mkdir"],"action":"SCMP_ACT_ERRNO","errnoRet":38},
                {"names":["lseek"],"action":"SCMP_ACT_ALLOW","args":[{"index":1,"value":4294967296,"op":"SCMP_CMP_GT"}]},
                {"names":["dup"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":10,"op":"SCMP_CMP_LE"}]}
            ]}"#,
        );
        let prog = compile(&p, number).unwrap();
        let nr = |n| number(n).unwrap();
        let z = [0u64; 6];
        assert_eq!(run(&prog, X86, nr("read"), z), ALLOW);
        assert_eq!(run(&prog, X86, nr("write"), z), ALLOW);
        assert_eq!(run(&prog, X86, nr("open"), z), EPERM);
        assert_eq!(
            run(&prog, X86, nr("personality"), [8, 0, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            run(&prog, X86, nr("personality"), [9, 0, 0, 0, 0, 0]),
            EPERM
        );
        assert_eq!(
            run(&prog, X86, nr("personality"), [8 | 1 << 32, 0, 0, 0, 0, 0]),
            EPERM
        );
        assert_eq!(run(&prog, X86, nr("socket"), [2, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&prog, X86, nr("socket"), [40, 0, 0, 0, 0, 0]), EPERM);
        let newns = 0x1000_0000u64;
        assert_eq!(run(&prog, X86, nr("clone"), [0x11, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&prog, X86, nr("clone"), [newns, 0, 0, 0, 0, 0]), EPERM);
        assert_eq!(run(&prog, X86, nr("mkdir"), z), 0x0005_0000 | 38);
        assert_eq!(
            run(&prog, X86, nr("lseek"), [0, 1 << 32, 0, 0, 0, 0]),
            EPERM
        );
        assert_eq!(
            run(&prog, X86, nr("lseek"), [0, (1 << 32) + 1, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            run(&prog, X86, nr("lseek"), [0, 2 << 32, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(run(&prog, X86, nr("dup"), [10, 0, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&prog, X86, nr("dup"), [11, 0, 0, 0, 0, 0]), EPERM);
        assert_eq!(run(&prog, X86, nr("dup"), [1 << 32, 0, 0, 0, 0, 0]), EPERM);
        // Another architecture and the x32 ABI get the default action.
        assert_eq!(run(&prog, 0x4000_0003, 3, z), EPERM);
        assert_eq!(run(&prog, X86, 0x4000_0000 | nr("read"), z), EPERM);
    }

    #[test]
    fn denylist_and_refusals() {
        let p = profile(
            r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[
                {"names":["mount"],"action":"SCMP_ACT_ERRNO","errnoRet":1},
                {"names":["reboot"],"action":"SCMP_ACT_KILL_PROCESS"}]}"#,
        );
        let prog = compile(&p, number).unwrap();
        let z = [0u64; 6];
        assert_eq!(run(&prog, X86, number("mount").unwrap(), z), EPERM);
        assert_eq!(run(&prog, X86, number("reboot").unwrap(), z), 0x8000_0000);
        assert_eq!(run(&prog, X86, number("read").unwrap(), z), ALLOW);
        let notify = profile(
            r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mount"],"action":"SCMP_ACT_NOTIFY"}]}"#,
        );
        let e = compile(&notify, number).unwrap_err();
        assert!(e.contains("syscalls[0]") && e.contains("NOTIFY"), "{e}");
        assert!(super::super::syscalls::X86_64
            .windows(2)
            .all(|w| w[0].0 < w[1].0));
        assert_eq!(number("read"), Some(0));
        assert_eq!(number("openat2"), Some(437));
    }
}
