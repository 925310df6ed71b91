//! OCI images as templates (`warren template create NAME --from-oci ARCHIVE`).
//!
//! Two archive formats are read, as a directory or an uncompressed tar: an **OCI
//! image layout** (`oci-layout`, `index.json`, `blobs/sha256/…`; `skopeo copy …
//! oci-archive:`, `podman save --format oci-archive`) and a **docker-archive**
//! (`manifest.json`, layer tars and the config; `podman save`, `docker save`). Either
//! becomes a [`BlobStore`] and an [`ImageManifest`]; [`unpack`] is the one path from
//! those to a root and the image's config, the path a registry pull would feed (a
//! registry is one more `BlobStore`).
//!
//! Verification: every blob read through a descriptor is hashed as it streams and its
//! sha256 and size compared with the descriptor's at its end; each layer's
//! uncompressed stream is hashed too and compared with the config's `rootfs.diff_ids`.
//! The root is a temporary directory of `template::create`, so a mismatch found after
//! a layer was applied discards it all (docs/images.md).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::rc::Rc;

use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use warren_sys::tree;

use super::image_config::{ImageConfigFile, ImageMeta};
use super::layer::{self, Applied, Rules};
use super::oci_archive::Archive;

/// Why an image was refused; each message names the archive, the blob or layer, and
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("--from-oci {archive}: {message}")]
    Format { archive: String, message: String },
    #[error("--from-oci {archive}: {what} {digest}: {message}; the archive is damaged or was altered: save or copy the image again")]
    Verify {
        archive: String,
        what: String,
        digest: String,
        message: String,
    },
    #[error("--from-oci {archive}: {what}")]
    Io {
        archive: String,
        what: String,
        #[source]
        source: io::Error,
    },
}

/// The JSON documents of an image are small; a bigger one is refused.
pub(super) const MAX_JSON: u64 = 4 << 20;

/// A content descriptor (OCI image-spec `descriptor.md`).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    /// `None` where the format gives none (docker-archive layers are checked by their
    /// diff_ids instead).
    pub digest: Option<String>,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub annotations: HashMap<String, String>,
    #[serde(default)]
    pub platform: Option<Platform>,
    /// docker-archive only: the blob's file in the archive.
    #[serde(skip)]
    pub path: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct Platform {
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub architecture: String,
}

/// An image manifest: its config and layers, how it was named, its digest.
#[derive(Debug, Clone)]
pub struct ImageManifest {
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    pub reference: Option<String>,
    /// The manifest's own digest (OCI), `None` for a docker-archive.
    pub digest: Option<String>,
    pub format: &'static str,
}

/// Where blobs come from: an archive on disk here, a registry later.
pub trait BlobStore {
    /// What the store is, for messages (the archive's path).
    fn name(&self) -> String;
    /// The raw bytes of the blob `desc` names (unverified: [`unpack`] verifies).
    fn open(&self, desc: &Descriptor) -> io::Result<Box<dyn Read + '_>>;
}

/// `sha256:<64 hex>`, the only digest algorithm accepted; returns the hex part.
pub fn digest_hex(d: &str) -> Option<&str> {
    let hex = d.strip_prefix("sha256:")?;
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(hex)
}

/// A sha256 and a byte count of what passed through a reader.
#[derive(Default)]
struct Tally {
    hash: Sha256,
    n: u64,
}

struct Tap<R> {
    inner: R,
    tally: Rc<RefCell<Tally>>,
}

impl<R: Read> Read for Tap<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut t = self.tally.borrow_mut();
        t.hash.update(&buf[..n]);
        t.n += n as u64;
        Ok(n)
    }
}

fn tap<R: Read>(inner: R) -> (Tap<R>, Rc<RefCell<Tally>>) {
    let tally = Rc::new(RefCell::new(Tally::default()));
    (
        Tap {
            inner,
            tally: tally.clone(),
        },
        tally,
    )
}

fn hex(t: &Rc<RefCell<Tally>>) -> String {
    let hash = std::mem::take(&mut t.borrow_mut().hash).finalize();
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compare what passed with the descriptor's digest and size.
fn check(
    store: &dyn BlobStore,
    desc: &Descriptor,
    what: &str,
    t: &Rc<RefCell<Tally>>,
) -> Result<(), ImageError> {
    let n = t.borrow().n;
    let got = format!("sha256:{}", hex(t));
    let err = |message: String| ImageError::Verify {
        archive: store.name(),
        what: what.to_string(),
        digest: desc.digest.clone().unwrap_or_else(|| got.clone()),
        message,
    };
    if let Some(size) = desc.size.filter(|_| desc.path.is_none()) {
        if size != n {
            return Err(err(format!(
                "the descriptor says {size} bytes, the blob has {n}"
            )));
        }
    }
    match &desc.digest {
        Some(d) if *d != got => Err(err(format!("its content hashes to {got}"))),
        _ => Ok(()),
    }
}

pub(super) fn read_verified(
    store: &dyn BlobStore,
    desc: &Descriptor,
    what: &str,
) -> Result<Vec<u8>, ImageError> {
    let io_err = |e: io::Error| ImageError::Io {
        archive: store.name(),
        what: format!(
            "{what} {}",
            desc.digest
                .clone()
                .or(desc.path.clone())
                .unwrap_or_default()
        ),
        source: e,
    };
    let (mut r, t) = tap(store.open(desc).map_err(io_err)?);
    let mut out = Vec::new();
    (&mut r)
        .take(MAX_JSON + 1)
        .read_to_end(&mut out)
        .map_err(io_err)?;
    if out.len() as u64 > MAX_JSON {
        return Err(io_err(io::Error::new(
            io::ErrorKind::InvalidData,
            "over 4 MiB",
        )));
    }
    check(store, desc, what, &t)?;
    Ok(out)
}

/// Hash the whole blob `desc` names against its descriptor.
fn verify_whole(store: &dyn BlobStore, desc: &Descriptor, what: &str) -> Result<(), ImageError> {
    let (mut r, t) = tap(store.open(desc).map_err(|e| ImageError::Io {
        archive: store.name(),
        what: what.to_string(),
        source: e,
    })?);
    if io::copy(&mut r, &mut io::sink()).is_err() {
        return Ok(()); // unreadable: the first error says so
    }
    check(store, desc, what, &t)
}

/// Apply `manifest`'s layers from `store` in order into the directory held by `root`,
/// verifying every blob and diff_id; returns the image's config and what was made.
pub fn unpack(
    store: &dyn BlobStore,
    manifest: &ImageManifest,
    root: BorrowedFd<'_>,
) -> Result<(ImageConfigFile, Applied), ImageError> {
    let bytes = read_verified(store, &manifest.config, "config")?;
    let config: ImageConfigFile =
        serde_json::from_slice(&bytes).map_err(|e| ImageError::Format {
            archive: store.name(),
            message: format!("the image config is not valid: {e}"),
        })?;
    let os_ok = matches!(config.os.as_str(), "" | "linux");
    if !os_ok || !matches!(config.architecture.as_str(), "" | "amd64") {
        return Err(ImageError::Format {
            archive: store.name(),
            message: format!(
                "the image is for {}/{}; this host runs linux/amd64 images",
                config.os, config.architecture
            ),
        });
    }
    let diff_ids = &config.rootfs.diff_ids;
    if diff_ids.len() != manifest.layers.len() {
        return Err(ImageError::Format {
            archive: store.name(),
            message: format!(
                "the manifest has {} layers but the config's rootfs.diff_ids has {}: the image is inconsistent",
                manifest.layers.len(),
                diff_ids.len()
            ),
        });
    }
    let mut total = Applied::default();
    let rules = Rules {
        whiteouts: true,
        keep_devices: false,
    };
    for (i, (desc, diff_id)) in manifest.layers.iter().zip(diff_ids).enumerate() {
        let what = format!("layer {} of {}", i + 1, manifest.layers.len());
        let named = format!(
            "{what} ({})",
            desc.digest
                .clone()
                .or(desc.path.clone())
                .unwrap_or_default()
        );
        let io_err = |e: io::Error| ImageError::Io {
            archive: store.name(),
            what: named.clone(),
            source: e,
        };
        let (raw, blob) = tap(store.open(desc).map_err(io_err)?);
        let (tar, diff) = tap(layer::decompress(&desc.media_type, raw).map_err(io_err)?);
        let n = match layer::apply(root, tar, rules) {
            Ok(n) => n,
            // A blob that is not what its descriptor says is the cause to report,
            // whatever it broke first (a gzip header, a tar header).
            Err(e) => return Err(verify_whole(store, desc, &what).err().unwrap_or(io_err(e))),
        };
        total.add(&n);
        check(store, desc, &what, &blob)?;
        let got = format!("sha256:{}", hex(&diff));
        if *diff_id != got {
            return Err(ImageError::Verify {
                archive: store.name(),
                what: format!("{what}'s uncompressed content (diff_id)"),
                digest: diff_id.clone(),
                message: format!("it hashes to {got}"),
            });
        }
    }
    Ok((config, total))
}

/// Read `archive`, choose `image`, unpack it into `root` (a fresh directory) and
/// resolve its config against the result: what `template create --from-oci` does.
pub fn import(
    archive: &Path,
    image: Option<&str>,
    root: &Path,
) -> Result<(ImageMeta, Applied), ImageError> {
    let a = Archive::open(archive)?;
    let manifest = a.manifest(image)?;
    let fd =
        tree::open_dir(root).map_err(|e| a.io_err(format!("opening {}", root.display()), e))?;
    let (config, applied) = unpack(&a, &manifest, fd.as_fd())?;
    let meta = ImageMeta::resolve(&manifest, &config, fd.as_fd())
        .map_err(|message| a.format_err(message))?;
    Ok((meta, applied))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_and_names() {
        let h = "a".repeat(64);
        assert_eq!(digest_hex(&format!("sha256:{h}")), Some(h.as_str()));
        assert!(digest_hex("sha256:../../etc/passwd").is_none());
        assert!(digest_hex(&format!("sha512:{h}")).is_none());
    }
}
