//! warren on a stock Debian 12 host, proven in a VM: cgroup v2 only (`cgroup_no_v1=all`),
//! warren started from a service's cgroup that holds other processes (as systemd runs a
//! `Delegate=yes` unit), on two kernels: Debian 12's own 6.1 and the newer one from
//! bookworm-backports.
//!
//! This host is cgroup v1 hybrid, so the v2 driver can only meet a real kernel in a
//! guest: QEMU without KVM (TCG), Debian's cloud kernel unpacked (never installed), an
//! initramfs of static busybox and warren's release binaries (`scripts/vm/`). The guest
//! runs `scripts/vm/scenario.sh` and prints one `WARREN-VM-RESULT <check> ok|fail
//! <detail>` line per check; this test asserts on them with the list it shares with
//! `scenario_host.rs`, which runs the same script on this host (`tests/scenario`). It fails loudly, saying what to
//! install, when QEMU or a kernel cannot be had. QEMU is killed by a guard on every path.
//!
//! `WARREN_VM_BIN_DIR` names a directory holding release `warren` and `warren-init` to
//! use instead of building them; `WARREN_VM_CACHE` the kernel cache (default
//! /var/cache/warren-vm).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod scenario;

const WARREN: &str = env!("CARGO_BIN_EXE_warren");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Kills and reaps QEMU when dropped, whatever happened.
struct Qemu(Child);

impl Drop for Qemu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run a script of scripts/vm and return its last line of output.
fn script(name: &str, args: &[&str]) -> String {
    let path = repo().join("scripts/vm").join(name);
    let out = Command::new(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", path.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed (exit {:?}): {}\nscripts/test.sh installs what the VM test needs: qemu-system-x86 from bookworm-backports, busybox-static, the bookworm-backports apt source",
        path.display(),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

/// The release binaries: built here (the guest is slow enough without a debug build).
fn release_bins() -> PathBuf {
    if let Some(dir) = std::env::var_os("WARREN_VM_BIN_DIR") {
        return PathBuf::from(dir);
    }
    // <target>/<triple>/debug/warren → <target>; release binaries land in
    // <target>/<triple>/release (.cargo/config.toml names the triple).
    let debug_bin = Path::new(WARREN);
    let profile_dir = debug_bin.parent().unwrap();
    let triple_dir = profile_dir.parent().unwrap();
    let target = if triple_dir.file_name().is_some_and(|n| n == "target") {
        triple_dir
    } else {
        triple_dir.parent().unwrap()
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(repo())
        .env("CARGO_TARGET_DIR", target)
        .args(["build", "--release", "-p", "warren", "--bins"])
        .status()
        .unwrap_or_else(|e| panic!("running {cargo} build --release: {e}"));
    assert!(status.success(), "cargo build --release failed");
    triple_dir.join("release")
}

/// Boot one kernel, return the console and the parsed results.
fn boot(kernel: &str, bins: &Path) -> (String, Vec<scenario::Check>) {
    let kdir = script("fetch-kernel.sh", &[kernel]);
    let tmp = tempfile::tempdir().unwrap();
    let initrd = tmp.path().join("initrd.cpio.gz");
    script(
        "build-initramfs.sh",
        &[&kdir, bins.to_str().unwrap(), initrd.to_str().unwrap()],
    );
    let console = tmp.path().join("console.log");
    let qemu_err = tmp.path().join("qemu.err");
    // Both to files: a pipe nobody reads while QEMU runs could fill and stall it.
    let child = Command::new(repo().join("scripts/vm/boot.sh"))
        .args([kdir.as_str(), initrd.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&console).unwrap())
        .stderr(std::fs::File::create(&qemu_err).unwrap())
        .spawn()
        .expect("starting scripts/vm/boot.sh");
    let mut qemu = Qemu(child);
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = qemu.0.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let err = std::fs::read_to_string(&qemu_err).unwrap_or_default();
    let text = std::fs::read_to_string(&console).unwrap_or_default();
    assert_ne!(
        status.and_then(|s| s.code()),
        Some(127),
        "QEMU is not installed: {err}"
    );
    assert!(
        status.is_some(),
        "the {kernel} guest did not power off within 300 s; console:\n{text}"
    );
    assert!(
        text.contains("WARREN-VM-DONE"),
        "the {kernel} guest did not finish its scenario (QEMU: {status:?} {err}); console:\n{text}"
    );
    let checks = scenario::parse(&text);
    (text, checks)
}

#[test]
fn cgroup_v2_from_a_service_cgroup_on_debian_kernels() {
    let bins = release_bins();
    let mut failures = Vec::new();
    for kernel in ["debian12", "backports"] {
        let (console, checks) = boot(kernel, &bins);
        let version = console
            .lines()
            .find_map(|l| l.strip_prefix("WARREN-VM-KERNEL "))
            .unwrap_or("?")
            .trim()
            .to_string();
        for c in &checks {
            eprintln!(
                "[{kernel} {version}] {} {} {}",
                c.name,
                if c.ok { "ok" } else { "FAIL" },
                c.detail
            );
        }
        for m in console
            .lines()
            .filter(|l| l.starts_with("WARREN-VM-MEASURE"))
        {
            eprintln!("[{kernel} {version}] {m}");
        }
        failures.extend(scenario::failures(&version, &checks, true));
        if failures
            .iter()
            .any(|f| f.starts_with(&format!("[{version}]")))
        {
            let log: Vec<&str> = console
                .lines()
                .filter(|l| l.starts_with("WARREN-VM-LOG"))
                .collect();
            eprintln!("[{kernel} {version}] guest log:\n{}", log.join("\n"));
        }
    }
    assert!(
        failures.is_empty(),
        "warren on cgroup v2 in the VM:\n{}",
        failures.join("\n")
    );
}
