//! The local daemon, over its unix socket.

use std::path::PathBuf;

use async_trait::async_trait;
use tokio::net::UnixStream;

use super::error::ClientError;
use super::transport::{BoxStream, Connector};

/// Where a Debian `incus-base` daemon listens.
pub const DEFAULT_SOCKET: &str = "/var/lib/incus/unix.socket";

/// Connects to `incusd` over its unix socket (trusted as the socket's owner).
#[derive(Debug, Clone)]
pub struct UnixConnector {
    path: PathBuf,
}

impl UnixConnector {
    /// A connector for the socket at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }
}

#[async_trait]
impl Connector for UnixConnector {
    async fn connect(&self) -> Result<BoxStream, ClientError> {
        let stream =
            UnixStream::connect(&self.path)
                .await
                .map_err(|source| ClientError::Connect {
                    endpoint: self.endpoint(),
                    source,
                })?;
        Ok(Box::pin(stream))
    }

    fn authority(&self) -> &str {
        "incus"
    }

    fn endpoint(&self) -> String {
        format!("unix:{}", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_socket_is_a_connect_error_naming_it() {
        let connector = UnixConnector::new("/nonexistent/corral-test.socket");
        let err = connector.connect().await.err();
        let Some(ClientError::Connect { endpoint, .. }) = err else {
            panic!("expected a connect error, got {err:?}");
        };
        assert_eq!(endpoint, "unix:/nonexistent/corral-test.socket");
    }
}
