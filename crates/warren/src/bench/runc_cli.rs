//! The runc-style CLI stepper: one [`System`] for every OCI runtime driven the way
//! containerd drives runc, parameterised by the binary, its arguments around a
//! private `--root` state directory, and how its commands are launched. crun
//! (`--compare crun`, [`super::crun`]) and warren's own runtime (`--via oci`,
//! [`super::oci`]) are both this stepper.
//!
//! Per container: 'clone' writes its bundle (`config.json` pointing at the shared
//! read-only busybox root, `/bin/sleep` as the process), 'boot' is `create --bundle
//! --pid-file` + `start`, 'halt' is `kill ID KILL`, 'delete' is `delete --force`. The
//! pid file must exist after start; idle CPU is read from /proc/<pid>/stat of every
//! container. Every container still known to the runtime is deleted, and the step's
//! state and bundles removed, when the step ends, also on failure or panic (`Drop`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::cgroups::{beneath, check_pids, collect_dirs, remove_dirs, Hier};
use super::command;
use super::system::{Cpu, Failure, System, Verb, Verbs};
use crate::fsutil::disk_usage;

/// How a runtime's commands are started: directly, or inside the mount namespace a
/// helper process holds (crun, see [`super::crun`]).
pub struct Launcher {
    pub(super) helper: Option<Child>,
    /// Median cost of the launcher itself (nsenter), subtracted from every timed command.
    pub(super) overhead_ms: f64,
    /// The run's cgroup directories the helper's namespace shows as the hierarchies.
    pub(super) cgroups: Option<CgroupJail>,
}

/// This run's directory `dir` beneath the bench's own cgroup in each of `hiers`: every
/// container must be beneath it ([`CgroupJail::check`]); it is removed, with what a
/// runtime left in it, when the launcher goes.
pub struct CgroupJail {
    pub(super) hiers: Vec<Hier>,
    pub(super) dir: String,
    pub(super) proc_root: PathBuf,
}

impl CgroupJail {
    /// Err ([`Failure::Rule`]) if container `id`'s process `pid` is not beneath it.
    fn check(&self, name: &str, id: &str, pid: i32) -> Result<(), Failure> {
        check_pids(&self.proc_root, name, &[(id, pid)], &|cg| {
            beneath(cg, &self.hiers, &self.dir)
        })
    }
}

impl Drop for CgroupJail {
    fn drop(&mut self) {
        let mut dirs = Vec::new();
        for h in &self.hiers {
            collect_dirs(&h.own.join(&self.dir), &mut dirs);
        }
        remove_dirs(dirs, std::time::Duration::from_millis(500));
    }
}

impl Launcher {
    /// Commands run as they are.
    pub fn direct() -> Launcher {
        Launcher {
            helper: None,
            overhead_ms: 0.0,
            cgroups: None,
        }
    }

    /// `prog`, started through the launcher.
    pub fn command(&self, prog: &Path) -> Command {
        match &self.helper {
            Some(h) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--mount=/proc/{}/ns/mnt", h.id()))
                    .arg("--")
                    .arg(prog);
                c
            }
            None => Command::new(prog),
        }
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        if let Some(c) = &mut self.helper {
            let _ = c.kill();
            let _ = c.wait();
        }
        // The jail's directories go after the helper whose binds showed them.
        drop(self.cgroups.take());
    }
}

/// What differs between runc-style runtimes.
pub struct Runtime {
    /// Its name in results.json ("crun", "warren-oci").
    pub name: &'static str,
    pub program: PathBuf,
    /// Arguments before `--root STATE` (warren: "oci").
    pub before_root: Vec<String>,
    /// Global arguments after it (crun: "--cgroup-manager=disabled").
    pub after_root: Vec<String>,
    /// The arguments that write the default `config.json` into the current directory.
    pub spec: Vec<OsString>,
    /// Container ids are `warren-bench-<letter><i>`.
    pub id_letter: char,
    pub launcher: Launcher,
    /// How it ran, for results.json.
    pub note: String,
}

/// The config for one container: the runtime's default, edited (pure).
pub fn config(template: &serde_json::Value, rootfs: &Path) -> serde_json::Value {
    let mut c = template.clone();
    c["process"]["terminal"] = false.into();
    c["process"]["args"] = serde_json::json!(["/bin/sleep", "1000000"]);
    c["root"] = serde_json::json!({ "path": rootfs, "readonly": true });
    c
}

/// A runc-style runtime under the bench's scratch dir, with one step's containers.
pub struct RuncCli {
    rt: Runtime,
    /// `<scratch>/<name>`: the spec, and per step the state root and bundles.
    dir: PathBuf,
    /// The serialized config every container gets.
    cfg: String,
    state: PathBuf,
    bundles: PathBuf,
    ids: Vec<String>,
    /// Containers the runtime may know of (deleted by cleanup).
    live: Vec<String>,
    pids: Vec<i32>,
}

impl RuncCli {
    /// Check the root, make `<scratch>/<name>` and the config from the runtime's own
    /// default spec.
    pub fn open(rt: Runtime, scratch: &Path, rootfs: &Path) -> Result<RuncCli, Failure> {
        if !rootfs.join("bin/sleep").exists() {
            return Err(Failure::NotInRoot {
                root: rootfs.to_path_buf(),
                what: "bin/sleep",
            });
        }
        let dir = scratch.join(rt.name);
        std::fs::create_dir_all(&dir).map_err(Failure::io(&dir))?;
        let _ = std::fs::remove_file(dir.join("config.json"));
        let mut spec = Command::new(&rt.program);
        spec.args(&rt.spec).current_dir(&dir);
        command::run(spec, &dir)?;
        let text = std::fs::read_to_string(dir.join("config.json")).map_err(Failure::io(&dir))?;
        let template: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}'s default config.json: {e}", rt.name))?;
        let cfg = serde_json::to_string(&config(&template, rootfs)).expect("json");
        Ok(RuncCli {
            rt,
            state: dir.join("state"),
            bundles: dir.join("bundles"),
            dir,
            cfg,
            ids: Vec::new(),
            live: Vec::new(),
            pids: Vec::new(),
        })
    }

    /// Run `<program> [before] --root STATE [after] ARGS` through the launcher.
    fn runtime(&self, args: &[&str]) -> Result<String, Failure> {
        let mut c = self.rt.launcher.command(&self.rt.program);
        c.args(&self.rt.before_root)
            .arg("--root")
            .arg(&self.state)
            .args(&self.rt.after_root)
            .args(args);
        command::run(c, &self.dir)
    }
}

impl System for RuncCli {
    fn name(&self) -> &str {
        self.rt.name
    }

    fn verbs(&self) -> Verbs {
        Verbs {
            clone: "bundle",
            boot: "create+start",
            halt: "kill",
            delete: "delete",
        }
    }

    fn prepare(&mut self, n: usize) -> Result<(), Failure> {
        self.state = self.dir.join(format!("state-{n}"));
        self.bundles = self.dir.join(format!("bundles-{n}"));
        std::fs::create_dir_all(&self.state).map_err(Failure::io(&self.state))?;
        self.ids = (1..=n)
            .map(|i| format!("{}{}{i:05}", super::PREFIX, self.rt.id_letter))
            .collect();
        Ok(())
    }

    fn create(&mut self, i: usize) -> Result<(), Failure> {
        let b = self.bundles.join(&self.ids[i]);
        std::fs::create_dir_all(&b).map_err(Failure::io(&b))?;
        std::fs::write(b.join("config.json"), &self.cfg).map_err(Failure::io(&b))
    }

    fn start(&mut self, i: usize) -> Result<(), Failure> {
        let id = self.ids[i].clone();
        let b = self.bundles.join(&id);
        let (bundle, pidf) = (b.to_string_lossy(), b.join("pid"));
        self.live.push(id.clone());
        self.runtime(&[
            "create",
            "--bundle",
            &bundle,
            "--pid-file",
            &pidf.to_string_lossy(),
            &id,
        ])?;
        self.runtime(&["start", &id]).map(drop)
    }

    fn started(&mut self, i: usize) -> Result<(), Failure> {
        let pidf = self.bundles.join(&self.ids[i]).join("pid");
        let pid = std::fs::read_to_string(&pidf)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| {
                format!(
                    "{} container {}: no pid file {} after start",
                    self.rt.name,
                    self.ids[i],
                    pidf.display()
                )
            })?;
        self.pids.push(pid);
        if let Some(j) = &self.rt.launcher.cgroups {
            j.check(self.rt.name, &self.ids[i], pid)?;
        }
        Ok(())
    }

    fn cpu(&self) -> Cpu<'_> {
        Cpu::Pids(&self.pids)
    }

    fn disk_bytes(&self) -> u64 {
        self.ids
            .iter()
            .map(|id| {
                disk_usage(&self.bundles.join(id)).unwrap_or(0)
                    + disk_usage(&self.state.join(id)).unwrap_or(0)
            })
            .sum()
    }

    fn stop(&mut self, i: usize) -> Result<(), Failure> {
        self.runtime(&["kill", &self.ids[i], "KILL"]).map(drop)
    }

    fn delete(&mut self, i: usize) -> Result<(), Failure> {
        let id = self.ids[i].clone();
        self.runtime(&["delete", "--force", &id])?;
        self.live.retain(|x| *x != id);
        Ok(())
    }

    fn cleanup(&mut self) -> Result<(), Failure> {
        for id in std::mem::take(&mut self.live) {
            let _ = self.runtime(&["delete", "--force", &id]);
        }
        self.pids.clear();
        let _ = std::fs::remove_dir_all(&self.bundles);
        let _ = std::fs::remove_dir_all(&self.state);
        Ok(())
    }

    fn overhead_ms(&self, verb: Verb) -> f64 {
        let commands = match verb {
            Verb::Clone => 0.0,
            Verb::Boot => 2.0,
            Verb::Halt | Verb::Delete => 1.0,
        };
        commands * self.rt.launcher.overhead_ms
    }

    fn note(&self) -> String {
        self.rt.note.clone()
    }
}

impl Drop for RuncCli {
    fn drop(&mut self) {
        let _ = self.cleanup();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_points_at_the_shared_root_and_sleeps() {
        let t = serde_json::json!({"process": {"terminal": true, "args": ["sh"]}, "root": {"path": "rootfs"}});
        let c = config(&t, Path::new("/r"));
        assert_eq!(c["process"]["terminal"], false);
        assert_eq!(c["process"]["args"][0], "/bin/sleep");
        assert_eq!(
            c["root"],
            serde_json::json!({"path": "/r", "readonly": true})
        );
    }

    #[test]
    fn a_launcher_adds_its_cost_per_command() {
        let mut rt = Runtime {
            name: "fake",
            program: PathBuf::from("/nonexistent-warren-runtime"),
            before_root: Vec::new(),
            after_root: Vec::new(),
            spec: Vec::new(),
            id_letter: 'f',
            launcher: Launcher::direct(),
            note: String::new(),
        };
        rt.launcher.overhead_ms = 1.5;
        let r = RuncCli {
            rt,
            dir: PathBuf::from("/nonexistent-warren-bench"),
            cfg: String::new(),
            state: PathBuf::new(),
            bundles: PathBuf::new(),
            ids: Vec::new(),
            live: Vec::new(),
            pids: Vec::new(),
        };
        assert_eq!(r.overhead_ms(Verb::Clone), 0.0);
        assert_eq!(r.overhead_ms(Verb::Boot), 3.0);
        assert_eq!(r.overhead_ms(Verb::Delete), 1.5);
    }
}
