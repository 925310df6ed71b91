//! The one classic BPF interpreter of the tests (cfg(test)): runs a compiled filter
//! on a `struct seccomp_data`, so tests check what a program *does* rather than its
//! bytes. It panics on an opcode [`super::compile`] never emits, on a load outside
//! `seccomp_data` and on a jump out of the program, as the kernel's checker would
//! refuse them.

use warren_sys::harden::SockFilter;

use super::compile::{ALU_AND_K, JA, JEQ_K, JGE_K, JGT_K, LD_W_ABS, OFF_ARCH, OFF_NR, RET_K};
use super::profile::{Arch, AUDIT_ARCH_I386, AUDIT_ARCH_X86_64, X32_SYSCALL_BIT};

/// One syscall as the filter sees it.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub arch: u32,
    pub nr: u32,
    pub args: [u64; 6],
}

impl Call {
    /// A call of `name` from `arch` (numbers from the one table), arguments zero.
    pub fn named(arch: Arch, name: &str) -> Call {
        let nr = arch
            .number(name)
            .unwrap_or_else(|| panic!("{arch:?} has no syscall {name:?}"));
        Call {
            arch: arch.audit(),
            nr,
            args: [0; 6],
        }
    }

    /// A native x86_64 call by number.
    pub fn x86_64(nr: u32) -> Call {
        Call {
            arch: AUDIT_ARCH_X86_64,
            nr,
            args: [0; 6],
        }
    }

    /// An i386 call (`int 0x80`) by number.
    pub fn i386(nr: u32) -> Call {
        Call {
            arch: AUDIT_ARCH_I386,
            nr,
            args: [0; 6],
        }
    }

    /// An x32 call by its number without the x32 bit.
    pub fn x32(nr: u32) -> Call {
        Call::x86_64(X32_SYSCALL_BIT | nr)
    }

    /// The same call with argument `i` set.
    pub fn arg(mut self, i: usize, v: u64) -> Call {
        self.args[i] = v;
        self
    }
}

/// The filter's answer (a `SECCOMP_RET_*` value) for `call`.
pub fn run(prog: &[SockFilter], call: Call) -> u32 {
    let mut pc = 0usize;
    let mut a: u32 = 0;
    loop {
        let i = *prog
            .get(pc)
            .unwrap_or_else(|| panic!("jump out of the program to {pc} (length {})", prog.len()));
        pc += 1;
        match i.code {
            LD_W_ABS => {
                a = match i.k {
                    OFF_NR => call.nr,
                    OFF_ARCH => call.arch,
                    k @ 16..=63 if k % 4 == 0 => {
                        let arg = call.args[((k - 16) / 8) as usize];
                        if (k - 16) % 8 == 0 {
                            arg as u32
                        } else {
                            (arg >> 32) as u32
                        }
                    }
                    k => panic!("load of offset {k}"),
                }
            }
            ALU_AND_K => a &= i.k,
            JA => pc += i.k as usize,
            JEQ_K | JGT_K | JGE_K => {
                let taken = match i.code {
                    JEQ_K => a == i.k,
                    JGT_K => a > i.k,
                    _ => a >= i.k,
                };
                pc += usize::from(if taken { i.jt } else { i.jf });
            }
            RET_K => return i.k,
            other => panic!("opcode {other:#x}"),
        }
    }
}
