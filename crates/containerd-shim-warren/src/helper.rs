//! The one-shot helper: `containerd-shim-warren-v1 __warren-helper <verb> ...`.
//!
//! The shim serves ttrpc from several threads, but `warren_sys::spawn` (a raw clone
//! into new namespaces) must run in a single-threaded process, and `exec` joins the
//! container's namespaces, which would move the caller. So `create` and `exec`
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

/// The helper's main: the arguments after [`ARG`]. Exit status 0 or 1 (message in
/// the error file), 2 for a malformed command line.
pub fn main(args: Vec<OsString>) -> i32 {
    warren_sys::fds::prime_thread_check();
    if args.len() < 7 {
        eprintln!("{ARG}: expected <verb> <root> <flags> <id> <path> <pid-file> <error-file> [<console-socket>]; this mode is for the shim itself");
        return 2;
    }
    let p = |i: usize| PathBuf::from(&args[i]);
    let (verb, root, nest, id, path, pid_file, error_file) = (
        args[0].to_string_lossy().into_owned(),
        p(1),
        args[2].to_string_lossy().into_owned(),
        args[3].to_string_lossy().into_owned(),
        p(4),
        p(5),
        p(6),
    );
    let console = args.get(7).map(PathBuf::from);
    let ctx = warren::oci::Ctx {
        root,
        log: warren::oci::Log::new(None, false, false),
        systemd_cgroup: nest.contains('s'),
        cgroup_nest: nest.contains('n'),
        proc_root: PathBuf::from("/proc"),
    };
    let result = match verb.as_str() {
        "create" => ops::create(
            &ctx,
            &ops::CreateArgs {
                id: &id,
                bundle: &path,
                pid_file: Some(&pid_file),
                console_socket: console.as_deref(),
                no_pivot: false,
                preserve_fds: 0,
            },
        ),
        "exec" => exec(&ctx, &id, &path, &pid_file, console.as_deref()),
        other => Err(warren::error::Error::Invalid(format!(
            "{ARG}: verb {other:?} is not known; expected create or exec"
        ))),
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
            let _ = std::fs::write(&error_file, msg);
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
