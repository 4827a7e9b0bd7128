//! Running a command with its standard streams live: Incus's exec with
//! `wait-for-websocket`, one WebSocket per stream plus the control channel.
//! Output reaches the caller as the command writes it, standard input is
//! sent as the caller produces it, and the exit status comes from the
//! finished operation.
//!
//! The framing is Incus's: data travels in binary messages; an empty text
//! message (or a close) marks the end of a stream.
//!
//! With a terminal (`ExecRequest::tty`) Incus runs the command on a
//! pseudo-terminal of that size (`interactive`): one WebSocket carries
//! input one way and the terminal's output the other (delivered as
//! standard output), and it closes when the command exits.

use std::time::Duration;

use corral_sandbox_core::sandbox::{ByteSink, ByteSource, ExecRequest, ExecStreams, ProviderError};
use futures::{SinkExt, StreamExt};
use http::Method;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use crate::api;
use crate::client::{ClientError, IncusSocket};
use crate::sandbox::IncusSandbox;

/// Run `request` in `sandbox` (already checked: owned and running) with
/// `streams`; returns the exit status.
pub async fn run(
    sandbox: &IncusSandbox,
    request: &ExecRequest,
    streams: ExecStreams,
) -> Result<i32, ProviderError> {
    if request.argv.is_empty() {
        return Err(ProviderError::InvalidSpec {
            field: "argv",
            reason: "empty; expected a program and its arguments".into(),
        });
    }
    let client = sandbox.provider.client();
    let err = |e: ClientError| sandbox.provider.err(e);
    let mut env = request.env.clone();
    let marker = match request.timeout {
        Some(_) => {
            let id = crate::stamp::Stamp::new(None, None, "exec")?.id;
            env.insert(crate::exec::MARKER_VAR.to_owned(), id.clone());
            Some(format!("{}={id}", crate::exec::MARKER_VAR))
        }
        None => None,
    };
    let mut body = api::exec_body(
        &request.argv,
        &env,
        request.user.map(|u| (u.uid, u.gid)),
        request.cwd.as_deref(),
    );
    body["wait-for-websocket"] = Value::Bool(true);
    body["record-output"] = Value::Bool(false);
    if let Some(size) = request.tty {
        body["interactive"] = Value::Bool(true);
        body["width"] = Value::from(size.width);
        body["height"] = Value::from(size.height);
        if !request.env.contains_key("TERM") {
            body["environment"]["TERM"] = Value::from("xterm-256color");
        }
    }
    let what = format!("exec in {}", sandbox.name);
    let (id, envelope) = client
        .start_operation(Method::POST, &sandbox.path("/exec"), Some(&body))
        .await
        .map_err(err)?;
    let fds = envelope
        .metadata
        .get("metadata")
        .and_then(|m| m.get("fds"))
        .cloned()
        .unwrap_or(Value::Null);
    let secret = |fd: &str| {
        fds.get(fd)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ProviderError::Malformed {
                kind: sandbox.provider.inner.kind,
                operation: what.clone(),
                detail: format!("no websocket secret for fd {fd} in {fds}"),
            })
    };
    let fd_names: &[&str] = if request.tty.is_some() {
        &["control", "0"]
    } else {
        &["control", "0", "1", "2"]
    };
    let mut sockets = Vec::with_capacity(4);
    // Incus starts the command once every channel is connected.
    for fd in fd_names {
        let path = format!("/1.0/operations/{id}/websocket?secret={}", secret(fd)?);
        sockets.push(client.websocket(&path).await.map_err(err)?);
    }
    let ExecStreams {
        stdin,
        stdout,
        stderr,
    } = streams;
    let pump = async {
        if request.tty.is_some() {
            let (Some(terminal), Some(_control)) = (sockets.pop(), sockets.pop()) else {
                unreachable!("two sockets were just pushed");
            };
            let (to_guest, from_guest) = terminal.split();
            let feeding = tokio::spawn(feed_terminal(to_guest, stdin));
            let out = drain(from_guest, stdout).await;
            feeding.abort();
            out.map_err(|e| io_error(&what, "the terminal", e))?;
        } else {
            let (Some(stderr_ws), Some(stdout_ws), Some(stdin_ws), Some(_control)) =
                (sockets.pop(), sockets.pop(), sockets.pop(), sockets.pop())
            else {
                unreachable!("four sockets were just pushed");
            };
            let feeding = tokio::spawn(feed(stdin_ws, stdin));
            let (out, errs) = tokio::join!(drain(stdout_ws, stdout), drain(stderr_ws, stderr));
            // The command may exit without reading all of its input.
            feeding.abort();
            out.map_err(|e| io_error(&what, "standard output", e))?;
            errs.map_err(|e| io_error(&what, "standard error", e))?;
        }
        let wait = request
            .timeout
            .unwrap_or(Duration::from_secs(60))
            .max(Duration::from_secs(1));
        client
            .wait(&what, &id, wait)
            .await
            .map_err(|e| crate::exec::command_error(sandbox, &request.argv, e))
    };
    let finished = match request.timeout {
        Some(limit) => match tokio::time::timeout(limit, pump).await {
            Ok(r) => r,
            Err(_) => {
                if let Some(marker) = &marker {
                    crate::exec::kill_marked(sandbox, marker).await;
                }
                return Err(ProviderError::Timeout {
                    operation: format!("{what}: {:?}", request.argv),
                    after: limit,
                });
            }
        },
        None => pump.await,
    };
    let op = finished?;
    let meta = op.metadata.unwrap_or(Value::Null);
    meta.get("return")
        .and_then(Value::as_i64)
        .and_then(|c| i32::try_from(c).ok())
        .ok_or_else(|| ProviderError::Malformed {
            kind: sandbox.provider.inner.kind,
            operation: what.clone(),
            detail: format!("no exit code in {meta}"),
        })
}

fn io_error(what: &str, stream: &str, source: std::io::Error) -> ProviderError {
    ProviderError::Io {
        context: format!("{what}: {stream}"),
        source,
    }
}

/// Send standard input, then the end-of-stream barrier.
async fn feed(mut ws: IncusSocket, stdin: Option<Box<dyn ByteSource>>) -> std::io::Result<()> {
    if let Some(mut source) = stdin {
        while let Some(chunk) = source.read().await? {
            ws.send(Message::binary(chunk))
                .await
                .map_err(std::io::Error::other)?;
        }
    }
    ws.send(Message::text(""))
        .await
        .map_err(std::io::Error::other)?;
    // Keep the socket open until the daemon closes it: closing it first can
    // end the command's input before the barrier is read.
    while let Some(msg) = ws.next().await {
        if msg.is_err() {
            break;
        }
    }
    Ok(())
}

/// Send input to a terminal as it comes (a terminal has no end of input
/// but the bytes that mean it, such as Ctrl-D, which the caller sends).
async fn feed_terminal(
    mut ws: futures::stream::SplitSink<IncusSocket, Message>,
    stdin: Option<Box<dyn ByteSource>>,
) -> std::io::Result<()> {
    if let Some(mut source) = stdin {
        while let Some(chunk) = source.read().await? {
            ws.send(Message::binary(chunk))
                .await
                .map_err(std::io::Error::other)?;
        }
    }
    Ok(())
}

/// Deliver one output stream until its end-of-stream barrier.
async fn drain(
    mut ws: impl futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
    mut sink: Box<dyn ByteSink>,
) -> std::io::Result<()> {
    while let Some(msg) = ws.next().await {
        match msg.map_err(std::io::Error::other)? {
            Message::Binary(bytes) => sink.write(&bytes).await?,
            Message::Text(_) | Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    }
    Ok(())
}
