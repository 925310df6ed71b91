//! The zone's seccomp filter, generated as a classic BPF program (pure data).
//!
//! Shape of the program (x86_64 only):
//!
//! ```text
//!   ld  arch            ; jeq AUDIT_ARCH_X86_64 ? next : KILL_PROCESS   (i386 via int 0x80)
//!   ld  nr              ; jge 0x40000000 ? EPERM                        (the x32 ABI)
//!   per denied nr       : jeq nr ? EPERM
//!   per errno rule      : jeq nr ? ERRNO(e)                             (clone3 → ENOSYS)
//!   per flag rule       : jeq nr ? (ld arg0 ; jset mask ? EPERM : ALLOW)
//!   per allow-only rule : jeq nr ? (ld arg0 ; jeq v… ? ALLOW : EPERM)
//!   ret ALLOW
//! ```
//!
//! Every jump is 0–k instructions forward with k small, so the u8 jump offsets of
//! classic BPF never overflow whatever the number of syscalls denied.

use warren_sys::harden::SockFilter;
use warren_sys::libc;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;

/// `AUDIT_ARCH_X86_64`: EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE.
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// Syscall numbers at or above this are the x32 ABI.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Offsets in `struct seccomp_data`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// Low 32 bits of args[0] (little endian).
const OFF_ARG0: u32 = 16;

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

/// Syscall names `seccomp.deny` accepts, with their x86_64 numbers.
pub const TABLE: &[(&str, libc::c_long)] = &[
    ("acct", libc::SYS_acct),
    ("add_key", libc::SYS_add_key),
    ("adjtimex", libc::SYS_adjtimex),
    ("bpf", libc::SYS_bpf),
    ("chroot", libc::SYS_chroot),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("clock_settime", libc::SYS_clock_settime),
    ("clone", libc::SYS_clone),
    ("clone3", libc::SYS_clone3),
    ("delete_module", libc::SYS_delete_module),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("finit_module", libc::SYS_finit_module),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fsopen", libc::SYS_fsopen),
    ("fspick", libc::SYS_fspick),
    ("get_mempolicy", libc::SYS_get_mempolicy),
    ("init_module", libc::SYS_init_module),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("ioperm", libc::SYS_ioperm),
    ("iopl", libc::SYS_iopl),
    ("ioprio_set", libc::SYS_ioprio_set),
    ("kcmp", libc::SYS_kcmp),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("kexec_load", libc::SYS_kexec_load),
    ("keyctl", libc::SYS_keyctl),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
    ("mbind", libc::SYS_mbind),
    ("migrate_pages", libc::SYS_migrate_pages),
    ("mknod", libc::SYS_mknod),
    ("mknodat", libc::SYS_mknodat),
    ("mount", libc::SYS_mount),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("move_mount", libc::SYS_move_mount),
    ("move_pages", libc::SYS_move_pages),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("nfsservctl", libc::SYS_nfsservctl),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("open_tree", libc::SYS_open_tree),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("personality", libc::SYS_personality),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("pivot_root", libc::SYS_pivot_root),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("ptrace", libc::SYS_ptrace),
    ("quotactl", libc::SYS_quotactl),
    ("reboot", libc::SYS_reboot),
    ("request_key", libc::SYS_request_key),
    ("set_mempolicy", libc::SYS_set_mempolicy),
    ("setdomainname", libc::SYS_setdomainname),
    ("sethostname", libc::SYS_sethostname),
    ("setns", libc::SYS_setns),
    ("settimeofday", libc::SYS_settimeofday),
    ("swapoff", libc::SYS_swapoff),
    ("swapon", libc::SYS_swapon),
    ("syslog", libc::SYS_syslog),
    ("umount2", libc::SYS_umount2),
    ("unshare", libc::SYS_unshare),
    ("uselib", libc::SYS_uselib),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("vhangup", libc::SYS_vhangup),
];

/// The x86_64 number of a syscall name in [`TABLE`].
pub fn number(name: &str) -> Option<u32> {
    TABLE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, nr)| *nr as u32)
}

/// What the filter does with one syscall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// Always EPERM.
    Deny(u32),
    /// Always this errno (clone3 → ENOSYS, so libc falls back to clone, whose flags
    /// the filter can read; clone3 passes them in memory).
    Errno(u32, u32),
    /// EPERM if the low word of args[0] has any bit of the mask.
    DenyFlags(u32, u32),
    /// EPERM unless the low word of args[0] is one of the values.
    AllowOnly(u32, Vec<u32>),
}

/// The default rules plus `extra` denied names (already validated against [`TABLE`]).
pub fn rules(extra: &[String]) -> Vec<Rule> {
    let mut deny: Vec<u32> = DEFAULT_DENY
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
        .map(|n| number(n).expect("names validated against the table"))
        .collect();
    deny.sort_unstable();
    deny.dedup();
    let mut r: Vec<Rule> = deny.into_iter().map(Rule::Deny).collect();
    let nr = |n| number(n).expect("in the table");
    r.push(Rule::Errno(nr("clone3"), libc::ENOSYS as u32));
    r.push(Rule::DenyFlags(nr("unshare"), UNSHARE_NS_FLAGS));
    r.push(Rule::DenyFlags(nr("clone"), CLONE_NS_FLAGS));
    r.push(Rule::AllowOnly(nr("personality"), PERSONALITIES.to_vec()));
    r
}

fn stmt(code: u16, k: u32) -> SockFilter {
    SockFilter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
    SockFilter { code, jt, jf, k }
}

/// Compile `rules` into a BPF program. A rule for a syscall number that an earlier
/// rule already matched never runs (the first match returns).
pub fn compile(rules: &[Rule]) -> Vec<SockFilter> {
    let eperm = RET_ERRNO | libc::EPERM as u32;
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(RET_K, RET_KILL_PROCESS),
        stmt(LD_W_ABS, OFF_NR),
        jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(RET_K, eperm),
    ];
    for rule in rules {
        match rule {
            Rule::Deny(nr) => {
                p.push(jump(JEQ_K, *nr, 0, 1));
                p.push(stmt(RET_K, eperm));
            }
            Rule::Errno(nr, e) => {
                p.push(jump(JEQ_K, *nr, 0, 1));
                p.push(stmt(RET_K, RET_ERRNO | (e & 0xffff)));
            }
            Rule::DenyFlags(nr, mask) => {
                p.push(jump(JEQ_K, *nr, 0, 4));
                p.push(stmt(LD_W_ABS, OFF_ARG0));
                p.push(jump(JSET_K, *mask, 0, 1));
                p.push(stmt(RET_K, eperm));
                p.push(stmt(RET_K, RET_ALLOW));
            }
            Rule::AllowOnly(nr, values) => {
                // At most a handful of values: the offsets below stay far below 255.
                let k = values.len().min(250);
                p.push(jump(JEQ_K, *nr, 0, (k + 3) as u8));
                p.push(stmt(LD_W_ABS, OFF_ARG0));
                for (j, v) in values.iter().take(k).enumerate() {
                    p.push(jump(JEQ_K, *v, (k - j) as u8, 0));
                }
                p.push(stmt(RET_K, eperm));
                p.push(stmt(RET_K, RET_ALLOW));
            }
        }
    }
    p.push(stmt(RET_K, RET_ALLOW));
    p
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A classic BPF interpreter for the subset `compile` emits, so the tests check
    /// what the program *does* rather than its bytes.
    pub fn run(prog: &[SockFilter], arch: u32, nr: u32, arg0: u64) -> u32 {
        let mut pc = 0usize;
        let mut a: u32 = 0;
        loop {
            let i = prog[pc];
            match i.code {
                LD_W_ABS => {
                    a = match i.k {
                        OFF_NR => nr,
                        OFF_ARCH => arch,
                        OFF_ARG0 => arg0 as u32,
                        other => panic!("load of offset {other}"),
                    };
                    pc += 1;
                }
                JEQ_K | JGE_K | JSET_K => {
                    let taken = match i.code {
                        JEQ_K => a == i.k,
                        JGE_K => a >= i.k,
                        _ => a & i.k != 0,
                    };
                    pc += 1 + usize::from(if taken { i.jt } else { i.jf });
                }
                RET_K => return i.k,
                other => panic!("opcode {other:#x}"),
            }
        }
    }

    const X86: u32 = AUDIT_ARCH_X86_64;
    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;

    #[test]
    fn default_filter_denies_the_listed_calls_and_allows_the_rest() {
        let p = compile(&rules(&[]));
        for name in DEFAULT_DENY {
            assert_eq!(run(&p, X86, number(name).unwrap(), 0), EPERM, "{name}");
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_execve,
            libc::SYS_openat,
        ] {
            assert_eq!(run(&p, X86, nr as u32, 0), RET_ALLOW, "{nr}");
        }
        // Another architecture (i386 through int 0x80) is killed; x32 numbers fail.
        assert_eq!(run(&p, 0x4000_0003, 1, 0), RET_KILL_PROCESS);
        assert_eq!(run(&p, X86, X32_SYSCALL_BIT | 1, 0), EPERM);
        // clone3 says ENOSYS so libc falls back to clone.
        assert_eq!(
            run(&p, X86, libc::SYS_clone3 as u32, 0),
            RET_ERRNO | libc::ENOSYS as u32
        );
    }

    #[test]
    fn namespace_flags_and_personality_are_checked() {
        let p = compile(&rules(&[]));
        let unshare = libc::SYS_unshare as u32;
        let clone = libc::SYS_clone as u32;
        assert_eq!(run(&p, X86, unshare, libc::CLONE_NEWUSER as u64), EPERM);
        assert_eq!(run(&p, X86, unshare, libc::CLONE_NEWNS as u64), EPERM);
        assert_eq!(run(&p, X86, unshare, 0x80), EPERM); // CLONE_NEWTIME
        assert_eq!(run(&p, X86, unshare, libc::CLONE_FILES as u64), RET_ALLOW);
        // fork() is clone(SIGCHLD | CLONE_CHILD_*): allowed; a new user ns is not.
        let fork = (libc::SIGCHLD | libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID) as u64;
        assert_eq!(run(&p, X86, clone, fork), RET_ALLOW);
        assert_eq!(
            run(&p, X86, clone, fork | libc::CLONE_NEWUSER as u64),
            EPERM
        );
        let pers = libc::SYS_personality as u32;
        for v in PERSONALITIES {
            assert_eq!(run(&p, X86, pers, v as u64), RET_ALLOW, "{v:#x}");
        }
        // ADDR_NO_RANDOMIZE (0x0040000) would turn off ASLR.
        assert_eq!(run(&p, X86, pers, 0x0040000), EPERM);
    }

    #[test]
    fn extra_names_are_denied_too() {
        let p = compile(&rules(&["chroot".into(), "bpf".into()]));
        assert_eq!(run(&p, X86, libc::SYS_chroot as u32, 0), EPERM);
        assert_eq!(run(&p, X86, libc::SYS_bpf as u32, 0), EPERM);
        // Deduplicated: bpf appears once.
        let bpf = p
            .iter()
            .filter(|i| i.code == JEQ_K && i.k == libc::SYS_bpf as u32)
            .count();
        assert_eq!(bpf, 1);
        // A full deny of clone wins over the flag rule that comes later.
        let p = compile(&rules(&["clone".into()]));
        assert_eq!(run(&p, X86, libc::SYS_clone as u32, 0), EPERM);
    }

    #[test]
    fn table_names_are_unique_and_cover_the_defaults() {
        let mut names: Vec<_> = TABLE.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        let len = names.len();
        names.dedup();
        assert_eq!(names.len(), len);
        for n in DEFAULT_DENY {
            assert!(number(n).is_some(), "{n}");
        }
        // Spot checks against the x86_64 syscall table.
        assert_eq!(number("kexec_load"), Some(246));
        assert_eq!(number("reboot"), Some(169));
        assert_eq!(number("ptrace"), Some(101));
    }
}
