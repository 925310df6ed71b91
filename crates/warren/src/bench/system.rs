//! One trait for a system `warren bench density` measures ([`System`]: warren's zones,
//! `--via oci`, crun, LXC, podman) and the one measured step loop ([`step`],
//! [`measure`]) that times every system's steps the same way: a wall clock around each
//! call of the trait's timed methods, minus what the system's launcher adds
//! ([`System::overhead_ms`]), the same settle time before the memory baseline, the
//! same idle window for CPU, the same host-wide memory samples.
//!
//! [`compare`] runs one compared system over every step and turns the outcome into its
//! [`SystemRun`]: "ok", "not installed" (with the install command), "unavailable" (it
//! broke the cgroup rule: stopped, not measured) or "failed" (with the reason).
//!
//! Cleanup is the system's: [`System::cleanup`] after every step, also after a failure,
//! and each implementation calls it again from its `Drop`, so a panic cleans up too.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::breakdown::{breakdown, Breakdown};
use super::census::{self, Census};
use super::{Options, Step, SystemRun};
use crate::cgroups::CgroupSet;
use crate::error::Error;
use crate::measure::{mem_per_zone, mem_sample, ms, summarize, MemPerZone, Progress};
use crate::stat::{memstat::zone_totals, readers};
use crate::stats::procs_cpu_ns;

/// Why a system's steps stopped. The message is the system's note in results.json.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// It broke the cgroup rule (a cgroup outside the bench's own): stopped, not measured.
    #[error("{0}")]
    Rule(String),
    /// One of its commands exited with an error.
    #[error("{command} ({status}): {stderr}")]
    Command {
        command: String,
        status: std::process::ExitStatus,
        /// What it wrote to stderr, and for LXC the tail of the container's log.
        stderr: String,
    },
    /// One of its commands could not be started.
    #[error("running {command}: {error}")]
    Spawn {
        command: String,
        error: std::io::Error,
    },
    /// A file or directory of the step could not be made, read or removed.
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The busybox root lacks what the containers need.
    #[error("{}: no /{what} in the busybox root", root.display())]
    NotInRoot { root: PathBuf, what: &'static str },
    /// Anything else that stopped it, said in full (a probe that failed, a pid not found).
    #[error("{0}")]
    Failed(String),
    /// warren's own zones failed.
    #[error(transparent)]
    Warren(#[from] Error),
    /// A signal (SIGINT, SIGTERM, SIGHUP) asked the bench to stop.
    #[error("interrupted by signal {0}")]
    Interrupted(i32),
}

impl Failure {
    /// `command` could not be started, for `map_err`.
    pub fn spawn(command: &str) -> impl Fn(std::io::Error) -> Failure + '_ {
        move |error| Failure::Spawn {
            command: command.to_string(),
            error,
        }
    }

    /// An I/O error on `path`, for `map_err`.
    pub fn io(path: &Path) -> impl Fn(std::io::Error) -> Failure + '_ {
        move |error| Failure::Io {
            path: path.to_path_buf(),
            error,
        }
    }
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Failed(s)
    }
}

impl From<Failure> for Error {
    fn from(f: Failure) -> Error {
        match f {
            Failure::Warren(e) => e,
            Failure::Interrupted(sig) => super::interrupt::stopped(sig),
            other => Error::Refused(other.to_string()),
        }
    }
}

/// The four timed steps of a container's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Make it ready to start (results.json's `clone_ms`).
    Clone,
    /// Start it; returns once it runs (`boot_ms`).
    Boot,
    /// Stop it (`halt_ms`).
    Halt,
    /// Remove it (`delete_ms`).
    Delete,
}

/// What a system calls its four timed steps, for progress phases and notes.
#[derive(Debug, Clone, Copy)]
pub struct Verbs {
    pub clone: &'static str,
    pub boot: &'static str,
    pub halt: &'static str,
    pub delete: &'static str,
}

impl Verbs {
    fn of(&self, v: Verb) -> &'static str {
        match v {
            Verb::Clone => self.clone,
            Verb::Boot => self.boot,
            Verb::Halt => self.halt,
            Verb::Delete => self.delete,
        }
    }
}

/// Where the loop reads a system's CPU time from.
pub enum Cpu<'a> {
    /// The containers' processes and their helpers (`/proc/<pid>/stat`).
    Pids(&'a [i32]),
    /// The containers' cgroups (warren's zones).
    Cgroups(&'a [CgroupSet]),
}

impl Cpu<'_> {
    /// CPU time so far, ns.
    fn ns(&self, proc_root: &Path) -> u64 {
        match self {
            Cpu::Pids(p) => procs_cpu_ns(proc_root, p),
            Cpu::Cgroups(c) => c.iter().filter_map(|c| c.cpu_ns()).sum(),
        }
    }
}

/// A system whose containers the bench measures. Containers are numbered `0..n` in a
/// step of `n`; the loop calls `prepare(n)`, then `create` for each, `start` and
/// `started` for each, samples, `stop` for each, `delete` for each, then `cleanup`.
pub trait System {
    /// Its name in results.json and in progress phases.
    fn name(&self) -> &str;
    /// What its timed steps are.
    fn verbs(&self) -> Verbs;
    /// Before anything is timed in a step of `n`: state directories, a base zone.
    fn prepare(&mut self, n: usize) -> Result<(), Failure>;
    /// Timed as 'clone'.
    fn create(&mut self, i: usize) -> Result<(), Failure>;
    /// Timed as 'boot'.
    fn start(&mut self, i: usize) -> Result<(), Failure>;
    /// Not timed, right after `start(i)`: find the container's processes (and helpers
    /// such as LXC's monitor or conmon) and check the cgroup rule for each.
    fn started(&mut self, i: usize) -> Result<(), Failure>;
    /// Where the CPU time of the running containers (and their helpers) is read.
    fn cpu(&self) -> Cpu<'_>;
    /// Disk used by the step's running containers, bytes.
    fn disk_bytes(&self) -> u64;
    /// Timed as 'halt'.
    fn stop(&mut self, i: usize) -> Result<(), Failure>;
    /// Timed as 'delete'.
    fn delete(&mut self, i: usize) -> Result<(), Failure>;
    /// Remove everything the step made (containers, their cgroups, state, files). Called
    /// after every step, also after a failure; idempotent.
    fn cleanup(&mut self) -> Result<(), Failure>;
    /// What the system's launcher adds to each timed call of `verb`, ms (subtracted).
    fn overhead_ms(&self, _verb: Verb) -> f64 {
        0.0
    }
    /// Run `verb` on all `n` containers at once (a pipeline, e.g. `zone::pipeline`),
    /// returning each one's own time in ms; `None` (the default): one by one.
    fn batch(&mut self, _verb: Verb, _n: usize) -> Option<Result<Vec<f64>, Failure>> {
        None
    }
    /// How it was run, for results.json's `note`.
    fn note(&self) -> String;
    /// The OCI runtime a container engine used (podman), for results.json.
    fn runtime(&self) -> Option<String> {
        None
    }
}

/// How a pass samples: the /proc it reads memory from, and how long the started
/// containers sit idle before CPU and memory are read.
#[derive(Debug, Clone, Copy)]
pub struct Pass<'a> {
    pub proc_root: &'a Path,
    pub idle: Duration,
}

/// What one measured pass recorded, before summaries.
#[derive(Debug, Clone)]
pub struct Measured {
    pub clone_ms: Vec<f64>,
    pub boot_ms: Vec<f64>,
    pub mem: MemPerZone,
    /// The memstat-style breakdown, whole set and per container.
    pub breakdown: Breakdown,
    /// Disk of the running containers, bytes.
    pub disk_bytes: u64,
    /// CPU of all containers together over the idle window, % of one CPU.
    pub idle_cpu_pct: f64,
    /// How busy the host's CPUs were over the idle window, % of all CPUs.
    pub host_cpu_pct: f64,
    pub cpu_use: census::CpuUse,
    /// Processes, threads and inotify use at the sample, host-wide and the containers'.
    pub census: Census,
    pub halt_ms: Vec<f64>,
    pub delete_ms: Vec<f64>,
}

/// After a step: stop if a signal asked to ([`Progress::interrupted`]).
fn go_on(progress: &mut dyn Progress) -> Result<(), Failure> {
    progress
        .interrupted()
        .map_or(Ok(()), |sig| Err(Failure::Interrupted(sig)))
}

/// Call `verb` for containers `0..n`, each timed; `label` prefixes the progress phase.
fn each(
    sys: &mut dyn System,
    verb: Verb,
    n: usize,
    label: &str,
    progress: &mut dyn Progress,
) -> Result<Vec<f64>, Failure> {
    progress.phase(&format!("{label}{}", sys.verbs().of(verb)), n as u64);
    let overhead = sys.overhead_ms(verb);
    if let Some(batch) = sys.batch(verb, n) {
        let out = batch?;
        for i in 0..n {
            if verb == Verb::Boot {
                sys.started(i)?;
            }
            progress.step();
            go_on(progress)?;
        }
        return Ok(out.into_iter().map(|t| (t - overhead).max(0.0)).collect());
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        match verb {
            Verb::Clone => sys.create(i),
            Verb::Boot => sys.start(i),
            Verb::Halt => sys.stop(i),
            Verb::Delete => sys.delete(i),
        }?;
        out.push((ms(t.elapsed()) - overhead).max(0.0));
        if verb == Verb::Boot {
            sys.started(i)?;
        }
        progress.step();
        go_on(progress)?;
    }
    Ok(out)
}

/// The measured pass over `n` prepared containers: create, settle, baseline, start,
/// idle, sample, stop, delete. The caller runs [`System::cleanup`] (see [`step`]).
pub fn measure(
    sys: &mut dyn System,
    n: usize,
    at: &Pass,
    label: &str,
    progress: &mut dyn Progress,
) -> Result<Measured, Failure> {
    let (proc_root, idle) = (at.proc_root, at.idle);
    let clone_ms = each(sys, Verb::Clone, n, label, progress)?;
    // Let the page cache and slab settle before the baseline.
    std::thread::sleep(Duration::from_millis(500));
    let before = mem_sample(proc_root);
    let boot_ms = each(sys, Verb::Boot, n, label, progress)?;
    let secs = idle.as_secs().max(1);
    progress.phase(&format!("{label}idle {} s", idle.as_secs_f64()), secs);
    let cpu0 = sys.cpu().ns(proc_root);
    let tasks0 = census::read_cpu(proc_root);
    let t_idle = Instant::now();
    for _ in 0..secs {
        std::thread::sleep(idle / secs as u32);
        progress.step();
        go_on(progress)?;
    }
    let cpu1 = sys.cpu().ns(proc_root);
    let tasks1 = census::read_cpu(proc_root);
    let host_cpu_pct = census::busy_pct(tasks0.ticks(), tasks1.ticks());
    let cpu_use = census::cpu_use(&tasks0, &tasks1, t_idle.elapsed().as_secs_f64());
    let idle_cpu_pct =
        cpu1.saturating_sub(cpu0) as f64 / t_idle.elapsed().as_nanos() as f64 * 100.0;
    let after = mem_sample(proc_root);
    let census = census::take(proc_root, &sys.cpu());
    // What the zones' own memory cgroups hold, where the system names its cgroups.
    let charged = match sys.cpu() {
        Cpu::Cgroups(sets) => Some(zone_totals(
            &sets.iter().map(readers::zone_memory).collect::<Vec<_>>(),
        )),
        Cpu::Pids(_) => None,
    };
    let breakdown = breakdown(&before.meminfo, &after.meminfo, n, charged.as_ref());
    let disk_bytes = sys.disk_bytes();
    let halt_ms = each(sys, Verb::Halt, n, label, progress)?;
    let delete_ms = each(sys, Verb::Delete, n, label, progress)?;
    Ok(Measured {
        clone_ms,
        boot_ms,
        mem: mem_per_zone(&before, &after, n),
        breakdown,
        disk_bytes,
        idle_cpu_pct,
        host_cpu_pct,
        cpu_use,
        census,
        halt_ms,
        delete_ms,
    })
}

/// One step of `n` containers: prepare, [`measure`], cleanup (also on failure); its
/// wall time includes all three.
pub fn step(
    sys: &mut dyn System,
    n: usize,
    at: &Pass,
    progress: &mut dyn Progress,
) -> Result<Step, Failure> {
    let started = Instant::now();
    let label = format!("{} N={n} ", sys.name());
    let r = sys
        .prepare(n)
        .and_then(|_| measure(sys, n, at, &label, progress));
    let cleaned = sys.cleanup();
    let r = r?;
    cleaned?;
    Ok(Step {
        zones: n,
        clone_ms: summarize(&r.clone_ms),
        boot_ms: summarize(&r.boot_ms),
        total_s: started.elapsed().as_secs_f64(),
        mem_per_zone: r.mem,
        memory: r.breakdown,
        disk_per_zone_kib: r.disk_bytes as f64 / n as f64 / 1024.0,
        idle_cpu_pct: r.idle_cpu_pct,
        host_cpu_pct: r.host_cpu_pct,
        cpu_use: r.cpu_use,
        census: r.census,
        next_step: None,
        halt_ms: summarize(&r.halt_ms),
        delete_ms: summarize(&r.delete_ms),
    })
}

/// Where `prog` is on PATH.
pub fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// What a compared system needs on the host: its command and the Debian package.
pub struct Needs {
    pub command: &'static str,
    pub package: &'static str,
}

/// Run a compared system over every step of `opts`. `needs`: checked first (the bench
/// installs nothing); `open`: makes the system (its private store, probes). Whatever
/// happens, the result is a [`SystemRun`] with the status and the reason.
pub fn compare<'a>(
    name: &str,
    needs: Option<Needs>,
    open: impl FnOnce(&mut dyn Progress) -> Result<Box<dyn System + 'a>, Failure>,
    opts: &Options,
    proc_root: &Path,
    progress: &mut dyn Progress,
) -> SystemRun {
    let at = Pass {
        proc_root,
        idle: opts.idle,
    };
    let mut run = SystemRun {
        name: name.into(),
        status: "ok".into(),
        note: String::new(),
        runtime: None,
        steps: Vec::new(),
    };
    if let Some(needs) = needs.filter(|n| which(n.command).is_none()) {
        run.status = "not installed".into();
        run.note = format!(
            "not installed; the bench installs nothing: apt-get install {}",
            needs.package
        );
        return run;
    }
    let outcome = open(progress).and_then(|mut sys| {
        run.runtime = sys.runtime();
        for &n in &opts.steps {
            run.steps.push(step(sys.as_mut(), n, &at, progress)?);
        }
        Ok(sys.note())
    });
    match outcome {
        Ok(note) => run.note = note,
        Err(Failure::Rule(e)) => {
            run.status = "unavailable".into();
            run.note = format!("{name} did not keep its cgroups beneath the bench's own cgroup, so its containers were removed and it is not measured: {e}");
            run.steps.clear();
        }
        Err(e) => {
            run.status = "failed".into();
            run.note = e.to_string();
        }
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::NoProgress;

    /// A system that records the calls and fails where told.
    struct Script {
        calls: Vec<String>,
        fail_at: Option<(Verb, usize)>,
        rule: bool,
        cleaned: usize,
    }

    impl Script {
        fn call(&mut self, v: Verb, i: usize) -> Result<(), Failure> {
            self.calls.push(format!("{v:?}{i}"));
            match self.fail_at {
                Some((fv, fi)) if fv == v && fi == i && self.rule => {
                    Err(Failure::Rule(format!("{v:?} {i} outside")))
                }
                Some((fv, fi)) if fv == v && fi == i => Err(format!("{v:?} {i} broke").into()),
                _ => Ok(()),
            }
        }
    }

    impl System for Script {
        fn name(&self) -> &str {
            "script"
        }
        fn verbs(&self) -> Verbs {
            Verbs {
                clone: "c",
                boot: "b",
                halt: "h",
                delete: "d",
            }
        }
        fn prepare(&mut self, n: usize) -> Result<(), Failure> {
            self.calls.push(format!("prepare{n}"));
            Ok(())
        }
        fn create(&mut self, i: usize) -> Result<(), Failure> {
            self.call(Verb::Clone, i)
        }
        fn start(&mut self, i: usize) -> Result<(), Failure> {
            self.call(Verb::Boot, i)
        }
        fn started(&mut self, i: usize) -> Result<(), Failure> {
            self.calls.push(format!("started{i}"));
            Ok(())
        }
        fn cpu(&self) -> Cpu<'_> {
            Cpu::Pids(&[])
        }
        fn disk_bytes(&self) -> u64 {
            4096
        }
        fn stop(&mut self, i: usize) -> Result<(), Failure> {
            self.call(Verb::Halt, i)
        }
        fn delete(&mut self, i: usize) -> Result<(), Failure> {
            self.call(Verb::Delete, i)
        }
        fn cleanup(&mut self) -> Result<(), Failure> {
            self.cleaned += 1;
            Ok(())
        }
        fn overhead_ms(&self, v: Verb) -> f64 {
            if v == Verb::Boot {
                1e9
            } else {
                0.0
            }
        }
        fn note(&self) -> String {
            format!("{} calls", self.calls.len())
        }
    }

    fn pass() -> Pass<'static> {
        Pass {
            proc_root: Path::new("/proc"),
            idle: Duration::from_millis(10),
        }
    }

    fn script(fail_at: Option<(Verb, usize)>, rule: bool) -> Script {
        Script {
            calls: Vec::new(),
            fail_at,
            rule,
            cleaned: 0,
        }
    }

    #[test]
    fn one_step_calls_every_verb_in_order_and_cleans_up() {
        let mut s = script(None, false);
        let st = step(&mut s, 2, &pass(), &mut NoProgress).unwrap();
        assert_eq!(
            s.calls,
            [
                "prepare2", "Clone0", "Clone1", "Boot0", "started0", "Boot1", "started1", "Halt0",
                "Halt1", "Delete0", "Delete1"
            ]
        );
        assert_eq!(s.cleaned, 1);
        assert_eq!(st.zones, 2);
        assert_eq!(st.disk_per_zone_kib, 2.0);
        // The launcher's overhead is subtracted, never below zero.
        assert_eq!(st.boot_ms.max, 0.0);
    }

    #[test]
    fn a_failed_step_still_cleans_up() {
        let mut s = script(Some((Verb::Boot, 1)), false);
        let e = step(&mut s, 3, &pass(), &mut NoProgress).unwrap_err();
        assert_eq!(e.to_string(), "Boot 1 broke");
        assert_eq!(s.cleaned, 1);
        assert!(!s.calls.contains(&"Halt0".to_string()), "{:?}", s.calls);
    }

    fn opts(steps: Vec<usize>) -> Options {
        Options {
            steps,
            template: super::super::TemplateKind::Busybox,
            bridge: false,
            idle: Duration::from_millis(10),
            compare: Vec::new(),
            via_oci: false,
        }
    }

    #[test]
    fn compare_reports_ok_rule_and_failure() {
        let o = opts(vec![1, 2]);
        let r = compare(
            "script",
            None,
            |_| Ok(Box::new(script(None, false))),
            &o,
            Path::new("/proc"),
            &mut NoProgress,
        );
        assert_eq!((r.status.as_str(), r.steps.len()), ("ok", 2));
        // Steps of 1 and 2: a prepare and five calls per container each.
        assert_eq!(r.note, "17 calls");
        let r = compare(
            "script",
            None,
            |_| Ok(Box::new(script(Some((Verb::Boot, 1)), true))),
            &o,
            Path::new("/proc"),
            &mut NoProgress,
        );
        assert_eq!(r.status, "unavailable");
        assert!(
            r.steps.is_empty(),
            "a system that broke the rule is not measured"
        );
        assert!(r.note.contains("Boot 1 outside"), "{}", r.note);
        let r = compare(
            "script",
            None,
            |_| Err("no store".to_string().into()),
            &o,
            Path::new("/proc"),
            &mut NoProgress,
        );
        assert_eq!((r.status.as_str(), r.note.as_str()), ("failed", "no store"));
    }

    #[test]
    fn compare_says_how_to_install_a_missing_system() {
        let r = compare(
            "nothing",
            Some(Needs {
                command: "warren-bench-no-such-command",
                package: "nothing-pkg",
            }),
            |_| unreachable!("not opened when missing"),
            &opts(vec![1]),
            Path::new("/proc"),
            &mut NoProgress,
        );
        assert_eq!(r.status, "not installed");
        assert!(r.note.contains("apt-get install nothing-pkg"), "{}", r.note);
    }
}
