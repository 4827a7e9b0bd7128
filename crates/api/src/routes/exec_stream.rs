//! `GET /v1/sandboxes/{name}/exec/stream`: a command with live standard
//! streams, over a WebSocket (for long commands, and for ones that read
//! their input as they go).
//!
//! The conversation, after the upgrade:
//! 1. the client sends one text message, the same JSON as the buffered
//!    exec's body (`argv`, `env`, `cwd`, `timeout_secs`), plus, for an
//!    interactive shell, `tty: {width, height}`: the command then runs on
//!    a pseudo-terminal and all its output comes as stream 1;
//! 2. the client sends standard input as binary messages, and the text
//!    message `{"type":"eof"}` to close it (a close frame also ends it);
//! 3. the server sends output as binary messages whose first byte names
//!    the stream (1 standard output, 2 standard error), in the order the
//!    command wrote them;
//! 4. the server ends with one text message, `{"type":"exit","exit_code":N}`
//!    or `{"type":"error","error":{"code","message"}}` (the error shape of
//!    every route), and closes.
//!
//! Output is passed on as it comes, with backpressure: a slow reader slows
//! the command's output, corrald holds no more than a few messages. The
//! default exec timeout applies (it kills the command and its children),
//! also after the client has gone away; streams open at once are bounded
//! (`--max-streams`, 429 beyond).

use std::io;

use async_trait::async_trait;
use axum::Extension;
use axum::extract::ws::{
    Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection,
};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use corral_sandbox_core::sandbox::{ByteSink, ByteSource, ExecStreams};
use corral_service::Caller;
use corral_service::limits::Turn;
use futures::{SinkExt as _, StreamExt as _};
use serde::Serialize;
use tokio::sync::mpsc;
use utoipa::ToSchema;

use super::sandboxes::{ExecBody, authorize, exec_request};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// The first byte of an output message: standard output.
pub const STDOUT: u8 = 1;
/// The first byte of an output message: standard error.
pub const STDERR: u8 = 2;

/// How many messages wait between the command and the socket.
const QUEUE: usize = 16;

/// The last message of a stream.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Ending {
    /// The command exited.
    Exit {
        /// Its exit status.
        exit_code: i32,
    },
    /// The command could not run, or did not finish.
    Error {
        /// What failed (the error shape of every route).
        #[schema(value_type = crate::error::ErrorDetail)]
        error: corral_service::shapes::ErrorDetail,
    },
}

/// Upgrade to a WebSocket and run the command the client then names (the
/// conversation is in docs/api.md: the exec body first, then standard
/// input; output tagged 1 or 2; an `Ending` last).
#[utoipa::path(
    get,
    path = "/v1/sandboxes/{name}/exec/stream",
    tag = "sandboxes",
    operation_id = "execSandboxStream",
    params(("name" = String, Path, description = "The sandbox's name.")),
    responses(
        (status = 101, description = "Switching to WebSocket. The client's first message is an ExecBody; the server's last an Ending."),
        (status = 400, description = "`not_websocket`: not a WebSocket upgrade.", body = ErrorBody),
        (status = 403, description = "`not_owner`: a restricted caller's request for a sandbox it did not create.", body = ErrorBody),
        (status = 429, description = "`busy`: as many streams are open as `--max-streams` allows.", body = ErrorBody),
    )
)]
pub async fn stream(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.map_err(|r| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "not_websocket",
            anyhow::anyhow!(
                "this route speaks WebSocket ({}); for a buffered exec, POST /v1/sandboxes/{{name}}/exec",
                r.body_text()
            ),
        )
    })?;
    authorize(&state, &caller, &name).await?;
    let turn = state.stream_turn().await?;
    let max = state.limits().max_body;
    Ok(upgrade
        .max_message_size(max)
        .on_upgrade(move |socket| run(state, name, socket, turn)))
}

struct Input(mpsc::Receiver<Vec<u8>>);

#[async_trait]
impl ByteSource for Input {
    async fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.0.recv().await)
    }
}

struct Output {
    tag: u8,
    to: mpsc::Sender<Message>,
}

#[async_trait]
impl ByteSink for Output {
    async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut framed = Vec::with_capacity(bytes.len() + 1);
        framed.push(self.tag);
        framed.extend_from_slice(bytes);
        // A client that went away gets nothing more, but the command is
        // not cut loose: its output is drained and dropped until it exits
        // or its timeout kills it (an error here would end the exec with
        // the command still running, and no timeout left to stop it).
        let _ = self.to.send(Message::Binary(framed.into())).await;
        Ok(())
    }
}

fn ending_message(ending: &Ending) -> Message {
    // Serializing these two shapes cannot fail; an empty text is still an end.
    Message::Text(serde_json::to_string(ending).unwrap_or_default().into())
}

async fn run(state: AppState, name: String, socket: WebSocket, _turn: Turn) {
    let (mut to_client, mut from_client) = socket.split();
    let request = match from_client.next().await {
        Some(Ok(Message::Text(text))) => serde_json::from_str::<ExecBody>(text.as_str())
            .map_err(|e| {
                ApiError::bad_request(
                    anyhow::Error::new(e).context("the first message is not a valid exec body"),
                )
            })
            .and_then(|body| exec_request(body, state.limits())),
        _ => Err(ApiError::bad_request(anyhow::anyhow!(
            "the first message must be the exec body as JSON text"
        ))),
    };
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            let _ = to_client
                .send(ending_message(&Ending::Error {
                    error: e.body().error,
                }))
                .await;
            let _ = to_client.close().await;
            return;
        }
    };
    let (stdin_tx, stdin_rx) = mpsc::channel::<Vec<u8>>(QUEUE);
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(QUEUE);
    let reader = tokio::spawn(async move {
        let mut stdin = Some(stdin_tx);
        while let Some(Ok(msg)) = from_client.next().await {
            match msg {
                Message::Binary(bytes) => {
                    if let Some(tx) = &stdin
                        && tx.send(bytes.to_vec()).await.is_err()
                    {
                        stdin = None;
                    }
                }
                // `{"type":"eof"}`, or any other text: the input ends.
                Message::Text(_) => stdin = None,
                Message::Close(_) => break,
                Message::Ping(_) | Message::Pong(_) => {}
            }
        }
    });
    let writer = tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            if to_client.send(msg).await.is_err() {
                return;
            }
        }
        let _ = to_client.close().await;
    });
    let streams = ExecStreams {
        stdin: Some(Box::new(Input(stdin_rx))),
        stdout: Box::new(Output {
            tag: STDOUT,
            to: out_tx.clone(),
        }),
        stderr: Box::new(Output {
            tag: STDERR,
            to: out_tx.clone(),
        }),
    };
    let ending = match state
        .sandboxes()
        .exec_streamed(&name, &request, streams)
        .await
    {
        Ok(exit_code) => Ending::Exit { exit_code },
        Err(e) => {
            let e = ApiError::from(e);
            tracing::info!(sandbox = %name, code = e.code, error = %crate::error::chain(e.error.as_ref()), "streamed exec failed");
            Ending::Error {
                error: e.body().error,
            }
        }
    };
    let _ = out_tx.send(ending_message(&ending)).await;
    drop(out_tx);
    let _ = writer.await;
    reader.abort();
}
