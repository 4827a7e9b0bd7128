//! `corral exec NAME -- ARGV…`: the argv reaches the sandbox intact (never
//! through a shell), standard input, output and error stream both ways as
//! the command runs, and its exit status becomes corral's.

use std::collections::BTreeMap;
use std::io::Read as _;

use async_trait::async_trait;
use corral_sandbox_core::sandbox::{ByteSink, ByteSource, ExecRequest, ExecStreams};
use tokio::io::AsyncWriteExt as _;
use tokio::sync::mpsc;

use super::context::{fail, service};
use crate::args::ExecArgs;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::Output;

/// corral's standard input, read on a thread of its own (a blocking read of
/// a terminal must not hold up the exit when the command ends first).
struct Stdin(mpsc::Receiver<std::io::Result<Vec<u8>>>);

impl Stdin {
    fn start() -> Self {
        let (tx, rx) = mpsc::channel(4);
        let spawned = std::thread::Builder::new()
            .name("stdin".into())
            .spawn(move || {
                let mut stdin = std::io::stdin().lock();
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match stdin.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            if tx.blocking_send(Ok(buf[..n].to_vec())).is_err() {
                                break;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            let _ = tx.blocking_send(Err(e));
                            break;
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot read standard input; the command gets none");
        }
        Self(rx)
    }
}

#[async_trait]
impl ByteSource for Stdin {
    async fn read(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        self.0.recv().await.transpose()
    }
}

/// corral's standard output or error, flushed chunk by chunk so output
/// appears as the command writes it.
struct Out<W>(W);

#[async_trait]
impl<W: tokio::io::AsyncWrite + Send + Unpin> ByteSink for Out<W> {
    async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self.0.write_all(bytes).await.and(self.0.flush().await) {
            // A closed pipe (`corral exec … | head`) is normal use.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            other => other,
        }
    }
}

fn env(pairs: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => Err(CliError::usage(anyhow::anyhow!(
                "--env {p}: expected KEY=VALUE"
            ))),
        })
        .collect()
}

/// Run the command; its exit status is corral's.
pub fn run(args: &ExecArgs, _out: Output) -> CmdResult {
    let env = env(&args.env)?;
    let (svc, rt) = service(&args.ctx)?;
    let request = ExecRequest {
        env,
        cwd: args.cwd.clone(),
        ..ExecRequest::new(args.argv.clone())
    };
    let code = rt
        .block_on(async {
            let streams = ExecStreams {
                stdin: if args.no_stdin {
                    None
                } else {
                    Some(Box::new(Stdin::start()) as Box<dyn ByteSource>)
                },
                stdout: Box::new(Out(tokio::io::stdout())),
                stderr: Box::new(Out(tokio::io::stderr())),
            };
            svc.exec_streamed(&args.name, &request, streams).await
        })
        .map_err(fail)?;
    // The stdin thread may still sit in a read of a terminal: do not wait.
    rt.shutdown_background();
    Ok(Outcome::Passthrough(
        u8::try_from(code.clamp(0, 255)).unwrap_or(255),
    ))
}
