//! The seam between the HTTP layer and how bytes reach the daemon: a
//! [`Connector`] opens one byte stream per request (a unix socket locally,
//! TLS over TCP for a remote), and [`send`] speaks HTTP/1.1 over it.
//!
//! One connection per request keeps the client free of pool state; over the
//! local socket a connect costs microseconds next to Incus's ~10 ms answer.

use std::fmt;
use std::pin::Pin;

use async_trait::async_trait;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::error::ClientError;

/// A bidirectional byte stream to the daemon.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// A boxed stream.
pub type BoxStream = Pin<Box<dyn Stream>>;

/// Request bodies: small JSON, or a file streamed from disk.
pub type Body = BoxBody<Bytes, std::io::Error>;

/// Opens a fresh connection to the daemon.
#[async_trait]
pub trait Connector: Send + Sync + fmt::Debug {
    /// Open a connection.
    async fn connect(&self) -> Result<BoxStream, ClientError>;

    /// The `Host` header value (Incus ignores it over the socket).
    fn authority(&self) -> &str;

    /// Where the daemon is, for messages.
    fn endpoint(&self) -> String;
}

/// Send one request over a new connection from `connector`.
pub async fn send(
    connector: &dyn Connector,
    request: Request<Body>,
    what: &str,
) -> Result<Response<Incoming>, ClientError> {
    let stream = connector.connect().await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|source| ClientError::Http {
            what: what.to_owned(),
            source,
        })?;
    // The connection task ends by itself when the response body is dropped
    // or read to its end; its error, if any, surfaces through the response.
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::debug!(error = %err, "incus connection closed with an error");
        }
    });
    sender
        .send_request(request)
        .await
        .map_err(|source| ClientError::Http {
            what: what.to_owned(),
            source,
        })
}
