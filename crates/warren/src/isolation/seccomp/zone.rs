//! The zones' seccomp policy, as data: a [`Profile`] built from [`DEFAULT_DENY`] and the
//! zone's `seccomp.deny`, compiled by the one compiler (docs/isolation.md says why each
//! call is denied).
//!
//! In order (the first match decides; default ALLOW):
//! 1. `DEFAULT_DENY` + `seccomp.deny` → EPERM (deduplicated);
//! 2. `clone3` → ENOSYS, so libc falls back to `clone`, whose flags a filter can read
//!    (clone3 passes them in memory);
//! 3. `unshare` and `clone` are allowed when the low word of their flags has no
//!    namespace bit, else EPERM;
//! 4. `personality` is allowed for the values of [`PERSONALITIES`] only, else EPERM.
//!
//! Only x86_64 is listed: an i386 call (`int 0x80`) kills the process and an x32 call
//! fails with EPERM, as before the compilers were merged (the escape suite checks it).

use warren_sys::libc;

use super::profile::{Action, Arch, Cond, Op, Profile, Rule, Width};

/// Namespace flags of unshare(2) (CLONE_NEWTIME is 0x80, only valid there).
pub const UNSHARE_NS_FLAGS: u32 = libc::CLONE_NEWNS as u32
    | libc::CLONE_NEWCGROUP as u32
    | libc::CLONE_NEWUTS as u32
    | libc::CLONE_NEWIPC as u32
    | libc::CLONE_NEWUSER as u32
    | libc::CLONE_NEWPID as u32
    | libc::CLONE_NEWNET as u32
    | 0x80;
/// Namespace flags of clone(2) (its low byte is the exit signal, not CLONE_NEWTIME).
pub const CLONE_NS_FLAGS: u32 = UNSHARE_NS_FLAGS & !0xff;

/// personality(2) values allowed (as Docker): PER_LINUX, PER_LINUX32, UNAME26,
/// PER_LINUX32|UNAME26 and the 0xffffffff query.
pub const PERSONALITIES: [u32; 5] = [0, 8, 0x20000, 0x20008, 0xffff_ffff];

/// Syscalls denied with EPERM in every zone (docs/isolation.md says why).
pub const DEFAULT_DENY: &[&str] = &[
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "open_tree",
    "mount_setattr",
    "setns",
    "userfaultfd",
    "lookup_dcookie",
    "iopl",
    "ioperm",
    "quotactl",
    "nfsservctl",
    "uselib",
    "syslog",
];

const EPERM: Action = Action::Errno(libc::EPERM as u16);

/// A condition on the low word of args[0] (the kernel reads these flags and values as
/// 32-bit for personality; for clone and unshare the namespace bits are all low).
fn arg0(op: Op, value: u32) -> Cond {
    Cond {
        index: 0,
        op,
        value: u64::from(value),
        width: Width::Low32,
    }
}

/// The zone profile: the default rules plus `extra` denied names (validated by the
/// `seccomp.deny` key against the x86_64 table; a name it lacks would be skipped).
pub fn profile(extra: &[String]) -> Profile {
    let mut deny: Vec<&str> = DEFAULT_DENY
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
        .collect();
    deny.sort_unstable();
    deny.dedup();
    let mut rules = vec![
        Rule::always(&deny, EPERM),
        Rule::always(&["clone3"], Action::Errno(libc::ENOSYS as u16)),
    ];
    for (name, mask) in [("unshare", UNSHARE_NS_FLAGS), ("clone", CLONE_NS_FLAGS)] {
        rules.push(Rule {
            names: vec![name.into()],
            action: Action::Allow,
            conds: vec![arg0(Op::MaskedEq(u64::from(mask)), 0)],
        });
        rules.push(Rule::always(&[name], EPERM));
    }
    for v in PERSONALITIES {
        rules.push(Rule {
            names: vec!["personality".into()],
            action: Action::Allow,
            conds: vec![arg0(Op::Eq, v)],
        });
    }
    rules.push(Rule::always(&["personality"], EPERM));
    Profile {
        default: Action::Allow,
        arches: vec![Arch::X86_64],
        bad_arch: Action::KillProcess,
        bad_x32: EPERM,
        rules,
        // Every name is known: the table's calls are the kernel's.
        enosys_above: Vec::new(),
    }
}

/// The zone's filter: [`profile`] compiled.
pub fn filter(extra: &[String]) -> Vec<warren_sys::harden::SockFilter> {
    // Every condition reads argument 0 and each name adds two instructions, so even
    // all of the x86_64 table denied stays far below the kernel's limit (the test
    // `every_table_name_can_be_denied` compiles exactly that).
    super::compile(&profile(extra)).expect("the zone profile always compiles")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::seccomp::interp::{run, Call};
    use crate::isolation::seccomp::{number, syscalls};

    const ALLOW: u32 = 0x7fff_0000;
    const KILL_PROCESS: u32 = 0x8000_0000;
    const EPERM_RET: u32 = 0x0005_0000 | libc::EPERM as u32;

    fn call(name: &str) -> Call {
        Call::named(Arch::X86_64, name)
    }

    #[test]
    fn default_filter_denies_the_listed_calls_and_allows_the_rest() {
        let p = filter(&[]);
        for name in DEFAULT_DENY {
            assert_eq!(run(&p, call(name)), EPERM_RET, "{name}");
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_execve,
            libc::SYS_openat,
        ] {
            assert_eq!(run(&p, Call::x86_64(nr as u32)), ALLOW, "{nr}");
        }
        // Another architecture (i386 through int 0x80) is killed; x32 numbers fail.
        assert_eq!(run(&p, Call::i386(1)), KILL_PROCESS);
        assert_eq!(run(&p, Call::i386(20)), KILL_PROCESS); // i386 getpid
        assert_eq!(run(&p, Call::x32(1)), EPERM_RET);
        assert_eq!(run(&p, Call::named(Arch::X32, "getpid")), EPERM_RET);
        // clone3 says ENOSYS so libc falls back to clone.
        assert_eq!(
            run(&p, Call::x86_64(libc::SYS_clone3 as u32)),
            0x0005_0000 | libc::ENOSYS as u32
        );
    }

    #[test]
    fn namespace_flags_and_personality_are_checked() {
        let p = filter(&[]);
        let unshare = |f: u64| run(&p, call("unshare").arg(0, f));
        let clone = |f: u64| run(&p, call("clone").arg(0, f));
        assert_eq!(unshare(libc::CLONE_NEWUSER as u64), EPERM_RET);
        assert_eq!(unshare(libc::CLONE_NEWNS as u64), EPERM_RET);
        assert_eq!(unshare(0x80), EPERM_RET); // CLONE_NEWTIME
        assert_eq!(unshare(libc::CLONE_FILES as u64), ALLOW);
        // Only the low word is read, as before the merge (the kernel's flags fit it).
        assert_eq!(unshare(1 << 32), ALLOW);
        // fork() is clone(SIGCHLD | CLONE_CHILD_*): allowed; a new user ns is not.
        let fork = (libc::SIGCHLD | libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID) as u64;
        assert_eq!(clone(fork), ALLOW);
        assert_eq!(clone(fork | libc::CLONE_NEWUSER as u64), EPERM_RET);
        // clone's low byte is the exit signal: 0x80 there is not CLONE_NEWTIME.
        assert_eq!(clone(0x80), ALLOW);
        let pers = |v: u64| run(&p, call("personality").arg(0, v));
        for v in PERSONALITIES {
            assert_eq!(pers(u64::from(v)), ALLOW, "{v:#x}");
        }
        // ADDR_NO_RANDOMIZE (0x0040000) would turn off ASLR.
        assert_eq!(pers(0x0040000), EPERM_RET);
        assert_eq!(pers(8 | 0x0040000), EPERM_RET);
    }

    #[test]
    fn extra_names_are_denied_too() {
        let p = filter(&["chroot".into(), "bpf".into()]);
        assert_eq!(run(&p, call("chroot")), EPERM_RET);
        assert_eq!(run(&p, call("bpf")), EPERM_RET);
        // Deduplicated: bpf appears once.
        let bpf = p
            .iter()
            .filter(|i| i.code == 0x15 && i.k == libc::SYS_bpf as u32)
            .count();
        assert_eq!(bpf, 1);
        // A full deny of clone wins over the flag rules that come later.
        let p = filter(&["clone".into()]);
        assert_eq!(run(&p, call("clone")), EPERM_RET);
        assert_eq!(
            run(&p, call("clone").arg(0, libc::SIGCHLD as u64)),
            EPERM_RET
        );
    }

    #[test]
    fn every_table_name_can_be_denied() {
        let all: Vec<String> = syscalls::table(Arch::X86_64)
            .iter()
            .map(|(n, _)| n.to_string())
            .collect();
        let p = filter(&all);
        assert!(p.len() < 4096, "{}", p.len());
        assert_eq!(run(&p, call("read")), EPERM_RET);
        assert_eq!(run(&p, call("mseal")), EPERM_RET);
    }

    #[test]
    fn defaults_are_in_the_table() {
        for n in DEFAULT_DENY {
            assert!(number(n).is_some(), "{n}");
        }
        for n in ["clone3", "unshare", "clone", "personality"] {
            assert!(number(n).is_some(), "{n}");
        }
        assert_eq!(number("kexec_load"), Some(246));
        assert_eq!(number("reboot"), Some(169));
        assert_eq!(number("ptrace"), Some(101));
    }
}
