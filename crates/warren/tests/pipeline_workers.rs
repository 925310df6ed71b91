//! `zone::pipeline::run` itself: a worker serves many zones one after another, results
//! come back in the zones' order, and a zone whose worker panics or dies costs only
//! that zone. Runs as its own `main` (harness = false): the pipeline forks its
//! workers, which needs a single-threaded process (libtest runs every test on a thread
//! of its own), and the check that no child is left needs a process without others.

use std::collections::BTreeSet;

use warren::layout::{HostPaths, Layout};
use warren::zone::{pipeline, Context};
use warren::Error;

const PLANNED: &str = "a test's planned panic in the worker of z07";

fn main() {
    // The worker's planned panic says nothing; any other is printed as usual.
    let usual = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.to_string().contains(PLANNED) {
            usual(info);
        }
    }));
    a_worker_serves_many_zones_and_a_worker_lost_costs_only_its_zone();
    println!("test a_worker_serves_many_zones_and_a_worker_lost_costs_only_its_zone ... ok");
}

fn a_worker_serves_many_zones_and_a_worker_lost_costs_only_its_zone() {
    let d = tempfile::tempdir().unwrap();
    let ctx = Context::new(Layout::new(d.path().join("root")), HostPaths::default());
    let zones: Vec<String> = (0..40).map(|i| format!("z{i:02}")).collect();
    let mut got = Vec::new();
    let failed = pipeline::run(
        &ctx,
        &zones,
        3,
        |z| match z {
            "z07" => panic!("{PLANNED}"),
            "z11" => Err(Error::NoSuchZone(z.into())),
            "z20" => warren_sys::exit_now(3),
            _ => Ok((z.to_string(), std::process::id())),
        },
        |z, r| got.push((z.to_string(), r)),
    );
    assert_eq!(failed, 3);
    let order: Vec<&str> = got.iter().map(|(z, _)| z.as_str()).collect();
    assert_eq!(order, zones.iter().map(String::as_str).collect::<Vec<_>>());
    let mut pids = BTreeSet::new();
    for (z, r) in &got {
        match (z.as_str(), r) {
            ("z07", Err(e)) => assert!(e.to_string().contains("warren panicked"), "{e}"),
            ("z11", Err(Error::NoSuchZone(n))) => assert_eq!(n, "z11"),
            ("z20", Err(e)) => assert!(
                e.to_string()
                    .contains("ended (exit status 3) without a result"),
                "{e}"
            ),
            (_, Ok((name, pid))) => {
                assert_eq!(name, z);
                assert_ne!(*pid, std::process::id(), "{z} ran in the parent");
                pids.insert(*pid);
            }
            (_, other) => panic!("{z}: {other:?}"),
        }
    }
    // 37 zones served by the 3 slots' workers and the 2 that replaced the lost ones
    // (the panicked worker replies, then ends; z20's ends without a reply).
    assert!(
        pids.len() <= 5,
        "{} workers for 37 zones: {pids:?}",
        pids.len()
    );
    // Every worker was reaped: this process has no child left.
    match warren_sys::proc::waitpid_nohang(-1) {
        Err(e) => assert_eq!(e.raw_os_error(), Some(warren_sys::libc::ECHILD), "{e}"),
        Ok(other) => panic!("a child is left: {other:?}"),
    }
}
