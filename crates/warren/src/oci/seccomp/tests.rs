//! OCI profiles through the one compiler and the one interpreter.

use super::*;
use crate::isolation::seccomp::interp::{run, Call};

fn oci(json: &str) -> LinuxSeccomp {
    serde_json::from_str(json).unwrap()
}

const ALLOW: u32 = 0x7fff_0000;
const EPERM: u32 = 0x0005_0001;
const KILL_THREAD: u32 = 0;

fn x86_64(name: &str) -> Call {
    Call::named(Arch::X86_64, name)
}

#[test]
fn allowlist_with_conditions_behaves_like_libseccomp() {
    let prog = filter(&oci(
        r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[
            {"names":["read","write","no_such_call"],"action":"SCMP_ACT_ALLOW"},
            {"names":["personality"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":8,"op":"SCMP_CMP_EQ"}]},
            {"names":["socket"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":40,"op":"SCMP_CMP_NE"}]},
            {"names":["clone"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":2114060288,"valueTwo":0,"op":"SCMP_CMP_MASKED_EQ"}]},
            {"names":["mkdir"],"action":"SCMP_ACT_ERRNO","errnoRet":38},
            {"names":["lseek"],"action":"SCMP_ACT_ALLOW","args":[{"index":1,"value":4294967296,"op":"SCMP_CMP_GT"}]},
            {"names":["dup"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":10,"op":"SCMP_CMP_LE"}]}
        ]}"#,
    ))
    .unwrap();
    let r = |name: &str, i: usize, v: u64| run(&prog, x86_64(name).arg(i, v));
    assert_eq!(r("read", 0, 0), ALLOW);
    assert_eq!(r("write", 0, 0), ALLOW);
    assert_eq!(r("open", 0, 0), EPERM);
    assert_eq!(r("personality", 0, 8), ALLOW);
    assert_eq!(r("personality", 0, 9), EPERM);
    assert_eq!(r("personality", 0, 8 | 1 << 32), EPERM);
    assert_eq!(r("socket", 0, 2), ALLOW);
    assert_eq!(r("socket", 0, 40), EPERM);
    assert_eq!(r("clone", 0, 0x11), ALLOW);
    assert_eq!(r("clone", 0, 0x1000_0000), EPERM);
    assert_eq!(r("mkdir", 0, 0), 0x0005_0000 | 38);
    assert_eq!(r("lseek", 1, 1 << 32), EPERM);
    assert_eq!(r("lseek", 1, (1 << 32) + 1), ALLOW);
    assert_eq!(r("lseek", 1, 2 << 32), ALLOW);
    assert_eq!(r("dup", 0, 10), ALLOW);
    assert_eq!(r("dup", 0, 11), EPERM);
    assert_eq!(r("dup", 0, 1 << 32), EPERM);
    // No architectures listed: only the native one, as libseccomp; i386 and x32 calls
    // get the bad-arch action (SCMP_ACT_KILL_THREAD), not the default.
    assert_eq!(run(&prog, Call::i386(3)), KILL_THREAD);
    assert_eq!(run(&prog, Call::named(Arch::X32, "read")), KILL_THREAD);
}

#[test]
fn denylist_and_refusals() {
    let prog = filter(&oci(r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[
            {"names":["mount"],"action":"SCMP_ACT_ERRNO","errnoRet":1},
            {"names":["reboot"],"action":"SCMP_ACT_KILL_PROCESS"},
            {"names":["read"],"action":"SCMP_ACT_ALLOW"},
            {"names":["read"],"action":"SCMP_ACT_ERRNO"}]}"#))
    .unwrap();
    assert_eq!(run(&prog, x86_64("mount")), EPERM);
    assert_eq!(run(&prog, x86_64("reboot")), 0x8000_0000);
    // A rule of the default action with no condition is dropped, as runc drops it.
    assert_eq!(run(&prog, x86_64("read")), EPERM);
    assert_eq!(run(&prog, x86_64("write")), ALLOW);
    let refused = |json: &str| filter(&oci(json)).unwrap_err().to_string();
    let e = refused(
        r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mount"],"action":"SCMP_ACT_NOTIFY"}]}"#,
    );
    assert!(e.contains("syscalls[0]") && e.contains("NOTIFY"), "{e}");
    let e = refused(r#"{"defaultAction":"SCMP_ACT_NOTIFY"}"#);
    assert!(e.starts_with("defaultAction: SCMP_ACT_NOTIFY"), "{e}");
    let e = refused(r#"{"defaultAction":"SCMP_ACT_ALLOW","listenerPath":"/run/agent.sock"}"#);
    assert!(e.contains("listenerPath"), "{e}");
    let e = refused(r#"{"defaultAction":"SCMP_ACT_ALLOW","flags":["SECCOMP_FILTER_FLAG_LOG"]}"#);
    assert!(
        e.contains("SECCOMP_FILTER_FLAG_LOG") && e.contains("remove it"),
        "{e}"
    );
    let e = refused(
        r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["read"],"action":"SCMP_ACT_ERRNO","args":[{"index":7,"value":0,"op":"SCMP_CMP_EQ"}]}]}"#,
    );
    assert!(e.contains("\"read\"") && e.contains("index 7"), "{e}");
    assert!(filter(&oci(
        r#"{"defaultAction":"SCMP_ACT_ALLOW","flags":["SECCOMP_FILTER_FLAG_TSYNC"]}"#
    ))
    .is_ok());
}

/// The shape of Docker's default profile on x86_64: an allow-list with ERRNO by
/// default, listing the three x86 ABIs.
#[test]
fn a_docker_like_multi_arch_profile_behaves_as_under_runc() {
    let prog = filter(&oci(
        r#"{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":1,
            "architectures":["SCMP_ARCH_X86_64","SCMP_ARCH_X86","SCMP_ARCH_X32"],
            "syscalls":[
            {"names":["getpid","read","write","exit_group","socketcall","arch_prctl"],"action":"SCMP_ACT_ALLOW"},
            {"names":["clone"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":2114060288,"valueTwo":0,"op":"SCMP_CMP_MASKED_EQ"}]},
            {"names":["clone3"],"action":"SCMP_ACT_ERRNO","errnoRet":38},
            {"names":["ptrace"],"action":"SCMP_ACT_ERRNO","errnoRet":1}]}"#,
    ))
    .unwrap();
    for arch in [Arch::X86_64, Arch::X86, Arch::X32] {
        let c = |n: &str| Call::named(arch, n);
        assert_eq!(run(&prog, c("getpid")), ALLOW, "{arch:?} getpid");
        assert_eq!(run(&prog, c("write")), ALLOW, "{arch:?} write");
        // Denied by the profile in every ABI: mount (default) and ptrace (a rule).
        assert_eq!(run(&prog, c("mount")), EPERM, "{arch:?} mount");
        assert_eq!(run(&prog, c("ptrace")), EPERM, "{arch:?} ptrace");
        assert_eq!(run(&prog, c("clone3")), 0x0005_0026, "{arch:?} clone3");
        assert_eq!(run(&prog, c("clone").arg(0, 0x11)), ALLOW, "{arch:?} fork");
        assert_eq!(
            run(&prog, c("clone").arg(0, 0x1000_0000)),
            EPERM,
            "{arch:?} new user ns"
        );
    }
    // i386 getpid is 20; 20 on x86_64 is writev, which the profile does not allow.
    assert_eq!(run(&prog, Call::i386(20)), ALLOW);
    assert_eq!(run(&prog, Call::x86_64(20)), EPERM);
    // socketcall is i386's only (102, getuid on x86_64, stays denied there).
    assert_eq!(run(&prog, Call::named(Arch::X86, "socketcall")), ALLOW);
    assert_eq!(run(&prog, Call::x86_64(102)), EPERM);
    assert_eq!(run(&prog, Call::i386(384)), ALLOW); // i386's arch_prctl
                                                    // An architecture the profile does not list gets runc's bad-arch action.
    let aarch64 = Call {
        arch: 0xc000_00b7,
        nr: 172,
        args: [0; 6],
    };
    assert_eq!(run(&prog, aarch64), KILL_THREAD);
    // Listing only x86_64 and x86: x32 calls are of a bad architecture.
    let prog = filter(&oci(
        r#"{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_64","SCMP_ARCH_X86"],
            "syscalls":[{"names":["getpid"],"action":"SCMP_ACT_ALLOW"}]}"#,
    ))
    .unwrap();
    assert_eq!(run(&prog, Call::i386(20)), ALLOW);
    assert_eq!(run(&prog, Call::named(Arch::X32, "getpid")), KILL_THREAD);
    // Listing a foreign architecture only still covers the native one.
    let prog = filter(&oci(
        r#"{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_AARCH64"],
            "syscalls":[{"names":["getpid"],"action":"SCMP_ACT_ALLOW"}]}"#,
    ))
    .unwrap();
    assert_eq!(run(&prog, x86_64("getpid")), ALLOW);
    assert_eq!(run(&prog, Call::i386(20)), KILL_THREAD);
}

/// runc's ENOSYS stub: a syscall newer than every one a restrictive profile names
/// fails as not implemented (so glibc falls back, as with clone3), on each listed ABI.
#[test]
fn calls_newer_than_the_profile_get_enosys_as_under_runc() {
    const ENOSYS: u32 = 0x0005_0026;
    let prog = filter(&oci(r#"{"defaultAction":"SCMP_ACT_ERRNO",
            "architectures":["SCMP_ARCH_X86_64","SCMP_ARCH_X86","SCMP_ARCH_X32"],
            "syscalls":[{"names":["getpid","clone3","ptrace"],"action":"SCMP_ACT_ALLOW"}]}"#))
    .unwrap();
    // clone3 (435) is the highest named: close_range (436) and openat2 (437) are newer.
    for arch in [Arch::X86_64, Arch::X86] {
        let c = |n: &str| run(&prog, Call::named(arch, n));
        assert_eq!(c("getpid"), ALLOW, "{arch:?}");
        assert_eq!(c("clone3"), ALLOW, "{arch:?}");
        assert_eq!(c("close_range"), ENOSYS, "{arch:?}");
        assert_eq!(c("openat2"), ENOSYS, "{arch:?}");
        assert_eq!(c("mount"), EPERM, "{arch:?}");
    }
    assert_eq!(run(&prog, Call::x86_64(1000)), ENOSYS);
    // On x32, ptrace is one of the x32-only entry points (512 and up): the highest,
    // as runc computes it, so only calls past it get ENOSYS.
    let x32 = |n: &str| run(&prog, Call::named(Arch::X32, n));
    assert_eq!(x32("ptrace"), ALLOW);
    assert_eq!(x32("close_range"), EPERM);
    assert_eq!(x32("pwritev2"), ENOSYS); // B + 547
                                         // The highest is taken over every rule, also one dropped for repeating the default.
    let dropped = filter(&oci(
        r#"{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_64"],
            "syscalls":[{"names":["getpid"],"action":"SCMP_ACT_ALLOW"},
                        {"names":["openat2"],"action":"SCMP_ACT_ERRNO"}]}"#,
    ))
    .unwrap();
    assert_eq!(run(&dropped, x86_64("openat2")), EPERM);
    assert_eq!(run(&dropped, x86_64("close_range")), EPERM);
    assert_eq!(run(&dropped, x86_64("faccessat2")), ENOSYS);
    // A permissive default needs no stub: the default already lets new calls through.
    let allow = filter(&oci(
        r#"{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_X86_64"],
            "syscalls":[{"names":["ptrace"],"action":"SCMP_ACT_ERRNO"}]}"#,
    ))
    .unwrap();
    assert_eq!(run(&allow, Call::x86_64(1000)), ALLOW);
    // runc adds the stub for the architectures the profile lists, none when it lists
    // none (the native one is covered but not stubbed).
    let unlisted = filter(&oci(
        r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["getpid"],"action":"SCMP_ACT_ALLOW"}]}"#,
    ))
    .unwrap();
    assert_eq!(run(&unlisted, x86_64("openat2")), EPERM);
}
