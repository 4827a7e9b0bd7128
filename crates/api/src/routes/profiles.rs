//! `GET /v1/profiles`: the same report as `corral profiles --json`.

use axum::Json;
use axum::extract::State;
use corral_service::reports::ProfilesReport;

use crate::state::AppState;

/// The profiles loaded at start-up.
#[utoipa::path(
    get,
    path = "/v1/profiles",
    tag = "server",
    operation_id = "profiles",
    responses((status = 200, description = "Profiles in configuration order: `corral.profiles.v1` (docs/json-schema.md), as `corral profiles --json` prints it.", body = crate::schema::ProfilesDoc))
)]
pub async fn get(State(state): State<AppState>) -> Json<ProfilesReport> {
    let settings = state.settings();
    Json(ProfilesReport::new(
        &settings.config,
        settings.origin.to_string(),
    ))
}
