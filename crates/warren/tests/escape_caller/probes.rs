//! Host-side probes shared by the classes: a zone's processes and their descriptors,
//! a command run as an unprivileged host user, a child killed when dropped.

use super::*;

/// The host pids in a zone's cgroups (all controllers, all sub-groups).
pub(crate) fn zone_pids(env: &Env, zone: &str) -> Vec<i32> {
    fn walk(dir: &Path, out: &mut Vec<i32>) {
        if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk(&e.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    for (_, dir) in env.cgroup_dirs(zone) {
        walk(&dir, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

/// The host pid of the zone process whose command line starts with `needle` (waiting
/// up to 5 s for it).
pub(crate) fn find_in_zone(env: &Env, zone: &str, needle: &str) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        for pid in zone_pids(env, zone) {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.starts_with(needle) {
                return Some(pid);
            }
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A host process's descriptors as `n -> target` (seen from the host).
pub(crate) fn host_fds(pid: i32) -> Vec<(i32, String)> {
    let mut v: Vec<(i32, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n: i32 = e.file_name().to_string_lossy().parse().ok()?;
            let l = std::fs::read_link(e.path()).ok()?;
            Some((n, l.to_string_lossy().into_owned()))
        })
        .collect();
    v.sort();
    v
}

/// Run `script` as an unprivileged host user (nobody, no groups, no capabilities).
/// setpriv keeps its capabilities up to its own exec (it would resolve a path it
/// execs directly as root), so it always execs `sh`, which then runs with none.
pub(crate) fn as_nobody(script: &str) -> Run {
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "/bin/sh",
            "-c",
            script,
        ])
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A child the test started, killed (by pid) and reaped when dropped.
pub(crate) struct Child(pub(crate) std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
