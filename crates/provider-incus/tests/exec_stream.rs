//! Streamed exec on a real container: output reaches the caller while the
//! command still runs, input sent afterwards reaches the command, bytes
//! are exact, and the exit status comes back.

mod common;

use std::time::Duration;

use async_trait::async_trait;
use common::{ok, provider, spec, unique};
use corral_sandbox_core::sandbox::{
    BufferSource, ByteSink, ByteSource, ExecRequest, ExecStreams, SandboxProvider,
};
use tokio::sync::mpsc;

struct ChannelSink(mpsc::UnboundedSender<Vec<u8>>);

#[async_trait]
impl ByteSink for ChannelSink {
    async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let _ = self.0.send(bytes.to_vec());
        Ok(())
    }
}

struct ChannelSource(mpsc::UnboundedReceiver<Vec<u8>>);

#[async_trait]
impl ByteSource for ChannelSource {
    async fn read(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        Ok(self.0.recv().await)
    }
}

#[tokio::test]
async fn output_streams_while_the_command_runs_and_input_follows() {
    let Some(p) = provider().await else { return };
    let name = unique("stream");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    ok(sb.start().await, "start");

    let (out_tx, mut out_rx) = mpsc::unbounded_channel();
    let (err_tx, mut err_rx) = mpsc::unbounded_channel();
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let req = ExecRequest::new([
        "sh",
        "-c",
        "echo ready; read line; printf 'got:%s\\377' \"$line\"; echo warn >&2; exit 5",
    ]);
    let streams = ExecStreams {
        stdin: Some(Box::new(ChannelSource(in_rx))),
        stdout: Box::new(ChannelSink(out_tx)),
        stderr: Box::new(ChannelSink(err_tx)),
    };
    let run = sb.exec_streamed(&req, streams);
    let drive = async {
        // The command waits for input, so "ready" can only arrive if output
        // is delivered while it runs.
        let first = tokio::time::timeout(Duration::from_secs(30), out_rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no output while the command waits for input"));
        assert_eq!(first.as_deref(), Some(&b"ready\n"[..]));
        in_tx.send(b"a b; $x\n".to_vec()).unwrap();
        drop(in_tx);
    };
    let (code, ()) = tokio::join!(run, drive);
    assert_eq!(ok(code, "exec_streamed"), 5);
    let mut rest = Vec::new();
    while let Ok(chunk) = out_rx.try_recv() {
        rest.extend(chunk);
    }
    assert_eq!(rest, b"got:a b; $x\xff");
    let mut err = Vec::new();
    while let Ok(chunk) = err_rx.try_recv() {
        err.extend(chunk);
    }
    assert_eq!(err, b"warn\n");

    // A command that never reads its input still finishes; no input at all
    // is an empty standard input.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (etx, _erx) = mpsc::unbounded_channel();
    let code = sb
        .exec_streamed(
            &ExecRequest::new(["wc", "-c"]),
            ExecStreams {
                stdin: Some(Box::new(BufferSource::new(vec![b'x'; 100_000]))),
                stdout: Box::new(ChannelSink(tx)),
                stderr: Box::new(ChannelSink(etx)),
            },
        )
        .await;
    assert_eq!(ok(code, "wc"), 0);
    let mut out = Vec::new();
    while let Ok(chunk) = rx.try_recv() {
        out.extend(chunk);
    }
    assert_eq!(String::from_utf8_lossy(&out).trim(), "100000");
    let (tx, _rx) = mpsc::unbounded_channel();
    let (etx, _erx) = mpsc::unbounded_channel();
    let code = sb
        .exec_streamed(
            &ExecRequest::new(["true"]),
            ExecStreams {
                stdin: None,
                stdout: Box::new(ChannelSink(tx)),
                stderr: Box::new(ChannelSink(etx)),
            },
        )
        .await;
    assert_eq!(ok(code, "true"), 0);
}
