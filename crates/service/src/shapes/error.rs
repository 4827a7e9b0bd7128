//! One error shape: `{"error": {"code": "<snake_case>", "message": "…"}}`,
//! corrald's every failed request and `corral … --json`'s every failure.
//! The code says what kind of failure it is, the same in both.

use corral_sandbox_core::sandbox::ProviderError;
use serde::Serialize;

use crate::ServiceError;
use crate::cluster::PlacementRefused;
use crate::gate::GateError;
use crate::templates::TemplateError;
use crate::verify::VerifyError;

/// A failure as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The error inside an [`ErrorBody`].
#[derive(Debug, Clone, Serialize)]
pub struct ErrorDetail {
    /// A stable, machine-readable code (`not_found`, `invalid_spec`…).
    pub code: &'static str,
    /// The error and every cause, outermost first, joined by `: `.
    pub message: String,
}

impl ErrorBody {
    /// `code` with `e`'s whole chain as the message.
    pub fn new(code: &'static str, e: &(dyn std::error::Error + 'static)) -> Self {
        Self {
            error: ErrorDetail {
                code,
                message: chain(e),
            },
        }
    }
}

/// `e`'s message and every source's, joined by `: `.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut next = e.source();
    while let Some(s) = next {
        let text = s.to_string();
        // A wrapper that repeats its source's words adds nothing.
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        next = s.source();
    }
    parts.join(": ")
}

/// The code of a provider error.
pub fn provider_code(e: &ProviderError) -> &'static str {
    match e {
        ProviderError::NotFound { .. } | ProviderError::ImageMissing { .. } => "not_found",
        ProviderError::AlreadyExists { .. } => "already_exists",
        ProviderError::NotOwned { .. } => "not_owned",
        ProviderError::InvalidState { .. } => "invalid_state",
        ProviderError::Unsupported { .. } | ProviderError::LocalOnly { .. } => "unsupported",
        ProviderError::InvalidSpec { .. } => "invalid_spec",
        ProviderError::UnknownProfile { .. } => "unknown_profile",
        ProviderError::Mount { .. } => "mount",
        ProviderError::Timeout { .. } => "timeout",
        ProviderError::Backend { .. } => "backend",
        ProviderError::Malformed { .. } => "malformed",
        ProviderError::Io { .. } => "io",
        ProviderError::Topology { .. } => "topology",
        // A variant added to the library later: a failure we cannot classify.
        _ => "provider",
    }
}

/// The code of a service error; `None` for a failure of corral's own work
/// (the front-end says `internal`, or `permission_denied` when the kernel
/// refused for lack of privilege).
pub fn error_code(e: &ServiceError) -> Option<&'static str> {
    Some(match e {
        ServiceError::Provider(p) => provider_code(p),
        ServiceError::Gate(g) => match g.as_ref() {
            GateError::Refused(_) => "not_enforced",
            _ => return None,
        },
        ServiceError::Hook(_) => "refused_by_check",
        ServiceError::Verify(v) => match v.as_ref() {
            VerifyError::NoProfile(_) => "not_profiled",
            VerifyError::UnknownProfile { .. } => "profile_not_configured",
            VerifyError::NotRunning { .. } => "invalid_state",
            VerifyError::Plan(_) => "canary_plan",
            _ => return None,
        },
        ServiceError::NotReady { .. } => "not_ready",
        ServiceError::Template(TemplateError::Unknown { .. }) => "unknown_template",
        // The operator's file is wrong, not the caller's request.
        ServiceError::Template(_) => "invalid_template",
        ServiceError::Placement(
            PlacementRefused::NoController { .. } | PlacementRefused::NotInRotation { .. },
        ) => "not_in_rotation",
        ServiceError::OnAnotherMember { .. } => "on_another_member",
        // The escape hatch refused the caller's arguments.
        ServiceError::Hatch(_) => "bad_request",
        _ => return None,
    })
}

/// The code both front-ends give a failed sandbox operation: the service's
/// own classification, else `permission_denied` when the kernel refused
/// for lack of privilege somewhere in its chain, else `internal`.
pub fn failure_code(e: &ServiceError) -> &'static str {
    match error_code(e) {
        Some(code) => code,
        None if denied(e) => "permission_denied",
        None => "internal",
    }
}

/// The kernel refused for lack of privilege (EPERM, EACCES) somewhere in
/// `e`'s chain.
pub fn denied(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if e.downcast_ref::<std::io::Error>().is_some_and(|io| {
            io.kind() == std::io::ErrorKind::PermissionDenied
                || matches!(io.raw_os_error(), Some(1 | 13))
        }) {
            return true;
        }
        next = e.source();
    }
    false
}

impl ErrorBody {
    /// A failed sandbox operation (a start, stop, restart or rm of one
    /// sandbox, or any other): what corrald answers and `corral … --json`
    /// prints for it, and, as [`ErrorBody::error`], a failed row of
    /// `corral.sandbox-action.v1`.
    pub fn failure(e: &ServiceError) -> Self {
        Self::new(failure_code(e), e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_code_and_chain() {
        let e = ServiceError::Provider(ProviderError::Io {
            context: "cannot reach the Incus daemon".into(),
            source: std::io::Error::other("connection refused"),
        });
        assert_eq!(
            serde_json::to_value(ErrorBody::failure(&e)).unwrap(),
            serde_json::json!({"error": {"code": "io", "message": "cannot reach the Incus daemon: connection refused"}})
        );
    }

    #[test]
    fn a_failure_without_a_code_is_internal_or_permission_denied() {
        let unbind = |source: std::io::Error| ServiceError::Unbind {
            name: "a".into(),
            source: Box::new(ServiceError::Provider(ProviderError::Io {
                context: "removing the rules".into(),
                source,
            })),
        };
        // The code is the outer error's: the sandbox is gone, and what
        // failed is corral's own unbinding, whatever its cause's kind.
        assert_eq!(
            failure_code(&unbind(std::io::Error::other("no"))),
            "internal"
        );
        assert_eq!(
            failure_code(&unbind(std::io::Error::from_raw_os_error(1))),
            "permission_denied"
        );
        // Control: the cause alone has a code of its own.
        assert_eq!(
            failure_code(&ServiceError::Provider(ProviderError::Io {
                context: "x".into(),
                source: std::io::Error::other("no"),
            })),
            "io"
        );
    }
}
