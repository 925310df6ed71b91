//! Stopping a bench with a signal: SIGINT, SIGTERM and SIGHUP are blocked while the
//! bench runs and taken after each of its steps ([`Progress::interrupted`]), so the
//! step loop ends with an error and every guard of the bench (its zones, templates,
//! scratch directory, the compared systems' stores) removes what it made, as after
//! any failure. Without this, a signal's default action ended the process where it
//! stood and left the bench's zones running.
//!
//! The mask is per thread and inherited by children: zones' inits reset theirs, and
//! the commands the bench runs (crun, LXC, podman) are started by `std::process`,
//! which resets the mask in the child.

use warren_sys::libc;
use warren_sys::signal::{self, SavedMask};

use crate::error::{IoContext, Result};
use crate::measure::Progress;

/// The signals that stop a bench.
pub const STOP: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// A progress that also reports a stop signal; the signals are blocked while it lives.
pub struct Interruptible<'a> {
    inner: &'a mut dyn Progress,
    mask: SavedMask,
    got: Option<i32>,
}

impl<'a> Interruptible<'a> {
    /// Block [`STOP`] (in this thread: the bench's) until this is dropped.
    pub fn new(inner: &'a mut dyn Progress) -> Result<Interruptible<'a>> {
        let mask = signal::block(&STOP).ctx(|| "blocking SIGINT, SIGTERM and SIGHUP".into())?;
        Ok(Interruptible {
            inner,
            mask,
            got: None,
        })
    }

    /// The signal that stopped the bench, if one came (also one still pending).
    pub fn signal(&mut self) -> Option<i32> {
        self.interrupted()
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
        if self.got.is_none() {
            self.got = signal::take(&STOP);
        }
        self.got
    }
}

impl Drop for Interruptible<'_> {
    fn drop(&mut self) {
        // A signal taken is no longer pending; a second one (a second Ctrl-C) is
        // delivered here with its default action.
        let _ = signal::restore(&self.mask);
    }
}

/// The error of a bench stopped by `sig` after its guards cleaned up.
pub fn stopped(sig: i32) -> crate::Error {
    crate::Error::Relayed {
        message: format!("bench: interrupted by signal {sig}; what it had made was removed"),
        exit: crate::ExitCode::Failure,
    }
}
