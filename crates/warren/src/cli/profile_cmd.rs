//! `warren profile ...`: named sets of config keys new zones start from
//! (see [`crate::profile`] for how they apply).

use super::*;
use crate::profile::{self, Profile};

pub(super) fn profile_cmd(ctx: &Context, json: bool, c: ProfileCmd) -> Result<()> {
    let l = &ctx.layout;
    let show = |p: &Profile| {
        if json {
            output::json(p);
        } else {
            print!(
                "{}",
                toml::to_string(&p.config).expect("a table always serialises")
            );
        }
    };
    match c {
        ProfileCmd::Create { name, assignments } => {
            let t = profile::create(l, &name, &assignments)?;
            if json {
                output::json(&t);
            } else {
                println!("profile '{name}' created");
            }
        }
        ProfileCmd::Set { name, assignments } => {
            let t = profile::set(l, &name, &assignments)?;
            if json {
                output::json(&t);
            } else {
                println!(
                    "profile '{name}' changed (new zones get it; existing zones keep their config)"
                );
            }
        }
        ProfileCmd::Unset { name, keys } => {
            let t = profile::unset(l, &name, &keys)?;
            if json {
                output::json(&t);
            } else {
                println!(
                    "profile '{name}' changed (new zones get it; existing zones keep their config)"
                );
            }
        }
        ProfileCmd::Show { name } => {
            let p = profile::load(l, &name)?;
            show(&p);
            if !json {
                let users = zones_made_with(ctx, &name);
                eprintln!(
                    "# {}; zones made with it: {}",
                    p.path.display(),
                    if users.is_empty() {
                        "none".into()
                    } else {
                        users.join(", ")
                    }
                );
            }
        }
        ProfileCmd::List => {
            let names = profile::list(l)?;
            if json {
                output::json(&names);
            } else {
                let rows: Vec<Vec<String>> = names
                    .iter()
                    .map(|n| {
                        let keys = profile::read(l, n)
                            .map(|t| {
                                let mut e = Vec::new();
                                config::flatten_table(&t.unwrap_or_default(), &mut e);
                                e.len().to_string()
                            })
                            .unwrap_or_else(|_| "unreadable".into());
                        vec![n.clone(), keys, zones_made_with(ctx, n).len().to_string()]
                    })
                    .collect();
                output::table(&["NAME", "KEYS", "ZONES"], &rows);
            }
        }
        ProfileCmd::Delete { name } => {
            profile::delete(l, &name)?;
            if !json {
                println!("profile '{name}' deleted (zones made with it keep their config)");
            }
        }
    }
    Ok(())
}

/// The zones whose state records that they were made with profile `name`.
fn zones_made_with(ctx: &Context, name: &str) -> Vec<String> {
    zone::names_in(&ctx.layout)
        .unwrap_or_default()
        .into_iter()
        .filter(|z| {
            crate::state::load_lifecycle(&ctx.layout.zone_dir(z))
                .ok()
                .flatten()
                .is_some_and(|lc| lc.profiles.iter().any(|p| p == name))
        })
        .collect()
}
