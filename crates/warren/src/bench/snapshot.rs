//! `warren bench snapshot`: the figures of SPEC.md's "Snapshots and export" section,
//! measured in process (no warren process start in the times) on two scratch state
//! roots of their own (`<tmp>/warren-bench-snap-<pid>/{a,b}`, each with its own run
//! directory), removed afterwards whatever happens:
//!
//! - a snapshot of an untouched `host` zone: time (median of `repeat`) and disk;
//! - a restore of that snapshot into the halted zone: time (median);
//! - export of a zone with `data_mib` MiB of private data (incompressible bytes, the
//!   worst case for zstd) and import of the archive into the second root ("another
//!   host"): MiB of private data per second of export + import.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::error::{IoContext, Result};
use crate::layout::{HostPaths, Layout};
use crate::measure::Progress;
use crate::storage::template::Source;
use crate::zone::{self, Context};

/// What `bench snapshot` measured.
#[derive(Debug, Serialize)]
pub struct SnapshotBench {
    pub backend: String,
    pub repeat: usize,
    pub snapshot_ms_median: f64,
    pub snapshot_ms_max: f64,
    /// Disk allocated to one snapshot of the untouched zone.
    pub snapshot_bytes: u64,
    pub restore_ms_median: f64,
    pub restore_ms_max: f64,
    pub data_mib: u64,
    pub export_ms: f64,
    pub import_ms: f64,
    pub archive_bytes: u64,
    /// `data_mib` / (export + import seconds).
    pub export_import_mib_s: f64,
    pub load_avg: String,
}

/// The scratch roots, removed on drop (zones first, then templates, then the files).
struct Roots {
    top: PathBuf,
    ctxs: Vec<Context>,
}

impl Drop for Roots {
    fn drop(&mut self) {
        for ctx in &self.ctxs {
            for z in zone::names_in(&ctx.layout).unwrap_or_default() {
                let _ = zone::delete(ctx, &z, true);
            }
            let _ = crate::storage::template::delete(&ctx.layout, "host");
        }
        let _ = crate::fsutil::remove_tree(&self.top);
    }
}

fn context(dir: &Path) -> Context {
    let host = HostPaths {
        run: dir.join("run"),
        ..HostPaths::default()
    };
    Context::new(Layout::new(dir), host)
}

fn median_max(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[v.len() - 1])
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// A stop signal taken by the progress (`bench::interrupt`) ends the bench with an
/// error; the scratch roots go with their guard.
fn go_on(progress: &mut dyn Progress) -> Result<()> {
    match progress.interrupted() {
        Some(sig) => Err(super::interrupt::stopped(sig)),
        None => Ok(()),
    }
}

/// Run the measurements, showing them on `progress` and stopping between them when it
/// reports a stop signal.
pub fn run(repeat: usize, data_mib: u64, progress: &mut dyn Progress) -> Result<SnapshotBench> {
    if repeat == 0 || data_mib == 0 {
        return Err(crate::error::Error::Invalid(
            "bench snapshot: --repeat and --data-mib must be at least 1, e.g. --repeat 20 --data-mib 100".into(),
        ));
    }
    let top = std::env::temp_dir().join(format!("warren-bench-snap-{}", std::process::id()));
    let mut roots = Roots {
        top: top.clone(),
        ctxs: Vec::new(),
    };
    for sub in ["a", "b"] {
        let d = top.join(sub);
        std::fs::create_dir_all(&d).ctx(|| format!("creating {}", d.display()))?;
        let ctx = context(&d);
        ctx.layout
            .secure()
            .ctx(|| format!("securing {}", d.display()))?;
        super::ensure_template(&ctx, "host", &Source::Host)?;
        roots.ctxs.push(ctx);
    }
    let a = &roots.ctxs[0];
    zone::create(a, "snap", None, None, &[])?;
    zone::install(a, "snap")?;
    let backend = zone::load(a, "snap")?
        .lifecycle
        .backend
        .map(|b| b.to_string())
        .unwrap_or_default();
    let mut snaps = Vec::new();
    let mut size = 0;
    progress.phase("snapshot", repeat as u64);
    for i in 0..repeat {
        let t = Instant::now();
        let s = zone::snapshot::create(a, "snap", Some(&format!("s{i}")))?;
        snaps.push(ms(t));
        size = s.size_bytes;
        progress.step();
        go_on(progress)?;
    }
    let mut restores = Vec::new();
    progress.phase("restore", repeat as u64);
    for _ in 0..repeat {
        let t = Instant::now();
        zone::snapshot::restore(a, "snap", "s0")?;
        restores.push(ms(t));
        progress.step();
        go_on(progress)?;
    }
    progress.phase("export and import", data_mib + 2);
    // The private data: incompressible bytes (xorshift), written into the layer.
    zone::create(a, "data", None, None, &[])?;
    zone::install(a, "data")?;
    let z = zone::load(a, "data")?;
    let layer =
        crate::storage::backend(z.lifecycle.backend.expect("installed")).private_dir(&z.dir);
    let mut f = std::fs::File::create(layer.join("blob"))
        .ctx(|| format!("creating {}", layer.display()))?;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..data_mib {
        for c in buf.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&buf)
            .ctx(|| "writing the bench's data".to_string())?;
        progress.step();
        go_on(progress)?;
    }
    f.sync_all()
        .ctx(|| "syncing the bench's data".to_string())?;
    drop(f);
    let file = top.join("data.wzone");
    let t = Instant::now();
    let ex = zone::archive::export(a, "data", &file, false, None)?;
    let export_ms = ms(t);
    progress.step();
    go_on(progress)?;
    let t = Instant::now();
    zone::archive::import(&roots.ctxs[1], &file, None, false)?;
    let import_ms = ms(t);
    progress.step();
    progress.done();
    let (snapshot_ms_median, snapshot_ms_max) = median_max(snaps);
    let (restore_ms_median, restore_ms_max) = median_max(restores);
    Ok(SnapshotBench {
        backend,
        repeat,
        snapshot_ms_median,
        snapshot_ms_max,
        snapshot_bytes: size,
        restore_ms_median,
        restore_ms_max,
        data_mib,
        export_ms,
        import_ms,
        archive_bytes: ex.bytes,
        export_import_mib_s: data_mib as f64 / ((export_ms + import_ms) / 1e3),
        load_avg: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .into(),
    })
}
