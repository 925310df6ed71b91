//! `warren export` / `warren import`: a zone as one zstd-compressed tar, to move it to
//! another host (docs/snapshots.md).
//!
//! ```text
//! warren-export.json        ExportMeta: zone, backend, layer kind, template name + digest
//! config.toml               the zone's config
//! template/template.toml    --with-template: the template's manifest
//! template/root/…           --with-template: its root
//! layer/…                   the private layer: overlay's upper (whiteouts included),
//!                           or the whole root of the btrfs and copy backends
//! warren-export.end         the last entry: a truncated archive lacks it
//! ```
//!
//! Owners are stored as the zone's own ids (a user-namespaced zone's range moved to 0)
//! and moved into the new zone's range on import. The zstd frame carries a checksum,
//! so a damaged archive fails to decompress; the template is recorded by name and by
//! the digest of its tree ([`archive_tree::digest`]), and an import into a host whose
//! template of that name differs (or is missing) is refused unless the archive carries
//! the template. Export writes `.<file>.tmp-<pid>` beside FILE and renames it (a full
//! disk leaves no half file); import builds the zone in `zones/.new-*` and renames it.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::archive_tree::{self, plain_components, Ids, Unpacker};
use super::lifecycle::{load_locked, zone_lock};
use super::Context;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{mkdir_mode, remove_tree, sync_dir, unique_suffix};
use crate::idmap::{self, IdRange};
use crate::state::{self, Lifecycle, ZoneState};
use crate::storage::{backend, template, BackendKind};
use crate::{config, lock, names};

const META: &str = "warren-export.json";
const END: &str = "warren-export.end";
const FORMAT: u32 = 1;

/// What a layer in an archive is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerKind {
    /// overlayfs's upper directory, over the template.
    Upper,
    /// A whole root (btrfs, copy).
    Root,
}

/// `warren-export.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExportMeta {
    pub format: u32,
    pub zone: String,
    pub backend: BackendKind,
    pub layer: LayerKind,
    pub template: String,
    /// The digest of the template's root when exported.
    pub template_digest: String,
    pub with_template: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    pub created_ms: u64,
}

/// What export and import report.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveReport {
    pub zone: String,
    pub file: PathBuf,
    pub bytes: u64,
    pub template: String,
    /// import: the template was made from the archive.
    pub template_created: bool,
    pub ms: f64,
}

fn layer_kind(kind: BackendKind) -> LayerKind {
    match kind {
        BackendKind::Overlay => LayerKind::Upper,
        BackendKind::Btrfs | BackendKind::Copy => LayerKind::Root,
    }
}

fn append_bytes<W: Write>(b: &mut tar::Builder<W>, name: &str, data: &[u8]) -> std::io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_mode(0o600);
    h.set_size(data.len() as u64);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, name, data)
}

/// `warren export ZONE FILE`: of an installed or running (frozen while read) zone.
pub fn export(
    ctx: &Context,
    zone: &str,
    file: &Path,
    with_template: bool,
    snapshot: Option<&str>,
) -> Result<ArchiveReport> {
    ctx.require_root()?;
    let t0 = std::time::Instant::now();
    let _lock = zone_lock(ctx, zone)?;
    let mut z = load_locked(ctx, zone)?;
    let st = z.state(ctx);
    if !matches!(st, ZoneState::Installed | ZoneState::Running) {
        return Err(Error::WrongState {
            zone: zone.into(),
            state: st,
            remedy: "export needs it installed or running".into(),
        });
    }
    let (src_dir, kind, range) = match snapshot {
        Some(n) => {
            let (d, m) = super::snapshot::existing(&z, n)?;
            (d, m.backend, m.idmap)
        }
        None => (
            z.dir.clone(),
            z.lifecycle.backend.ok_or_else(|| Error::Corrupt {
                path: state::state_path(&z.dir),
                message: "an installed zone without a storage backend".into(),
            })?,
            z.lifecycle.idmap,
        ),
    };
    let disk = crate::quota::image(&src_dir).is_some();
    if disk && snapshot.is_none() && st == ZoneState::Running {
        return Err(Error::Unsupported(format!(
            "zone '{zone}': its layer is a disk.max image mounted inside the running zone, which export does not read; snapshot it and export the snapshot ('warren snapshot create {zone} NAME' then 'warren export --snapshot NAME {zone} FILE'), or halt it"
        )));
    }
    if disk && kind != BackendKind::Overlay {
        return Err(Error::Corrupt {
            path: src_dir.join("disk.img"),
            message: format!("a disk.max image on the {kind} backend"),
        });
    }
    // A disk.max layer is the image's upper/, mounted here for the export.
    let mounted = match disk {
        true => Some(super::archive_disk::mount(zone, &src_dir, true)?),
        false => None,
    };
    let _tlock = lock::shared(&ctx.layout, "template", &z.config.template)?;
    let manifest = template::load(&ctx.layout, &z.config.template)?;
    let troot = template::root_of(&ctx.layout, &z.config.template);
    let digest = archive_tree::digest(&troot)
        .ctx(|| format!("zone '{zone}': reading template '{}'", manifest.name))?;
    let layer_dir = match &mounted {
        Some(m) => m.upper(),
        None => backend(kind).private_dir(&src_dir),
    };
    let ids = match (kind, range) {
        (BackendKind::Overlay, Some(r)) => Ids::Down(r.base),
        _ => Ids::Keep,
    };
    let meta = ExportMeta {
        format: FORMAT,
        zone: zone.into(),
        backend: kind,
        layer: layer_kind(kind),
        template: manifest.name.clone(),
        template_digest: digest,
        with_template,
        snapshot: snapshot.map(str::to_string),
        created_ms: super::now_ms(),
    };
    let config_bytes = fs::read(super::config_path(&z.dir))
        .ctx(|| format!("zone '{zone}': reading its config"))?;
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let fname = file.file_name().ok_or_else(|| {
        Error::Invalid(format!("export FILE {}: give a file name", file.display()))
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        fname.to_string_lossy(),
        std::process::id()
    ));
    let write = |out: File| -> std::io::Result<File> {
        let mut enc = zstd::Encoder::new(BufWriter::with_capacity(1 << 20, out), 1)?;
        enc.include_checksum(true)?;
        let mut b = tar::Builder::new(enc);
        append_bytes(
            &mut b,
            META,
            &serde_json::to_vec_pretty(&meta).expect("serialises"),
        )?;
        append_bytes(&mut b, "config.toml", &config_bytes)?;
        if with_template {
            let text = toml::to_string(&manifest).expect("manifest serialises");
            append_bytes(&mut b, "template/template.toml", text.as_bytes())?;
            archive_tree::pack(&mut b, &troot, "template/root", Ids::Keep)?;
        }
        archive_tree::pack(&mut b, &layer_dir, "layer", ids)?;
        append_bytes(&mut b, END, b"")?;
        let enc = b.into_inner()?;
        let out = enc.finish()?.into_inner().map_err(|e| e.into_error())?;
        out.sync_all()?;
        Ok(out)
    };
    let result = (|| {
        let out = File::options()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .ctx(|| format!("creating {}", tmp.display()))?;
        let out = super::freeze::with_frozen(ctx, &mut z, || {
            write(out).ctx(|| format!("zone '{zone}': writing {}", tmp.display()))
        })?;
        crate::fault::point("export.after-write");
        let bytes = out.metadata().map(|m| m.len()).unwrap_or(0);
        fs::rename(&tmp, file)
            .ctx(|| format!("renaming {} to {}", tmp.display(), file.display()))?;
        sync_dir(&dir).ctx(|| format!("syncing {}", dir.display()))?;
        Ok(bytes)
    })();
    let bytes = match result {
        Ok(b) => b,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    Ok(ArchiveReport {
        zone: zone.into(),
        file: file.to_path_buf(),
        bytes,
        template: manifest.name,
        template_created: false,
        ms: t0.elapsed().as_secs_f64() * 1e3,
    })
}

fn damaged(file: &Path, what: impl std::fmt::Display) -> Error {
    Error::Invalid(format!(
        "import {}: the archive is damaged or not one 'warren export' wrote ({what}); export the zone again",
        file.display()
    ))
}

/// `warren import FILE [NAME]`: a new, installed zone from an export.
pub fn import(
    ctx: &Context,
    file: &Path,
    name: Option<&str>,
    with_template: bool,
) -> Result<ArchiveReport> {
    ctx.require_root()?;
    let t0 = std::time::Instant::now();
    let f = File::open(file).ctx(|| format!("import: opening {}", file.display()))?;
    let bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
    let dec = zstd::Decoder::new(f).map_err(|e| damaged(file, e))?;
    let mut ar = tar::Archive::new(dec);
    let mut entries = ar.entries().map_err(|e| damaged(file, e))?;
    let mut next_small = |want: &str| -> Result<Vec<u8>> {
        let mut e = entries
            .next()
            .ok_or_else(|| damaged(file, format!("it ends before {want}")))?
            .map_err(|e| damaged(file, e))?;
        let path = e.path().map_err(|e| damaged(file, e))?.into_owned();
        if path != Path::new(want) || e.size() > crate::fsutil::MAX_SMALL_FILE {
            return Err(damaged(
                file,
                format!("expected {want}, found {}", path.display()),
            ));
        }
        let mut v = Vec::new();
        e.read_to_end(&mut v).map_err(|e| damaged(file, e))?;
        Ok(v)
    };
    let meta: ExportMeta = serde_json::from_slice(&next_small(META)?)
        .map_err(|e| damaged(file, format!("{META}: {e}")))?;
    if meta.format != FORMAT {
        return Err(Error::Unsupported(format!(
            "import {}: archive format {} is not the {FORMAT} this warren reads; import it with a warren of the same version",
            file.display(),
            meta.format
        )));
    }
    let config_text = String::from_utf8(next_small("config.toml")?)
        .map_err(|_| damaged(file, "config.toml is not UTF-8"))?;
    let zone = name.unwrap_or(&meta.zone).to_string();
    names::zone(&zone)?;
    let table: toml::Table = config_text
        .parse()
        .map_err(|e| damaged(file, format!("config.toml: {e}")))?;
    let mut cfg = config::from_table(&zone, &table)?;
    cfg.userns_base = None;

    if cfg.template != meta.template {
        return Err(damaged(
            file,
            "config.toml names another template than the record",
        ));
    }
    let tname = meta.template.clone();
    let _tlock = lock::exclusive(&ctx.layout, "template", &tname)?;
    let local = match template::load(&ctx.layout, &tname) {
        Ok(m) => Some(m),
        Err(Error::NoSuchTemplate(_)) => None,
        Err(e) => return Err(e),
    };
    let need_template = match &local {
        Some(m) => {
            let d = archive_tree::digest(&template::root_of(&ctx.layout, &tname))
                .ctx(|| format!("import: reading template '{tname}'"))?;
            if d != meta.template_digest {
                return Err(Error::TemplateMismatch(format!(
                    "import {}: zone '{}' was made from template '{tname}', but this host's '{tname}' holds another tree ({d}, the archive's is {}); create the same template here, or export with --with-template and import it into a host without '{tname}' (or rename this one)",
                    file.display(), meta.zone, meta.template_digest
                )));
            }
            if layer_kind(m.backend) != meta.layer {
                return Err(Error::Unsupported(format!(
                    "import {}: the archive's layer is {:?} ({} backend) but template '{tname}' here is on the {} backend; import on a host with the same kind of storage",
                    file.display(), meta.layer, meta.backend, m.backend
                )));
            }
            false
        }
        None if meta.with_template && with_template => true,
        None if meta.with_template => {
            return Err(Error::TemplateMismatch(format!(
                "import {}: template '{tname}' does not exist on this host; the archive carries it: add --with-template to create it from the archive",
                file.display()
            )))
        }
        None => {
            return Err(Error::TemplateMismatch(format!(
                "import {}: template '{tname}' does not exist on this host; create it (e.g. 'warren template create {tname} --from host'), or export the zone with --with-template",
                file.display()
            )))
        }
    };
    let (kind, _) = crate::storage::choose(ctx.layout.root(), &ctx.host.proc)?;
    let kind = local.as_ref().map_or(kind, |m| m.backend);
    if need_template && layer_kind(kind) != meta.layer {
        return Err(Error::Unsupported(format!(
            "import {}: the archive's layer is {:?} but this state root uses the {kind} backend; import on a host with the same kind of storage",
            file.display(),
            meta.layer
        )));
    }
    let _lock = zone_lock(ctx, &zone)?;
    let zones = ctx.layout.zones();
    fs::create_dir_all(&zones).ctx(|| format!("creating {}", zones.display()))?;
    let dir = ctx.layout.zone_dir(&zone);
    if dir.exists() {
        return Err(Error::ZoneExists(zone));
    }
    let tmp = zones.join(format!(".new-{zone}-{}", unique_suffix()));
    let ttmp = ctx
        .layout
        .templates()
        .join(format!(".new-{tname}-{}", unique_suffix()));
    let be = backend(kind);
    let mut range: Option<IdRange> = None;
    let result = (|| {
        if cfg.userns {
            range = Some(idmap::allocate(&ctx.host, &ctx.layout, &zone, None)?);
        }
        mkdir_mode(&tmp, 0o700).ctx(|| format!("creating {}", tmp.display()))?;
        let layer = be.private_dir(&tmp);
        match kind {
            BackendKind::Btrfs => warren_sys::fs::btrfs_subvol_create(&layer)
                .ctx(|| format!("creating btrfs subvolume {}", layer.display()))?,
            _ => mkdir_mode(&layer, 0o755).ctx(|| format!("creating {}", layer.display()))?,
        }
        if kind == BackendKind::Overlay {
            mkdir_mode(&tmp.join("work"), 0o700)
                .ctx(|| format!("creating {}/work", tmp.display()))?;
        }
        if need_template {
            mkdir_mode(&ttmp, 0o755).ctx(|| format!("creating {}", ttmp.display()))?;
            be.new_template_root(&ttmp.join("root"))?;
        }
        let ids = match (kind, range) {
            (BackendKind::Overlay, Some(r)) => Ids::Up(r.base),
            _ => Ids::Keep,
        };
        // disk.max: the layer goes into a new capped image's upper/, as install makes it.
        let mut disk = None;
        if let Some(max) = cfg.disk_max {
            if kind != BackendKind::Overlay {
                return Err(Error::config(
                    &zone,
                    format!("disk.max needs the overlay backend, but this host's template '{tname}' uses {kind}; unset disk.max in the archive's zone before exporting it"),
                ));
            }
            crate::quota::create_image(&zone, &tmp, max, range.map_or(0, |r| r.base))?;
            disk = Some(super::archive_disk::mount(&zone, &tmp, false)?);
        }
        let target = disk.as_ref().map_or(layer.clone(), |m| m.upper());
        let mut lay =
            Unpacker::new(&target, "layer", ids).ctx(|| format!("opening {}", target.display()))?;
        let mut tpl = if need_template {
            Some(
                Unpacker::new(&ttmp.join("root"), "template/root", Ids::Keep)
                    .ctx(|| format!("opening {}", ttmp.display()))?,
            )
        } else {
            None
        };
        let mut manifest_text = None;
        let mut ended = false;
        for e in entries.by_ref() {
            let mut e = e.map_err(|e| damaged(file, e))?;
            let path = e.path().map_err(|e| damaged(file, e))?.into_owned();
            if ended {
                return Err(damaged(
                    file,
                    format!("{} after the end record", path.display()),
                ));
            }
            let names = plain_components(&path).map_err(|e| damaged(file, e))?;
            if path == Path::new(END) {
                ended = true;
            } else if path == Path::new("template/template.toml") {
                let mut v = Vec::new();
                e.by_ref()
                    .take(crate::fsutil::MAX_SMALL_FILE)
                    .read_to_end(&mut v)
                    .map_err(|e| damaged(file, e))?;
                manifest_text = Some(v);
            } else if let Some(rel) = lay.beneath(&names) {
                let rel = rel.to_vec();
                lay.entry(&mut e, &rel)
                    .map_err(|err| damaged(file, format!("{}: {err}", path.display())))?;
            } else if let Some(t) = tpl.as_mut() {
                let rel = t
                    .beneath(&names)
                    .ok_or_else(|| damaged(file, format!("unexpected entry {}", path.display())))?
                    .to_vec();
                t.entry(&mut e, &rel)
                    .map_err(|err| damaged(file, format!("{}: {err}", path.display())))?;
            } else if !path.starts_with("template") {
                return Err(damaged(
                    file,
                    format!("unexpected entry {}", path.display()),
                ));
            }
        }
        if !ended {
            return Err(damaged(file, "it is truncated: the end record is missing"));
        }
        lay.finish().map_err(|e| damaged(file, e))?;
        if let Some(m) = disk.take() {
            m.finish()?;
        }
        if let Some(t) = tpl {
            t.finish().map_err(|e| damaged(file, e))?;
            let text =
                manifest_text.ok_or_else(|| damaged(file, "template/template.toml is missing"))?;
            let mut m: template::Manifest = toml::from_str(&String::from_utf8_lossy(&text))
                .map_err(|e| damaged(file, format!("template/template.toml: {e}")))?;
            m.backend = kind;
            let d = archive_tree::digest(&ttmp.join("root"))
                .ctx(|| format!("reading {}", ttmp.display()))?;
            if d != meta.template_digest {
                return Err(damaged(
                    file,
                    "the template's tree does not match its recorded digest",
                ));
            }
            let text = toml::to_string(&m).expect("manifest serialises");
            crate::fsutil::atomic_write(&ttmp.join("template.toml"), text.as_bytes(), true)
                .ctx(|| format!("writing {}/template.toml", ttmp.display()))?;
        }
        crate::fault::point("import.after-unpack");
        super::lifecycle::write_config(&tmp, &cfg)?;
        let lc = Lifecycle {
            state: ZoneState::Installed,
            backend: Some(kind),
            idmap: range,
            ..Lifecycle::configured()
        };
        state::save_lifecycle(&tmp, &lc)?;
        archive_tree::sync_tree(&tmp).ctx(|| format!("syncing {}", tmp.display()))?;
        if need_template {
            archive_tree::sync_tree(&ttmp).ctx(|| format!("syncing {}", ttmp.display()))?;
            let tdir = ctx.layout.template_dir(&tname);
            fs::rename(&ttmp, &tdir)
                .ctx(|| format!("renaming {} to {}", ttmp.display(), tdir.display()))?;
        }
        fs::rename(&tmp, &dir)
            .ctx(|| format!("renaming {} to {}", tmp.display(), dir.display()))?;
        sync_dir(&zones).ctx(|| format!("syncing {}", zones.display()))
    })();
    if let Err(e) = result {
        let mut cleanup = super::gc::remove_leftover(&tmp);
        if ttmp.exists() {
            cleanup = cleanup.and(super::gc::remove_leftover(&ttmp));
        }
        if range.is_some() {
            cleanup = cleanup.and(idmap::release(&ctx.layout, &zone, range));
        }
        return Err(e.with_cleanup(cleanup.err()));
    }
    let _ = remove_tree(&ttmp);
    crate::journal::note(
        &ctx.layout,
        crate::journal::EventType::Lifecycle,
        "imported",
        &zone,
        serde_json::json!({ "file": file, "template": tname, "template_created": need_template }),
    );
    Ok(ArchiveReport {
        zone,
        file: file.to_path_buf(),
        bytes,
        template: tname,
        template_created: need_template,
        ms: t0.elapsed().as_secs_f64() * 1e3,
    })
}
