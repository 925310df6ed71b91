//! The verbs of docs/snapshots.md: `snapshot create|list|restore|delete`, `export`,
//! `import`, and `template list`'s rows with sizes and users (`template create
//! --from-zone` is dispatched in `zonecfg`).

use serde::Serialize;

use super::output;
use super::{Command, SnapshotCmd};
use crate::config::format_size;
use crate::error::Result;
use crate::storage::template::{self, Manifest};
use crate::zone::{self, Context};

pub(super) fn snapshot_cmd(ctx: &Context, json: bool, c: SnapshotCmd) -> Result<()> {
    match c {
        SnapshotCmd::Create { zone: z, name } => {
            let s = zone::snapshot::create(ctx, &z, name.as_deref())?;
            if json {
                output::json(&s);
            } else {
                println!(
                    "zone '{z}': snapshot '{}' created ({}{})",
                    s.meta.name,
                    format_size(s.size_bytes),
                    if s.meta.taken_running {
                        ", taken running: crash-consistent"
                    } else {
                        ""
                    }
                );
            }
        }
        SnapshotCmd::List { zone: z } => {
            let list = zone::snapshot::list(ctx, z.as_deref())?;
            if json {
                output::json(&list);
            } else {
                let rows: Vec<Vec<String>> = list
                    .iter()
                    .map(|s| {
                        vec![
                            s.meta.zone.clone(),
                            s.meta.name.clone(),
                            crate::journal::iso_utc(s.meta.created_ms),
                            format_size(s.size_bytes),
                            s.meta.backend.to_string(),
                            if s.meta.taken_running {
                                "running"
                            } else {
                                "halted"
                            }
                            .into(),
                        ]
                    })
                    .collect();
                output::table(
                    &["ZONE", "SNAPSHOT", "CREATED", "SIZE", "BACKEND", "TAKEN"],
                    &rows,
                );
            }
        }
        SnapshotCmd::Restore { zone: z, name } => {
            zone::snapshot::restore(ctx, &z, &name)?;
            done(
                json,
                &z,
                "snapshot-restore",
                &name,
                "restored from snapshot",
            );
        }
        SnapshotCmd::Delete { zone: z, name } => {
            zone::snapshot::delete(ctx, &z, &name)?;
            done(json, &z, "snapshot-delete", &name, "deleted snapshot");
        }
    }
    Ok(())
}

fn done(json: bool, z: &str, verb: &str, name: &str, text: &str) {
    if json {
        output::json(
            &serde_json::json!({ "zone": z, "verb": verb, "snapshot": name, "changed": true }),
        );
    } else {
        println!("zone '{z}': {text} '{name}'");
    }
}

pub(super) fn archive_cmd(ctx: &Context, json: bool, c: Command) -> Result<()> {
    let exporting = matches!(c, Command::Export { .. });
    let r = match c {
        Command::Export {
            zone: z,
            file,
            with_template,
            snapshot,
        } => zone::archive::export(ctx, &z, &file, with_template, snapshot.as_deref())?,
        Command::Import {
            file,
            name,
            with_template,
        } => zone::archive::import(ctx, &file, name.as_deref(), with_template)?,
        _ => unreachable!("archive_cmd is only called for export and import"),
    };
    if json {
        output::json(&r);
    } else {
        let mib = r.bytes as f64 / f64::from(1 << 20);
        println!(
            "zone '{}': {} {} ({mib:.1} MiB, template '{}'{}) in {:.0} ms",
            r.zone,
            if exporting {
                "written to"
            } else {
                "imported from"
            },
            r.file.display(),
            r.template,
            if r.template_created {
                " created from the archive"
            } else {
                ""
            },
            r.ms
        );
    }
    Ok(())
}

/// One row of `template list`: the manifest, its root's size, the zones using it.
#[derive(Debug, Serialize)]
pub(super) struct TemplateRow {
    #[serde(flatten)]
    pub manifest: Manifest,
    pub size_bytes: Option<u64>,
    pub zones: Vec<String>,
}

pub(super) fn template_list(ctx: &Context, json: bool) -> Result<()> {
    let rows: Vec<TemplateRow> = template::list(&ctx.layout)?
        .into_iter()
        .map(|m| TemplateRow {
            size_bytes: crate::fsutil::disk_usage(&template::root_of(&ctx.layout, &m.name)).ok(),
            zones: zone::zones_using_template(&ctx.layout, &m.name).unwrap_or_default(),
            manifest: m,
        })
        .collect();
    if json {
        output::json(&rows);
        return Ok(());
    }
    let text: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let m = &r.manifest;
            vec![
                m.name.clone(),
                format!("{:?}", m.kind).to_lowercase(),
                m.backend.to_string(),
                r.size_bytes.map_or("?".into(), format_size),
                if r.zones.is_empty() {
                    "-".into()
                } else {
                    r.zones.join(",")
                },
                output::source_cell(m),
            ]
        })
        .collect();
    output::table(
        &["NAME", "KIND", "BACKEND", "SIZE", "ZONES", "SOURCE"],
        &text,
    );
    Ok(())
}
