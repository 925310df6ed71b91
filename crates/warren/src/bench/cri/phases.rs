//! Where RunPodSandbox's time goes, from containerd's debug log (`warren bench cri
//! --breakdown`).
//!
//! At log level debug containerd 1.6 writes a line per published and forwarded event
//! and copies its shims' log lines (warren's shim, started with `-debug`, adds its own:
//! server up, listening, Create's request and its helper, Start). A pod's
//! RunPodSandbox lies between the CRI plugin's "RunPodSandbox for
//! &PodSandboxMetadata{Name:<pod>," and its "... returns sandbox id"; the bench
//! starts pods one at a time, so every line between belongs to that pod. The marks in
//! between, in the order containerd 1.6 reaches them ([`MARKS`]), cut it into phases:
//! a phase is the time from the previous mark found to its own.
//!
//! Every timestamp is a log line's `time=`: containerd's own clock for its lines, the
//! shim's (the same host clock) for the shim's.

use serde::Serialize;

use crate::measure::{summarize, Summary};

/// A point in a pod's RunPodSandbox, in the order containerd reaches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// The CRI request came in.
    Begin,
    /// The sandbox's snapshot of the pause image exists (`/snapshot/prepare`
    /// published): image lookup, ids, network namespace and CNI (pod network), the
    /// snapshotter's prepare (`native` copies the image's tree).
    Prepared,
    /// The sandbox container's record is committed (`/containers/create`).
    ContainerCreated,
    /// The shim's server runs: containerd made the sandbox's files and the bundle,
    /// ran the shim binary's `start`, which started the server (warren's shim: "shim
    /// server up"; the runc shim: its first log line).
    ShimUp,
    /// warren's shim: the server listens, `start` saw it and answered, containerd
    /// connected and sent Create ("create <id>: request").
    CreateRequest,
    /// The task exists (`/tasks/create` forwarded): the pause container's create
    /// (warren: the helper's clone; runc: `runc create`).
    TaskCreated,
    /// The task runs (`/tasks/start` forwarded).
    TaskStarted,
    /// The CRI answer: the sandbox's records after its start.
    End,
}

/// The marks in order, with the name of the phase that ends at each.
pub const MARKS: &[(Mark, &str)] = &[
    (Mark::Begin, ""),
    (Mark::Prepared, "until the snapshot is prepared"),
    (Mark::ContainerCreated, "container record"),
    (
        Mark::ShimUp,
        "sandbox files + shim start until its server runs",
    ),
    (
        Mark::CreateRequest,
        "server listens, start answers, Create arrives",
    ),
    (
        Mark::TaskCreated,
        "task create (the pause container's create)",
    ),
    (Mark::TaskStarted, "task start"),
    (Mark::End, "after the start: sandbox records, answer"),
];

/// One phase over the pods: its name and its duration's summary (ms); `pods` is how
/// many pods showed both of its marks.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub name: String,
    pub pods: usize,
    pub ms: Summary,
}

/// A step's breakdown.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Breakdown {
    /// Pods whose RunPodSandbox was found whole in the log.
    pub pods: usize,
    /// Begin to End, per pod (containerd's own view of RunPodSandbox).
    pub total_ms: Option<Summary>,
    pub phases: Vec<Phase>,
    /// warren's shim: the helper process inside the pause container's Create.
    pub helper_ms: Option<Summary>,
}

/// Seconds since the epoch of an RFC 3339 time such as
/// `2026-12-04T11:40:00.123456789Z` or `...+01:00`.
pub fn parse_time(t: &str) -> Option<f64> {
    let (date, rest) = t.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (clock, offset) = match rest.find(['Z', '+', '-']) {
        Some(i) => rest.split_at(i),
        None => (rest, "Z"),
    };
    let mut c = clock.split(':');
    let (h, min) = (
        c.next()?.parse::<i64>().ok()?,
        c.next()?.parse::<i64>().ok()?,
    );
    let sec: f64 = c.next()?.parse().ok()?;
    let off = match offset {
        "Z" | "" => 0,
        o => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let (oh, om) = o[1..].split_once(':')?;
            sign * (oh.parse::<i64>().ok()? * 3600 + om.parse::<i64>().ok()? * 60)
        }
    };
    // Days from 1970-01-01 of a proleptic Gregorian date.
    let (y, m) = if m <= 2 { (y - 1, m + 12) } else { (y, m) };
    let days = 365 * y + y / 4 - y / 100 + y / 400 + (153 * (m - 3) + 2) / 5 + day - 719469;
    Some((days * 86400 + h * 3600 + min * 60 - off) as f64 + sec)
}

/// A log line's `time="..."`, in seconds.
fn time_of(line: &str) -> Option<f64> {
    let rest = line.split("time=").nth(1)?;
    let rest = rest.strip_prefix('"').unwrap_or(rest);
    parse_time(rest.split(['"', ' ']).next()?)
}

/// The mark a line is (other than Begin and End), if any.
fn mark_of(line: &str) -> Option<Mark> {
    let topic =
        |t: &str| line.contains(&format!("topic={t} ")) || line.ends_with(&format!("topic={t}"));
    if topic("/snapshot/prepare") {
        Some(Mark::Prepared)
    } else if topic("/containers/create") {
        Some(Mark::ContainerCreated)
    } else if topic("/tasks/create") {
        Some(Mark::TaskCreated)
    } else if topic("/tasks/start") {
        Some(Mark::TaskStarted)
    } else if line.contains("shim server up") || line.contains("starting signal loop") {
        Some(Mark::ShimUp)
    } else if line.contains("msg=\"create ") && line.contains(": request\"") {
        Some(Mark::CreateRequest)
    } else {
        None
    }
}

/// "helper 12.34 ms" in warren's shim's "create <id>: done in" line.
fn helper_ms(line: &str) -> Option<f64> {
    if !line.contains(": done in") {
        return None;
    }
    let rest = line.split("helper ").nth(1)?;
    rest.split(' ').next()?.parse().ok()
}

/// One pod's marks (first of each) and helper time, from `lines` after its Begin.
struct Pod {
    at: Vec<(Mark, f64)>,
    helper_ms: Option<f64>,
}

/// The breakdown of the pods named `names` from containerd's log `text`.
pub fn breakdown(text: &str, names: &[String]) -> Breakdown {
    let lines: Vec<&str> = text.lines().collect();
    let mut pods = Vec::new();
    for name in names {
        let tag = format!("RunPodSandbox for &PodSandboxMetadata{{Name:{name},");
        let Some(b) = lines
            .iter()
            .position(|l| l.contains(&tag) && !l.contains("returns sandbox id"))
        else {
            continue;
        };
        let Some(e) = lines[b..]
            .iter()
            .position(|l| l.contains(&tag) && l.contains("returns sandbox id"))
            .map(|i| b + i)
        else {
            continue;
        };
        let (Some(t0), Some(t1)) = (time_of(lines[b]), time_of(lines[e])) else {
            continue;
        };
        let mut pod = Pod {
            at: vec![(Mark::Begin, t0)],
            helper_ms: None,
        };
        for l in &lines[b + 1..e] {
            if let (Some(m), Some(t)) = (mark_of(l), time_of(l)) {
                if !pod.at.iter().any(|(x, _)| *x == m) {
                    pod.at.push((m, t));
                }
            }
            if let Some(h) = helper_ms(l) {
                pod.helper_ms.get_or_insert(h);
            }
        }
        pod.at.push((Mark::End, t1));
        pods.push(pod);
    }
    let mut phases = Vec::new();
    for (i, (mark, name)) in MARKS.iter().enumerate().skip(1) {
        let mut v = Vec::new();
        for p in &pods {
            let Some(end) = p.at.iter().find(|(m, _)| m == mark).map(|x| x.1) else {
                continue;
            };
            // The latest earlier mark this pod has.
            let start = MARKS[..i]
                .iter()
                .rev()
                .find_map(|(m, _)| p.at.iter().find(|(x, _)| x == m).map(|x| x.1));
            if let Some(start) = start {
                v.push((end - start) * 1e3);
            }
        }
        if !v.is_empty() {
            phases.push(Phase {
                name: name.to_string(),
                pods: v.len(),
                ms: summarize(&v),
            });
        }
    }
    let totals: Vec<f64> = pods
        .iter()
        .filter_map(|p| Some((p.at.last()?.1 - p.at.first()?.1) * 1e3))
        .collect();
    let helpers: Vec<f64> = pods.iter().filter_map(|p| p.helper_ms).collect();
    Breakdown {
        pods: pods.len(),
        total_ms: (!totals.is_empty()).then(|| summarize(&totals)),
        phases,
        helper_ms: (!helpers.is_empty()).then(|| summarize(&helpers)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(parse_time("1970-01-02T00:00:01.5Z"), Some(86401.5));
        // 2026-12-04 is day 20791.
        assert_eq!(
            parse_time("2026-12-04T11:40:00.25Z"),
            Some(20791.0 * 86400.0 + 11.0 * 3600.0 + 40.0 * 60.0 + 0.25)
        );
        assert_eq!(
            parse_time("2026-12-04T12:40:00.25+01:00"),
            parse_time("2026-12-04T11:40:00.25Z")
        );
        assert_eq!(parse_time("garbage"), None);
    }

    fn line(ms: u32, rest: &str) -> String {
        format!("time=\"2026-12-04T11:40:00.{ms:03}000000Z\" {rest}")
    }

    #[test]
    fn phases_of_two_pods() {
        let mut log = Vec::new();
        for (pod, base) in [("bench-0", 0u32), ("bench-1", 500)] {
            let meta = format!("RunPodSandbox for &PodSandboxMetadata{{Name:{pod},Uid:u,Namespace:bench,Attempt:0,}}");
            log.push(line(base, &format!("level=info msg=\"{meta}\"")));
            log.push(line(base + 10, "level=debug msg=\"event published\" ns=k8s.io topic=/snapshot/prepare type=containerd.events.SnapshotPrepare"));
            log.push(line(base + 12, "level=debug msg=\"event published\" ns=k8s.io topic=/containers/create type=containerd.events.ContainerCreate"));
            log.push(line(base + 20, "level=debug msg=\"shim server up, pid 7\""));
            log.push(line(base + 21, "level=debug msg=\"shim server listening\""));
            log.push(line(base + 23, "level=debug msg=\"create abc: request\""));
            log.push(line(base + 30, "level=debug msg=\"create abc: done in 6.50 ms (rootfs mounts 0.10 ms, helper 6.00 ms)\""));
            log.push(line(base + 31, "level=debug msg=\"event forwarded\" ns=k8s.io topic=/tasks/create type=containerd.events.TaskCreate"));
            log.push(line(base + 35, "level=debug msg=\"event forwarded\" ns=k8s.io topic=/tasks/start type=containerd.events.TaskStart"));
            log.push(line(
                base + 40,
                &format!("level=info msg=\"{meta} returns sandbox id \\\"abc\\\"\""),
            ));
        }
        // A pod the log does not have is left out.
        let names = ["bench-0", "bench-1", "bench-9"].map(String::from);
        let b = breakdown(&log.join("\n"), &names);
        assert_eq!(b.pods, 2);
        let total = b.total_ms.unwrap();
        assert!((total.median - 40.0).abs() < 1e-3, "{total:?}");
        let got: Vec<(String, f64)> = b
            .phases
            .iter()
            .map(|p| (p.name.clone(), (p.ms.median * 1000.0).round() / 1000.0))
            .collect();
        let want: Vec<(String, f64)> = [10.0, 2.0, 8.0, 3.0, 8.0, 4.0, 5.0]
            .iter()
            .zip(&MARKS[1..])
            .map(|(ms, (_, n))| (n.to_string(), *ms))
            .collect();
        assert_eq!(got, want);
        assert_eq!(b.helper_ms.unwrap().median, 6.0);
    }

    #[test]
    fn a_missing_mark_joins_its_phase_to_the_next() {
        // The runc shim logs no "create: request": its time falls into task create.
        let meta = "RunPodSandbox for &PodSandboxMetadata{Name:p,Uid:u,}";
        let log = [
            line(0, &format!("level=info msg=\"{meta}\"")),
            line(5, "msg=\"starting signal loop\" namespace=k8s.io"),
            line(25, "msg=\"event forwarded\" ns=k8s.io topic=/tasks/create"),
            line(
                30,
                &format!("level=info msg=\"{meta} returns sandbox id \\\"x\\\"\""),
            ),
        ]
        .join("\n");
        let b = breakdown(&log, &["p".to_string()]);
        let names: Vec<&str> = b.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                MARKS[3].1, // shim up, from Begin
                MARKS[5].1, // task create, from shim up
                MARKS[7].1, // the end, from task create
            ]
        );
        // Seconds since the epoch in an f64 keep about a microsecond.
        assert!((b.phases[1].ms.median - 20.0).abs() < 1e-2);
        assert!(b.helper_ms.is_none());
    }
}
