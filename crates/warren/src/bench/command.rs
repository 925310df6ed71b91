//! The one way the bench runs a compared system's command (crun, `warren oci`, the
//! lxc-* tools, podman): stdin from /dev/null, stdout and stderr to files in the
//! system's private directory (never a pipe: a container's init, LXC's monitor or
//! conmon would keep a pipe open and the bench would wait for ever), the exit status
//! checked, the error naming the command and saying what it printed.
//!
//! Timing is not done here: the measured loop ([`super::system`]) times the trait's
//! calls, the same way for every system.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};

use super::system::Failure;

/// The command line, for messages.
fn shown(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

fn create(path: &Path) -> Result<File, Failure> {
    File::create(path).map_err(Failure::io(path))
}

/// Run `cmd` to the end with its output in `logs/out.log` and `logs/err.log`; its
/// stdout, trimmed. Err: the command line and what it wrote to stderr.
pub fn run(mut cmd: Command, logs: &Path) -> Result<String, Failure> {
    let (out, err) = (logs.join("out.log"), logs.join("err.log"));
    let st = cmd
        .stdin(Stdio::null())
        .stdout(create(&out)?)
        .stderr(create(&err)?)
        .status()
        .map_err(Failure::spawn(&shown(&cmd)))?;
    if !st.success() {
        let msg = std::fs::read_to_string(&err).unwrap_or_default();
        return Err(Failure::Command {
            command: shown(&cmd),
            status: st,
            stderr: msg.trim().to_string(),
        });
    }
    Ok(std::fs::read_to_string(&out)
        .unwrap_or_default()
        .trim()
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_errors_come_back_through_files() {
        let dir = std::env::temp_dir().join(format!("warren-bench-cmd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut ok = Command::new("sh");
        ok.args(["-c", "echo hello; echo noise >&2"]);
        assert_eq!(run(ok, &dir).unwrap(), "hello");
        let mut bad = Command::new("sh");
        bad.args(["-c", "echo 'no such container' >&2; exit 3"]);
        let e = run(bad, &dir).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.starts_with("sh -c echo"), "{e}");
        assert!(e.ends_with(": no such container"), "{e}");
        assert!(e.contains("exit status: 3"), "{e}");
    }
}
