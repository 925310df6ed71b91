//! Image archives on disk as a [`BlobStore`]: an OCI image layout (directory or
//! tar) or a docker-archive, and the choice of one image in it (`--image`, a platform
//! from an index). Blobs of a tar are read in place (`pread` at the offsets indexed
//! once); blobs of a directory are opened beneath it, never through a symlink.
//! Verification is not here but in [`super::oci_image`], which reads every blob.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use warren_sys::libc;
use warren_sys::tree;

use super::layer;
use super::oci_image::{
    digest_hex, read_verified, BlobStore, Descriptor, ImageError, ImageManifest, MAX_JSON,
};

/// The files of an archive: a directory, or the regular entries of a tar by name.
enum Files {
    Dir(std::os::fd::OwnedFd),
    Tar {
        file: File,
        at: HashMap<String, (u64, u64)>,
    },
}

impl Files {
    fn open(path: &Path) -> io::Result<Files> {
        let meta = std::fs::metadata(path)?;
        if meta.is_dir() {
            return Ok(Files::Dir(tree::open_dir(path)?));
        }
        let file = File::open(path)?;
        let mut at = HashMap::new();
        let mut archive = tar::Archive::new(&file);
        for entry in archive.entries_with_seek()? {
            let entry = entry?;
            if !matches!(
                entry.header().entry_type(),
                tar::EntryType::Regular | tar::EntryType::Continuous
            ) {
                continue;
            }
            let p = entry.path()?;
            if let Some(names) = layer::plain(&p) {
                let key: PathBuf = names.iter().collect();
                let size = entry.header().entry_size()?;
                at.insert(
                    key.to_string_lossy().into_owned(),
                    (entry.raw_file_position(), size),
                );
            }
        }
        // Every blob must lie within the file: a truncated archive is refused here.
        let len = file.metadata()?.len();
        if let Some((name, _)) = at.iter().find(|(_, (o, s))| o + s > len) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{name} is cut short (the archive is truncated)"),
            ));
        }
        Ok(Files::Tar { file, at })
    }

    fn has(&self, name: &str) -> bool {
        match self {
            Files::Dir(d) => tree::open_beneath(d.as_fd(), Path::new(name), libc::O_PATH).is_ok(),
            Files::Tar { at, .. } => at.contains_key(name),
        }
    }

    fn read(&self, name: &str) -> io::Result<Box<dyn Read + '_>> {
        match self {
            Files::Dir(d) => {
                let fd = tree::open_beneath(d.as_fd(), Path::new(name), libc::O_RDONLY)?;
                Ok(Box::new(File::from(fd)))
            }
            Files::Tar { file, at } => {
                let &(off, size) = at.get(name).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("{name}: not in the archive"),
                    )
                })?;
                Ok(Box::new(Slice {
                    file,
                    off,
                    end: off + size,
                }))
            }
        }
    }

    fn json<T: serde::de::DeserializeOwned>(&self, name: &str) -> io::Result<T> {
        let mut text = Vec::new();
        self.read(name)?.take(MAX_JSON + 1).read_to_end(&mut text)?;
        if text.len() as u64 > MAX_JSON {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name} is over 4 MiB"),
            ));
        }
        serde_json::from_slice(&text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{name}: {e}")))
    }
}

/// A range of the archive file, read with `pread`.
struct Slice<'a> {
    file: &'a File,
    off: u64,
    end: u64,
}

impl Read for Slice<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (self.end - self.off).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.off)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the archive is truncated",
            ));
        }
        self.off += n as u64;
        Ok(n)
    }
}

/// An archive opened as a blob store.
pub struct Archive {
    path: PathBuf,
    files: Files,
}

impl BlobStore for Archive {
    fn name(&self) -> String {
        self.path.display().to_string()
    }
    fn open(&self, desc: &Descriptor) -> io::Result<Box<dyn Read + '_>> {
        if let Some(p) = &desc.path {
            return self.files.read(p);
        }
        let d = desc.digest.as_deref().unwrap_or_default();
        let hex = digest_hex(d).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("digest {d:?} is not sha256:<64 hex digits>"),
            )
        })?;
        self.files.read(&format!("blobs/sha256/{hex}"))
    }
}

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    manifests: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Manifest {
    config: Descriptor,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DockerEntry {
    config: String,
    #[serde(default)]
    repo_tags: Vec<String>,
    layers: Vec<String>,
}

const INDEX_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// `name` without a default registry prefix, with `:latest` if it has no tag.
fn normal(name: &str) -> String {
    let n = ["localhost/", "docker.io/library/", "docker.io/"]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name);
    let last = n.rsplit('/').next().unwrap_or(n);
    if last.contains(':') || n.contains('@') {
        n.to_string()
    } else {
        format!("{n}:latest")
    }
}

/// Whether `wanted` (`--image`) names `name` (a ref.name annotation or a RepoTag). An
/// OCI ref.name is often the tag alone (`latest`).
fn names(wanted: &str, name: &str) -> bool {
    wanted == name
        || normal(wanted) == normal(name)
        || wanted.rsplit(':').next() == Some(name) && !name.contains(['/', ':'])
}

impl Archive {
    pub fn open(path: &Path) -> Result<Archive, ImageError> {
        let files = Files::open(path).map_err(|e| ImageError::Io {
            archive: path.display().to_string(),
            what: "reading the archive (a directory, or an uncompressed tar as podman save or skopeo write)".into(),
            source: e,
        })?;
        Ok(Archive {
            path: path.to_path_buf(),
            files,
        })
    }

    pub(super) fn format_err(&self, message: impl Into<String>) -> ImageError {
        ImageError::Format {
            archive: self.name(),
            message: message.into(),
        }
    }

    pub(super) fn io_err(&self, what: impl Into<String>, e: io::Error) -> ImageError {
        ImageError::Io {
            archive: self.name(),
            what: what.into(),
            source: e,
        }
    }

    /// The manifest of the image `image` names (or the only one), linux/amd64 from an
    /// index of platforms.
    pub fn manifest(&self, image: Option<&str>) -> Result<ImageManifest, ImageError> {
        if self.files.has("index.json") {
            self.oci_manifest(image)
        } else if self.files.has("manifest.json") {
            self.docker_manifest(image)
        } else {
            Err(self.format_err(
                "neither index.json (an OCI image layout) nor manifest.json (a docker-archive) is in it; make one with 'podman save --format oci-archive -o FILE IMAGE' or 'skopeo copy containers-storage:IMAGE oci-archive:FILE'",
            ))
        }
    }

    fn choose<'d>(
        &self,
        items: &'d [Descriptor],
        tags: impl Fn(&Descriptor) -> Vec<String>,
        image: Option<&str>,
    ) -> Result<&'d Descriptor, ImageError> {
        let all: Vec<String> = items.iter().flat_map(&tags).collect();
        let listed = if all.is_empty() {
            "none are named".to_string()
        } else {
            all.join(", ")
        };
        match image {
            Some(want) => {
                let hits: Vec<_> = items
                    .iter()
                    .filter(|d| tags(d).iter().any(|t| names(want, t)))
                    .collect();
                match hits.as_slice() {
                    [one] => Ok(one),
                    [] => Err(self.format_err(format!(
                        "--image {want}: no image of that name; it holds: {listed}"
                    ))),
                    _ => Err(self.format_err(format!(
                        "--image {want}: names {} images; give the full name (it holds: {listed})",
                        hits.len()
                    ))),
                }
            }
            None => match items {
                [one] => Ok(one),
                [] => Err(self.format_err("it holds no image")),
                _ => Err(self.format_err(format!(
                    "it holds {} images; choose one with --image NAME ({listed})",
                    items.len()
                ))),
            },
        }
    }

    fn oci_manifest(&self, image: Option<&str>) -> Result<ImageManifest, ImageError> {
        let index: Index = self
            .files
            .json("index.json")
            .map_err(|e| self.io_err("index.json", e))?;
        let tag = |d: &Descriptor| d.annotations.get(REF_NAME).cloned().into_iter().collect();
        let mut desc = self.choose(&index.manifests, tag, image)?.clone();
        let reference = desc
            .annotations
            .get(REF_NAME)
            .cloned()
            .or(image.map(str::to_string));
        // A nested index (a multi-platform image): linux/amd64.
        for _ in 0..4 {
            if !INDEX_TYPES.contains(&desc.media_type.as_str()) {
                break;
            }
            let inner: Index = serde_json::from_slice(&self.blob(&desc, "image index")?)
                .map_err(|e| self.format_err(format!("image index: {e}")))?;
            desc = inner
                .manifests
                .into_iter()
                .find(|m| m.platform.as_ref().is_none_or(|p| p.os == "linux" && p.architecture == "amd64"))
                .ok_or_else(|| self.format_err("its index has no linux/amd64 image; this host runs linux/amd64 images only"))?;
        }
        let bytes = self.blob(&desc, "manifest")?;
        let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
            self.format_err(format!(
                "manifest {}: {e}",
                desc.digest.clone().unwrap_or_default()
            ))
        })?;
        Ok(ImageManifest {
            config: m.config,
            layers: m.layers,
            reference,
            digest: desc.digest,
            format: "oci",
        })
    }

    fn docker_manifest(&self, image: Option<&str>) -> Result<ImageManifest, ImageError> {
        let entries: Vec<DockerEntry> = self
            .files
            .json("manifest.json")
            .map_err(|e| self.io_err("manifest.json", e))?;
        let descs: Vec<Descriptor> = (0..entries.len())
            .map(|i| Descriptor {
                size: Some(i as u64),
                ..Default::default()
            })
            .collect();
        let tag = |d: &Descriptor| entries[d.size.unwrap_or(0) as usize].repo_tags.clone();
        let i = self.choose(&descs, tag, image)?.size.unwrap_or(0) as usize;
        let e = &entries[i];
        let file = |p: &str, kind: &str| -> Result<Descriptor, ImageError> {
            let names = layer::plain(Path::new(p)).filter(|n| !n.is_empty()).ok_or_else(|| {
                self.format_err(format!("manifest.json names {kind} {p:?}, which is not a plain name inside the archive"))
            })?;
            let path: PathBuf = names.iter().collect();
            Ok(Descriptor {
                path: Some(path.to_string_lossy().into_owned()),
                ..Default::default()
            })
        };
        let mut config = file(&e.config, "the config")?;
        // podman and docker name the config by its digest: verify it when they do.
        let stem = Path::new(&e.config)
            .file_stem()
            .map(|s| format!("sha256:{}", s.to_string_lossy()));
        config.digest = stem.filter(|d| digest_hex(d).is_some());
        Ok(ImageManifest {
            config,
            layers: e
                .layers
                .iter()
                .map(|l| file(l, "a layer"))
                .collect::<Result<_, _>>()?,
            reference: e.repo_tags.first().cloned().or(image.map(str::to_string)),
            digest: None,
            format: "docker-archive",
        })
    }

    /// A small blob, verified.
    fn blob(&self, desc: &Descriptor, what: &str) -> Result<Vec<u8>, ImageError> {
        read_verified(self, desc, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names() {
        assert!(names("bb", "localhost/bb:latest"));
        assert!(names("localhost/bb:1", "bb:1"));
        assert!(names("bb:latest", "latest"));
        assert!(!names("bb:2", "localhost/bb:1"));
    }
}
