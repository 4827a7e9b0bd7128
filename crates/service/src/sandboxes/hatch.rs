//! `corral incus NAME -- ARGS…`: the backend's own client on one sandbox,
//! for what corral does not wrap. corral checks ownership, judges ARGS
//! ([`crate::hatch::judge`]), records the event, and gives the front-end
//! the command to run with its standard streams.

use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::sandbox::TerminalCommand;

use super::SandboxService;
use crate::error::ServiceError;
use crate::hatch::{HatchRefusal, Moves, judge};
use crate::hooks::Event;

/// What the escape hatch runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hatch {
    /// The client with every argument, ready to run.
    pub command: TerminalCommand,
    /// The isolation-moving arguments `--i-know` let through (the
    /// front-end warns about each).
    pub moves: Vec<Moves>,
}

impl SandboxService {
    /// The Incus client command running `args` against sandbox `name`
    /// (ownership checked, arguments judged, event recorded).
    pub async fn hatch(
        &self,
        name: &str,
        args: &[String],
        i_know: bool,
    ) -> Result<Hatch, ServiceError> {
        let sandbox = self.open(name).await?;
        if !matches!(
            sandbox.kind(),
            SandboxKind::Incus | SandboxKind::IncusRemote
        ) {
            return Err(HatchRefusal::NotIncus {
                name: name.to_owned(),
                kind: sandbox.kind(),
            }
            .into());
        }
        let client = sandbox.client().await?;
        let moves = judge(name, args, &client.neighbours, i_know)?;
        let mut command = client.command;
        command.args.extend(args.iter().cloned());
        self.hooks
            .record(&Event::Hatch {
                name: name.to_owned(),
                args: args.to_vec(),
                moved: moves.iter().map(|m| m.arg.clone()).collect(),
            })
            .await;
        Ok(Hatch { command, moves })
    }
}
