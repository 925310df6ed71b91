//! Device control on cgroup v2: the v1 device list compiled into a
//! `BPF_PROG_TYPE_CGROUP_DEVICE` program (pure; loading and attaching is
//! `warren_sys::bpf`).
//!
//! v2 has no `devices.allow` file: the kernel asks a BPF program attached to the
//! cgroup, once per device access (mknod, open for read or write), with
//! `struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32 minor; }`, where
//! `access_type` is `access << 16 | type`. So zones keep *one* device list — the v1
//! writes ([`super::v1::device_writes`] for zones, the OCI config's for containers) —
//! and this module turns it into the program, as runc and crun do:
//!
//! - a first rule `a` sets the default (`devices.deny a`: deny what no rule allows);
//! - the other rules are tried last to first; the first that matches the device type,
//!   major and minor (or `*`) decides — an allow rule when it covers every access asked
//!   for, a deny rule when it names any of them — so a later rule overrides an earlier
//!   one as in v1 (unlike v1, two allow rules do not add up: "r" and then "w" do not
//!   allow "rw"; warren's and the OCI defaults grant whole "rwm" or "m" entries);
//! - nothing matched: the default.

use super::CgroupError;

/// One rule of the device list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub allow: bool,
    /// 'c', 'b' or 'a' (any).
    pub kind: char,
    pub major: Option<u32>,
    pub minor: Option<u32>,
    /// BPF_DEVCG_ACC_* bits: mknod 1, read 2, write 4.
    pub access: u32,
}

const ACC_ALL: u32 = 7;

/// Parse the v1 writes (`devices.allow` / `devices.deny`, "c 1:3 rwm" or "a").
pub fn parse(writes: &[(&str, String)]) -> Result<Vec<Rule>, CgroupError> {
    let bad = |line: &str| CgroupError::BadDeviceRule {
        line: line.to_string(),
    };
    writes
        .iter()
        .map(|(file, line)| {
            let allow = *file == "devices.allow";
            let parts: Vec<&str> = line.split_whitespace().collect();
            if parts == ["a"] {
                return Ok(Rule {
                    allow,
                    kind: 'a',
                    major: None,
                    minor: None,
                    access: ACC_ALL,
                });
            }
            let [kind, numbers, rest @ ..] = parts.as_slice() else {
                return Err(bad(line));
            };
            let kind = match *kind {
                "c" => 'c',
                "b" => 'b',
                "a" => 'a',
                _ => return Err(bad(line)),
            };
            let (maj, min) = numbers.split_once(':').ok_or_else(|| bad(line))?;
            let num = |s: &str| -> Result<Option<u32>, CgroupError> {
                if s == "*" {
                    Ok(None)
                } else {
                    s.parse().map(Some).map_err(|_| bad(line))
                }
            };
            let mut access = 0;
            for ch in rest.first().copied().unwrap_or("rwm").chars() {
                access |= match ch {
                    'm' => 1,
                    'r' => 2,
                    'w' => 4,
                    _ => return Err(bad(line)),
                };
            }
            Ok(Rule {
                allow,
                kind,
                major: num(maj)?,
                minor: num(min)?,
                access,
            })
        })
        .collect()
}

/// One `struct bpf_insn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

const LDX_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const AND32_K: u8 = 0x54; // BPF_ALU | BPF_AND | BPF_K
const RSH32_K: u8 = 0x74; // BPF_ALU | BPF_RSH | BPF_K
const MOV32_X: u8 = 0xbc; // BPF_ALU | BPF_MOV | BPF_X
const MOV64_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const JNE_K: u8 = 0x55; // BPF_JMP | BPF_JNE | BPF_K
const JNE_X: u8 = 0x5d; // BPF_JMP | BPF_JNE | BPF_X
const JEQ_K: u8 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        dst,
        src,
        off,
        imm,
    }
}

/// The program for `rules` (see the module doc for its semantics).
pub fn program(rules: &[Rule]) -> Vec<Insn> {
    let (default, rules) = match rules.first() {
        Some(r) if r.kind == 'a' && r.major.is_none() && r.minor.is_none() => {
            (r.allow, &rules[1..])
        }
        _ => (true, rules),
    };
    // r2 = type, r3 = access, r4 = major, r5 = minor.
    let mut p = vec![
        insn(LDX_W, 2, 1, 0, 0),
        insn(AND32_K, 2, 0, 0, 0xffff),
        insn(LDX_W, 3, 1, 0, 0),
        insn(RSH32_K, 3, 0, 0, 16),
        insn(LDX_W, 4, 1, 4, 0),
        insn(LDX_W, 5, 1, 8, 0),
    ];
    for r in rules.iter().rev() {
        let mut block = Vec::new();
        match r.kind {
            'c' => block.push(insn(JNE_K, 2, 0, 0, 2)),
            'b' => block.push(insn(JNE_K, 2, 0, 0, 1)),
            _ => {}
        }
        if r.access & ACC_ALL != ACC_ALL {
            block.push(insn(MOV32_X, 1, 3, 0, 0));
            block.push(insn(AND32_K, 1, 0, 0, r.access as i32));
            if r.allow {
                // Allows when it covers every access asked: (asked & rule) == asked.
                block.push(insn(JNE_X, 1, 3, 0, 0));
            } else {
                // Denies when it names any access asked: (asked & rule) != 0.
                block.push(insn(JEQ_K, 1, 0, 0, 0));
            }
        }
        if let Some(m) = r.major {
            block.push(insn(JNE_K, 4, 0, 0, m as i32));
        }
        if let Some(m) = r.minor {
            block.push(insn(JNE_K, 5, 0, 0, m as i32));
        }
        block.push(insn(MOV64_K, 0, 0, 0, i32::from(r.allow)));
        block.push(insn(EXIT, 0, 0, 0, 0));
        // Every jump of the block skips to the block's end.
        let len = block.len();
        for (i, ins) in block.iter_mut().enumerate() {
            if matches!(ins.code, JNE_K | JNE_X | JEQ_K) {
                ins.off = (len - i - 1) as i16;
            }
        }
        p.extend(block);
    }
    p.push(insn(MOV64_K, 0, 0, 0, i32::from(default)));
    p.push(insn(EXIT, 0, 0, 0, 0));
    p
}

/// The program as the kernel reads it: 8 bytes per instruction, little-endian.
pub fn encode(p: &[Insn]) -> Vec<u8> {
    p.iter()
        .flat_map(|i| {
            let mut b = [0u8; 8];
            b[0] = i.code;
            b[1] = (i.src << 4) | (i.dst & 0xf);
            b[2..4].copy_from_slice(&i.off.to_le_bytes());
            b[4..8].copy_from_slice(&i.imm.to_le_bytes());
            b
        })
        .collect()
}

/// Compile the device list and attach it to the cgroup directory `dir`. A directory
/// that is not a cgroup (no `cgroup.controllers`: the fake cgroupfs of unit tests) is
/// left alone; every real v2 cgroup has that file.
pub fn attach(dir: &std::path::Path, writes: &[(&str, String)]) -> Result<(), CgroupError> {
    if !dir.join("cgroup.controllers").exists() {
        return Ok(());
    }
    let bytes = encode(&program(&parse(writes)?));
    let io = |op: &'static str| {
        move |source: std::io::Error| CgroupError::Io {
            op,
            path: dir.to_path_buf(),
            source,
        }
    };
    let prog = warren_sys::bpf::load_cgroup_device(&bytes, "warren_devices").map_err(io(
        "loading the device filter (BPF_PROG_TYPE_CGROUP_DEVICE) for",
    ))?;
    let cg = std::fs::File::open(dir).map_err(io("opening"))?;
    warren_sys::bpf::attach_cgroup_device(&cg, &prog).map_err(io("attaching the device filter to"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the subset of eBPF that [`program`] emits, as the kernel would.
    fn run(p: &[Insn], kind: u32, access: u32, major: u32, minor: u32) -> u64 {
        let ctx = [(access << 16) | kind, major, minor];
        let mut r = [0u64; 11];
        let mut pc = 0usize;
        loop {
            let i = p[pc];
            let (d, s) = (i.dst as usize, i.src as usize);
            pc += 1;
            match i.code {
                LDX_W => r[d] = u64::from(ctx[i.off as usize / 4]),
                AND32_K => r[d] = u64::from(r[d] as u32 & i.imm as u32),
                RSH32_K => r[d] = u64::from((r[d] as u32) >> i.imm),
                MOV32_X => r[d] = u64::from(r[s] as u32),
                MOV64_K => r[d] = i.imm as i64 as u64,
                JNE_K if r[d] != i.imm as i64 as u64 => pc += i.off as usize,
                JNE_X if r[d] != r[s] => pc += i.off as usize,
                JEQ_K if r[d] == i.imm as i64 as u64 => pc += i.off as usize,
                JNE_K | JNE_X | JEQ_K => {}
                EXIT => return r[0],
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    const CHAR: u32 = 2;
    const BLOCK: u32 = 1;
    const MKNOD: u32 = 1;
    const READ: u32 = 2;
    const WRITE: u32 = 4;

    #[test]
    fn zones_get_their_nodes_and_nothing_else() {
        let p = program(&parse(&super::super::v1::device_writes()).unwrap());
        // /dev/null, /dev/zero, /dev/urandom, ptys: allowed for every access.
        for (maj, min) in [(1, 3), (1, 5), (1, 9), (5, 2), (136, 0), (136, 7)] {
            assert_eq!(run(&p, CHAR, READ | WRITE, maj, min), 1, "{maj}:{min}");
            assert_eq!(run(&p, CHAR, MKNOD, maj, min), 1, "{maj}:{min}");
        }
        // The host's disk (virtio 254:0, sda 8:0), /dev/mem (1:1), kmsg (1:11): denied.
        assert_eq!(run(&p, BLOCK, READ, 254, 0), 0);
        assert_eq!(run(&p, BLOCK, MKNOD, 8, 0), 0);
        assert_eq!(run(&p, CHAR, READ, 1, 1), 0);
        assert_eq!(run(&p, CHAR, READ | WRITE, 1, 11), 0);
        // A block device with the numbers of an allowed char device: denied.
        assert_eq!(run(&p, BLOCK, READ, 1, 3), 0);
    }

    #[test]
    fn later_rules_override_and_access_must_be_covered() {
        let w = |f: &'static str, l: &str| (f, l.to_string());
        let rules = parse(&[
            w("devices.deny", "a"),
            w("devices.allow", "c *:* m"),
            w("devices.allow", "c 10:200 rw"),
            w("devices.deny", "c 10:200 w"),
        ])
        .unwrap();
        let p = program(&rules);
        assert_eq!(run(&p, CHAR, MKNOD, 4, 1), 1, "mknod of any char device");
        assert_eq!(run(&p, CHAR, READ, 4, 1), 0, "but no use of it");
        assert_eq!(run(&p, CHAR, READ, 10, 200), 1);
        assert_eq!(run(&p, CHAR, WRITE, 10, 200), 0, "the later deny wins");
        assert_eq!(run(&p, CHAR, READ | WRITE, 10, 200), 0);
        assert_eq!(run(&p, BLOCK, MKNOD, 4, 1), 0);
        // No leading "a": allow by default.
        let p = program(&parse(&[w("devices.deny", "b 8:* rwm")]).unwrap());
        assert_eq!(run(&p, BLOCK, READ, 8, 1), 0);
        assert_eq!(run(&p, CHAR, READ, 8, 1), 1);
    }

    #[test]
    fn encoding_and_bad_rules() {
        let b = encode(&[insn(LDX_W, 4, 1, 4, 0), insn(JNE_K, 2, 0, 3, 0xffff)]);
        assert_eq!(
            b,
            [0x61, 0x14, 4, 0, 0, 0, 0, 0, 0x55, 0x02, 3, 0, 0xff, 0xff, 0, 0]
        );
        let e = parse(&[("devices.allow", "x 1:2 r".into())])
            .unwrap_err()
            .to_string();
        assert!(e.contains("x 1:2 r"), "{e}");
        assert!(parse(&[("devices.allow", "c 1:2 q".into())]).is_err());
    }
}
