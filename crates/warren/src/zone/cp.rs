//! `warren cp`: files and trees into and out of a zone, running or halted.
//!
//! Two processes, one on each side, joined by a tar stream ([`super::cp_tar`]):
//!
//! - this process stays on the host with the host's privileges, and touches only the
//!   host path the operator named;
//! - a helper (this binary again, hidden verb `cp-helper`) joins the zone's cgroups and
//!   namespaces exactly as `warren login` does and becomes the zone's root; it
//!   resolves the zone path in the zone's own mount namespace, where every symlink the
//!   zone planted leads only to the zone's own files, with the zone root's rights.
//!
//! Copying through the zone's mount namespace, not into the overlay's upper directory
//! from the host: changing the upper layer of a mounted overlay is undefined (the
//! kernel's overlayfs documentation, "Changes to underlying filesystems"), writes
//! there would bypass the zone's disk.max image and cgroups, and a host-side walk
//! would have to re-implement the zone's view (lower layers, whiteouts, its mounts).
//! Through the zone, files copied in are created by the zone's root, so they carry the
//! zone's ids (mapped into its host range by the kernel: `--uid 33` is the zone's 33),
//! are charged to the zone and land on the filesystem the zone sees at that path.
//!
//! A halted zone is entered the same way by a helper that first builds the zone's root
//! in a private mount namespace (`cp_offline`).
//!
//! Out of the zone, the stream is unpacked into a fresh private directory beside the
//! destination and renamed into place: nothing in it can name a host path, and nothing
//! is written until the whole stream has been checked.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

use super::cp_tar::{self, Counts, Stamp};
use super::{load, Context};
use crate::error::{Error, IoContext, Result};
use crate::state::ZoneState;

/// `warren cp`'s options.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpOptions {
    pub recursive: bool,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub mode: Option<u32>,
}

/// What a copy did (`--json`).
#[derive(Debug, Serialize)]
pub struct CpReport {
    pub zone: String,
    /// `in` (host to zone) or `out`.
    pub direction: &'static str,
    pub src: String,
    pub dst: String,
    #[serde(flatten)]
    pub counts: Counts,
}

/// One side of a copy: a host path, or `ZONE:PATH`.
#[derive(Debug, PartialEq, Eq)]
enum Side {
    Host(PathBuf),
    Zone(String, String),
}

/// `ZONE:PATH` when the part before the first ':' is a valid zone name and the path is
/// absolute; anything else is a host path (`./a:b` stays a host path).
fn side(arg: &str) -> Side {
    match arg.split_once(':') {
        Some((z, p)) if crate::names::problem(z).is_none() && !z.is_empty() => {
            Side::Zone(z.to_string(), p.to_string())
        }
        _ => Side::Host(PathBuf::from(arg)),
    }
}

/// The last name of `path`, for messages and as the top of the stream.
fn base_name(path: &Path) -> Option<String> {
    path.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// `warren cp SRC DST`: exactly one side is `ZONE:PATH`.
pub fn cp(ctx: &Context, src: &str, dst: &str, opts: &CpOptions) -> Result<CpReport> {
    ctx.require_root()?;
    match (side(src), side(dst)) {
        (Side::Host(from), Side::Zone(zone, to)) => copy_in(ctx, &zone, &from, &to, opts),
        (Side::Zone(zone, from), Side::Host(to)) => {
            if opts.uid.is_some() || opts.gid.is_some() || opts.mode.is_some() {
                return Err(Error::Invalid(format!(
                    "zone '{zone}': --uid, --gid and --mode set what is copied into a zone; out of it files are the caller's, with their modes less set-id bits"
                )));
            }
            copy_out(ctx, &zone, &from, &to, opts.recursive)
        }
        (Side::Zone(..), Side::Zone(..)) => Err(Error::Invalid(
            "cp copies between the host and one zone; copy out to a host path, then in".into(),
        )),
        (Side::Host(..), Side::Host(..)) => Err(Error::Invalid(format!(
            "cp {src} {dst}: name the zone on one side as ZONE:/path"
        ))),
    }
}

/// Check that the zone runs and its path is absolute.
fn check(ctx: &Context, zone: &str, path: &str) -> Result<()> {
    let mut z = load(ctx, zone)?;
    if z.state(ctx) == ZoneState::Suspended {
        super::wake(ctx, zone)?;
        z = load(ctx, zone)?;
    }
    let state = z.state(ctx);
    if !matches!(state, ZoneState::Running | ZoneState::Installed) {
        return Err(Error::WrongState {
            zone: zone.into(),
            state,
            remedy: "warren cp needs it running or installed (halted): install it, or wait until it has booted".into(),
        });
    }
    if !path.starts_with('/') {
        return Err(Error::Invalid(format!(
            "zone '{zone}': {path:?}: give an absolute path inside the zone, e.g. {zone}:/root/"
        )));
    }
    Ok(())
}

/// The helper, joined to `zone`, with `args` after the verb; stdin and stdout piped.
fn helper(ctx: &Context, zone: &str, args: &[&str]) -> Result<std::process::Child> {
    let exe = std::env::current_exe().ctx(|| "finding the warren binary".to_string())?;
    Command::new(exe)
        .arg("--root")
        .arg(ctx.layout.root())
        .arg("cp-helper")
        .arg(zone)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ctx(|| format!("zone '{zone}': starting the cp helper"))
}

/// Wait for the helper; its failure is the copy's, in its own words.
fn finish(zone: &str, mut child: std::process::Child) -> Result<()> {
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = (&mut e).take(64 << 10).read_to_string(&mut err);
    }
    let status = child
        .wait()
        .ctx(|| format!("zone '{zone}': waiting for the cp helper"))?;
    if status.success() {
        return Ok(());
    }
    // Its printed cause chain ("warren: error: X", "  1: Y") as one line: "X: Y".
    let msg = err
        .lines()
        .map(|l| {
            let l = l.trim().trim_start_matches("warren: error: ");
            l.split_once(": ")
                .filter(|(n, _)| n.parse::<u32>().is_ok())
                .map_or(l, |(_, rest)| rest)
        })
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(": ");
    Err(Error::Refused(if msg.is_empty() {
        format!("zone '{zone}': the cp helper failed ({status})")
    } else {
        msg.to_string()
    }))
}

fn copy_in(ctx: &Context, zone: &str, from: &Path, to: &str, o: &CpOptions) -> Result<CpReport> {
    check(ctx, zone, to)?;
    let top = base_name(from).ok_or_else(|| {
        Error::Invalid(format!(
            "{}: name a file or directory (its last name is the name in the zone)",
            from.display()
        ))
    })?;
    let meta = std::fs::metadata(from).ctx(|| format!("cp: {}", from.display()))?;
    if meta.is_dir() && !o.recursive {
        return Err(Error::Invalid(format!(
            "{} is a directory; copy it with -r",
            from.display()
        )));
    }
    let mut child = helper(ctx, zone, &["in", to, &top])?;
    let stdin = child.stdin.take().expect("piped");
    let stamp = Stamp {
        uid: Some(o.uid.unwrap_or(0)),
        gid: Some(o.gid.unwrap_or(0)),
        mode: o.mode,
    };
    // A helper that fails closes its stdin: the write then fails with EPIPE (not a
    // signal), and the helper's own message says why.
    warren_sys::signal::ignore(warren_sys::libc::SIGPIPE);
    let packed = cp_tar::pack(from, &top, o.recursive, stamp, stdin);
    drop(child.stdout.take());
    finish(zone, child)?;
    let counts = packed.ctx(|| format!("zone '{zone}': sending {}", from.display()))?;
    Ok(CpReport {
        zone: zone.into(),
        direction: "in",
        src: from.display().to_string(),
        dst: format!("{zone}:{to}"),
        counts,
    })
}

fn copy_out(ctx: &Context, zone: &str, from: &str, to: &Path, recursive: bool) -> Result<CpReport> {
    check(ctx, zone, from)?;
    let top = base_name(Path::new(from)).ok_or_else(|| {
        Error::Invalid(format!(
            "zone '{zone}': {from:?}: name a file or directory inside the zone, not /"
        ))
    })?;
    // DST an existing directory: the copy goes in it, under the source's name.
    let dest = if to.is_dir() {
        to.join(&top)
    } else {
        to.to_path_buf()
    };
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = tempdir_in(&parent)?;
    let result = (|| -> Result<Counts> {
        let mut child = helper(
            ctx,
            zone,
            &["out", from, if recursive { "-r" } else { "-" }],
        )?;
        drop(child.stdin.take());
        let stdout = child.stdout.take().expect("piped");
        let unpacked = cp_tar::unpack_on_host(stdout, &tmp.0, &top);
        finish(zone, child)?;
        let counts = unpacked.ctx(|| format!("zone '{zone}': receiving {from}"))?;
        std::fs::rename(tmp.0.join(&top), &dest).ctx(|| {
            format!(
                "zone '{zone}': moving the copy of {from} to {} (an existing directory there must be empty: remove it first)",
                dest.display()
            )
        })?;
        Ok(counts)
    })();
    let counts = result?;
    Ok(CpReport {
        zone: zone.into(),
        direction: "out",
        src: format!("{zone}:{from}"),
        dst: dest.display().to_string(),
        counts,
    })
}

/// A fresh private directory in `parent`, removed on drop.
struct TempDir(PathBuf);

fn tempdir_in(parent: &Path) -> Result<TempDir> {
    use std::os::unix::fs::DirBuilderExt;
    let mut n = 0u32;
    loop {
        let p = parent.join(format!(".warren-cp-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&p) {
            Ok(()) => return Ok(TempDir(p)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
            Err(e) => {
                return Err(Error::Io {
                    context: format!(
                        "cp: making a temporary directory in {} (the destination's directory must exist and be writable)",
                        parent.display()
                    ),
                    source: e,
                })
            }
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The hidden `cp-helper` verb: join the running `zone` and do its side of a copy.
/// `in DST TOP`: unpack stdin at DST (in it, as TOP, when DST is a directory; else as
/// DST itself). `out SRC -r|-`: pack SRC onto stdout.
pub fn helper_main(ctx: &Context, zone: &str, args: &[String]) -> Result<()> {
    ctx.require_root()?;
    let z = load(ctx, zone)?;
    // Running: join it as a login does. Halted: build its root in a mount namespace of
    // our own and enter that (cp_offline).
    let _entered;
    let _joined;
    if z.state(ctx) == ZoneState::Running {
        let rt = z.runtime.as_ref().expect("a running zone has a runtime");
        let confinement = crate::isolation::Confinement::for_zone(&z.config);
        let zref = crate::runtime::login::ZoneRef {
            zone,
            init: rt.init.expect("a running zone has an init"),
            cgroups: &rt.cgroups,
            confinement: &confinement,
            rlimits: &z.config.rlimits,
            env: &z.config.env,
            proc_root: &ctx.host.proc,
        };
        _joined = crate::runtime::login::join(&zref)?;
    } else {
        let path = args.get(1).map_or("/", String::as_str);
        _entered = super::cp_offline::enter(ctx, zone, path)?;
    }
    // Now in the zone's mount namespace as its root: every path below is the zone's.
    warren_sys::signal::ignore(warren_sys::libc::SIGPIPE);
    match args {
        [dir, path, top] if dir == "in" => {
            let dst = Path::new(path);
            let (into, name) = if dst.is_dir() {
                (dst.to_path_buf(), top.clone())
            } else if path.ends_with('/') {
                return Err(Error::Invalid(format!(
                    "zone '{zone}': {path}: no such directory in the zone; create it first, or drop the trailing '/' to name the copy"
                )));
            } else {
                let name = base_name(dst).ok_or_else(|| {
                    Error::Invalid(format!("zone '{zone}': {path:?}: not a file name"))
                })?;
                let parent = dst.parent().unwrap_or(Path::new("/")).to_path_buf();
                if !parent.is_dir() {
                    return Err(Error::Invalid(format!(
                        "zone '{zone}': {}: no such directory in the zone; create it first (warren login {zone} -- mkdir -p {})",
                        parent.display(),
                        parent.display()
                    )));
                }
                (parent, name)
            };
            cp_tar::unpack_in_zone(std::io::stdin().lock(), &into, &name)
                .ctx(|| format!("zone '{zone}': copying into {path}"))?;
        }
        [dir, path, r] if dir == "out" => {
            let src = Path::new(path);
            let top = base_name(src).unwrap_or_else(|| "root".into());
            cp_tar::pack(
                src,
                &top,
                r == "-r",
                Stamp::default(),
                std::io::stdout().lock(),
            )
            .ctx(|| format!("zone '{zone}': reading {path}"))?;
        }
        _ => return Err(Error::Invalid(
            "cp-helper: expected 'in DST TOP' or 'out SRC -r|-' (an internal verb of warren cp)"
                .into(),
        )),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_are_zone_paths_or_host_paths() {
        assert_eq!(
            side("web1:/etc/x"),
            Side::Zone("web1".into(), "/etc/x".into())
        );
        assert_eq!(side("./a:b"), Side::Host(PathBuf::from("./a:b")));
        assert_eq!(side("/tmp/x"), Side::Host(PathBuf::from("/tmp/x")));
        assert_eq!(
            side("Bad_Name:/x"),
            Side::Host(PathBuf::from("Bad_Name:/x"))
        );
    }
}
