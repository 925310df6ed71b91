//! An OCI image's config (`Entrypoint`, `Cmd`, `Env`, `WorkingDir`, `User`) as the
//! defaults of the zones made from its template ([`ImageMeta`], kept in
//! `template.toml`'s `[image]` table and applied at boot by `runtime::spec`).
//!
//! Resolved once, at template creation, against the unpacked root: the program of
//! `Entrypoint + Cmd` found on the image's `PATH` when it has no `/`, and `User` (a
//! name, `uid`, `name:group`, `uid:gid`) looked up in the image's `/etc/passwd` and
//! `/etc/group`. Files are read with `openat2(RESOLVE_IN_ROOT)`: an image's absolute
//! symlink (`/etc/passwd -> /host/file`) resolves inside the image.

use std::fs::File;
use std::io::Read;
use std::os::fd::BorrowedFd;
use std::path::Path;

use serde::{Deserialize, Serialize};
use warren_sys::libc;
use warren_sys::tree;

use super::oci_image::ImageManifest;

/// The parts of the image config warren reads (OCI image-spec `config.md`).
#[derive(Debug, Clone, Deserialize, Default)]
pub struct ImageConfigFile {
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub config: Option<RunConfig>,
    #[serde(default)]
    pub rootfs: RootFs,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct RootFs {
    #[serde(default)]
    pub diff_ids: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
pub struct RunConfig {
    #[serde(default)]
    pub entrypoint: Option<Vec<String>>,
    #[serde(default)]
    pub cmd: Option<Vec<String>>,
    #[serde(default)]
    pub env: Option<Vec<String>>,
    #[serde(default)]
    pub working_dir: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
}

/// What a template made from an image records: where it came from, and the zone
/// defaults its config gives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageMeta {
    /// The image's name in the archive (`ref.name` annotation or first RepoTag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The manifest's digest (OCI layout); a docker-archive has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The config's digest (the image ID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_digest: Option<String>,
    /// `oci` or `docker-archive`.
    pub format: String,
    pub layers: usize,
    /// `Entrypoint` + `Cmd`, the program made absolute: the zone's init when its
    /// config sets none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init: Vec<String>,
    /// `Env`: before the zone's own `env` (which wins, key by key).
    #[serde(default)]
    pub env: Vec<String>,
    /// `WorkingDir` of the image's init (absolute; `/` when the image gives none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// `User` as the image gives it, and the ids it resolved to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default)]
    pub uid: u32,
    #[serde(default)]
    pub gid: u32,
    /// The home directory of `uid` in the image's /etc/passwd: the `HOME` of the
    /// image's command (the image's own `Env` may set another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
}

impl ImageMeta {
    /// The identifier to show: the manifest digest, else the config's.
    pub fn shown_digest(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.config_digest.as_deref())
            .unwrap_or("-")
    }

    /// Resolve `config` against the unpacked root held by `root`.
    pub fn resolve(
        manifest: &ImageManifest,
        config: &ImageConfigFile,
        root: BorrowedFd<'_>,
    ) -> Result<ImageMeta, String> {
        let run = config.config.clone().unwrap_or_default();
        let env = run.env.clone().unwrap_or_default();
        let workdir = run.working_dir.filter(|w| !w.is_empty()).map(|w| {
            if w.starts_with('/') {
                w
            } else {
                format!("/{w}")
            }
        });
        let mut init: Vec<String> = run.entrypoint.unwrap_or_default();
        init.extend(run.cmd.unwrap_or_default());
        if let Some(prog) = init.first_mut() {
            *prog = find_program(root, prog, &env, workdir.as_deref().unwrap_or("/"))?;
        }
        let user = run.user.filter(|u| !u.is_empty());
        let (uid, gid) = match &user {
            Some(u) => resolve_user(root, u)?,
            None => (0, 0),
        };
        let home = user.as_ref().and_then(|_| home_of(root, uid));
        Ok(ImageMeta {
            reference: manifest.reference.clone(),
            digest: manifest.digest.clone(),
            config_digest: manifest.config.digest.clone(),
            format: manifest.format.to_string(),
            layers: manifest.layers.len(),
            init,
            env,
            workdir,
            user,
            uid,
            gid,
            home,
        })
    }
}

/// Read a small file of the image, resolving `rel` inside it.
fn read_in_root(root: BorrowedFd<'_>, rel: &str) -> Option<String> {
    let resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    let fd = tree::openat2(root, Path::new(rel), libc::O_RDONLY, 0, resolve).ok()?;
    let mut s = String::new();
    File::from(fd).take(1 << 20).read_to_string(&mut s).ok()?;
    Some(s)
}

fn is_program(root: BorrowedFd<'_>, abs: &str) -> bool {
    let resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    let rel = abs.trim_start_matches('/');
    tree::openat2(root, Path::new(rel), libc::O_PATH, 0, resolve)
        .and_then(|fd| tree::fstat(std::os::fd::AsFd::as_fd(&fd)))
        .is_ok_and(|st| st.is_file() && st.mode & 0o111 != 0)
}

/// The absolute path of the image's program `prog`: as given when absolute, joined to
/// the working directory when it holds a `/`, else the first match on the image's
/// `PATH` (warren's default `PATH` when the image sets none).
fn find_program(
    root: BorrowedFd<'_>,
    prog: &str,
    env: &[String],
    cwd: &str,
) -> Result<String, String> {
    if prog.starts_with('/') {
        return Ok(prog.to_string());
    }
    if prog.contains('/') {
        return Ok(format!("{}/{prog}", cwd.trim_end_matches('/')));
    }
    let path = env
        .iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .unwrap_or(crate::runtime::ZONE_PATH);
    path.split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| format!("{}/{prog}", d.trim_end_matches('/')))
        .find(|p| is_program(root, p))
        .ok_or_else(|| {
            format!("the image's command {prog:?} is not on its PATH ({path}); fix the image's Entrypoint/Cmd, or give the zone an init ('--set init=...')")
        })
}

/// Look `name` up in an `/etc/passwd`- or `/etc/group`-format text: its 3rd and 4th
/// fields.
fn lookup(text: &str, name: &str) -> Option<(u32, Option<u32>)> {
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 3 && f[0] == name).then(|| {
            let id = f[2].parse().ok()?;
            Some((id, f.get(3).and_then(|g| g.parse().ok())))
        })?
    })
}

/// The home directory of `uid` in the image's /etc/passwd.
fn home_of(root: BorrowedFd<'_>, uid: u32) -> Option<String> {
    let passwd = read_in_root(root, "etc/passwd")?;
    let id = uid.to_string();
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 6 && f[2] == id && f[5].starts_with('/')).then(|| f[5].to_string())
    })
}

/// `User` → (uid, gid): numbers as they are, names from the image's files; a user
/// without a group takes its passwd entry's group (0 when it has none).
pub fn resolve_user(root: BorrowedFd<'_>, user: &str) -> Result<(u32, u32), String> {
    let (u, g) = match user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (user, None),
    };
    let passwd = read_in_root(root, "etc/passwd").unwrap_or_default();
    let (uid, pgid) = match u.parse::<u32>() {
        Ok(n) => (n, lookup(&passwd, u).and_then(|(_, g)| g).or_else(|| {
            passwd.lines().find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.len() >= 4 && f[2] == u).then(|| f[3].parse().ok()).flatten()
            })
        })),
        Err(_) => lookup(&passwd, u).ok_or_else(|| {
            format!("the image's User {user:?}: no user {u:?} in the image's /etc/passwd; fix the image (or give a numeric uid)")
        })?,
    };
    let gid = match g {
        None => pgid.unwrap_or(0),
        Some(g) => match g.parse::<u32>() {
            Ok(n) => n,
            Err(_) => {
                let group = read_in_root(root, "etc/group").unwrap_or_default();
                lookup(&group, g).map(|(id, _)| id).ok_or_else(|| {
                    format!("the image's User {user:?}: no group {g:?} in the image's /etc/group; fix the image (or give a numeric gid)")
                })?
            }
        },
    };
    Ok((uid, gid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn users_resolve_inside_the_image() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("etc")).unwrap();
        std::fs::write(
            d.path().join("etc/passwd"),
            "root:x:0:0::/root:/bin/sh\napp:x:1000:1001::/srv:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(d.path().join("etc/group"), "root:x:0:\nstaff:x:50:\n").unwrap();
        let fd = tree::open_dir(d.path()).unwrap();
        let r = |u: &str| resolve_user(fd.as_fd(), u);
        assert_eq!(r("app"), Ok((1000, 1001)));
        assert_eq!(r("app:staff"), Ok((1000, 50)));
        assert_eq!(r("1000"), Ok((1000, 1001)));
        assert_eq!(r("4242:7"), Ok((4242, 7)));
        assert_eq!(r("4242"), Ok((4242, 0)));
        assert_eq!(home_of(fd.as_fd(), 1000).as_deref(), Some("/srv"));
        assert!(r("ghost").unwrap_err().contains("no user \"ghost\""));
        assert!(r("app:ghosts").unwrap_err().contains("no group"));
    }
}
