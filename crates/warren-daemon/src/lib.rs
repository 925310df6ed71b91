//! warren's daemon: the REST API (`/1.0/...`) over a unix socket, asynchronous
//! operations, the event stream, the OpenAPI document.
//!
//! A front end over the `warren` library, never a second implementation of a verb:
//! reading verbs call the library on blocking threads; changing verbs run in a one-shot
//! helper process of this binary (warren forks only from single-threaded processes:
//! [`helper`]); `exec`, `logs` and `doctor` run the `warren` CLI beside it. Same state
//! root and per-zone locks as the CLI, so the two never disagree; the daemon holds no
//! per-zone resource, so killing it leaves every zone as it was (docs/daemon.md).
//!
//! - [`listen`]: the listeners (a bound socket, or systemd's) and the connection loop;
//! - [`access`]: who may do what (peer credentials), as a middleware layer;
//! - [`api`]: the routes; [`events`]: the SSE stream; [`ops`]: operations;
//! - [`error`]: the one error object; [`state`]: what handlers share;
//! - [`tls`]: the TCP+TLS listener; [`trust`]: its trust store and tokens;
//!   [`remote`]: the client side (`warren remote`, `warren --remote NAME VERB`, its
//!   verbs in [`remote_verbs`]).
//! - [`ui`]: the web dashboard and its loopback listener; [`ws`]: its terminal.
//! - [`verdicts`]: the doctor's verdicts for `/metrics`, run in a child.

#![forbid(unsafe_code)]
#![allow(
    clippy::result_large_err,
    reason = "ApiError is the response body of a failed request (five strings); it is built once per failed request, next to an HTTP round trip, so boxing it would buy nothing"
)]

pub mod access;
pub mod api;
pub mod error;
pub mod events;
pub mod helper;
pub mod helper_bench;
pub mod listen;
pub mod ops;
pub mod remote;
pub mod remote_verbs;
pub mod state;
pub mod tls;
pub mod trust;
pub mod ui;
pub mod verdicts;
pub mod ws;

pub use state::{App, MetricsRenderer};
