//! `/v1/sandboxes/{name}/backup`: export a sandbox as a backup file (GET,
//! streamed) and make a sandbox from one (PUT, the file's bytes as the
//! body). An export holds the sandbox's whole disk — whatever credentials
//! the agent left inside — and says so in its `X-Corral-Warning` header.
//! An import is checked against the provider's allowlist before anything
//! is uploaded to the backend, gets a fresh identity, and is left stopped.
//! The backend's own words about a failed import reach admins only: Incus
//! quotes what it read while importing, and a crafted backup once made it
//! read (and quote) a host file. Others get the code and an id that finds
//! the whole error in corrald's log.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use corral_sandbox_core::sandbox::SandboxInfo;
use corral_service::Caller;
use corral_service::sandboxes::copies::EXPORT_WARNING;

use super::sandboxes::{authorize, detached};
use super::transfer;
use crate::error::{ApiError, ErrorBody, chain};
use crate::state::AppState;

/// The header every export carries.
pub const WARNING_HEADER: &str = "x-corral-warning";

/// Export a sandbox (with its snapshots) as a gzip backup, streamed.
#[utoipa::path(
    get,
    path = "/v1/sandboxes/{name}/backup",
    tag = "sandboxes",
    operation_id = "exportSandbox",
    params(("name" = String, Path, description = "The sandbox's name.")),
    responses(
        (status = 200, description = "The backup (gzip tar, Incus's format), streamed; `X-Corral-Warning` says it may hold credentials the agent left inside.", content_type = "application/gzip", body = crate::schema::BytesDoc),
        (status = 403, description = "`not_owned`, or `not_owner`.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 429, description = "`busy`: retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`.", body = ErrorBody),
    )
)]
pub async fn export(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    authorize(&state, &caller, &name).await?;
    let dir = state.sandboxes().transfer_dir()?;
    let body = detached(async move {
        let _name = state.lock_name(&name).await;
        let _turn = state.turn().await?;
        let dest = transfer::unique(&dir, "export");
        let done = state.sandboxes().export(&name, &dest).await;
        if done.is_err() {
            let _ = std::fs::remove_file(&dest);
        }
        done?;
        transfer::send(&dest).await.map(|b| (name, b))
    })
    .await?;
    let (name, body) = body;
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/gzip"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}.tar.gz\"")) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    headers.insert(WARNING_HEADER, HeaderValue::from_static(EXPORT_WARNING));
    Ok(response)
}

/// Make sandbox `name` from a backup (the body: a file `GET …/backup`
/// wrote); 201 with it, stopped. The caller is recorded as its owner.
#[utoipa::path(
    put,
    path = "/v1/sandboxes/{name}/backup",
    tag = "sandboxes",
    operation_id = "importSandbox",
    params(("name" = String, Path, description = "The new sandbox's name.")),
    request_body(content = crate::schema::BytesDoc, content_type = "application/octet-stream", description = "The backup file's bytes (at most `--max-upload`)."),
    responses(
        (status = 201, description = "Imported (stopped; its first start passes the start gate and the canary).", body = crate::schema::SandboxInfoDoc),
        (status = 400, description = "`invalid_spec`: not a sandbox name, or the backup is refused (not a backup, or it asks for what corral's topology allows no sandbox: the message says what); `unknown_profile`: its profile is not configured here.", body = ErrorBody),
        (status = 403, description = "`not_owned`: the backup is not of a corral sandbox.", body = ErrorBody),
        (status = 409, description = "`already_exists`: the name is taken.", body = ErrorBody),
        (status = 413, description = "`body_too_large`: over `--max-upload`.", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`: not `application/octet-stream`.", body = ErrorBody),
        (status = 429, description = "`busy`: retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`.", body = ErrorBody),
    )
)]
pub async fn import(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    body: Body,
) -> Result<(StatusCode, Json<SandboxInfo>), ApiError> {
    corral_service::sandboxes::sandbox_name(&name)?;
    let admin = caller.is_admin();
    let dir = state.sandboxes().transfer_dir()?;
    let upload = transfer::unique(&dir, "import");
    transfer::receive(body, &upload, state.limits().max_upload).await?;
    detached(async move {
        let result = async {
            let _name = state.lock_name(&name).await;
            let _turn = state.turn().await?;
            let info = state
                .sandboxes_for(&caller)?
                .import(&upload, Some(&name), Some(caller.uid))
                .await?;
            Ok((StatusCode::CREATED, Json(info)))
        }
        .await;
        let _ = tokio::fs::remove_file(&upload).await;
        result
    })
    .await
    .map_err(|e| withheld(admin, e))
}

/// `e` as a caller who is not an admin may see it: a failure of the
/// backend or of corrald (5xx) keeps its status and code and loses its
/// words, which go to the log under a fresh id. corral's own refusals
/// (4xx: the allowlist, the name, the size) say what to fix and stay.
pub(crate) fn withheld(admin: bool, e: ApiError) -> ApiError {
    if admin || !e.status.is_server_error() {
        return e;
    }
    let id = error_id();
    tracing::warn!(
        error_id = %id,
        code = e.code,
        error = %chain(e.error.as_ref()),
        "an import failed; its cause is withheld from the caller, who is not an admin"
    );
    let mut out = ApiError::new(
        e.status,
        e.code,
        anyhow::anyhow!(
            "the import failed ({}); the cause is shown to admins only: an admin finds it in corrald's log under error id {id}",
            e.code
        ),
    );
    out.retry_after = e.retry_after;
    out
}

/// An id no other error of this process has, and unlikely another's.
fn error_id() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{:x}-{:x}-{}",
        now.as_secs(),
        now.subsec_nanos(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_words_reach_admins_only_and_refusals_reach_everyone() {
        let leak = || {
            ApiError::new(
                StatusCode::BAD_GATEWAY,
                "backend",
                anyhow::anyhow!("cannot unmarshal !!str `s3cret`"),
            )
        };
        let shown = withheld(false, leak()).body();
        assert_eq!(shown.error.code, "backend");
        assert!(
            !shown.error.message.contains("s3cret"),
            "{}",
            shown.error.message
        );
        assert!(
            shown.error.message.contains("error id"),
            "{}",
            shown.error.message
        );
        // Control: an admin reads the backend's words.
        assert!(
            withheld(true, leak())
                .body()
                .error
                .message
                .contains("s3cret")
        );
        let refusal = ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_spec",
            anyhow::anyhow!("entry backup/index.yaml is a symlink"),
        );
        let kept = withheld(false, refusal).body();
        assert!(
            kept.error.message.contains("is a symlink"),
            "{}",
            kept.error.message
        );
    }
}
