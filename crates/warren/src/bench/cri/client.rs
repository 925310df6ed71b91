//! The CRI client: `cri_client.py` (the Kubernetes project's generated CRI v1 stubs,
//! PyPI `container-runtime-interface-api`, over grpcio) run in a venv, one process per
//! daemon, spoken to in JSON lines. It runs in the daemon's network namespace, where
//! the streaming server of Exec and Attach listens. Requests and answers are the CRI
//! messages in protobuf's JSON mapping with proto field names (`pod_sandbox_id`);
//! 64-bit integers come back as strings.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

use super::daemon::CriContainerd;
use crate::bench::system::Failure;

/// The client script, written next to the daemon's files.
const SCRIPT: &str = include_str!("../cri_client.py");
/// The venv scripts/test.sh makes (`WARREN_CRI_PYTHON` names another interpreter).
pub const VENV: &str = "/var/cache/warren-test/cri";
pub const PYTHON_ENV: &str = "WARREN_CRI_PYTHON";

/// A CRI call that failed: the gRPC status code name and its message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{call}: {code}: {details}")]
pub struct CriError {
    pub call: String,
    pub code: String,
    pub details: String,
}

/// One CRI client process.
pub struct CriClient {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The interpreter with the CRI stubs.
pub fn python() -> Result<PathBuf, Failure> {
    let p = std::env::var_os(PYTHON_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(VENV).join("bin/python3"));
    let ok = Command::new(&p)
        .args(["-c", "import cri_api.v1, grpc, websocket"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return Err(Failure::Failed(format!(
            "{} cannot import the CRI stubs: python3 -m venv {VENV} && {VENV}/bin/pip install \
             container-runtime-interface-api websocket-client (scripts/test.sh does), or set \
             {PYTHON_ENV} to a python3 that has them",
            p.display()
        )));
    }
    Ok(p)
}

impl CriClient {
    /// A client of `daemon`'s CRI socket.
    pub fn connect(daemon: &CriContainerd) -> Result<CriClient, Failure> {
        let python = python()?;
        let script = daemon.dir().join("cri_client.py");
        std::fs::write(&script, SCRIPT).map_err(Failure::io(&script))?;
        let pid = daemon
            .daemon_pid()
            .ok_or_else(|| Failure::Failed("containerd is not running".into()))?;
        let mut child = Command::new("nsenter")
            .arg(format!("--net=/proc/{pid}/ns/net"))
            .arg("--")
            .arg(&python)
            .arg(&script)
            .arg(daemon.socket())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(Failure::spawn("nsenter python3 cri_client.py"))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(CriClient {
            child,
            stdin,
            stdout,
        })
    }

    /// The client's process (python3: nsenter execs it).
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn exchange(
        &mut self,
        msg: Value,
        what: &str,
    ) -> Result<(Result<Value, CriError>, f64), Failure> {
        let lost =
            |e: std::io::Error| Failure::Failed(format!("the CRI client died during {what}: {e}"));
        writeln!(self.stdin, "{msg}").map_err(lost)?;
        self.stdin.flush().map_err(lost)?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line).map_err(lost)? == 0 {
            return Err(Failure::Failed(format!(
                "the CRI client exited during {what} (its stderr is above)"
            )));
        }
        let v: Value = serde_json::from_str(&line)
            .map_err(|e| Failure::Failed(format!("the CRI client answered {line:?}: {e}")))?;
        let ms = v["ms"].as_f64().unwrap_or(0.0);
        let r = match v.get("ok") {
            Some(ok) => Ok(ok.clone()),
            None => Err(CriError {
                call: what.to_string(),
                code: v["error"]["code"].as_str().unwrap_or("?").to_string(),
                details: v["error"]["details"].as_str().unwrap_or("").to_string(),
            }),
        };
        Ok((r, ms))
    }

    /// A RuntimeService call: (its answer or its gRPC error, milliseconds it took).
    pub fn call_timed(
        &mut self,
        call: &str,
        request: Value,
    ) -> Result<(Result<Value, CriError>, f64), Failure> {
        self.exchange(json!({"call": call, "request": request}), call)
    }

    /// A RuntimeService call that must succeed.
    pub fn call(&mut self, call: &str, request: Value) -> Result<Value, Failure> {
        let (r, _) = self.call_timed(call, request)?;
        r.map_err(|e| Failure::Failed(e.to_string()))
    }

    /// An ImageService call that must succeed.
    pub fn image_call(&mut self, call: &str, request: Value) -> Result<Value, Failure> {
        let (r, _) = self.exchange(
            json!({"call": call, "service": "image", "request": request}),
            call,
        )?;
        r.map_err(|e| Failure::Failed(e.to_string()))
    }

    /// Speak to an Exec or Attach URL: send `stdin`, read until `until` shows or
    /// `timeout_s` passes. The answer: {"stdout", "stderr", "status"}.
    pub fn stream(
        &mut self,
        url: &str,
        stdin: &str,
        until: Option<&str>,
        timeout_s: f64,
    ) -> Result<Value, Failure> {
        let (r, _) = self.exchange(
            json!({"stream": url, "stdin": stdin, "until": until, "timeout": timeout_s}),
            "stream",
        )?;
        r.map_err(|e| Failure::Failed(e.to_string()))
    }
}

impl Drop for CriClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
