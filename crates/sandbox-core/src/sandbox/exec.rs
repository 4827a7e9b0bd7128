use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The identity a command runs as inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecUser {
    /// Numeric user id.
    pub uid: u32,
    /// Numeric group id.
    pub gid: u32,
}

/// A command to run inside a sandbox. `argv` is passed to the backend as a
/// vector and never joined into a shell string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    /// Program and arguments, kept intact.
    pub argv: Vec<String>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
    /// Run as this user (the backend's default user otherwise).
    pub user: Option<ExecUser>,
    /// Working directory inside the sandbox.
    pub cwd: Option<String>,
    /// Data written to the command's standard input.
    pub stdin: Option<Vec<u8>>,
    /// Give up (and report a timeout) after this long.
    pub timeout: Option<Duration>,
    /// Run it on a pseudo-terminal of this size: its output then comes as
    /// one stream, on standard output. Only a streamed exec takes it.
    #[serde(default)]
    pub tty: Option<TerminalSize>,
}

/// A terminal's size, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
}

impl ExecRequest {
    /// A request running `argv` with no extra environment and no timeout.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            user: None,
            cwd: None,
            stdin: None,
            timeout: None,
            tty: None,
        }
    }

    /// Set the timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// What a finished command produced.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecOutput {
    /// Exit status (a signal-killed command reports 128 + signal).
    pub exit_code: i32,
    /// Captured standard output.
    pub stdout: Vec<u8>,
    /// Captured standard error.
    pub stderr: Vec<u8>,
    /// True when a stream was longer than the provider keeps, and `stdout`
    /// or `stderr` holds only its first bytes (the guest decides how much
    /// it prints; the host bounds what it holds).
    #[serde(default)]
    pub truncated: bool,
}

impl ExecOutput {
    /// True when the command exited 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }

    /// Standard output as lossy UTF-8.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Standard error as lossy UTF-8.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// A command on the host that runs something with an interactive terminal
/// inside a sandbox through the backend's own client (e.g. `incus exec`):
/// the front-end hands its terminal over to it after corral's checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalCommand {
    /// The program (the backend's client).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables it needs (where the backend is).
    pub env: Vec<(String, String)>,
}

/// The backend's own client, pointed at one sandbox's daemon and scope,
/// for commands corral does not wrap (`corral incus NAME -- ARGS…`): the
/// caller judges its arguments against the neighbours, then appends them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendClient {
    /// The client with the arguments that point it at the daemon and
    /// scope (the caller appends its own after them).
    pub command: TerminalCommand,
    /// Every other instance in the same scope, corral's or not.
    pub neighbours: Vec<String>,
}
