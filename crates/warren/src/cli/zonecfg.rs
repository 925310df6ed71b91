//! `warren template ...` and `warren config ...`.

use super::*;

pub(super) fn template_cmd(ctx: &Context, json: bool, t: TemplateCmd) -> Result<()> {
    match t {
        TemplateCmd::Create {
            name,
            from,
            from_dir,
            from_tar,
            busybox,
        } => {
            let source = match (from, from_dir, from_tar, busybox) {
                (Some(_), _, _, _) => Source::Host,
                (_, Some(d), _, _) => Source::Dir(d),
                (_, _, Some(f), _) => Source::Tar(f),
                (_, _, _, true) => Source::Busybox,
                _ => {
                    return Err(Error::Invalid(
                        "say where the template comes from: --from host, --from-dir PATH, --from-tar FILE or --busybox".into(),
                    ))
                }
            };
            ctx.require_root()?;
            let (kind, _) = storage::choose(ctx.layout.root(), &ctx.host.proc)?;
            let m = template::create(&ctx.layout, &name, &source, kind)?;
            if json {
                output::json(&m);
            } else {
                println!(
                    "template '{name}' created ({:?}, {} backend)",
                    m.kind, m.backend
                );
            }
        }
        TemplateCmd::List => {
            let list = template::list(&ctx.layout)?;
            if json {
                output::json(&list);
            } else {
                output::template_table(ctx, &list);
            }
        }
        TemplateCmd::Delete { name } => {
            ctx.require_root()?;
            template::delete(&ctx.layout, &name)?;
            if json {
                output::json(
                    &serde_json::json!({ "template": name, "verb": "delete", "changed": true }),
                );
            } else {
                println!("template '{name}' deleted");
            }
        }
    }
    Ok(())
}

pub(super) fn config_cmd(ctx: &Context, json: bool, c: ConfigCmd) -> Result<()> {
    match c {
        ConfigCmd::Show { zone: z } => match zone::load(ctx, &z) {
            Ok(zn) if json => output::json(&zn.config),
            Ok(zn) => {
                print!("{}", config::to_toml(&zn.config));
                // A running zone: the limits in force where they differ (as comments,
                // so the output stays a valid config).
                let info = zone::info(ctx, &z);
                for f in info.in_force.iter().flatten() {
                    if let Some(c) = &f.configured {
                        println!("# in force: {} = {} (configured: {c})", f.file, f.in_force);
                    }
                }
            }
            // A damaged file: show what it holds, then the error naming the bad key.
            Err(e @ Error::BadConfigFile { .. }) => {
                if let (false, Ok(Some(bytes))) = (json, zone::config_bytes(ctx, &z)) {
                    print!("{}", String::from_utf8_lossy(&bytes));
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        },
        ConfigCmd::Edit { zone: z } => {
            let change = config_edit(ctx, &z)?;
            if !json {
                println!("zone '{z}': config written");
            }
            super::dayto::config_change(&change, json);
        }
        ConfigCmd::Set {
            zone: z,
            assignments,
            when,
        } => {
            let change = zone::config_set(ctx, &z, &assignments, when.apply_to())?;
            super::dayto::config_change(&change, json);
        }
        ConfigCmd::Unset {
            zone: z,
            keys,
            when,
        } => {
            let change = zone::config_unset(ctx, &z, &keys, when.apply_to())?;
            super::dayto::config_change(&change, json);
        }
        ConfigCmd::Keys => {
            let keys = config::key_help();
            if json {
                output::json(&keys);
            } else {
                output::key_table(&keys);
            }
        }
    }
    Ok(())
}

/// `warren config edit`: the config file's text (what could be read of it) in a private
/// copy, `$VISUAL` / `$EDITOR` (else `vi`) on the copy, then the zone layer validates
/// and writes it. An invalid result is not written and the copy is kept for another try.
fn config_edit(ctx: &Context, zone_name: &str) -> Result<zone::ConfigChange> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let original = zone::config_bytes(ctx, zone_name)?;
    let text = match &original {
        Some(b) => String::from_utf8_lossy(b).into_owned(),
        None => "# config.toml was missing: name the zone's template at least, e.g.\n# template = \"host\"\n".into(),
    };
    let copy = std::env::temp_dir().join(format!(
        "warren-config-{zone_name}-{}.toml",
        crate::fsutil::unique_suffix()
    ));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&copy)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .ctx(|| {
            format!(
                "zone '{zone_name}': writing the copy to edit, {}",
                copy.display()
            )
        })?;
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .ok()
        .filter(|e| !e.trim().is_empty())
        .unwrap_or_else(|| "vi".into());
    // Through the shell, as git and crontab do: $EDITOR may carry arguments.
    let status = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(&copy)
        .status()
        .ctx(|| format!("zone '{zone_name}': running the editor {editor:?}"))?;
    let kept = |e: Error| {
        eprintln!(
            "warren: nothing was written; your edited copy is kept at {}",
            copy.display()
        );
        e
    };
    if !status.success() {
        return Err(kept(Error::Invalid(format!(
            "zone '{zone_name}': the editor {editor:?} exited with {status}; set EDITOR to a working editor"
        ))));
    }
    let edited =
        crate::fsutil::read_text_bounded(&copy, crate::fsutil::MAX_SMALL_FILE).map_err(|e| {
            kept(Error::Invalid(format!(
                "zone '{zone_name}': the edited copy {}: {e}",
                copy.display()
            )))
        })?;
    let done = zone::config_replace(ctx, zone_name, original.as_deref(), &edited).map_err(kept)?;
    let _ = std::fs::remove_file(&copy);
    Ok(done)
}
