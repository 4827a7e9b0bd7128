//! `corral shell NAME`: an interactive login shell in a running sandbox.
//! It needs a terminal (scripts use `corral exec`). After corral checks
//! ownership and state and records the event, the terminal is handed to
//! the backend's own client (`incus exec`), which replaces this process:
//! the shell's exit status is the command's.

use std::io::IsTerminal as _;
use std::os::unix::process::CommandExt as _;

use super::context::{fail, service};
use crate::args::ShellArgs;
use crate::error::{CliError, CmdResult};
use crate::output::Output;

/// Open the shell.
pub fn run(args: &ShellArgs, _out: Output) -> CmdResult {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(CliError::usage(anyhow::anyhow!(
            "`corral shell` needs a terminal on standard input and output; run a command without one with `corral exec {} -- ARGV…`",
            args.name
        )));
    }
    let (svc, rt) = service(&args.ctx)?;
    let command = rt.block_on(svc.shell(&args.name)).map_err(fail)?;
    rt.shutdown_background();
    let err = std::process::Command::new(&command.program)
        .args(&command.args)
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .exec();
    Err(CliError::failure(anyhow::Error::new(err).context(format!(
        "cannot run {} to hand the terminal over (is the backend's client installed?)",
        command.program
    ))))
}
