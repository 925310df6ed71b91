//! `config set` / `config unset`: edit a zone's config atomically.

use super::*;

/// Apply `edit` to the zone's config table, validate, and write it durably.
fn edit_config(
    ctx: &Context,
    name: &str,
    edit: impl FnOnce(&mut toml::Table) -> Result<()>,
) -> Result<(ZoneConfig, ZoneState)> {
    let _lock = zone_lock(ctx, name)?;
    let z = load(ctx, name)?;
    let mut table = read_config_table(name, &z.dir)?;
    edit(&mut table)?;
    let cfg = config::from_table(name, &table)?;
    validate_for_host(ctx, name, &cfg)?;
    let st = z.state(ctx);
    if cfg.template != z.config.template {
        if z.lifecycle.state != ZoneState::Configured {
            return Err(Error::WrongState {
                zone: name.into(),
                state: st,
                remedy: "its template can change only while it is configured; uninstall it first"
                    .into(),
            });
        }
        template::load(&ctx.layout, &cfg.template)?;
    }
    write_config(&z.dir, &cfg)?;
    Ok((cfg, st))
}

/// `warren config set ZONE key=value...`. Changes apply at the next boot.
pub fn config_set(
    ctx: &Context,
    name: &str,
    assignments: &[String],
) -> Result<(ZoneConfig, ZoneState)> {
    edit_config(ctx, name, |t| {
        for a in assignments {
            let (k, v) = config::parse_assignment(name, a)?;
            config::set_in_table(name, t, &k, v)?;
        }
        Ok(())
    })
}

/// `warren config unset ZONE key...`.
pub fn config_unset(ctx: &Context, name: &str, keys: &[String]) -> Result<(ZoneConfig, ZoneState)> {
    edit_config(ctx, name, |t| {
        for k in keys {
            config::unset_in_table(name, t, k)?;
        }
        Ok(())
    })
}
