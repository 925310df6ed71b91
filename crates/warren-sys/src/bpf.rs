//! `bpf(2)` for cgroup v2 device control: load a `BPF_PROG_TYPE_CGROUP_DEVICE` program
//! and attach it to a cgroup. The program itself is built (and unit-tested) by the
//! `warren` crate as plain bytes; this module only hands them to the kernel.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;

/// The head of `union bpf_attr` for BPF_PROG_LOAD (up to `prog_name`); the kernel
/// zero-fills what a shorter attr leaves out.
#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
}

/// `union bpf_attr` for BPF_PROG_ATTACH.
#[repr(C)]
struct ProgAttach {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
}

/// Load a cgroup device program: `insns` are `struct bpf_insn`s, 8 bytes each. On a
/// verifier refusal the error carries the verifier's log.
pub fn load_cgroup_device(insns: &[u8], name: &str) -> io::Result<OwnedFd> {
    if insns.is_empty() || !insns.len().is_multiple_of(8) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a BPF program is a non-empty list of 8-byte instructions",
        ));
    }
    let license = c"GPL";
    let mut log = vec![0u8; 16 * 1024];
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: (insns.len() / 8) as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        ..ProgLoad::default()
    };
    for (d, s) in attr.prog_name.iter_mut().zip(name.bytes().take(15)) {
        *d = s;
    }
    // SAFETY: `attr` is a valid BPF_PROG_LOAD attr of the size passed; the pointers in
    // it (instructions, license, log buffer) point to live memory of the stated sizes
    // for the whole call, and the kernel writes only into the log buffer.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            &mut attr as *mut ProgLoad,
            std::mem::size_of::<ProgLoad>(),
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]).trim().to_string();
        if text.is_empty() {
            return Err(e);
        }
        return Err(io::Error::new(e.kind(), format!("{e}; verifier: {text}")));
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Attach a loaded cgroup device program to the cgroup open as `cgroup` (a directory
/// descriptor). The attachment holds the program: `prog` may be closed afterwards.
pub fn attach_cgroup_device(cgroup: &impl AsRawFd, prog: &OwnedFd) -> io::Result<()> {
    let attr = ProgAttach {
        target_fd: cgroup.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: 0,
    };
    // SAFETY: `attr` is a valid BPF_PROG_ATTACH attr of the size passed; both
    // descriptors are open for the duration of the call (borrowed).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_ATTACH,
            &attr as *const ProgAttach,
            std::mem::size_of::<ProgAttach>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
