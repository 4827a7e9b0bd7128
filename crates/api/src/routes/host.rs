//! `GET /v1/host/plan`, `/v1/host/status`, `/v1/host/verify`: the egress
//! facade's answers (verify answers 409 on drift, so a probe can use the
//! status alone). Its calls block (netlink on a namespace thread), so
//! they run on tokio's blocking pool.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use corral_egress::resolve::{ResolveError, SystemResolver};
use corral_service::host::unresolved_names;
use corral_service::reports::{PlanReport, StatusReport, VerifyReport, wiring_for};

use crate::error::{ApiError, BoxError, ErrorBody};
use crate::state::AppState;

async fn blocking<T: Send + 'static>(
    state: &AppState,
    f: impl FnOnce() -> Result<T, BoxError> + Send + 'static,
) -> Result<T, ApiError> {
    let answer = tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(anyhow::anyhow!("the request's worker failed: {e}")))?;
    match answer {
        Ok(v) => Ok(v),
        Err(e) => Err(planning_error(state, e).await),
    }
}

/// A plan that stopped at an allowlisted name with no address answers 422
/// naming every such name (planning stops at the first one); anything else
/// is corral's own failure.
async fn planning_error(state: &AppState, e: BoxError) -> ApiError {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e.as_ref());
    let mut unresolved = false;
    while let Some(c) = next {
        unresolved |= c.downcast_ref::<ResolveError>().is_some();
        next = c.source();
    }
    if !unresolved {
        return ApiError::internal(e);
    }
    let profiles = state.settings().config.profiles.clone();
    let names = tokio::task::spawn_blocking(move || unresolved_names(&profiles, &SystemResolver))
        .await
        .unwrap_or_default();
    if names.is_empty() {
        // Resolved on the second look: report what the plan saw.
        return ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "unresolved_names", e);
    }
    let list: Vec<String> = names.iter().map(ToString::to_string).collect();
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unresolved_names",
        anyhow::anyhow!(
            "{} allowlisted host name(s) resolve to no address: {}; fix the names, check the host's resolver, or set `allow_unresolved = true` on their profiles",
            names.len(),
            list.join(", ")
        ),
    )
}

/// The configured plan (names resolved now), its nft rendering and how the
/// live state differs from it.
#[utoipa::path(
    get,
    path = "/v1/host/plan",
    tag = "host",
    operation_id = "hostPlan",
    responses(
        (status = 200, description = "The plan.", body = crate::schema::HostPlanDoc),
        (status = 403, description = "`permission_denied`: the kernel refused for lack of privilege; `forbidden`: not an admin.", body = ErrorBody),
        (status = 422, description = "`unresolved_names`: allowlisted host names resolve to no address; the message names every one.", body = ErrorBody),
        (status = 500, description = "`internal`: planning or reading the live state failed.", body = ErrorBody),
    )
)]
pub async fn plan(State(state): State<AppState>) -> Result<Json<PlanReport>, ApiError> {
    blocking(&state.clone(), move || {
        let planned = state.configured_plan()?;
        let drift = state.host()?.plan_diff(&planned)?;
        Ok(Json(PlanReport::new(
            &planned,
            state.settings().netns.clone(),
            &drift,
        )))
    })
    .await
}

/// Bridges, counters, sets and the drift count.
#[utoipa::path(
    get,
    path = "/v1/host/status",
    tag = "host",
    operation_id = "hostStatus",
    responses(
        (status = 200, description = "The status.", body = crate::schema::HostStatusReportDoc),
        (status = 403, description = "`permission_denied`, or `forbidden`: not an admin.", body = ErrorBody),
        (status = 422, description = "`unresolved_names` (nothing applied, and the configuration's names do not resolve).", body = ErrorBody),
        (status = 500, description = "`internal`.", body = ErrorBody),
    )
)]
pub async fn status(State(state): State<AppState>) -> Result<Json<StatusReport>, ApiError> {
    let settings = state.settings();
    let wiring = wiring_for(
        state.sandboxes().backend(),
        &settings.config.profiles,
        settings.netns.as_deref(),
    )
    .await;
    blocking(&state.clone(), move || {
        let planned = state.plan_to_check()?;
        let (status, gateways) = state.host()?.status(&planned)?;
        Ok(Json(StatusReport::new(
            &planned,
            state.settings().netns.clone(),
            status,
            gateways,
            wiring,
        )))
    })
    .await
}

/// Every difference between the plan and the live state: 200 when there is
/// none, 409 (same body) when there is drift.
#[utoipa::path(
    get,
    path = "/v1/host/verify",
    tag = "host",
    operation_id = "hostVerify",
    responses(
        (status = 200, description = "No drift.", body = crate::schema::HostVerifyDoc),
        (status = 409, description = "Drift: the same body, listing every difference.", body = crate::schema::HostVerifyDoc),
        (status = 403, description = "`permission_denied`, or `forbidden`: not an admin.", body = ErrorBody),
        (status = 422, description = "`unresolved_names`.", body = ErrorBody),
        (status = 500, description = "`internal`.", body = ErrorBody),
    )
)]
pub async fn verify(
    State(state): State<AppState>,
) -> Result<(StatusCode, Json<VerifyReport>), ApiError> {
    blocking(&state.clone(), move || {
        let planned = state.plan_to_check()?;
        let drift = state.host()?.verify(&planned)?;
        let status = if drift.is_empty() {
            StatusCode::OK
        } else {
            StatusCode::CONFLICT
        };
        Ok((
            status,
            Json(VerifyReport::new(
                &planned,
                state.settings().netns.clone(),
                &drift,
            )),
        ))
    })
    .await
}
