//! `corral-api`: the HTTP API `corrald` serves. Thin like the CLI: each
//! handler turns a request into the same library call the CLI makes and
//! returns the library's answer as JSON. No policy lives here.
//!
//! Routes (all `GET`, JSON):
//! - `/v1/health` — liveness and version;
//! - `/v1/matrix` — the host-OS × sandbox-kind matrix;
//! - `/v1/profiles` — the configured profiles;
//! - `/v1/host/plan` — the nft rendering, the plan and its drift;
//! - `/v1/host/status` — bridges, counters, set sizes, drift count;
//! - `/v1/host/verify` — every difference between plan and live state.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
pub mod load;
pub mod routes;
pub mod serve;
pub mod state;

pub use routes::router;
pub use serve::{Listen, serve};
pub use state::{AppState, Settings};
