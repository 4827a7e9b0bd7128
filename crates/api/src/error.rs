//! Errors as HTTP answers: a status code and `{"error", "causes"}` JSON
//! carrying the whole `source()` chain, as the CLI prints it.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A failed request.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status to answer with.
    pub status: StatusCode,
    /// What went wrong, with its causes.
    pub error: anyhow::Error,
}

/// The JSON body of an error answer.
#[derive(Debug, Serialize)]
pub struct ErrorBody {
    /// The error.
    pub error: String,
    /// Its causes, outermost first.
    pub causes: Vec<String>,
}

impl ApiError {
    /// A failure of the work (500), or 403 when the kernel refused for lack
    /// of privilege somewhere in the chain.
    pub fn internal(error: impl Into<anyhow::Error>) -> Self {
        let error = error.into();
        let denied = error.chain().any(|e| {
            e.downcast_ref::<std::io::Error>().is_some_and(|io| {
                io.kind() == std::io::ErrorKind::PermissionDenied
                    || matches!(io.raw_os_error(), Some(1 | 13))
            })
        });
        Self {
            status: if denied {
                StatusCode::FORBIDDEN
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            },
            error,
        }
    }

    /// The body that will be sent.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.error.to_string(),
            causes: self
                .error
                .chain()
                .skip(1)
                .map(ToString::to_string)
                .collect(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        tracing::warn!(status = %self.status, error = ?self.error, "request failed");
        (self.status, Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use anyhow::Context as _;

    use super::*;

    #[test]
    fn body_carries_the_chain_and_eperm_is_403() {
        let err = Err::<(), _>(std::io::Error::from_raw_os_error(1))
            .context("reading nftables")
            .unwrap_err();
        let e = ApiError::internal(err);
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        let body = e.body();
        assert_eq!(body.error, "reading nftables");
        assert_eq!(body.causes.len(), 1);
        let e = ApiError::internal(anyhow::anyhow!("boom"));
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
