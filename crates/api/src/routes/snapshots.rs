//! `/v1/sandboxes/{name}/snapshots` and `…/restore`: take and list
//! snapshots, put a sandbox back to one (a running one restarts into it
//! through the start gate and the canary).

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use corral_sandbox_core::sandbox::SnapshotInfo;
use corral_service::Caller;
use corral_service::shapes::{SandboxRestore, SandboxSnapshot};
use serde::Deserialize;
use utoipa::ToSchema;

use super::sandboxes::{READY_TIMEOUT, authorize, detached};
use super::{Body, json, json_or_default};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// `POST /v1/sandboxes/{name}/snapshots` (the body may be empty).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotBody {
    /// The snapshot's name (default: the first free `snapN`).
    #[serde(default)]
    pub name: Option<String>,
}

/// `POST /v1/sandboxes/{name}/restore`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreBody {
    /// The snapshot to put the sandbox back to.
    pub snapshot: String,
}

/// A sandbox's snapshots.
#[utoipa::path(
    get,
    path = "/v1/sandboxes/{name}/snapshots",
    tag = "sandboxes",
    operation_id = "listSnapshots",
    params(("name" = String, Path, description = "The sandbox's name.")),
    responses(
        (status = 200, description = "Its snapshots.", body = Vec<crate::schema::SnapshotInfoDoc>),
        (status = 403, description = "`not_owned`, or `not_owner`: a restricted caller's request for a sandbox it did not create.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 429, description = "`busy`: retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`.", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Json<Vec<SnapshotInfo>>, ApiError> {
    authorize(&state, &caller, &name).await?;
    let _turn = state.turn().await?;
    Ok(Json(state.sandboxes().snapshots(&name).await?))
}

/// Take a snapshot; 201 with it.
#[utoipa::path(
    post,
    path = "/v1/sandboxes/{name}/snapshots",
    tag = "sandboxes",
    operation_id = "takeSnapshot",
    params(("name" = String, Path, description = "The sandbox's name.")),
    request_body(content = Option<SnapshotBody>, description = "May be empty: the first free `snapN`."),
    responses(
        (status = 201, description = "Taken: `corral.sandbox-snapshot.v1`, as `corral snapshot --json`.", body = crate::schema::SandboxSnapshotDoc),
        (status = 400, description = "`bad_request`, or `invalid_spec`: not a snapshot name (1 to 63 characters without `/`).", body = ErrorBody),
        (status = 409, description = "`already_exists`: the sandbox has a snapshot of that name.", body = ErrorBody),
        (status = 403, description = "`not_owned`, or `not_owner`.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 429, description = "`busy`: retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`.", body = ErrorBody),
    )
)]
pub async fn take(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Body(body): Body,
) -> Result<(StatusCode, Json<SandboxSnapshot>), ApiError> {
    let req: SnapshotBody = json_or_default(&body)?;
    authorize(&state, &caller, &name).await?;
    detached(async move {
        let _name = state.lock_name(&name).await;
        let _turn = state.turn().await?;
        let snap = state
            .sandboxes()
            .snapshot(&name, req.name.as_deref())
            .await?;
        Ok((StatusCode::CREATED, Json(SandboxSnapshot::new(&name, snap))))
    })
    .await
}

/// Put a sandbox back to a snapshot; answers the sandbox afterwards (a
/// running one once it is ready again and its canary passed).
#[utoipa::path(
    post,
    path = "/v1/sandboxes/{name}/restore",
    tag = "sandboxes",
    operation_id = "restoreSnapshot",
    params(("name" = String, Path, description = "The sandbox's name.")),
    request_body = RestoreBody,
    responses(
        (status = 200, description = "Restored: `corral.sandbox-restore.v1`, as `corral restore --json`.", body = crate::schema::SandboxRestoreDoc),
        (status = 400, description = "`bad_request`, or `invalid_spec`.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox or snapshot (nothing was stopped).", body = ErrorBody),
        (status = 409, description = "`not_enforced`: a running sandbox's profile is not enforced (it is left running as it was); `refused_by_check`; `invalid_state`.", body = ErrorBody),
        (status = 504, description = "`not_ready`: restarted, but not ready in time.", body = ErrorBody),
        (status = 403, description = "`not_owned`, or `not_owner`.", body = ErrorBody),
        (status = 429, description = "`busy`: retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`.", body = ErrorBody),
    )
)]
pub async fn restore(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Body(body): Body,
) -> Result<Json<SandboxRestore>, ApiError> {
    let req: RestoreBody = json(&body)?;
    authorize(&state, &caller, &name).await?;
    detached(async move {
        let _name = state.lock_name(&name).await;
        let _turn = state.turn().await?;
        let done = state
            .sandboxes()
            .restore(&name, &req.snapshot, READY_TIMEOUT)
            .await?;
        Ok(Json(SandboxRestore::new(&req.snapshot, done)))
    })
    .await
}
