//! A private OCI state root and busybox bundle driven through `warren-oci`.

use super::*;

/// A busybox OCI bundle and a private state root; deletes its containers when dropped.
pub(crate) struct Oci {
    pub(crate) dir: tempfile::TempDir,
}

impl Oci {
    pub(crate) fn new() -> Oci {
        let dir = tempfile::Builder::new()
            .prefix("warren-caller-oci-")
            .tempdir()
            .unwrap();
        std::os::unix::fs::symlink(WARREN, dir.path().join("warren-oci")).unwrap();
        let rootfs = dir.path().join("bundle/rootfs");
        std::fs::create_dir_all(rootfs.join("bin")).unwrap();
        std::fs::copy(common::require_busybox(), rootfs.join("bin/busybox")).unwrap();
        for x in [
            "sh", "ls", "cat", "sleep", "readlink", "echo", "stat", "true",
        ] {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(x)).unwrap();
        }
        for d in ["proc", "dev", "sys", "tmp", "etc"] {
            std::fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        Oci { dir }
    }

    pub(crate) fn cmd(&self) -> Command {
        let mut c = Command::new(self.dir.path().join("warren-oci"));
        c.arg("--root").arg(self.dir.path().join("state"));
        c
    }

    /// Write config.json (from `warren-oci spec`) with `args`.
    pub(crate) fn spec(&self, args: &[&str]) {
        let bundle = self.dir.path().join("bundle");
        let cfg = bundle.join("config.json");
        let _ = std::fs::remove_file(&cfg);
        let o = Command::new(self.dir.path().join("warren-oci"))
            .args(["spec", "--bundle"])
            .arg(&bundle)
            .output()
            .unwrap();
        assert!(o.status.success(), "warren-oci spec");
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&cfg).unwrap()).unwrap();
        v["process"]["args"] = serde_json::json!(args);
        v["process"]["terminal"] = false.into();
        v["root"]["readonly"] = false.into();
        std::fs::write(&cfg, v.to_string()).unwrap();
    }

    /// Run with stdout/stderr in files (a created container keeps the runtime's stdio,
    /// so pipes would not reach EOF); returns (exit code, stdout + stderr).
    pub(crate) fn run(&self, mut c: Command) -> (i32, String) {
        let out = tempfile::tempfile_in(self.dir.path()).unwrap();
        let status = c
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out.try_clone().unwrap())
            .status()
            .unwrap();
        let mut f = out;
        use std::io::{Read, Seek};
        let mut s = String::new();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.read_to_string(&mut s).unwrap();
        (status.code().unwrap_or(-1), s)
    }

    pub(crate) fn bundle(&self) -> String {
        self.dir
            .path()
            .join("bundle")
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for Oci {
    fn drop(&mut self) {
        let state = self.dir.path().join("state");
        for e in std::fs::read_dir(&state).into_iter().flatten().flatten() {
            let id = e.file_name().to_string_lossy().into_owned();
            let mut c = self.cmd();
            c.args(["delete", "--force", &id]);
            let _ = c.stdin(Stdio::null()).output();
        }
    }
}

/// Create (not start) container `id` running `sleep` (the caller holding `held`, if
/// given), run `probe` in it through `warren-oci exec`, delete it; returns the exec's
/// exit code and output.
pub(crate) fn created_container_exec(
    oci: &Oci,
    id: &str,
    probe: &str,
    held: Option<&Held>,
) -> (i32, String) {
    oci.spec(&["sh", "-c", "exec sleep 1000"]);
    let mut c = oci.cmd();
    c.args(["create", "--bundle", &oci.bundle(), id]);
    if let Some(h) = held {
        h.give(&mut c);
    }
    let (code, out) = oci.run(c);
    assert_eq!(code, 0, "oci create {id}: {out}");
    let mut c = oci.cmd();
    c.args(["exec", id, "sh", "-c", probe]);
    let r = oci.run(c);
    let mut c = oci.cmd();
    c.args(["delete", "--force", id]);
    let _ = oci.run(c);
    r
}
