//! Templates: the read-only roots zones are made from.
//!
//! - `host`: a sparse root. The host's /usr (and /bin, /lib, /lib64, /sbin, as links or
//!   read-only binds, whichever the host has) is bind-mounted read-only at boot, so
//!   program text is on disk and in the page cache once for every zone. The template
//!   itself holds only a small /etc and empty directories: tens of KiB, no download.
//! - `busybox`: a root of the static busybox binary and its applet links.
//! - `dir` / `tar`: any root filesystem, copied (reflinked where possible) or unpacked.
//! - `oci`: an OCI image layout or docker-archive, its layers applied in order
//!   (`oci_image`); its config becomes the defaults of its zones (`image_config`).
//!
//! A template is built in a temporary directory and renamed into place, so it either
//! exists whole or not at all.

use std::fs;
use std::io::Read;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::fsutil::{atomic_write, copy_tree, mkdir_mode, remove_tree, sync_dir, unique_suffix};
use crate::layout::Layout;
use crate::storage::image_config::ImageMeta;
use crate::storage::{backend, BackendKind};
use crate::{lock, names};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TemplateKind {
    Host,
    Busybox,
    Dir,
    Tar,
    Oci,
}

/// A host directory bind-mounted into every zone made from the template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    pub source: PathBuf,
    /// Relative to the zone's root.
    pub target: String,
    pub readonly: bool,
}

/// `templates/<name>/template.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub name: String,
    pub kind: TemplateKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub backend: BackendKind,
    pub created_ms: u64,
    #[serde(default)]
    pub binds: Vec<Bind>,
    /// `oci`: the image and the zone defaults its config gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageMeta>,
}

/// Where a new template comes from.
#[derive(Debug, Clone)]
pub enum Source {
    Host,
    Busybox,
    Dir(PathBuf),
    Tar(PathBuf),
    /// An OCI image layout or docker-archive (directory or tar), and `--image`.
    Oci {
        archive: PathBuf,
        image: Option<String>,
    },
}

pub fn root_of(layout: &Layout, name: &str) -> PathBuf {
    layout.template_dir(name).join("root")
}

/// Load a template's manifest.
pub fn load(layout: &Layout, name: &str) -> Result<Manifest> {
    names::template(name)?;
    let path = layout.template_dir(name).join("template.toml");
    let text = match crate::fsutil::read_text_bounded(&path, crate::fsutil::MAX_SMALL_FILE) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NoSuchTemplate(name.into()))
        }
        Err(e) => return Err(e).ctx(|| format!("reading {}", path.display())),
    };
    toml::from_str(&text).map_err(|e| Error::Corrupt {
        path,
        message: e.message().trim().to_string(),
    })
}

/// All templates, sorted by name.
pub fn list(layout: &Layout) -> Result<Vec<Manifest>> {
    let dir = layout.templates();
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).ctx(|| format!("reading {}", dir.display())),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.ctx(|| format!("reading {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if names::problem(&name).is_none() {
            out.push(load(layout, &name)?);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Create template `name` from `source` with `kind` of backend.
pub fn create(layout: &Layout, name: &str, source: &Source, kind: BackendKind) -> Result<Manifest> {
    names::template(name)?;
    // Check the source before touching disk.
    let busybox = match source {
        Source::Busybox => Some(find_static_busybox()?),
        Source::Dir(p) if !p.is_dir() => {
            return Err(Error::Invalid(format!(
                "--from-dir {}: not a directory; give the directory of a root filesystem (with bin, etc, usr ...)",
                p.display()
            )))
        }
        Source::Tar(p) if !p.is_file() => {
            return Err(Error::Invalid(format!(
                "--from-tar {}: {}; give the path of a tar archive of a root filesystem",
                p.display(),
                if p.exists() {
                    "not a regular file"
                } else {
                    "no such file"
                }
            )))
        }
        Source::Oci { archive, .. } if !archive.exists() => {
            return Err(Error::Invalid(format!(
                "--from-oci {}: no such file or directory; give an OCI image layout (directory or tar) or a docker-archive tar, as 'podman save' writes",
                archive.display()
            )))
        }
        _ => None,
    };
    let templates = layout.templates();
    fs::create_dir_all(&templates).ctx(|| format!("creating {}", templates.display()))?;
    fs::create_dir_all(layout.locks()).ctx(|| format!("creating {}", layout.locks().display()))?;
    let _lock = lock::exclusive(layout, "template", name)?;
    let final_dir = layout.template_dir(name);
    if final_dir.exists() {
        return Err(Error::TemplateExists(name.into()));
    }
    let tmp = templates.join(format!(".new-{name}-{}", unique_suffix()));
    let be = backend(kind);
    let result = (|| {
        mkdir_mode(&tmp, 0o755).ctx(|| format!("creating {}", tmp.display()))?;
        let root = tmp.join("root");
        be.new_template_root(&root)?;
        let mut image = None;
        let (tkind, src, binds) = match source {
            Source::Host => (
                TemplateKind::Host,
                None,
                populate_host(&root, Path::new("/"))?,
            ),
            Source::Busybox => {
                let bb = busybox.as_ref().expect("found above");
                populate_busybox(&root, bb)?;
                (
                    TemplateKind::Busybox,
                    Some(bb.display().to_string()),
                    Vec::new(),
                )
            }
            Source::Dir(p) => {
                copy_contents(p, &root)?;
                (TemplateKind::Dir, Some(p.display().to_string()), Vec::new())
            }
            Source::Tar(p) => {
                unpack_tar(p, &root)?;
                (TemplateKind::Tar, Some(p.display().to_string()), Vec::new())
            }
            Source::Oci {
                archive,
                image: want,
            } => {
                let (meta, _) = super::oci_image::import(archive, want.as_deref(), &root)?;
                image = Some(meta);
                let abs = fs::canonicalize(archive).unwrap_or_else(|_| archive.clone());
                let src = abs.display().to_string();
                (TemplateKind::Oci, Some(src), Vec::new())
            }
        };
        ensure_mountpoints(&root)?;
        let manifest = Manifest {
            name: name.to_string(),
            kind: tkind,
            source: src,
            backend: kind,
            created_ms: now_ms(),
            binds,
            image,
        };
        let text = toml::to_string(&manifest).expect("manifest serialises");
        atomic_write(&tmp.join("template.toml"), text.as_bytes(), true)
            .ctx(|| format!("writing {}/template.toml", tmp.display()))?;
        fs::rename(&tmp, &final_dir)
            .ctx(|| format!("renaming {} to {}", tmp.display(), final_dir.display()))?;
        sync_dir(&templates).ctx(|| format!("syncing {}", templates.display()))?;
        Ok(manifest)
    })();
    if result.is_err() && tmp.exists() {
        let cleanup = be
            .remove_template_root(&tmp.join("root"))
            .and_then(|_| remove_tree(&tmp).ctx(|| format!("removing {}", tmp.display())));
        return result.map_err(|e: Error| e.with_cleanup(cleanup.err()));
    }
    result
}

/// Delete template `name`; refused while any zone's config names it. A template whose
/// manifest is missing or damaged is deleted all the same (its root is removed as a
/// btrfs subvolume if it is one, else as a tree), so `template create` can make it again.
pub fn delete(layout: &Layout, name: &str) -> Result<()> {
    names::template(name)?;
    let _lock = lock::exclusive(layout, "template", name)?;
    let manifest = match load(layout, name) {
        Ok(m) => Some(m),
        Err(e @ Error::NoSuchTemplate(_)) if !layout.template_dir(name).is_dir() => return Err(e),
        Err(Error::NoSuchTemplate(_) | Error::Corrupt { .. }) => None,
        Err(e) => return Err(e),
    };
    let users = crate::zone::zones_using_template(layout, name)?;
    if !users.is_empty() {
        return Err(Error::TemplateInUse {
            name: name.into(),
            zones: users.join(", "),
        });
    }
    let dir = layout.template_dir(name);
    let trash = layout
        .templates()
        .join(format!(".del-{name}-{}", unique_suffix()));
    fs::rename(&dir, &trash).ctx(|| format!("renaming {}", dir.display()))?;
    let root = trash.join("root");
    match manifest {
        Some(m) => backend(m.backend).remove_template_root(&root)?,
        None if warren_sys::fs::is_btrfs_subvol(&root) => {
            warren_sys::fs::btrfs_subvol_delete(&root)
                .ctx(|| format!("deleting btrfs subvolume {}", root.display()))?
        }
        None => {}
    }
    remove_tree(&trash).ctx(|| format!("removing {}", trash.display()))
}

/// Directories every root needs as mount points or for basic operation.
const ROOT_DIRS: &[(&str, u32)] = &[
    ("dev", 0o755),
    ("proc", 0o555),
    ("sys", 0o555),
    ("run", 0o755),
    ("tmp", 0o1777),
    ("etc", 0o755),
    ("root", 0o700),
    ("var", 0o755),
    ("var/tmp", 0o1777),
    ("var/log", 0o755),
    ("var/lib", 0o755),
    ("var/cache", 0o755),
    ("var/spool", 0o755),
    ("home", 0o755),
    ("mnt", 0o755),
    ("opt", 0o755),
    ("srv", 0o755),
];

/// Top-level directories of an image that must be real directories: boot mounts on
/// them (`dev`, `proc`, `sys`) or creates directories in them (`var`, `run`, `tmp`).
/// An image where one is a symlink or a file is refused rather than repaired, since
/// its other files may well expect the link (the operator decides).
const MUST_BE_DIRS: &[&str] = &["dev", "proc", "sys", "run", "tmp", "var"];

/// Create the missing [`ROOT_DIRS`], descriptor-relative and never through a symlink;
/// refuse a root whose [`MUST_BE_DIRS`] are not directories.
fn ensure_mountpoints(root: &Path) -> Result<()> {
    use std::ffi::OsStr;
    use std::os::fd::AsFd;
    use warren_sys::tree;
    let top = tree::open_dir(root).ctx(|| format!("opening {}", root.display()))?;
    for name in MUST_BE_DIRS {
        match tree::stat_at(top.as_fd(), OsStr::new(name)) {
            Ok(st) if !st.is_dir() => {
                let what = if st.is_symlink() {
                    "a symlink"
                } else {
                    "not a directory"
                };
                return Err(Error::Invalid(format!(
                    "the image's /{name} is {what}; warren mounts or creates directories there, so /{name} must be a real directory (or absent): fix the image and create the template again"
                )));
            }
            _ => {}
        }
    }
    for (d, mode) in ROOT_DIRS {
        let p = root.join(d);
        // Open the parent beneath the root without symlinks (`var` for `var/tmp`).
        let rel = Path::new(d);
        let parent = match rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(dir) => match tree::open_beneath(
                top.as_fd(),
                dir,
                warren_sys::libc::O_PATH | warren_sys::libc::O_DIRECTORY,
            ) {
                Ok(fd) => fd,
                // A parent that is a symlink (an image's `etc -> ...`) gets nothing.
                Err(_) => continue,
            },
            None => top
                .try_clone()
                .ctx(|| format!("opening {}", root.display()))?,
        };
        let name = rel.file_name().expect("a relative name");
        if tree::stat_at(parent.as_fd(), name).is_ok() {
            continue;
        }
        tree::mkdir_at(parent.as_fd(), name, 0o700)
            .and_then(|()| tree::chmod_at(parent.as_fd(), name, *mode))
            .ctx(|| format!("creating {}", p.display()))?;
    }
    Ok(())
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<()> {
    fs::write(path, text).ctx(|| format!("writing {}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .ctx(|| format!("setting mode of {}", path.display()))
}

fn link(target: &str, at: &Path) -> Result<()> {
    symlink(target, at).ctx(|| format!("creating link {}", at.display()))
}

/// The /etc every warren root gets. `shell` is root's login shell.
fn write_etc(root: &Path, shell: &str) -> Result<()> {
    let etc = root.join("etc");
    if !etc.exists() {
        mkdir_mode(&etc, 0o755).ctx(|| format!("creating {}", etc.display()))?;
    }
    write_file(
        &etc.join("passwd"),
        &format!("root:x:0:0:root:/root:{shell}\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"),
        0o644,
    )?;
    write_file(
        &etc.join("group"),
        "root:x:0:\ntty:x:5:\nnogroup:x:65534:\n",
        0o644,
    )?;
    write_file(
        &etc.join("shadow"),
        "root:*:19000:0:99999:7:::\nnobody:*:19000:0:99999:7:::\n",
        0o640,
    )?;
    write_file(
        &etc.join("hosts"),
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
        0o644,
    )?;
    // The zone's hostname is its UTS name; this link shows it without a per-zone file.
    link("/proc/sys/kernel/hostname", &etc.join("hostname"))?;
    link("../proc/self/mounts", &etc.join("mtab"))?;
    write_file(
        &etc.join("nsswitch.conf"),
        "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n",
        0o644,
    )?;
    write_file(
        &etc.join("profile"),
        "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nPS1='\\u@\\h:\\w\\$ '\n",
        0o644,
    )?;
    let resolv = fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    write_file(&etc.join("resolv.conf"), &resolv, 0o644)?;
    Ok(())
}

/// Build the sparse root of the `host` template from the host at `host_root`.
/// Returns the binds boot must make.
pub fn populate_host(root: &Path, host_root: &Path) -> Result<Vec<Bind>> {
    let mut binds = Vec::new();
    let usr = root.join("usr");
    mkdir_mode(&usr, 0o755).ctx(|| format!("creating {}", usr.display()))?;
    binds.push(Bind {
        source: host_root.join("usr"),
        target: "usr".into(),
        readonly: true,
    });
    // Merged-/usr hosts have these as links into /usr; older ones as directories.
    for d in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let host = host_root.join(d);
        match fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&host).ctx(|| format!("reading {}", host.display()))?;
                symlink(&target, root.join(d)).ctx(|| format!("linking {d}"))?;
            }
            Ok(m) if m.is_dir() => {
                mkdir_mode(&root.join(d), 0o755).ctx(|| format!("creating {d}"))?;
                binds.push(Bind {
                    source: host,
                    target: d.into(),
                    readonly: true,
                });
            }
            _ => {}
        }
    }
    let shell = if host_root.join("bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    write_etc(root, shell)?;
    let etc = root.join("etc");
    // Debian's /usr/bin links through /etc/alternatives; the loader wants ld.so.cache.
    let alternatives = host_root.join("etc/alternatives");
    if alternatives.is_dir() {
        copy_tree(&alternatives, &etc.join("alternatives"))
            .ctx(|| format!("copying {}", alternatives.display()))?;
    }
    for f in [
        "ld.so.cache",
        "ld.so.conf",
        "localtime",
        "os-release",
        "protocols",
        "services",
        "bash.bashrc",
        "inputrc",
    ] {
        let src = host_root.join("etc").join(f);
        if fs::symlink_metadata(&src).is_ok() {
            copy_tree(&src, &etc.join(f)).ctx(|| format!("copying {}", src.display()))?;
        }
    }
    Ok(binds)
}

/// Find a statically linked busybox, or say how to get one.
pub fn find_static_busybox() -> Result<PathBuf> {
    for p in ["/bin/busybox", "/usr/bin/busybox", "/usr/local/bin/busybox"] {
        let p = PathBuf::from(p);
        if p.is_file() && is_static_elf(&p).unwrap_or(false) {
            return Ok(p);
        }
    }
    Err(Error::Unsupported(
        "no statically linked busybox found (looked in /bin, /usr/bin, /usr/local/bin); install it with: apt-get install busybox-static".into(),
    ))
}

/// Whether an ELF file has no program interpreter (PT_INTERP), i.e. is static.
pub fn is_static_elf(path: &Path) -> std::io::Result<bool> {
    let mut f = fs::File::open(path)?;
    let mut buf = Vec::new();
    f.by_ref().take(64 * 1024).read_to_end(&mut buf)?;
    if buf.len() < 64 || &buf[..4] != b"\x7fELF" || buf[4] != 2 || buf[5] != 1 {
        return Ok(false); // only 64-bit little-endian ELF is recognised
    }
    let u16_at = |o: usize| u16::from_le_bytes([buf[o], buf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(buf[32..40].try_into().expect("8 bytes")) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    for i in 0..phnum {
        let off = phoff + i * phentsize;
        if off + 4 > buf.len() {
            return Ok(false);
        }
        if u32::from_le_bytes(buf[off..off + 4].try_into().expect("4 bytes")) == 3 {
            return Ok(false);
        }
    }
    Ok(true)
}

fn populate_busybox(root: &Path, busybox: &Path) -> Result<()> {
    let bin = root.join("bin");
    mkdir_mode(&bin, 0o755).ctx(|| format!("creating {}", bin.display()))?;
    let dst = bin.join("busybox");
    copy_tree(busybox, &dst).ctx(|| format!("copying {}", busybox.display()))?;
    let out = std::process::Command::new(busybox)
        .arg("--list-full")
        .output()
        .ctx(|| format!("running {} --list-full", busybox.display()))?;
    let list = String::from_utf8_lossy(&out.stdout);
    for applet in list.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if applet.contains("..") || applet.starts_with('/') || applet == "bin/busybox" {
            continue;
        }
        let at = root.join(applet);
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent).ctx(|| format!("creating {}", parent.display()))?;
        }
        if fs::symlink_metadata(&at).is_err() {
            link("/bin/busybox", &at)?;
        }
    }
    write_etc(root, "/bin/sh")
}

/// Copy the contents of `src` into the existing directory `root`.
fn copy_contents(src: &Path, root: &Path) -> Result<()> {
    for entry in fs::read_dir(src).ctx(|| format!("reading {}", src.display()))? {
        let entry = entry.ctx(|| format!("reading {}", src.display()))?;
        let from = entry.path();
        copy_tree(&from, &root.join(entry.file_name()))
            .ctx(|| format!("copying {}", from.display()))?;
    }
    Ok(())
}

/// Unpack a tar, tar.gz or tar.zst archive into `root` with the one extractor
/// (`layer`): nothing is written outside the root or through a link; device nodes
/// are kept as the image has them (the zone's root is mounted nodev).
fn unpack_tar(path: &Path, root: &Path) -> Result<()> {
    use super::layer;
    let file = fs::File::open(path).ctx(|| format!("opening {}", path.display()))?;
    let top = warren_sys::tree::open_dir(root).ctx(|| format!("opening {}", root.display()))?;
    let rules = layer::Rules {
        whiteouts: false,
        keep_devices: true,
    };
    layer::decompress("", file)
        .and_then(|r| layer::apply(std::os::fd::AsFd::as_fd(&top), r, rules))
        .map(drop)
        .map_err(|e| {
            Error::Invalid(format!(
                "--from-tar {}: cannot unpack: {e}; give a tar, tar.gz or tar.zst of a root filesystem",
                path.display()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_template_is_sparse() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        fs::create_dir(&root).unwrap();
        let binds = populate_host(&root, Path::new("/")).unwrap();
        ensure_mountpoints(&root).unwrap();
        assert_eq!(binds[0].target, "usr");
        assert!(binds.iter().all(|b| b.readonly));
        assert!(root.join("usr").is_dir());
        assert!(fs::read_to_string(root.join("etc/passwd"))
            .unwrap()
            .starts_with("root:x:0:0"));
        assert_eq!(
            fs::read_link(root.join("etc/hostname")).unwrap(),
            Path::new("/proc/sys/kernel/hostname")
        );
        let tmp_mode = fs::metadata(root.join("tmp")).unwrap().permissions().mode();
        assert_eq!(tmp_mode & 0o7777, 0o1777);
        // Without /usr's contents the whole template is small.
        let size = crate::fsutil::disk_usage(&root).unwrap();
        assert!(size < 4 << 20, "host template is {size} bytes");
    }

    #[test]
    fn mountpoints_refuse_links_and_never_write_through_them() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        fs::create_dir(&outside).unwrap();
        let root = t.path().join("root");
        fs::create_dir(&root).unwrap();
        symlink(&outside, root.join("var")).unwrap();
        let e = ensure_mountpoints(&root).unwrap_err().to_string();
        assert!(e.contains("/var is a symlink"), "{e}");
        fs::remove_file(root.join("var")).unwrap();
        fs::write(root.join("tmp"), b"").unwrap();
        let e = ensure_mountpoints(&root).unwrap_err().to_string();
        assert!(e.contains("/tmp is not a directory"), "{e}");
        fs::remove_file(root.join("tmp")).unwrap();
        // `etc` may be a link: nothing is made through it.
        symlink(&outside, root.join("etc")).unwrap();
        ensure_mountpoints(&root).unwrap();
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
        let mode = fs::metadata(root.join("var/tmp"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o1777);
    }

    #[test]
    fn static_elf_detection() {
        // This test binary is linked statically (see .cargo/config.toml).
        let me = std::env::current_exe().unwrap();
        assert!(is_static_elf(&me).unwrap());
        assert!(!is_static_elf(Path::new("/etc/passwd")).unwrap());
        if Path::new("/usr/bin/ls").exists() {
            assert!(
                !is_static_elf(Path::new("/usr/bin/ls")).unwrap(),
                "ls is dynamic"
            );
        }
    }
}
