//! One module per verb. Each `run` returns an [`Outcome`] or a classified
//! [`CliError`](crate::error::CliError); printing goes through [`Output`].

mod approvals;
mod cluster;
mod completions;
mod config;
mod drill;
mod explain;
mod grants;
mod host;
mod log;
mod man;
mod matrix;
mod profiles;
mod sandbox;
mod templates;
mod verification;

use crate::args::Command;
use crate::error::{CmdResult, Outcome};
use crate::output::Output;
use corral_gateway::approvals::Decision;

/// Run one parsed command.
pub fn run(command: Command, out: Output) -> CmdResult {
    match command {
        Command::Host(cmd) => host::run(cmd, out),
        Command::Config(cmd) => config::run(cmd, out),
        Command::Matrix(args) => matrix::run(&args, out),
        Command::Profiles(args) => profiles::run(&args, out),
        Command::Drill(args) => drill::run(&args, out),
        Command::New(args) => sandbox::new(&args, out),
        Command::Ls(args) => sandbox::ls(&args, out),
        Command::Info(args) => sandbox::info(&args, out),
        Command::Exec(args) => sandbox::exec(&args, out),
        Command::Start(args) => sandbox::start(&args, out),
        Command::Stop(args) => sandbox::stop(&args, out),
        Command::Restart(args) => sandbox::restart(&args, out),
        Command::Rm(args) => sandbox::rm(&args, out),
        Command::Templates(args) => templates::run(&args, out),
        Command::Snapshot(args) => sandbox::snapshot(&args, out),
        Command::Restore(args) => sandbox::restore(&args, out),
        Command::Rename(args) => sandbox::rename(&args, out),
        Command::Export(args) => sandbox::export(&args, out),
        Command::Import(args) => sandbox::import(&args, out),
        Command::Push(args) => sandbox::push(&args, out),
        Command::Pull(args) => sandbox::pull(&args, out),
        Command::Shell(args) => sandbox::shell(&args, out),
        Command::Incus(args) => sandbox::incus(&args, out),
        Command::Verify(args) => sandbox::verify(&args, out),
        Command::Events(args) => verification::events(&args, out),
        Command::Cluster(cmd) => cluster::run(cmd, out),
        Command::Gate(args) => verification::gate(&args, out),
        Command::Log(args) => log::run(&args, out),
        Command::Explain(args) => explain::run(&args, out),
        Command::Approvals(args) => approvals::list(&args, out),
        Command::Approve(args) => approvals::decide(&args, Decision::Once, out),
        Command::Deny(args) => approvals::decide(&args, Decision::Deny, out),
        Command::Grant(args) => grants::grant(&args, out),
        Command::Revoke(args) => grants::revoke(&args, out),
        Command::Completions(args) => {
            completions::run(&args);
            Ok(Outcome::Ok)
        }
        Command::Man(args) => man::run(&args, out),
    }
}
