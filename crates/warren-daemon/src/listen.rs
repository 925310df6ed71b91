//! Listeners and the connection loop. The daemon serves a list of listeners: the unix
//! socket it binds (`--socket`), or those systemd passes (socket activation,
//! `sd_listen_fds(3)` semantics: `$LISTEN_PID` must be this process, descriptors from
//! 3). Each connection gets its peer's [`Access`] as a request extension, which the
//! access layer judges; a TCP+TLS listener would add its own kind here.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use axum::Router;
use hyper_util::rt::TokioIo;
use tokio::net::UnixListener;
use tower::ServiceExt;

use crate::access::{self, Access};

/// One place the daemon accepts connections.
pub enum Listener {
    /// A socket this daemon bound (and removes at exit).
    Bound {
        path: PathBuf,
        listener: UnixListener,
    },
    /// A socket systemd passed.
    Activated { listener: UnixListener },
}

/// How the bound socket is made.
pub struct SocketOptions {
    pub path: PathBuf,
    /// Mode of the socket file; `None`: 0660 with group `warren` if the host has it,
    /// else 0600.
    pub mode: Option<u32>,
}

/// The sockets systemd passed, if this process was socket-activated. Called before
/// any thread starts (it clears the variables, as `sd_listen_fds(1)` does, so the
/// helpers do not take them again); [`adopt`] makes them listeners in the runtime.
pub fn activated() -> io::Result<Vec<std::os::unix::net::UnixListener>> {
    let pid = std::env::var("LISTEN_PID").ok();
    let n = std::env::var("LISTEN_FDS").ok();
    let fds = warren_sys::fds::listen_fds(pid.as_deref(), n.as_deref())?;
    std::env::remove_var("LISTEN_PID");
    std::env::remove_var("LISTEN_FDS");
    std::env::remove_var("LISTEN_FDNAMES");
    Ok(fds
        .into_iter()
        .map(std::os::unix::net::UnixListener::from)
        .collect())
}

/// A passed socket as a listener (inside the runtime).
pub fn adopt(l: std::os::unix::net::UnixListener) -> io::Result<Listener> {
    l.set_nonblocking(true)?;
    Ok(Listener::Activated {
        listener: UnixListener::from_std(l)?,
    })
}

/// Bind the unix socket: its directory made (0755, so group members can reach it),
/// a stale socket from a killed daemon replaced, a live one refused.
pub fn bind(o: &SocketOptions) -> io::Result<Listener> {
    let path = &o.path;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "{}: another daemon is listening there; stop it or give another --socket",
                        path.display()
                    ),
                ));
            }
            std::fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; move it aside or give another --socket",
                    path.display()
                ),
            ))
        }
        Err(_) => {}
    }
    let listener = UnixListener::bind(path)?;
    let gid = access::warren_gid();
    let mode = o.mode.unwrap_or(if gid.is_some() { 0o660 } else { 0o600 });
    std::os::unix::fs::chown(path, Some(0), gid)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(Listener::Bound {
        path: path.clone(),
        listener,
    })
}

impl Listener {
    fn unix(&self) -> &UnixListener {
        match self {
            Listener::Bound { listener, .. } | Listener::Activated { listener } => listener,
        }
    }

    /// Where it listens, for the log.
    pub fn describe(&self) -> String {
        match self {
            Listener::Bound { path, .. } => path.display().to_string(),
            Listener::Activated { listener } => format!(
                "{} (socket-activated)",
                listener
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_pathname().map(Path::to_path_buf))
                    .map_or("?".into(), |p| p.display().to_string())
            ),
        }
    }

    /// The socket file to remove at exit (only one this daemon bound).
    pub fn bound_path(&self) -> Option<&Path> {
        match self {
            Listener::Bound { path, .. } => Some(path),
            Listener::Activated { .. } => None,
        }
    }
}

/// Accept connections on `l` forever, each served by `router` with its peer's access.
pub async fn serve(l: Listener, router: Router) {
    loop {
        let (stream, _) = match l.unix().accept().await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("warren-daemon: accepting on {}: {e}", l.describe());
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let access = match stream.peer_cred() {
            Ok(c) => access::of_peer(&c),
            Err(e) => {
                eprintln!("warren-daemon: a connection without peer credentials ({e}); refused");
                continue;
            }
        };
        let router = router.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert::<Access>(access);
                    router.clone().oneshot(req.map(axum::body::Body::new))
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
