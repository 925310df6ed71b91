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
        /// Clone the source's snapshot of this name (`clone --snapshot`).
        #[serde(default)]
        snapshot: Option<String>,
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
    /// `template create NAME --from-zone ZONE`.
    TemplatePublish {
        name: String,
        zone: String,
    },
    /// `template create NAME --from-oci ARCHIVE [--image REF]`.
    TemplateOci {
        name: String,
        archive: PathBuf,
        image: Option<String>,
    },
    Suspend {
        zone: String,
    },
    Resume {
        zone: String,
    },
    SnapshotCreate {
        zone: String,
        name: Option<String>,
    },
    SnapshotRestore {
        zone: String,
        name: String,
    },
    SnapshotDelete {
        zone: String,
        name: String,
    },
    /// `export ZONE FILE [--with-template] [--snapshot NAME]`.
    Export {
        zone: String,
        file: PathBuf,
        with_template: bool,
        snapshot: Option<String>,
    },
    /// `import FILE [NAME] [--with-template]`; `zone` is the name given, if any.
    Import {
        file: PathBuf,
        zone: Option<String>,
        with_template: bool,
    },
    /// `bench density --zones STEPS`: progress lines (`{"progress": ...}`) on stdout
    /// before the reply, whose object is `results.json`'s.
    Bench {
        steps: Vec<usize>,
        busybox: bool,
        idle_ms: u64,
        /// Also write results.json, report.md and the charts there (`--out`).
        out: Option<PathBuf>,
    },
    /// `bench metrics --zones STEPS --scrapes N`: progress lines, then the results.
    BenchMetrics {
        steps: Vec<usize>,
        scrapes: usize,
        out: Option<PathBuf>,
    },
    /// `bench snapshot --repeat N --data-mib M`: progress lines, then its figures.
    BenchSnapshot {
        repeat: usize,
        data_mib: u64,
    },
    /// `warren demo --zones N [--net bridge]`: progress lines, then its report.
    Demo {
        zones: usize,
        bridge: bool,
    },
    /// Remove what a killed `bench` left: its zones, its templates, its scratch dir.
    BenchCleanup {
        pid: u32,
    },
    ProfileCreate {
        name: String,
        set: Vec<String>,
    },
    ProfileSet {
        name: String,
        set: Vec<String>,
    },
    ProfileUnset {
        name: String,
        keys: Vec<String>,
    },
    ProfileDelete {
        name: String,
    },
    /// `warren gc` (it skips busy zones without waiting).
    Gc,
    /// `warren proc-views [--refresh]`: it takes each zone's lock, and a refresh
    /// enters zones' mount namespaces, so it runs here like a changing verb.
    ProcViews {
        refresh: bool,
    },
    /// `warren swap enable` (size in bytes).
    SwapEnable {
        size: u64,
        file: Option<PathBuf>,
        zram: bool,
        zram_algorithm: Option<String>,
        swappiness: u64,
    },
    /// `warren swap disable`.
    SwapDisable,
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
/// `--busybox`, `--from-oci`, `--from-zone`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemplateFrom {
    Host,
    Dir,
    Tar,
    Busybox,
    /// An OCI image archive (`path`, and `image` to pick one of several).
    Oci,
    /// An installed zone's root (`zone`): the API sends [`Verb::TemplatePublish`].
    Zone,
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
            | Verb::ConfigUnset { zone, .. }
            | Verb::Suspend { zone }
            | Verb::Resume { zone }
            | Verb::SnapshotCreate { zone, .. }
            | Verb::SnapshotRestore { zone, .. }
            | Verb::SnapshotDelete { zone, .. }
            | Verb::Export { zone, .. } => zone,
            Verb::Import { zone, .. } => zone.as_deref().unwrap_or(""),
            Verb::TemplateCreate { name, .. }
            | Verb::TemplateDelete { name }
            | Verb::TemplatePublish { name, .. }
            | Verb::TemplateOci { name, .. } => name,
            Verb::Bench { .. }
            | Verb::BenchMetrics { .. }
            | Verb::Demo { .. }
            | Verb::BenchSnapshot { .. }
            | Verb::BenchCleanup { .. } => "bench",
            Verb::ProfileCreate { name, .. }
            | Verb::ProfileSet { name, .. }
            | Verb::ProfileUnset { name, .. }
            | Verb::ProfileDelete { name } => name,
            Verb::Gc => "gc",
            Verb::ProcViews { .. } => "proc-views",
            Verb::SwapEnable { .. } | Verb::SwapDisable => "swap",
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

/// `v` with the verb's warnings (it was done all the same), as the CLI's `--json` has
/// them.
fn with_warnings(mut v: Value, warnings: Vec<String>) -> Value {
    if !warnings.is_empty() {
        v["warnings"] = json!(warnings);
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
        Verb::Clone {
            source,
            zone: z,
            snapshot,
        } => {
            zone::clone_from(ctx, &source, &z, snapshot.as_deref())?;
            let mut v = result(&z, "clone", &Outcome::Done);
            v["source"] = json!(source);
            if let Some(s) = snapshot {
                v["snapshot"] = json!(s);
            }
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
            let (o, h) = zone::halt(ctx, &z, timeout_s.map(Duration::from_secs))?;
            let mut v = result(&z, "halt", &o);
            if o == Outcome::Done {
                v["graceful"] = json!(h.graceful);
            }
            with_warnings(v, h.warnings)
        }
        Verb::Reboot { zone: z, timeout_s } => {
            let warnings = zone::reboot(ctx, &z, timeout_s.map(Duration::from_secs))?;
            with_warnings(result(&z, "reboot", &Outcome::Done), warnings)
        }
        Verb::Uninstall { zone: z } => result(&z, "uninstall", &zone::uninstall(ctx, &z)?),
        Verb::Delete { zone: z, force } => {
            let warnings = zone::delete(ctx, &z, force)?;
            with_warnings(result(&z, "delete", &Outcome::Done), warnings)
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
                (TemplateFrom::Oci, Some(archive)) => Source::Oci {
                    archive,
                    image: None,
                },
                (TemplateFrom::Dir | TemplateFrom::Tar | TemplateFrom::Oci, None) => {
                    return Err(warren::Error::Invalid(
                        "templates from a directory, a tarball or an OCI archive need \"path\": the host path to copy from".into(),
                    ))
                }
                (TemplateFrom::Zone, _) => {
                    return Err(warren::Error::Invalid(
                        "a template from a zone is the verb template_publish (\"zone\": the zone to publish)".into(),
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
        Verb::TemplatePublish { name, zone: z } => {
            to_json(&zone::publish::publish(ctx, &name, &z)?)
        }
        Verb::TemplateOci {
            name,
            archive,
            image,
        } => {
            let (kind, _) = warren::storage::choose(ctx.layout.root(), &ctx.host.proc)?;
            let source = Source::Oci { archive, image };
            to_json(&template::create(&ctx.layout, &name, &source, kind)?)
        }
        Verb::Suspend { zone: z } => {
            let (o, r) = zone::suspend(ctx, &z)?;
            with_report(result(&z, "suspend", &o), &o, &r)
        }
        Verb::Resume { zone: z } => {
            let (o, r) = zone::resume(ctx, &z)?;
            with_report(result(&z, "resume", &o), &o, &r)
        }
        Verb::SnapshotCreate { zone: z, name } => {
            to_json(&zone::snapshot::create(ctx, &z, name.as_deref())?)
        }
        Verb::SnapshotRestore { zone: z, name } => {
            zone::snapshot::restore(ctx, &z, &name)?;
            snapshot_result(&z, "snapshot-restore", &name)
        }
        Verb::SnapshotDelete { zone: z, name } => {
            zone::snapshot::delete(ctx, &z, &name)?;
            snapshot_result(&z, "snapshot-delete", &name)
        }
        Verb::Export {
            zone: z,
            file,
            with_template,
            snapshot,
        } => to_json(&zone::archive::export(
            ctx,
            &z,
            &file,
            with_template,
            snapshot.as_deref(),
        )?),
        Verb::Import {
            file,
            zone: z,
            with_template,
        } => to_json(&zone::archive::import(
            ctx,
            &file,
            z.as_deref(),
            with_template,
        )?),
        v @ (Verb::Bench { .. }
        | Verb::BenchMetrics { .. }
        | Verb::BenchSnapshot { .. }
        | Verb::Demo { .. }
        | Verb::BenchCleanup { .. }) => crate::helper_bench::run(ctx, v)?,
        Verb::ProfileCreate { name, set } => {
            to_json(&warren::profile::create(&ctx.layout, &name, &set)?)
        }
        Verb::ProfileSet { name, set } => to_json(&warren::profile::set(&ctx.layout, &name, &set)?),
        Verb::ProfileUnset { name, keys } => {
            to_json(&warren::profile::unset(&ctx.layout, &name, &keys)?)
        }
        Verb::ProfileDelete { name } => {
            warren::profile::delete(&ctx.layout, &name)?;
            json!({ "profile": name, "verb": "delete", "changed": true })
        }
        // Bounded by the daemon's lock wait, as the CLI's gc by --wait.
        Verb::Gc => to_json(&zone::gc(ctx)?),
        Verb::ProcViews { refresh } => to_json(&zone::proc_views(ctx, refresh)?),
        Verb::SwapEnable {
            size,
            file,
            zram,
            zram_algorithm,
            swappiness,
        } => {
            ctx.require_root()?;
            let o = warren::swap::EnableOptions {
                size,
                file,
                zram,
                zram_algorithm,
                swappiness,
            };
            let (r, already) =
                warren::swap::enable(&ctx.layout, &ctx.host.proc, &ctx.host.sys, &o)?;
            let mut v = to_json(&r);
            v["changed"] = json!(!already);
            v
        }
        Verb::SwapDisable => {
            ctx.require_root()?;
            match warren::swap::disable(&ctx.layout, &ctx.host.proc, &ctx.host.sys)? {
                Some(r) => {
                    let mut v = to_json(&r);
                    v["changed"] = json!(true);
                    v
                }
                None => json!({ "changed": false, "note": "warren has no swap on in this root" }),
            }
        }
    })
}

/// The CLI's `--json` row of suspend and resume: the verb result, and the report when
/// it did something.
fn with_report<R: Serialize>(mut v: Value, o: &Outcome, r: &R) -> Value {
    if let (Outcome::Done, Value::Object(fields)) = (o, to_json(r)) {
        v.as_object_mut()
            .expect("a verb result is an object")
            .extend(fields);
    }
    v
}

/// The CLI's `--json` result of snapshot restore and delete.
fn snapshot_result(z: &str, verb: &str, name: &str) -> Value {
    json!({ "zone": z, "verb": verb, "snapshot": name, "changed": true })
}

/// A library API object as JSON.
pub(crate) fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("API objects serialise")
}
