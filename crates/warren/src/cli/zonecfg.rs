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
            from_oci,
            image,
            from_zone,
        } => {
            if let Some(z) = from_zone {
                let m = zone::publish::publish(ctx, &name, &z)?;
                if json {
                    output::json(&m);
                } else {
                    println!(
                        "template '{name}' created from zone '{z}' ({} backend)",
                        m.backend
                    );
                }
                return Ok(());
            }
            let source = match (from, from_dir, from_tar, busybox, from_oci) {
                (Some(_), ..) => Source::Host,
                (_, Some(d), ..) => Source::Dir(d),
                (_, _, Some(f), ..) => Source::Tar(f),
                (_, _, _, true, _) => Source::Busybox,
                (.., Some(archive)) => Source::Oci { archive, image },
                _ => {
                    return Err(Error::Invalid(
                        "say where the template comes from: --from host, --from-dir PATH, --from-tar FILE, --from-oci ARCHIVE, --busybox or --from-zone ZONE".into(),
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
                if let Some(i) = &m.image {
                    output::image_lines(i);
                }
            }
        }
        TemplateCmd::Info { name } => {
            let m = template::load(&ctx.layout, &name)?;
            if json {
                output::json(&m);
            } else {
                output::template_info(&m);
            }
        }
        TemplateCmd::List => super::snapshot_cmd::template_list(ctx, json)?,
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
        ConfigCmd::Keys => config_keys(ctx, json)?,
        ConfigCmd::Get { zone: z, key } => config_get(ctx, json, &z, &key)?,
    }
    Ok(())
}

/// One row of `warren config keys --json`.
#[derive(serde::Serialize)]
struct KeyRow {
    name: &'static str,
    example: &'static str,
    /// What a new zone gets: the `default` profile's value if it sets one, else the
    /// built-in default.
    default: String,
    /// Whether the key can change on a running zone (cgroup limits); the others take
    /// effect at the next boot.
    live: bool,
    help: &'static str,
}

/// `warren config keys`: every key with an example, its default, whether it is live.
fn config_keys(ctx: &Context, json: bool) -> Result<()> {
    // The default profile is root's; as anyone else, show the built-in defaults.
    let profile = if warren_sys::geteuid() == 0 {
        crate::profile::read(&ctx.layout, crate::profile::DEFAULT)?.unwrap_or_default()
    } else {
        toml::Table::new()
    };
    let mut from_profile = Vec::new();
    config::flatten_table(&profile, &mut from_profile);
    let rows: Vec<KeyRow> = config::keys_sorted()
        .into_iter()
        .map(|k| KeyRow {
            name: k.name,
            example: k.example,
            default: from_profile
                .iter()
                .find(|(n, _)| n == k.name)
                .map(|(_, v)| format!("{v} (profile)"))
                .unwrap_or_else(|| k.default.to_string()),
            live: k.live,
            help: k.help,
        })
        .collect();
    if json {
        output::json(&rows);
    } else {
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|r| {
                vec![
                    r.name.into(),
                    r.example.into(),
                    r.default,
                    if r.live { "yes" } else { "no" }.into(),
                    r.help.into(),
                ]
            })
            .collect();
        output::key_table(&rows);
    }
    Ok(())
}

/// `warren config get ZONE KEY`: the key's value in the zone's config (TOML form), or
/// its default, marked so, when the config does not set it.
fn config_get(ctx: &Context, json: bool, zone_name: &str, key: &str) -> Result<()> {
    let k = config::key(key).ok_or_else(|| Error::config(zone_name, config::unknown_key(key)))?;
    let z = zone::load(ctx, zone_name)?;
    let mut entries = Vec::new();
    config::flatten_table(&config::to_table(&z.config), &mut entries);
    let value = entries.into_iter().find(|(n, _)| n == key).map(|(_, v)| v);
    if json {
        #[derive(serde::Serialize)]
        struct Got<'a> {
            zone: &'a str,
            key: &'a str,
            value: Option<toml::Value>,
            default: &'a str,
            set: bool,
        }
        output::json(&Got {
            zone: zone_name,
            key,
            set: value.is_some(),
            value,
            default: k.default,
        });
        return Ok(());
    }
    // Strings bare, as a script wants them ("512M", not "\"512M\"").
    let bare = |v: &toml::Value| match v {
        toml::Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    match value {
        Some(v) => println!("{}", bare(&v)),
        None => {
            // The host's caps: what the zone boots with (the default profile's, or
            // the built-in ones).
            let d = config::Defaults::load(ctx.layout.root())?;
            let shown = match key {
                "memory.max" => config::format_size(d.memory_max),
                "max-processes" if z.config.limits.max_threads.is_none() => {
                    d.max_processes.to_string()
                }
                _ => k.default.trim_matches('"').to_string(),
            };
            println!("{shown} (default; not set)");
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
