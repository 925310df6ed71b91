//! warren-init: the tiny PID 1 of a zone.
//!
//! It blocks every signal and takes them synchronously (`sigtimedwait`), so it costs no
//! CPU while idle and has no handler races. It starts the zone's services, reaps every
//! orphan (SIGCHLD), and on SIGTERM / SIGINT / SIGPWR sends SIGTERM to every process in
//! the zone, waits up to its stop grace for them, SIGKILLs the rest and exits 0.
//!
//! Services arrive in the environment as `WARREN_SERVICE_<n>`, each an argv joined by
//! the unit separator (0x1f); they are removed before the services start.

use std::process::{Command as Proc, Stdio};
use std::time::{Duration, Instant};

use crate::config::Command;

/// The name the binary answers to as a zone's init.
pub const ARGV0: &str = "warren-init";

const SEP: char = '\u{1f}';
const PREFIX: &str = "WARREN_SERVICE_";
/// How long init waits for processes after SIGTERM before SIGKILL.
const GRACE_ENV: &str = "WARREN_STOP_GRACE";

/// Environment entries (`KEY=VALUE`) carrying `services` to init.
pub fn encode_services(services: &[Command]) -> Vec<String> {
    services
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let argv: Vec<String> = s.argv();
            format!("{PREFIX}{i:04}={}", argv.join(&SEP.to_string()))
        })
        .collect()
}

/// Decode the services from environment pairs, in order.
pub fn decode_services(env: impl Iterator<Item = (String, String)>) -> Vec<Vec<String>> {
    let mut found: Vec<(String, Vec<String>)> = env
        .filter(|(k, _)| k.starts_with(PREFIX))
        .map(|(k, v)| (k, v.split(SEP).map(str::to_string).collect()))
        .collect();
    found.sort();
    found.into_iter().map(|(_, v)| v).collect()
}

fn log(msg: &str) {
    eprintln!("warren-init: {msg}");
}

fn reap_all() {
    while let Ok(Some(_)) = warren_sys::proc::waitpid_nohang(-1) {}
}

/// Run as PID 1. Never returns.
pub fn main() -> ! {
    use warren_sys::libc;
    if let Err(e) = warren_sys::signal::block_all() {
        log(&format!("cannot block signals: {e}"));
    }
    let services = decode_services(std::env::vars());
    let grace = std::env::var(GRACE_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(5));
    let keep: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| !k.starts_with(PREFIX) && k != GRACE_ENV)
        .collect();
    for argv in services {
        let Some((prog, args)) = argv.split_first() else {
            continue;
        };
        let mut cmd = Proc::new(prog);
        cmd.args(args)
            .env_clear()
            .envs(keep.iter().cloned())
            .current_dir("/")
            .stdin(Stdio::null());
        warren_sys::signal::unblock_all_in_child(&mut cmd);
        let spawned = cmd.spawn();
        match spawned {
            Ok(child) => log(&format!("started {prog} (pid {})", child.id())),
            Err(e) => log(&format!("cannot start {prog}: {e}")),
        }
    }
    loop {
        match warren_sys::signal::wait_any(Duration::from_secs(3600)) {
            Ok(Some(libc::SIGCHLD)) | Ok(None) => reap_all(),
            Ok(Some(libc::SIGTERM | libc::SIGINT | libc::SIGPWR)) => shutdown(grace),
            Ok(Some(_)) => {}
            Err(e) => {
                log(&format!("waiting for signals failed: {e}"));
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

fn shutdown(grace: Duration) -> ! {
    use warren_sys::libc;
    // From PID 1, kill(-1) reaches every other process in the zone's pid namespace.
    let _ = warren_sys::proc::kill(-1, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    loop {
        match warren_sys::proc::waitpid_nohang(-1) {
            Ok(Some(_)) => continue,
            Err(_) => break, // ECHILD: nothing left
            Ok(None) => {}
        }
        let now = Instant::now();
        if now >= deadline {
            let _ = warren_sys::proc::kill(-1, libc::SIGKILL);
            while warren_sys::proc::waitpid_blocking(-1).is_ok() {}
            break;
        }
        let _ = warren_sys::signal::wait_any((deadline - now).min(Duration::from_millis(100)));
    }
    std::process::exit(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_round_trip_through_the_environment() {
        let services = vec![
            Command::Shell("sleep 1 && echo 'a b'".into()),
            Command::Argv(vec!["/bin/x".into(), "--flag=1 2".into()]),
        ];
        let env = encode_services(&services).into_iter().map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        });
        let mut env: Vec<_> = env.collect();
        env.reverse();
        env.push(("PATH".into(), "/bin".into()));
        let decoded = decode_services(env.into_iter());
        assert_eq!(
            decoded,
            vec![
                vec![
                    "/bin/sh".to_string(),
                    "-c".into(),
                    "sleep 1 && echo 'a b'".into()
                ],
                vec!["/bin/x".to_string(), "--flag=1 2".into()],
            ]
        );
    }
}
