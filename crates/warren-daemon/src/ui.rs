//! The web dashboard: its assets (built from `crates/warren-daemon/ui/` by
//! `npm ci && npm run build`, committed in `ui/dist/` and embedded in this binary, so
//! the daemon needs no file at run time) served at `/` and `/ui/...`, and the loopback
//! HTTP listener a browser reaches it through (`--listen-http 127.0.0.1:PORT`).
//!
//! The HTTP listener's access rule (threat model in docs/daemon.md, "Dashboard"): a
//! random token, written to a root-only file and printed at start, is required on every
//! request, as the cookie `warren_token` or a `Authorization: Bearer` header; the page
//! takes it once from its URL (`/?token=...`), which answers with the cookie
//! (HttpOnly, SameSite=Strict) and a redirect that drops it from the address bar. The
//! `Host` header must name a loopback address or `localhost` (no DNS rebinding), and a
//! request carrying an `Origin` must come from that same host (no cross-site
//! WebSocket or form posts). A request that passes acts as root (read-write).

use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::TokioIo;
use tower::ServiceExt;

use crate::access::{Access, Level};
use crate::error::ApiError;
use crate::state::Shared;

/// The built page (ui/dist), embedded.
const INDEX_HTML: &str = include_str!("../ui/dist/index.html");
const APP_JS: &str = include_str!("../ui/dist/app.js");
const APP_CSS: &str = include_str!("../ui/dist/app.css");

/// The cookie that carries the token.
pub const COOKIE: &str = "warren_token";

/// The dashboard's routes: the page, its assets, the terminal's WebSocket.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript", APP_JS) }),
        )
        .route("/ui/app.css", get(|| async { asset("text/css", APP_CSS) }))
        .route("/ui/terminal/{zone}", get(crate::ws::terminal))
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        body,
    )
        .into_response()
}

/// Refuse a non-loopback address: the listener is plain HTTP.
pub fn check_addr(addr: &SocketAddr) -> Result<(), String> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(format!(
            "--listen-http {addr}: not a loopback address; the dashboard's listener is plain HTTP guarded by a token, so it serves 127.0.0.1 or [::1] only; reach it from elsewhere through an SSH tunnel (ssh -L PORT:127.0.0.1:PORT host)"
        ))
    }
}

/// A new random token (32 bytes of the kernel's randomness, hex).
pub fn new_token() -> std::io::Result<String> {
    let mut b = [0u8; 32];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Write the token to `path`, mode 0600 (root only), replacing an older one.
pub fn write_token(path: &Path, token: &str) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    std::io::Write::write_all(&mut f, format!("{token}\n").as_bytes())
}

/// What the listener does with a request. Pure.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It carries the token: serve it as root.
    Pass,
    /// `/?token=` with the right token: set the cookie, redirect to `/`.
    SetCookie,
    /// Refused, with the status and the reason.
    Refuse(u16, String),
}

fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

fn loopback_host(host: &str) -> bool {
    let h = host_name(host);
    h == "localhost"
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Why a request must be refused as cross-site: it carries an `Origin` (a browser
/// says which page sent it) that is not the host it was sent to (its `Host`), i.e. a
/// page elsewhere using the browser's credentials for this daemon (the token cookie,
/// or on the TLS listener a client certificate the browser holds), by a form, a fetch
/// or a WebSocket. A request without `Origin` (curl, the CLI, a same-origin GET)
/// passes. Pure.
pub fn cross_site(headers: &HeaderMap) -> Option<String> {
    let get = |h: header::HeaderName| headers.get(h).and_then(|v| v.to_str().ok());
    let origin = get(header::ORIGIN)?;
    let host = get(header::HOST).unwrap_or("");
    let from = origin.split_once("://").map_or(origin, |(_, r)| r);
    (from != host).then(|| {
        format!("Origin {origin:?} is not this dashboard ({host}); cross-site requests are refused")
    })
}

/// Judge one request of the HTTP listener against `token`. Pure.
pub fn judge(headers: &HeaderMap, uri: &Uri, token: &str) -> Verdict {
    let get = |h: header::HeaderName| headers.get(h).and_then(|v| v.to_str().ok());
    let Some(host) = get(header::HOST) else {
        return Verdict::Refuse(400, "no Host header".into());
    };
    if !loopback_host(host) {
        return Verdict::Refuse(
            403,
            format!("Host {host:?} is not a loopback name; open the dashboard at http://127.0.0.1:PORT/"),
        );
    }
    if let Some(why) = cross_site(headers) {
        return Verdict::Refuse(403, why);
    }
    let from_cookie = get(header::COOKIE).and_then(|c| {
        c.split(';')
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| *k == COOKIE)
            .map(|(_, v)| v)
    });
    let from_bearer = get(header::AUTHORIZATION).and_then(|a| a.strip_prefix("Bearer "));
    if from_cookie
        .or(from_bearer)
        .is_some_and(|t| equal(t.as_bytes(), token.as_bytes()))
    {
        return Verdict::Pass;
    }
    let from_query = uri.query().and_then(|q| {
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == "token")
            .map(|(_, v)| v)
    });
    match from_query {
        Some(t) if uri.path() == "/" && equal(t.as_bytes(), token.as_bytes()) => Verdict::SetCookie,
        Some(_) => Verdict::Refuse(401, "wrong token; take the one warren-daemon printed (or the root-only file <run dir>/dashboard.token)".into()),
        None => Verdict::Refuse(401, "the dashboard needs its token: open the URL warren-daemon printed (http://127.0.0.1:PORT/?token=..., also in the root-only file <run dir>/dashboard.token)".into()),
    }
}

/// Accept browsers on `listener` forever; each request is judged by [`judge`].
pub async fn serve_http(listener: tokio::net::TcpListener, router: Router, token: Arc<str>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("warren-daemon: accepting on the dashboard listener: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let router = router.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    let verdict = judge(req.headers(), req.uri(), &token);
                    let router = router.clone();
                    let token = token.clone();
                    async move {
                        match verdict {
                            Verdict::Pass => {
                                req.extensions_mut().insert(Access {
                                    uid: 0,
                                    level: Level::ReadWrite,
                                });
                                router.oneshot(req.map(axum::body::Body::new)).await
                            }
                            Verdict::SetCookie => {
                                let cookie =
                                    format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
                                let mut r = StatusCode::SEE_OTHER.into_response();
                                r.headers_mut()
                                    .insert(header::LOCATION, HeaderValue::from_static("/"));
                                if let Ok(v) = HeaderValue::from_str(&cookie) {
                                    r.headers_mut().insert(header::SET_COOKIE, v);
                                }
                                Ok(r)
                            }
                            Verdict::Refuse(status, why) => {
                                Ok(ApiError::new(status, "forbidden", why).into_response())
                            }
                        }
                    }
                },
            );
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades()
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn the_token_is_needed_and_taken_once_from_the_url() {
        let t = "abc123";
        let root: Uri = "/".parse().unwrap();
        let h = req(&[("host", "127.0.0.1:8443")]);
        assert!(matches!(judge(&h, &root, t), Verdict::Refuse(401, _)));
        let with: Uri = "/?token=abc123".parse().unwrap();
        assert_eq!(judge(&h, &with, t), Verdict::SetCookie);
        let wrong: Uri = "/?token=abc124".parse().unwrap();
        assert!(matches!(judge(&h, &wrong, t), Verdict::Refuse(401, _)));
        // The URL form is only for the page, never an API call.
        let api: Uri = "/1.0/zones?token=abc123".parse().unwrap();
        assert!(matches!(judge(&h, &api, t), Verdict::Refuse(401, _)));
        let c = req(&[
            ("host", "127.0.0.1:8443"),
            ("cookie", "a=b; warren_token=abc123"),
        ]);
        assert_eq!(judge(&c, &api, t), Verdict::Pass);
        let b = req(&[
            ("host", "localhost:8443"),
            ("authorization", "Bearer abc123"),
        ]);
        assert_eq!(judge(&b, &api, t), Verdict::Pass);
    }

    #[test]
    fn foreign_hosts_and_origins_are_refused_even_with_the_token() {
        let t = "abc123";
        let api: Uri = "/1.0/zones".parse().unwrap();
        let rebound = req(&[
            ("host", "evil.example:8443"),
            ("cookie", "warren_token=abc123"),
        ]);
        assert!(matches!(judge(&rebound, &api, t), Verdict::Refuse(403, _)));
        let cross = req(&[
            ("host", "127.0.0.1:8443"),
            ("origin", "http://evil.example"),
            ("cookie", "warren_token=abc123"),
        ]);
        assert!(matches!(judge(&cross, &api, t), Verdict::Refuse(403, _)));
        let same = req(&[
            ("host", "[::1]:8443"),
            ("origin", "http://[::1]:8443"),
            ("cookie", "warren_token=abc123"),
        ]);
        assert_eq!(judge(&same, &api, t), Verdict::Pass);
    }

    #[test]
    fn only_loopback_addresses_are_taken() {
        assert!(check_addr(&"127.0.0.1:8443".parse().unwrap()).is_ok());
        assert!(check_addr(&"[::1]:8443".parse().unwrap()).is_ok());
        assert!(check_addr(&"0.0.0.0:8443".parse().unwrap()).is_err());
        assert!(check_addr(&"192.168.1.2:8443".parse().unwrap()).is_err());
    }
}
