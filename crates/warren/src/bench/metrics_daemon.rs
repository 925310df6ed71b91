//! `warren bench metrics --daemon EXE`: the daemon's own `/metrics` over the same N
//! running zones, and its memory. For a step, a `warren-daemon` is started on the
//! bench's state root with a socket of its own (a 0700 directory under /tmp, removed
//! after), one scrape is timed cold (its kept scraper's first: every disk walk) and
//! `scrapes` warm over the unix socket (request to the last byte of the answer, as a
//! Prometheus server sees it), then its resident memory is read (VmRSS and VmHWM of
//! /proc/PID/status: the figure is the daemon's memory with 1,000 zones) and
//! it is killed. The daemon is this bench's child: a guard kills and reaps it and
//! removes its directory, also when the step fails.

use std::io::{Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::measure::{self, Summary};
use crate::zone::Context;

/// The daemon's figures in one step.
#[derive(Debug, Clone, Serialize)]
pub struct DaemonStep {
    /// The daemon's first scrape (its scraper new: every private layer walked).
    pub first_ms: f64,
    /// Its warm scrapes, over the unix socket.
    pub warm_ms: Summary,
    /// VmRSS after the scrapes, KiB.
    pub rss_kib: Option<u64>,
    /// VmHWM (the peak resident set since it started), KiB.
    pub peak_rss_kib: Option<u64>,
    /// Size of the answer's body.
    pub bytes: usize,
}

/// A daemon started by the bench: killed, reaped and its directory removed on drop.
struct Daemon {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn failed(exe: &Path, what: String) -> Error {
    Error::Invalid(format!(
        "--daemon {}: {what}; give the warren-daemon built with this warren (e.g. target/release/warren-daemon)",
        exe.display()
    ))
}

impl Daemon {
    fn start(ctx: &Context, exe: &Path) -> Result<Daemon> {
        let dir = std::env::temp_dir().join(format!("warren-bench-daemon-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| failed(exe, format!("making {}: {e}", dir.display())))?;
        let socket = dir.join("warren.sock");
        let log = std::fs::File::create(dir.join("daemon.log"))
            .map_err(|e| failed(exe, format!("its log in {}: {e}", dir.display())))?;
        let child = Command::new(exe)
            .arg("--root")
            .arg(ctx.layout.root())
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(failed(exe, format!("starting it: {e}")));
            }
        };
        let d = Daemon { child, dir, socket };
        let t = Instant::now();
        while UnixStream::connect(&d.socket).is_err() {
            if t.elapsed() > Duration::from_secs(10) {
                let log = std::fs::read_to_string(d.dir.join("daemon.log")).unwrap_or_default();
                return Err(failed(
                    exe,
                    format!("it did not listen within 10 s: {}", log.trim()),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(d)
    }

    /// One `GET /metrics` (OpenMetrics): its body.
    fn scrape(&self) -> std::io::Result<String> {
        let mut s = UnixStream::connect(&self.socket)?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        s.write_all(
            b"GET /metrics HTTP/1.1\r\nHost: warren\r\nAccept: application/openmetrics-text; version=1.0.0\r\nConnection: close\r\n\r\n",
        )?;
        let mut resp = String::new();
        s.read_to_string(&mut resp)?;
        let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
        if !head.starts_with("HTTP/1.1 200") {
            return Err(std::io::Error::other(format!(
                "/metrics answered {}",
                head.lines().next().unwrap_or("nothing")
            )));
        }
        Ok(body.to_string())
    }
}

/// A `VmRSS:`-style line of /proc/PID/status, in KiB. Pure.
pub fn status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Start `exe` on `ctx`'s root, time its scrapes, read its memory, stop it.
pub fn measure(ctx: &Context, exe: &Path, scrapes: usize) -> Result<DaemonStep> {
    let d = Daemon::start(ctx, exe)?;
    let scrape = || d.scrape().map_err(|e| failed(exe, e.to_string()));
    let t = Instant::now();
    let text = scrape()?;
    let first_ms = measure::ms(t.elapsed());
    let mut warm = Vec::with_capacity(scrapes);
    for _ in 0..scrapes {
        let t = Instant::now();
        scrape()?;
        warm.push(measure::ms(t.elapsed()));
    }
    let status = std::fs::read_to_string(ctx.host.proc.join(format!("{}/status", d.child.id())))
        .unwrap_or_default();
    Ok(DaemonStep {
        first_ms,
        warm_ms: measure::summarize(&warm),
        rss_kib: status_kib(&status, "VmRSS"),
        peak_rss_kib: status_kib(&status, "VmHWM"),
        bytes: text.len(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_kib_lines_of_proc_status() {
        let s = "Name:\twarren-daemon\nVmHWM:\t   14080 kB\nVmRSS:\t   12544 kB\n";
        assert_eq!(super::status_kib(s, "VmRSS"), Some(12544));
        assert_eq!(super::status_kib(s, "VmHWM"), Some(14080));
        assert_eq!(super::status_kib(s, "VmSwap"), None);
    }
}
