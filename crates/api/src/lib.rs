//! `corral-api`: the HTTP API `corrald` serves. Thin like the CLI: each
//! handler turns a request into the same library call the CLI makes and
//! returns the library's answer as JSON. No policy lives here.
//!
//! Routes (JSON; `docs/api.md` has an example of each, `docs/openapi.json`
//! the schema, and a test keeps that file equal to [`routes::routes`]):
//! - `GET /v1/health` — liveness and version;
//! - `GET /v1/matrix` — the host-OS × sandbox-kind matrix;
//! - `GET /v1/profiles` — the configured profiles;
//! - `GET /v1/host/plan` — the nft rendering, the plan and its drift;
//! - `GET /v1/host/status` — bridges, counters, set sizes, drift count;
//! - `GET /v1/host/verify` — every difference between plan and live state
//!   (409 when there is any);
//! - `GET /v1/verification` — the per-sandbox verification gate and every
//!   sandbox's last verdict, from the store;
//! - `GET /v1/events` — the event log (lifecycle, verification, alerts);
//! - `GET|POST /v1/sandboxes`, `GET|DELETE /v1/sandboxes/{name}`,
//!   `POST /v1/sandboxes/{name}/{start,stop,exec,verify}` — sandboxes
//!   through the provider selected at start-up; every profiled sandbox runs
//!   the canary before a start hands it out, and corrald's watchdog runs it
//!   again every `reverify_interval_secs`.
//!
//! Every error answers `{"error": {"code", "message"}}` (see [`error`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod encode;
pub mod error;
pub mod guard;
pub mod routes;
pub mod serve;
pub mod state;

pub use corral_service::{Backend, Settings};
pub use routes::router;
pub use serve::{Listen, serve};
pub use state::AppState;
