//! A private containerd driven with `ctr`, for the tests that run containers through
//! it (`tests/containerd.rs`: the runc shim running warren-oci; `tests/shim.rs`:
//! warren's own shim): its own root, state and gRPC socket in a temp dir, in a
//! private mount namespace (a tmpfs on /run, where shims put their sockets) and pid
//! namespace (stopping it ends every shim and container), cgroups beneath the
//! test's own (WARREN_OCI_CGROUP_NEST=1 in its environment), and a busybox image
//! built here. Dropping it removes tasks, containers, the daemon, the container
//! cgroups and the directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, require_root, WARREN};

/// The busybox image of the archive `warren::bench::cri::image` builds (the CRI test's).
pub const IMAGE: &str = warren::bench::cri::image::BUSYBOX;
/// The containerd namespace; `ctr` makes cgroupsPath `/<namespace>/<id>`, which
/// warren-oci, nesting, makes as `warren-oci/<namespace>/<id>` beneath its own cgroup.
pub const NS: &str = "warrentest";
/// The longest one `ctr` call may take, for `timeout(1)`.
pub const CTR_LIMIT: &str = "180";

/// The image archive `warren::bench::cri::image` builds (busybox, pause and a broken
/// image) from the host's busybox, in `dir`.
pub fn busybox_image(dir: &Path) -> PathBuf {
    warren::bench::cri::image::build(dir).unwrap_or_else(|e| panic!("{e}"))
}

/// The cgroup directories on this host for a path `warren-oci/<leaf>` made beneath
/// this process's own cgroup (one per mounted hierarchy).
pub fn container_cgroup_dirs(leaf: &str) -> Vec<PathBuf> {
    let mounts =
        warren::cgroups::parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap());
    let own =
        warren::cgroups::parse_proc_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap());
    mounts
        .iter()
        .map(|m| {
            let path = own
                .iter()
                .find(|(c, _)| m.controllers.iter().all(|x| c.contains(x)) && !c.is_empty())
                .map(|(_, p)| p.clone())
                .unwrap_or_else(|| "/".into());
            m.mountpoint
                .join(path.trim_start_matches('/'))
                .join(warren::oci::cgroup::GROUP)
                .join(leaf)
        })
        .filter(|d| d.exists())
        .collect()
}

/// `(hierarchy, path)` pairs of a /proc/<pid>/cgroup text, keyed by the
/// hierarchy's controller list (`""` for the unified one).
pub fn cgroup_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let (_, ctrl, path) = (it.next()?, it.next()?, it.next()?);
            Some((ctrl.to_string(), path.to_string()))
        })
        .collect()
}

/// Every line of `theirs` names a cgroup at or beneath ours in the same hierarchy.
pub fn assert_beneath(what: &str, theirs: &str, ours: &str) {
    let ours = cgroup_lines(ours);
    for (ctrl, path) in cgroup_lines(theirs) {
        let (_, mine) = ours
            .iter()
            .find(|(c, _)| *c == ctrl)
            .unwrap_or_else(|| panic!("{what}: hierarchy {ctrl:?} is not in ours {ours:?}"));
        let mine = mine.trim_end_matches('/');
        assert!(
            path == mine || path.starts_with(&format!("{mine}/")) || mine.is_empty(),
            "{what}: {ctrl}:{path} is not beneath our {ctrl}:{mine}"
        );
    }
}

/// A private containerd; dropping it removes tasks, containers, the daemon (with
/// everything in its pid namespace), the container cgroups and the directory.
pub struct Containerd {
    pub dir: tempfile::TempDir,
    /// `unshare`, the parent of the daemon (the namespace's init).
    pub unshare: Child,
    pub ids: Vec<String>,
    /// A shell is the namespace's init and starts containerd again when it exits.
    pub restartable: bool,
}

/// How the daemon is started ([`Containerd::start_with`]).
#[derive(Default)]
pub struct Options<'a> {
    /// A directory put first on the daemon's PATH (where it finds shim binaries).
    pub path_dir: Option<&'a Path>,
    /// Keep a shell as the pid namespace's init that starts containerd again
    /// whenever it exits, so a test can kill the daemon alone (its shims and
    /// containers live on) and watch it come back.
    pub restartable: bool,
}

impl Containerd {
    pub fn start() -> Containerd {
        Containerd::start_with(Options::default())
    }
    pub fn start_with(o: Options<'_>) -> Containerd {
        require_root();
        for bin in ["containerd", "ctr", "containerd-shim-runc-v2", "unshare"] {
            let found = std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).any(|d| d.join(bin).exists()))
                .unwrap_or(false);
            assert!(
                found,
                "{bin} is not installed: scripts/test.sh installs containerd (apt-get install containerd)"
            );
        }
        let dir = tempfile::Builder::new()
            .prefix("warren-ctd-test")
            .tempdir_in("/tmp")
            .unwrap();
        let p = dir.path();
        std::os::unix::fs::symlink(WARREN, p.join("warren-oci")).unwrap();
        std::fs::create_dir_all(p.join("fifo")).unwrap();
        // Plugins that would reach beyond the temp dir (CRI: CNI and /opt; opt: /opt)
        // or need other filesystems are off; `native` snapshots are directories.
        let config = format!(
            r#"version = 2
root = "{p}/root"
state = "{p}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.overlayfs", "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{p}/containerd.sock"
[ttrpc]
  address = "{p}/containerd.sock.ttrpc"
[debug]
  level = "debug"
"#,
            p = p.display()
        );
        std::fs::write(p.join("config.toml"), config).unwrap();
        let log = std::fs::File::create(p.join("containerd.log")).unwrap();
        let script = if o.restartable {
            format!(
                "mount -t tmpfs tmpfs /run && while :; do containerd -c {}/config.toml; sleep 0.1; done",
                p.display()
            )
        } else {
            format!(
                "mount -t tmpfs tmpfs /run && exec containerd -c {}/config.toml",
                p.display()
            )
        };
        let mut path = std::env::var_os("PATH").unwrap_or_default();
        if let Some(d) = o.path_dir {
            let mut dirs = vec![d.to_path_buf()];
            dirs.extend(std::env::split_paths(&path));
            path = std::env::join_paths(dirs).unwrap();
        }
        // Nesting: ctr's absolute cgroupsPath would leave our cgroup. The shims
        // inherit containerd's environment and pass it to warren-oci.
        let unshare = Command::new("unshare")
            .env(warren::oci::cgroup::NEST_ENV, "1")
            .env("PATH", path)
            .args([
                "--mount",
                "--propagation",
                "private",
                "--pid",
                "--fork",
                "--kill-child=SIGKILL",
                "--mount-proc",
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut c = Containerd {
            dir,
            unshare,
            ids: Vec::new(),
            restartable: o.restartable,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if c.ctr(&["version"]).status.success() {
                break;
            }
            if let Ok(Some(st)) = c.unshare.try_wait() {
                panic!("containerd exited ({st}): {}", c.log());
            }
            assert!(
                Instant::now() < deadline,
                "containerd did not answer on its socket within 30s: {}",
                c.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        c
    }
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path().join("containerd.log")).unwrap_or_default()
    }
    /// containerd's host pid (the daemon's, or the restarting shell's child).
    pub fn containerd_pid(&self) -> Option<i32> {
        let init = self.daemon_pid()?;
        if !self.restartable {
            return Some(init);
        }
        std::fs::read_to_string(format!("/proc/{init}/task/{init}/children"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }
    /// The pid namespace's init (host pid): unshare's only child.
    pub fn daemon_pid(&self) -> Option<i32> {
        let pid = self.unshare.id();
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }
    /// `ctr` on this daemon's socket and namespace, bounded: a ctr call that hangs (a
    /// shim that never answers) is killed after [`CTR_LIMIT`] by coreutils' `timeout`
    /// (exit 124, 137 after the grace), so the test fails instead of the suite hanging.
    pub fn ctr_cmd(&self) -> Command {
        let mut c = Command::new("timeout");
        c.args(["--kill-after=10", CTR_LIMIT, "ctr"])
            .arg("-a")
            .arg(self.path().join("containerd.sock"))
            .args(["-n", NS]);
        c
    }
    pub fn ctr(&self, args: &[&str]) -> Output {
        self.ctr_cmd()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
    #[track_caller]
    pub fn ctr_ok(&self, args: &[&str]) -> String {
        let o = self.ctr(args);
        assert!(
            o.status.success(),
            "ctr {args:?}: {} {}\ncontainerd log:\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
            self.log()
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    /// A container id unique to this test process.
    pub fn id(&mut self, name: &str) -> String {
        let id = format!("{name}-{}", std::process::id());
        self.ids.push(id.clone());
        id
    }
    /// The host pids of every process in the daemon's pid namespace.
    pub fn namespace_pids(&self) -> Vec<i32> {
        self.daemon_pid()
            .map(warren::bench::cri::daemon::descendants)
            .unwrap_or_default()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // containerd's own path first: it deletes through warren-oci.
        for id in self.ids.clone() {
            let _ = self.ctr(&["task", "kill", "-s", "KILL", &id]);
            let _ = self.ctr(&["task", "delete", "--force", &id]);
            let _ = self.ctr(&["container", "delete", &id]);
        }
        // Then the daemon: SIGKILL to the pid namespace's init ends every shim and
        // container process in it, and with the last of them its mounts (/run's
        // tmpfs, the rootfs binds) go; unshare reaps it and exits.
        if let Some(pid) = self.daemon_pid() {
            let _ = warren_sys::proc::kill(pid, 9);
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
        for id in &self.ids {
            for d in container_cgroup_dirs(&format!("{NS}/{id}")) {
                common::force_remove_cgroup(&d);
                // warren-oci/<namespace> and warren-oci go with their last container
                // (busy otherwise).
                for group in d.ancestors().skip(1).take(2) {
                    let _ = std::fs::remove_dir(group);
                }
            }
        }
        for m in common::host_mounts_under(self.path()) {
            if let Some(target) = m.split_whitespace().nth(4) {
                let _ = Command::new("umount").args(["-l", target]).status();
            }
        }
    }
}
