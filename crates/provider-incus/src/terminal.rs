//! An interactive terminal in an instance through Incus's own client:
//! `incus exec --mode interactive`, pointed at the daemon corral talks to
//! (`INCUS_SOCKET`, `--force-local`: never a remote from the user's client
//! configuration) and at corral's project. The caller checks ownership
//! first; the instance name is a validated sandbox name and the command
//! follows `--`, so neither can be read as an option.

use corral_sandbox_core::sandbox::{Operation, ProviderError, TerminalCommand};

use crate::config::Endpoint;
use crate::sandbox::IncusSandbox;

/// The client Incus installs.
pub const CLIENT: &str = "incus";

/// The host command running `argv` in `sandbox` with a terminal.
pub fn command(sandbox: &IncusSandbox, argv: &[String]) -> Result<TerminalCommand, ProviderError> {
    let config = sandbox.provider.config();
    let Endpoint::Unix(socket) = &config.endpoint else {
        // A remote's client needs its own trust set-up, which corral does
        // not hold for the user.
        return Err(ProviderError::Unsupported {
            kind: sandbox.provider.inner.kind,
            operation: Operation::Exec,
        });
    };
    if argv.is_empty() {
        return Err(ProviderError::InvalidSpec {
            field: "argv",
            reason: "empty; expected a program and its arguments".into(),
        });
    }
    let mut args: Vec<String> = [
        "--force-local",
        "--project",
        config.project.as_str(),
        "exec",
        sandbox.name.as_str(),
        "--mode",
        "interactive",
        "--",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    args.extend(argv.iter().cloned());
    Ok(TerminalCommand {
        program: CLIENT.to_owned(),
        args,
        env: vec![("INCUS_SOCKET".to_owned(), socket.display().to_string())],
    })
}
