//! `corral`: the operator's command line. Thin by design: parse the
//! arguments, call the corral libraries, render what they return. No policy
//! is decided here.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod args;
mod commands;
mod error;
mod load;
mod output;
mod privilege;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::args::Cli;
use crate::output::Output;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.global.verbose);
    let out = Output {
        color: output::use_color(cli.global.color),
        quiet: cli.global.quiet,
    };
    match commands::run(cli.command, out) {
        Ok(outcome) => outcome.exit_code(),
        Err(err) => {
            tracing::debug!(error = ?err.error, "command failed");
            if json_asked() && !output::stdout_used() {
                // A script reads stdout: corrald's error body, the one
                // object there.
                let _ = output::print_json(&err.json());
            }
            eprint!("{}", err.render());
            err.exit_code()
        }
    }
}

/// `--json` among corral's own arguments (not after `--`, which are a
/// sandbox command's): clap accepted the line, so there it is the flag.
fn json_asked() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// Logs go to stderr so stdout stays clean for tables and JSON. `RUST_LOG`
/// wins over `-v`.
fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
