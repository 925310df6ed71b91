//! The verbs that change zones, run in a one-shot child process of this same binary.
//!
//! The daemon is multi-threaded (tokio), and warren forks and clones only from a
//! single-threaded process (`warren_sys::spawn` checks it: a boot refuses otherwise).
//! So every changing verb runs in `warren-daemon --helper`, started per verb: it
//! reads one [`Verb`] as JSON on stdin, calls the same library function as the CLI
//! (under the same per-zone locks), and writes one [`Reply`] on stdout, the verb's API
//! object or its typed error already mapped ([`ApiError`]). The helper holds nothing
//! once it exits; a zone it booted is reparented exactly as after `warren boot`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use warren::layout::{HostPaths, Layout};
use warren::storage::template::{self, Source};
use warren::zone::{self, ApplyTo, Context, Outcome};

use crate::error::ApiError;

/// One changing verb, as the API takes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "verb", rename_all = "snake_case")]
pub enum Verb {
    Create {
        zone: String,
        template: Option<String>,
        #[serde(default)]
        set: Vec<String>,
        #[serde(default)]
        profiles: Vec<String>,
    },
    Install {
        zone: String,
    },
    Clone {
        source: String,
        zone: String,
    },
    Boot {
        zone: String,
        watch_ms: u64,
    },
    Halt {
        zone: String,
        timeout_s: Option<u64>,
    },
    Reboot {
        zone: String,
        timeout_s: Option<u64>,
    },
    Uninstall {
        zone: String,
    },
    Delete {
        zone: String,
        force: bool,
    },
    Rename {
        zone: String,
        new: String,
    },
    ConfigSet {
        zone: String,
        set: Vec<String>,
        apply: Apply,
    },
    ConfigUnset {
        zone: String,
        keys: Vec<String>,
        apply: Apply,
    },
    TemplateCreate {
        name: String,
        from: TemplateFrom,
        path: Option<PathBuf>,
    },
    TemplateDelete {
        name: String,
    },
}

/// Where a config change goes (`--live-only`, `--next-boot`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Apply {
    #[default]
    Both,
    LiveOnly,
    NextBoot,
}

/// The kinds of template the CLI makes (`--from host`, `--from-dir`, `--from-tar`,
/// `--busybox`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemplateFrom {
    Host,
    Dir,
    Tar,
    Busybox,
}

impl Verb {
    /// The zone (or template) the verb is about, for errors that name none.
    pub fn subject(&self) -> &str {
        match self {
            Verb::Create { zone, .. }
            | Verb::Install { zone }
            | Verb::Clone { zone, .. }
            | Verb::Boot { zone, .. }
            | Verb::Halt { zone, .. }
            | Verb::Reboot { zone, .. }
            | Verb::Uninstall { zone }
            | Verb::Delete { zone, .. }
            | Verb::Rename { zone, .. }
            | Verb::ConfigSet { zone, .. }
            | Verb::ConfigUnset { zone, .. } => zone,
            Verb::TemplateCreate { name, .. } | Verb::TemplateDelete { name } => name,
        }
    }
}

/// What the helper writes back.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Ok(Value),
    Err(ApiError),
}

/// The request handed to the helper: the state root, the lock wait bound, the verb.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub root: PathBuf,
    pub lock_wait_s: u64,
    pub verb: Verb,
}

/// The helper's own `main`: one request from stdin, one reply on stdout. Exit 0
/// whenever a reply was written (the reply carries the verb's error).
pub fn main() -> i32 {
    warren_sys::signal::default_sigpipe();
    warren_sys::fds::prime_thread_check();
    let mut input = String::new();
    if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut input) {
        eprintln!("warren-daemon --helper: reading the request on stdin: {e}");
        return 1;
    }
    let req: Request = match serde_json::from_str(&input) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("warren-daemon --helper: the request is not a verb: {e}");
            return 1;
        }
    };
    warren::lock::set_wait_limit(Duration::from_secs(req.lock_wait_s));
    let ctx = Context::new(Layout::new(req.root.clone()), HostPaths::default());
    let subject = req.verb.subject().to_string();
    let reply = match run(&ctx, req.verb) {
        Ok(v) => Reply::Ok(v),
        Err(e) => Reply::Err(ApiError::from_warren(&e).about(&subject)),
    };
    println!(
        "{}",
        serde_json::to_string(&reply).expect("replies serialise")
    );
    0
}

/// The result object of a verb on one zone (the CLI's `--json` form).
fn result(zone: &str, verb: &str, o: &Outcome) -> Value {
    let mut v = json!({ "zone": zone, "verb": verb, "changed": *o == Outcome::Done });
    if let Outcome::AlreadyDone(why) = o {
        v["note"] = json!(why);
    }
    v
}

fn apply_to(a: Apply) -> ApplyTo {
    match a {
        Apply::Both => ApplyTo::Both,
        Apply::LiveOnly => ApplyTo::LiveOnly,
        Apply::NextBoot => ApplyTo::NextBoot,
    }
}

/// Run one verb with the library, as the CLI would.
pub fn run(ctx: &Context, verb: Verb) -> warren::Result<Value> {
    Ok(match verb {
        Verb::Create {
            zone: z,
            template,
            set,
            profiles,
        } => {
            let cfg = zone::create_with_profiles(
                ctx,
                &z,
                template.as_deref(),
                None,
                &set,
                Some(&profiles),
            )?;
            to_json(&cfg)
        }
        Verb::Install { zone: z } => result(&z, "install", &zone::install(ctx, &z)?),
        Verb::Clone { source, zone: z } => {
            zone::clone(ctx, &source, &z)?;
            let mut v = result(&z, "clone", &Outcome::Done);
            v["source"] = json!(source);
            v
        }
        Verb::Boot { zone: z, watch_ms } => {
            let (o, r) = zone::boot_watched(ctx, &z, Duration::from_millis(watch_ms))?;
            let mut v = result(&z, "boot", &o);
            if o == Outcome::Done {
                v["boot_ms"] = json!(r.total.as_secs_f64() * 1000.0);
                v["init_pid"] = json!(r.init_pid);
            }
            v
        }
        Verb::Halt { zone: z, timeout_s } => {
            let (o, graceful) = zone::halt(ctx, &z, timeout_s.map(Duration::from_secs))?;
            let mut v = result(&z, "halt", &o);
            if o == Outcome::Done {
                v["graceful"] = json!(graceful);
            }
            v
        }
        Verb::Reboot { zone: z, timeout_s } => {
            zone::reboot(ctx, &z, timeout_s.map(Duration::from_secs))?;
            result(&z, "reboot", &Outcome::Done)
        }
        Verb::Uninstall { zone: z } => result(&z, "uninstall", &zone::uninstall(ctx, &z)?),
        Verb::Delete { zone: z, force } => {
            zone::delete(ctx, &z, force)?;
            result(&z, "delete", &Outcome::Done)
        }
        Verb::Rename { zone: z, new } => {
            zone::rename(ctx, &z, &new)?;
            json!({ "zone": new, "verb": "rename", "changed": true, "source": z })
        }
        Verb::ConfigSet {
            zone: z,
            set,
            apply,
        } => to_json(&zone::config_set(ctx, &z, &set, apply_to(apply))?),
        Verb::ConfigUnset {
            zone: z,
            keys,
            apply,
        } => to_json(&zone::config_unset(ctx, &z, &keys, apply_to(apply))?),
        Verb::TemplateCreate { name, from, path } => {
            let source = match (from, path) {
                (TemplateFrom::Host, _) => Source::Host,
                (TemplateFrom::Busybox, _) => Source::Busybox,
                (TemplateFrom::Dir, Some(p)) => Source::Dir(p),
                (TemplateFrom::Tar, Some(p)) => Source::Tar(p),
                (TemplateFrom::Dir | TemplateFrom::Tar, None) => {
                    return Err(warren::Error::Invalid(
                        "templates from a directory or a tarball need \"path\": the host path to copy from".into(),
                    ))
                }
            };
            let (kind, _) = warren::storage::choose(ctx.layout.root(), &ctx.host.proc)?;
            to_json(&template::create(&ctx.layout, &name, &source, kind)?)
        }
        Verb::TemplateDelete { name } => {
            template::delete(&ctx.layout, &name)?;
            json!({ "template": name, "verb": "delete", "changed": true })
        }
    })
}

/// A library API object as JSON.
fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("API objects serialise")
}
