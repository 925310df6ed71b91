//! `warren bench density --via oci`: the density steps with every zone created the
//! way containerd, CRI-O or podman create one: `warren oci create` + `warren oci
//! start` on a bundle (the bench's busybox template as a shared read-only root,
//! `/bin/sleep` as the process, the default namespaces of `warren oci spec`, and the
//! container's cgroups beneath warren's own cgroup, as for zones).
//!
//! 'clone' is writing the bundle, 'boot' is create + start (two runs of this binary),
//! 'halt' is `kill KILL`, 'delete' is `delete`. Every container of a step is deleted
//! when the step ends, also on failure ([`Fleet`]'s drop).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Options, Step, SystemRun};
use crate::fsutil::disk_usage;
use crate::measure::{mem_per_zone, mem_sample, ms, summarize, Progress};
use crate::stats::procs_cpu_ns;

/// The containers of one step; deleted on drop.
struct Fleet {
    exe: PathBuf,
    state: PathBuf,
    ids: Vec<String>,
}

impl Fleet {
    /// Run `warren oci --root STATE ARGS`; its time in ms. stdio goes to `log` (never a
    /// pipe: the container's init keeps the runtime's stdio, as with runc).
    fn oci(&self, args: &[&str], log: &Path) -> Result<f64, String> {
        let f = File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let f2 = f.try_clone().map_err(|e| e.to_string())?;
        let t = Instant::now();
        let st = Command::new(&self.exe)
            .arg("oci")
            .arg("--root")
            .arg(&self.state)
            .args(args)
            .stdin(Stdio::null())
            .stdout(f)
            .stderr(f2)
            .status()
            .map_err(|e| format!("running {} oci: {e}", self.exe.display()))?;
        let took = ms(t.elapsed());
        if !st.success() {
            let msg = std::fs::read_to_string(log).unwrap_or_default();
            return Err(format!("warren oci {}: {}", args.join(" "), msg.trim()));
        }
        Ok(took)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let log = self.state.join("cleanup.log");
        for id in std::mem::take(&mut self.ids) {
            let _ = self.oci(&["delete", "--force", &id], &log);
        }
    }
}

/// The config for one container: `warren oci spec`'s default, edited (pure).
pub fn config(template: &serde_json::Value, rootfs: &Path) -> serde_json::Value {
    let mut c = template.clone();
    c["process"]["terminal"] = false.into();
    c["process"]["args"] = serde_json::json!(["/bin/sleep", "1000000"]);
    c["root"] = serde_json::json!({ "path": rootfs, "readonly": true });
    c
}

/// Run every step through `warren oci` under `scratch`, from `rootfs`.
pub fn run(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    opts: &Options,
    progress: &mut dyn Progress,
) -> SystemRun {
    let mut sys = SystemRun {
        runtime: None,
        name: "warren-oci".into(),
        status: "ok".into(),
        note: String::new(),
        steps: Vec::new(),
    };
    match run_steps(scratch, rootfs, proc_root, opts, progress, &mut sys.steps) {
        Ok(note) => sys.note = note,
        Err(e) => {
            sys.status = "failed".into();
            sys.note = e;
        }
    }
    sys
}

fn run_steps(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    opts: &Options,
    progress: &mut dyn Progress,
    steps: &mut Vec<Step>,
) -> Result<String, String> {
    if !rootfs.join("bin/sleep").exists() {
        return Err(format!(
            "{}: no /bin/sleep in the busybox root",
            rootfs.display()
        ));
    }
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    let dir = scratch.join("oci");
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir_all(&dir).map_err(io)?;
    let st = Command::new(&exe)
        .args(["oci", "spec", "--bundle"])
        .arg(&dir)
        .status()
        .map_err(|e| format!("running warren oci spec: {e}"))?;
    if !st.success() {
        return Err("warren oci spec failed".into());
    }
    let text = std::fs::read_to_string(dir.join("config.json")).map_err(io)?;
    let template: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("warren oci spec's config.json: {e}"))?;
    let cfg = serde_json::to_string(&config(&template, rootfs)).expect("json");

    for &n in &opts.steps {
        let started = Instant::now();
        let state = dir.join(format!("state-{n}"));
        let bundles = dir.join(format!("bundles-{n}"));
        std::fs::create_dir_all(&state).map_err(io)?;
        let mut fleet = Fleet {
            exe: exe.clone(),
            state: state.clone(),
            ids: Vec::new(),
        };
        let log = dir.join(format!("oci-{n}.log"));
        let ids: Vec<String> = (1..=n)
            .map(|i| format!("{}o{i:05}", super::PREFIX))
            .collect();

        progress.phase(&format!("warren-oci N={n} bundle"), n as u64);
        let mut clone_ms = Vec::new();
        for id in &ids {
            let t = Instant::now();
            let b = bundles.join(id);
            std::fs::create_dir_all(&b).map_err(io)?;
            std::fs::write(b.join("config.json"), &cfg).map_err(io)?;
            clone_ms.push(ms(t.elapsed()));
            progress.step();
        }
        std::thread::sleep(Duration::from_millis(500));
        let before = mem_sample(proc_root);
        progress.phase(&format!("warren-oci N={n} create+start"), n as u64);
        let mut boot_ms = Vec::new();
        for id in &ids {
            let b = bundles.join(id);
            let pidf = b.join("pid");
            fleet.ids.push(id.clone());
            let c = fleet.oci(
                &[
                    "create",
                    "--bundle",
                    &b.to_string_lossy(),
                    "--pid-file",
                    &pidf.to_string_lossy(),
                    id,
                ],
                &log,
            )?;
            let s = fleet.oci(&["start", id], &log)?;
            boot_ms.push(c + s);
            progress.step();
        }
        let pids: Vec<String> = ids
            .iter()
            .filter_map(|id| std::fs::read_to_string(bundles.join(id).join("pid")).ok())
            .map(|s| s.trim().to_string())
            .collect();
        if pids.len() != n {
            return Err(format!(
                "{} of {n} containers wrote no pid file",
                n - pids.len()
            ));
        }
        let secs = opts.idle.as_secs().max(1);
        progress.phase(&format!("warren-oci N={n} idle"), secs);
        let cpu0 = procs_cpu_ns(proc_root, &pids);
        let t_idle = Instant::now();
        for _ in 0..secs {
            std::thread::sleep(opts.idle / secs as u32);
            progress.step();
        }
        let cpu1 = procs_cpu_ns(proc_root, &pids);
        let idle_cpu_pct =
            cpu1.saturating_sub(cpu0) as f64 / t_idle.elapsed().as_nanos() as f64 * 100.0;
        let after = mem_sample(proc_root);
        let disk: u64 = ids
            .iter()
            .map(|id| {
                disk_usage(&bundles.join(id)).unwrap_or(0)
                    + disk_usage(&state.join(id)).unwrap_or(0)
            })
            .sum();

        progress.phase(&format!("warren-oci N={n} kill"), n as u64);
        let mut halt_ms = Vec::new();
        for id in &ids {
            halt_ms.push(fleet.oci(&["kill", id, "KILL"], &log)?);
            progress.step();
        }
        progress.phase(&format!("warren-oci N={n} delete"), n as u64);
        let mut delete_ms = Vec::new();
        for id in &ids {
            delete_ms.push(fleet.oci(&["delete", "--force", id], &log)?);
            fleet.ids.retain(|x| x != id);
            progress.step();
        }
        drop(fleet);
        let _ = std::fs::remove_dir_all(&bundles);
        let _ = std::fs::remove_dir_all(&state);
        steps.push(Step {
            zones: n,
            clone_ms: summarize(&clone_ms),
            boot_ms: summarize(&boot_ms),
            total_s: started.elapsed().as_secs_f64(),
            mem_per_zone: mem_per_zone(&before, &after, n),
            disk_per_zone_kib: disk as f64 / n as f64 / 1024.0,
            idle_cpu_pct,
            halt_ms: summarize(&halt_ms),
            delete_ms: summarize(&delete_ms),
        });
    }
    Ok("through the OCI runtime: busybox root shared read-only, /bin/sleep, the namespaces of 'warren oci spec', cgroups beneath warren's own; 'clone' is writing the bundle, 'boot' create+start (two runs of warren oci), 'halt' kill, 'delete' delete".into())
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
}
