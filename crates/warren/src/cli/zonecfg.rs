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
            if !json {
                println!("template '{name}' deleted");
            }
        }
    }
    Ok(())
}

pub(super) fn config_cmd(ctx: &Context, json: bool, c: ConfigCmd) -> Result<()> {
    let note = |st: crate::state::ZoneState| {
        if st >= crate::state::ZoneState::Ready && !json {
            println!("(the zone is {st}; the change takes effect at its next boot)");
        }
    };
    match c {
        ConfigCmd::Show { zone: z } => {
            let zn = zone::load(ctx, &z)?;
            if json {
                output::json(&zn.config);
            } else {
                print!("{}", config::to_toml(&zn.config));
            }
        }
        ConfigCmd::Set {
            zone: z,
            assignments,
        } => {
            let (cfg, st) = zone::config_set(ctx, &z, &assignments)?;
            if json {
                output::json(&cfg);
            }
            note(st);
        }
        ConfigCmd::Unset { zone: z, keys } => {
            let (cfg, st) = zone::config_unset(ctx, &z, &keys)?;
            if json {
                output::json(&cfg);
            }
            note(st);
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
