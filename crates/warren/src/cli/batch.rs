//! What `boot`, `clone` and `halt` print for their zones as the pipeline
//! (`zone::pipeline`) hands back each zone's result, in the zones' order: a line per
//! zone for people (errors on stderr as they come), and with `--json` the result
//! objects at the end, failed zones included with their `error` and `exit`.

use super::dayto::VerbResult;
use super::output;
use crate::error::{Error, Result};
use crate::zone::pipeline::Done;

/// The results of one verb over `total` zones.
pub struct Batch {
    results: Vec<VerbResult>,
    total: usize,
    /// The one zone's error when there is one zone: returned as is (its exit code).
    only_error: Option<Error>,
}

impl Batch {
    pub fn new(total: usize) -> Batch {
        Batch {
            results: Vec::new(),
            total,
            only_error: None,
        }
    }

    /// One zone's result; `line` says what was done ("booted in 4.1 ms"). Returns the
    /// zone's result object to complete, unless it failed.
    pub fn add(
        &mut self,
        json: bool,
        zone: &str,
        verb: &'static str,
        r: Result<Done>,
        line: &str,
    ) -> Option<&mut VerbResult> {
        let mut v = VerbResult::new(zone, verb, &crate::zone::Outcome::Done);
        match r {
            Ok(d) => {
                v.changed = d.already.is_none();
                if !json {
                    match &d.already {
                        None => println!("zone '{zone}' {line}"),
                        Some(why) => println!("zone '{zone}' {why}; nothing to do"),
                    }
                }
                // On stderr as they come, and in the result object.
                for w in &d.warnings {
                    eprintln!("warren: zone '{zone}': {w}");
                }
                v.warnings = d.warnings;
                v.note = d.already;
                v.init_pid = d.init_pid;
                v.graceful = d.graceful;
                if verb == "boot" && v.changed {
                    v.boot_ms = Some(d.ms);
                }
                self.results.push(v);
                self.results.last_mut()
            }
            Err(e) if self.total == 1 => {
                self.only_error = Some(e);
                None
            }
            Err(e) => {
                output::print_error(&e);
                v.changed = false;
                v.exit = Some(e.exit_code() as u8);
                v.error = Some(e.to_string());
                self.results.push(v);
                None
            }
        }
    }

    /// Print the objects (`--json`: one object for one zone, an array for several or
    /// none) and fail if any zone failed: with its own error for one zone, else
    /// [`Error::Partial`].
    pub fn finish(self, json: bool, failed: usize) -> Result<()> {
        if let Some(e) = self.only_error {
            return Err(e);
        }
        if json {
            match self.results.as_slice() {
                [one] if self.total == 1 => output::json(one),
                all => output::json(all),
            }
        }
        if failed > 0 {
            return Err(Error::Partial {
                failed,
                total: self.total,
            });
        }
        Ok(())
    }
}
