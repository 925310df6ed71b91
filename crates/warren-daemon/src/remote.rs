//! The client side of remote access: `warren remote trust-token | add | list | remove`
//! and `warren --remote NAME VERB` (the CLI execs `warren-daemon remote ...`, so the CLI
//! stays free of TLS).
//!
//! The client's own key and certificate (`client.key` 0600, `client.crt`) and its list of
//! remotes (`remotes.json`: URL and the server's pinned fingerprint) live in
//! `$WARREN_CONFIG_DIR`, else `$XDG_CONFIG_HOME/warren`, else `~/.config/warren`. Every
//! connection pins the server certificate's SHA-256 fingerprint, learned from the trust
//! token and never from the server itself (no trust on first use). Requests are plain
//! HTTP/1.1 over a blocking rustls stream, one per connection.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde::{Deserialize, Serialize};

use crate::tls;
use crate::trust::{self, Role};

/// `warren remote ...` (docs/daemon.md, "Remote access (TLS)").
#[derive(Parser)]
#[command(name = "warren remote")]
enum Cmd {
    /// On the server (root): print a one-time token that lets one client in.
    TrustToken {
        /// The name the client's certificate gets in the trust store.
        #[arg(long, default_value = "client")]
        name: String,
        /// The client may only read (GET).
        #[arg(long)]
        read_only: bool,
        /// Seconds the token stays valid.
        #[arg(long, default_value_t = 3600)]
        ttl: u64,
        #[arg(long, env = "WARREN_ROOT", default_value = warren::layout::DEFAULT_ROOT)]
        root: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// On the server (root): the trusted client certificates.
    TrustList {
        #[arg(long, env = "WARREN_ROOT", default_value = warren::layout::DEFAULT_ROOT)]
        root: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// On the server (root): stop trusting a client certificate (by name or fingerprint);
    /// its next connection is refused.
    TrustRemove {
        who: String,
        #[arg(long, env = "WARREN_ROOT", default_value = warren::layout::DEFAULT_ROOT)]
        root: PathBuf,
    },
    /// On a client: trust the server named in TOKEN and have it trust this client.
    Add {
        name: String,
        /// https://HOST:PORT of the server's --listen-https.
        url: String,
        #[arg(long)]
        token: String,
    },
    /// The remotes this client knows.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Forget a remote (the server keeps trusting the certificate).
    Remove { name: String },
    /// `warren --remote NAME VERB ...`: the verbs of [`crate::remote_verbs`].
    #[command(hide = true)]
    Call {
        name: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// A known remote.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Remote {
    pub url: String,
    /// The server certificate's SHA-256 fingerprint (from the token).
    pub fingerprint: String,
}

/// The client's configuration directory.
pub fn config_dir() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("WARREN_CONFIG_DIR")
        .or_else(|| env("XDG_CONFIG_HOME").map(|d| d.join("warren")))
        .or_else(|| env("HOME").map(|d| d.join(".config/warren")))
        .unwrap_or_else(|| PathBuf::from("/root/.config/warren"))
}

fn remotes_path(dir: &Path) -> PathBuf {
    dir.join("remotes.json")
}

/// The remotes in `dir`.
pub fn remotes(dir: &Path) -> Result<BTreeMap<String, Remote>, String> {
    match std::fs::read(remotes_path(dir)) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| format!("{}: {e}; fix or remove it", remotes_path(dir).display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(format!("{}: {e}", remotes_path(dir).display())),
    }
}

fn save(dir: &Path, r: &BTreeMap<String, Remote>) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tmp = dir.join("remotes.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(r).unwrap_or_default())
        .and_then(|()| std::fs::rename(&tmp, remotes_path(dir)))
        .map_err(|e| format!("{}: {e}", remotes_path(dir).display()))
}

/// Pins the server certificate by fingerprint; signatures are still checked.
#[derive(Debug)]
struct Pinned {
    fingerprint: String,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let got = trust::sha256_hex(end_entity);
        if got == self.fingerprint {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "the server presents certificate {got}, not {} (the one its token or remote names); someone may be in between: check the URL, or get a new token",
                self.fingerprint
            )))
        }
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
            &self.provider.signature_verification_algorithms,
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
            &self.provider.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `https://HOST:PORT` → (host, port).
fn host_port(url: &str) -> Result<(String, u16), String> {
    let bad = || format!("{url:?}: expected https://HOST:PORT (the server's --listen-https)");
    let rest = url.strip_prefix("https://").ok_or_else(bad)?;
    let rest = rest.trim_end_matches('/');
    let (h, p) = rest.rsplit_once(':').ok_or_else(bad)?;
    let port = p.parse().map_err(|_| bad())?;
    let host = h.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

/// One answer: status and body.
pub struct Answer {
    pub status: u16,
    pub body: String,
}

/// One request to `remote` with this client's certificate.
pub fn request(
    dir: &Path,
    remote: &Remote,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<Answer, String> {
    let id = tls::identity(dir, "client", &["warren-client".into()])
        .map_err(|e| format!("the client certificate in {}: {e}", dir.display()))?;
    let (certs, key) = tls::load(&id).map_err(|e| e.to_string())?;
    let provider = tls::provider();
    let cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            fingerprint: remote.fingerprint.clone(),
            provider,
        }))
        .with_client_auth_cert(certs, key)
        .map_err(|e| format!("the client certificate: {e}"))?;
    let (host, port) = host_port(&remote.url)?;
    let name = ServerName::try_from(host.clone()).map_err(|e| format!("{host}: {e}"))?;
    let conn = rustls::ClientConnection::new(Arc::new(cfg), name).map_err(|e| e.to_string())?;
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("{}: cannot resolve {host}", remote.url))?;
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| {
        format!(
            "connecting to {}: {e}; is the daemon running with --listen-https?",
            remote.url
        )
    })?;
    tcp.set_read_timeout(Some(Duration::from_secs(300)))
        .map_err(|e| e.to_string())?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    let body = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let tls_err = |e: io::Error| format!("{}: {e}", remote.url);
    s.write_all(head.as_bytes()).map_err(tls_err)?;
    s.write_all(body.as_bytes()).map_err(tls_err)?;
    s.flush().map_err(tls_err)?;
    let mut raw = Vec::new();
    match s.read_to_end(&mut raw) {
        Ok(_) => {}
        // A peer that closes without close_notify: what came is the answer.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(tls_err(e)),
    }
    parse_answer(&raw).ok_or_else(|| format!("{}: not an HTTP answer", remote.url))
}

/// Status and body of a raw HTTP/1.1 answer (chunked or not).
fn parse_answer(raw: &[u8]) -> Option<Answer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut body = raw[split + 4..].to_vec();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let eol = rest.windows(2).position(|w| w == b"\r\n")?;
            let size_txt = std::str::from_utf8(&rest[..eol]).ok()?;
            let size = usize::from_str_radix(size_txt.split(';').next()?.trim(), 16).ok()?;
            rest = &rest[eol + 2..];
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
        body = out;
    }
    Some(Answer {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// A failed answer as a message and an exit code (the CLI's, by the error's `code`).
fn failed(a: &Answer) -> (String, i32) {
    let v: serde_json::Value = serde_json::from_str(&a.body).unwrap_or_default();
    let msg = v["message"].as_str().map_or_else(
        || format!("HTTP {}: {}", a.status, a.body.trim()),
        str::to_string,
    );
    let code = match v["code"].as_str().unwrap_or("") {
        "not_found" => 3,
        "wrong_state" => 4,
        "invalid_input" => 5,
        "conflict" => 6,
        "unsupported" => 7,
        "forbidden" | "permission" => 8,
        "system" => 9,
        "corrupt" => 10,
        _ => 1,
    };
    (msg, code)
}

/// Run `warren remote ...` (args after `remote`); the process's exit code.
pub fn main(args: Vec<String>) -> i32 {
    let cmd = match Cmd::try_parse_from(std::iter::once("warren remote".to_string()).chain(args)) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match run(cmd) {
        Ok(code) => code,
        Err((msg, code)) => {
            eprintln!("warren: {msg}");
            code
        }
    }
}

fn run(cmd: Cmd) -> Result<i32, (String, i32)> {
    let dir = config_dir();
    let fail = |m: String| (m, 1);
    match cmd {
        Cmd::TrustToken {
            name,
            read_only,
            ttl,
            root,
            json,
        } => {
            let id = tls::server_identity(&root).map_err(|e| {
                (
                    format!(
                        "the server certificate under {}: {e}; run as root",
                        root.display()
                    ),
                    8,
                )
            })?;
            let fp = tls::fingerprint_of(&id.cert).map_err(|e| fail(e.to_string()))?;
            let role = if read_only {
                Role::ReadOnly
            } else {
                Role::ReadWrite
            };
            let secret = trust::new_token(&root, &name, role, ttl).map_err(|e| {
                (
                    format!("the trust store under {}: {e}; run as root", root.display()),
                    8,
                )
            })?;
            let token = format!("{fp}:{secret}");
            if json {
                let v = serde_json::json!({"token": token, "name": name, "role": role,
                    "expires": trust::now() + ttl, "fingerprint": fp});
                println!("{v}");
            } else {
                println!("{token}");
            }
        }
        Cmd::TrustList { root, json } => {
            let s = trust::load(&root)
                .map_err(|e| (format!("the trust store under {}: {e}", root.display()), 8))?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&s.certificates).unwrap_or_default()
                );
            } else {
                println!("{:<16} {:<10} FINGERPRINT", "NAME", "ROLE");
                for c in &s.certificates {
                    let role = if c.role == Role::ReadOnly {
                        "read-only"
                    } else {
                        "read-write"
                    };
                    println!("{:<16} {role:<10} {}", c.name, c.fingerprint);
                }
            }
        }
        Cmd::TrustRemove { who, root } => {
            let gone = trust::revoke(&root, &who).map_err(|e| {
                (
                    format!("the trust store under {}: {e}; run as root", root.display()),
                    8,
                )
            })?;
            if gone.is_empty() {
                return Err((format!("no trusted certificate named '{who}'; 'warren remote trust-list' shows them"), 3));
            }
            for c in gone {
                println!("no longer trusted: {} ({})", c.name, c.fingerprint);
            }
        }
        Cmd::Add { name, url, token } => {
            let (fp, secret) = token
                .split_once(':')
                .filter(|(f, s)| f.len() == 64 && s.len() == 64)
                .ok_or_else(|| (format!("{token:?} is not a trust token (FINGERPRINT:SECRET, from 'warren remote trust-token' on the server)"), 5))?;
            host_port(&url).map_err(|m| (m, 5))?;
            let mut all = remotes(&dir).map_err(fail)?;
            if all.contains_key(&name) {
                return Err((format!("remote '{name}' exists; 'warren remote remove {name}' first, or choose another name"), 6));
            }
            let r = Remote {
                url,
                fingerprint: fp.to_string(),
            };
            let body = serde_json::json!({ "secret": secret }).to_string();
            let a = request(&dir, &r, "POST", "/1.0/certificates", Some(&body)).map_err(fail)?;
            if a.status != 201 {
                return Err(failed(&a));
            }
            all.insert(name.clone(), r);
            save(&dir, &all).map_err(fail)?;
            let v: serde_json::Value = serde_json::from_str(&a.body).unwrap_or_default();
            println!(
                "remote '{name}' added; the server trusts this client as '{}' ({})",
                v["name"].as_str().unwrap_or("?"),
                v["role"].as_str().unwrap_or("?")
            );
        }
        Cmd::List { json } => {
            let all = remotes(&dir).map_err(fail)?;
            if json {
                println!("{}", serde_json::to_string(&all).unwrap_or_default());
            } else {
                println!("{:<16} {:<32} FINGERPRINT", "NAME", "URL");
                for (n, r) in &all {
                    println!(
                        "{n:<16} {:<32} {}",
                        r.url,
                        &r.fingerprint[..16.min(r.fingerprint.len())]
                    );
                }
            }
        }
        Cmd::Remove { name } => {
            let mut all = remotes(&dir).map_err(fail)?;
            if all.remove(&name).is_none() {
                return Err((
                    format!("no remote '{name}'; 'warren remote list' shows them"),
                    3,
                ));
            }
            save(&dir, &all).map_err(fail)?;
        }
        Cmd::Call { name, args } => return call(&dir, &name, args),
    }
    Ok(0)
}

/// `warren --remote NAME VERB ...` over the REST API ([`crate::remote_verbs`]).
fn call(dir: &Path, name: &str, args: Vec<String>) -> Result<i32, (String, i32)> {
    let all = remotes(dir).map_err(|m| (m, 1))?;
    let r = all
        .get(name)
        .ok_or_else(|| (format!("no remote '{name}'; add it with 'warren remote add {name} https://HOST:PORT --token TOKEN'"), 3))?;
    // `--json` is a global option: the CLI passes it before the verb; after a `--`
    // (exec's command) every word is the command's.
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let json = args[..end].iter().any(|a| a == "--json");
    let words: Vec<String> = args[..end]
        .iter()
        .filter(|a| *a != "--json")
        .chain(&args[end..])
        .cloned()
        .collect();
    let c = crate::remote_verbs::route(&words).map_err(|m| (m, 2))?;
    let a = request(dir, r, c.method, &c.path, c.body.as_deref()).map_err(|m| (m, 1))?;
    if !(200..300).contains(&a.status) {
        return Err(failed(&a));
    }
    let v: serde_json::Value = serde_json::from_str(&a.body).unwrap_or_default();
    Ok(crate::remote_verbs::print(&words, &c, &v, json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_parsed_plain_and_chunked() {
        let a = parse_answer(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n[]").unwrap();
        assert_eq!((a.status, a.body.as_str()), (200, "[]"));
        let c = parse_answer(b"HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap();
        assert_eq!((c.status, c.body.as_str()), (403, "abcde"));
    }

    #[test]
    fn urls_are_https_host_port() {
        assert_eq!(
            host_port("https://127.0.0.1:8443/").unwrap(),
            ("127.0.0.1".into(), 8443)
        );
        assert_eq!(host_port("https://[::1]:9").unwrap(), ("::1".into(), 9));
        assert!(host_port("http://h:1").is_err());
        assert!(host_port("https://h").is_err());
    }
}
