//! `shell NAME`: an interactive terminal in a running sandbox. corral
//! checks ownership and state, records the event, and gives the front-end
//! the backend's own client command to hand its terminal to.

use corral_sandbox_core::sandbox::TerminalCommand;

use super::SandboxService;
use crate::error::ServiceError;
use crate::hooks::Event;

/// What a shell runs: the guest's bash as a login shell when it has one,
/// else its `sh`.
pub const LOGIN_SHELL: [&str; 3] = [
    "/bin/sh",
    "-c",
    "if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l",
];

impl SandboxService {
    /// The host command giving an interactive login shell in sandbox
    /// `name` (ownership checked, running).
    pub async fn shell(&self, name: &str) -> Result<TerminalCommand, ServiceError> {
        let argv: Vec<String> = LOGIN_SHELL.iter().map(|s| (*s).to_owned()).collect();
        let command = self.open(name).await?.terminal(&argv).await?;
        self.hooks
            .record(&Event::Shell {
                name: name.to_owned(),
            })
            .await;
        Ok(command)
    }
}
