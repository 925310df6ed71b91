//! warren's own zones as a [`System`] of the measured loop: 'clone' is `zone::clone`
//! of an installed base zone, 'boot' `zone::boot`, 'halt' `zone::halt` (5 s grace),
//! 'delete' `zone::delete`; idle CPU is read from the zones' cgroups, disk from their
//! directories. `warren bench density` makes the base zone per step (and removes every
//! zone it owns after it); `warren demo` makes its own and calls [`run_pass`].
//!
//! Zones are booted from this single thread (spawning requires it; see warren_sys::spawn).

use std::time::Duration;

use super::system::{measure, Cpu, Failure, Measured, Pass, System, Verb, Verbs};
use crate::cgroups::CgroupSet;
use crate::error::Result;
use crate::fsutil::disk_usage;
use crate::measure::Progress;
use crate::zone::{self, Context};

/// The base zone a step clones from, when the system makes it.
pub struct Base {
    /// The template it is created from.
    pub template: String,
    /// Its `--set` lines (network).
    pub sets: Vec<String>,
}

/// Zones named `<prefix><i>` (zero-padded to `digits`), cloned from `base`.
pub struct Zones<'a> {
    ctx: &'a Context,
    base: String,
    /// `Some`: made at every step's start and, with every zone of the bench, removed
    /// at its end; `None`: the caller made it and removes what is left.
    make: Option<Base>,
    prefix: String,
    digits: usize,
    note: String,
    names: Vec<String>,
    cgroups: Vec<CgroupSet>,
    /// Zones in flight at once for clone, boot and halt (`zone::pipeline`); 1: one
    /// by one, each timed alone.
    jobs: usize,
}

impl<'a> Zones<'a> {
    pub fn new(
        ctx: &'a Context,
        base: &str,
        make: Option<Base>,
        prefix: &str,
        digits: usize,
    ) -> Zones<'a> {
        Zones {
            ctx,
            base: base.into(),
            make,
            prefix: prefix.into(),
            digits,
            note: String::new(),
            names: Vec::new(),
            cgroups: Vec::new(),
            jobs: 1,
        }
    }

    /// Clone, boot and halt `jobs` zones at once (`warren demo`).
    pub fn with_jobs(mut self, jobs: usize) -> Zones<'a> {
        self.jobs = jobs;
        self
    }

    /// What results.json says about how the zones ran.
    pub fn with_note(mut self, note: String) -> Zones<'a> {
        self.note = note;
        self
    }
}

impl System for Zones<'_> {
    fn name(&self) -> &str {
        "warren"
    }

    fn verbs(&self) -> Verbs {
        Verbs {
            clone: "clone",
            boot: "boot",
            halt: "halt",
            delete: "delete",
        }
    }

    fn prepare(&mut self, n: usize) -> std::result::Result<(), Failure> {
        if let Some(b) = &self.make {
            zone::create(self.ctx, &self.base, Some(&b.template), None, &b.sets)?;
            zone::install(self.ctx, &self.base)?;
        }
        let (p, d) = (&self.prefix, self.digits);
        self.names = (1..=n).map(|i| format!("{p}{i:0d$}")).collect();
        self.cgroups.clear();
        Ok(())
    }

    fn create(&mut self, i: usize) -> std::result::Result<(), Failure> {
        zone::clone(self.ctx, &self.base, &self.names[i])?;
        Ok(())
    }

    fn start(&mut self, i: usize) -> std::result::Result<(), Failure> {
        zone::boot(self.ctx, &self.names[i])?;
        Ok(())
    }

    fn started(&mut self, i: usize) -> std::result::Result<(), Failure> {
        let z = zone::load(self.ctx, &self.names[i])?;
        self.cgroups.extend(z.runtime.map(|r| r.cgroups));
        Ok(())
    }

    fn cpu(&self) -> Cpu<'_> {
        Cpu::Cgroups(&self.cgroups)
    }

    fn disk_bytes(&self) -> u64 {
        self.names
            .iter()
            .map(|name| disk_usage(&self.ctx.layout.zone_dir(name)).unwrap_or(0))
            .sum()
    }

    fn stop(&mut self, i: usize) -> std::result::Result<(), Failure> {
        zone::halt(self.ctx, &self.names[i], Some(Duration::from_secs(5)))?;
        Ok(())
    }

    fn delete(&mut self, i: usize) -> std::result::Result<(), Failure> {
        zone::delete(self.ctx, &self.names[i], true)?;
        Ok(())
    }

    fn cleanup(&mut self) -> std::result::Result<(), Failure> {
        self.cgroups.clear();
        if self.make.is_some() {
            super::cleanup(self.ctx)?;
        }
        Ok(())
    }

    fn batch(&mut self, verb: Verb, n: usize) -> Option<std::result::Result<Vec<f64>, Failure>> {
        use crate::zone::pipeline;
        if self.jobs <= 1 {
            return None;
        }
        let (ctx, names, jobs) = (self.ctx, &self.names[..n], self.jobs);
        let mut times = Vec::with_capacity(n);
        let mut first: Option<crate::Error> = None;
        let mut done = |_: &str, r: Result<pipeline::Done>| match r {
            Ok(d) => times.push(d.ms),
            Err(e) => {
                first.get_or_insert(e);
            }
        };
        match verb {
            Verb::Clone => pipeline::clone_many(ctx, &self.base, names, None, jobs, &mut done),
            Verb::Boot => pipeline::boot_many(ctx, names, jobs, Duration::ZERO, &mut done),
            Verb::Halt => {
                pipeline::halt_many(ctx, names, jobs, Some(Duration::from_secs(5)), &mut done)
            }
            Verb::Delete => return None,
        };
        Some(match first {
            Some(e) => Err(e.into()),
            None => Ok(times),
        })
    }

    fn note(&self) -> String {
        self.note.clone()
    }
}

impl Drop for Zones<'_> {
    fn drop(&mut self) {
        let _ = self.cleanup();
    }
}

/// What `warren demo` measures.
pub struct ZonePass<'a> {
    /// An installed zone to clone from.
    pub base: &'a str,
    /// Zones are `<prefix><i>`, i zero-padded to 4 digits, for i in 1..=n.
    pub prefix: &'a str,
    pub n: usize,
    /// How long the booted zones sit idle before CPU and memory are read.
    pub idle: Duration,
    /// Prefix of the progress phase names (e.g. "N=10 ").
    pub label: &'a str,
    /// Zones cloned, booted and halted at once (1: one by one).
    pub jobs: usize,
}

/// Clone, boot, settle, measure, halt and delete `pass.n` zones from `pass.base`
/// through the bench's measured loop. The caller removes leftovers if this fails
/// part-way.
pub fn run_pass(ctx: &Context, pass: &ZonePass, progress: &mut dyn Progress) -> Result<Measured> {
    let mut zones = Zones::new(ctx, pass.base, None, pass.prefix, 4).with_jobs(pass.jobs);
    zones.prepare(pass.n)?;
    let at = Pass {
        proc_root: &ctx.host.proc,
        idle: pass.idle,
    };
    Ok(measure(&mut zones, pass.n, &at, pass.label, progress)?)
}
