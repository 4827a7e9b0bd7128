//! How a failed command ends: which exit code, and the whole `source()`
//! chain printed on stderr so the root cause is never hidden.

use std::fmt::Write as _;
use std::process::ExitCode;

use crate::privilege;

/// Exit code for success.
pub const EXIT_OK: u8 = 0;
/// Exit code for a failure: drift, a failed probe, a refused apply, an I/O error.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code for bad usage or a bad configuration: the input must change.
pub const EXIT_USAGE: u8 = 2;

/// What kind of failure ended the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The command line or the configuration is wrong (exit 2).
    Usage,
    /// The work failed (exit 1).
    Failure,
}

/// A failed command.
#[derive(Debug)]
pub struct CliError {
    /// Exit-code class.
    pub kind: Kind,
    /// What went wrong, with its causes.
    pub error: anyhow::Error,
}

impl CliError {
    /// A usage or configuration error (exit 2).
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            kind: Kind::Usage,
            error: error.into(),
        }
    }

    /// A failure of the work itself (exit 1).
    pub fn failure(error: impl Into<anyhow::Error>) -> Self {
        Self {
            kind: Kind::Failure,
            error: error.into(),
        }
    }

    /// The process exit code.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self.kind {
            Kind::Usage => EXIT_USAGE,
            Kind::Failure => EXIT_FAILURE,
        })
    }

    /// The code corrald would answer this failure with (docs/api.md's
    /// table): a failed sandbox operation's as corrald gives it; else `bad_request` for bad usage, `permission_denied` when the
    /// kernel refused for lack of privilege, `internal` otherwise.
    pub fn code(&self) -> &'static str {
        for e in self.error.chain() {
            if let Some(s) = e.downcast_ref::<corral_service::ServiceError>() {
                return corral_service::shapes::failure_code(s);
            } else if let Some(p) = e.downcast_ref::<corral_sandbox_core::sandbox::ProviderError>()
            {
                return corral_service::shapes::provider_code(p);
            }
        }
        let root: &(dyn std::error::Error + 'static) = self.error.as_ref();
        match self.kind {
            Kind::Usage => "bad_request",
            Kind::Failure if privilege::is_permission_error(root) => "permission_denied",
            Kind::Failure => "internal",
        }
    }

    /// The failure as `--json` prints it on stdout: corrald's error body
    /// (a failed sandbox operation through the serializer corrald uses).
    pub fn json(&self) -> corral_service::shapes::ErrorBody {
        // The failure itself, not one found under a context of ours (whose
        // words the message keeps).
        let outermost = self.error.chain().next();
        match outermost.and_then(|e| e.downcast_ref::<corral_service::ServiceError>()) {
            Some(e) => corral_service::shapes::ErrorBody::failure(e),
            None => corral_service::shapes::ErrorBody::new(self.code(), self.error.as_ref()),
        }
    }

    /// The text printed on stderr: the error, each cause on its own line, and
    /// a privilege hint when the kernel said "permission denied".
    pub fn render(&self) -> String {
        let mut out = format!("error: {}\n", self.error);
        for cause in self.error.chain().skip(1) {
            let _ = writeln!(out, "  caused by: {cause}");
        }
        let root: &(dyn std::error::Error + 'static) = self.error.as_ref();
        let already_explained = self
            .error
            .chain()
            .any(|e| e.downcast_ref::<privilege::MissingCapability>().is_some());
        if !already_explained && privilege::is_permission_error(root) {
            out.push_str(
                "  hint: the kernel refused for lack of privilege; corral's host commands and the \
                 drill need CAP_NET_ADMIN and CAP_SYS_ADMIN: run as root (`sudo corral …`)\n",
            );
        }
        // Errors quote what they refused; the libraries escape those values,
        // and this is the backstop for any message that did not: nothing
        // but our own line breaks reaches the terminal unescaped.
        corral_sandbox_core::text::escape_except(&out, &['\n']).into_owned()
    }
}

/// Any error that reaches `main` unclassified is a failure of the work.
impl From<anyhow::Error> for CliError {
    fn from(error: anyhow::Error) -> Self {
        Self::failure(error)
    }
}

/// What a command that ran to the end concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything as expected (exit 0).
    Ok,
    /// The command ran but found a problem it already reported, such as drift
    /// or a failed probe (exit 1).
    Failed,
    /// A command run in a sandbox exited with this status, which becomes
    /// corral's own.
    Passthrough(u8),
}

impl Outcome {
    /// The process exit code.
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(match self {
            Outcome::Ok => EXIT_OK,
            Outcome::Failed => EXIT_FAILURE,
            Outcome::Passthrough(code) => code,
        })
    }
}

/// The result every command returns.
pub type CmdResult = Result<Outcome, CliError>;

#[cfg(test)]
mod tests {
    use anyhow::Context as _;

    use super::*;

    #[test]
    fn render_prints_every_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let err = Err::<(), _>(io)
            .context("reading /etc/corral/corral.toml")
            .context("loading the configuration")
            .unwrap_err();
        let text = CliError::usage(err).render();
        assert_eq!(
            text,
            "error: loading the configuration\n  caused by: reading /etc/corral/corral.toml\n  caused by: no such file\n"
        );
    }

    #[test]
    fn eperm_gets_a_privilege_hint() {
        let err = anyhow::Error::new(std::io::Error::from_raw_os_error(1)).context("applying");
        let text = CliError::failure(err).render();
        assert!(text.contains("CAP_NET_ADMIN"), "{text}");
    }

    #[test]
    fn json_errors_carry_the_service_code_and_the_chain() {
        let e = corral_service::ServiceError::Provider(
            corral_sandbox_core::sandbox::ProviderError::NotFound {
                what: "sandbox",
                name: "a1".into(),
            },
        );
        let err = CliError::failure(anyhow::Error::new(e).context("cannot start a1"));
        let body = serde_json::to_value(err.json()).unwrap();
        assert_eq!(body["error"]["code"], "not_found");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("cannot start a1: "), "{message}");
        // A sandbox action's own failure: the body corrald answers for it.
        let e = corral_service::ServiceError::Provider(
            corral_sandbox_core::sandbox::ProviderError::NotFound {
                what: "sandbox",
                name: "a1".into(),
            },
        );
        let want = serde_json::to_value(corral_service::shapes::ErrorBody::failure(&e)).unwrap();
        let err = CliError::failure(anyhow::Error::new(e));
        assert_eq!(serde_json::to_value(err.json()).unwrap(), want);
        assert_eq!(
            CliError::usage(anyhow::anyhow!("--cpu 0"))
                .json()
                .error
                .code,
            "bad_request"
        );
    }

    #[test]
    fn exit_codes() {
        assert_eq!(
            CliError::usage(anyhow::anyhow!("x")).exit_code(),
            ExitCode::from(2)
        );
        assert_eq!(
            CliError::failure(anyhow::anyhow!("x")).exit_code(),
            ExitCode::from(1)
        );
        assert_eq!(Outcome::Failed.exit_code(), ExitCode::from(1));
    }
}
