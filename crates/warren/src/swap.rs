//! Swap that warren provisions: `warren swap enable | disable | status`.
//!
//! Overcommit only works when the kernel has somewhere to put cold anonymous pages;
//! without swap the only relief under pressure is the OOM killer, which chooses for
//! us. warren can provision a swap file (default `<root>/swap/swapfile`) or a zram
//! device, set `vm.swappiness`, and records what it did in `<root>/swap/state.json` so
//! `disable` turns off only warren's own swap and restores the swappiness it changed.
//!
//! The swap header is written by warren itself (no `mkswap` needed): page 0 of the
//! area holds, in the layout of the kernel's `union swap_header`, the version (1) at
//! byte 1024, `last_page` at 1028, `nr_badpages` (0) at 1032, a UUID and an empty
//! label, and the signature `SWAPSPACE2` in the last 10 bytes of the page. The file is
//! written with real zeroed blocks (swap files must not be sparse, and the kernel
//! refuses unwritten extents on some filesystems), mode 0600.

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::fsutil::atomic_write;
use crate::layout::Layout;
use crate::stats;

/// What kind of swap warren set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SwapKind {
    File,
    Zram,
}

/// `<root>/swap/state.json`: what warren enabled and what it changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwapRecord {
    pub kind: SwapKind,
    /// The swap file, or the zram block device.
    pub path: PathBuf,
    pub size_bytes: u64,
    /// vm.swappiness before warren changed it; `None` if warren left it alone.
    pub swappiness_before: Option<u64>,
    /// The value warren set.
    pub swappiness_set: Option<u64>,
}

/// One line of /proc/swaps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwapArea {
    pub path: String,
    pub kind: String,
    pub size_bytes: u64,
    pub used_bytes: u64,
    pub priority: i64,
}

/// `warren swap status`.
#[derive(Debug, Clone, Serialize)]
pub struct SwapStatus {
    /// What warren enabled (`None`: warren manages no swap in this root).
    pub warren: Option<SwapRecord>,
    /// Every active swap area on the host.
    pub areas: Vec<SwapArea>,
    pub swappiness: Option<u64>,
    pub swap_total_bytes: u64,
    pub swap_free_bytes: u64,
}

/// Options of `warren swap enable`.
#[derive(Debug, Clone)]
pub struct EnableOptions {
    pub size: u64,
    pub file: Option<PathBuf>,
    pub zram: bool,
    /// zram's compressor (`comp_algorithm`); `None`: the kernel's default.
    pub zram_algorithm: Option<String>,
    pub swappiness: u64,
}

/// The smallest area worth having (mkswap refuses fewer than 10 pages).
const MIN_PAGES: u64 = 10;

/// Page 0 of a swap area of `size` bytes: version 1, `last_page`, no bad pages, a
/// UUID from `uuid`, and the `SWAPSPACE2` signature at `page_size - 10`.
pub fn header(page_size: usize, size: u64, uuid: [u8; 16]) -> std::result::Result<Vec<u8>, String> {
    let pages = size / page_size as u64;
    if pages < MIN_PAGES {
        return Err(format!(
            "{size} bytes is too small for swap; use at least {} bytes",
            MIN_PAGES * page_size as u64
        ));
    }
    let last_page = u32::try_from(pages - 1)
        .map_err(|_| format!("{size} bytes is more than one swap area can address"))?;
    let mut page = vec![0u8; page_size];
    page[1024..1028].copy_from_slice(&1u32.to_ne_bytes());
    page[1028..1032].copy_from_slice(&last_page.to_ne_bytes());
    page[1032..1036].copy_from_slice(&0u32.to_ne_bytes());
    page[1036..1052].copy_from_slice(&uuid);
    page[page_size - 10..].copy_from_slice(b"SWAPSPACE2");
    Ok(page)
}

const BTRFS: i64 = 0x9123_683e;
const OK_MAGICS: &[(i64, &str)] = &[
    (0xef53, "ext4"),
    (0x5846_5342, "xfs"),
    (0xf2f5_2010, "f2fs"),
    (BTRFS, "btrfs"),
];
const BAD_MAGICS: &[(i64, &str)] = &[
    (0x0102_1994, "tmpfs"),
    (0x8584_58f6, "ramfs"),
    (0x794c_7630, "overlayfs"),
    (0x6969, "nfs"),
    (0xff53_4d42, "cifs"),
    (0xfe53_4d42, "smb2"),
    (0x6573_5546, "fuse"),
    (0x2fc1_2fc1, "zfs"),
    (0x7371_7368, "squashfs"),
];

/// Why a file on a filesystem with `magic` cannot hold swap (`nocow`: the file has
/// btrfs' NOCOW flag). `None` when it can, or when the filesystem is not known to fail.
pub fn fs_problem(magic: i64, nocow: bool, dir: &Path) -> Option<String> {
    let d = dir.display();
    if magic == BTRFS && !nocow {
        return Some(format!(
            "{d} is on btrfs, which holds swap files only with copy-on-write off; run 'chattr +C {d}' on an empty directory (or 'btrfs filesystem mkswapfile'), or pass --file on ext4/xfs"
        ));
    }
    if OK_MAGICS.iter().any(|(m, _)| *m == magic) {
        return None;
    }
    BAD_MAGICS.iter().find(|(m, _)| *m == magic).map(|(_, name)| {
        format!(
            "{d} is on {name}, which cannot hold a swap file (the kernel needs a local filesystem with fixed block mappings); pass --file PATH on ext4, xfs or a NOCOW btrfs directory, or use --zram"
        )
    })
}

/// Parse /proc/swaps (sizes are in KiB there).
pub fn parse_proc_swaps(text: &str) -> Vec<SwapArea> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 5 {
                return None;
            }
            Some(SwapArea {
                path: f[0].replace("\\040", " "),
                kind: f[1].to_string(),
                size_bytes: f[2].parse::<u64>().ok()? * 1024,
                used_bytes: f[3].parse::<u64>().ok()? * 1024,
                priority: f[4].parse().ok()?,
            })
        })
        .collect()
}

fn record_path(layout: &Layout) -> PathBuf {
    layout.root().join("swap/state.json")
}

/// The default swap file.
pub fn default_file(layout: &Layout) -> PathBuf {
    layout.root().join("swap/swapfile")
}

fn load_record(layout: &Layout) -> Result<Option<SwapRecord>> {
    let p = record_path(layout);
    match crate::fsutil::read_bounded(&p, crate::fsutil::MAX_SMALL_FILE) {
        Ok(b) => crate::state::parse_json(&p, &b).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).ctx(|| format!("reading {}", p.display())),
    }
}

fn swappiness_path(proc_root: &Path) -> PathBuf {
    proc_root.join("sys/vm/swappiness")
}

fn read_swappiness(proc_root: &Path) -> Option<u64> {
    fs::read_to_string(swappiness_path(proc_root))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    let _ = File::open("/dev/urandom").and_then(|mut f| {
        use std::io::Read;
        f.read_exact(&mut u)
    });
    u[6] = (u[6] & 0x0f) | 0x40; // version 4
    u[8] = (u[8] & 0x3f) | 0x80; // RFC 4122 variant
    u
}

/// Write a non-sparse swap file of `size` bytes with a header, mode 0600.
fn make_file(path: &Path, size: u64) -> Result<()> {
    let page = warren_sys::swap::page_size();
    let head = header(page, size, uuid()).map_err(Error::Invalid)?;
    let dir = path.parent().unwrap_or(Path::new("/"));
    let magic = warren_sys::fs::fs_magic(dir).ctx(|| format!("statfs {}", dir.display()))?;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .ctx(|| {
            format!(
                "creating {} (remove it first if it is a leftover)",
                path.display()
            )
        })?;
    let result = (|| {
        let mut nocow = false;
        if magic == BTRFS {
            // NOCOW sticks only while the file is empty.
            let flags = warren_sys::swap::inode_flags(&f).unwrap_or(0);
            let _ = warren_sys::swap::set_inode_flags(&f, flags | warren_sys::swap::FS_NOCOW_FL);
            nocow = warren_sys::swap::inode_flags(&f)
                .is_ok_and(|fl| fl & warren_sys::swap::FS_NOCOW_FL != 0);
        }
        if let Some(p) = fs_problem(magic, nocow, dir) {
            return Err(Error::Unsupported(p));
        }
        let zeros = vec![0u8; 1 << 20];
        let mut left = size - size % page as u64;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            f.write_all(&zeros[..n])
                .ctx(|| format!("writing {}", path.display()))?;
            left -= n as u64;
        }
        f.seek(SeekFrom::Start(0))
            .and_then(|_| f.write_all(&head))
            .and_then(|_| f.sync_all())
            .ctx(|| format!("writing the swap header of {}", path.display()))
    })();
    if result.is_err() {
        let _ = fs::remove_file(path);
    }
    result
}

fn zram_dir(sys_root: &Path) -> PathBuf {
    sys_root.join("block/zram0")
}

/// Set up /dev/zram0 (compressed RAM) as a swap device of `size` bytes.
fn make_zram(sys_root: &Path, size: u64, algorithm: Option<&str>) -> Result<PathBuf> {
    let dir = zram_dir(sys_root);
    if !dir.exists() {
        return Err(Error::Unsupported(format!(
            "zram is not available here: {} does not exist; load it with 'modprobe zram' (kernel option CONFIG_ZRAM), or use a swap file (drop --zram)",
            dir.display()
        )));
    }
    let current = fs::read_to_string(dir.join("disksize")).unwrap_or_default();
    if current.trim() != "0" {
        return Err(Error::Unsupported(format!(
            "zram0 is already in use (disksize {}); warren uses only an unused zram0. Reset it ('echo 1 > {}/reset') if nothing needs it, or use a swap file",
            current.trim(),
            dir.display()
        )));
    }
    if let Some(alg) = algorithm {
        // Only before disksize is set; the file lists the choices, the current in [].
        let offered = fs::read_to_string(dir.join("comp_algorithm")).unwrap_or_default();
        let names: Vec<&str> = offered
            .split_whitespace()
            .map(|a| a.trim_matches(|c| c == '[' || c == ']'))
            .collect();
        if !names.contains(&alg) {
            return Err(Error::Invalid(format!(
                "--zram-algorithm {alg:?}: this kernel's zram offers {}; pick one of them",
                names.join(", ")
            )));
        }
        fs::write(dir.join("comp_algorithm"), alg)
            .ctx(|| format!("setting {}/comp_algorithm to {alg}", dir.display()))?;
    }
    fs::write(dir.join("disksize"), size.to_string())
        .ctx(|| format!("setting {}/disksize", dir.display()))?;
    let dev = PathBuf::from("/dev/zram0");
    let head = header(warren_sys::swap::page_size(), size, uuid()).map_err(Error::Invalid)?;
    let written = OpenOptions::new()
        .write(true)
        .open(&dev)
        .and_then(|mut f| f.write_all(&head).and_then(|_| f.sync_all()));
    if let Err(e) = written {
        let _ = fs::write(dir.join("reset"), "1");
        return Err(e).ctx(|| format!("writing the swap header to {}", dev.display()));
    }
    Ok(dev)
}

/// `warren swap enable`. Returns the record, and whether swap was already enabled.
pub fn enable(
    layout: &Layout,
    proc_root: &Path,
    sys_root: &Path,
    o: &EnableOptions,
) -> Result<(SwapRecord, bool)> {
    if let Some(r) = load_record(layout)? {
        return Ok((r, true));
    }
    if o.swappiness > 200 {
        return Err(Error::Invalid(format!(
            "--swappiness {}: expected 0 to 200",
            o.swappiness
        )));
    }
    let dir = layout.root().join("swap");
    fs::create_dir_all(&dir).ctx(|| format!("creating {}", dir.display()))?;
    let (kind, path) = if o.zram {
        (
            SwapKind::Zram,
            make_zram(sys_root, o.size, o.zram_algorithm.as_deref())?,
        )
    } else {
        let path = o.file.clone().unwrap_or_else(|| default_file(layout));
        make_file(&path, o.size)?;
        (SwapKind::File, path)
    };
    let undo = |e: Error| {
        let cleanup = match kind {
            SwapKind::File => fs::remove_file(&path).ctx(|| format!("removing {}", path.display())),
            SwapKind::Zram => fs::write(zram_dir(sys_root).join("reset"), "1")
                .ctx(|| "resetting zram0".to_string()),
        };
        e.with_cleanup(cleanup.err())
    };
    if let Err(e) = warren_sys::swap::swapon(&path) {
        return Err(undo(Error::Refused(format!(
            "swapon {}: {e}; the filesystem may not support swap files (use ext4 or xfs)",
            path.display()
        ))));
    }
    let before = read_swappiness(proc_root);
    let changed = before.is_some_and(|b| b != o.swappiness);
    if changed {
        let p = swappiness_path(proc_root);
        if let Err(e) = fs::write(&p, o.swappiness.to_string()) {
            let _ = warren_sys::swap::swapoff(&path);
            return Err(undo(Error::Io {
                context: format!("writing {}", p.display()),
                source: e,
            }));
        }
    }
    let record = SwapRecord {
        kind,
        path: path.clone(),
        size_bytes: o.size,
        swappiness_before: before.filter(|_| changed),
        swappiness_set: changed.then_some(o.swappiness),
    };
    let rp = record_path(layout);
    let json = serde_json::to_vec_pretty(&record).expect("record serialises");
    atomic_write(&rp, &json, true).ctx(|| format!("writing {}", rp.display()))?;
    Ok((record, false))
}

/// `warren swap disable`: turn off warren's own swap only, restore vm.swappiness if
/// warren changed it and nobody changed it since. `None`: warren had enabled nothing.
pub fn disable(layout: &Layout, proc_root: &Path, sys_root: &Path) -> Result<Option<SwapRecord>> {
    let Some(r) = load_record(layout)? else {
        return Ok(None);
    };
    let active = parse_proc_swaps(&fs::read_to_string(proc_root.join("swaps")).unwrap_or_default())
        .iter()
        .any(|a| Path::new(&a.path) == r.path);
    if active {
        warren_sys::swap::swapoff(&r.path).map_err(|e| {
            Error::Refused(format!(
                "swapoff {}: {e}; the pages swapped out there must fit back in RAM, so free memory (halt zones) and retry",
                r.path.display()
            ))
        })?;
    }
    match r.kind {
        SwapKind::File => match fs::remove_file(&r.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).ctx(|| format!("removing {}", r.path.display()))
            }
            _ => {}
        },
        SwapKind::Zram => {
            let p = zram_dir(sys_root).join("reset");
            fs::write(&p, "1").ctx(|| format!("writing {}", p.display()))?;
        }
    }
    if let (Some(before), Some(set)) = (r.swappiness_before, r.swappiness_set) {
        if read_swappiness(proc_root) == Some(set) {
            let p = swappiness_path(proc_root);
            fs::write(&p, before.to_string()).ctx(|| format!("writing {}", p.display()))?;
        }
    }
    let rp = record_path(layout);
    fs::remove_file(&rp).ctx(|| format!("removing {}", rp.display()))?;
    Ok(Some(r))
}

/// `warren swap status`.
pub fn status(layout: &Layout, proc_root: &Path) -> Result<SwapStatus> {
    let mem = stats::meminfo(proc_root);
    Ok(SwapStatus {
        warren: load_record(layout)?,
        areas: parse_proc_swaps(&fs::read_to_string(proc_root.join("swaps")).unwrap_or_default()),
        swappiness: read_swappiness(proc_root),
        swap_total_bytes: mem.get("SwapTotal").copied().unwrap_or(0),
        swap_free_bytes: mem.get("SwapFree").copied().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_mkswap_layout() {
        let h = header(4096, 64 << 20, [7; 16]).unwrap();
        assert_eq!(h.len(), 4096);
        assert_eq!(&h[4086..], b"SWAPSPACE2");
        assert_eq!(u32::from_ne_bytes(h[1024..1028].try_into().unwrap()), 1);
        assert_eq!(
            u32::from_ne_bytes(h[1028..1032].try_into().unwrap()),
            (64 << 20) / 4096 - 1
        );
        assert_eq!(u32::from_ne_bytes(h[1032..1036].try_into().unwrap()), 0);
        assert_eq!(&h[1036..1052], &[7; 16]);
        assert!(h[..1024].iter().all(|b| *b == 0), "boot block left empty");
        assert!(header(4096, 9 * 4096, [0; 16])
            .unwrap_err()
            .contains("too small"));
        // 64 KiB pages (arm64, ppc64): the signature moves with the page.
        let h = header(65536, 64 << 20, [0; 16]).unwrap();
        assert_eq!(&h[65526..], b"SWAPSPACE2");
    }

    #[test]
    fn filesystems_that_cannot_hold_swap_are_named_with_the_fix() {
        let d = Path::new("/var/lib/warren/swap");
        assert_eq!(fs_problem(0xef53, false, d), None);
        assert_eq!(fs_problem(BTRFS, true, d), None);
        let e = fs_problem(BTRFS, false, d).unwrap();
        assert!(e.contains("btrfs") && e.contains("chattr +C"), "{e}");
        let e = fs_problem(0x0102_1994, false, d).unwrap();
        assert!(e.contains("tmpfs") && e.contains("--file"), "{e}");
        let e = fs_problem(0x794c_7630, false, d).unwrap();
        assert!(e.contains("overlayfs"), "{e}");
        assert!(fs_problem(0x6969, false, d).unwrap().contains("nfs"));
    }

    #[test]
    fn proc_swaps_parses() {
        let text = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/var/lib/warren/swap/swapfile          file\t\t131068\t\t1024\t\t-2\n/dev/zram0                              partition\t65532\t\t0\t\t100\n";
        let a = parse_proc_swaps(text);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].path, "/var/lib/warren/swap/swapfile");
        assert_eq!(a[0].size_bytes, 131068 * 1024);
        assert_eq!(a[0].used_bytes, 1024 * 1024);
        assert_eq!(a[0].priority, -2);
        assert_eq!(a[1].kind, "partition");
        assert!(parse_proc_swaps("Filename Type Size Used Priority\n").is_empty());
    }
}
