//! The API's one error object, `{code, zone, field, message, fix}`, mapped from warren's
//! typed errors ([`warren::Error`]) the same way the CLI maps them to exit codes.
//!
//! `code` is the name of the CLI's exit code (`not_found`, `wrong_state`, ...), so a
//! script that handles one handles the other; `message` is the CLI's message, whole;
//! `fix` is its remedy (the text after the first "; ", which is how every warren message
//! says what to do); `zone` and `field` come from the error's own fields where it has
//! them, else from the request (the zone in the path).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use warren::{Error, ExitCode};

/// The JSON body of every failed request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    /// The CLI's exit code by name (`invalid_input`, `not_found`, ...), or an HTTP-level
    /// one (`forbidden`, `payload_too_large`, `not_found`, `method_not_allowed`).
    pub code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// The HTTP status (not in the body: it is the response's).
    #[serde(skip)]
    pub status: u16,
}

/// The name of an exit code in `code`.
pub fn code_name(c: ExitCode) -> &'static str {
    match c {
        ExitCode::Ok => "ok",
        ExitCode::Failure => "failure",
        ExitCode::Usage => "usage",
        ExitCode::NotFound => "not_found",
        ExitCode::WrongState => "wrong_state",
        ExitCode::InvalidInput => "invalid_input",
        ExitCode::Conflict => "conflict",
        ExitCode::Unsupported => "unsupported",
        ExitCode::Permission => "permission",
        ExitCode::System => "system",
        ExitCode::Corrupt => "corrupt",
        ExitCode::LoginFailed => "login_failed",
        ExitCode::NotExecutable => "not_executable",
        ExitCode::CommandNotFound => "command_not_found",
    }
}

/// The HTTP status of an exit code: the caller's fault is 4xx, the host's 5xx.
pub fn status_of(c: ExitCode) -> u16 {
    match c {
        ExitCode::Ok => 200,
        ExitCode::Usage | ExitCode::InvalidInput => 400,
        ExitCode::Permission => 403,
        ExitCode::NotFound => 404,
        ExitCode::WrongState | ExitCode::Conflict => 409,
        // The host lacks what the request needs: the request cannot be served here.
        ExitCode::Unsupported => 422,
        ExitCode::NotExecutable | ExitCode::CommandNotFound => 422,
        ExitCode::Failure | ExitCode::System | ExitCode::Corrupt | ExitCode::LoginFailed => 500,
    }
}

/// The remedy of a warren message: what follows its first "; ".
pub fn fix_of(message: &str) -> Option<String> {
    message
        .split_once("; ")
        .map(|(_, fix)| fix.to_string())
        .filter(|f| !f.is_empty())
}

impl ApiError {
    /// An error of the API itself (not of a verb).
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> ApiError {
        let message = message.into();
        ApiError {
            code: code.into(),
            zone: None,
            field: None,
            fix: fix_of(&message),
            message,
            status,
        }
    }

    /// A bad request body or query: `field` names what is wrong.
    pub fn invalid(field: &str, message: impl Into<String>) -> ApiError {
        let mut e = ApiError::new(400, "invalid_input", message);
        e.field = Some(field.into());
        e
    }

    /// The zone the request was about, where the error names none.
    pub fn about(mut self, zone: &str) -> ApiError {
        if self.zone.is_none() {
            self.zone = Some(zone.into());
        }
        self
    }

    /// From warren's typed error.
    pub fn from_warren(e: &Error) -> ApiError {
        let code = e.exit_code();
        let message = e.to_string();
        let (zone, field) = match e {
            Error::Config { zone, message } => (Some(zone.clone()), key_named(message)),
            Error::InvalidName { kind, .. } => (None, Some(format!("{kind} name"))),
            Error::NoSuchZone(z) | Error::ZoneExists(z) => (Some(z.clone()), None),
            Error::NoSuchTemplate(_) => (None, Some("template".into())),
            Error::NoSuchSnapshot { zone, .. } => (Some(zone.clone()), Some("snapshot".into())),
            Error::WrongState { zone, .. } => (Some(zone.clone()), Some("state".into())),
            Error::HostLimit { zone, limit, .. } => (Some(zone.clone()), Some(limit.clone())),
            Error::BadConfigFile { zone, .. } => (Some(zone.clone()), Some("config".into())),
            Error::Command { zone, .. } | Error::InitExited { zone, .. } => {
                (Some(zone.clone()), None)
            }
            Error::NoSuchProfile(_) => (None, Some("profiles".into())),
            Error::WithCleanup { primary, .. } => {
                let p = ApiError::from_warren(primary);
                (p.zone, p.field)
            }
            _ => (None, None),
        };
        ApiError {
            code: code_name(code).into(),
            zone,
            field,
            fix: fix_of(&message),
            message,
            status: status_of(code),
        }
    }
}

/// The config key a config error's message starts with (`memory.max "12X": ...`).
fn key_named(message: &str) -> Option<String> {
    let first = message
        .split(|c: char| c.is_whitespace() || c == ':' || c == '=')
        .next()?;
    warren::config::key(first).map(|k| k.name.to_string())
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError::from_warren(&e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self)).into_response()
    }
}

/// What handlers return.
pub type ApiResult<T> = std::result::Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_zone_is_404_with_its_name_and_fix() {
        let e = ApiError::from_warren(&Error::NoSuchZone("web1".into()));
        assert_eq!(e.status, 404);
        assert_eq!(e.code, "not_found");
        assert_eq!(e.zone.as_deref(), Some("web1"));
        assert_eq!(
            e.fix.as_deref(),
            Some("create it with 'warren create web1'")
        );
    }

    #[test]
    fn a_config_error_names_the_key() {
        let e = ApiError::from_warren(&Error::config(
            "web1",
            "memory.max \"12X\": expected a size such as 512M or 2G",
        ));
        assert_eq!((e.status, e.code.as_str()), (400, "invalid_input"));
        assert_eq!(e.field.as_deref(), Some("memory.max"));
        assert_eq!(e.zone.as_deref(), Some("web1"));
    }

    #[test]
    fn host_faults_are_5xx_and_caller_faults_4xx() {
        assert_eq!(status_of(ExitCode::System), 500);
        assert_eq!(status_of(ExitCode::WrongState), 409);
        assert_eq!(status_of(ExitCode::InvalidInput), 400);
    }
}
