//! Start-up provider selection: refuse what the matrix refuses, and refuse
//! profiled work on a kind nothing enforces.

use serde::Serialize;

use super::enforcement::{Classification, Enforcement, Isolation};
use super::matrix::{Cell, EgressClass, cell};
use super::{HostOs, SandboxKind};
use crate::config::HostConfig;

/// A provider corral may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Selection {
    /// The host OS.
    pub host_os: HostOs,
    /// The chosen kind.
    pub kind: SandboxKind,
    /// Its isolation.
    pub isolation: Isolation,
    /// Its egress classification under the host config.
    pub classification: Classification,
    /// Profiled sandboxes of this kind must pass the verification gate's
    /// canary, one by one, before any work runs in them.
    pub verification_required: bool,
}

/// Why a provider was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// The matrix refuses the combination.
    #[error("{kind} is not supported on {host_os}: {reason}; use {use_instead} instead")]
    Unsupported {
        /// The host OS.
        host_os: HostOs,
        /// The refused kind.
        kind: SandboxKind,
        /// Why.
        reason: &'static str,
        /// What to use.
        use_instead: &'static str,
    },
    /// Profiled work asked for on a kind whose egress nothing enforces.
    #[error("{kind} on {host_os} does not enforce egress, so it cannot run profiled work: {fix}")]
    NotEnforced {
        /// The host OS.
        host_os: HostOs,
        /// The kind.
        kind: SandboxKind,
        /// What would make it acceptable.
        fix: String,
    },
}

/// Select `kind` on `host_os`. `profiled` is true when the sandboxes will
/// run work under a network profile (the normal case).
pub fn select_provider(
    host_os: HostOs,
    kind: SandboxKind,
    host: &HostConfig,
    profiled: bool,
) -> Result<Selection, SelectError> {
    let support = match cell(host_os, kind) {
        Cell::Refused(r) => {
            return Err(SelectError::Unsupported {
                host_os,
                kind,
                reason: r.reason,
                use_instead: r.use_instead,
            });
        }
        Cell::Supported(s) => s,
    };
    let classification = support.classify(kind, host);
    let verifiable =
        support.egress == EgressClass::ProviderHost && host.verification.kinds.contains(&kind);
    if profiled && classification.enforcement == Enforcement::NotEnforced && !verifiable {
        let fix = match support.egress {
            EgressClass::Executor => format!(
                "once the executor runs corral's host enforcement, list {kind} in \
                    host.attested_executors"
            ),
            EgressClass::ProviderHost => format!(
                "opt {kind} in to per-sandbox verification (host.verification.kinds) so \
                    each sandbox must pass a canary first"
            ),
            EgressClass::HostKernel | EgressClass::Unenforced => {
                "use a kind that enforces egress (incus or multipass on Linux, or an \
                    attested remote kind)"
                    .to_owned()
            }
        };
        return Err(SelectError::NotEnforced { host_os, kind, fix });
    }
    Ok(Selection {
        host_os,
        kind,
        isolation: support.isolation,
        classification,
        verification_required: profiled && verifiable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::EnforcementSite;

    #[test]
    fn refused_cells_name_the_alternative() {
        let err = select_provider(
            HostOs::Windows,
            SandboxKind::Tart,
            &HostConfig::default(),
            true,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "tart is not supported on windows: Tart runs only on macOS (Apple \
                Silicon); use incus or multipass on Linux; incus-remote or \
                multipass-remote elsewhere instead"
        );
    }

    #[test]
    fn linux_incus_is_enforced_here() {
        let s = select_provider(
            HostOs::Linux,
            SandboxKind::Incus,
            &HostConfig::default(),
            true,
        )
        .unwrap();
        assert_eq!(s.classification.enforcement, Enforcement::Enforced);
        assert_eq!(s.classification.site, Some(EnforcementSite::ThisHost));
        assert!(!s.verification_required);
    }

    #[test]
    fn unattested_remote_refused_for_profiled_work() {
        let mut host = HostConfig::default();
        let err =
            select_provider(HostOs::Macos, SandboxKind::IncusRemote, &host, true).unwrap_err();
        assert!(err.to_string().contains("host.attested_executors"), "{err}");
        // Unprofiled work is allowed, and says it is not enforced.
        let s = select_provider(HostOs::Macos, SandboxKind::IncusRemote, &host, false).unwrap();
        assert_eq!(s.classification, Classification::NONE);
        host.attested_executors.push(SandboxKind::IncusRemote);
        let s = select_provider(HostOs::Macos, SandboxKind::IncusRemote, &host, true).unwrap();
        assert_eq!(
            s.classification.site,
            Some(EnforcementSite::AttestedExecutor)
        );
    }

    #[test]
    fn tart_needs_opt_in_and_never_ranks_as_enforced() {
        let mut host = HostConfig::default();
        let err = select_provider(HostOs::Macos, SandboxKind::Tart, &host, true).unwrap_err();
        assert!(err.to_string().contains("host.verification.kinds"), "{err}");
        host.verification.kinds.push(SandboxKind::Tart);
        let s = select_provider(HostOs::Macos, SandboxKind::Tart, &host, true).unwrap();
        assert!(s.verification_required);
        assert_eq!(s.classification.enforcement, Enforcement::NotEnforced);
    }

    #[test]
    fn shared_kernel_kinds_never_take_profiled_work() {
        for kind in [SandboxKind::Bubblewrap, SandboxKind::Process] {
            let err =
                select_provider(HostOs::Linux, kind, &HostConfig::default(), true).unwrap_err();
            assert!(matches!(err, SelectError::NotEnforced { .. }));
        }
    }
}
