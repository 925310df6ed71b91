//! Errors and exit codes: typed inside, printed once at the edge (the CLI).
//!
//! Every message is lowercase, names the zone or template and the field, and says what
//! to do about it.

use std::io;
use std::path::PathBuf;

use crate::state::ZoneState;

/// warren's exit codes. They are documented API (README, `warren --help`); add new
/// values at the end, never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// Success.
    Ok = 0,
    /// An error that fits no other class.
    Failure = 1,
    /// Bad command line (unknown flag, missing argument); printed by the parser.
    Usage = 2,
    /// The zone, template or profile named does not exist.
    NotFound = 3,
    /// The zone is in the wrong state for this verb (e.g. boot of a configured zone).
    WrongState = 4,
    /// Bad input: a name, a config key or value, a path.
    InvalidInput = 5,
    /// The name is taken, or the object is in use (template used by zones, a lock
    /// held past `--wait`).
    Conflict = 6,
    /// Something the host lacks: a package, a kernel feature, a cgroup controller.
    Unsupported = 7,
    /// warren needs root and is not running as root.
    Permission = 8,
    /// The kernel or filesystem refused an operation.
    System = 9,
    /// A state file is corrupt or from a newer warren.
    Corrupt = 10,
    /// `warren login`/`exec`/`shell`: warren itself failed (any error above), so the
    /// code never collides with the command's own status (podman's 125).
    LoginFailed = 125,
    /// `warren login`: the command exists in the zone but could not be executed.
    NotExecutable = 126,
    /// `warren login`: the command was not found in the zone.
    CommandNotFound = 127,
}

impl ExitCode {
    /// Every code, in number order.
    pub const ALL: [ExitCode; 14] = [
        ExitCode::Ok,
        ExitCode::Failure,
        ExitCode::Usage,
        ExitCode::NotFound,
        ExitCode::WrongState,
        ExitCode::InvalidInput,
        ExitCode::Conflict,
        ExitCode::Unsupported,
        ExitCode::Permission,
        ExitCode::System,
        ExitCode::Corrupt,
        ExitCode::LoginFailed,
        ExitCode::NotExecutable,
        ExitCode::CommandNotFound,
    ];

    /// The code with this number (a [`Error::Relayed`] error's, read back from its
    /// worker); an unknown number is [`ExitCode::Failure`].
    pub fn from_number(n: u8) -> ExitCode {
        Self::ALL
            .into_iter()
            .find(|c| *c as u8 == n)
            .unwrap_or(ExitCode::Failure)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A zone or template name that does not match `[a-z0-9][a-z0-9-]{0,62}`.
    #[error("{kind} name {name:?} is invalid: {reason}; use 1 to 63 characters of a-z, 0-9 and '-', starting with a letter or digit")]
    InvalidName {
        kind: &'static str,
        name: String,
        reason: &'static str,
    },
    /// A config key or value that is not valid.
    #[error("zone '{zone}': {message}")]
    Config { zone: String, message: String },
    /// Other bad input (command-line values, paths).
    #[error("{0}")]
    Invalid(String),
    #[error("zone '{0}' does not exist; create it with 'warren create {0}'")]
    NoSuchZone(String),
    #[error("template '{0}' does not exist; create it with 'warren template create {0} --from host' (see 'warren template list')")]
    NoSuchTemplate(String),
    #[error("zone '{zone}' is {state}; {remedy}")]
    WrongState {
        zone: String,
        state: ZoneState,
        remedy: String,
    },
    #[error("zone '{zone}' has no snapshot '{name}'; see 'warren snapshot list {zone}'")]
    NoSuchSnapshot { zone: String, name: String },
    #[error("zone '{zone}' already has a snapshot '{name}'; pick another name or delete it with 'warren snapshot delete {zone} {name}'")]
    SnapshotExists { zone: String, name: String },
    /// An archive's template is missing here or holds another tree (`import`).
    #[error("{0}")]
    TemplateMismatch(String),
    #[error("zone '{0}' already exists; pick another name or delete it first")]
    ZoneExists(String),
    #[error("template '{0}' already exists; delete it first or pick another name")]
    TemplateExists(String),
    #[error("template '{name}' is used by zone(s) {zones}; delete them before the template")]
    TemplateInUse { name: String, zones: String },
    #[error("{0}")]
    Unsupported(String),
    /// A host limit leaves no room for the zone (checked at boot, before any cgroup).
    /// (`doctor::admit`: the limit, its value, what is used and needed, the fix.)
    #[error("zone '{zone}': {limit} is {current} {detail}; {remedy}")]
    HostLimit {
        zone: String,
        limit: String,
        current: String,
        detail: String,
        remedy: String,
    },
    #[error(
        "warren must run as root (it creates namespaces, mounts and cgroups, and its state root is root's alone, so reading verbs such as 'list' need it too); run it with sudo"
    )]
    NotRoot,
    /// The kernel refused an operation; the message names it and the remedy.
    #[error("{0}")]
    Refused(String),
    /// An I/O error with what warren was doing.
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    /// A state file that cannot be read as what it should be; the remedy is derived
    /// from which file it is ([`remedy_for`]), so every such error says what works.
    #[error("state file {}: {message}; {}", path.display(), remedy_for(path))]
    Corrupt { path: PathBuf, message: String },
    /// A zone's stored `config.toml` cannot be used as it is: missing, not UTF-8, not
    /// TOML, or holding a value this warren refuses. The verbs that repair it work.
    #[error("zone '{zone}': {}: {message}; fix it with 'warren config edit {zone}' or 'warren config set {zone} KEY=VALUE' (see 'warren config keys'), or remove the zone with 'warren delete --force {zone}'", path.display())]
    BadConfigFile {
        zone: String,
        path: PathBuf,
        message: String,
    },
    #[error("cgroup: {0}")]
    Cgroup(#[from] crate::cgroups::CgroupError),
    /// An OCI image archive refused (`template create --from-oci`).
    #[error(transparent)]
    Image(#[from] crate::storage::oci_image::ImageError),
    /// An operation failed and undoing it failed too: report both.
    #[error("{primary}; cleaning up also failed: {cleanup}")]
    WithCleanup {
        #[source]
        primary: Box<Error>,
        cleanup: Box<Error>,
    },
    /// A lock wait bounded by `--wait` expired.
    #[error("gave up after {waited_s}s waiting for {what}'s lock ({}), held by {holder}; wait for that command to finish and retry, raise --wait, or stop the holder if it is stuck ({})", path.display(), kill_hint(pids))]
    LockTimeout {
        what: String,
        holder: String,
        pids: Vec<i32>,
        waited_s: f64,
        path: PathBuf,
    },
    /// The command a login runs was not found in the zone (`missing`), or was found
    /// and could not be executed.
    #[error("zone '{zone}': {program}: {message}")]
    Command {
        zone: String,
        program: String,
        missing: bool,
        message: String,
    },
    /// Several zones were acted on and some failed.
    /// An init that ended during boot's watch: the zone is installed again.
    #[error("zone '{zone}': its init {how} right after starting, so the zone is not running (it is installed again); the last lines of its console ({}):\n{console}\nfix the init or its config ('warren config show {zone}', 'warren logs {zone}') and boot again", log.display())]
    InitExited {
        zone: String,
        how: String,
        /// Its exit status or signal, when known.
        code: Option<i32>,
        signal: Option<i32>,
        console: String,
        log: PathBuf,
    },
    #[error("{failed} of {total} zone(s) failed")]
    Partial { failed: usize, total: usize },
    /// One zone's error as a worker of a pipeline (`zone::pipeline`) printed it: its
    /// message with the numbered causes, and its exit code.
    #[error("{message}")]
    Relayed { message: String, exit: ExitCode },
    #[error("profile '{0}' does not exist; create it with 'warren profile create {0} KEY=VALUE...' (see 'warren profile list')")]
    NoSuchProfile(String),
    #[error("profile '{0}' already exists; change it with 'warren profile set {0} KEY=VALUE' or delete it first")]
    ProfileExists(String),
}

/// What an operator can do about a damaged state file at `path`, by its place in the
/// state root (docs/recovery.md has the whole table).
pub fn remedy_for(path: &std::path::Path) -> String {
    let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
    let parent = path.parent();
    let owner = parent
        .and_then(|p| p.file_name())
        .and_then(|f| f.to_str())
        .unwrap_or("");
    let area = parent
        .and_then(|p| p.parent())
        .and_then(|p| p.file_name())
        .and_then(|f| f.to_str())
        .unwrap_or("");
    match (area, owner, file) {
        ("zones", z, "runtime.json") => format!(
            "the next command on zone '{z}' treats it as stale (its cgroups are found by name); run 'warren halt {z}' or 'warren gc'"
        ),
        ("zones", z, "config.toml") => format!(
            "repair it by hand, or remove the zone with 'warren delete --force {z}'"
        ),
        ("zones", z, _) => format!(
            "repair it by hand (docs/recovery.md), or remove the zone with 'warren delete --force {z}'"
        ),
        ("templates", t, _) => format!(
            "delete the template with 'warren template delete {t}' (refused while zones use it) and create it again, or repair it by hand"
        ),
        (_, _, "userns") => "move it aside; 'warren gc' then re-records every zone's range from its state.json".into(),
        (_, "locks", _) => format!(
            "move it aside (e.g. 'mv {} {}.bad'); warren makes a new lock file",
            path.display(),
            path.display()
        ),
        (_, "net", _) => format!(
            "halt the zones on this bridge, then move {file} aside: the next boot starts a new lease file"
        ),
        _ => "repair it by hand or move it aside (docs/recovery.md)".into(),
    }
}

fn kill_hint(pids: &[i32]) -> String {
    match pids {
        [] => "find it with 'grep -l lock: /proc/*/fdinfo/*'".into(),
        ps => format!(
            "kill {}",
            ps.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

impl Error {
    /// The exit code this error maps to.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::InvalidName { .. }
            | Error::Config { .. }
            | Error::Invalid(_)
            | Error::Image(_) => ExitCode::InvalidInput,
            Error::NoSuchZone(_) | Error::NoSuchTemplate(_) | Error::NoSuchSnapshot { .. } => {
                ExitCode::NotFound
            }
            Error::SnapshotExists { .. } | Error::TemplateMismatch(_) => ExitCode::Conflict,
            Error::WrongState { .. } => ExitCode::WrongState,
            Error::ZoneExists(_)
            | Error::TemplateExists(_)
            | Error::TemplateInUse { .. }
            | Error::LockTimeout { .. } => ExitCode::Conflict,
            Error::Unsupported(_) | Error::HostLimit { .. } => ExitCode::Unsupported,
            Error::NotRoot => ExitCode::Permission,
            Error::Io { .. } | Error::Cgroup(_) | Error::Refused(_) => ExitCode::System,
            Error::Corrupt { .. } | Error::BadConfigFile { .. } => ExitCode::Corrupt,
            Error::WithCleanup { primary, .. } => primary.exit_code(),
            Error::Partial { .. } | Error::InitExited { .. } => ExitCode::Failure,
            Error::Relayed { exit, .. } => *exit,
            Error::NoSuchProfile(_) => ExitCode::NotFound,
            Error::ProfileExists(_) => ExitCode::Conflict,
            Error::Command { missing: true, .. } => ExitCode::CommandNotFound,
            Error::Command { missing: false, .. } => ExitCode::NotExecutable,
        }
    }

    /// The exit code of `warren login` (and its aliases) for this error: 126 or 127
    /// when the command could not be started, 125 for every failure of warren's own.
    pub fn login_exit_code(&self) -> ExitCode {
        match self.exit_code() {
            c @ (ExitCode::NotExecutable | ExitCode::CommandNotFound) => c,
            _ => ExitCode::LoginFailed,
        }
    }

    /// Attach a cleanup failure to this error.
    pub fn with_cleanup(self, cleanup: Option<Error>) -> Error {
        match cleanup {
            None => self,
            Some(c) => Error::WithCleanup {
                primary: Box::new(self),
                cleanup: Box::new(c),
            },
        }
    }

    pub fn config(zone: &str, message: impl Into<String>) -> Error {
        Error::Config {
            zone: zone.to_string(),
            message: message.into(),
        }
    }
}

/// Attach "what warren was doing" to an io::Error.
pub trait IoContext<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| Error::Io {
            context: what(),
            source,
        })
    }
}
