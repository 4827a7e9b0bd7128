//! What can go wrong talking to Incus, and how it maps onto the provider
//! contract's [`ProviderError`].

use std::time::Duration;

use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::sandbox::ProviderError;

/// A failed request to the Incus daemon.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The daemon could not be reached at all.
    #[error(
        "cannot reach Incus at {endpoint}: is incusd running (scripts/incus-setup.sh starts it)?"
    )]
    Connect {
        /// The socket path or address.
        endpoint: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS session to a remote Incus could not be set up.
    #[error(
        "TLS with Incus at {endpoint} failed; check the pinned server certificate and that the client certificate is trusted"
    )]
    Tls {
        /// The address.
        endpoint: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The remote's certificates or key could not be used.
    #[error("remote Incus credentials are unusable: {detail}")]
    Credentials {
        /// What is wrong with them.
        detail: String,
    },
    /// The HTTP exchange itself failed.
    #[error("HTTP exchange with Incus failed during {what}")]
    Http {
        /// The request.
        what: String,
        /// The underlying error.
        #[source]
        source: hyper::Error,
    },
    /// The request did not finish within its bound.
    #[error("{what} timed out after {after:?}")]
    Timeout {
        /// The request.
        what: String,
        /// The bound.
        after: Duration,
    },
    /// Incus answered with an error.
    #[error("Incus refused {what} ({status}): {message}")]
    Api {
        /// The request.
        what: String,
        /// The HTTP status (or Incus error code).
        status: u16,
        /// The server's own message.
        message: String,
    },
    /// A background operation ended in failure or was cancelled.
    #[error("Incus operation {what} ended with status {status}: {message}")]
    Operation {
        /// The request that started it.
        what: String,
        /// "Failure" or "Cancelled".
        status: String,
        /// The server's own message.
        message: String,
    },
    /// The answer was not what the API documents.
    #[error("Incus answered {what} with something unreadable: {detail}")]
    Malformed {
        /// The request.
        what: String,
        /// What was wrong.
        detail: String,
    },
    /// A local file could not be read or written.
    #[error("{context}")]
    Io {
        /// What corral was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl ClientError {
    /// The HTTP status of an API error, if this is one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True when Incus said the thing does not exist.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// Translate into the provider contract's error for backend `kind`.
    pub fn into_provider(self, kind: SandboxKind) -> ProviderError {
        match self {
            ClientError::Api {
                what,
                status,
                message,
            } => ProviderError::Backend {
                kind,
                operation: what,
                message,
                code: Some(i64::from(status)),
            },
            ClientError::Operation {
                what,
                status,
                message,
            } => ProviderError::Backend {
                kind,
                operation: what,
                message: format!("{message} (operation {status})"),
                code: None,
            },
            ClientError::Malformed { what, detail } => ProviderError::Malformed {
                kind,
                operation: what,
                detail,
            },
            ClientError::Timeout { what, after } => ProviderError::Timeout {
                operation: what,
                after,
            },
            ClientError::Connect { endpoint, source } => ProviderError::Io {
                context: format!(
                    "cannot reach Incus at {endpoint}: is incusd running (scripts/incus-setup.sh starts it)?"
                ),
                source,
            },
            ClientError::Tls { endpoint, source } => ProviderError::Io {
                context: format!(
                    "TLS with Incus at {endpoint} failed; check the pinned server certificate and that the client certificate is trusted"
                ),
                source,
            },
            ClientError::Credentials { detail } => ProviderError::Io {
                context: format!("remote Incus credentials are unusable: {detail}"),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, detail),
            },
            ClientError::Http { what, source } => ProviderError::Io {
                context: format!("HTTP exchange with Incus failed during {what}"),
                source: std::io::Error::other(source),
            },
            ClientError::Io { context, source } => ProviderError::Io { context, source },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_keep_the_server_message_and_status() {
        let err = ClientError::Api {
            what: "GET /1.0/instances/x".into(),
            status: 404,
            message: "Instance not found".into(),
        };
        assert!(err.is_not_found());
        let mapped = err.into_provider(SandboxKind::Incus);
        assert_eq!(
            mapped.to_string(),
            "incus refused GET /1.0/instances/x: Instance not found"
        );
        assert!(matches!(
            mapped,
            ProviderError::Backend {
                code: Some(404),
                ..
            }
        ));
    }

    #[test]
    fn connect_errors_say_how_to_fix() {
        let err = ClientError::Connect {
            endpoint: "/nope.socket".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let mapped = err.into_provider(SandboxKind::Incus);
        assert!(mapped.to_string().contains("scripts/incus-setup.sh"));
        assert!(std::error::Error::source(&mapped).is_some());
    }

    #[test]
    fn timeouts_stay_timeouts() {
        let err = ClientError::Timeout {
            what: "wait".into(),
            after: Duration::from_secs(3),
        };
        assert!(matches!(
            err.into_provider(SandboxKind::IncusRemote),
            ProviderError::Timeout { .. }
        ));
    }
}
