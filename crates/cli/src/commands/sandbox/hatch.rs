//! `corral incus NAME [--i-know] -- ARGS…`: the escape hatch. corral checks
//! that NAME is its own, judges ARGS (another instance: refused; an
//! isolation-moving argument: refused unless --i-know, then warned about),
//! records the event, and hands its standard streams to Incus's client,
//! which replaces this process: the exit status is the client's.

use std::os::unix::process::CommandExt as _;

use super::context::{fail, service};
use crate::args::IncusArgs;
use crate::error::{CliError, CmdResult};
use crate::output::Output;

/// Run the client.
pub fn run(args: &IncusArgs, _out: Output) -> CmdResult {
    let (svc, rt) = service(&args.ctx)?;
    let hatch = rt
        .block_on(svc.hatch(&args.name, &args.args, args.i_know))
        .map_err(fail)?;
    rt.shutdown_background();
    for moved in &hatch.moves {
        eprintln!(
            "warning: --i-know: `{}` moves isolation of `{}`: {}",
            moved.arg, args.name, moved.isolation
        );
    }
    let command = hatch.command;
    let err = std::process::Command::new(&command.program)
        .args(&command.args)
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .exec();
    Err(CliError::failure(anyhow::Error::new(err).context(format!(
        "cannot run {} (is Incus's client installed?)",
        command.program
    ))))
}
