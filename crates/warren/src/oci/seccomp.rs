//! An OCI `linux.seccomp` profile converted to the neutral
//! [`crate::isolation::seccomp::Profile`] and compiled by the one compiler (pure).
//!
//! As runc (which uses libseccomp):
//! - the rules apply to the native x86_64 ABI and to every architecture the profile
//!   lists that this host can run (SCMP_ARCH_X86 and SCMP_ARCH_X32, each with its own
//!   syscall numbers); listed architectures an x86_64 kernel never reports (ARM, …)
//!   need no code. A call from any other architecture (i386 or x32 when not listed)
//!   gets libseccomp's bad-arch action, SCMP_ACT_KILL_THREAD;
//! - rules keep the profile's order and the first whose conditions all hold decides;
//!   a rule with no condition whose action is the default action is dropped (runc
//!   skips them, libseccomp refuses them);
//! - names an architecture does not have (newer or foreign syscalls) are skipped;
//! - SCMP_ACT_ERRNO and SCMP_ACT_TRACE without `errnoRet` return EPERM;
//! - runc's ENOSYS stub (`libcontainer/seccomp/patchbpf`): unless the default action
//!   is ALLOW, LOG or TRACE, a call of a *listed* architecture numbered above every
//!   syscall the profile names there gets ENOSYS, so a C library falls back from a
//!   syscall newer than the profile instead of failing with the default errno.
//!
//! Refused, each with what to change: SCMP_ACT_NOTIFY and `listenerPath` (warren has
//! no seccomp agent), and the filter flags LOG, SPEC_ALLOW and WAIT_KILLABLE_RECV
//! (warren loads filters without flags; TSYNC is accepted, since the filter is loaded
//! while the container's process is single-threaded, which the spawn checks).

use oci_spec::runtime::{
    Arch as OciArch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompFilterFlag,
    LinuxSeccompOperator,
};
use warren_sys::harden::SockFilter;

use crate::isolation::seccomp::{self, Action, Arch, CompileError, Cond, Op, Profile, Rule, Width};

/// Why a `linux.seccomp` profile cannot be loaded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProfileError {
    /// `{at}`: SCMP_ACT_NOTIFY needs a seccomp agent
    #[error("{at}: SCMP_ACT_NOTIFY needs a seccomp agent (listenerPath), which warren does not support; use SCMP_ACT_ERRNO")]
    Notify { at: String },
    /// listenerPath is set
    #[error("listenerPath: warren has no seccomp agent to hand the listener to; remove listenerPath and SCMP_ACT_NOTIFY")]
    Listener,
    /// an unsupported filter flag
    #[error(
        "flags: {0} is not supported (warren loads filters with no flag but TSYNC); remove it"
    )]
    Flag(String),
    /// the profile does not compile
    #[error(transparent)]
    Compile(#[from] CompileError),
}

fn action(
    at: impl Fn() -> String,
    a: LinuxSeccompAction,
    errno: Option<u32>,
) -> Result<Action, ProfileError> {
    // libseccomp truncates the errno to 16 bits; EPERM when none is given.
    let data = errno.map_or(libc_eperm(), |e| (e & 0xffff) as u16);
    use LinuxSeccompAction::*;
    Ok(match a {
        ScmpActAllow => Action::Allow,
        ScmpActErrno => Action::Errno(data),
        ScmpActTrace => Action::Trace(data),
        ScmpActTrap => Action::Trap,
        ScmpActLog => Action::Log,
        ScmpActKill | ScmpActKillThread => Action::KillThread,
        ScmpActKillProcess => Action::KillProcess,
        ScmpActNotify => return Err(ProfileError::Notify { at: at() }),
    })
}

const fn libc_eperm() -> u16 {
    warren_sys::libc::EPERM as u16
}

fn condition(a: &LinuxSeccompArg) -> Cond {
    use LinuxSeccompOperator::*;
    let (op, value) = match a.op() {
        ScmpCmpEq => (Op::Eq, a.value()),
        ScmpCmpNe => (Op::Ne, a.value()),
        ScmpCmpLt => (Op::Lt, a.value()),
        ScmpCmpLe => (Op::Le, a.value()),
        ScmpCmpGt => (Op::Gt, a.value()),
        ScmpCmpGe => (Op::Ge, a.value()),
        // OCI (as libseccomp): `value` is the mask, `valueTwo` the datum.
        ScmpCmpMaskedEq => (Op::MaskedEq(a.value()), a.value_two().unwrap_or(0)),
    };
    Cond {
        // Out of range indices (above 5) are refused by the compiler; anything past
        // u8 is clamped there to a value it refuses too.
        index: u8::try_from(a.index()).unwrap_or(u8::MAX),
        op,
        value,
        width: Width::Full64,
    }
}

/// The neutral profile of an OCI one.
pub fn profile(p: &LinuxSeccomp) -> Result<Profile, ProfileError> {
    if p.listener_path().is_some() {
        return Err(ProfileError::Listener);
    }
    for f in p.flags().iter().flatten() {
        if *f != LinuxSeccompFilterFlag::SeccompFilterFlagTsync {
            return Err(ProfileError::Flag(f.to_string()));
        }
    }
    let default = action(
        || "defaultAction".into(),
        p.default_action(),
        p.default_errno_ret(),
    )?;
    // The architectures the profile lists that this host can run.
    let mut listed = Vec::new();
    for a in p.architectures().iter().flatten() {
        let ours = match a {
            OciArch::ScmpArchNative | OciArch::ScmpArchX86_64 => Arch::X86_64,
            OciArch::ScmpArchX86 => Arch::X86,
            OciArch::ScmpArchX32 => Arch::X32,
            _ => continue,
        };
        if !listed.contains(&ours) {
            listed.push(ours);
        }
    }
    // libseccomp always includes the native architecture.
    let mut arches = vec![Arch::X86_64];
    arches.extend(listed.iter().filter(|a| **a != Arch::X86_64));
    // runc's ENOSYS stub: for the listed architectures only, not when the default lets
    // calls through; the highest number is over every rule, dropped ones included.
    let permissive = matches!(default, Action::Allow | Action::Log | Action::Trace(_));
    let names: Vec<&String> = p
        .syscalls()
        .iter()
        .flatten()
        .flat_map(|r| r.names())
        .collect();
    let enosys_above = match permissive {
        true => Vec::new(),
        false => listed
            .iter()
            .filter_map(|a| Some((*a, names.iter().filter_map(|n| a.number(n)).max()?)))
            .collect(),
    };
    let mut rules = Vec::new();
    for (n, r) in p.syscalls().iter().flatten().enumerate() {
        let act = action(|| format!("syscalls[{n}]"), r.action(), r.errno_ret())?;
        let conds: Vec<Cond> = r.args().iter().flatten().map(condition).collect();
        if act == default && conds.is_empty() {
            continue;
        }
        rules.push(Rule {
            names: r.names().clone(),
            action: act,
            conds,
        });
    }
    Ok(Profile {
        default,
        arches,
        bad_arch: Action::KillThread,
        bad_x32: Action::KillThread,
        rules,
        enosys_above,
    })
}

/// The BPF program of an OCI profile.
pub fn filter(p: &LinuxSeccomp) -> Result<Vec<SockFilter>, ProfileError> {
    Ok(seccomp::compile(&profile(p)?)?)
}

#[cfg(test)]
mod tests;
