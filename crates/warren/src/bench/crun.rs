//! The crun column of `warren bench density --compare crun`: the same steps with OCI
//! containers on a busybox root (the bench's busybox template, shared read-only), no
//! network beyond crun's default namespaces, `/bin/sleep` as the container's process.
//!
//! crun 1.8 refuses hybrid cgroup hosts whose unified hierarchy holds a controller
//! ("cgroups in hybrid mode not supported, drop all controllers from cgroupv2"), with
//! every cgroup manager. So on such a host crun runs in a private mount namespace in
//! which /sys/fs/cgroup/unified is unmounted (a helper `unshare -m` process holds it;
//! crun is started through `nsenter`; the host's mounts are untouched), and with
//! `--cgroup-manager=disabled` so that it creates no cgroup outside warren's own. That
//! makes crun cheaper than it would be with cgroups: no cgroup creation or migration.
//! nsenter's own cost is measured and subtracted from every timed crun command.
//!
//! Every container is deleted when the step ends, also on failure ([`Fleet`]'s drop),
//! and the helper is killed.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Options, Step, SystemRun};
use crate::fsutil::disk_usage;
use crate::measure::{mem_per_zone, mem_sample, ms, summarize, Progress};
use crate::stats::procs_cpu_ns;

/// Where `prog` is on PATH.
pub fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// How crun commands are started: directly, or inside the helper's mount namespace.
struct Launcher {
    helper: Option<Child>,
    /// Median cost of the launcher itself (nsenter), subtracted from timings.
    overhead_ms: f64,
}

impl Drop for Launcher {
    fn drop(&mut self) {
        if let Some(c) = &mut self.helper {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Launcher {
    fn new(proc_root: &Path) -> Result<Launcher, String> {
        let mountinfo =
            std::fs::read_to_string(proc_root.join("self/mountinfo")).unwrap_or_default();
        let hybrid = mountinfo
            .lines()
            .any(|l| l.split(' ').nth(4) == Some("/sys/fs/cgroup/unified"));
        if !hybrid {
            return Ok(Launcher {
                helper: None,
                overhead_ms: 0.0,
            });
        }
        let mut child = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg("umount /sys/fs/cgroup/unified && echo ready && exec sleep 1000000")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting unshare (util-linux): {e}"))?;
        let mut line = String::new();
        let out = child.stdout.take().expect("piped");
        let _ = BufReader::new(out).read_line(&mut line);
        let mut l = Launcher {
            helper: Some(child),
            overhead_ms: 0.0,
        };
        if line.trim() != "ready" {
            return Err(
                "could not unmount /sys/fs/cgroup/unified in a private mount namespace".into(),
            );
        }
        let mut t = Vec::new();
        for _ in 0..10 {
            let s = Instant::now();
            l.command("true")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status()
                .map_err(|e| format!("running nsenter: {e}"))?;
            t.push(ms(s.elapsed()));
        }
        l.overhead_ms = summarize(&t).median;
        Ok(l)
    }

    fn command(&self, prog: &str) -> Command {
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

/// The containers of one step; deleted on drop.
struct Fleet<'a> {
    launcher: &'a Launcher,
    state: PathBuf,
    ids: Vec<String>,
}

impl Fleet<'_> {
    /// Run `crun --root STATE --cgroup-manager=disabled ARGS`; its time in ms, minus the
    /// launcher's. stdio goes to `log` (never a pipe: the container would hold it open).
    fn crun(&self, args: &[&str], log: &Path) -> Result<f64, String> {
        let f = File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let f2 = f.try_clone().map_err(|e| e.to_string())?;
        let t = Instant::now();
        let st = self
            .launcher
            .command("crun")
            .arg("--root")
            .arg(&self.state)
            .arg("--cgroup-manager=disabled")
            .args(args)
            .stdin(Stdio::null())
            .stdout(f)
            .stderr(f2)
            .status()
            .map_err(|e| format!("running crun: {e}"))?;
        let took = ms(t.elapsed());
        if !st.success() {
            let msg = std::fs::read_to_string(log).unwrap_or_default();
            return Err(format!("crun {}: {}", args.join(" "), msg.trim()));
        }
        Ok((took - self.launcher.overhead_ms).max(0.0))
    }
}

impl Drop for Fleet<'_> {
    fn drop(&mut self) {
        let log = self.state.join("cleanup.log");
        for id in std::mem::take(&mut self.ids) {
            let _ = self.crun(&["delete", "-f", &id], &log);
        }
    }
}

/// The OCI config for one container: `crun spec`'s default, edited.
fn config(template: &serde_json::Value, rootfs: &Path) -> serde_json::Value {
    let mut c = template.clone();
    c["process"]["terminal"] = false.into();
    c["process"]["args"] = serde_json::json!(["/bin/sleep", "1000000"]);
    c["root"] = serde_json::json!({ "path": rootfs, "readonly": true });
    c
}

/// Run every step with crun under `scratch`, from `rootfs`.
pub fn run(
    scratch: &Path,
    rootfs: &Path,
    proc_root: &Path,
    opts: &Options,
    progress: &mut dyn Progress,
) -> SystemRun {
    let mut sys = SystemRun {
        runtime: None,
        name: "crun".into(),
        status: "ok".into(),
        note: String::new(),
        steps: Vec::new(),
    };
    if which("crun").is_none() {
        sys.status = "not installed".into();
        sys.note = "not installed; the bench installs nothing: apt-get install crun".into();
        return sys;
    }
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
    let dir = scratch.join("crun");
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir_all(&dir).map_err(io)?;
    let launcher = Launcher::new(proc_root)?;
    let _ = std::fs::remove_file(dir.join("config.json"));
    let st = Command::new("crun")
        .arg("spec")
        .current_dir(&dir)
        .status()
        .map_err(|e| format!("running crun spec: {e}"))?;
    if !st.success() {
        return Err("crun spec failed".into());
    }
    let text = std::fs::read_to_string(dir.join("config.json")).map_err(io)?;
    let template: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("crun spec's config.json: {e}"))?;
    let cfg = serde_json::to_string(&config(&template, rootfs)).expect("json");

    for &n in &opts.steps {
        let started = Instant::now();
        let state = dir.join(format!("state-{n}"));
        let bundles = dir.join(format!("bundles-{n}"));
        std::fs::create_dir_all(&state).map_err(io)?;
        let mut fleet = Fleet {
            launcher: &launcher,
            state: state.clone(),
            ids: Vec::new(),
        };
        let log = state.join("crun.log");
        let ids: Vec<String> = (1..=n).map(|i| format!("warren-bench-c{i:05}")).collect();

        progress.phase(&format!("crun N={n} bundle"), n as u64);
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
        progress.phase(&format!("crun N={n} create+start"), n as u64);
        let mut boot_ms = Vec::new();
        for id in &ids {
            let b = bundles.join(id);
            let pidf = b.join("pid");
            fleet.ids.push(id.clone());
            let c = fleet.crun(
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
            let s = fleet.crun(&["start", id], &log)?;
            boot_ms.push(c + s);
            progress.step();
        }
        let pids: Vec<String> = ids
            .iter()
            .filter_map(|id| std::fs::read_to_string(bundles.join(id).join("pid")).ok())
            .map(|s| s.trim().to_string())
            .collect();
        let secs = opts.idle.as_secs().max(1);
        progress.phase(&format!("crun N={n} idle"), secs);
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

        progress.phase(&format!("crun N={n} kill"), n as u64);
        let mut halt_ms = Vec::new();
        for id in &ids {
            halt_ms.push(fleet.crun(&["kill", id, "KILL"], &log)?);
            progress.step();
        }
        progress.phase(&format!("crun N={n} delete"), n as u64);
        let mut delete_ms = Vec::new();
        for id in &ids {
            delete_ms.push(fleet.crun(&["delete", "-f", id], &log)?);
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
    let how = if launcher.helper.is_some() {
        format!(
            "crun 1.8 refuses this hybrid cgroup host, so it ran in a private mount namespace without /sys/fs/cgroup/unified (via nsenter, {:.2} ms per call, subtracted)",
            launcher.overhead_ms
        )
    } else {
        "crun run directly".into()
    };
    Ok(format!(
        "busybox root shared read-only, /bin/sleep, default namespaces, --cgroup-manager=disabled (no cgroups: cheaper than crun with cgroups); {how}; 'clone' is writing the bundle, 'boot' create+start, 'halt' kill"
    ))
}
