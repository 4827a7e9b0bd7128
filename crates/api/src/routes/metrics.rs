//! `GET /metrics`: the families of [`crate::metrics`] as OpenMetrics text,
//! for Prometheus. Admins only, like the host's other reports: on TCP the
//! scrape carries the bearer token (Prometheus's `authorization`
//! section), on the socket the caller is an admin.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorBody};
use crate::metrics::CONTENT_TYPE;
use crate::state::AppState;

/// Every family, its state families read now.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "server",
    operation_id = "metrics",
    responses(
        (status = 200, description = "OpenMetrics text (`application/openmetrics-text; version=1.0.0`), every family prefixed `corral_`; docs/operating.md lists the families and labels. No label names a sandbox.", content_type = "application/openmetrics-text", body = String),
        (status = 403, description = "`forbidden`: not an admin.", body = ErrorBody),
        (status = 500, description = "`internal`: the registry would not encode.", body = ErrorBody),
    )
)]
pub async fn get(State(state): State<AppState>) -> Result<Response, ApiError> {
    let text = state
        .metrics()
        .scrape(&state)
        .await
        .map_err(|e| ApiError::internal(anyhow::anyhow!("encoding the metrics failed: {e}")))?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}
