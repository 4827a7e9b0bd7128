//! Mapping what a command-line tool answered to the provider vocabulary
//! ([`ProviderError`]), the same way for every CLI-driven provider.

use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::sandbox::{ExecOutput, ProviderError};

use crate::runner::{RunError, RunOutput};
use crate::staging::StagingError;

/// How one tool's failures read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolErrors {
    /// The backend the tool drives; it names the tool in messages.
    pub kind: SandboxKind,
    /// Lower-case phrases that, in a failed command's message, mean the
    /// named instance does not exist.
    pub not_found: &'static [&'static str],
    /// When true, a not-found message that mentions a snapshot is about
    /// the snapshot, not the instance.
    pub snapshots: bool,
}

impl ToolErrors {
    /// A failure to run the command at all.
    pub fn run_error(&self, operation: &str, subject: &str, error: RunError) -> ProviderError {
        match error {
            RunError::Timeout { after, .. } => ProviderError::Timeout {
                operation: format!("{} {operation} `{subject}`", self.kind),
                after,
            },
            e @ (RunError::Empty | RunError::NulByte { .. }) => ProviderError::InvalidSpec {
                field: "argv",
                reason: e.to_string(),
            },
            e @ (RunError::Spawn { .. } | RunError::Io { .. }) => ProviderError::Io {
                context: format!("{} {operation} `{subject}`: {e}", self.kind),
                source: std::io::Error::other(e),
            },
        }
    }

    /// A command that ran and exited non-zero.
    pub fn failure(&self, operation: &str, subject: &str, output: &RunOutput) -> ProviderError {
        let message = output.message();
        let lower = message.to_lowercase();
        if self.not_found.iter().any(|phrase| lower.contains(phrase)) {
            let what = if self.snapshots && lower.contains("snapshot") {
                "snapshot"
            } else {
                "sandbox"
            };
            return ProviderError::NotFound {
                what,
                name: subject.to_owned(),
            };
        }
        if lower.contains("already exists") {
            return ProviderError::AlreadyExists {
                what: "sandbox",
                name: subject.to_owned(),
            };
        }
        ProviderError::Backend {
            kind: self.kind,
            operation: operation.to_owned(),
            message,
            code: Some(i64::from(output.exit_code)),
        }
    }

    /// The output of a command that succeeded, or the error it amounts to.
    pub fn check(
        &self,
        operation: &str,
        subject: &str,
        result: Result<RunOutput, RunError>,
    ) -> Result<RunOutput, ProviderError> {
        self.check_with(operation, subject, result, |_| None)
    }

    /// [`ToolErrors::check`], where `special` sees a failed command first
    /// and may say what it means (a wrapper's own failure, such as ssh's
    /// exit 255, before the tool's message is read).
    pub fn check_with(
        &self,
        operation: &str,
        subject: &str,
        result: Result<RunOutput, RunError>,
        special: impl FnOnce(&RunOutput) -> Option<ProviderError>,
    ) -> Result<RunOutput, ProviderError> {
        let output = result.map_err(|e| self.run_error(operation, subject, e))?;
        if output.success() {
            return Ok(output);
        }
        Err(special(&output).unwrap_or_else(|| self.failure(operation, subject, &output)))
    }
}

/// A staging failure, as the provider reports it.
pub fn staging_error(e: StagingError) -> ProviderError {
    ProviderError::Io {
        context: e.to_string(),
        source: std::io::Error::other(e),
    }
}

/// A command run inside a sandbox: a non-zero exit is the command's own
/// answer, not a provider error, so the output passes through whole.
pub fn exec_output(output: RunOutput) -> ExecOutput {
    ExecOutput {
        exit_code: output.exit_code,
        stdout: output.stdout,
        stderr: output.stderr,
        truncated: false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const TOOL: ToolErrors = ToolErrors {
        kind: SandboxKind::Tart,
        not_found: &["does not exist", "not found"],
        snapshots: false,
    };

    fn failed(err: &str, code: i32) -> RunOutput {
        RunOutput {
            exit_code: code,
            stdout: Vec::new(),
            stderr: err.as_bytes().to_vec(),
        }
    }

    #[test]
    fn failures_map_to_the_provider_vocabulary() {
        let e = TOOL.failure("start", "vm-1", &failed("VM \"vm-1\" Not Found", 1));
        assert!(
            matches!(&e, ProviderError::NotFound { what: "sandbox", name } if name == "vm-1"),
            "{e}"
        );
        let e = TOOL.failure("clone", "vm-1", &failed("VM already exists", 1));
        assert!(
            matches!(
                e,
                ProviderError::AlreadyExists {
                    what: "sandbox",
                    ..
                }
            ),
            "{e}"
        );
        let e = TOOL.failure("set", "vm-1", &failed("disk too small", 2));
        match e {
            ProviderError::Backend {
                kind,
                operation,
                message,
                code,
            } => {
                assert_eq!(kind, SandboxKind::Tart);
                assert_eq!(operation, "set");
                assert_eq!(message, "disk too small");
                assert_eq!(code, Some(2));
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn snapshot_messages_name_the_snapshot_only_when_asked() {
        let out = failed("snapshot \"s1\" does not exist", 2);
        let with = ToolErrors {
            kind: SandboxKind::Multipass,
            not_found: &["does not exist"],
            snapshots: true,
        };
        assert!(matches!(
            with.failure("restore", "vm.s1", &out),
            ProviderError::NotFound {
                what: "snapshot",
                ..
            }
        ));
        assert!(matches!(
            TOOL.failure("restore", "vm.s1", &out),
            ProviderError::NotFound {
                what: "sandbox",
                ..
            }
        ));
        // Only the configured phrases count.
        assert!(matches!(
            with.failure("info", "vm", &failed("instance not found", 2)),
            ProviderError::Backend { .. }
        ));
    }

    #[test]
    fn run_errors_map_by_cause() {
        let e = TOOL.run_error(
            "clone",
            "vm-1",
            RunError::Timeout {
                program: "tart".into(),
                after: Duration::from_secs(3),
            },
        );
        match e {
            ProviderError::Timeout { operation, after } => {
                assert_eq!(operation, "tart clone `vm-1`");
                assert_eq!(after, Duration::from_secs(3));
            }
            other => panic!("{other}"),
        }
        let e = TOOL.run_error("list", "all", RunError::Empty);
        assert!(
            matches!(e, ProviderError::InvalidSpec { field: "argv", .. }),
            "{e}"
        );
        let e = TOOL.run_error(
            "list",
            "all",
            RunError::Spawn {
                program: "tart".into(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            },
        );
        assert!(e.to_string().contains("tart list `all`"), "{e}");
    }

    #[test]
    fn check_passes_success_through() {
        let ok = RunOutput {
            exit_code: 0,
            stdout: b"[]".to_vec(),
            stderr: Vec::new(),
        };
        assert_eq!(TOOL.check("list", "all", Ok(ok.clone())).unwrap(), ok);
        assert!(TOOL.check("list", "all", Ok(failed("boom", 1))).is_err());
    }

    #[test]
    fn a_special_failure_is_read_first_and_only_for_failures() {
        let special = |out: &RunOutput| {
            (out.exit_code == 255).then(|| ProviderError::Io {
                context: "wrapper failed".to_owned(),
                source: std::io::Error::other("x"),
            })
        };
        let e = TOOL
            .check_with("start", "vm", Ok(failed("does not exist", 255)), special)
            .unwrap_err();
        assert!(matches!(e, ProviderError::Io { .. }), "{e}");
        let e = TOOL
            .check_with("start", "vm", Ok(failed("does not exist", 1)), special)
            .unwrap_err();
        assert!(matches!(e, ProviderError::NotFound { .. }), "{e}");
        let ok = RunOutput::default();
        assert!(TOOL.check_with("start", "vm", Ok(ok), special).is_ok());
    }

    #[test]
    fn exec_output_keeps_everything() {
        let out = exec_output(failed("nope", 7));
        assert_eq!(out.exit_code, 7);
        assert_eq!(out.stderr, b"nope");
    }
}
