//! The dashboard's browser terminal: `GET /ui/terminal/{zone}?cols=&rows=` upgraded to
//! a WebSocket that runs `warren login -t ZONE` (the CLI beside the daemon) on a host
//! pty made for it, and relays bytes both ways. The CLI is started through `setsid -c`,
//! so the pty is its controlling terminal: a resize from the browser (a text message
//! `{"resize":[cols,rows]}`) sets the pty's size and the kernel sends SIGWINCH to the
//! login, which passes the size on to the zone's own pty. The daemon's own terminal is
//! never involved. Binary messages are keystrokes; output is sent as binary messages.
//! Only read-write peers (root, a dashboard token holder, or a read-write client
//! certificate on the TLS listener, `tls`) may open one.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Stdio;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde::Deserialize;
use tokio::sync::mpsc;
use warren_sys::libc;

use crate::access::{Access, Level};
use crate::error::ApiError;
use crate::state::Shared;

/// The terminal's first size.
#[derive(Deserialize)]
pub struct Size {
    cols: Option<u16>,
    rows: Option<u16>,
}

/// A message from the browser that is not keystrokes.
#[derive(Deserialize)]
struct Control {
    resize: Option<(u16, u16)>,
}

/// The upgrade: refused (403) for read-only peers, 400 for a bad zone name.
pub async fn terminal(
    State(app): State<Shared>,
    Path(zone): Path<String>,
    Query(size): Query<Size>,
    access: Option<Extension<Access>>,
    ws: WebSocketUpgrade,
) -> Response {
    if !access.is_some_and(|a| a.level == Level::ReadWrite) {
        return ApiError::new(
            403,
            "forbidden",
            format!("zone '{zone}': the terminal runs 'warren login', which needs a read-write peer; connect as root, with the dashboard's token, or over TLS with a read-write client certificate ('warren remote trust-token' without --read-only)"),
        )
        .into_response();
    }
    if let Err(e) = warren::names::zone(&zone) {
        return ApiError::from_warren(&e).about(&zone).into_response();
    }
    let cols = size.cols.unwrap_or(80).clamp(2, 1000);
    let rows = size.rows.unwrap_or(24).clamp(2, 1000);
    ws.on_upgrade(move |socket| async move {
        if let Err(e) = relay(app, zone.clone(), cols, rows, socket).await {
            eprintln!("warren-daemon: terminal of zone '{zone}': {e}");
        }
    })
}

/// Run the login on a new pty and relay until either side ends.
async fn relay(
    app: Shared,
    zone: String,
    cols: u16,
    rows: u16,
    mut socket: WebSocket,
) -> std::io::Result<()> {
    let (master, slave_path) = warren_sys::pty::open_master()?;
    let slave = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(&slave_path)?;
    warren_sys::pty::set_winsize(master.as_raw_fd(), rows, cols)?;
    let mut child = tokio::process::Command::new("setsid")
        .arg("--ctty")
        .arg(&app.cli_exe)
        .arg("--root")
        .arg(&app.root)
        .args(["login", "-t", &zone])
        .env("TERM", "xterm-256color")
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "starting 'setsid --ctty warren login' (util-linux's setsid is needed): {e}"
                ),
            )
        })?;
    // A descriptor of its own for resizes, valid whatever the relay threads do.
    let sizer = master.try_clone()?;
    let mut reader = master.try_clone()?;
    let mut writer = master;
    // Output: a blocking thread reads the master until the login's side closes (EIO).
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(64);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || out_tx.blocking_send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // Input: another writes keystrokes to it.
    let (in_tx, in_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        for b in in_rx {
            if writer.write_all(&b).is_err() {
                break;
            }
        }
    });
    loop {
        tokio::select! {
            out = out_rx.recv() => match out {
                Some(b) => {
                    if socket.send(Message::Binary(b.into())).await.is_err() {
                        break;
                    }
                }
                None => break,
            },
            msg = socket.recv() => match msg {
                Some(Ok(Message::Binary(b))) => {
                    let _ = in_tx.send(b.to_vec());
                }
                Some(Ok(Message::Text(t))) => {
                    match serde_json::from_str::<Control>(t.as_str()) {
                        Ok(Control { resize: Some((c, r)) }) => {
                            let _ = warren_sys::pty::set_winsize(sizer.as_raw_fd(), r.clamp(2, 1000), c.clamp(2, 1000));
                        }
                        // Text that is not a control message is typed, as a paste.
                        _ => {
                            let _ = in_tx.send(t.as_bytes().to_vec());
                        }
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            },
        }
    }
    drop(in_tx);
    // The browser left or the login ended: make sure it is gone and reaped.
    let _ = child.start_kill();
    let status = child.wait().await?;
    let _ = socket
        .send(Message::Text(
            format!("\r\n[warren login exited: {status}]\r\n").into(),
        ))
        .await;
    Ok(())
}
