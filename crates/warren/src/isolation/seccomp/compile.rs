//! The one seccomp compiler: a [`Profile`] to a classic BPF program (pure).
//!
//! Shape, as libseccomp lays out a multi-architecture filter:
//!
//! ```text
//!   ld arch
//!   per audit arch listed:  jeq AUDIT_ARCH ? (ja its section) : next
//!   ret BAD_ARCH                              (an architecture not listed)
//!   x86_64 section:  ld nr
//!                    jge X32_SYSCALL_BIT ? (x32 listed: ja x32 section; else ret BAD_X32)
//!                    rules with x86_64 numbers ; ret DEFAULT
//!   x32 section:     rules with x32 numbers ; ret DEFAULT
//!   i386 section:    ld nr ; rules with i386 numbers ; ret DEFAULT
//!   (each section starts, for an arch in `enosys_above`, with jgt nr ? ret ENOSYS)
//!   rules:  per (rule, name the arch has): jeq nr ? block : past the block
//!     block: the argument conditions, each jumping to the block's last instruction
//!            (a reload of nr) when false; then ret ACTION; then ld nr
//! ```
//!
//! The sections are reached by `ja` (32-bit offsets); inside a section every jump goes
//! forward past one rule block at most, so the u8 offsets of conditional jumps never
//! overflow whatever the number of rules. 64-bit comparisons test the high word, then
//! the low one.

use warren_sys::harden::SockFilter;

use super::profile::{
    Action, Arch, Cond, Op, Profile, Width, AUDIT_ARCH_I386, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT,
};

pub(super) const LD_W_ABS: u16 = 0x20;
pub(super) const ALU_AND_K: u16 = 0x54;
pub(super) const JA: u16 = 0x05;
pub(super) const JEQ_K: u16 = 0x15;
pub(super) const JGT_K: u16 = 0x25;
pub(super) const JGE_K: u16 = 0x35;
pub(super) const RET_K: u16 = 0x06;

/// Offsets in `struct seccomp_data`.
pub(super) const OFF_NR: u32 = 0;
pub(super) const OFF_ARCH: u32 = 4;
/// The low and high words of args[i] (little endian).
pub(super) const fn off_lo(i: u8) -> u32 {
    16 + 8 * i as u32
}
pub(super) const fn off_hi(i: u8) -> u32 {
    20 + 8 * i as u32
}

/// What a call newer than the profile gets where `enosys_above` asks for it.
const ENOSYS: u16 = warren_sys::libc::ENOSYS as u16;

/// The kernel's BPF_MAXINSNS.
const MAX_INSNS: usize = 4096;

/// Why a profile does not compile.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CompileError {
    /// The rule for `name` (its first syscall) compares an argument past the sixth.
    #[error("the rule for {name:?}: argument index {index} is out of range 0-5")]
    ArgIndex { name: String, index: u8 },
    /// The conditions of the rule for `name` take more instructions than a classic BPF
    /// jump can skip.
    #[error("the rule for {name:?}: {conds} argument conditions are more than one rule can hold; split the rule")]
    TooManyConds { name: String, conds: usize },
    /// The program is longer than the kernel accepts.
    #[error("the profile compiles to {0} instructions, more than the kernel's {MAX_INSNS}; name fewer syscalls or merge rules")]
    TooLong(usize),
}

/// A jump target inside a rule block: fall through, skip forward, or fail the rule.
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

fn raw(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
    SockFilter { code, jt, jf, k }
}

/// The instructions testing one condition; falling off the end means it held.
fn condition(c: &Cond) -> Vec<Ins> {
    let i = c.index;
    let (vhi, vlo) = ((c.value >> 32) as u32, c.value as u32);
    if c.width == Width::Low32 {
        let mut v = vec![s(LD_W_ABS, off_lo(i))];
        v.extend(match c.op {
            Op::Eq => vec![j(JEQ_K, vlo, T::Next, T::Fail)],
            Op::Ne => vec![j(JEQ_K, vlo, T::Fail, T::Next)],
            Op::MaskedEq(m) => vec![s(ALU_AND_K, m as u32), j(JEQ_K, vlo, T::Next, T::Fail)],
            Op::Gt => vec![j(JGT_K, vlo, T::Next, T::Fail)],
            Op::Ge => vec![j(JGE_K, vlo, T::Next, T::Fail)],
            Op::Lt => vec![j(JGE_K, vlo, T::Fail, T::Next)],
            Op::Le => vec![j(JGT_K, vlo, T::Fail, T::Next)],
        });
        return v;
    }
    match c.op {
        Op::Eq => vec![
            s(LD_W_ABS, off_hi(i)),
            j(JEQ_K, vhi, T::Next, T::Fail),
            s(LD_W_ABS, off_lo(i)),
            j(JEQ_K, vlo, T::Next, T::Fail),
        ],
        Op::Ne => vec![
            s(LD_W_ABS, off_hi(i)),
            j(JEQ_K, vhi, T::Next, T::Skip(2)),
            s(LD_W_ABS, off_lo(i)),
            j(JEQ_K, vlo, T::Fail, T::Next),
        ],
        Op::MaskedEq(m) => vec![
            s(LD_W_ABS, off_hi(i)),
            s(ALU_AND_K, (m >> 32) as u32),
            j(JEQ_K, vhi, T::Next, T::Fail),
            s(LD_W_ABS, off_lo(i)),
            s(ALU_AND_K, m as u32),
            j(JEQ_K, vlo, T::Next, T::Fail),
        ],
        // a > v: hi > vhi, or hi == vhi and lo > vlo (>= for GE).
        op @ (Op::Gt | Op::Ge) => vec![
            s(LD_W_ABS, off_hi(i)),
            j(JGT_K, vhi, T::Skip(3), T::Next),
            j(JEQ_K, vhi, T::Next, T::Fail),
            s(LD_W_ABS, off_lo(i)),
            j(
                if op == Op::Gt { JGT_K } else { JGE_K },
                vlo,
                T::Next,
                T::Fail,
            ),
        ],
        // a < v: hi < vhi, or hi == vhi and lo < vlo (<= for LE).
        op @ (Op::Lt | Op::Le) => vec![
            s(LD_W_ABS, off_hi(i)),
            j(JGE_K, vhi, T::Next, T::Skip(3)),
            j(JGT_K, vhi, T::Fail, T::Next),
            s(LD_W_ABS, off_lo(i)),
            j(
                if op == Op::Lt { JGE_K } else { JGT_K },
                vlo,
                T::Fail,
                T::Next,
            ),
        ],
    }
}

/// The block run when a rule's syscall number matched: its conditions, `ret action`,
/// and (with conditions) the reload of nr that a failed condition lands on.
fn block(conds: &[Ins], action: Action) -> Vec<SockFilter> {
    let mut b: Vec<&Ins> = conds.iter().collect();
    let ret = s(RET_K, action.ret());
    let reload = s(LD_W_ABS, OFF_NR);
    b.push(&ret);
    if !conds.is_empty() {
        b.push(&reload);
    }
    let len = b.len();
    b.iter()
        .enumerate()
        .map(|(at, i)| {
            let off = |t: T| -> u8 {
                match t {
                    T::Next => 0,
                    T::Skip(n) => n,
                    // From `at` to the last instruction: len - 1 - (at + 1).
                    T::Fail => (len - at - 2) as u8,
                }
            };
            raw(i.code, i.k, off(i.jt), off(i.jf))
        })
        .collect()
}

/// The rules of `profile` for one architecture's numbers, ending in `ret default`.
/// The accumulator holds nr on entry.
fn rules_for(profile: &Profile, arch: Arch, conds: &[Vec<Ins>]) -> Vec<SockFilter> {
    let mut p = Vec::new();
    for (_, max) in profile.enosys_above.iter().filter(|(a, _)| *a == arch) {
        p.push(raw(JGT_K, *max, 0, 1));
        p.push(raw(RET_K, Action::Errno(ENOSYS).ret(), 0, 0));
    }
    for (rule, c) in profile.rules.iter().zip(conds) {
        let b = block(c, rule.action);
        for name in &rule.names {
            let Some(nr) = arch.number(name) else {
                continue;
            };
            p.push(raw(JEQ_K, nr, 0, b.len() as u8));
            p.extend_from_slice(&b);
        }
    }
    p.push(raw(RET_K, profile.default.ret(), 0, 0));
    p
}

/// Compile a profile. Names an architecture does not have are skipped there (as
/// libseccomp and runc skip them).
pub fn compile(profile: &Profile) -> Result<Vec<SockFilter>, CompileError> {
    let mut conds = Vec::new();
    for rule in &profile.rules {
        let name = || rule.names.first().cloned().unwrap_or_default();
        let mut c = Vec::new();
        for cond in &rule.conds {
            if cond.index > 5 {
                return Err(CompileError::ArgIndex {
                    name: name(),
                    index: cond.index,
                });
            }
            c.extend(condition(cond));
        }
        // Conditions, ret and reload must fit the jeq's u8 skip.
        if c.len() + 2 > usize::from(u8::MAX) {
            return Err(CompileError::TooManyConds {
                name: name(),
                conds: rule.conds.len(),
            });
        }
        conds.push(c);
    }
    let has = |a: Arch| profile.arches.contains(&a);
    let mut sections: Vec<(u32, Vec<SockFilter>)> = Vec::new();
    if has(Arch::X86_64) || has(Arch::X32) {
        let native = if has(Arch::X86_64) {
            rules_for(profile, Arch::X86_64, &conds)
        } else {
            vec![raw(RET_K, profile.bad_arch.ret(), 0, 0)]
        };
        let mut sec = vec![
            raw(LD_W_ABS, OFF_NR, 0, 0),
            raw(JGE_K, X32_SYSCALL_BIT, 0, 1),
        ];
        if has(Arch::X32) {
            sec.push(raw(JA, native.len() as u32, 0, 0));
            sec.extend(native);
            sec.extend(rules_for(profile, Arch::X32, &conds));
        } else {
            sec.push(raw(RET_K, profile.bad_x32.ret(), 0, 0));
            sec.extend(native);
        }
        sections.push((AUDIT_ARCH_X86_64, sec));
    }
    if has(Arch::X86) {
        let mut sec = vec![raw(LD_W_ABS, OFF_NR, 0, 0)];
        sec.extend(rules_for(profile, Arch::X86, &conds));
        sections.push((AUDIT_ARCH_I386, sec));
    }
    let head = 2 + 2 * sections.len();
    let mut p = vec![raw(LD_W_ABS, OFF_ARCH, 0, 0)];
    let mut start = head;
    for (audit, sec) in &sections {
        p.push(raw(JEQ_K, *audit, 0, 1));
        // The ja's successor is at p.len() + 1.
        p.push(raw(JA, (start - (p.len() + 1)) as u32, 0, 0));
        start += sec.len();
    }
    p.push(raw(RET_K, profile.bad_arch.ret(), 0, 0));
    for (_, sec) in sections {
        p.extend(sec);
    }
    if p.len() > MAX_INSNS {
        return Err(CompileError::TooLong(p.len()));
    }
    Ok(p)
}
