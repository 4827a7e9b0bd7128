//! `POST /v1/sandboxes/{name}/rename`: a stopped sandbox gets a new name;
//! its record (owner, verdicts) follows it.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use corral_service::Caller;
use corral_service::shapes::SandboxRename;
use serde::Deserialize;
use utoipa::ToSchema;

use super::sandboxes::{authorize, detached};
use super::{Body, json};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// `POST /v1/sandboxes/{name}/rename`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenameBody {
    /// The new name.
    pub name: String,
}

/// Rename a stopped sandbox; answers it under its new name.
#[utoipa::path(
    post,
    path = "/v1/sandboxes/{name}/rename",
    tag = "sandboxes",
    operation_id = "renameSandbox",
    params(("name" = String, Path, description = "The sandbox's current name.")),
    request_body = RenameBody,
    responses(
        (status = 200, description = "Renamed: `corral.sandbox-rename.v1`, as `corral rename --json`.", body = crate::schema::SandboxRenameDoc),
        (status = 400, description = "`bad_request`, or `invalid_spec`: the new name is not a sandbox name.", body = ErrorBody),
        (status = 409, description = "`invalid_state`: it is running (stop it first); `already_exists`: the new name is taken.", body = ErrorBody),
        (status = 403, description = "`not_owned`, or `not_owner`.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 429, description = "`busy`: retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`.", body = ErrorBody),
    )
)]
pub async fn rename(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Body(body): Body,
) -> Result<Json<SandboxRename>, ApiError> {
    let req: RenameBody = json(&body)?;
    authorize(&state, &caller, &name).await?;
    detached(async move {
        // Both names: nothing else may act on either meanwhile.
        let (first, second) = if name <= req.name {
            (&name, &req.name)
        } else {
            (&req.name, &name)
        };
        let _a = state.lock_name(first).await;
        let _b = (first != second).then(|| state.lock_name(second));
        let _b = match _b {
            Some(f) => Some(f.await),
            None => None,
        };
        let _turn = state.turn().await?;
        let info = state.sandboxes().rename(&name, &req.name).await?;
        Ok(Json(SandboxRename::new(&name, info)))
    })
    .await
}
