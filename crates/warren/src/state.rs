//! The zone state machine, as Solaris orders it:
//! `configured < incomplete < installed < ready < running < suspended < shutting_down`
//! (`suspended` is beside `running`: frozen, its memory paged out; docs/suspend.md).
//!
//! Two files hold it. `state.json` is the persisted lifecycle (configured, incomplete,
//! installed), written durably. `runtime.json` exists only while the zone is booted and
//! records what a reboot invalidates anyway (init's pid and start time, its cgroups, the
//! boot id); it is written durably too (a power loss must not leave it empty, which
//! ext4 can do to a renamed file whose data was never flushed), and one that is empty
//! or torn anyway is not corruption: [`load_runtime_or_torn`] reports it as
//! [`RuntimeRecord::Torn`] and the zone layer treats it as stale (its cgroups are found
//! by the zone's name). The state a user sees is derived from both plus what the kernel
//! says now ([`observe`]).
//!
//! [`decide`] is the one table of which verb may run in which state.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cgroups::CgroupSet;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::atomic_write;
use crate::storage::BackendKind;

/// A zone's state as users see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ZoneState {
    Configured,
    Incomplete,
    Installed,
    Ready,
    Running,
    /// Frozen with its memory paged out (`warren suspend`); `warren resume` thaws it.
    Suspended,
    ShuttingDown,
}

impl fmt::Display for ZoneState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ZoneState::Configured => "configured",
            ZoneState::Incomplete => "incomplete",
            ZoneState::Installed => "installed",
            ZoneState::Ready => "ready",
            ZoneState::Running => "running",
            ZoneState::Suspended => "suspended",
            ZoneState::ShuttingDown => "shutting_down",
        })
    }
}

/// The persisted part: `state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lifecycle {
    /// Format version of this file.
    pub version: u32,
    /// Configured, Incomplete or Installed (never a runtime state).
    pub state: ZoneState,
    /// The storage backend holding the zone's root, once installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
    /// What was interrupted, when `state` is Incomplete ("install", "uninstall").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_op: Option<String>,
    /// Why the zone was last evicted, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evicted: Option<String>,
    /// The host ids of the zone's user namespace (see `idmap`), once allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idmap: Option<crate::idmap::IdRange>,
    /// How the last run ended when it ended by itself or saw OOM kills; cleared by
    /// the next boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<LastRun>,
    /// The profiles the zone's config was made from at create, in the order applied
    /// (`default` first when it exists; see `profile`). A record: changing a profile
    /// later does not change the zone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<String>,
}

/// How a zone's last run ended, as far as warren could learn it. init's exit status
/// is known only to its parent: the booting `warren` during boot's brief watch
/// ([`crate::zone::BOOT_WATCH`]); an init that dies later is found gone, status
/// unknown (docs/cli.md, "What warren knows about a guest's failure").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastRun {
    /// Unix time in milliseconds when warren learnt it.
    pub at_ms: u64,
    /// init exited by itself (not halted or evicted).
    pub exited: bool,
    /// init's exit status, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    /// The signal that killed init, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// OOM kills inside the zone during the run (v1 memory.oom_control `oom_kill`, v2
    /// memory.events `oom_kill`).
    #[serde(default)]
    pub oom_kills: u64,
}

impl fmt::Display for LastRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.exited {
            parts.push(match (self.status, self.signal) {
                (Some(c), _) => format!("exited (status {c})"),
                (_, Some(s)) => format!("exited (signal {s})"),
                _ => "exited (status unknown)".to_string(),
            });
        }
        if self.oom_kills > 0 {
            parts.push(format!("oom-killed ({})", self.oom_kills));
        }
        f.write_str(&parts.join(", "))
    }
}

pub const STATE_VERSION: u32 = 1;

impl Lifecycle {
    pub fn configured() -> Lifecycle {
        Lifecycle {
            version: STATE_VERSION,
            state: ZoneState::Configured,
            backend: None,
            incomplete_op: None,
            evicted: None,
            idmap: None,
            last_run: None,
            profiles: Vec::new(),
        }
    }
}

/// How to recognise the zone's init: a pid alone may be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitId {
    pub pid: i32,
    /// Field 22 of /proc/<pid>/stat, in clock ticks since boot.
    pub start_time: u64,
}

/// The runtime part: `runtime.json`, present while booted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Runtime {
    /// Ready, Running or ShuttingDown.
    pub state: ZoneState,
    /// /proc/sys/kernel/random/boot_id at boot: a different one means the host rebooted.
    pub boot_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<InitId>,
    pub cgroups: CgroupSet,
    /// Unix time in milliseconds when boot finished.
    #[serde(default)]
    pub booted_at_ms: u64,
    /// `net = "bridge"`: the zone's address, bridge and host-side veth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<crate::net::NetRuntime>,
    /// A suspend under way (`done: false`, `state` still running) or finished
    /// (`state` suspended). One left unfinished by a crash is rolled back (thawed) by
    /// the next command that takes the zone's lock (`zone::reconcile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<Suspension>,
}

/// What `warren suspend` recorded (docs/suspend.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suspension {
    /// Unix time in milliseconds when the suspend began.
    pub since_ms: u64,
    /// The zone is frozen and paged out, and `Runtime::state` says suspended.
    pub done: bool,
    /// Bytes charged to the zone's memory cgroup before the pageout.
    #[serde(default)]
    pub resident_before: u64,
    /// ... and after it.
    #[serde(default)]
    pub resident_after: u64,
    /// Bytes of the zone's processes in swap after the pageout.
    #[serde(default)]
    pub swapped: u64,
    /// Whether the host had swap: without it only file pages could be reclaimed.
    #[serde(default)]
    pub host_swap: bool,
    /// The zone's sockets that had something waiting once it was frozen: socket inode →
    /// queue (a listener's pending connections, a UDP socket's bytes). The agent wakes
    /// the zone only when a queue grows past this (docs/suspend.md, "Wake on
    /// connection"); sockets not listed had nothing waiting. `None`: not read (an
    /// older warren, or the zone's sockets could not be read); the agent then takes
    /// its own baseline when it first watches the zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_queues: Option<std::collections::BTreeMap<u32, u32>>,
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>> {
    let bytes = match crate::fsutil::read_bounded(path, crate::fsutil::MAX_SMALL_FILE) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx(|| format!("reading {}", path.display())),
    };
    parse_json(path, &bytes).map(Some)
}

/// Parse a state file's bytes; `path` names the file in the error.
pub fn parse_json<T: for<'de> Deserialize<'de>>(path: &Path, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::Corrupt {
        path: path.to_path_buf(),
        message: if bytes.is_empty() {
            "the file is empty (truncated)".into()
        } else {
            format!("not valid: {e}")
        },
    })
}

/// Parse and check `state.json` bytes (what [`load_lifecycle`] does after reading).
pub fn parse_lifecycle(path: &Path, bytes: &[u8]) -> Result<Lifecycle> {
    let lc: Lifecycle = parse_json(path, bytes)?;
    check_lifecycle(path, &lc)?;
    Ok(lc)
}

fn check_lifecycle(path: &Path, lc: &Lifecycle) -> Result<()> {
    if lc.version > STATE_VERSION {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            message: format!(
                "format version {} is newer than this warren understands ({STATE_VERSION}); upgrade warren",
                lc.version
            ),
        });
    }
    if lc.state > ZoneState::Installed {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            message: format!("it records the runtime state {}", lc.state),
        });
    }
    Ok(())
}

pub fn state_path(zone_dir: &Path) -> PathBuf {
    zone_dir.join("state.json")
}

pub fn runtime_path(zone_dir: &Path) -> PathBuf {
    zone_dir.join("runtime.json")
}

/// Load `state.json`; `None` if the zone directory has none.
pub fn load_lifecycle(zone_dir: &Path) -> Result<Option<Lifecycle>> {
    let path = state_path(zone_dir);
    let lc: Option<Lifecycle> = read_json(&path)?;
    if let Some(lc) = &lc {
        check_lifecycle(&path, lc)?;
    }
    Ok(lc)
}

/// Write `state.json` durably.
pub fn save_lifecycle(zone_dir: &Path, lc: &Lifecycle) -> Result<()> {
    let path = state_path(zone_dir);
    let json = serde_json::to_vec_pretty(lc).expect("state serialises");
    atomic_write(&path, &json, true).ctx(|| format!("writing {}", path.display()))
}

/// Load `runtime.json`.
pub fn load_runtime(zone_dir: &Path) -> Result<Option<Runtime>> {
    read_json(&runtime_path(zone_dir))
}

/// What `runtime.json` holds.
// One value per zone read, returned and matched at once: boxing the common case to
// shrink the rare ones would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeRecord {
    /// No file: the zone is not booted.
    Absent,
    Present(Runtime),
    /// Empty, truncated or garbled (a power loss, a full disk, a hand edit): stale by
    /// definition; why, for the report.
    Torn(String),
}

/// Load `runtime.json`, reporting an unparsable file as [`RuntimeRecord::Torn`]
/// rather than as an error (an unreadable file — permissions, I/O — is still one).
pub fn load_runtime_or_torn(zone_dir: &Path) -> Result<RuntimeRecord> {
    match load_runtime(zone_dir) {
        Ok(Some(rt)) => Ok(RuntimeRecord::Present(rt)),
        Ok(None) => Ok(RuntimeRecord::Absent),
        Err(Error::Corrupt { message, .. }) => Ok(RuntimeRecord::Torn(message)),
        Err(e) => Err(e),
    }
}

/// Write `runtime.json` atomically and durably (see the module doc).
pub fn save_runtime(zone_dir: &Path, rt: &Runtime) -> Result<()> {
    let path = runtime_path(zone_dir);
    let json = serde_json::to_vec_pretty(rt).expect("runtime serialises");
    // Not fsync'd: the record describes what runs, and what a power loss or kernel crash
    // can tear (the only losses fsync guards against) it also stops; a torn record is
    // read as stale ([`load_runtime_or_torn`]). Two fsyncs per boot would cost
    // milliseconds on a virtio disk for nothing.
    atomic_write(&path, &json, false).ctx(|| format!("writing {}", path.display()))
}

pub fn remove_runtime(zone_dir: &Path) -> Result<()> {
    let path = runtime_path(zone_dir);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).ctx(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// What the kernel says about a recorded init.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitFact {
    /// The same process (pid and start time match) is alive.
    Alive,
    /// Gone, a zombie, or the pid now names another process.
    Gone,
}

/// The state users see: lifecycle + runtime + the kernel's facts, as a pure function.
/// A runtime record from another boot, or whose init is gone, is stale: the zone is
/// installed (and the next locked command cleans up after it).
pub fn observe(
    lc: &Lifecycle,
    rt: Option<&Runtime>,
    boot_id: &str,
    init: Option<InitFact>,
) -> ZoneState {
    let Some(rt) = rt else { return lc.state };
    if lc.state != ZoneState::Installed || rt.boot_id != boot_id {
        return lc.state;
    }
    match (rt.state, rt.init, init) {
        (ZoneState::Ready, None, _) => ZoneState::Ready,
        (_, Some(_), Some(InitFact::Alive)) => rt.state,
        _ => ZoneState::Installed,
    }
}

/// Whether a runtime record is stale (its zone is not up any more).
pub fn is_stale(lc: &Lifecycle, rt: &Runtime, boot_id: &str, init: Option<InitFact>) -> bool {
    observe(lc, Some(rt), boot_id, init) == ZoneState::Installed
}

/// The verbs the state machine knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Install,
    Uninstall,
    Boot,
    Halt,
    Reboot,
    Login,
    Delete,
    CloneFrom,
    Suspend,
    Resume,
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verb::Install => "install",
            Verb::Uninstall => "uninstall",
            Verb::Boot => "boot",
            Verb::Halt => "halt",
            Verb::Reboot => "reboot",
            Verb::Login => "login",
            Verb::Delete => "delete",
            Verb::CloneFrom => "clone",
            Verb::Suspend => "suspend",
            Verb::Resume => "resume",
        })
    }
}

/// What to do with a verb in a state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Proceed,
    /// Idempotent success: the zone is already where the verb would take it.
    AlreadyDone(&'static str),
    /// Refused; the text is the remedy.
    Refuse(&'static str),
}

/// The transition table. No wildcard arms: a new state or verb must be decided here.
pub fn decide(verb: Verb, state: ZoneState) -> Decision {
    use Decision::*;
    use ZoneState::*;
    match (verb, state) {
        (Verb::Install, Configured | Incomplete) => Proceed,
        (Verb::Install, Installed | Ready | Running | Suspended | ShuttingDown) => {
            AlreadyDone("already installed")
        }
        (Verb::Uninstall, Configured) => AlreadyDone("not installed"),
        (Verb::Uninstall, Incomplete | Installed) => Proceed,
        (Verb::Uninstall, Ready | Running | Suspended | ShuttingDown) => {
            Refuse("halt it before uninstall")
        }
        (Verb::Boot, Configured) => Refuse("install it before boot"),
        (Verb::Boot, Incomplete) => Refuse(
            "its install was interrupted; run 'warren install' to finish it or 'warren uninstall' to discard it",
        ),
        (Verb::Boot, Installed | Ready) => Proceed,
        (Verb::Boot, Running) => AlreadyDone("already running"),
        (Verb::Boot, Suspended) => Refuse("it is suspended; wake it with 'warren resume'"),
        (Verb::Boot, ShuttingDown) => Refuse("it is halting; wait for it, then boot"),
        (Verb::Halt, Configured | Incomplete | Installed) => AlreadyDone("not running"),
        (Verb::Halt, Ready | Running | Suspended | ShuttingDown) => Proceed,
        (Verb::Reboot, Configured) => Refuse("install and boot it first"),
        (Verb::Reboot, Incomplete) => Refuse("finish its install with 'warren install' first"),
        (Verb::Reboot, Installed) => Refuse("it is not running; use 'warren boot'"),
        (Verb::Reboot, Ready | Running | Suspended | ShuttingDown) => Proceed,
        // A suspended zone is woken first (`zone::login`, docs/suspend.md).
        (Verb::Login, Running | Suspended) => Proceed,
        (Verb::Login, Configured | Incomplete) => Refuse("install and boot it before login"),
        (Verb::Login, Installed) => Refuse("boot it before login"),
        (Verb::Login, Ready | ShuttingDown) => Refuse("wait until it is running, then log in"),
        (Verb::Delete, Configured) => Proceed,
        (Verb::Delete, Incomplete | Installed) => {
            Refuse("uninstall it before delete (or use 'warren delete --force')")
        }
        (Verb::Delete, Ready | Running | Suspended | ShuttingDown) => {
            Refuse("halt and uninstall it before delete (or use 'warren delete --force')")
        }
        // A running source is frozen while its layer is copied (`zone::freeze`).
        (Verb::CloneFrom, Installed | Running) => Proceed,
        (Verb::CloneFrom, Configured | Incomplete) => Refuse("install it before cloning it"),
        (Verb::CloneFrom, Ready | ShuttingDown) => {
            Refuse("wait until its boot or halt has finished, then clone it")
        }
        (Verb::CloneFrom, Suspended) => Refuse("resume or halt it before cloning it"),
        (Verb::Suspend, Running) => Proceed,
        (Verb::Suspend, Suspended) => AlreadyDone("already suspended"),
        (Verb::Suspend, Configured | Incomplete | Installed) => {
            Refuse("it is not running; boot it before suspend")
        }
        (Verb::Suspend, Ready | ShuttingDown) => Refuse("wait until it is running, then suspend"),
        (Verb::Resume, Suspended) => Proceed,
        (Verb::Resume, Running) => AlreadyDone("not suspended (running)"),
        (Verb::Resume, Configured | Incomplete | Installed) => {
            Refuse("it is not suspended; boot it with 'warren boot'")
        }
        (Verb::Resume, Ready | ShuttingDown) => Refuse("it is not suspended; wait for it"),
    }
}

/// Turn a decision into a result for `zone`.
pub fn check(zone: &str, verb: Verb, state: ZoneState) -> Result<Decision> {
    match decide(verb, state) {
        Decision::Refuse(remedy) => Err(Error::WrongState {
            zone: zone.to_string(),
            state,
            remedy: remedy.to_string(),
        }),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::CgroupVersion;

    const ALL: [ZoneState; 7] = [
        ZoneState::Configured,
        ZoneState::Incomplete,
        ZoneState::Installed,
        ZoneState::Ready,
        ZoneState::Running,
        ZoneState::Suspended,
        ZoneState::ShuttingDown,
    ];

    #[test]
    fn order_is_solaris_order() {
        let mut sorted = ALL;
        sorted.sort();
        assert_eq!(sorted, ALL);
    }

    #[test]
    fn verbs_are_idempotent_where_solaris_is() {
        assert_eq!(
            decide(Verb::Boot, ZoneState::Running),
            Decision::AlreadyDone("already running")
        );
        assert!(matches!(
            decide(Verb::Halt, ZoneState::Installed),
            Decision::AlreadyDone(_)
        ));
        assert!(matches!(
            decide(Verb::Install, ZoneState::Installed),
            Decision::AlreadyDone(_)
        ));
        assert!(matches!(
            decide(Verb::Uninstall, ZoneState::Configured),
            Decision::AlreadyDone(_)
        ));
    }

    #[test]
    fn refusals_say_what_is_needed() {
        let e = check("db3", Verb::Boot, ZoneState::Configured)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "zone 'db3' is configured; install it before boot");
        let e = check("db3", Verb::Delete, ZoneState::Running)
            .unwrap_err()
            .to_string();
        assert!(e.contains("halt and uninstall it"), "{e}");
        // Every refusal has a remedy.
        for v in [
            Verb::Install,
            Verb::Uninstall,
            Verb::Boot,
            Verb::Halt,
            Verb::Reboot,
            Verb::Login,
            Verb::Delete,
            Verb::CloneFrom,
            Verb::Suspend,
            Verb::Resume,
        ] {
            for s in ALL {
                if let Decision::Refuse(r) = decide(v, s) {
                    assert!(!r.is_empty(), "{v} in {s}");
                }
            }
        }
    }

    fn rt(state: ZoneState, boot: &str, init: bool) -> Runtime {
        Runtime {
            state,
            boot_id: boot.into(),
            init: init.then_some(InitId {
                pid: 10,
                start_time: 5,
            }),
            cgroups: CgroupSet {
                version: CgroupVersion::V1,
                dirs: vec![],
            },
            booted_at_ms: 0,
            net: None,
            suspension: None,
        }
    }

    #[test]
    fn suspend_and_resume_go_between_running_and_suspended() {
        assert_eq!(decide(Verb::Suspend, ZoneState::Running), Decision::Proceed);
        assert_eq!(
            decide(Verb::Resume, ZoneState::Suspended),
            Decision::Proceed
        );
        assert!(matches!(
            decide(Verb::Suspend, ZoneState::Suspended),
            Decision::AlreadyDone(_)
        ));
        assert!(matches!(
            decide(Verb::Resume, ZoneState::Running),
            Decision::AlreadyDone(_)
        ));
        assert_eq!(decide(Verb::Halt, ZoneState::Suspended), Decision::Proceed);
        let e = check("db3", Verb::Boot, ZoneState::Suspended)
            .unwrap_err()
            .to_string();
        assert!(e.contains("warren resume"), "{e}");
        let lc = Lifecycle {
            state: ZoneState::Installed,
            ..Lifecycle::configured()
        };
        let suspended = rt(ZoneState::Suspended, "b1", true);
        assert_eq!(
            observe(&lc, Some(&suspended), "b1", Some(InitFact::Alive)),
            ZoneState::Suspended
        );
        assert_eq!(
            observe(&lc, Some(&suspended), "b1", Some(InitFact::Gone)),
            ZoneState::Installed
        );
    }

    #[test]
    fn observe_derives_runtime_states() {
        let mut lc = Lifecycle::configured();
        lc.state = ZoneState::Installed;
        let running = rt(ZoneState::Running, "b1", true);
        assert_eq!(observe(&lc, None, "b1", None), ZoneState::Installed);
        assert_eq!(
            observe(&lc, Some(&running), "b1", Some(InitFact::Alive)),
            ZoneState::Running
        );
        // Init died: installed (stale record).
        assert_eq!(
            observe(&lc, Some(&running), "b1", Some(InitFact::Gone)),
            ZoneState::Installed
        );
        // Host rebooted: installed even if the pid is alive again.
        assert_eq!(
            observe(&lc, Some(&running), "b2", Some(InitFact::Alive)),
            ZoneState::Installed
        );
        assert!(is_stale(&lc, &running, "b2", Some(InitFact::Alive)));
        // A boot in progress.
        let ready = rt(ZoneState::Ready, "b1", false);
        assert_eq!(observe(&lc, Some(&ready), "b1", None), ZoneState::Ready);
    }

    #[test]
    fn corrupt_state_files_are_named() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(state_path(d.path()), b"").unwrap();
        let e = load_lifecycle(d.path()).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }));
        assert!(
            e.to_string().contains("state.json") && e.to_string().contains("truncated"),
            "{e}"
        );
        std::fs::write(state_path(d.path()), b"{\"version\":1,\"state\":\"bogus\"}").unwrap();
        assert!(load_lifecycle(d.path())
            .unwrap_err()
            .to_string()
            .contains("not valid"));
        std::fs::write(
            state_path(d.path()),
            b"{\"version\":9,\"state\":\"installed\"}",
        )
        .unwrap();
        assert!(load_lifecycle(d.path())
            .unwrap_err()
            .to_string()
            .contains("newer"));
        let lc = Lifecycle::configured();
        save_lifecycle(d.path(), &lc).unwrap();
        assert_eq!(load_lifecycle(d.path()).unwrap(), Some(lc));
    }
}
