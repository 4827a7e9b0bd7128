//! `GET /v1/matrix[?host=linux|macos|windows]`.

use axum::Json;
use axum::extract::Query;
use corral_sandbox_core::HostOs;
use corral_sandbox_core::platform::{MatrixEntry, entries};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::{ApiError, ErrorBody};

/// Query parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MatrixQuery {
    /// Only this host OS: `linux`, `macos` or `windows`.
    pub host: Option<String>,
}

/// The host-OS × sandbox-kind matrix, optionally for one host OS.
#[utoipa::path(
    get,
    path = "/v1/matrix",
    tag = "server",
    operation_id = "matrix",
    params(MatrixQuery),
    responses(
        (status = 200, description = "Matrix entries.", body = Vec<crate::schema::MatrixEntryDoc>),
        (status = 400, description = "`bad_request`: unknown host OS.", body = ErrorBody),
    )
)]
pub async fn get(Query(q): Query<MatrixQuery>) -> Result<Json<Vec<MatrixEntry>>, ApiError> {
    let only = match q.host.as_deref() {
        None => None,
        Some(h) => Some(
            h.parse::<HostOs>()
                .map_err(|e| ApiError::bad_request(anyhow::anyhow!(e)))?,
        ),
    };
    Ok(Json(
        entries()
            .into_iter()
            .filter(|e| only.is_none_or(|os| os == e.host_os))
            .collect(),
    ))
}
