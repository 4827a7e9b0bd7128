//! Incus's own client, pointed at the daemon corral talks to
//! (`INCUS_SOCKET`, `--force-local`: never a remote from the user's client
//! configuration) and at corral's project, with the user's aliases off: an interactive terminal in an
//! instance (`incus exec --mode interactive`), and the escape hatch's
//! client. The caller checks ownership first; for the terminal the
//! instance name is a validated sandbox name and the command follows `--`,
//! so neither can be read as an option.

use corral_sandbox_core::sandbox::{BackendClient, ProviderError, TerminalCommand};

use crate::config::Endpoint;
use crate::sandbox::IncusSandbox;

/// The client Incus installs.
pub const CLIENT: &str = "incus";

/// The client pointed at `sandbox`'s daemon and project; `operation` (the
/// verb, for the refusal) needs a local daemon.
pub fn client(sandbox: &IncusSandbox, operation: &str) -> Result<TerminalCommand, ProviderError> {
    let config = sandbox.provider.config();
    let socket = match &config.endpoint {
        Endpoint::Unix(socket) => socket,
        // A remote's client needs its own trust set-up, which corral does
        // not hold for the user.
        Endpoint::Https { address, .. } => {
            return Err(ProviderError::LocalOnly {
                kind: sandbox.provider.inner.kind,
                operation: operation.to_owned(),
                endpoint: address.clone(),
            });
        }
    };
    Ok(TerminalCommand {
        program: CLIENT.to_owned(),
        args: vec![
            "--force-local".to_owned(),
            "--project".to_owned(),
            config.project.clone(),
        ],
        env: vec![
            ("INCUS_SOCKET".to_owned(), socket.display().to_string()),
            // The client expands the user's aliases before it parses, and
            // an alias may shadow any command (`info` → `start`): with
            // expansion off the words corral judged are the words Incus
            // runs. (The client sets this itself to stop alias loops.)
            ("INCUS_ALIASES".to_owned(), "1".to_owned()),
        ],
    })
}

/// The host command running `argv` in `sandbox` with a terminal.
pub fn command(sandbox: &IncusSandbox, argv: &[String]) -> Result<TerminalCommand, ProviderError> {
    let mut command = client(sandbox, "corral shell")?;
    if argv.is_empty() {
        return Err(ProviderError::InvalidSpec {
            field: "argv",
            reason: "empty; expected a program and its arguments".into(),
        });
    }
    command.args.extend(
        ["exec", sandbox.name.as_str(), "--mode", "interactive", "--"]
            .into_iter()
            .map(str::to_owned),
    );
    command.args.extend(argv.iter().cloned());
    Ok(command)
}

/// The escape hatch's client, with every other instance of the project
/// (corral's or not), read from the daemon now.
pub async fn hatch(sandbox: &IncusSandbox) -> Result<BackendClient, ProviderError> {
    let command = client(sandbox, "corral incus")?;
    let neighbours = sandbox
        .provider
        .instance_names()
        .await?
        .into_iter()
        .filter(|n| n != sandbox.name.as_str())
        .collect();
    Ok(BackendClient {
        command,
        neighbours,
    })
}
