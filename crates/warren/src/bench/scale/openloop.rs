//! The open-loop load generator of `bench scale --workload http`.
//!
//! # Why open loop
//!
//! A closed-loop client (send, wait for the answer, send again) slows down with the
//! server it measures: when a response is late, the requests that should have been
//! sent meanwhile are never sent, and their delay is never counted ("coordinated
//! omission"). The consolidation study's guests served a fixed load each, so here
//! every zone gets requests at a fixed rate, scheduled by the clock before the run
//! starts ([`schedule`]): request k of zone z is due at `phase(z) + k / rate`. A late
//! response does not delay the next request; each request runs on its own. Response
//! time is measured from the request's **scheduled** time to its last byte, so a
//! generator or server that falls behind shows as response time, never as silently
//! fewer requests.
//!
//! # How
//!
//! One tokio current-thread runtime on a thread of its own (non-blocking sockets, one
//! task per request): the dispatcher sleeps until each request's due time and spawns
//! it; the task connects, sends `GET <page> HTTP/1.0`, reads to EOF (the servers close
//! after each answer), checks the status and the body's size, and reports. Zones'
//! phases are spread evenly over one period, so N zones do not all fire at once.
//! Requests that have not finished 5 s after they were due are errors ("timeout").
//!
//! The generator is measured itself: its thread's CPU time (from
//! `/proc/thread-self/schedstat`, nanoseconds) and how late the dispatcher was
//! (`dispatch_lag_max_ms`), so a report shows when the generator, not the zones, was
//! the bottleneck.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::http::{page_of, Page};

/// A request not done this long after it was due is an error.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// One scheduled request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Due {
    /// From the run's start.
    pub at: Duration,
    pub zone: usize,
    /// The zone's request number (picks the page).
    pub k: u64,
}

/// Every request of a run, in time order: `zones` zones at `rate` requests/s each for
/// `duration`. Zone z's phase is z / (zones × rate) s.
pub fn schedule(zones: usize, rate: f64, duration: Duration) -> Vec<Due> {
    if zones == 0 || rate <= 0.0 {
        return Vec::new();
    }
    let period = 1.0 / rate;
    let per_zone = (duration.as_secs_f64() * rate).floor() as u64;
    let mut v: Vec<Due> = (0..zones)
        .flat_map(|z| {
            let phase = period * z as f64 / zones as f64;
            (0..per_zone).map(move |k| Due {
                at: Duration::from_secs_f64(phase + k as f64 * period),
                zone: z,
                k,
            })
        })
        .collect();
    v.sort_by(|a, b| a.at.cmp(&b.at).then(a.zone.cmp(&b.zone)));
    v
}

/// What became of one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Response time from the due time to the last byte, ms.
    Ok(f64),
    /// Why it failed: "connect", "timeout", "status", "short", "io".
    Err(&'static str),
}

/// One zone's requests.
#[derive(Debug, Clone, Default)]
pub struct ZoneLoad {
    /// Requests scheduled (all of which were sent).
    pub scheduled: u64,
    /// Response times of the requests answered as expected, ms.
    pub latencies_ms: Vec<f64>,
    pub errors: u64,
}

/// A whole run.
#[derive(Debug, Clone, Default)]
pub struct RunLoad {
    pub zones: Vec<ZoneLoad>,
    /// Failed requests by reason.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// The generator thread's CPU time, ns.
    pub generator_cpu_ns: u64,
    /// From the first due time to the last answer (or timeout), s.
    pub elapsed_s: f64,
    /// The most the dispatcher was behind a due time, ms.
    pub dispatch_lag_max_ms: f64,
}

/// Check an answer: the status line's code is the page's, and a 200's body has the
/// page's size.
pub fn check(page: &Page, answer: &[u8]) -> Result<(), &'static str> {
    let line_end = answer
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or("status")?;
    let line = std::str::from_utf8(&answer[..line_end]).map_err(|_| "status")?;
    let mut parts = line.split_whitespace();
    if !parts.next().is_some_and(|v| v.starts_with("HTTP/1.")) {
        return Err("status");
    }
    let code: u16 = parts.next().and_then(|c| c.parse().ok()).ok_or("status")?;
    if code != page.status {
        return Err("status");
    }
    if page.status == 200 {
        let head_end = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or("short")?;
        if answer.len() - (head_end + 4) != page.bytes {
            return Err("short");
        }
    }
    Ok(())
}

async fn one(addr: SocketAddr, page: &'static Page) -> Result<(), &'static str> {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|_| "connect")?;
    let req = format!("GET {} HTTP/1.0\r\nHost: zone\r\n\r\n", page.path);
    s.write_all(req.as_bytes()).await.map_err(|_| "io")?;
    let mut buf = Vec::with_capacity(page.bytes + 512);
    s.read_to_end(&mut buf).await.map_err(|_| "io")?;
    check(page, &buf)
}

/// The calling thread's CPU time so far, ns (0 if unreadable).
pub fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Run the schedule against `addrs` (one per zone) on a thread of its own; returns
/// when every request has finished or timed out.
pub fn run(addrs: Vec<SocketAddr>, rate: f64, duration: Duration) -> std::io::Result<RunLoad> {
    let plan = schedule(addrs.len(), rate, duration);
    std::thread::Builder::new()
        .name("warren-loadgen".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()?;
            let cpu0 = thread_cpu_ns();
            let mut out = rt.block_on(drive(addrs, plan));
            out.generator_cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
            Ok(out)
        })?
        .join()
        .map_err(|_| std::io::Error::other("the load generator thread panicked"))?
}

async fn drive(addrs: Vec<SocketAddr>, plan: Vec<Due>) -> RunLoad {
    let mut out = RunLoad {
        zones: vec![ZoneLoad::default(); addrs.len()],
        ..RunLoad::default()
    };
    let mut tasks = tokio::task::JoinSet::new();
    // A moment to spawn nothing late at the start.
    let start = tokio::time::Instant::now() + Duration::from_millis(50);
    let record = |out: &mut RunLoad, (zone, o): (usize, Outcome)| match o {
        Outcome::Ok(ms) => out.zones[zone].latencies_ms.push(ms),
        Outcome::Err(kind) => {
            out.zones[zone].errors += 1;
            *out.errors_by_kind.entry(kind.to_string()).or_default() += 1;
        }
    };
    for d in &plan {
        let due = start + d.at;
        tokio::time::sleep_until(due).await;
        let lag = tokio::time::Instant::now().saturating_duration_since(due);
        out.dispatch_lag_max_ms = out.dispatch_lag_max_ms.max(lag.as_secs_f64() * 1000.0);
        out.zones[d.zone].scheduled += 1;
        let (addr, page, zone) = (addrs[d.zone], page_of(d.k), d.zone);
        let due_std: Instant = due.into_std();
        tasks.spawn(async move {
            let left = TIMEOUT.saturating_sub(due_std.elapsed());
            let o = match tokio::time::timeout(left, one(addr, page)).await {
                Ok(Ok(())) => Outcome::Ok(due_std.elapsed().as_secs_f64() * 1000.0),
                Ok(Err(kind)) => Outcome::Err(kind),
                Err(_) => Outcome::Err("timeout"),
            };
            (zone, o)
        });
        while let Some(r) = tasks.try_join_next() {
            if let Ok(r) = r {
                record(&mut out, r);
            }
        }
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok(r) = r {
            record(&mut out, r);
        }
    }
    out.elapsed_s = start.elapsed().as_secs_f64();
    out
}

/// Mean, p50, p99 and max of a sample, ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Latency {
    pub fn of(v: &[f64]) -> Latency {
        if v.is_empty() {
            return Latency::default();
        }
        let s = crate::measure::summarize(v);
        Latency {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: s.median,
            p99: s.p99,
            max: s.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::scale::http::PAGES;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    #[test]
    fn the_schedule_is_fixed_by_the_clock_and_spread_over_zones() {
        let s = schedule(4, 5.0, Duration::from_secs(2));
        assert_eq!(s.len(), 4 * 10);
        assert!(s.windows(2).all(|w| w[0].at <= w[1].at));
        // Zone 1 is a quarter period behind zone 0; each zone every 200 ms.
        let z1: Vec<Duration> = s.iter().filter(|d| d.zone == 1).map(|d| d.at).collect();
        assert_eq!(z1[0], Duration::from_millis(50));
        assert_eq!(z1[1] - z1[0], Duration::from_millis(200));
        assert!(schedule(0, 5.0, Duration::from_secs(1)).is_empty());
        assert!(schedule(3, 0.0, Duration::from_secs(1)).is_empty());
    }

    #[test]
    fn answers_are_checked_by_status_and_size() {
        let html = &PAGES[0];
        let ok = format!("HTTP/1.0 200 OK\r\nX: y\r\n\r\n{}", "w".repeat(html.bytes));
        assert_eq!(check(html, ok.as_bytes()), Ok(()));
        let short = format!("HTTP/1.0 200 OK\r\n\r\n{}", "w".repeat(10));
        assert_eq!(check(html, short.as_bytes()), Err("short"));
        assert_eq!(
            check(html, b"HTTP/1.1 404 Not Found\r\n\r\nx"),
            Err("status")
        );
        assert_eq!(
            check(&PAGES[3], b"HTTP/1.1 404 Not Found\r\n\r\nnope"),
            Ok(())
        );
        assert_eq!(check(html, b"garbage"), Err("status"));
    }

    #[test]
    fn latency_summary() {
        let l = Latency::of(&[1.0, 2.0, 3.0, 10.0]);
        assert_eq!((l.mean, l.max), (4.0, 10.0));
        assert_eq!(Latency::of(&[]), Latency::default());
    }

    /// A server that stalls every request for 300 ms at 10 requests/s: a closed-loop
    /// client would send 3-4 requests in a second; the open loop sends all 10 and
    /// counts the stall in every response time.
    #[test]
    fn a_slow_server_does_not_slow_the_offered_load() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                std::thread::spawn(move || {
                    let mut req = [0u8; 512];
                    let n = s.read(&mut req).unwrap_or(0);
                    let path = String::from_utf8_lossy(&req[..n])
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or("")
                        .to_string();
                    std::thread::sleep(Duration::from_millis(300));
                    match PAGES.iter().find(|p| p.path == path && p.status == 200) {
                        Some(p) => {
                            let _ = write!(s, "HTTP/1.0 200 OK\r\n\r\n{}", "w".repeat(p.bytes));
                        }
                        None => {
                            let _ = write!(s, "HTTP/1.0 404 Not Found\r\n\r\n");
                        }
                    }
                });
            }
        });
        let r = run(vec![addr], 10.0, Duration::from_secs(1)).unwrap();
        let z = &r.zones[0];
        assert_eq!(z.scheduled, 10);
        assert_eq!(z.latencies_ms.len() as u64 + z.errors, 10, "{r:?}");
        assert_eq!(z.errors, 0, "{r:?}");
        assert!(z.latencies_ms.iter().all(|&ms| ms >= 300.0), "{r:?}");
        assert!(
            r.elapsed_s >= 1.2,
            "the last request was due at 0.9 s: {r:?}"
        );
        assert!(r.generator_cpu_ns > 0);
    }
}
