//! `GET /v1/profiles`.

use axum::Json;
use axum::extract::State;
use corral_sandbox_core::ProfileSet;
use serde::Serialize;

use crate::state::AppState;

/// The configured profiles.
#[derive(Debug, Serialize)]
pub struct Profiles {
    /// Where they came from.
    pub source: String,
    /// The profiles, in configuration order.
    pub profiles: ProfileSet,
}

/// The profiles loaded at start-up.
pub async fn get(State(state): State<AppState>) -> Json<Profiles> {
    Json(Profiles {
        source: state.settings().origin.to_string(),
        profiles: state.settings().config.profiles.clone(),
    })
}
