//! Tests of the compiler on neutral profiles, through the one interpreter (the zone
//! policy's are in `zone`, OCI profiles' in `oci::seccomp`).

use super::interp::{run, Call};
use super::*;

const ALLOW: u32 = 0x7fff_0000;
const EPERM: u32 = 0x0005_0001;
const KILL_THREAD: u32 = 0;
const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;

fn cond(index: u8, op: Op, value: u64, width: Width) -> Cond {
    Cond {
        index,
        op,
        value,
        width,
    }
}

fn profile(arches: &[Arch], rules: Vec<Rule>) -> Profile {
    Profile {
        default: Action::Errno(1),
        arches: arches.to_vec(),
        bad_arch: Action::KillThread,
        bad_x32: Action::KillThread,
        rules,
        enosys_above: Vec::new(),
    }
}

#[test]
fn each_listed_arch_uses_its_own_numbers() {
    let p = compile(&profile(
        &[Arch::X86_64, Arch::X86, Arch::X32],
        vec![
            Rule::always(&["getpid", "socketcall"], Action::Allow),
            Rule::always(&["mkdir"], Action::Errno(38)),
        ],
    ))
    .unwrap();
    for arch in [Arch::X86_64, Arch::X86, Arch::X32] {
        assert_eq!(run(&p, Call::named(arch, "getpid")), ALLOW, "{arch:?}");
        assert_eq!(run(&p, Call::named(arch, "mkdir")), 0x0005_0026, "{arch:?}");
        assert_eq!(run(&p, Call::named(arch, "getppid")), EPERM, "{arch:?}");
    }
    // i386 getpid is 20, x86_64's getpid 39: the numbers of one ABI mean nothing in
    // another (20 is writev on x86_64, 39 mkdir on i386).
    assert_eq!(run(&p, Call::x86_64(20)), EPERM);
    assert_eq!(run(&p, Call::i386(39)), 0x0005_0026);
    // socketcall exists on i386 only: skipped elsewhere.
    assert_eq!(run(&p, Call::named(Arch::X86, "socketcall")), ALLOW);
    // An architecture not listed gets the bad-arch action.
    let arm = Call {
        arch: AUDIT_ARCH_AARCH64,
        nr: 172,
        args: [0; 6],
    };
    assert_eq!(run(&p, arm), KILL_THREAD);
}

#[test]
fn unlisted_secondary_abis_get_their_actions() {
    let mut prof = profile(
        &[Arch::X86_64],
        vec![Rule::always(&["getpid"], Action::Allow)],
    );
    prof.bad_arch = Action::KillProcess;
    prof.bad_x32 = Action::Errno(1);
    let p = compile(&prof).unwrap();
    assert_eq!(run(&p, Call::named(Arch::X86_64, "getpid")), ALLOW);
    assert_eq!(run(&p, Call::named(Arch::X86, "getpid")), 0x8000_0000);
    assert_eq!(run(&p, Call::named(Arch::X32, "getpid")), EPERM);
    // x32 alone: native calls are of an unlisted ABI.
    let mut prof = profile(&[Arch::X32], vec![Rule::always(&["getpid"], Action::Allow)]);
    prof.bad_arch = Action::Trap;
    let p = compile(&prof).unwrap();
    assert_eq!(run(&p, Call::named(Arch::X32, "getpid")), ALLOW);
    assert_eq!(run(&p, Call::named(Arch::X86_64, "getpid")), 0x0003_0000);
    // No architecture at all: every call is of a bad one.
    let p = compile(&profile(&[], vec![])).unwrap();
    assert_eq!(run(&p, Call::named(Arch::X86_64, "read")), KILL_THREAD);
}

#[test]
fn comparisons_of_32_and_64_bits() {
    use Op::*;
    const BIG: u64 = 5 | 1 << 32;
    let cases: Vec<(Cond, &[(u64, bool)])> = vec![
        (
            cond(1, Eq, BIG, Width::Full64),
            &[(BIG, true), (5, false), (1 << 32, false)],
        ),
        (
            cond(1, Eq, 5, Width::Low32),
            &[(BIG, true), (5, true), (6, false)],
        ),
        (
            cond(1, Ne, BIG, Width::Full64),
            &[(BIG, false), (5, true), (BIG + 1, true)],
        ),
        (cond(1, Ne, 5, Width::Low32), &[(BIG, false), (6, true)]),
        (
            cond(1, Gt, BIG, Width::Full64),
            &[
                (BIG, false),
                (BIG + 1, true),
                (2 << 32, true),
                (u32::MAX as u64, false),
            ],
        ),
        (
            cond(1, Ge, BIG, Width::Full64),
            &[(BIG, true), (BIG - 1, false), (2 << 32, true)],
        ),
        (
            cond(1, Lt, BIG, Width::Full64),
            &[
                (BIG, false),
                (BIG - 1, true),
                (u32::MAX as u64, true),
                (2 << 32, false),
            ],
        ),
        (
            cond(1, Le, BIG, Width::Full64),
            &[(BIG, true), (BIG + 1, false), (0, true)],
        ),
        (
            cond(1, Gt, 5, Width::Low32),
            &[(6, true), (5, false), (BIG, false)],
        ),
        (cond(1, Ge, 5, Width::Low32), &[(5, true), (4, false)]),
        (
            cond(1, Lt, 5, Width::Low32),
            &[(4, true), (5, false), (4 | 1 << 40, true)],
        ),
        (cond(1, Le, 5, Width::Low32), &[(5, true), (6, false)]),
        (
            cond(1, MaskedEq(0xff | 0xf << 32), 0x11 | 1 << 32, Width::Full64),
            &[
                (0x1011 | 1 << 32, true),
                (0x11, false),
                (0x12 | 1 << 32, false),
            ],
        ),
        (
            cond(1, MaskedEq(0xff), 0x11, Width::Low32),
            &[(0x1011 | 7 << 32, true), (0x12, false)],
        ),
    ];
    for (c, expect) in cases {
        let p = compile(&profile(
            &[Arch::X86_64],
            vec![Rule {
                names: vec!["lseek".into()],
                action: Action::Allow,
                conds: vec![c.clone()],
            }],
        ))
        .unwrap();
        for (v, allowed) in expect {
            let got = run(&p, Call::named(Arch::X86_64, "lseek").arg(1, *v));
            assert_eq!(got == ALLOW, *allowed, "{c:?} on {v:#x}");
        }
    }
}

#[test]
fn rules_keep_their_order_and_all_conditions_must_hold() {
    let both = Rule {
        names: vec!["socket".into()],
        action: Action::Allow,
        conds: vec![
            cond(0, Op::Eq, 2, Width::Full64),
            cond(1, Op::MaskedEq(0xf), 1, Width::Full64),
        ],
    };
    let p = compile(&profile(
        &[Arch::X86_64],
        vec![
            both,
            Rule::always(&["socket"], Action::Errno(97)),
            Rule::always(&["socket"], Action::Allow),
        ],
    ))
    .unwrap();
    let socket = |a: u64, b: u64| run(&p, Call::named(Arch::X86_64, "socket").arg(0, a).arg(1, b));
    assert_eq!(socket(2, 0x801), ALLOW);
    assert_eq!(socket(2, 2), 0x0005_0061);
    assert_eq!(socket(10, 1), 0x0005_0061);
}

#[test]
fn profiles_the_kernel_would_refuse_are_refused() {
    let bad = Rule {
        names: vec!["read".into()],
        action: Action::Allow,
        conds: vec![cond(6, Op::Eq, 0, Width::Full64)],
    };
    assert_eq!(
        compile(&profile(&[Arch::X86_64], vec![bad])),
        Err(CompileError::ArgIndex {
            name: "read".into(),
            index: 6
        })
    );
    let many = Rule {
        names: vec!["read".into()],
        action: Action::Allow,
        conds: vec![cond(0, Op::Lt, 1, Width::Full64); 60],
    };
    let e = compile(&profile(&[Arch::X86_64], vec![many])).unwrap_err();
    assert_eq!(
        e,
        CompileError::TooManyConds {
            name: "read".into(),
            conds: 60
        }
    );
    let names: Vec<String> = syscalls::table(Arch::X86_64)
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    let long = Rule {
        names,
        action: Action::Allow,
        conds: vec![cond(0, Op::Eq, 1, Width::Full64); 2],
    };
    let e = compile(&profile(&[Arch::X86_64], vec![long])).unwrap_err();
    assert!(matches!(e, CompileError::TooLong(n) if n > 4096), "{e:?}");
    assert!(e.to_string().contains("4096"), "{e}");
}
