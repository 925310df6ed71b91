//! Issue 22, items 1–6: nothing hangs, nothing is shared by accident, nothing is stuck.
//! Each test is named after what broke: a killed boot's lock holder, a halt on a full
//! state filesystem, a torn runtime record, leftovers gc did not know, one damaged
//! shared file stopping gc, a lost or copied id range.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{alive, Env};

/// A pid that names no process now (for leftovers "of a dead writer").
fn dead_pid() -> i32 {
    (4_000_000..4_100_000)
        .find(|p| !Path::new(&format!("/proc/{p}")).exists())
        .expect("a free pid number")
}

fn lock_path(env: &Env, zone: &str) -> PathBuf {
    env.root().join(format!("locks/zone-{zone}.lock"))
}

#[test]
fn killed_boot_leaves_no_lock_holder() {
    let env = Env::new();
    env.host_zone("z", &[]);
    // Not `output()`: a holder that kept warren's stdout would make it wait forever
    // instead of failing below.
    let status = env
        .cmd()
        .args(["boot", "z"])
        .env(warren::fault::ENV, "boot.holder-alive")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "warren was not killed at boot.holder-alive"
    );
    // The holder dies with warren (PDEATHSIG); give the kernel a moment to deliver it.
    let lock = lock_path(&env, "z");
    let t = Instant::now();
    let mut holders = warren::lock::holders(Path::new("/proc"), &lock);
    while !holders.is_empty() && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
        holders = warren::lock::holders(Path::new("/proc"), &lock);
    }
    if !holders.is_empty() {
        // Do not leave it behind (it would hold the test's lock forever): it is this
        // test's process, found by the lock file of this test's own state root.
        for h in &holders {
            let _ = Command::new("kill")
                .args(["-9", &h.pid.to_string()])
                .status();
        }
        panic!("a killed boot left the zone's lock held by {holders:?}");
    }
    env.ok(&["--wait", "5", "halt", "z"]);
    env.ok(&["--wait", "5", "gc"]);
    env.ok(&["--wait", "5", "boot", "z"]);
    env.ok(&["--wait", "5", "halt", "z"]);
}

#[test]
fn lock_wait_names_the_holder_and_wait_bounds_it() {
    let env = Env::new();
    env.host_zone("z", &[]);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(lock_path(&env, "z"))
        .unwrap();
    f.lock().unwrap();
    let t = Instant::now();
    let r = env.run(&["--wait", "0.5", "boot", "z"]);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the wait was not bounded"
    );
    let me = std::process::id();
    r.fails(6, &format!("held by pid {me}"));
    // Unbounded, it says whose lock it waits for after a few seconds, then goes on.
    let child = env
        .cmd()
        .args(["boot", "z"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(warren::lock::NOTICE_AFTER + Duration::from_millis(1500));
    drop(f);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("waiting for zone z's lock, held by pid {me}")),
        "{err}"
    );
    env.ok(&["halt", "z"]);
}

/// A tmpfs mounted over a test's state root, with a size and an inode limit; zones are
/// halted and deleted through warren before it is unmounted, also on panic.
struct SmallRoot {
    env: Env,
}

impl SmallRoot {
    fn new() -> SmallRoot {
        let env = Env::new();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=48m,nr_inodes=20000,mode=0700"])
            .arg("tmpfs")
            .arg(env.root())
            .status()
            .unwrap();
        assert!(st.success(), "mounting a tmpfs state root failed");
        SmallRoot { env }
    }

    /// Use up the filesystem's blocks (`inodes` false) or inodes.
    fn fill(&self, inodes: bool) {
        let dir = self.env.root().join("filler");
        std::fs::create_dir_all(&dir).unwrap();
        // Fresh names each time: filling again after a command freed something.
        let n = std::fs::read_dir(&dir).unwrap().count();
        if inodes {
            for i in n.. {
                if std::fs::File::create(dir.join(i.to_string())).is_err() {
                    break;
                }
            }
        } else {
            use std::io::Write;
            let Ok(mut f) = std::fs::File::create(dir.join(format!("blocks-{n}"))) else {
                return;
            };
            let chunk = vec![7u8; 1 << 20];
            while f.write_all(&chunk).is_ok() {}
        }
        let probe = self.env.root().join("zones/.probe");
        let wrote = std::fs::write(&probe, vec![1u8; 65536]);
        let _ = std::fs::remove_file(&probe);
        assert!(wrote.is_err(), "the state filesystem is not full");
    }

    fn unfill(&self) {
        let _ = std::fs::remove_dir_all(self.env.root().join("filler"));
    }
}

impl Drop for SmallRoot {
    fn drop(&mut self) {
        self.unfill();
        let _ = self.env.run(&["halt", "--all", "--timeout", "1"]);
        if let Ok(entries) = std::fs::read_dir(self.env.root().join("zones")) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !name.starts_with('.') {
                    let _ = self.env.run(&["delete", "--force", &name]);
                }
            }
        }
        let _ = self.env.run(&["template", "delete", "host"]);
        for d in self.env.group_dirs() {
            common::force_remove_cgroup(&d);
        }
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.env.root())
            .status();
    }
}

#[test]
fn halt_reboot_delete_and_gc_stop_zones_on_a_full_state_filesystem() {
    for inodes in [false, true] {
        let small = SmallRoot::new();
        let env = &small.env;
        for z in ["a", "b", "c"] {
            env.host_zone(z, &[]);
            env.ok(&["boot", z]);
        }
        env.host_zone("e", &["priority=best-effort"]);
        env.ok(&["boot", "e"]);
        let (pa, pb, pc) = (env.init_pid("a"), env.init_pid("b"), env.init_pid("c"));
        let pe = env.init_pid("e");
        // Thresholds every host crosses at once, no grace: one eviction, of "e".
        let cfg = env.root().join("agent.toml");
        std::fs::write(
            &cfg,
            "suspend-first = false\ninterval-ms = 50\nwindow-s = 0.5\nhalt-timeout-s = 1\n[available]\ntrigger = 100.0\nclear = 100.0\ngrace-s = 0.0\n",
        )
        .unwrap();
        small.fill(inodes);
        let what = if inodes { "inodes" } else { "blocks" };
        let r = env.run(&["halt", "a", "--timeout", "1"]);
        assert_eq!(r.code, 0, "halt with no free {what}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("recording shutting_down before the stop failed"),
            "the halt did not meet the full disk: {}",
            r.stderr
        );
        assert!(
            !alive(pa),
            "zone a still runs after halt with no free {what}"
        );
        assert_eq!(env.state("a"), "installed");
        small.fill(inodes);
        let r = env.run(&["agent", "--once", "--config", cfg.to_str().unwrap()]);
        assert!(
            !alive(pe),
            "the agent did not evict with no free {what}: {} {}",
            r.stdout,
            r.stderr
        );
        assert_eq!(env.state("e"), "installed");
        small.fill(inodes);
        // reboot's halt stops the zone whatever its boot then does (the halt frees the
        // record it wrote, which may be room enough for the new one, or not).
        let r = env.run(&["reboot", "c", "--timeout", "1"]);
        assert!(
            !alive(pc),
            "zone c's old init survived reboot with no free {what}"
        );
        let state = env.state("c");
        match r.code {
            0 => assert_eq!(state, "running", "{}", r.stderr),
            _ => assert_eq!(state, "installed", "{}", r.stderr),
        }
        small.fill(inodes);
        let r = env.run(&["delete", "--force", "b"]);
        assert_eq!(
            r.code, 0,
            "delete --force with no free {what}: {}",
            r.stderr
        );
        assert!(!alive(pb), "zone b still runs after delete --force");
        assert!(!env.root().join("zones/b").exists());
        small.fill(inodes);
        let r = env.run(&["gc"]);
        assert_eq!(r.code, 0, "gc with no free {what}: {}", r.stderr);
        small.unfill();
        env.ok(&["boot", "a"]);
        env.ok(&["halt", "a"]);
    }
}

#[test]
fn empty_or_torn_runtime_record_is_stale_not_corrupt() {
    let env = Env::new();
    env.host_zone("z", &[]);
    for torn in [Some(&b""[..]), Some(&b"{\"state\": \"runn"[..]), None] {
        env.ok(&["boot", "z"]);
        let pid = env.init_pid("z");
        let rt = env.root().join("zones/z/runtime.json");
        match torn {
            Some(bytes) => std::fs::write(&rt, bytes).unwrap(),
            // Removed: the zone's cgroups, found by name, are what is left of it.
            None => std::fs::remove_file(&rt).unwrap(),
        }
        assert_eq!(env.state("z"), "installed");
        env.ok(&["halt", "z"]);
        assert!(!alive(pid), "the zone's init survived its torn record");
        let group = env.group_dirs();
        assert!(
            group.iter().all(|g| !g.join("z").exists()),
            "the zone's cgroups survived: {group:?}"
        );
        assert!(!rt.exists());
    }
    env.ok(&["boot", "z"]);
    env.ok(&["halt", "z"]);
}

#[test]
fn gc_collects_disk_staging_and_temp_files_everywhere() {
    let env = Env::new();
    env.host_zone("z", &[]);
    let dead = dead_pid();
    let root = env.root();
    for d in ["userns", "net", "swap"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let leftovers = [
        root.join(format!("zones/z/.disk-img-{dead}-1a2b")),
        root.join(format!("zones/z/.disk-stage-{dead}-1a2c")),
        root.join(format!("userns/.1073741824-z.tmp-{dead}")),
        root.join(format!("net/.wbr0.json.tmp-{dead}")),
        root.join(format!("swap/.state.json.tmp-{dead}")),
        root.join(format!(".defaults.toml.tmp-{dead}")),
        root.join(format!("locks/.x.tmp-{dead}")),
    ];
    for l in &leftovers {
        if l.to_string_lossy().contains("disk-stage") {
            std::fs::create_dir_all(l.join("upper")).unwrap();
        } else {
            std::fs::write(l, b"x").unwrap();
        }
    }
    // A tenant's file of the same shape inside the zone's own tree is not warren's.
    let upper = root.join("zones/z/upper");
    std::fs::create_dir_all(&upper).unwrap();
    let tenant = upper.join(format!(".mine.tmp-{dead}"));
    std::fs::write(&tenant, b"keep").unwrap();
    let gc = env.ok(&["gc"]);
    for l in &leftovers {
        assert!(!l.exists(), "gc left {}: {}", l.display(), gc.stdout);
    }
    assert!(tenant.exists(), "gc removed a file inside the zone's tree");
}

#[test]
fn one_damaged_shared_file_does_not_stop_gc() {
    let env = Env::new();
    env.host_zone("z", &[]);
    let root = env.root();
    // A template whose manifest is garbled, one whose manifest is missing.
    for (t, manifest) in [("garbled", Some("not = [toml")), ("bare", None)] {
        std::fs::create_dir_all(root.join("templates").join(t).join("root")).unwrap();
        if let Some(m) = manifest {
            std::fs::write(root.join("templates").join(t).join("template.toml"), m).unwrap();
        }
    }
    std::fs::create_dir_all(root.join("net")).unwrap();
    std::fs::write(root.join("net/wbr9.json"), b"{garbage").unwrap();
    let _ = std::fs::remove_dir_all(root.join("userns"));
    std::fs::write(root.join("userns"), b"not a directory").unwrap();
    std::fs::create_dir_all(root.join("locks/zone-ghost.lock")).unwrap();
    std::fs::write(root.join("locks/zone-ghost.lock/x"), b"x").unwrap();
    let dead = dead_pid();
    let leftover = root.join(format!("zones/.new-q-{dead}-1f"));
    std::fs::create_dir_all(&leftover).unwrap();
    let gc = env.run(&["gc"]);
    assert_eq!(gc.code, 0, "gc stopped: {} {}", gc.stdout, gc.stderr);
    assert!(!leftover.exists(), "gc collected nothing: {}", gc.stdout);
    for needle in [
        "garbled",
        "bare/template.toml is missing",
        "wbr9.json",
        "userns",
    ] {
        assert!(
            gc.stderr.contains(needle),
            "gc did not report {needle}: {}",
            gc.stderr
        );
    }
    // The remedies offered work.
    env.run(&["boot", "z"]).fails(10, "userns: not a directory");
    std::fs::remove_file(root.join("userns")).unwrap();
    let gc = env.ok(&["gc"]);
    assert!(gc.stdout.contains("re-recorded"), "{}", gc.stdout);
    env.ok(&["template", "delete", "garbled"]);
    env.ok(&["template", "delete", "bare"]);
    assert!(!root.join("templates/bare").exists());
    let r = env.run(&["template", "delete", "bare"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    std::fs::remove_file(root.join("net/wbr9.json")).unwrap();
    env.ok(&["boot", "z"]);
    env.ok(&["halt", "z"]);
    // An empty directory in place of a zone's lock file is taken away.
    std::fs::remove_file(lock_path(&env, "z")).unwrap();
    std::fs::create_dir(lock_path(&env, "z")).unwrap();
    env.ok(&["boot", "z"]);
    // A non-empty one is reported with its remedy.
    let r = env.run(&["--wait", "1", "gc"]);
    assert_eq!(r.code, 0);
    env.ok(&["halt", "z"]);
}

#[test]
fn delete_force_removes_a_zone_whatever_its_files() {
    let env = Env::new();
    env.host_zone("z", &[]);
    env.ok(&["boot", "z"]);
    let pid = env.init_pid("z");
    std::fs::write(
        env.root().join("zones/z/state.json"),
        b"{\"version\": 1, \"sta",
    )
    .unwrap();
    let r = env.run(&["halt", "z"]);
    assert_eq!(r.code, 10, "{}", r.stderr);
    assert!(r.stderr.contains("delete --force z"), "{}", r.stderr);
    env.ok(&["delete", "--force", "z"]);
    assert!(!alive(pid), "the zone's init survived delete --force");
    assert!(!env.root().join("zones/z").exists());
    assert!(env.group_dirs().iter().all(|g| !g.join("z").exists()));
}

fn idmap_base(env: &Env, zone: &str) -> u64 {
    let r = env.ok(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .find(|z| z["name"] == zone)
        .and_then(|z| z["idmap"]["base"].as_u64())
        .unwrap_or_else(|| panic!("zone {zone} has no id range: {}", r.stdout))
}

#[test]
fn lost_userns_record_is_rederived_not_reused() {
    let env = Env::new();
    env.host_zone("a", &[]);
    env.ok(&["boot", "a"]);
    let a = idmap_base(&env, "a");
    let record = env.root().join(format!("userns/{a}-a"));
    assert!(record.exists(), "no allocator record {}", record.display());
    std::fs::remove_file(&record).unwrap();
    env.host_zone("b", &[]);
    env.ok(&["boot", "b"]);
    let b = idmap_base(&env, "b");
    assert_ne!(a, b, "zone b got running zone a's host ids");
    env.ok(&["gc"]);
    assert!(record.exists(), "gc did not re-record zone a's range");
    env.ok(&["halt", "a"]);
    env.ok(&["halt", "b"]);
}

#[test]
fn lost_userns_record_of_a_halted_zone_is_not_handed_out_again() {
    let env = Env::new();
    env.host_zone("a", &[]);
    let a = idmap_base(&env, "a");
    let record = env.root().join(format!("userns/{a}-a"));
    std::fs::remove_file(&record).unwrap();
    env.host_zone("b", &[]);
    assert_ne!(
        a,
        idmap_base(&env, "b"),
        "zone b got halted zone a's host ids"
    );
    assert!(
        record.exists(),
        "the allocation did not re-record zone a's range"
    );
}

#[test]
fn two_state_roots_do_not_hand_out_the_same_host_ids() {
    let (one, two) = (Env::new(), Env::new());
    one.host_zone("a", &[]);
    two.host_zone("a", &[]);
    one.ok(&["boot", "a"]);
    two.ok(&["boot", "a"]);
    assert_ne!(idmap_base(&one, "a"), idmap_base(&two, "a"));
    one.ok(&["halt", "a"]);
    two.ok(&["halt", "a"]);
}

/// Two state roots whose zones pin the same host id range (what two roots' searches
/// meeting would give): the host-wide registry of running ranges lets one run at a
/// time, naming the other root and zone, and frees the range at halt.
#[test]
fn two_roots_cannot_run_zones_with_the_same_host_ids() {
    let (one, two) = (Env::new(), Env::new());
    let shared = tempfile::tempdir().unwrap();
    let base = 65536 * (40_000 + std::process::id() % 1000);
    let pin = format!("userns-base={base}");
    one.host_zone("a", &[&pin]);
    two.host_zone("b", &[&pin]);
    let run = |env: &Env, args: &[&str]| {
        let o = env
            .cmd()
            .env("WARREN_RUN_DIR", shared.path())
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    assert_eq!(run(&one, &["boot", "a"]).0, 0);
    let (code, err) = run(&two, &["boot", "b"]);
    assert_ne!(code, 0, "both zones run with host ids {base}+");
    assert!(
        err.contains("in use by running zone 'a'")
            && err.contains(&one.root().display().to_string())
            && err.contains("userns-base"),
        "{err}"
    );
    assert_eq!(two.state("b"), "installed", "a refused boot leaves nothing");
    assert_eq!(run(&one, &["halt", "a"]).0, 0);
    assert_eq!(run(&two, &["boot", "b"]), (0, String::new()));
    // A claim whose holder died (a crashed warren, an init gone without a halt) is
    // stale and taken over.
    let pid = two.init_pid("b");
    kill9(pid);
    let t = Instant::now();
    while alive(pid) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // gc of any root sweeps it from the host-wide registry.
    let claim = shared.path().join("userns").join(base.to_string());
    assert!(
        claim.exists(),
        "b's claim is there while its record says running"
    );
    let (code, err) = run(&one, &["gc"]);
    assert_eq!(code, 0, "{err}");
    assert!(!claim.exists(), "gc left the stale claim of b: {err}");
    let (code, err) = run(&one, &["boot", "a"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(run(&one, &["halt", "a"]).0, 0);
    let _ = run(&two, &["halt", "b"]);
    let left: Vec<_> = std::fs::read_dir(shared.path().join("userns"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != ".lock")
        .collect();
    assert!(left.is_empty(), "claims left after both halts: {left:?}");
}

/// SIGKILL `pid` (a zone's init, from the host).
fn kill9(pid: i32) {
    let st = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn copied_zone_dir_cannot_stop_the_original() {
    let env = Env::new();
    env.host_zone("a", &[]);
    env.ok(&["boot", "a"]);
    let pid = env.init_pid("a");
    let zones = env.root().join("zones");
    let st = Command::new("cp")
        .arg("-a")
        .arg(zones.join("a"))
        .arg(zones.join("b"))
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(env.state("b"), "installed");
    env.ok(&["halt", "b"]);
    assert!(alive(pid), "halting the copy stopped the original");
    let r = env.run(&["boot", "b"]);
    assert_ne!(r.code, 0, "the copy booted with the original's host ids");
    assert!(r.stderr.contains("zone 'a'"), "{}", r.stderr);
    // gc and a later allocation report the pair and keep the range the original's.
    let gc = env.run(&["gc"]);
    assert!(
        gc.stderr.contains("overlapping host id ranges"),
        "{}",
        gc.stderr
    );
    env.host_zone("c", &[]);
    env.ok(&["halt", "a"]);
    env.ok(&["boot", "a"]);
    let pid = env.init_pid("a");
    env.ok(&["delete", "--force", "b"]);
    assert!(alive(pid), "deleting the copy stopped the original");
    env.ok(&["halt", "a"]);
}

#[test]
fn gc_never_waits_for_a_zone_another_command_holds() {
    let env = Env::new();
    env.host_zone("z", &[]);
    env.ok(&["boot", "z"]);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(lock_path(&env, "z"))
        .unwrap();
    f.lock().unwrap();
    let t = Instant::now();
    let gc = env.ok(&["gc"]);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "gc waited for the lock"
    );
    let me = std::process::id();
    assert!(
        gc.stdout
            .contains(&format!("zone 'z': its lock is held by pid {me}")),
        "{}",
        gc.stdout
    );
    assert_eq!(env.state("z"), "running", "gc touched a busy zone");
    drop(f);
    env.ok(&["halt", "z"]);
}

#[test]
fn runtime_record_naming_another_zones_init_cannot_stop_it() {
    let env = Env::new();
    env.host_zone("a", &[]);
    env.host_zone("b", &[]);
    env.ok(&["boot", "a"]);
    env.ok(&["boot", "b"]);
    let (pa, pb) = (env.init_pid("a"), env.init_pid("b"));
    // b's record, its own cgroups kept, but a's init (pid and start time).
    let mut rt = env.runtime("b");
    rt["init"] = env.runtime("a")["init"].clone();
    std::fs::write(
        env.root().join("zones/b/runtime.json"),
        serde_json::to_vec(&rt).unwrap(),
    )
    .unwrap();
    env.ok(&["halt", "b"]);
    assert!(
        alive(pa),
        "halting b stopped a through a record naming a's init"
    );
    assert!(!alive(pb), "b's own processes survived its unusable record");
    env.ok(&["halt", "a"]);
}
