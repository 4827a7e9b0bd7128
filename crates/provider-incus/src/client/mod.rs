//! A small Incus REST client: JSON requests, background operations waited
//! on, raw file transfers, every call bounded by a timeout.

mod error;
#[cfg(test)]
pub(crate) mod fake;
mod https;
mod operation;
mod transfer;
mod transport;
mod unix;
mod websocket;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST};
use http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use error::ClientError;
pub use https::{HttpsConnector, RemoteCredentials};
pub use operation::{Envelope, Operation, OperationState, operation_id};
pub use transport::{Body, BoxStream, Connector, Stream};
pub use unix::{DEFAULT_SOCKET, UnixConnector};
pub use websocket::IncusSocket;

/// How long a plain request may take, by default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A client bound to one daemon and one project.
#[derive(Debug, Clone)]
pub struct IncusClient {
    connector: Arc<dyn Connector>,
    project: String,
    timeout: Duration,
}

impl IncusClient {
    /// A client for `project` on the daemon `connector` reaches; plain
    /// requests give up after `timeout`.
    pub fn new(
        connector: Arc<dyn Connector>,
        project: impl Into<String>,
        timeout: Duration,
    ) -> Self {
        Self {
            connector,
            project: project.into(),
            timeout,
        }
    }

    /// The project every instance request is scoped to.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// Where the daemon is, for messages.
    pub fn endpoint(&self) -> String {
        self.connector.endpoint()
    }

    /// `path` with this client's project added to its query.
    fn url(&self, path: &str) -> String {
        if path.contains("project=") {
            return path.to_owned();
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{path}{sep}project={}", encode_query(&self.project))
    }

    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Body,
        headers: &[(&str, String)],
        timeout: Duration,
    ) -> Result<Response<Incoming>, ClientError> {
        let what = format!("{method} {path}");
        let mut builder = Request::builder()
            .method(method)
            .uri(self.url(path))
            .header(HOST, self.connector.authority());
        for (name, value) in headers {
            builder = builder.header(*name, value);
        }
        let request = builder.body(body).map_err(|e| ClientError::Malformed {
            what: what.clone(),
            detail: format!("request could not be built: {e}"),
        })?;
        let started = std::time::Instant::now();
        let answer =
            tokio::time::timeout(timeout, transport::send(&*self.connector, request, &what))
                .await
                .map_err(|_| ClientError::Timeout {
                    what: what.clone(),
                    after: timeout,
                })?;
        // Where a command's time goes (`RUST_LOG=corral_provider_incus=debug`):
        // each request with the time to its answer's headers.
        tracing::debug!(
            request = %what,
            status = answer.as_ref().map_or(0, |r| r.status().as_u16()),
            ms = started.elapsed().as_secs_f64() * 1000.0,
            "incus"
        );
        answer
    }

    async fn read_body(
        response: Response<Incoming>,
        what: &str,
        timeout: Duration,
    ) -> Result<(http::StatusCode, HeaderMap, Bytes), ClientError> {
        let (parts, body) = response.into_parts();
        let collected = tokio::time::timeout(timeout, body.collect())
            .await
            .map_err(|_| ClientError::Timeout {
                what: what.to_owned(),
                after: timeout,
            })?
            .map_err(|source| ClientError::Http {
                what: what.to_owned(),
                source,
            })?;
        Ok((parts.status, parts.headers, collected.to_bytes()))
    }

    /// Turn a raw answer into an envelope, or into Incus's error.
    fn envelope(
        what: &str,
        status: http::StatusCode,
        body: &[u8],
    ) -> Result<Envelope, ClientError> {
        let parsed: Result<Envelope, _> = serde_json::from_slice(body);
        match parsed {
            Ok(env) if env.kind == "error" || !status.is_success() => Err(ClientError::Api {
                what: what.to_owned(),
                status: if env.error_code != 0 {
                    env.error_code
                } else {
                    status.as_u16()
                },
                message: if env.error.is_empty() {
                    status.to_string()
                } else {
                    env.error
                },
            }),
            Ok(env) => Ok(env),
            Err(e) if status.is_success() => Err(ClientError::Malformed {
                what: what.to_owned(),
                detail: format!("not an Incus envelope: {e}"),
            }),
            // A HEAD's refusal has no body: its status is all Incus said.
            Err(_) => Err(ClientError::Api {
                what: what.to_owned(),
                status: status.as_u16(),
                message: match String::from_utf8_lossy(body).trim() {
                    "" => status.to_string(),
                    text => text.to_owned(),
                },
            }),
        }
    }

    /// Send `body` (JSON, if any) and return the envelope.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Envelope, ClientError> {
        let what = format!("{method} {path}");
        let (bytes, headers) = match body {
            Some(json) => (
                Bytes::from(json.to_string()),
                vec![(CONTENT_TYPE.as_str(), "application/json".to_owned())],
            ),
            None => (Bytes::new(), Vec::new()),
        };
        let response = self
            .exchange(method, path, full(bytes), &headers, self.timeout)
            .await?;
        let (status, _, body) = Self::read_body(response, &what, self.timeout).await?;
        Self::envelope(&what, status, &body)
    }

    /// GET `path` and decode its metadata as `T`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let env = self.call(Method::GET, path, None).await?;
        serde_json::from_value(env.metadata).map_err(|e| ClientError::Malformed {
            what: format!("GET {path}"),
            detail: e.to_string(),
        })
    }

    /// Send a request that starts a background operation and wait for it
    /// (at most `wait`). Synchronous answers are returned as a finished
    /// operation, so callers need not care which kind an endpoint is.
    pub async fn run(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        wait: Duration,
    ) -> Result<Operation, ClientError> {
        let what = format!("{method} {path}");
        let env = self.call(method, path, body).await?;
        self.finish(&what, env, wait).await
    }

    async fn finish(
        &self,
        what: &str,
        env: Envelope,
        wait: Duration,
    ) -> Result<Operation, ClientError> {
        if env.kind != "async" {
            return Ok(Operation {
                id: String::new(),
                status: "Success".into(),
                err: String::new(),
                metadata: Some(env.metadata),
                may_cancel: false,
            });
        }
        let id = operation_id(&env.operation).ok_or_else(|| ClientError::Malformed {
            what: what.to_owned(),
            detail: format!(
                "async answer without an operation URL ({:?})",
                env.operation
            ),
        })?;
        self.wait(what, id, wait).await
    }

    /// Wait for operation `id` to finish, at most `wait`.
    pub async fn wait(
        &self,
        what: &str,
        id: &str,
        wait: Duration,
    ) -> Result<Operation, ClientError> {
        // Incus's own wait bound is in whole seconds; ours adds a margin for
        // the answer to arrive.
        let secs = wait.as_secs().max(1);
        let path = format!("/1.0/operations/{id}/wait?timeout={secs}");
        let response = self
            .exchange(
                Method::GET,
                &path,
                full(Bytes::new()),
                &[],
                wait + Duration::from_secs(5),
            )
            .await?;
        // Incus sends the answer's head at once and its body when the
        // operation ends: the body gets the wait's bound, not a request's.
        let (status, _, body) =
            Self::read_body(response, &path, wait + Duration::from_secs(5)).await?;
        let env = match Self::envelope(what, status, &body) {
            Ok(env) => env,
            // Incus answers a wait that ran out with an error, not with the
            // still-running operation.
            Err(ClientError::Api { message, .. }) if message.contains("deadline exceeded") => {
                return Err(ClientError::Timeout {
                    what: what.to_owned(),
                    after: wait,
                });
            }
            Err(e) => return Err(e),
        };
        let op: Operation =
            serde_json::from_value(env.metadata).map_err(|e| ClientError::Malformed {
                what: path.clone(),
                detail: e.to_string(),
            })?;
        match op.state() {
            OperationState::Succeeded => Ok(op),
            OperationState::Failed => Err(ClientError::Operation {
                what: what.to_owned(),
                status: op.status,
                message: op.err,
            }),
            OperationState::Running => Err(ClientError::Timeout {
                what: what.to_owned(),
                after: wait,
            }),
        }
    }

    /// Start a background operation and return its id without waiting.
    pub async fn start_operation(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(String, Envelope), ClientError> {
        let what = format!("{method} {path}");
        let env = self.call(method, path, body).await?;
        let id = operation_id(&env.operation)
            .ok_or_else(|| ClientError::Malformed {
                what,
                detail: "expected a background operation".into(),
            })?
            .to_owned();
        Ok((id, env))
    }

    /// GET raw bytes (file contents, exec logs) with the response headers.
    pub async fn get_bytes(&self, path: &str) -> Result<(HeaderMap, Bytes), ClientError> {
        let what = format!("GET {path}");
        let response = self
            .exchange(Method::GET, path, full(Bytes::new()), &[], self.timeout)
            .await?;
        let (status, headers, body) = Self::read_body(response, &what, self.timeout).await?;
        if !status.is_success() {
            return Err(Self::envelope(&what, status, &body)
                .err()
                .unwrap_or(ClientError::Api {
                    what,
                    status: status.as_u16(),
                    message: status.to_string(),
                }));
        }
        Ok((headers, body))
    }

    /// HEAD `path`: the response headers (file type and size, without
    /// opening the file).
    pub async fn head(&self, path: &str) -> Result<HeaderMap, ClientError> {
        let what = format!("HEAD {path}");
        let response = self
            .exchange(Method::HEAD, path, full(Bytes::new()), &[], self.timeout)
            .await?;
        let (status, headers, body) = Self::read_body(response, &what, self.timeout).await?;
        if !status.is_success() {
            return Err(Self::envelope(&what, status, &body)
                .err()
                .unwrap_or(ClientError::Api {
                    what,
                    status: status.as_u16(),
                    message: status.to_string(),
                }));
        }
        Ok(headers)
    }

    /// GET raw bytes, keeping at most `cap` of them: the body is read as a
    /// stream and the transfer stops once more than `cap` bytes arrived
    /// (the third value is then true). Memory never exceeds the cap.
    pub async fn get_capped(
        &self,
        path: &str,
        cap: u64,
    ) -> Result<(HeaderMap, Bytes, bool), ClientError> {
        let what = format!("GET {path}");
        let read = async {
            let response = self
                .exchange(Method::GET, path, full(Bytes::new()), &[], self.timeout)
                .await?;
            if !response.status().is_success() {
                let (status, _, body) = Self::read_body(response, &what, self.timeout).await?;
                return Err(Self::envelope(&what, status, &body).err().unwrap_or(
                    ClientError::Api {
                        what: what.clone(),
                        status: status.as_u16(),
                        message: status.to_string(),
                    },
                ));
            }
            let (parts, mut body) = response.into_parts();
            let cap_usize = usize::try_from(cap).unwrap_or(usize::MAX);
            let mut kept = Vec::new();
            let mut truncated = false;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|source| ClientError::Http {
                    what: what.clone(),
                    source,
                })?;
                if let Ok(data) = frame.into_data() {
                    let room = cap_usize - kept.len();
                    if data.len() > room {
                        kept.extend_from_slice(&data[..room]);
                        truncated = true;
                        break;
                    }
                    kept.extend_from_slice(&data);
                }
            }
            Ok((parts.headers, Bytes::from(kept), truncated))
        };
        tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| ClientError::Timeout {
                what: what.clone(),
                after: self.timeout,
            })?
    }

    /// Send raw `bytes` with `headers` (file push) and return the envelope.
    pub async fn send_bytes(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        bytes: Bytes,
    ) -> Result<Envelope, ClientError> {
        let what = format!("{method} {path}");
        let response = self
            .exchange(method, path, full(bytes), headers, self.timeout)
            .await?;
        let (status, _, body) = Self::read_body(response, &what, self.timeout).await?;
        Self::envelope(&what, status, &body)
    }
}

/// A whole-buffer request body.
pub fn full(bytes: Bytes) -> Body {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// Percent-encode a query value (keeps `/` readable for file paths).
pub fn encode_query(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, QUERY_VALUE).to_string()
}

/// Every byte but the unreserved ones of RFC 3986 and `/`.
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> IncusClient {
        IncusClient::new(
            Arc::new(UnixConnector::new("/nonexistent")),
            "corral",
            Duration::from_secs(1),
        )
    }

    #[test]
    fn every_url_names_the_project_once() {
        let c = client();
        assert_eq!(c.url("/1.0/instances"), "/1.0/instances?project=corral");
        assert_eq!(
            c.url("/1.0/instances?recursion=1"),
            "/1.0/instances?recursion=1&project=corral"
        );
        assert_eq!(c.url("/1.0/x?project=other"), "/1.0/x?project=other");
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(encode_query("/etc/a b&c"), "/etc/a%20b%26c");
        assert_eq!(encode_query("ünï"), "%C3%BCn%C3%AF");
    }

    #[test]
    fn error_envelopes_carry_the_server_message() {
        let body =
            br#"{"type":"error","error":"Instance not found","error_code":404,"metadata":null}"#;
        let err = IncusClient::envelope("GET /x", http::StatusCode::NOT_FOUND, body).err();
        let Some(ClientError::Api {
            status, message, ..
        }) = err
        else {
            panic!("expected an API error, got {err:?}");
        };
        assert_eq!((status, message.as_str()), (404, "Instance not found"));
    }

    #[test]
    fn non_json_errors_keep_their_text() {
        let err =
            IncusClient::envelope("GET /x", http::StatusCode::BAD_GATEWAY, b"upstream gone\n")
                .err();
        let Some(ClientError::Api {
            status, message, ..
        }) = err
        else {
            panic!("expected an API error, got {err:?}");
        };
        assert_eq!((status, message.as_str()), (502, "upstream gone"));
    }

    const ASYNC: &str = r#"{"type":"async","operation":"/1.0/operations/op1","metadata":{}}"#;

    fn scripted(answers: &[(u16, &str)]) -> (IncusClient, fake::FakeDaemon) {
        let daemon = fake::FakeDaemon::new(answers);
        let client = IncusClient::new(Arc::new(daemon.clone()), "corral", Duration::from_secs(5));
        (client, daemon)
    }

    #[tokio::test]
    async fn background_operations_are_waited_on() {
        let done = r#"{"type":"sync","metadata":{"id":"op1","status":"Success","err":"","metadata":{"return":0}}}"#;
        let (client, daemon) = scripted(&[(202, ASYNC), (200, done)]);
        let op = client
            .run(
                Method::POST,
                "/1.0/instances",
                Some(&serde_json::json!({})),
                Duration::from_secs(7),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(op.metadata.and_then(|m| m["return"].as_i64()), Some(0));
        let seen = daemon
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        assert_eq!(
            seen,
            [
                "POST /1.0/instances?project=corral HTTP/1.1",
                "GET /1.0/operations/op1/wait?timeout=7&project=corral HTTP/1.1",
            ]
        );
    }

    #[tokio::test]
    async fn a_failed_operation_carries_the_server_message() {
        let failed = r#"{"type":"sync","metadata":{"id":"op1","status":"Failure","err":"Failed to start: no space"}}"#;
        let (client, _) = scripted(&[(202, ASYNC), (200, failed)]);
        let err = client
            .run(
                Method::PUT,
                "/1.0/instances/a/state",
                None,
                Duration::from_secs(1),
            )
            .await
            .err();
        let Some(ClientError::Operation { what, message, .. }) = err else {
            panic!("expected an operation failure, got {err:?}");
        };
        assert_eq!(what, "PUT /1.0/instances/a/state");
        assert_eq!(message, "Failed to start: no space");
    }

    #[tokio::test]
    async fn a_wait_that_runs_out_is_a_timeout() {
        let ran_out = r#"{"type":"error","error":"context deadline exceeded","error_code":500}"#;
        let (client, _) = scripted(&[(202, ASYNC), (500, ran_out)]);
        let err = client
            .run(
                Method::POST,
                "/1.0/instances/a/exec",
                None,
                Duration::from_secs(1),
            )
            .await
            .err();
        assert!(matches!(err, Some(ClientError::Timeout { .. })), "{err:?}");
    }

    #[tokio::test]
    async fn sync_answers_need_no_wait() {
        let (client, daemon) = scripted(&[(200, r#"{"type":"sync","metadata":{"name":"x"}}"#)]);
        let op = client
            .run(
                Method::PUT,
                "/1.0/projects/corral",
                None,
                Duration::from_secs(1),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(op.state(), OperationState::Succeeded);
        assert_eq!(daemon.requests.lock().map(|r| r.len()).unwrap_or(0), 1);
    }

    #[tokio::test]
    async fn a_missing_daemon_is_reported_with_the_fix() {
        let err = client().call(Method::GET, "/1.0", None).await.err();
        assert!(matches!(err, Some(ClientError::Connect { .. })), "{err:?}");
    }
}
