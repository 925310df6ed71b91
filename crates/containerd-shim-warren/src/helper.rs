//! The one-shot helper: `containerd-shim-warren-v1 __warren-helper <verb> ...`.
//!
//! The shim's server has two threads (its runtime's and the reaper), but
//! `warren_sys::spawn` (a raw clone into new namespaces) must run in a
//! single-threaded process, and `exec` joins the container's namespaces, which
//! would move the caller (and the runtime's thread serves every call). So `create` and `exec`
//! run here, in a fresh single-threaded copy of the shim binary, as calls into
//! `warren::oci::ops` (no runtime CLI, no config round trip). The process started
//! is the helper's child; the helper exits at once and the process is reparented
//! to the shim, its subreaper. The helper's stdio is the process's; errors go to
//! the file named on the command line, never to the container's stderr.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use warren::oci::ops;

/// argv[1] that selects the helper.
pub const ARG: &str = "__warren-helper";

/// What the shim asks the helper to do (also its command line, see [`Job::args`]).
#[derive(Debug, PartialEq)]
pub struct Job {
    pub verb: Verb,
    /// warren's OCI state root for the containerd namespace.
    pub root: PathBuf,
    pub cgroup_nest: bool,
    /// cgroupsPath is `slice:prefix:name` (containerd's `SystemdCgroup` option).
    pub systemd_cgroup: bool,
    pub id: String,
    pub pid_file: PathBuf,
    pub error_file: PathBuf,
    pub console_socket: Option<PathBuf>,
}

#[derive(Debug, PartialEq)]
pub enum Verb {
    /// `create` from the bundle directory.
    Create { bundle: PathBuf },
    /// `exec --detach` of the process in this JSON file (config.json's `process`).
    Exec { process: PathBuf },
}

impl Job {
    pub fn args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec![ARG.into()];
        let (verb, path) = match &self.verb {
            Verb::Create { bundle } => ("create", bundle),
            Verb::Exec { process } => ("exec", process),
        };
        a.push(verb.into());
        a.push(self.root.clone().into());
        let flags = match (self.cgroup_nest, self.systemd_cgroup) {
            (false, false) => "-",
            (true, false) => "n",
            (false, true) => "s",
            (true, true) => "ns",
        };
        a.push(flags.into());
        a.push(self.id.clone().into());
        a.push(path.clone().into());
        a.push(self.pid_file.clone().into());
        a.push(self.error_file.clone().into());
        if let Some(s) = &self.console_socket {
            a.push(s.clone().into());
        }
        a
    }
}

impl Job {
    /// The job of a command line made by [`Job::args`] (without argv\[0\] and [`ARG`]).
    pub fn parse(args: &[OsString]) -> Option<Job> {
        if !(7..=8).contains(&args.len()) {
            return None;
        }
        let p = |i: usize| PathBuf::from(&args[i]);
        let flags = args[2].to_str()?;
        let verb = match args[0].to_str()? {
            "create" => Verb::Create { bundle: p(4) },
            "exec" => Verb::Exec { process: p(4) },
            _ => return None,
        };
        Some(Job {
            verb,
            root: p(1),
            cgroup_nest: flags.contains('n'),
            systemd_cgroup: flags.contains('s'),
            id: args[3].to_str()?.to_string(),
            pid_file: p(5),
            error_file: p(6),
            console_socket: args.get(7).map(PathBuf::from),
        })
    }
}

/// The helper's main: the arguments after [`ARG`]. Exit status 0 or 1 (message in
/// the error file), 2 for a malformed command line.
pub fn main(args: Vec<OsString>) -> i32 {
    warren_sys::fds::prime_thread_check();
    let Some(job) = Job::parse(&args) else {
        eprintln!("{ARG}: expected create|exec <root> <flags> <id> <path> <pid-file> <error-file> [<console-socket>]; this mode is for the shim itself");
        return 2;
    };
    let ctx = warren::oci::Ctx {
        root: job.root.clone(),
        log: warren::oci::Log::new(None, false, false),
        systemd_cgroup: job.systemd_cgroup,
        cgroup_nest: job.cgroup_nest,
        proc_root: PathBuf::from("/proc"),
    };
    let console = job.console_socket.as_deref();
    let result = match &job.verb {
        Verb::Create { bundle } => ops::create(
            &ctx,
            &ops::CreateArgs {
                id: &job.id,
                bundle,
                pid_file: Some(&job.pid_file),
                console_socket: console,
                no_pivot: false,
                preserve_fds: 0,
            },
        ),
        Verb::Exec { process } => exec(&ctx, &job.id, process, &job.pid_file, console),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            let _ = std::fs::write(&job.error_file, msg);
            1
        }
    }
}

fn exec(
    ctx: &warren::oci::Ctx,
    id: &str,
    process: &Path,
    pid_file: &Path,
    console: Option<&Path>,
) -> warren::error::Result<()> {
    let text = std::fs::read_to_string(process).map_err(|e| {
        warren::error::Error::Invalid(format!(
            "container '{id}': reading the exec process {}: {e}",
            process.display()
        ))
    })?;
    let process: oci_spec::runtime::Process = serde_json::from_str(&text).map_err(|e| {
        warren::error::Error::Invalid(format!(
            "container '{id}': the exec process spec from containerd is malformed: {e}"
        ))
    })?;
    ops::exec(
        ctx,
        ops::ExecArgs {
            id,
            process,
            console_socket: console,
            pid_file: Some(pid_file),
            detach: true,
            preserve_fds: 0,
        },
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_survives_its_command_line() {
        for (verb, nest, systemd, console) in [
            (
                Verb::Create {
                    bundle: "/b".into(),
                },
                true,
                false,
                Some("/r/.c.sock"),
            ),
            (
                Verb::Exec {
                    process: "/b/e1.process.json".into(),
                },
                false,
                true,
                None,
            ),
            (
                Verb::Create {
                    bundle: "/b".into(),
                },
                false,
                false,
                None,
            ),
        ] {
            let job = Job {
                verb,
                root: "/run/containerd/warren/default".into(),
                cgroup_nest: nest,
                systemd_cgroup: systemd,
                id: "c1".into(),
                pid_file: "/b/init.pid".into(),
                error_file: "/b/init.error".into(),
                console_socket: console.map(PathBuf::from),
            };
            let args = job.args();
            assert_eq!(args[0], ARG);
            assert_eq!(Job::parse(&args[1..]), Some(job));
        }
    }

    #[test]
    fn a_malformed_command_line_is_refused() {
        let a = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(Job::parse(&a(&["create", "/r", "-", "c1"])), None);
        assert_eq!(
            Job::parse(&a(&["run", "/r", "-", "c1", "/b", "/p", "/e"])),
            None
        );
    }
}
