//! Hand-made OCI image layouts: layers from raw tar entries (names the tar crate's
//! builder would refuse included), compressed or not, with their digests computed
//! here, so a test can then damage one part (a blob, a digest, a diff_id).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};
use tar::EntryType;

/// One raw tar entry: name, type, link name, data, mode.
pub type Entry<'a> = (&'a str, EntryType, &'a str, &'a [u8], u32);

pub fn file(name: &str, data: &'static [u8]) -> Entry<'static> {
    (leak(name), EntryType::Regular, "", data, 0o644)
}

pub fn dir(name: &str) -> Entry<'static> {
    (leak(name), EntryType::Directory, "", b"", 0o755)
}

pub fn link(name: &str, kind: EntryType, to: &str) -> Entry<'static> {
    (leak(name), kind, leak(to), b"", 0o777)
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// A tar of raw entries (a name longer than 100 bytes is not needed here).
pub fn tar_of(entries: &[Entry<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, link, data, mode) in entries {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(*kind);
        h.set_size(data.len() as u64);
        h.set_mode(*mode);
        h.set_mtime(1_700_000_000);
        h.set_uid(0);
        h.set_gid(0);
        if matches!(kind, EntryType::Char | EntryType::Block) {
            h.set_device_major(1).unwrap();
            h.set_device_minor(3).unwrap();
        }
        let old = h.as_old_mut();
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Comp {
    None,
    Gzip,
    Zstd,
}

pub fn sha(data: &[u8]) -> String {
    let h = Sha256::digest(data);
    format!(
        "sha256:{}",
        h.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

fn compress(data: &[u8], c: Comp) -> Vec<u8> {
    match c {
        Comp::None => data.to_vec(),
        Comp::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Comp::Zstd => {
            let mut child = Command::new("zstd")
                .args(["-q", "-c", "-"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("zstd is needed to make a zstd layer (apt-get install zstd; scripts/test.sh does): {e}")
                });
            let mut stdin = child.stdin.take().unwrap();
            let input = data.to_vec();
            let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
            let out = child.wait_with_output().unwrap();
            writer.join().unwrap();
            assert!(out.status.success(), "zstd failed");
            out.stdout
        }
    }
}

/// A written layout, with what a test may damage.
pub struct Layout {
    pub dir: PathBuf,
    /// The layers' blob digests, in order.
    pub layers: Vec<String>,
    pub manifest: String,
}

impl Layout {
    pub fn blob(&self, digest: &str) -> PathBuf {
        self.dir
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:"))
    }

    /// The layout as an uncompressed tar beside it (`<dir>.tar`), as podman writes.
    pub fn to_tar(&self) -> PathBuf {
        let out = self.dir.with_extension("tar");
        let mut b = tar::Builder::new(fs::File::create(&out).unwrap());
        b.append_dir_all(".", &self.dir).unwrap();
        b.finish().unwrap();
        out
    }
}

/// Knobs for [`write`].
#[derive(Default)]
pub struct Opts {
    /// Replace the config's diff_ids.
    pub diff_ids: Option<Vec<String>>,
    /// The image config's `config` object.
    pub run: Option<serde_json::Value>,
    /// ref.name annotations: one image per name (all with the same layers).
    pub refs: Vec<String>,
}

fn put(dir: &Path, data: &[u8]) -> String {
    let d = sha(data);
    fs::write(dir.join(d.trim_start_matches("sha256:")), data).unwrap();
    d
}

/// Write an OCI image layout of `layers` to `dir`.
pub fn write(dir: &Path, layers: &[(Vec<u8>, Comp)], opts: Opts) -> Layout {
    let blobs = dir.join("blobs/sha256");
    fs::create_dir_all(&blobs).unwrap();
    fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let mut descs = Vec::new();
    let mut diff_ids = Vec::new();
    let mut digests = Vec::new();
    for (tar, c) in layers {
        let blob = compress(tar, *c);
        let d = put(&blobs, &blob);
        let media = match c {
            Comp::None => "application/vnd.oci.image.layer.v1.tar",
            Comp::Gzip => "application/vnd.oci.image.layer.v1.tar+gzip",
            Comp::Zstd => "application/vnd.oci.image.layer.v1.tar+zstd",
        };
        descs.push(serde_json::json!({"mediaType": media, "digest": d, "size": blob.len()}));
        diff_ids.push(sha(tar));
        digests.push(d);
    }
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": opts.run.unwrap_or(serde_json::json!({})),
        "rootfs": {"type": "layers", "diff_ids": opts.diff_ids.unwrap_or(diff_ids)},
    });
    let config = serde_json::to_vec(&config).unwrap();
    let cd = put(&blobs, &config);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": config.len()},
        "layers": descs,
    }))
    .unwrap();
    let md = put(&blobs, &manifest);
    let refs = if opts.refs.is_empty() {
        vec![None]
    } else {
        opts.refs.iter().map(Some).collect()
    };
    let manifests: Vec<_> = refs
        .iter()
        .map(|r| {
            let mut m = serde_json::json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": md, "size": manifest.len(),
            });
            if let Some(r) = r {
                m["annotations"] = serde_json::json!({"org.opencontainers.image.ref.name": r});
            }
            m
        })
        .collect();
    let index = serde_json::json!({"schemaVersion": 2, "manifests": manifests});
    fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    Layout {
        dir: dir.to_path_buf(),
        layers: digests,
        manifest: md,
    }
}
