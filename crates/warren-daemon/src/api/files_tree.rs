//! `/1.0/zones/{zone}/files?path=...&recursive=true`: `warren cp -r` of a tree out of
//! a zone (GET, the tree as a tar stream) or into it (PUT, a tar body), through the
//! same `warren cp` as one file ([`super::files`]), by way of a private spool
//! directory in the root-only state root, removed when the request ends.
//!
//! Out: `warren cp -r ZONE:PATH SPOOL/TOP` (which unpacks the zone's stream on the
//! host trusting nothing in it), then the spooled tree is packed without following
//! any symlink (they stay symlinks), at most [`super::files::MAX_FILE`] bytes.
//!
//! In: the body (at most the API's 1 MiB body limit) is checked whole before anything
//! is written ([`check`]): every name plain and relative (no `..`, no absolute name)
//! beneath one top entry (a directory or a file: `warren cp` follows its source, so a
//! top that is a link would copy the host's files), only directories, regular files,
//! symlinks and hard links
//! to files of the same stream, nothing written through a symlink of the stream, no
//! name twice. It is then unpacked into the spool and copied with `warren cp -r
//! SPOOL/TOP ZONE:PATH`, whose zone side writes as the zone's root inside the zone's
//! mount namespace (its symlinks lead only to its own files). As with `warren cp -r`,
//! an existing directory PATH receives the tree under its top name; otherwise the top
//! becomes PATH. Hard links arrive as separate files with the same content (`warren
//! cp` copies each name), and owners are `uid`/`gid` (default the zone's root).

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use axum::body::Bytes;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tar::EntryType;

use super::files::{Spool, MAX_FILE};
use crate::error::{ApiError, ApiResult};
use crate::state::Shared;

/// A spool directory in the state root, removed (with what is in it) when dropped.
pub(super) struct SpoolDir(pub(super) PathBuf);

impl SpoolDir {
    fn new(root: &Path) -> std::io::Result<SpoolDir> {
        use std::os::unix::fs::DirBuilderExt;
        let d = Spool::new(root).0.with_extension("d");
        std::fs::DirBuilder::new().mode(0o700).create(&d)?;
        Ok(SpoolDir(d))
    }
}

impl Drop for SpoolDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn system(what: String) -> ApiError {
    ApiError::new(500, "system", what)
}

pub(super) fn spool_dir(app: &Shared) -> ApiResult<SpoolDir> {
    SpoolDir::new(&app.root)
        .map_err(|e| system(format!("making a spool directory in the state root: {e}")))
}

/// The last name of a zone path ("tree" of "/srv/tree/"); none for "/".
fn top_of(path: &str) -> Option<String> {
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

/// GET: the tree at `path` in zone `z`, as a tar stream whose top entry is its name.
pub async fn read(app: &Shared, z: &str, path: &str, src: String) -> ApiResult<Response> {
    let top = top_of(path).ok_or_else(|| {
        let mut e = ApiError::invalid(
            "path",
            format!("path {path:?}: name a directory inside zone '{z}', not /"),
        );
        e.zone = Some(z.into());
        e
    })?;
    let dir = spool_dir(app)?;
    let dst = dir.0.join(&top);
    super::files::cp(app, z, vec!["-r".into(), src, dst.display().to_string()]).await?;
    let packed = tokio::task::spawn_blocking(move || -> std::io::Result<Option<Vec<u8>>> {
        let mut b = tar::Builder::new(Vec::new());
        b.follow_symlinks(false);
        if std::fs::symlink_metadata(&dst)?.is_dir() {
            b.append_dir_all(&top, &dst)?;
        } else {
            b.append_path_with_name(&dst, &top)?;
        }
        let data = b.into_inner()?;
        drop(dir);
        Ok((data.len() as u64 <= MAX_FILE).then_some(data))
    })
    .await
    .map_err(|e| system(format!("the tree's packer failed: {e}")))?
    .map_err(|e| system(format!("packing the copy of {path} from zone '{z}': {e}")))?;
    let Some(data) = packed else {
        let mut e = ApiError::new(
            413,
            "payload_too_large",
            format!("{path} in zone '{z}' packs to more than {MAX_FILE} bytes; copy it with 'warren cp -r {z}:{path} DIR'"),
        );
        e.zone = Some(z.into());
        e.field = Some("path".into());
        return Err(e);
    };
    Ok(([(header::CONTENT_TYPE, "application/x-tar")], data).into_response())
}

/// `name` as plain names only: no root, no `..`, no `.` but a leading one.
fn plain(name: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in name.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir if out.as_os_str().is_empty() => {}
            _ => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// Check a whole tar stream before anything of it is written; its top entry's name.
pub fn check(data: &[u8]) -> Result<String, String> {
    let mut top: Option<PathBuf> = None;
    let mut seen = HashSet::new();
    let mut files = HashSet::new();
    let mut links: Vec<PathBuf> = Vec::new();
    let mut archive = tar::Archive::new(data);
    for entry in archive
        .entries()
        .map_err(|e| format!("not a tar stream: {e}"))?
    {
        let entry = entry.map_err(|e| format!("not a tar stream: {e}"))?;
        let raw = entry
            .path()
            .map_err(|e| format!("an entry's name: {e}"))?
            .into_owned();
        let name = plain(&raw).ok_or_else(|| {
            format!(
                "{}: not a plain relative name (no '..', no absolute name)",
                raw.display()
            )
        })?;
        let first = PathBuf::from(
            name.components()
                .next()
                .expect("plain is not empty")
                .as_os_str(),
        );
        match &top {
            None => top = Some(first),
            Some(t) if *t != first => {
                return Err(format!(
                    "{}: every entry must lie beneath the one top entry {}",
                    raw.display(),
                    t.display()
                ))
            }
            Some(_) => {}
        }
        if let Some(l) = links.iter().find(|l| name.starts_with(l) && **l != name) {
            return Err(format!(
                "{}: lies through the symlink {} of the same stream",
                raw.display(),
                l.display()
            ));
        }
        if !seen.insert(name.clone()) {
            return Err(format!("{}: the name comes twice", raw.display()));
        }
        let kind = entry.header().entry_type();
        if name.components().count() == 1
            && !matches!(
                kind,
                EntryType::Directory | EntryType::Regular | EntryType::Continuous
            )
        {
            // `warren cp` follows its source operand: a top that is a link would copy
            // what it points to on the host.
            return Err(format!(
                "{}: the top entry must be a directory or a file, not a {kind:?}",
                raw.display()
            ));
        }
        match kind {
            EntryType::Directory => {}
            EntryType::Regular | EntryType::Continuous => {
                files.insert(name);
            }
            EntryType::Symlink => links.push(name),
            EntryType::Link => {
                let target = entry
                    .link_name()
                    .map_err(|e| format!("{}: its link target: {e}", raw.display()))?
                    .ok_or_else(|| format!("{}: a hard link without a target", raw.display()))?;
                if !plain(&target).is_some_and(|t| files.contains(&t)) {
                    return Err(format!(
                        "{}: a hard link to {}, which is not a file earlier in the stream",
                        raw.display(),
                        target.display()
                    ));
                }
            }
            other => {
                return Err(format!(
                    "{}: a {other:?} entry; only directories, files, symlinks and hard links are copied",
                    raw.display()
                ))
            }
        }
    }
    top.map(|t| t.to_string_lossy().into_owned())
        .ok_or_else(|| "the stream is empty".into())
}

/// PUT: unpack the checked `body` into a spool and copy its top into zone `z`.
pub async fn write(
    app: &Shared,
    z: &str,
    dst: String,
    stamp: Vec<String>,
    body: Bytes,
) -> ApiResult<Value> {
    let top = check(&body).map_err(|m| {
        let mut e = ApiError::invalid(
            "body",
            format!("{m}; send a tar stream of one tree (refused whole: nothing was written to zone '{z}')"),
        );
        e.zone = Some(z.into());
        e
    })?;
    let dir = spool_dir(app)?;
    let into = dir.0.clone();
    tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        let mut archive = tar::Archive::new(&body[..]);
        archive.set_preserve_permissions(true);
        archive.set_preserve_ownerships(false);
        archive.set_unpack_xattrs(false);
        archive.set_overwrite(false);
        for entry in archive.entries()? {
            if !entry?.unpack_in(&into)? {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "an entry outside the tree",
                ));
            }
        }
        Ok(())
    })
    .await
    .map_err(|e| system(format!("the tree's unpacker failed: {e}")))?
    .map_err(|e| {
        let mut a = ApiError::invalid(
            "body",
            format!("unpacking the tree: {e}; send a tar stream of one tree"),
        );
        a.zone = Some(z.into());
        a
    })?;
    let mut args = vec![
        "-r".to_string(),
        dir.0.join(&top).display().to_string(),
        dst,
    ];
    args.extend(stamp);
    super::files::cp(app, z, args).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(entries: &[(&str, EntryType, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o644);
            let data: &[u8] = if *kind == EntryType::Regular {
                b"x"
            } else {
                b""
            };
            h.set_size(data.len() as u64);
            // Raw names, as a hostile stream would write them (set_path refuses `..`).
            h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            if !link.is_empty() {
                h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
            }
            h.set_cksum();
            b.append(&h, data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn a_tree_with_links_passes_and_hostile_streams_do_not() {
        let good = stream(&[
            ("t/", EntryType::Directory, ""),
            ("t/a", EntryType::Regular, ""),
            ("t/l", EntryType::Symlink, "/etc"),
            ("t/h", EntryType::Link, "t/a"),
        ]);
        assert_eq!(check(&good), Ok("t".into()));
        for (bad, why) in [
            (stream(&[("t/../../x", EntryType::Regular, "")]), "plain"),
            (stream(&[("/etc/x", EntryType::Regular, "")]), "plain"),
            (
                stream(&[
                    ("t/l", EntryType::Symlink, "/"),
                    ("t/l/etc/x", EntryType::Regular, ""),
                ]),
                "through the symlink",
            ),
            (
                stream(&[
                    ("t/a", EntryType::Regular, ""),
                    ("u/b", EntryType::Regular, ""),
                ]),
                "beneath",
            ),
            (
                stream(&[("t/h", EntryType::Link, "/etc/shadow")]),
                "hard link",
            ),
            (
                stream(&[
                    ("t/a", EntryType::Regular, ""),
                    ("t/a", EntryType::Regular, ""),
                ]),
                "twice",
            ),
            (stream(&[("t/d", EntryType::Char, "")]), "only directories"),
            (stream(&[("t", EntryType::Symlink, "/etc")]), "top entry"),
        ] {
            let e = check(&bad).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
    }
}
