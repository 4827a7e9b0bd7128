//! `corral host …`: plan, apply, status, verify, teardown, refresh, watch. Each verb
//! loads the configuration, checks privileges, picks the target namespace,
//! calls the egress crate and renders its answer.

mod apply;
pub(crate) mod context;
mod plan;
mod render;
mod status;
mod teardown;
mod verify;
mod watch;

use crate::args::HostCommand;
use crate::error::CmdResult;
use crate::output::Output;

/// Run a `host` subcommand.
pub fn run(cmd: HostCommand, out: Output) -> CmdResult {
    match cmd {
        HostCommand::Plan(args) => plan::run(&args, out),
        HostCommand::Apply(args) if args.dry_run => plan::run(&args.host, out),
        HostCommand::Apply(args) => apply::run(&args.host, args.force, out),
        HostCommand::Status(args) => status::run(&args, out),
        HostCommand::Verify(args) => verify::run(&args, out),
        HostCommand::Teardown(args) => teardown::run(&args, out),
        HostCommand::Refresh(args) => apply::refresh(&args, out),
        HostCommand::Watch(args) => watch::run(&args, out),
    }
}
