//! The long verbs of the one-shot helper ([`crate::helper`]): `bench density`,
//! `bench metrics`, `bench snapshot` and `demo`, each with its progress written as
//! lines on stdout (`{"progress":{"phase","pos","len"}}`) before the reply, and each
//! stopped by SIGTERM (a cancel) after the step in hand, its own guards removing what
//! it made ([`warren::bench::interrupt`]); and the cleanup after one that was killed.

use std::time::Duration;

use serde_json::{json, Value};
use warren::error::IoContext;
use warren::storage::template;
use warren::zone::{self, Context};

use crate::helper::{to_json, Verb};

/// Run one long verb with the library, as the CLI would.
pub fn run(ctx: &Context, verb: Verb) -> warren::Result<Value> {
    Ok(match verb {
        Verb::Bench {
            steps,
            busybox,
            idle_ms,
            out,
        } => {
            let opts = warren::bench::Options {
                steps,
                template: if busybox {
                    warren::bench::TemplateKind::Busybox
                } else {
                    warren::bench::TemplateKind::Host
                },
                bridge: false,
                idle: Duration::from_millis(idle_ms),
                compare: Vec::new(),
                via_oci: false,
            };
            // SIGTERM (a cancel) stops it after its current step, and its own guards
            // remove what it made.
            let mut lines = LineProgress::default();
            let mut progress = warren::bench::interrupt::Interruptible::new(&mut lines)?;
            let results = warren::bench::run(ctx, &opts, &mut progress);
            if let Some(sig) = progress.signal() {
                return Err(warren::bench::interrupt::stopped(sig));
            }
            drop(progress);
            let results = results?;
            if let Some(dir) = out {
                warren::bench::write(&dir, &results)?;
            }
            to_json(&results)
        }
        Verb::BenchMetrics {
            steps,
            scrapes,
            out,
        } => {
            let opts = warren::bench::metrics::Options {
                steps,
                scrapes,
                daemon: None,
            };
            let mut lines = LineProgress::default();
            let mut progress = warren::bench::interrupt::Interruptible::new(&mut lines)?;
            let results = warren::bench::metrics::run(ctx, &opts, &mut progress);
            if let Some(sig) = progress.signal() {
                return Err(warren::bench::interrupt::stopped(sig));
            }
            drop(progress);
            let results = results?;
            if let Some(dir) = out {
                warren::bench::metrics::write(&dir, &results)?;
            }
            to_json(&results)
        }
        Verb::BenchSnapshot { repeat, data_mib } => {
            let mut lines = LineProgress::default();
            let mut progress = warren::bench::interrupt::Interruptible::new(&mut lines)?;
            let r = warren::bench::snapshot::run(repeat, data_mib, &mut progress);
            if let Some(sig) = progress.signal() {
                return Err(warren::bench::interrupt::stopped(sig));
            }
            drop(progress);
            to_json(&r?)
        }
        Verb::Demo { zones, bridge } => {
            let jobs =
                zone::pipeline::default_jobs(warren::stats::online_cpus(&ctx.host.sys).len());
            let mut lines = LineProgress::default();
            let mut progress = warren::bench::interrupt::Interruptible::new(&mut lines)?;
            let report = warren::demo::run(ctx, zones, jobs, bridge, &mut progress);
            if let Some(sig) = progress.signal() {
                return Err(warren::demo::stopped(sig));
            }
            drop(progress);
            to_json(&report?)
        }
        Verb::BenchCleanup { pid } => bench_cleanup(ctx, pid)?,
        other => {
            return Err(warren::Error::Invalid(format!(
                "the helper's long verbs are bench, bench_metrics, bench_snapshot, demo and bench_cleanup, not {:?}",
                other.subject()
            )))
        }
    })
}

/// The bench's progress as lines on stdout, `{"progress":{"phase","pos","len"}}`,
/// which the daemon shows in the operation.
#[derive(Default)]
struct LineProgress {
    phase: String,
    pos: u64,
    len: u64,
}

impl LineProgress {
    fn emit(&self) {
        use std::io::Write;
        let line = json!({ "progress": { "phase": self.phase, "pos": self.pos, "len": self.len } });
        let mut out = std::io::stdout().lock();
        // The daemon reads these as they come; a lost line only delays what it shows.
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}

impl warren::measure::Progress for LineProgress {
    fn phase(&mut self, name: &str, len: u64) {
        (self.phase, self.pos, self.len) = (name.to_string(), 0, len);
        self.emit();
    }
    fn step(&mut self) {
        self.pos += 1;
        self.emit();
    }
    fn done(&mut self) {}
}

/// After a bench helper (pid `pid`) was killed: delete the zones and the templates the
/// bench owns (`warren-bench-*`) and its scratch directory, as its own guards would
/// have, had it not been killed.
fn bench_cleanup(ctx: &Context, pid: u32) -> warren::Result<Value> {
    // The demo's zones too (`warren-demo-*`); its bridge goes with every unused one.
    let demo = warren::demo::cleanup(ctx)?;
    if demo > 0 {
        warren::demo::cleanup_net(ctx)?;
    }
    let zones = warren::bench::cleanup(ctx)? + demo;
    let mut templates = Vec::new();
    for m in template::list(&ctx.layout)? {
        if m.name.starts_with(warren::bench::PREFIX) {
            template::delete(&ctx.layout, &m.name)?;
            templates.push(m.name);
        }
    }
    // `bench snapshot`'s scratch roots (unbooted zones only: files to remove).
    let snap = std::env::temp_dir().join(format!("warren-bench-snap-{pid}"));
    if snap.exists() {
        warren::fsutil::remove_tree(&snap).ctx(|| {
            format!(
                "removing the snapshot bench's scratch roots {}",
                snap.display()
            )
        })?;
    }
    let scratch = ctx.layout.root().join(format!(".bench-{pid}"));
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch).ctx(|| {
            format!(
                "removing the bench's scratch directory {}",
                scratch.display()
            )
        })?;
    }
    Ok(json!({ "zones_removed": zones, "templates_removed": templates }))
}
