//! The TCP + TLS listener (`--listen-https ADDR:PORT`): rustls with the ring provider,
//! a server certificate made on first start (`<root>/daemon/server.crt`, its key
//! `server.key`, 0600), and **client certificates required**.
//!
//! Any client certificate completes the handshake (it must prove its key); what it may
//! do is then decided per connection from its SHA-256 fingerprint in the trust store
//! ([`crate::trust`]): read-write, read-only (GET only), or nothing but
//! `POST /1.0/certificates {"secret"}` (the trust flow), every other request answered
//! 403 `forbidden` with the structured error. A client without a certificate is refused
//! in the handshake. Trusted requests reach the same router as the unix socket's,
//! the dashboard and its terminal's WebSocket included (upgrades are served; the
//! terminal needs a read-write certificate); a request whose `Origin` is another site
//! is refused (a browser sends its certificate wherever a page points it).

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use axum::Router;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::access::{Access, Level};
use crate::error::ApiError;
use crate::trust::{self, Role};

/// A certificate and its key, as PEM files.
pub struct Identity {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Load the identity in `dir` (`<stem>.crt`, `<stem>.key`), or make one (a self-signed
/// certificate for `names`, key 0600) if there is none.
pub fn identity(dir: &Path, stem: &str, names: &[String]) -> io::Result<Identity> {
    let id = Identity {
        cert: dir.join(format!("{stem}.crt")),
        key: dir.join(format!("{stem}.key")),
    };
    if id.cert.exists() && id.key.exists() {
        return Ok(id);
    }
    std::fs::create_dir_all(dir)?;
    let bad = |e: rcgen::Error| io::Error::other(format!("making a certificate: {e}"));
    let key = rcgen::KeyPair::generate().map_err(bad)?;
    let cert = rcgen::CertificateParams::new(names.to_vec())
        .map_err(bad)?
        .self_signed(&key)
        .map_err(bad)?;
    let write = |p: &Path, mode: u32, text: &str| -> io::Result<()> {
        use std::io::Write;
        let tmp = p.with_extension("tmp");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, p)
    };
    write(&id.key, 0o600, &key.serialize_pem())?;
    write(&id.cert, 0o600, &cert.pem())?;
    Ok(id)
}

/// The server's identity in the state root (made on first use).
pub fn server_identity(root: &Path) -> io::Result<Identity> {
    let dir = trust::ensure_dir(root)?;
    identity(
        &dir,
        "server",
        &["warren".into(), "localhost".into(), "127.0.0.1".into()],
    )
}

/// The SHA-256 fingerprint (hex) of the first certificate of a PEM file.
pub fn fingerprint_of(cert: &Path) -> io::Result<String> {
    let der = CertificateDer::from_pem_file(cert)
        .map_err(|e| io::Error::other(format!("{}: {e}", cert.display())))?;
    Ok(trust::sha256_hex(&der))
}

/// Read a PEM certificate and key.
pub fn load(id: &Identity) -> io::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let bad = |p: &Path, e: rustls::pki_types::pem::Error| {
        io::Error::other(format!("{}: {e}; remove it to make a new one", p.display()))
    };
    let cert = CertificateDer::from_pem_file(&id.cert).map_err(|e| bad(&id.cert, e))?;
    let key = PrivateKeyDer::from_pem_file(&id.key).map_err(|e| bad(&id.key, e))?;
    Ok((vec![cert], key))
}

/// The ring provider, shared by server and client.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Accepts any client certificate that proves its key; trust is decided after the
/// handshake from the fingerprint (so an untrusted client can present a token).
#[derive(Debug)]
struct AnyClientCert(Arc<rustls::crypto::CryptoProvider>);

impl ClientCertVerifier for AnyClientCert {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The server's TLS configuration (client certificates mandatory).
pub fn server_config(root: &Path) -> io::Result<Arc<rustls::ServerConfig>> {
    let (certs, key) = load(&server_identity(root)?)?;
    let p = provider();
    let cfg = rustls::ServerConfig::builder_with_provider(p.clone())
        .with_safe_default_protocol_versions()
        .and_then(|b| {
            b.with_client_cert_verifier(Arc::new(AnyClientCert(p)))
                .with_single_cert(certs, key)
        })
        .map_err(|e| io::Error::other(format!("TLS configuration: {e}")))?;
    Ok(Arc::new(cfg))
}

/// A bound TCP listener with its TLS configuration.
pub struct HttpsListener {
    pub listener: TcpListener,
    pub config: Arc<rustls::ServerConfig>,
    pub root: PathBuf,
}

/// Bind `addr` and prepare TLS (the server certificate made on first start).
pub async fn bind(addr: SocketAddr, root: &Path) -> io::Result<HttpsListener> {
    let config = server_config(root)?;
    let listener = TcpListener::bind(addr).await?;
    Ok(HttpsListener {
        listener,
        config,
        root: root.to_path_buf(),
    })
}

fn forbidden(msg: String) -> Response {
    ApiError::new(403, "forbidden", msg).into_response()
}

/// `POST /1.0/certificates {"secret": ...}`: redeem a trust token for this connection's
/// certificate.
async fn redeem(root: PathBuf, fp: String, body: axum::body::Body) -> Response {
    let bytes = match http_body_util::Limited::new(body, 64 * 1024)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return ApiError::new(413, "payload_too_large", "the body exceeds 64 KiB")
                .into_response()
        }
    };
    #[derive(serde::Deserialize)]
    struct Req {
        secret: String,
    }
    let Ok(req) = serde_json::from_slice::<Req>(&bytes) else {
        return ApiError::new(
            400,
            "invalid_input",
            "expected {\"secret\": \"<the token's secret>\"}; use 'warren remote add NAME URL --token TOKEN'",
        )
        .into_response();
    };
    let r = tokio::task::spawn_blocking(move || trust::redeem(&root, &req.secret, &fp)).await;
    match r {
        Ok(Ok(Ok(c))) => (axum::http::StatusCode::CREATED, axum::Json(c)).into_response(),
        Ok(Ok(Err(e))) => forbidden(e.to_string()),
        Ok(Err(e)) => ApiError::new(500, "system", format!("the trust store: {e}")).into_response(),
        Err(e) => ApiError::new(500, "system", format!("the trust store: {e}")).into_response(),
    }
}

/// One request on a TLS connection from certificate `fp`.
async fn handle(
    root: PathBuf,
    fp: String,
    router: Router,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<Response, Infallible> {
    let mut req = req.map(axum::body::Body::new);
    if req.uri().path() == "/1.0/certificates" && req.method() == axum::http::Method::POST {
        return Ok(redeem(root, fp, req.into_body()).await);
    }
    let r = root.clone();
    let f = fp.clone();
    let role = match tokio::task::spawn_blocking(move || trust::role_of(&r, &f)).await {
        Ok(Ok(role)) => role,
        Ok(Err(e)) => {
            return Ok(
                ApiError::new(500, "system", format!("the trust store: {e}")).into_response(),
            )
        }
        Err(e) => return Ok(ApiError::new(500, "system", e.to_string()).into_response()),
    };
    let read = matches!(
        *req.method(),
        axum::http::Method::GET | axum::http::Method::HEAD
    );
    let cross = crate::ui::cross_site(req.headers());
    match role {
        None => Ok(forbidden(format!(
            "client certificate {fp} is not trusted; on the server, run 'warren remote trust-token' and give the token to 'warren remote add NAME URL --token TOKEN'"
        ))),
        Some((name, Role::ReadOnly)) if !read => Ok(forbidden(format!(
            "client certificate '{name}' ({fp}) is read-only: it may only GET; ask for a read-write token ('warren remote trust-token' without --read-only)"
        ))),
        // A browser holding the certificate sends it wherever a page points it: a
        // page of another site is refused (as on the dashboard's HTTP listener).
        Some((name, _)) if cross.is_some() => Ok(forbidden(format!(
            "client certificate '{name}': {}; open the dashboard at this daemon's own https:// address",
            cross.unwrap_or_default()
        ))),
        Some((_, role)) => {
            // The access layer (and the terminal, which needs read-write even for its
            // GET upgrade) sees the certificate's role.
            req.extensions_mut().insert(Access {
                uid: 0,
                level: match role {
                    Role::ReadWrite => Level::ReadWrite,
                    Role::ReadOnly => Level::ReadOnly,
                },
            });
            router.oneshot(req).await
        }
    }
}

/// Accept TLS connections forever, each judged by its client certificate.
pub async fn serve(l: HttpsListener, router: Router) {
    let acceptor = tokio_rustls::TlsAcceptor::from(l.config.clone());
    loop {
        let (tcp, peer) = match l.listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("warren-daemon: accepting on https: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        let root = l.root.clone();
        tokio::spawn(async move {
            let tls =
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => s,
                    // A peer that closed before a word (a port probe) is not worth a line.
                    Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return,
                    Ok(Err(e)) => {
                        eprintln!("warren-daemon: TLS handshake with {peer} refused: {e}");
                        return;
                    }
                    Err(_) => return,
                };
            let Some(fp) = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| trust::sha256_hex(c))
            else {
                return;
            };
            let svc = hyper::service::service_fn(move |req| {
                handle(root.clone(), fp.clone(), router.clone(), req)
            });
            // Upgrades on: the dashboard's terminal is a WebSocket (`ws`).
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), svc)
                .with_upgrades()
                .await;
        });
    }
}
