//! A process's stdio: the FIFOs containerd names (stdin, stdout, stderr; empty for
//! none), or a terminal.
//!
//! Without a terminal, stdout and stderr FIFOs are handed to the process itself
//! (opened read-write, so opening never blocks and the shim copies nothing: no
//! thread, no buffer per container); the reader sees EOF once the process and its
//! children have closed them. stdin goes through a pipe fed by one thread, so that
//! `CloseIO` (and the writer's EOF) reach the process as EOF. With a terminal the
//! process's pty master comes back over the console socket; one thread copies it to
//! the stdout FIFO, one copies the stdin FIFO into it, and `ResizePty` sets its size.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The FIFO paths containerd gave for one process.
#[derive(Clone, Default)]
pub struct Paths {
    pub stdin: String,
    pub stdout: String,
    pub stderr: String,
    pub terminal: bool,
}

/// Where the stdin copy writes; `None` once closed (CloseIO or the writer's EOF).
pub type StdinSink = Arc<Mutex<Option<Box<dyn Write + Send>>>>;

/// What the shim keeps of a process's stdio.
#[derive(Default)]
pub struct Kept {
    pub stdin: Option<StdinSink>,
    /// The pty master of a terminal process.
    pub console: Option<File>,
}

/// The helper's (and so the process's) stdio, and what the shim keeps.
pub struct Wired {
    pub stdin: std::process::Stdio,
    pub stdout: std::process::Stdio,
    pub stderr: std::process::Stdio,
    pub kept: Kept,
}

fn fifo(path: &str) -> std::io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

fn out(path: &str) -> std::io::Result<std::process::Stdio> {
    if path.is_empty() {
        return Ok(std::process::Stdio::null());
    }
    fifo(path).map(Into::into)
}

/// Copy the stdin FIFO into `sink` until EOF or close; then close the sink.
fn feed_stdin(path: String, sink: StdinSink) {
    std::thread::spawn(move || {
        // Blocks until containerd's side opens it for writing.
        if let Ok(mut f) = File::open(&path) {
            let mut buf = [0u8; 8192];
            while let Ok(n) = f.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut guard = sink.lock().unwrap_or_else(|p| p.into_inner());
                let Some(w) = guard.as_mut() else { return };
                if w.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
        sink.lock().unwrap_or_else(|p| p.into_inner()).take();
    });
}

/// Open the process's stdio for the helper (no terminal: the FIFOs; a terminal:
/// nothing, the pty comes later through [`Console`]).
pub fn wire(p: &Paths) -> std::io::Result<Wired> {
    if p.terminal {
        return Ok(Wired {
            stdin: std::process::Stdio::null(),
            stdout: std::process::Stdio::null(),
            stderr: std::process::Stdio::null(),
            kept: Kept::default(),
        });
    }
    let mut kept = Kept::default();
    let stdin = if p.stdin.is_empty() {
        std::process::Stdio::null()
    } else {
        let (r, w) = std::io::pipe()?;
        let sink: StdinSink = Arc::new(Mutex::new(Some(Box::new(w))));
        feed_stdin(p.stdin.clone(), sink.clone());
        kept.stdin = Some(sink);
        r.into()
    };
    Ok(Wired {
        stdin,
        stdout: out(&p.stdout)?,
        stderr: out(&p.stderr)?,
        kept,
    })
}

/// The console socket a terminal process's pty master comes back on.
pub struct Console {
    listener: UnixListener,
    pub path: PathBuf,
}

impl Console {
    /// Listen on `path` (a fresh name in the shim's state directory).
    pub fn listen(path: &Path) -> std::io::Result<Console> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)?;
        listener.set_nonblocking(true)?;
        Ok(Console {
            listener,
            path: path.to_path_buf(),
        })
    }

    /// After the helper succeeded: take the master it sent and start copying.
    pub fn attach(self, p: &Paths, kept: &mut Kept) -> std::io::Result<()> {
        let (conn, _) = self.listener.accept()?;
        conn.set_nonblocking(false)?;
        let (fd, _) = warren_sys::pty::recv_fd(conn.as_raw_fd())?;
        let master = File::from(fd);
        if !p.stdout.is_empty() {
            let mut from = master.try_clone()?;
            let mut to = fifo(&p.stdout)?;
            std::thread::spawn(move || {
                // Ends with EIO once every holder of the slave has closed it.
                let _ = std::io::copy(&mut from, &mut to);
            });
        }
        if !p.stdin.is_empty() {
            let sink: StdinSink = Arc::new(Mutex::new(Some(Box::new(master.try_clone()?))));
            feed_stdin(p.stdin.clone(), sink.clone());
            kept.stdin = Some(sink);
        }
        kept.console = Some(master);
        Ok(())
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
