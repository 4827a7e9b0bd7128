//! `corral-api`: the HTTP API `corrald` serves. Thin like the CLI: each
//! handler turns a request into the same library call the CLI makes and
//! returns the library's answer as JSON. No policy lives here.
//!
//! Routes (JSON; `docs/api.md` has an example of each; `docs/openapi.json`
//! is generated from the handlers by [`openapi`], and a test keeps it equal
//! to what corrald generates and to [`routes::routes`]):
//! - `GET /v1/health` — each dependency checked now (503 when one fails);
//! - `GET /v1/matrix` — the host-OS × sandbox-kind matrix;
//! - `GET /v1/profiles` — the configured profiles;
//! - `GET /v1/host/plan` — the nft rendering, the plan and its drift;
//! - `GET /v1/host/status` — bridges, counters, set sizes, drift count;
//! - `GET /v1/host/verify` — every difference between plan and live state
//!   (409 when there is any);
//! - `GET /v1/explain` — would a sandbox's packet get through, and which
//!   rule decides (restricted callers: their own sandboxes);
//! - `GET /v1/verification` — the per-sandbox verification gate and every
//!   sandbox's last verdict, from the store;
//! - `GET /v1/events` — the event log (lifecycle, verification, alerts);
//! - `GET /metrics` — Prometheus/OpenMetrics text ([`metrics`]);
//! - `GET|POST /v1/sandboxes`, `GET|DELETE /v1/sandboxes/{name}`,
//!   `POST /v1/sandboxes/{name}/{start,stop,exec,verify}` — sandboxes
//!   through the provider selected at start-up; every profiled sandbox runs
//!   the canary before a start hands it out, and corrald's watchdog runs it
//!   again every `reverify_interval_secs`;
//! - `GET /v1/sandboxes/{name}/exec/stream` — a command with live streams
//!   over a WebSocket.
//!
//! With `--cluster cluster.toml`, a second listener ([`cluster`]) serves
//! other cluster members this member's attestation over mutually
//! authenticated TLS, and nothing else.
//!
//! Every request passes [`guard`] first (who is calling, Host, body type
//! and size); work is bounded by [`state::Limits`]. Every error answers
//! `{"error": {"code", "message"}}` (see [`error`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod admit;
pub mod cluster;
pub mod error;
pub mod guard;
pub mod metrics;
pub mod openapi;
pub mod rotation;
pub mod routes;
pub mod schema;
pub mod serve;
pub mod setup_error;
pub mod state;

pub use corral_service::{Backend, Settings};
pub use routes::router;
pub use serve::{Listen, serve};
pub use state::AppState;
