//! `SpawnPlan::into_cgroup` on this kernel: the child is born in a cgroup2 directory
//! made beneath this process's own cgroup (no migration), a plan without it is not,
//! and a descriptor that is not a cgroup2 directory is a clone error, not a silent
//! fallback. Runs as its own `main` (harness = false): a spawn needs a single-threaded
//! process, and libtest runs every test on a thread of its own.

use std::ffi::CString;
use std::fs;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use warren_sys::spawn::{spawn_zone, ExecTarget, IntoCgroup, SpawnError, SpawnPlan};

/// The cgroup2 mount and this process's directory in it (its "0::" line).
fn own_cgroup2() -> PathBuf {
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mount = mounts
        .lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            (post.split_whitespace().next() == Some("cgroup2"))
                .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .unwrap_or_else(|| {
            panic!("no cgroup2 mount in /proc/self/mountinfo: CLONE_INTO_CGROUP needs one (mount -t cgroup2 none /sys/fs/cgroup/unified)")
        });
    let own = fs::read_to_string("/proc/self/cgroup").unwrap();
    let rel = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("no 0:: line in /proc/self/cgroup");
    mount.join(rel.trim_start_matches('/'))
}

/// Removes the test's cgroup (killing what is left in it) on every path.
struct CgroupGuard(PathBuf);

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        for _ in 0..500 {
            let procs = fs::read_to_string(self.0.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                let _ = warren_sys::proc::kill(pid, libc::SIGKILL);
                let _ = warren_sys::proc::waitpid_blocking(pid);
            }
            if fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        eprintln!("could not remove {}", self.0.display());
    }
}

fn sleeper(into: Option<IntoCgroup>) -> SpawnPlan {
    SpawnPlan {
        clone_flags: 0,
        steps: Vec::new(),
        exec: ExecTarget::Path(CString::new("/bin/sleep").unwrap()),
        argv: vec![CString::new("sleep").unwrap(), CString::new("60").unwrap()],
        envp: Vec::new(),
        pass_fds: 0,
        into_cgroup: into,
    }
}

fn cgroup_of(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_string))
        .unwrap()
}

fn reap(pid: i32) {
    let _ = warren_sys::proc::kill(pid, libc::SIGKILL);
    let _ = warren_sys::proc::waitpid_blocking(pid);
}

fn main() {
    if warren_sys::geteuid() != 0 {
        panic!("clone_into_cgroup needs root (it makes a cgroup); run the tests as root");
    }
    let own = own_cgroup2();
    let dir = own.join(format!("wsys-clone3-{}", std::process::id()));
    fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    let guard = CgroupGuard(dir.clone());
    let before = cgroup_of(std::process::id() as i32);

    // Born in the directory: placed, and nothing wrote its pid into cgroup.procs.
    let fd = fs::File::open(&dir).unwrap();
    let plan = sleeper(Some(IntoCgroup::new(fd.as_raw_fd())));
    let pid = spawn_zone(&plan).unwrap_or_else(|e| panic!("spawn into {}: {e:?}", dir.display()));
    let rel = format!(
        "/{}",
        dir.strip_prefix(own_mount(&own, &before))
            .unwrap()
            .display()
    );
    let got = cgroup_of(pid);
    reap(pid);
    assert!(
        plan.placed_in_cgroup(),
        "clone3(CLONE_INTO_CGROUP) fell back on kernel {}: this kernel (>= 5.7) has it",
        fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap()
            .trim()
    );
    assert_eq!(got, rel, "the child was born in its cgroup");

    // Without the option: the parent's cgroup, as before.
    let plain = sleeper(None);
    let pid = spawn_zone(&plain).unwrap();
    let got = cgroup_of(pid);
    reap(pid);
    assert!(!plain.placed_in_cgroup());
    assert_eq!(got, before);

    // A directory that is not a cgroup2 one is refused (EBADF), not ignored.
    let tmp = tempfile::tempdir().unwrap();
    let not_cg = fs::File::open(tmp.path()).unwrap();
    let bad = sleeper(Some(IntoCgroup::new(not_cg.as_raw_fd())));
    match spawn_zone(&bad) {
        Err(SpawnError::Clone(e)) => assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{e}"),
        Ok(pid) => {
            reap(pid);
            panic!("a clone into {} succeeded", tmp.path().display())
        }
        Err(e) => panic!("expected a clone error, got {e:?}"),
    }
    assert!(!bad.placed_in_cgroup());
    assert!(warren_sys::spawn::into_cgroup_supported());
    drop(guard);
    assert!(!dir.exists(), "{} removed", dir.display());
    println!("clone_into_cgroup: 3 checks passed");
}

/// The mount point under which `own` (whose relative path is `rel`) lives.
fn own_mount<'a>(own: &'a Path, rel: &str) -> &'a Path {
    let mut p = own;
    for _ in Path::new(rel.trim_start_matches('/')).components() {
        p = p.parent().unwrap();
    }
    p
}
