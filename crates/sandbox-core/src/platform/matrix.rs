//! The host-OS × sandbox-kind matrix: which combinations corral runs, with
//! what isolation, and who enforces egress. Both functions are total
//! `match`es, so a new OS or kind does not compile until every cell of its
//! row and column is decided.

use serde::Serialize;

use super::enforcement::{Classification, Enforcement, EnforcementSite, Isolation};
use super::{HostOs, SandboxKind};
use crate::config::HostConfig;

/// Where a kind's egress policy can be enforced, before host config is
/// taken into account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EgressClass {
    /// nftables on this host's bridges.
    HostKernel,
    /// nftables on a remote Linux executor; counts only when attested.
    Executor,
    /// A filter on the provider's host; statically not enforced, a sandbox
    /// may be verified one at a time by the gate.
    ProviderHost,
    /// Nothing can enforce it.
    Unenforced,
}

/// Where `kind` can have its egress enforced (the same on every host OS
/// where the kind is supported).
pub fn egress_class(kind: SandboxKind) -> EgressClass {
    match kind {
        SandboxKind::Incus | SandboxKind::Multipass => EgressClass::HostKernel,
        SandboxKind::IncusRemote | SandboxKind::MultipassRemote | SandboxKind::Sprites => {
            EgressClass::Executor
        }
        SandboxKind::Tart => EgressClass::ProviderHost,
        SandboxKind::Bubblewrap | SandboxKind::Process => EgressClass::Unenforced,
    }
}

/// A supported combination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Support {
    /// What separates the guest from the host kernel (for Incus: the
    /// container guarantee; VM instances get a dedicated kernel).
    pub isolation: Isolation,
    /// Who can enforce egress.
    pub egress: EgressClass,
    /// Must never be described as isolated (shared kernel without egress
    /// enforcement, or no isolation at all).
    pub caution: bool,
}

/// A refused combination: why, and what to use instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// Why corral refuses it.
    pub reason: &'static str,
    /// What to use instead.
    pub use_instead: &'static str,
}

/// One cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum Cell {
    /// corral runs this kind on this host OS.
    Supported(Support),
    /// corral refuses it at start-up.
    Refused(Refusal),
}

impl Support {
    /// Where egress would be enforced for this kind, if anywhere: a remote
    /// executor's site counts only once attested (see [`Support::classify`]).
    pub fn site(&self) -> Option<EnforcementSite> {
        match self.egress {
            EgressClass::HostKernel => Some(EnforcementSite::ThisHost),
            EgressClass::Executor => Some(EnforcementSite::AttestedExecutor),
            EgressClass::ProviderHost => Some(EnforcementSite::ProviderHost),
            EgressClass::Unenforced => None,
        }
    }

    /// The static classification: what holds without any host attestation
    /// or verification (remote executors and provider-host filters are not
    /// enforced until the operator attests or the gate verifies).
    pub fn static_classification(&self) -> Classification {
        match self.egress {
            EgressClass::HostKernel => Classification {
                enforcement: Enforcement::Enforced,
                site: Some(EnforcementSite::ThisHost),
            },
            EgressClass::Executor | EgressClass::ProviderHost | EgressClass::Unenforced => {
                Classification::NONE
            }
        }
    }

    /// The classification under `host`'s settings: a remote executor counts
    /// as enforced only when `attested_executors` lists `kind`. A
    /// provider-host filter stays not enforced here; only the verification
    /// gate can vouch for one sandbox.
    pub fn classify(&self, kind: SandboxKind, host: &HostConfig) -> Classification {
        match self.egress {
            EgressClass::Executor if host.attested_executors.contains(&kind) => Classification {
                enforcement: Enforcement::Enforced,
                site: Some(EnforcementSite::AttestedExecutor),
            },
            _ => self.static_classification(),
        }
    }
}

const fn ok(isolation: Isolation, egress: EgressClass) -> Cell {
    Cell::Supported(Support {
        isolation,
        egress,
        caution: false,
    })
}

const fn caution(isolation: Isolation) -> Cell {
    Cell::Supported(Support {
        isolation,
        egress: EgressClass::Unenforced,
        caution: true,
    })
}

const fn refused(reason: &'static str, use_instead: &'static str) -> Cell {
    Cell::Refused(Refusal {
        reason,
        use_instead,
    })
}

const USE_REMOTE: &str = "incus-remote or multipass-remote against a Linux executor";

/// The cell for `kind` on `os`.
pub fn cell(os: HostOs, kind: SandboxKind) -> Cell {
    use HostOs::{Linux, Macos, Windows};
    use Isolation::{DedicatedKernel, SharedKernel};
    use SandboxKind as K;
    match (os, kind) {
        (_, K::IncusRemote) => ok(SharedKernel, EgressClass::Executor),
        (_, K::MultipassRemote) | (_, K::Sprites) => ok(DedicatedKernel, EgressClass::Executor),
        (Linux, K::Incus) => ok(SharedKernel, EgressClass::HostKernel),
        (Linux, K::Multipass) => ok(DedicatedKernel, EgressClass::HostKernel),
        (Linux, K::Bubblewrap) => caution(SharedKernel),
        (Linux, K::Process) => caution(Isolation::None),
        (Macos, K::Tart) => ok(DedicatedKernel, EgressClass::ProviderHost),
        (Linux | Windows, K::Tart) => refused(
            "Tart runs only on macOS (Apple Silicon)",
            "incus or multipass on Linux; incus-remote or multipass-remote elsewhere",
        ),
        (Macos | Windows, K::Incus) => refused(
            "Incus runs only on Linux, and this host's kernel has no per-sandbox \
                bridge corral can enforce egress on",
            USE_REMOTE,
        ),
        (Macos, K::Multipass) => refused(
            "Multipass on macOS uses the hypervisor framework's own NAT network: \
                there is no per-VM bridge in the host kernel where an unbypassable drop \
                path can be installed",
            "multipass-remote or incus-remote against a Linux executor, or tart with \
                per-sandbox verification",
        ),
        (Windows, K::Multipass) => refused(
            "Multipass on Windows uses a Hyper-V switch the provider owns: per-VM \
                enforcement would need a signed filter driver, and NAT networks give no \
                stable per-VM hook",
            USE_REMOTE,
        ),
        (Macos | Windows, K::Bubblewrap) => {
            refused("bubblewrap needs Linux namespaces", USE_REMOTE)
        }
        (Macos | Windows, K::Process) => refused(
            "the development-only process kind is offered on Linux only",
            USE_REMOTE,
        ),
    }
}

/// One row of the matrix, for JSON output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MatrixEntry {
    /// The host OS.
    pub host_os: HostOs,
    /// The sandbox kind.
    pub kind: SandboxKind,
    /// Its cell.
    pub cell: Cell,
}

/// Every cell, host OS major, in display order.
pub fn entries() -> Vec<MatrixEntry> {
    HostOs::ALL
        .into_iter()
        .flat_map(|host_os| {
            SandboxKind::ALL.into_iter().map(move |kind| MatrixEntry {
                host_os,
                kind,
                cell: cell(host_os, kind),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn supported(os: HostOs, kind: SandboxKind) -> Support {
        match cell(os, kind) {
            Cell::Supported(s) => s,
            Cell::Refused(r) => panic!("{os}/{kind} refused: {}", r.reason),
        }
    }

    /// The reference matrix, row by row (✅/⚠️ = supported, ❌ = refused),
    /// for the kinds it names; incus-remote is ours and is ✅ everywhere.
    #[test]
    fn agrees_with_the_reference() {
        use SandboxKind as K;
        let expect = [
            (HostOs::Linux, [true, true, false, true, true, true, true]),
            (
                HostOs::Macos,
                [false, false, true, true, true, false, false],
            ),
            (
                HostOs::Windows,
                [false, false, false, true, true, false, false],
            ),
        ];
        let kinds = [
            K::Incus,
            K::Multipass,
            K::Tart,
            K::MultipassRemote,
            K::Sprites,
            K::Bubblewrap,
            K::Process,
        ];
        for (os, row) in expect {
            for (kind, want) in kinds.into_iter().zip(row) {
                let got = matches!(cell(os, kind), Cell::Supported(_));
                assert_eq!(got, want, "{os}/{kind}");
            }
            assert!(matches!(cell(os, K::IncusRemote), Cell::Supported(_)));
        }
        assert_eq!(
            supported(HostOs::Linux, K::Incus).static_classification(),
            Classification {
                enforcement: Enforcement::Enforced,
                site: Some(EnforcementSite::ThisHost)
            }
        );
        let tart = supported(HostOs::Macos, K::Tart);
        assert_eq!(tart.isolation, Isolation::DedicatedKernel);
        assert_eq!(tart.static_classification(), Classification::NONE);
        assert!(supported(HostOs::Linux, K::Bubblewrap).caution);
        assert_eq!(
            supported(HostOs::Linux, K::Process).isolation,
            Isolation::None
        );
    }

    #[test]
    fn executors_count_only_when_attested() {
        let mut host = HostConfig::default();
        let s = supported(HostOs::Macos, SandboxKind::IncusRemote);
        assert_eq!(
            s.classify(SandboxKind::IncusRemote, &host),
            Classification::NONE
        );
        host.attested_executors.push(SandboxKind::IncusRemote);
        let c = s.classify(SandboxKind::IncusRemote, &host);
        assert_eq!(c.enforcement, Enforcement::Enforced);
        assert_eq!(c.site, Some(EnforcementSite::AttestedExecutor));
        // Attesting one kind does not attest another.
        let mp = supported(HostOs::Macos, SandboxKind::MultipassRemote);
        assert_eq!(
            mp.classify(SandboxKind::MultipassRemote, &host),
            Classification::NONE
        );
    }

    #[test]
    fn entries_cover_everything() {
        assert_eq!(entries().len(), HostOs::ALL.len() * SandboxKind::ALL.len());
    }
}
