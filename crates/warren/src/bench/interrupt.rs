//! Stopping a bench with a signal: SIGINT, SIGTERM and SIGHUP are caught while the
//! bench runs (a handler notes the signal) and checked after each of its steps
//! ([`Progress::interrupted`]; `bench scale` also checks within its steps), so the bench
//! ends with an error and every guard (its zones, templates, scratch directory, budget,
//! swap, the compared systems' stores) removes what it made, as after any failure.
//! Without this, a signal's default action ended the process where it stood and left
//! the bench's zones running. One mechanism for every bench kind.

use warren_sys::libc;

use crate::error::{IoContext, Result};
use crate::measure::Progress;

/// The signals that stop a bench.
pub const STOP: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// [`STOP`] caught for the process while this lives: a handler only notes the signal
/// (process-wide, whichever thread it lands on), [`signal`] reads it, and the default
/// actions are back on drop. Handlers are reset by exec, so the commands and zones the
/// bench starts meanwhile are unaffected.
pub struct Caught(());

impl Caught {
    pub fn new() -> Result<Caught> {
        warren_sys::signal::catch(&STOP)
            .ctx(|| "catching SIGINT, SIGTERM and SIGHUP for the bench's cleanup".into())?;
        Ok(Caught(()))
    }
}

impl Drop for Caught {
    fn drop(&mut self) {
        warren_sys::signal::uncatch(&STOP);
    }
}

/// The stop signal that came since [`Caught::new`], if one did.
pub fn signal() -> Option<i32> {
    warren_sys::signal::caught()
}

/// `SIGINT`, `SIGTERM` or `SIGHUP`.
pub fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// A progress that also reports a stop signal; the signals are caught while it lives.
pub struct Interruptible<'a> {
    inner: &'a mut dyn Progress,
    _caught: Caught,
}

impl<'a> Interruptible<'a> {
    /// Catch [`STOP`] until this is dropped.
    pub fn new(inner: &'a mut dyn Progress) -> Result<Interruptible<'a>> {
        Ok(Interruptible {
            inner,
            _caught: Caught::new()?,
        })
    }

    /// The signal that stopped the bench, if one came.
    pub fn signal(&mut self) -> Option<i32> {
        signal()
    }
}

impl Progress for Interruptible<'_> {
    fn phase(&mut self, name: &str, len: u64) {
        self.inner.phase(name, len);
    }
    fn step(&mut self) {
        self.inner.step();
    }
    fn done(&mut self) {
        self.inner.done();
    }
    fn interrupted(&mut self) -> Option<i32> {
        signal()
    }
}

/// The error of a bench stopped by `sig` after its guards cleaned up.
pub fn stopped(sig: i32) -> crate::Error {
    crate::Error::Relayed {
        message: format!("bench: interrupted by signal {sig}; what it had made was removed"),
        exit: crate::ExitCode::Failure,
    }
}
