//! The images a CRI run needs, built here from the host's static busybox (no registry):
//! one OCI image archive (an image layout in a tar, for `ctr images import`) holding a
//! busybox image, a pause image and a broken image whose config has no command. The
//! pause image is the same one-layer busybox root whose entrypoint is `busybox sleep
//! 2147483647`: a sandbox's init only has to hold the pod's namespaces, and containerd
//! stops it with SIGKILL.

use std::path::{Path, PathBuf};

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::bench::system::Failure;

/// The busybox image's name.
pub const BUSYBOX: &str = "localhost/warren-cri-busybox:test";
/// The pause image's name (the CRI plugin's `sandbox_image`).
pub const PAUSE: &str = "localhost/warren-cri-pause:test";
/// A broken image: the busybox layer, but a config with neither Entrypoint nor Cmd.
pub const NO_COMMAND: &str = "localhost/warren-cri-nocmd:test";

/// Applets linked in the busybox root.
const APPLETS: &[&str] = &[
    "sh", "echo", "cat", "sleep", "id", "true", "grep", "tty", "head", "dd", "kill", "ls", "ip",
    "mkdir", "tail", "env",
];

fn digest(data: &[u8]) -> String {
    let d = Sha256::digest(data);
    format!(
        "sha256:{}",
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// The uncompressed layer: /bin/busybox, its applets, the usual empty directories.
fn layer(busybox: &Path) -> Result<Vec<u8>, Failure> {
    let body = std::fs::read(busybox).map_err(Failure::io(busybox))?;
    let mut b = tar::Builder::new(Vec::new());
    let io = |e: std::io::Error| Failure::Failed(format!("building the image layer: {e}"));
    let dir = |name: &str, b: &mut tar::Builder<Vec<u8>>| {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        b.append_data(&mut h, name, std::io::empty())
    };
    for d in ["bin", "proc", "dev", "sys", "tmp", "etc", "run"] {
        dir(d, &mut b).map_err(io)?;
    }
    let mut h = tar::Header::new_ustar();
    h.set_mode(0o755);
    h.set_size(body.len() as u64);
    b.append_data(&mut h, "bin/busybox", body.as_slice())
        .map_err(io)?;
    for a in APPLETS {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_mode(0o777);
        h.set_size(0);
        b.append_link(&mut h, format!("bin/{a}"), "busybox")
            .map_err(io)?;
    }
    b.into_inner().map_err(io)
}

/// Writes `<dir>/cri-images.tar` (the three images) and returns its path.
pub fn build(dir: &Path) -> Result<PathBuf, Failure> {
    let busybox = crate::storage::template::find_static_busybox()?;
    let layer = layer(&busybox)?;
    let layer_digest = digest(&layer);
    let mut blobs: Vec<(String, Vec<u8>)> = vec![(layer_digest.clone(), layer.clone())];
    let mut manifests = Vec::new();
    for (name, entry, cmd) in [
        (BUSYBOX, json!(null), json!(["sh"])),
        (
            PAUSE,
            json!(["/bin/busybox", "sleep", "2147483647"]),
            json!(null),
        ),
        (NO_COMMAND, json!(null), json!(null)),
    ] {
        let config = json!({"architecture": "amd64", "os": "linux",
            "config": {"Entrypoint": entry, "Cmd": cmd, "Env": ["PATH=/bin"]},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]}})
        .to_string()
        .into_bytes();
        let config_digest = digest(&config);
        let manifest = json!({"schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest, "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": layer_digest, "size": layer.len()}]})
        .to_string()
        .into_bytes();
        let manifest_digest = digest(&manifest);
        manifests.push(
            json!({"mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest, "size": manifest.len(),
            "annotations": {"io.containerd.image.name": name},
            "platform": {"architecture": "amd64", "os": "linux"}}),
        );
        blobs.push((config_digest, config));
        blobs.push((manifest_digest, manifest));
    }
    let index = json!({"schemaVersion": 2, "manifests": manifests}).to_string();
    let path = dir.join("cri-images.tar");
    let file = std::fs::File::create(&path).map_err(Failure::io(&path))?;
    let mut t = tar::Builder::new(file);
    let mut add = |name: &str, data: &[u8]| {
        let mut h = tar::Header::new_ustar();
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        t.append_data(&mut h, name, data)
            .map_err(|e| Failure::Failed(format!("{}: {e}", path.display())))
    };
    add("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    add("index.json", index.as_bytes())?;
    for (d, data) in &blobs {
        add(&format!("blobs/sha256/{}", &d["sha256:".len()..]), data)?;
    }
    t.into_inner()
        .map_err(|e| Failure::Failed(format!("{}: {e}", path.display())))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_names_every_image_and_holds_every_blob() {
        let dir = std::env::temp_dir().join(format!("warren-cri-image-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tar_path = build(&dir).unwrap();
        let mut a = tar::Archive::new(std::fs::File::open(&tar_path).unwrap());
        let mut names = Vec::new();
        let mut index = String::new();
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            let p = e.path().unwrap().to_string_lossy().into_owned();
            if p == "index.json" {
                std::io::Read::read_to_string(&mut e, &mut index).unwrap();
            }
            names.push(p);
        }
        std::fs::remove_dir_all(&dir).unwrap();
        let index: serde_json::Value = serde_json::from_str(&index).unwrap();
        let refs: Vec<&str> = index["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                m["annotations"]["io.containerd.image.name"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(refs, [BUSYBOX, PAUSE, NO_COMMAND]);
        for m in index["manifests"].as_array().unwrap() {
            let d = m["digest"]
                .as_str()
                .unwrap()
                .replace("sha256:", "blobs/sha256/");
            assert!(names.contains(&d), "{d} not in {names:?}");
        }
    }
}
