//! Running a command-line tool: an argv (never a shell string), optional
//! standard input, a time bound, and the captured result.
//!
//! [`Runner`] is the seam a provider talks through, so tests can swap the
//! real process runner for a recording fake, and a remote provider can swap
//! it for one that goes over SSH. [`LocalRunner`] adds what only a runner on
//! this host can do: start long-lived processes detached and look programs
//! up on its `PATH`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;

/// One command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// Program and arguments, passed to the OS as a vector.
    pub argv: Vec<String>,
    /// Bytes written to the command's standard input (closed when `None`).
    pub stdin: Option<Vec<u8>>,
    /// Kill the command and report a timeout after this long.
    pub timeout: Duration,
}

impl Invocation {
    /// An invocation of `argv` with no input.
    pub fn new(argv: Vec<String>, timeout: Duration) -> Self {
        Self {
            argv,
            stdin: None,
            timeout,
        }
    }

    /// Feed `data` to the command's standard input.
    pub fn with_stdin(mut self, data: Vec<u8>) -> Self {
        self.stdin = Some(data);
        self
    }

    /// The program name, for messages.
    pub fn program(&self) -> &str {
        self.argv.first().map_or("", String::as_str)
    }
}

/// What a finished command produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunOutput {
    /// Exit status; a command killed by a signal reports 128 + the signal.
    pub exit_code: i32,
    /// Captured standard output.
    pub stdout: Vec<u8>,
    /// Captured standard error.
    pub stderr: Vec<u8>,
}

impl RunOutput {
    /// True when the command exited 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }

    /// Standard error (or, when that is empty, standard output) as trimmed
    /// text, bounded so a chatty tool cannot flood an error message.
    pub fn message(&self) -> String {
        const MAX: usize = 2000;
        let raw = if self.stderr.iter().all(u8::is_ascii_whitespace) {
            &self.stdout
        } else {
            &self.stderr
        };
        let text = String::from_utf8_lossy(raw);
        let text = text.trim();
        match text.char_indices().nth(MAX) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_owned(),
        }
    }
}

/// Why a command could not be run to completion.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The argv was empty.
    #[error("refusing to run an empty command line")]
    Empty,
    /// An argument cannot be handed to a process at all.
    #[error("argument {index} of `{program}` contains a NUL byte, which no process can receive")]
    NulByte {
        /// The program.
        program: String,
        /// Position of the bad argument in argv.
        index: usize,
    },
    /// The program could not be started.
    #[error("cannot start `{program}`: {source}; check that it is installed and on PATH")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The program ran past its time bound and was killed.
    #[error("`{program}` did not finish within {after:?} and was killed")]
    Timeout {
        /// The program.
        program: String,
        /// The bound.
        after: Duration,
    },
    /// Talking to the running program failed.
    #[error("lost contact with `{program}` while it ran: {source}")]
    Io {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl RunError {
    /// True when the command never started, so it cannot have changed
    /// anything (as opposed to a timeout or a lost pipe, after which the
    /// tool may have done part of its work).
    pub fn nothing_ran(&self) -> bool {
        matches!(
            self,
            RunError::Empty | RunError::NulByte { .. } | RunError::Spawn { .. }
        )
    }
}

/// Something that runs argvs: the local OS, SSH to an executor, or a fake.
#[async_trait]
pub trait Runner: Send + Sync + fmt::Debug {
    /// Run `invocation` to completion (or to its timeout).
    async fn run(&self, invocation: &Invocation) -> Result<RunOutput, RunError>;

    /// Where commands run, as recorded in ownership stamps: `local` or the
    /// SSH target.
    fn location(&self) -> String;
}

/// A [`Runner`] whose commands run on this host, so it can also start
/// processes that outlive the call and say where a program would be found.
#[async_trait]
pub trait LocalRunner: Runner {
    /// Start `argv` in the background, detached from corral (own process
    /// group, no standard input, output appended to `log`), and return its
    /// process id without waiting for it.
    async fn spawn_detached(&self, argv: &[String], log: &Path) -> Result<u32, RunError>;

    /// Where `program` would be found on the `PATH` commands run with.
    fn find_program(&self, program: &str) -> Option<PathBuf>;
}

/// A tool's program (`multipass`, `tart`, or a path to one): the first
/// word of every argv built for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program(String);

impl Program {
    /// The program `program`.
    pub fn new(program: impl Into<String>) -> Self {
        Self(program.into())
    }

    /// The program followed by `rest`: the argv of one command.
    pub fn argv(&self, rest: &[&str]) -> Vec<String> {
        std::iter::once(self.0.as_str())
            .chain(rest.iter().copied())
            .map(str::to_owned)
            .collect()
    }
}

/// Refuse argvs the OS cannot carry, before spawning anything (a runner
/// that wraps argvs, like SSH, checks the inner argv with this too).
pub fn check_argv(argv: &[String]) -> Result<(), RunError> {
    let program = argv.first().ok_or(RunError::Empty)?;
    if let Some(index) = argv.iter().position(|a| a.contains('\0')) {
        return Err(RunError::NulByte {
            program: program.clone(),
            index,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_prefers_stderr_and_is_bounded() {
        let out = RunOutput {
            exit_code: 1,
            stdout: b"from stdout".to_vec(),
            stderr: b"  \n".to_vec(),
        };
        assert_eq!(out.message(), "from stdout");
        let long = RunOutput {
            exit_code: 1,
            stdout: vec![],
            stderr: vec![b'x'; 5000],
        };
        assert_eq!(long.message().chars().count(), 2001);
    }

    #[test]
    fn argv_checks() {
        assert!(matches!(check_argv(&[]), Err(RunError::Empty)));
        let err = check_argv(&["echo".into(), "ok".into(), "a\0b".into()]).unwrap_err();
        assert!(matches!(err, RunError::NulByte { index: 2, .. }), "{err}");
        assert!(check_argv(&["echo".into()]).is_ok());
    }

    #[test]
    fn only_failures_to_start_mean_nothing_ran() {
        let io = || io::Error::other("x");
        let program = || "tool".to_owned();
        assert!(RunError::Empty.nothing_ran());
        assert!(
            RunError::Spawn {
                program: program(),
                source: io()
            }
            .nothing_ran()
        );
        assert!(
            !RunError::Timeout {
                program: program(),
                after: Duration::from_secs(1)
            }
            .nothing_ran()
        );
        assert!(
            !RunError::Io {
                program: program(),
                source: io()
            }
            .nothing_ran()
        );
    }
}
