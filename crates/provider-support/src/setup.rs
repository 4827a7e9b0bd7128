//! The checks every CLI-driven provider makes before it is built: this
//! host's OS is one corral knows, the platform matrix supports the kind
//! here, and the instance-name prefix is usable.

use corral_sandbox_core::platform::{self, Cell};
use corral_sandbox_core::{HostOs, SandboxKind};

use crate::ownership::valid_name_prefix;

/// Why a provider cannot be set up on this host with this configuration.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The platform matrix refuses this kind on this host.
    #[error("{kind} sandboxes are refused on {host}: {reason}; use {use_instead}")]
    Platform {
        /// The kind.
        kind: SandboxKind,
        /// The host OS.
        host: HostOs,
        /// Why.
        reason: &'static str,
        /// The alternative.
        use_instead: &'static str,
    },
    /// corral does not know this host's OS.
    #[error("{kind} sandboxes cannot run here: this host's OS `{os}` is not one corral supports")]
    UnknownHost {
        /// The kind.
        kind: SandboxKind,
        /// The OS as Rust names it.
        os: String,
    },
    /// The name prefix is unusable.
    #[error(
        "name prefix `{0}` is invalid; expected 2 to 20 of [a-z0-9-], starting with a letter and ending with `-`"
    )]
    Prefix(String),
}

/// This host's OS, for a `kind` provider.
pub fn this_host(kind: SandboxKind) -> Result<HostOs, SetupError> {
    HostOs::from_target_os(std::env::consts::OS).ok_or_else(|| SetupError::UnknownHost {
        kind,
        os: std::env::consts::OS.to_owned(),
    })
}

/// Refuse `kind` on `host` where the platform matrix does.
pub fn check_platform(host: HostOs, kind: SandboxKind) -> Result<(), SetupError> {
    match platform::cell(host, kind) {
        Cell::Supported(_) => Ok(()),
        Cell::Refused(r) => Err(SetupError::Platform {
            kind,
            host,
            reason: r.reason,
            use_instead: r.use_instead,
        }),
    }
}

/// Refuse an unusable instance-name prefix ([`valid_name_prefix`]).
pub fn check_prefix(prefix: &str) -> Result<(), SetupError> {
    if valid_name_prefix(prefix) {
        Ok(())
    } else {
        Err(SetupError::Prefix(prefix.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matrix_and_the_prefix_decide() {
        assert!(check_platform(HostOs::Linux, SandboxKind::Multipass).is_ok());
        assert!(check_platform(HostOs::Macos, SandboxKind::Tart).is_ok());
        let err = check_platform(HostOs::Linux, SandboxKind::Tart).unwrap_err();
        assert!(
            err.to_string().starts_with("tart sandboxes are refused on"),
            "{err}"
        );
        assert!(check_prefix("corral-").is_ok());
        for bad in ["", "corral", "-x-", "Corral-", "a b-", "1x-"] {
            assert!(
                matches!(check_prefix(bad), Err(SetupError::Prefix(_))),
                "{bad}"
            );
        }
    }
}
