//! WebSockets to the daemon: an operation's data channels (exec's standard
//! streams and its control channel), over the same connector as every
//! request — the unix socket, or TLS to a remote.

use tokio_tungstenite::WebSocketStream;

use super::IncusClient;
use super::error::ClientError;
use super::transport::BoxStream;

/// One open WebSocket to the daemon.
pub type IncusSocket = WebSocketStream<BoxStream>;

impl IncusClient {
    /// Open the WebSocket at `path` (e.g.
    /// `/1.0/operations/<id>/websocket?secret=<s>`).
    pub async fn websocket(&self, path: &str) -> Result<IncusSocket, ClientError> {
        let what = format!("websocket {}", path.split('?').next().unwrap_or(path));
        let stream = self.connector.connect().await?;
        let uri = format!("ws://{}{}", self.connector.authority(), self.url(path));
        let connect = tokio_tungstenite::client_async(uri, stream);
        match tokio::time::timeout(self.timeout, connect).await {
            Ok(Ok((socket, _))) => Ok(socket),
            Ok(Err(e)) => Err(ClientError::Malformed {
                what,
                detail: format!("the WebSocket handshake failed: {e}"),
            }),
            Err(_) => Err(ClientError::Timeout {
                what,
                after: self.timeout,
            }),
        }
    }
}
