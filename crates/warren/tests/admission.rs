//! A boot refused by a host limit names the one that stopped it, its value and the
//! fix (issue 22, item 11): `doctor::admit` checks before any cgroup is made.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{force_remove_cgroup, Env};

/// This process's pids cgroup (v1); the test's cgroups are made beneath it.
fn pids_parent() -> PathBuf {
    let mounts =
        warren::cgroups::parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap());
    let own =
        warren::cgroups::parse_proc_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap());
    warren::cgroups::own_dirs(&mounts, &own)
        .into_iter()
        .find(|(_, c, _)| c.iter().any(|x| x == "pids"))
        .map(|(_, _, d)| d)
        .expect("this test needs a v1 pids hierarchy (this host is cgroup v1 hybrid); on a v2-only host it cannot run")
}

/// Removes the test's cgroup (and anything warren made below it), even on panic.
struct CgroupGuard(PathBuf);

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        force_remove_cgroup(&self.0);
    }
}

/// `c` with the environment `env.cmd()` gives warren (its state root).
fn with_env(env: &Env, mut c: Command) -> Command {
    for (k, v) in env.cmd().get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c
}

#[test]
fn boot_refused_by_pids_max_of_warrens_own_cgroup_names_it() {
    let env = Env::new();
    env.host_zone("z", &[]);
    let cg = CgroupGuard(pids_parent().join(format!("warren-admit-{}", std::process::id())));
    std::fs::create_dir(&cg.0).unwrap();
    // warren alone is 1 task in it; its zone needs 2 (init and the user-namespace
    // helper): pids.max = 2 cannot hold them.
    std::fs::write(cg.0.join("pids.max"), "2").unwrap();
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec \"$0\" boot z",
        cg.0.display()
    );
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(&script).arg(common::WARREN);
    let out = with_env(&env, c).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "pids.max of warren's own cgroup {} is 2 and 1 tasks are in it",
            cg.0.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("raise it in the cgroup above warren"),
        "{stderr}"
    );
    // Refused before anything was made: no cgroup below it, the zone still installed.
    let made: Vec<_> = std::fs::read_dir(&cg.0)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.path())
        .collect();
    assert!(made.is_empty(), "cgroups made before the refusal: {made:?}");
    assert_eq!(env.state("z"), "installed");
}

#[test]
fn boot_refused_by_rlimit_nproc_names_it() {
    let env = Env::new();
    env.host_zone("z", &[]);
    let mut c = Command::new("prlimit");
    c.args(["--nproc=1:1", "--"])
        .arg(common::WARREN)
        .args(["boot", "z"]);
    let out = with_env(&env, c)
        .output()
        .expect("this test needs prlimit (util-linux) to lower RLIMIT_NPROC");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(stderr.contains("zone 'z': RLIMIT_NPROC is 1"), "{stderr}");
    assert!(stderr.contains("rlimit.nproc"), "{stderr}");
    assert_eq!(env.state("z"), "installed");
}
