//! warren-init: the tiny PID 1 of a zone.
//!
//! It blocks every signal and takes them synchronously (`sigtimedwait`), so it costs no
//! CPU while idle and has no handler races. It starts the zone's services, reaps every
//! orphan (SIGCHLD), and on SIGTERM / SIGINT / SIGPWR sends SIGTERM to every process in
//! the zone, waits up to its stop grace for them, SIGKILLs the rest and exits 0.
//!
//! Services arrive in the environment as `WARREN_SERVICE_<n>`, each an argv joined by
//! the unit separator (0x1f); they are removed before the services start.

use std::time::{Duration, Instant};

use crate::config::Command;

/// The name the binary answers to as a zone's init.
pub const ARGV0: &str = "warren-init";

const SEP: char = '\u{1f}';
const PREFIX: &str = "WARREN_SERVICE_";
/// How long init waits for processes after SIGTERM before SIGKILL.
const GRACE_ENV: &str = "WARREN_STOP_GRACE";
/// `1`: `memory.merge` — PR_SET_MEMORY_MERGE before the services start (they inherit it).
pub const MERGE_ENV: &str = "WARREN_MEMORY_MERGE";

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

/// Find `prog` in `path_var` (a PATH value) unless it names a path itself.
fn resolve(prog: &str, path_var: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    if prog.contains('/') {
        return Some(prog.to_string());
    }
    path_var
        .split(':')
        .map(|d| format!("{d}/{prog}"))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn log(msg: &str) {
    eprintln!("warren-init: {msg}");
}

/// Reap every ended child; a service's end goes to the console (`warren logs`), the
/// only record of it: warren-init's own parent is not warren.
fn reap_all(services: &mut Vec<(i32, String)>) {
    while let Ok(Some((pid, status))) = warren_sys::proc::waitpid_nohang(-1) {
        if let Some(i) = services.iter().position(|(p, _)| *p == pid) {
            let (_, cmd) = services.swap_remove(i);
            log(&match status {
                warren_sys::proc::ExitStatus::Exited(c) => {
                    format!("service {cmd:?} (pid {pid}) exited with status {c}")
                }
                warren_sys::proc::ExitStatus::Signaled(s) => {
                    format!("service {cmd:?} (pid {pid}) was killed by signal {s}")
                }
            });
        }
    }
}

/// Run as PID 1. Never returns.
pub fn main() -> ! {
    use warren_sys::libc;
    // Outside a zone, shutting down would kill(-1) every process of the caller's user.
    if warren_sys::getpid() != 1 {
        eprintln!("warren-init: refusing to run: this is a zone's PID 1 and only runs as PID 1 of a new pid namespace (warren boot starts it)");
        std::process::exit(2);
    }
    if let Err(e) = warren_sys::signal::block_all() {
        log(&format!("cannot block signals: {e}"));
    }
    if std::env::var_os(MERGE_ENV).is_some_and(|v| v == "1") {
        if let Err(e) = warren_sys::proc::set_memory_merge() {
            log(&format!(
                "memory.merge: PR_SET_MEMORY_MERGE failed ({e}); the zone's memory is not merged"
            ));
        }
    }
    let services = decode_services(std::env::vars());
    let grace = std::env::var(GRACE_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(5));
    let keep: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| !k.starts_with(PREFIX) && k != GRACE_ENV && k != MERGE_ENV)
        .collect();
    let env: Vec<std::ffi::CString> = keep
        .iter()
        .filter_map(|(k, v)| std::ffi::CString::new(format!("{k}={v}")).ok())
        .collect();
    let path_var = keep
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| super::ZONE_PATH.to_string());
    let mut running: Vec<(i32, String)> = Vec::new();
    for argv in services {
        let Some(prog) = argv.first() else {
            continue;
        };
        let Some(path) = resolve(prog, &path_var) else {
            log(&format!("cannot start {prog}: not found in PATH"));
            continue;
        };
        let c_argv: Option<Vec<std::ffi::CString>> = argv
            .iter()
            .map(|a| std::ffi::CString::new(a.as_str()).ok())
            .collect();
        let (Ok(c_path), Some(c_argv)) = (std::ffi::CString::new(path), c_argv) else {
            log(&format!("cannot start {prog}: NUL byte in the command"));
            continue;
        };
        match warren_sys::signal::spawn_with_default_signals(&c_path, &c_argv, &env) {
            Ok(pid) => {
                log(&format!("started {prog} (pid {pid})"));
                running.push((pid, argv.join(" ")));
            }
            Err(e) => log(&format!("cannot start {prog}: {e}")),
        }
    }
    loop {
        match warren_sys::signal::wait_any(Duration::from_secs(3600)) {
            Ok(Some(libc::SIGCHLD)) | Ok(None) => reap_all(&mut running),
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
