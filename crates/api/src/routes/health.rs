//! `GET /v1/health`.

use axum::Json;
use axum::extract::State;
use corral_sandbox_core::platform::Selection;
use serde::Serialize;

use crate::state::AppState;

/// The health answer.
#[derive(Debug, Serialize)]
pub struct Health {
    /// Always `ok` when the server answers.
    pub status: &'static str,
    /// corrald's version.
    pub version: &'static str,
    /// Where the profiles came from.
    pub source: String,
    /// The target network namespace, `null` for the host.
    pub netns: Option<String>,
    /// The sandbox provider selected at start-up, as the matrix classed it.
    pub provider: Selection,
}

/// Liveness.
pub async fn get(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        source: state.settings().origin.to_string(),
        netns: state.settings().netns.clone(),
        provider: *state.backend().selection(),
    })
}
