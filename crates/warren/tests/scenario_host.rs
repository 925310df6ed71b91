//! The VM's scenario (`scripts/vm/scenario.sh`) on this host, whatever its cgroup
//! version (a v1 hybrid here): the same script and the same list of required checks as
//! `cgroup_v2_vm.rs` (`tests/scenario`), so a difference between the v1 and v2 drivers
//! is a failing test rather than a surprise on a user's host.
//!
//! Sandbox: a temporary state root and OCI root; zone, container and cgroupsPath names
//! prefixed with this test's pid; cgroups only beneath this process's own (warren's
//! group and OCI leaves, which the script checks are gone at the end); the bridge, its
//! subnet and the swap file are the test's own; the device the zone must not read is a
//! loop device of the test's own file. Guards halt and delete everything, turn the
//! swap off, remove the bridge and any cgroup left, also when the test fails.

mod common;
mod scenario;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Env;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// This process's own cgroup directory in every mounted hierarchy.
fn own_cgroups() -> Vec<PathBuf> {
    let mounts =
        warren::cgroups::parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap());
    let own =
        warren::cgroups::parse_proc_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap());
    mounts
        .iter()
        .filter_map(|m| {
            let path = own
                .iter()
                .find(|(c, _)| {
                    if m.controllers.is_empty() {
                        c.is_empty()
                    } else {
                        m.controllers.iter().all(|x| c.contains(x))
                    }
                })
                .map(|(_, p)| p.clone())?;
            Some(m.mountpoint.join(path.trim_start_matches('/')))
        })
        .filter(|d| d.is_dir())
        .collect()
}

/// Deletes the bridge, its ports and its nftables table (declared before the `Env`,
/// so the zones are halted first).
struct BridgeGuard(String);

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        if let Ok(mut nl) = warren::net::netlink::Netlink::open() {
            if let Ok(d) = std::fs::read_dir(format!("/sys/class/net/{}/brif", self.0)) {
                for port in d.flatten() {
                    let _ = nl.delete_link(&port.file_name().to_string_lossy());
                }
            }
            let _ = nl.delete_link(&self.0);
        }
        let _ = warren::net::filter::remove_table(&self.0);
    }
}

/// Removes this run's OCI containers and their leaves, and turns its swap off.
struct RunGuard<'a> {
    env: &'a Env,
    prefix: String,
    search: Vec<PathBuf>,
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        for id in ["c1", "c2"] {
            let id = format!("{}{id}", self.prefix);
            let _ = self.env.run(&["oci", "delete", "--force", &id]);
        }
        let _ = self.env.run(&["swap", "disable"]);
        for dir in &self.search {
            let oci = dir.join("warren-oci");
            if let Ok(d) = std::fs::read_dir(&oci) {
                for e in d.flatten() {
                    if e.file_name().to_string_lossy().contains(&self.prefix) {
                        common::force_remove_cgroup(&e.path());
                    }
                }
            }
            // Fails harmlessly while other tests' containers live there.
            let _ = std::fs::remove_dir(&oci);
        }
    }
}

#[test]
fn the_vm_scenario_on_this_host() {
    common::require_root();
    common::require_busybox();
    let pid = std::process::id();
    let prefix = format!("s{pid:x}-");
    let bridge = BridgeGuard(format!("ws{:x}", pid & 0xff_ffff));
    let env = Env::new();
    let search = own_cgroups();
    let guard = RunGuard {
        env: &env,
        prefix: prefix.clone(),
        search: search.clone(),
    };
    let tmp = env.root().join("scenario-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    // A block device of the test's own, which the zone must not be able to read.
    let image = tmp.join("denied.img");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let loopdev = warren_sys::loopdev::attach(&std::fs::File::open(&image).unwrap())
        .expect("attaching a loop device to the test's image");
    let subnet = format!("10.237.{}.0/24", pid % 200 + 20);
    let gateway = format!("10.237.{}.1", pid % 200 + 20);
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_warren")).parent().unwrap();
    let group = warren::layout::Layout::new(env.root()).cgroup_group();
    let search_list = search
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ");

    let out_path = tmp.join("scenario.log");
    let mut cmd = Command::new("sh");
    cmd.arg(repo().join("scripts/vm/scenario.sh"))
        .env("WARREN_ROOT", env.root())
        .env("WARREN_RUN_DIR", env.root().join("run"))
        .env("WARREN_OCI_ROOT", env.root().join("oci"))
        .env_remove("WARREN_CGROUP")
        .env_remove("WARREN_STORAGE")
        .env_remove("WARREN_VM_SERVICE")
        .env("WARREN_SCENARIO_PATH", bin_dir)
        .env("WARREN_SCENARIO_PREFIX", &prefix)
        .env("WARREN_SCENARIO_TMP", &tmp)
        .env("WARREN_SCENARIO_GROUP", &group)
        .env("WARREN_SCENARIO_CGROUPS", &search_list)
        .env("WARREN_SCENARIO_CONTRIB", repo().join("contrib"))
        .env(
            "WARREN_SCENARIO_SWAP",
            format!("--file {}", env.root().join("swapfile").display()),
        )
        .env(
            "WARREN_SCENARIO_BRIDGE_SETS",
            format!("--set net-bridge={} --set net-subnet={subnet}", bridge.0),
        )
        .env("WARREN_SCENARIO_GATEWAY", &gateway)
        .env(
            "WARREN_SCENARIO_DENIED_DEV",
            format!("7:{}", loopdev.number),
        )
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(Stdio::inherit())
        .process_group(0);
    let mut child = cmd.spawn().expect("running sh scripts/vm/scenario.sh");
    let deadline = Instant::now() + Duration::from_secs(600);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            // The script's process group: its own children (warren, logins) only.
            let _ = warren_sys::proc::kill(-(child.id() as i32), warren_sys::libc::SIGKILL);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    let checks = scenario::parse(&output);
    for c in &checks {
        eprintln!(
            "[host] {} {} {}",
            c.name,
            if c.ok { "ok" } else { "FAIL" },
            c.detail
        );
    }
    let v2 = !std::fs::read_to_string("/proc/self/cgroup")
        .unwrap()
        .lines()
        .any(|l| !l.starts_with("0::"));
    let failures = scenario::failures("host", &checks, v2);
    if !failures.is_empty() {
        let log: Vec<&str> = output
            .lines()
            .filter(|l| l.starts_with("WARREN-VM-LOG"))
            .collect();
        eprintln!("[host] log:\n{}", log.join("\n"));
    }
    assert!(
        status.is_some(),
        "the scenario did not finish within 600 s; output:\n{output}"
    );
    assert!(
        failures.is_empty(),
        "the VM scenario on this host ({}):\n{}",
        if v2 { "cgroup v2" } else { "cgroup v1" },
        failures.join("\n")
    );
    drop(guard);
    drop(loopdev);
}
