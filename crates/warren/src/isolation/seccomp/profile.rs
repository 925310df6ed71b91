//! The neutral seccomp profile both front ends build (the zones' policy in `zone`,
//! OCI `linux.seccomp` in `oci::seccomp`) and [`super::compile`] turns into BPF:
//! a default action, the architectures whose calls the rules apply to (each with its
//! own syscall numbers), what a call from any other architecture gets, and rules kept
//! in order, the first whose names and argument conditions match deciding.

/// An architecture (ABI) a syscall can come from on an x86_64 host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Arch {
    /// The native ABI (`AUDIT_ARCH_X86_64`, numbers below `X32_SYSCALL_BIT`).
    X86_64,
    /// i386 (`int 0x80`, `AUDIT_ARCH_I386`).
    X86,
    /// x32: `AUDIT_ARCH_X86_64` with numbers carrying `X32_SYSCALL_BIT`.
    X32,
}

/// `AUDIT_ARCH_X86_64`: EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE.
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// `AUDIT_ARCH_I386`: EM_386 | __AUDIT_ARCH_LE.
pub const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// Syscall numbers at or above this, under `AUDIT_ARCH_X86_64`, are the x32 ABI.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

impl Arch {
    /// The `arch` field of `struct seccomp_data` for a call of this ABI.
    pub fn audit(self) -> u32 {
        match self {
            Arch::X86_64 | Arch::X32 => AUDIT_ARCH_X86_64,
            Arch::X86 => AUDIT_ARCH_I386,
        }
    }

    /// The number of a syscall in this ABI (x32's with `X32_SYSCALL_BIT`).
    pub fn number(self, name: &str) -> Option<u32> {
        super::syscalls::number(self, name)
    }
}

/// What the filter answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Allow,
    /// Fail the call with this errno.
    Errno(u16),
    /// SIGSYS to the thread.
    Trap,
    /// Hand the call to a ptrace tracer (the data is given to it); ENOSYS without one.
    Trace(u16),
    /// Allow, and log.
    Log,
    KillThread,
    KillProcess,
}

impl Action {
    /// The `SECCOMP_RET_*` value.
    pub fn ret(self) -> u32 {
        match self {
            Action::KillProcess => 0x8000_0000,
            Action::KillThread => 0x0000_0000,
            Action::Trap => 0x0003_0000,
            Action::Errno(e) => 0x0005_0000 | u32::from(e),
            Action::Trace(d) => 0x7ff0_0000 | u32::from(d),
            Action::Log => 0x7ffc_0000,
            Action::Allow => 0x7fff_0000,
        }
    }
}

/// How one argument is compared with a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `arg & mask == value`.
    MaskedEq(u64),
}

/// How much of the argument is compared: the low 32 bits (libseccomp's `SCMP_CMP32`,
/// for an `int` argument whose upper half the kernel ignores) or all 64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    Low32,
    Full64,
}

/// One argument condition of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    /// Argument 0 to 5.
    pub index: u8,
    pub op: Op,
    pub value: u64,
    pub width: Width,
}

/// Calls of `names` whose arguments meet every condition get `action`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub names: Vec<String>,
    pub action: Action,
    pub conds: Vec<Cond>,
}

impl Rule {
    /// A rule with no argument condition.
    pub fn always(names: &[&str], action: Action) -> Rule {
        Rule {
            names: names.iter().map(|n| n.to_string()).collect(),
            action,
            conds: Vec::new(),
        }
    }
}

/// A whole filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// What a call of a listed architecture that no rule matches gets.
    pub default: Action,
    /// The architectures the rules apply to, each with its own numbers. A name that an
    /// architecture does not have is skipped there.
    pub arches: Vec<Arch>,
    /// What a call of an unlisted architecture other than x32 gets (i386 when only
    /// x86_64 is listed).
    pub bad_arch: Action,
    /// What an x32 call gets when x32 is not listed.
    pub bad_x32: Action,
    /// Tried in order; the first match decides.
    pub rules: Vec<Rule>,
    /// (arch, nr): a call of that listed architecture numbered above nr gets ENOSYS
    /// before any rule (runc's `patchbpf` stub, nr being the highest syscall the
    /// profile names there: a syscall newer than the profile fails as "not
    /// implemented", so the C library falls back, instead of getting a restrictive
    /// default action).
    pub enosys_above: Vec<(Arch, u32)>,
}
