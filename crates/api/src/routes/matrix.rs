//! `GET /v1/matrix[?host=linux|macos|windows]`.

use axum::Json;
use axum::extract::Query;
use corral_sandbox_core::HostOs;
use corral_sandbox_core::platform::{MatrixEntry, entries};
use serde::Deserialize;

use crate::error::ApiError;

/// Query parameters.
#[derive(Debug, Deserialize)]
pub struct MatrixQuery {
    /// Only this host OS.
    pub host: Option<String>,
}

/// The matrix, optionally for one host OS.
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
