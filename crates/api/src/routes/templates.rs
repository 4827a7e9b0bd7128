//! `GET /v1/templates`: what new sandboxes are made from — the built-in
//! templates and the operator's files beside the configuration.

use axum::Json;
use axum::extract::State;
use corral_service::shapes::TemplateList;
use corral_service::templates::dir_for;

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Every template, by name.
#[utoipa::path(
    get,
    path = "/v1/templates",
    tag = "sandboxes",
    operation_id = "templates",
    responses(
        (status = 200, description = "The templates, by name (`corral.templates.v1`, as `corral templates --json`).", body = crate::schema::TemplateListDoc),
        (status = 500, description = "`invalid_template`: a template file of the operator's is invalid (the message names the file, line and field).", body = ErrorBody),
    )
)]
pub async fn get(State(state): State<AppState>) -> Result<Json<TemplateList>, ApiError> {
    let catalog = state.sandboxes().templates()?;
    let dir = dir_for(&state.sandboxes().settings().origin);
    Ok(Json(TemplateList::new(
        &dir,
        catalog.iter().cloned().collect(),
    )))
}
