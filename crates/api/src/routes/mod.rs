//! One small file per resource; each handler only translates a request into
//! a library call and its answer into JSON.

mod health;
mod host;
mod matrix;
mod profiles;

use axum::Router;
use axum::routing::get;

use crate::state::AppState;

/// Every route of the API.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/health", get(health::get))
        .route("/v1/matrix", get(matrix::get))
        .route("/v1/profiles", get(profiles::get))
        .route("/v1/host/plan", get(host::plan))
        .route("/v1/host/status", get(host::status))
        .route("/v1/host/verify", get(host::verify))
        .with_state(state)
}
