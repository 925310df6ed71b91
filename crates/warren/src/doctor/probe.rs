//! `warren doctor --probe procs|threads`: measure, instead of estimate, how many tasks
//! the host lets warren create: a limited fork bomb.
//!
//! Safety by construction:
//! - The bomb runs in a throwaway pids cgroup, `warren-probe-<warren's pid>`, made
//!   beneath warren's own cgroup, whose `pids.max` is the `--cap` or `--max` plus a small
//!   margin: whatever happens, it cannot take more tasks than that.
//! - A forked probe process joins that cgroup before it creates anything, and creates
//!   tasks (processes that pause, or threads that park) at a bounded rate until `--max`
//!   or the first failure.
//! - Every probe task dies with its parent (PR_SET_PDEATHSIG = SIGKILL), so killing
//!   warren kills the probe, which kills its children. warren is a child subreaper while
//!   probing, so it reaps them all.
//! - warren blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT while probing, and always cleans
//!   up: kill everything in the cgroup (through its cgroup.procs), reap, rmdir.
//! - A probe cgroup left by a warren killed with SIGKILL is empty (its tasks died with
//!   it) and is removed by the next `warren doctor` ([`sweep`]): its pid is dead.
//!
//! Which limit stopped the probe is decided by a pure function ([`attribute`]) of what
//! the kernel said (errno) and the counters read right after the failure.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use warren_sys::libc;

mod stop;

pub use stop::{attribute, Stop, StopFacts};

use super::snapshot::{parse_limits, read_sysctl, read_tasks};
use crate::cgroups::{own_dirs, parse_mountinfo, parse_proc_cgroup, CgroupSet, CgroupVersion};
use crate::error::{Error, IoContext, Result};
use crate::zone::Context;

/// What the probe creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// Processes that pause.
    Procs,
    /// Threads (of the probe process) that park.
    Threads,
}

/// pids.max of the probe cgroup without `--cap`: `--max` + this margin (the probe
/// process itself is one task).
pub const CAP_MARGIN: u64 = 8;
/// Creation rate bound: at most this many tasks per [`PACE`].
const BATCH: u64 = 100;
const PACE: Duration = Duration::from_millis(10);
/// Signals that must not kill warren before it cleans up.
const HELD: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];
const PREFIX: &str = "warren-probe-";

/// What `--probe` reports (its `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    pub kind: ProbeKind,
    pub max: u64,
    /// pids.max of the probe cgroup.
    pub cap: u64,
    pub created: u64,
    pub stopped_by: Stop,
    /// The error that stopped it, as the kernel said it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub cgroup: PathBuf,
    pub elapsed_ms: u64,
    /// The signal (Ctrl-C: 2) that cut the probe short, after which it cleaned up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<i32>,
}

/// The directory probe cgroups are made in: warren's own cgroup with the pids controller.
pub fn pids_parent(ctx: &Context) -> Result<PathBuf> {
    let (_, hier) = ctx.cgroups()?;
    let read = |rel: &str| {
        let p = ctx.host.proc.join(rel);
        std::fs::read_to_string(&p).ctx(|| format!("reading {}", p.display()))
    };
    let dirs = own_dirs(
        &parse_mountinfo(&read("self/mountinfo")?),
        &parse_proc_cgroup(&read("self/cgroup")?),
    );
    let found = dirs.into_iter().find(|(v, c, _)| {
        *v == hier.version && (*v == CgroupVersion::V2 || c.iter().any(|x| x == "pids"))
    });
    let Some((version, _, dir)) = found else {
        return Err(Error::Unsupported(
            "no pids cgroup hierarchy for the probe; mount the pids controller".into(),
        ));
    };
    if version == CgroupVersion::V2 {
        // As a boot does: warren into its leaf, pids enabled in the delegated base.
        let base = crate::cgroups::delegate::base_of(&dir);
        crate::cgroups::delegate::ensure(&base, &["pids"])?;
        return Ok(base);
    }
    Ok(dir)
}

fn kill_and_remove(dir: &Path) -> Result<()> {
    let version = if dir.join("cgroup.kill").exists() || dir.join("cgroup.events").exists() {
        CgroupVersion::V2
    } else {
        CgroupVersion::V1
    };
    let set = CgroupSet {
        version,
        dirs: vec![("pids".into(), dir.to_path_buf())],
    };
    set.kill_all(Duration::from_secs(10))?;
    reap_all(Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e).ctx(|| format!("removing the probe cgroup {}", dir.display())),
        }
    }
}

/// Reap every child (the probe and, as subreaper, its orphans) until none is left.
fn reap_all(timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        match warren_sys::proc::waitpid_nohang(-1) {
            Ok(Some(_)) => continue,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => return, // ECHILD: none left (or out of time)
        }
    }
}

/// Remove probe cgroups whose warren is dead (it was killed before it could clean up).
/// Returns what was removed, or why not. Does nothing unless root.
pub fn sweep(ctx: &Context) -> Vec<String> {
    if warren_sys::geteuid() != 0 {
        return Vec::new();
    }
    let Ok(parent) = pids_parent(ctx) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if ctx.host.proc.join(pid.to_string()).exists() {
            continue; // its warren is alive (probing now, or the pid was reused)
        }
        let dir = e.path();
        out.push(match kill_and_remove(&dir) {
            Ok(()) => format!("removed the leftover probe cgroup {}", dir.display()),
            Err(e) => format!(
                "could not remove the leftover probe cgroup {}: {e}",
                dir.display()
            ),
        });
    }
    out
}

/// The probe cgroup; dropping it kills everything in it and removes it (only in the
/// process that made it: a forked child must not).
struct ProbeCgroup {
    dir: PathBuf,
    owner: i32,
    done: bool,
}

impl ProbeCgroup {
    fn create(parent: &Path, cap: u64) -> Result<ProbeCgroup> {
        let owner = warren_sys::getpid();
        let dir = parent.join(format!("{PREFIX}{owner}"));
        std::fs::create_dir(&dir).ctx(|| format!("creating the probe cgroup {}", dir.display()))?;
        let g = ProbeCgroup {
            dir,
            owner,
            done: false,
        };
        let max = g.dir.join("pids.max");
        std::fs::write(&max, cap.to_string()).ctx(|| format!("writing {}", max.display()))?;
        Ok(g)
    }

    fn read_u64(&self, file: &str, key: Option<&str>) -> Option<u64> {
        let text = std::fs::read_to_string(self.dir.join(file)).ok()?;
        match key {
            None => text.trim().parse().ok(),
            Some(k) => text
                .lines()
                .find_map(|l| l.strip_prefix(k)?.trim().parse().ok()),
        }
    }

    fn cleanup(&mut self) -> Result<()> {
        self.done = true;
        kill_and_remove(&self.dir)
    }
}

impl Drop for ProbeCgroup {
    fn drop(&mut self) {
        if !self.done && warren_sys::getpid() == self.owner {
            let _ = self.cleanup();
        }
    }
}

/// Record the probe process sends: status (0 done, 1 could not join), errno, count.
const RECORD: usize = 16;

fn send(fd: &OwnedFd, status: u32, errno: i32, count: u64) {
    let mut b = [0u8; RECORD];
    b[..4].copy_from_slice(&status.to_ne_bytes());
    b[4..8].copy_from_slice(&errno.to_ne_bytes());
    b[8..].copy_from_slice(&count.to_ne_bytes());
    let _ = warren_sys::pty::write_fd(fd.as_raw_fd(), &b);
}

fn errno_of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// The probe process: join the cgroup, create tasks, report, wait to be killed.
fn probe_child(
    kind: ProbeKind,
    max: u64,
    parent: i32,
    mut procs: File,
    report: OwnedFd,
    mask: &warren_sys::signal::SavedMask,
) -> ! {
    // Ctrl-C reaches the probe and its tasks again; warren keeps it blocked.
    let _ = warren_sys::signal::restore(mask);
    if warren_sys::proc::set_pdeathsig(libc::SIGKILL).is_err()
        || warren_sys::proc::getppid() != parent
    {
        warren_sys::exit_now(1); // warren is already gone
    }
    if let Err(e) = procs.write_all(b"0") {
        send(&report, 1, errno_of(&e), 0);
        warren_sys::exit_now(1);
    }
    drop(procs);
    let me = warren_sys::getpid();
    let mut created = 0;
    let mut errno = 0;
    while created < max {
        let r = match kind {
            ProbeKind::Procs => warren_sys::proc::fork().map(|pid| {
                if pid == 0 {
                    if warren_sys::proc::set_pdeathsig(libc::SIGKILL).is_err()
                        || warren_sys::proc::getppid() != me
                    {
                        warren_sys::exit_now(0);
                    }
                    warren_sys::proc::pause_forever();
                }
            }),
            ProbeKind::Threads => std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(|| loop {
                    std::thread::park();
                })
                .map(drop),
        };
        if let Err(e) = r {
            errno = errno_of(&e);
            break;
        }
        created += 1;
        if created % BATCH == 0 {
            std::thread::sleep(PACE);
        }
    }
    send(&report, 0, errno, created);
    warren_sys::proc::pause_forever();
}

/// Run the probe. Always removes its cgroup and every task it made before returning.
pub fn run(ctx: &Context, kind: ProbeKind, max: u64, cap: Option<u64>) -> Result<ProbeReport> {
    ctx.require_root()?;
    if max == 0 {
        return Err(Error::Invalid(
            "--max must be at least 1: give the most tasks to start, e.g. --max 5000".into(),
        ));
    }
    if cap.is_some_and(|c| c < 2) {
        return Err(Error::Invalid(
            "--cap must be at least 2 (the probe process itself is one task), e.g. --cap 64".into(),
        ));
    }
    let cap = cap.unwrap_or(max.saturating_add(CAP_MARGIN));
    let parent = pids_parent(ctx)?;
    let mut cg = ProbeCgroup::create(&parent, cap)?;
    let procs_path = cg.dir.join("cgroup.procs");
    let procs = OpenOptions::new()
        .write(true)
        .open(&procs_path)
        .ctx(|| format!("opening {}", procs_path.display()))?;
    let (rd, wr) = warren_sys::spawn::pipe_cloexec().ctx(|| "creating a pipe".into())?;
    let mask = warren_sys::signal::block(&HELD).ctx(|| "blocking signals".into())?;
    let result = (|| {
        warren_sys::proc::set_child_subreaper().ctx(|| "becoming a child subreaper".into())?;
        let me = warren_sys::getpid();
        let t0 = Instant::now();
        let pid = warren_sys::proc::fork().ctx(|| "forking the probe process".into())?;
        if pid == 0 {
            drop(rd);
            probe_child(kind, max, me, procs, wr, &mask);
        }
        drop(procs);
        drop(wr);
        let (record, signal) = wait_record(&rd, pid)?;
        let elapsed_ms = t0.elapsed().as_millis() as u64;
        let mut report = ProbeReport {
            kind,
            max,
            cap,
            created: 0,
            stopped_by: Stop::Reached,
            error: None,
            cgroup: cg.dir.clone(),
            elapsed_ms,
            interrupted_by: signal,
        };
        let Some((status, errno, created)) = record else {
            return Ok(report);
        };
        if status == 1 {
            return Err(Error::Refused(format!(
                "the probe process could not join {}: {}; check 'warren info' for the cgroup warren runs in",
                procs_path.display(),
                std::io::Error::from_raw_os_error(errno)
            )));
        }
        let proc_root = &ctx.host.proc;
        let limits = std::fs::read_to_string(proc_root.join("self/limits")).unwrap_or_default();
        let facts = StopFacts {
            errno,
            cap,
            events_max: cg.read_u64("pids.events", Some("max ")).unwrap_or(0),
            probe_tasks: cg.read_u64("pids.current", None).unwrap_or(0),
            host_tasks: read_tasks(proc_root).ok(),
            pid_max: read_sysctl(proc_root, "kernel.pid_max").and_then(Result::ok),
            threads_max: read_sysctl(proc_root, "kernel.threads-max").and_then(Result::ok),
            nproc_soft: parse_limits(&limits, "Max processes").map(|(s, _)| s),
            euid: warren_sys::geteuid(),
        };
        report.created = created;
        report.stopped_by = attribute(&facts);
        report.error = (errno != 0).then(|| std::io::Error::from_raw_os_error(errno).to_string());
        Ok(report)
    })();
    let cleanup = cg.cleanup();
    // Signals that arrived meanwhile are taken here, not delivered on restore.
    let late = warren_sys::signal::take(&HELD);
    let _ = warren_sys::signal::restore(&mask);
    match (result, cleanup) {
        (Ok(mut r), Ok(())) => {
            r.interrupted_by = r.interrupted_by.or(late);
            Ok(r)
        }
        (Ok(_), Err(c)) => Err(c),
        (Err(e), c) => Err(e.with_cleanup(c.err())),
    }
}

type Record = (u32, i32, u64);

/// Wait for the probe's record, a held signal, or the probe's death.
fn wait_record(rd: &OwnedFd, pid: i32) -> Result<(Option<Record>, Option<i32>)> {
    loop {
        if let Some(sig) = warren_sys::signal::take(&HELD) {
            return Ok((None, Some(sig)));
        }
        let ready = warren_sys::pty::poll_in(&[rd.as_raw_fd()], 100)
            .ctx(|| "waiting for the probe".into())?;
        if ready[0] & libc::POLLIN != 0 {
            let mut b = [0u8; RECORD];
            let mut got = 0;
            while got < RECORD {
                let n = warren_sys::pty::read_fd(rd.as_raw_fd(), &mut b[got..])
                    .ctx(|| "reading the probe's report".into())?;
                if n == 0 {
                    break;
                }
                got += n;
            }
            if got == RECORD {
                let status = u32::from_ne_bytes(b[..4].try_into().expect("4 bytes"));
                let errno = i32::from_ne_bytes(b[4..8].try_into().expect("4 bytes"));
                let count = u64::from_ne_bytes(b[8..].try_into().expect("8 bytes"));
                return Ok((Some((status, errno, count)), None));
            }
        }
        if let Ok(Some((_, status))) = warren_sys::proc::waitpid_nohang(pid) {
            return Err(Error::Refused(format!(
                "the probe process died before it reported (exit status {}); its cgroup was cleaned up",
                status.code()
            )));
        }
    }
}
