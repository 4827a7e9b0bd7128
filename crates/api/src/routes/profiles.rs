//! `GET /v1/profiles`.

use axum::Json;
use axum::extract::State;
use corral_sandbox_core::ProfileSet;
use serde::Serialize;
use utoipa::ToSchema;

use crate::state::AppState;

/// The configured profiles.
#[derive(Debug, Serialize, ToSchema)]
pub struct Profiles {
    /// Where they came from.
    pub source: String,
    /// The profiles, in configuration order (each as in docs/configuration.md).
    #[schema(value_type = Vec<Object>)]
    pub profiles: ProfileSet,
}

/// The profiles loaded at start-up.
#[utoipa::path(
    get,
    path = "/v1/profiles",
    tag = "server",
    operation_id = "profiles",
    responses((status = 200, description = "Profiles in configuration order.", body = Profiles))
)]
pub async fn get(State(state): State<AppState>) -> Json<Profiles> {
    Json(Profiles {
        source: state.settings().origin.to_string(),
        profiles: state.settings().config.profiles.clone(),
    })
}
