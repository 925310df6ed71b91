//! The TLS listener's trust store, `<root>/daemon/trust.json` (0600): the client
//! certificates allowed in (by SHA-256 fingerprint, each with a name and a role), and the
//! pending trust tokens (each a hash of its secret, a name, a role, an expiry).
//!
//! A token is `<server fingerprint>:<secret>` (both hex): the client learns from it which
//! server certificate to expect (no trust on first use), and the server learns from the
//! secret, presented once over TLS with the client's certificate, that this certificate
//! may be added. Secrets are stored hashed, used once, and expire. Every change is made
//! under an exclusive lock of the file (`trust.lock`) and written by rename, so the CLI
//! (`warren remote trust-token`) and the daemon can both change it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// What a trusted certificate may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    ReadOnly,
    ReadWrite,
}

/// One trusted client certificate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trusted {
    pub fingerprint: String,
    pub name: String,
    pub role: Role,
    /// When it was added (seconds since the epoch).
    pub added: u64,
}

/// One pending token: only the hash of its secret is kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Token {
    pub secret_sha256: String,
    pub name: String,
    pub role: Role,
    /// Seconds since the epoch after which it is refused.
    pub expires: u64,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Store {
    #[serde(default)]
    pub certificates: Vec<Trusted>,
    #[serde(default)]
    pub tokens: Vec<Token>,
}

/// Why a token was refused (the daemon answers 403 with the message).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TokenError {
    #[error("the trust token is unknown or was already used; ask the server's root for a new one with 'warren remote trust-token'")]
    Unknown,
    #[error("the trust token for '{0}' has expired; ask the server's root for a new one with 'warren remote trust-token'")]
    Expired(String),
}

/// The daemon's directory in a state root (server key, certificate, trust store).
pub fn daemon_dir(root: &Path) -> PathBuf {
    root.join("daemon")
}

fn store_path(root: &Path) -> PathBuf {
    daemon_dir(root).join("trust.json")
}

/// Now, in seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Lower-case hex of bytes.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// SHA-256 of bytes, hex: a certificate's (DER) fingerprint, a secret's hash.
pub fn sha256_hex(b: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, b).as_ref())
}

/// Make the daemon's directory (0700).
pub fn ensure_dir(root: &Path) -> io::Result<PathBuf> {
    let d = daemon_dir(root);
    std::fs::create_dir_all(&d)?;
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700))?;
    Ok(d)
}

/// Read the store (empty if there is none).
pub fn load(root: &Path) -> io::Result<Store> {
    match std::fs::read(store_path(root)) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: {e}; fix or remove the file (every remote then needs a new token)",
                    store_path(root).display()
                ),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Store::default()),
        Err(e) => Err(e),
    }
}

/// Change the store under its lock: `f` edits it, the result is written by rename (0600).
pub fn update<T>(root: &Path, f: impl FnOnce(&mut Store) -> T) -> io::Result<T> {
    let dir = ensure_dir(root)?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(dir.join("trust.lock"))?;
    lock.lock()?;
    let mut s = load(root)?;
    let out = f(&mut s);
    let tmp = dir.join("trust.json.tmp");
    {
        let mut t = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)?;
        serde_json::to_writer_pretty(&mut t, &s)?;
        t.sync_all()?;
    }
    std::fs::rename(&tmp, store_path(root))?;
    drop::<File>(lock);
    Ok(out)
}

/// A new random secret (32 bytes, hex).
pub fn random_hex() -> io::Result<String> {
    let mut b = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b)
        .map_err(|_| io::Error::other("the system's random source failed"))?;
    Ok(hex(&b))
}

/// Add a token (`ttl` seconds) and return its secret; expired tokens are dropped.
pub fn new_token(root: &Path, name: &str, role: Role, ttl: u64) -> io::Result<String> {
    let secret = random_hex()?;
    let t = Token {
        secret_sha256: sha256_hex(secret.as_bytes()),
        name: name.into(),
        role,
        expires: now() + ttl,
    };
    update(root, |s| {
        let n = now();
        s.tokens.retain(|t| t.expires > n);
        s.tokens.push(t);
    })?;
    Ok(secret)
}

/// Redeem a secret for certificate `fingerprint`: the token is removed whatever the
/// outcome (single use), the certificate added with the token's name and role.
pub fn redeem(
    root: &Path,
    secret: &str,
    fingerprint: &str,
) -> io::Result<Result<Trusted, TokenError>> {
    let h = sha256_hex(secret.as_bytes());
    update(root, |s| {
        let Some(i) = s.tokens.iter().position(|t| t.secret_sha256 == h) else {
            return Err(TokenError::Unknown);
        };
        let t = s.tokens.remove(i);
        if t.expires <= now() {
            return Err(TokenError::Expired(t.name));
        }
        s.certificates.retain(|c| c.fingerprint != fingerprint);
        let c = Trusted {
            fingerprint: fingerprint.into(),
            name: t.name,
            role: t.role,
            added: now(),
        };
        s.certificates.push(c.clone());
        Ok(c)
    })
}

/// Stop trusting the certificates named `who` (a name or a fingerprint, or a prefix of
/// one of at least 12 hex digits); the ones removed.
pub fn revoke(root: &Path, who: &str) -> io::Result<Vec<Trusted>> {
    let hit = |c: &Trusted| {
        c.name == who || c.fingerprint == who || (who.len() >= 12 && c.fingerprint.starts_with(who))
    };
    update(root, |s| {
        let (gone, kept) = std::mem::take(&mut s.certificates)
            .into_iter()
            .partition(hit);
        s.certificates = kept;
        gone
    })
}

/// The role of a certificate, if trusted.
pub fn role_of(root: &Path, fingerprint: &str) -> io::Result<Option<(String, Role)>> {
    Ok(load(root)?
        .certificates
        .into_iter()
        .find(|c| c.fingerprint == fingerprint)
        .map(|c| (c.name, c.role)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_used_once_and_expires() {
        let d = tempfile::tempdir().unwrap();
        let s = new_token(d.path(), "laptop", Role::ReadOnly, 60).unwrap();
        let raw = std::fs::read_to_string(store_path(d.path())).unwrap();
        assert!(!raw.contains(&s), "the secret is stored hashed");
        let c = redeem(d.path(), &s, "ab").unwrap().unwrap();
        assert_eq!((c.name.as_str(), c.role), ("laptop", Role::ReadOnly));
        assert_eq!(
            redeem(d.path(), &s, "cd").unwrap(),
            Err(TokenError::Unknown)
        );
        assert_eq!(
            role_of(d.path(), "ab").unwrap(),
            Some(("laptop".into(), Role::ReadOnly))
        );
        let old = new_token(d.path(), "old", Role::ReadWrite, 0).unwrap();
        assert_eq!(
            redeem(d.path(), &old, "ef").unwrap(),
            Err(TokenError::Expired("old".into()))
        );
        assert_eq!(role_of(d.path(), "ef").unwrap(), None);
        assert_eq!(revoke(d.path(), "nobody").unwrap(), vec![]);
        assert_eq!(revoke(d.path(), "laptop").unwrap()[0].fingerprint, "ab");
        assert_eq!(role_of(d.path(), "ab").unwrap(), None);
    }
}
