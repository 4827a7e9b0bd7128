//! Errors as HTTP answers. Every failed request, on every route, answers
//! `{"error": {"code": "<snake_case>", "message": "<whole source chain>"}}`
//! with a status that follows from the code.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use corral_sandbox_core::sandbox::ProviderError;
use corral_service::ServiceError;
use corral_service::shapes::{failure_code, provider_code};
use utoipa::ToSchema;

/// A failed request.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status to answer with.
    pub status: StatusCode,
    /// A stable, machine-readable code (`not_found`, `invalid_spec`…).
    pub code: &'static str,
    /// What went wrong, with its causes.
    pub error: BoxError,
    /// Seconds after which a retry may succeed (the `Retry-After` header).
    pub retry_after: Option<u64>,
}

/// Every code an error may carry (docs/api.md says what each means).
pub const CODES: &[&str] = &[
    // The request itself.
    "bad_request",
    "no_route",
    "method_not_allowed",
    "unsupported_media_type",
    "body_too_large",
    "not_websocket",
    // Who is calling.
    "unauthorized",
    "forbidden",
    "bad_host",
    "bad_origin",
    "not_owner",
    // corrald's own bounds.
    "busy",
    // Host routes.
    "unresolved_names",
    "permission_denied",
    "internal",
    // Sandboxes: the start gate, checks and readiness.
    "not_enforced",
    "refused_by_check",
    "not_ready",
    // Sandboxes: placement on an Incus cluster.
    "not_in_rotation",
    "on_another_member",
    "member_unreachable",
    // Sandboxes: verification.
    "not_profiled",
    "profile_not_configured",
    "canary_plan",
    // Sandboxes: templates.
    "unknown_template",
    "invalid_template",
    // Sandboxes: the provider.
    "not_found",
    "already_exists",
    "not_owned",
    "invalid_state",
    "unsupported",
    "invalid_spec",
    "unknown_profile",
    "mount",
    "timeout",
    "backend",
    "malformed",
    "io",
    "topology",
    "provider",
];

/// The JSON body of an error answer; every failed request, on every route,
/// answers this (`corral … --json` prints the same on failure). Its OpenAPI
/// description: the answer itself is [`corral_service::shapes::ErrorBody`].
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Schema-only: never constructed.
pub struct ErrorBody {
    /// The error.
    error: ErrorDetail,
}

/// The error inside an [`ErrorBody`].
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Schema-only: never constructed.
pub struct ErrorDetail {
    /// A stable, machine-readable code.
    #[schema(schema_with = code_schema)]
    code: &'static str,
    /// The error and every cause, outermost first, joined by `: `.
    message: String,
}

fn code_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .description(Some("A stable, snake_case code."))
        .enum_values(Some(CODES.iter().copied()))
        .build()
}

/// The cause an [`ApiError`] carries: any error (a library's, or a message).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

pub use corral_service::shapes::chain;

impl ApiError {
    /// An error with an explicit status and code.
    pub fn new(status: StatusCode, code: &'static str, error: impl Into<BoxError>) -> Self {
        debug_assert!(CODES.contains(&code), "error code `{code}` is not in CODES");
        Self {
            status,
            code,
            error: error.into(),
            retry_after: None,
        }
    }

    /// The same error, answered with a `Retry-After` of `secs`.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// The request itself is malformed (400, `bad_request`).
    pub fn bad_request(error: impl Into<BoxError>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", error)
    }

    /// A failure of the work (500, `internal`), or 403 (`permission_denied`)
    /// when the kernel refused for lack of privilege somewhere in the chain.
    pub fn internal(error: impl Into<BoxError>) -> Self {
        let error: BoxError = error.into();
        if corral_service::shapes::denied(error.as_ref()) {
            Self::new(StatusCode::FORBIDDEN, "permission_denied", error)
        } else {
            Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", error)
        }
    }

    /// The body that will be sent.
    pub fn body(&self) -> corral_service::shapes::ErrorBody {
        corral_service::shapes::ErrorBody::new(self.code, self.error.as_ref())
    }
}

/// The status and code of a provider error. Upstream failures (the backend
/// refused, answered nonsense, or could not be reached) are 502; a broken
/// topology is corral's own state gone wrong, so 500.
pub fn provider_status(e: &ProviderError) -> (StatusCode, &'static str) {
    let code = provider_code(e);
    (status_of(code), code)
}

/// The status a code answers with (docs/api.md's table).
pub fn status_of(code: &str) -> StatusCode {
    match code {
        "bad_request" | "invalid_spec" | "unknown_profile" | "mount" | "unknown_template" => {
            StatusCode::BAD_REQUEST
        }
        "not_found" => StatusCode::NOT_FOUND,
        "not_owned" | "not_owner" | "forbidden" | "permission_denied" => StatusCode::FORBIDDEN,
        "already_exists"
        | "invalid_state"
        | "not_enforced"
        | "refused_by_check"
        | "profile_not_configured"
        | "not_in_rotation"
        | "on_another_member" => StatusCode::CONFLICT,
        "unsupported" | "not_profiled" | "canary_plan" => StatusCode::UNPROCESSABLE_ENTITY,
        "timeout" | "not_ready" => StatusCode::GATEWAY_TIMEOUT,
        "backend" | "malformed" | "io" | "member_unreachable" => StatusCode::BAD_GATEWAY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<ProviderError> for ApiError {
    fn from(e: ProviderError) -> Self {
        let (status, code) = provider_status(&e);
        Self::new(status, code, e)
    }
}

/// A failed sandbox operation answers
/// [`corral_service::shapes::ErrorBody::failure`], as
/// `corral … --json` prints it.
impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        let code = failure_code(&e);
        Self::new(status_of(code), code, e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // A client's mistake is routine: one line with the message chain,
        // never a backtrace; so is an upstream's failure or a timeout (502,
        // 504), a line at WARN. Only corrald's own failures (500) carry the
        // debug form, with a backtrace when RUST_BACKTRACE asks for one.
        let chain = chain(self.error.as_ref());
        if self.status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(status = %self.status, code = self.code, error = ?self.error, "request failed");
        } else if self.status.is_server_error() {
            tracing::warn!(status = %self.status, code = self.code, error = %chain, "request failed");
        } else {
            tracing::info!(status = %self.status, code = self.code, error = %chain, "request refused");
        }
        let retry_after = self.retry_after;
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use anyhow::Context as _;
    use corral_sandbox_core::SandboxKind;
    use corral_sandbox_core::sandbox::{Operation, SandboxState};

    use super::*;

    #[test]
    fn body_carries_the_chain_and_eperm_is_403() {
        let err = Err::<(), _>(std::io::Error::from_raw_os_error(1))
            .context("reading nftables")
            .unwrap_err();
        let e = ApiError::internal(err);
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        assert_eq!(e.code, "permission_denied");
        let body = e.body();
        assert!(
            body.error.message.starts_with("reading nftables: "),
            "{}",
            body.error.message
        );
        let e = ApiError::internal(anyhow::anyhow!("boom"));
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(e.body().error.message, "boom");
    }

    #[test]
    fn provider_errors_map_to_the_documented_statuses() {
        let cases: Vec<(ProviderError, u16, &str)> = vec![
            (
                ProviderError::NotFound {
                    what: "sandbox",
                    name: "a".into(),
                },
                404,
                "not_found",
            ),
            (
                ProviderError::AlreadyExists {
                    what: "sandbox",
                    name: "a".into(),
                },
                409,
                "already_exists",
            ),
            (
                ProviderError::NotOwned {
                    name: "a".into(),
                    reason: "no stamp".into(),
                },
                403,
                "not_owned",
            ),
            (
                ProviderError::InvalidState {
                    name: "a".into(),
                    state: SandboxState::Stopped,
                    operation: Operation::Exec,
                    hint: "start it".into(),
                },
                409,
                "invalid_state",
            ),
            (
                ProviderError::Unsupported {
                    kind: SandboxKind::Tart,
                    operation: Operation::Export,
                },
                422,
                "unsupported",
            ),
            (
                ProviderError::InvalidSpec {
                    field: "name",
                    reason: "empty".into(),
                },
                400,
                "invalid_spec",
            ),
            (
                ProviderError::UnknownProfile {
                    profile: "x".into(),
                    configured: vec!["a".into()],
                },
                400,
                "unknown_profile",
            ),
            (
                ProviderError::Timeout {
                    operation: "exec".into(),
                    after: Duration::from_secs(1),
                },
                504,
                "timeout",
            ),
            (
                ProviderError::Backend {
                    kind: SandboxKind::Incus,
                    operation: "create".into(),
                    message: "no".into(),
                    code: Some(500),
                },
                502,
                "backend",
            ),
            (
                ProviderError::Io {
                    context: "connecting".into(),
                    source: std::io::Error::other("refused"),
                },
                502,
                "io",
            ),
        ];
        for (err, status, code) in cases {
            let api = ApiError::from(err);
            assert_eq!(api.status.as_u16(), status, "{}", api.error);
            assert_eq!(api.code, code);
        }
    }

    #[test]
    fn message_includes_the_io_source() {
        let api = ApiError::from(ProviderError::Io {
            context: "cannot reach the Incus daemon".into(),
            source: std::io::Error::other("connection refused"),
        });
        assert_eq!(
            api.body().error.message,
            "cannot reach the Incus daemon: connection refused"
        );
    }
}
