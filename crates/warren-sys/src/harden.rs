//! Confining a zone's processes: capabilities, no_new_privs and a seccomp filter.
//!
//! Every function here is allocation-free so the cloned child of
//! [`crate::spawn::spawn_staged`] can call it between `clone` and `execve`. The
//! policy (which capabilities stay, the BPF program) is computed by the `warren` crate
//! as plain data; this module only hands it to the kernel.

/// One classic BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// `struct sock_fprog`.
#[repr(C)]
struct SockFprog {
    len: libc::c_ushort,
    filter: *const SockFilter,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit capability sets in two 32-bit halves.
const CAP_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn ok(rc: libc::c_int) -> Result<(), ()> {
    if rc < 0 {
        Err(())
    } else {
        Ok(())
    }
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`: execve never grants privileges again (setuid bits
/// and file capabilities are ignored). Required to load a filter without CAP_SYS_ADMIN.
pub(crate) fn no_new_privs() -> Result<(), ()> {
    // SAFETY: prctl with integer arguments only.
    ok(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })
}

/// Install `filter` with `seccomp(SECCOMP_SET_MODE_FILTER, 0, …)`: for the
/// calling thread only, which in the child is the only thread. Allocation-free.
pub(crate) fn load_seccomp(filter: &[SockFilter]) -> Result<(), ()> {
    if filter.is_empty() || filter.len() > u16::MAX as usize {
        // SAFETY: writing this thread's errno slot.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return Err(());
    }
    let prog = SockFprog {
        len: filter.len() as libc::c_ushort,
        filter: filter.as_ptr(),
    };
    // SAFETY: `prog` points at `filter.len()` initialised instructions that outlive
    // the call (the kernel copies the program).
    ok(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &prog as *const SockFprog,
        )
    } as libc::c_int)
}

/// The capability sets of an OCI `process.capabilities` (bit n = capability n).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapSets {
    pub effective: u64,
    pub permitted: u64,
    pub inheritable: u64,
    pub ambient: u64,
}

/// Drop every capability not in `keep` from the bounding set (needs CAP_SETPCAP).
pub(crate) fn drop_bounding(keep: u64) -> Result<(), ()> {
    for cap in 0..64 {
        if keep & (1u64 << cap) != 0 {
            continue;
        }
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if rc < 0 {
            if errno() == libc::EINVAL {
                break; // past the kernel's last capability
            }
            return Err(());
        }
    }
    Ok(())
}

/// Become `uid`/`gid` with supplementary `groups`. PR_SET_KEEPCAPS keeps the
/// permitted set across the change so [`set_caps`] can set what the process keeps.
/// Raw syscalls: glibc's wrappers would signal threads of the parent's copy.
pub(crate) fn set_ids(
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: &[libc::gid_t],
) -> Result<(), ()> {
    // SAFETY: prctl and the set*id syscalls take integers; `groups` is valid for its
    // length.
    unsafe {
        ok(libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0))?;
        ok(libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) as libc::c_int)?;
        ok(libc::syscall(libc::SYS_setresgid, gid, gid, gid) as libc::c_int)?;
        ok(libc::syscall(libc::SYS_setresuid, uid, uid, uid) as libc::c_int)?;
        ok(libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0))
    }
}

/// Set the effective, permitted and inheritable sets, then raise each ambient
/// capability (the kernel requires it to be permitted and inheritable).
pub(crate) fn set_caps(sets: &CapSets) -> Result<(), ()> {
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let data = [
        CapData {
            effective: sets.effective as u32,
            permitted: sets.permitted as u32,
            inheritable: sets.inheritable as u32,
        },
        CapData {
            effective: (sets.effective >> 32) as u32,
            permitted: (sets.permitted >> 32) as u32,
            inheritable: (sets.inheritable >> 32) as u32,
        },
    ];
    // SAFETY: `header` and the two-element `data` array are the layout capset(2)
    // expects for version 3; both live for the call.
    ok(unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } as libc::c_int)?;
    // SAFETY: prctl with integer arguments only.
    ok(unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    })?;
    for cap in 0..64 {
        if sets.ambient & (1u64 << cap) == 0 {
            continue;
        }
        // SAFETY: prctl with integer arguments only.
        ok(unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                cap as libc::c_ulong,
                0,
                0,
            )
        })?;
    }
    Ok(())
}
