//! `/v1/sandboxes/{name}/files?path=…`: read a regular file out of a
//! sandbox (GET) or write one into it (PUT, the bytes as the body),
//! through the provider's file API; both bounded, both recorded.

use axum::Extension;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use corral_sandbox_core::sandbox::ProviderError;
use corral_service::Caller;
use corral_service::sandboxes::files::MAX_PUSH_BYTES;
use serde::Deserialize;
use utoipa::IntoParams;

use super::sandboxes::{authorize, detached};
use super::transfer;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Query parameters.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct FileParams {
    /// The absolute path inside the sandbox.
    pub path: String,
    /// Permission bits of a written file, in octal (default 644).
    #[serde(default)]
    pub mode: Option<String>,
}

fn params(q: Result<Query<FileParams>, QueryRejection>) -> Result<FileParams, ApiError> {
    q.map(|Query(p)| p).map_err(|r| {
        ApiError::bad_request(anyhow::anyhow!("the query is not valid: {}", r.body_text()))
    })
}

/// A regular file's bytes.
#[utoipa::path(
    get,
    path = "/v1/sandboxes/{name}/files",
    tag = "sandboxes",
    operation_id = "pullFile",
    params(("name" = String, Path, description = "The sandbox's name."), FileParams),
    responses(
        (status = 200, description = "The file's bytes.", content_type = "application/octet-stream", body = crate::schema::BytesDoc),
        (status = 400, description = "`bad_request`; `invalid_spec`: not an absolute path, not a regular file, or over the pull limit.", body = ErrorBody),
        (status = 403, description = "`not_owned`, or `not_owner`.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox or file.", body = ErrorBody),
        (status = 429, description = "`busy`: retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`.", body = ErrorBody),
    )
)]
pub async fn pull(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    query: Result<Query<FileParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let p = params(query)?;
    if p.mode.is_some() {
        return Err(ApiError::bad_request(anyhow::anyhow!(
            "`mode` is for writing a file (PUT)"
        )));
    }
    authorize(&state, &caller, &name).await?;
    let bytes = detached(async move {
        let _turn = state.turn().await?;
        Ok(state.sandboxes().pull(&name, &p.path).await?)
    })
    .await?;
    let mut response = (StatusCode::OK, bytes).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    Ok(response)
}

/// Write a file (its missing directories are made); 204.
#[utoipa::path(
    put,
    path = "/v1/sandboxes/{name}/files",
    tag = "sandboxes",
    operation_id = "pushFile",
    params(("name" = String, Path, description = "The sandbox's name."), FileParams),
    request_body(content = crate::schema::BytesDoc, content_type = "application/octet-stream", description = "The file's bytes (at most 64 MiB)."),
    responses(
        (status = 204, description = "Written."),
        (status = 400, description = "`bad_request`; `invalid_spec`: not an absolute path, or a bad mode.", body = ErrorBody),
        (status = 403, description = "`not_owned`, or `not_owner`.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 413, description = "`body_too_large`: over 64 MiB (or `--max-upload`).", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: not `application/octet-stream`.", body = ErrorBody),
        (status = 429, description = "`busy`: retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`.", body = ErrorBody),
    )
)]
pub async fn push(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    query: Result<Query<FileParams>, QueryRejection>,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let p = params(query)?;
    let mode = match p.mode.as_deref() {
        None => 0o644,
        Some(m) => u32::from_str_radix(m, 8)
            .ok()
            .filter(|m| *m <= 0o7777)
            .ok_or_else(|| ProviderError::InvalidSpec {
                field: "mode",
                reason: format!("{m:?}; expected octal permission bits such as 644 or 0755"),
            })?,
    };
    authorize(&state, &caller, &name).await?;
    let contents =
        transfer::read_capped(body, MAX_PUSH_BYTES.min(state.limits().max_upload)).await?;
    detached(async move {
        let _turn = state.turn().await?;
        state
            .sandboxes()
            .push(&name, &p.path, &contents, mode)
            .await?;
        Ok(StatusCode::NO_CONTENT)
    })
    .await
}
