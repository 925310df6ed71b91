//! Seccomp, once for zones and the OCI runtime: the neutral [`Profile`] (`profile`),
//! the one compiler to classic BPF (`compile`), the syscall tables of x86_64, i386 and
//! x32 (`syscalls`, generated into `tables`), the zones' policy as a profile (`zone`)
//! and, in tests, the one BPF interpreter (`interp`). `oci::seccomp` converts an OCI
//! `linux.seccomp` into a [`Profile`]. docs/isolation.md ("seccomp") explains the
//! layout and why warren compiles its own filters rather than using libseccomp.

mod compile;
#[cfg(test)]
pub(crate) mod interp;
pub mod profile;
pub mod syscalls;
mod tables;
pub mod zone;

pub use compile::{compile, CompileError};
pub use profile::{Action, Arch, Cond, Op, Profile, Rule, Width};

/// The x86_64 number of a syscall name (what `seccomp.deny` accepts).
pub fn number(name: &str) -> Option<u32> {
    syscalls::number(Arch::X86_64, name)
}

#[cfg(test)]
mod tests;
