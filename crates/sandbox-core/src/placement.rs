//! Placement: which configured kind gets a piece of work. Candidates are
//! ranked by the trust order; unsupported, demoted and (for profiled work)
//! unenforced kinds are skipped with a reason; after a failure the work is
//! placed again without the failed kind. Profiled work never lands on a kind
//! that is neither enforced nor about to be verified by the gate.

use std::fmt;

use serde::Serialize;

use crate::config::HostConfig;
use crate::platform::{Classification, Enforcement, HostOs, SandboxKind, select_provider};
use crate::verify::{Gate, KindStatus, Timestamp};

/// What to place.
#[derive(Debug, Clone, Copy)]
pub struct PlacementRequest<'a> {
    /// This host's OS.
    pub host_os: HostOs,
    /// Configured kinds, in the operator's order of preference.
    pub candidates: &'a [SandboxKind],
    /// Host settings (attestation, verification opt-in).
    pub host: &'a HostConfig,
    /// The verification gate's current state.
    pub gate: &'a Gate,
    /// Now.
    pub now: Timestamp,
    /// True when the work runs under a network profile.
    pub profiled: bool,
    /// Kinds to leave out (those that just failed this work).
    pub exclude: &'a [SandboxKind],
}

/// A kind the work may go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// The kind.
    pub kind: SandboxKind,
    /// Its rank in the trust order, as placed: `VerifiedPerSandbox` for an
    /// opted-in kind whose sandbox must pass the canary first.
    pub trust: Enforcement,
    /// Its static classification under the host config.
    pub classification: Classification,
    /// The sandbox must pass the gate's canary before any work runs.
    pub needs_canary: bool,
}

/// Why a kind was not a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The kind.
    pub kind: SandboxKind,
    /// Why, in words.
    pub reason: String,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.reason)
    }
}

/// The ranked candidates, most trusted first, and what was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// Candidates, best first; equal trust keeps the operator's order.
    pub ranked: Vec<Candidate>,
    /// Kinds left out, with reasons.
    pub skipped: Vec<Skipped>,
}

impl Placement {
    /// The best candidate.
    pub fn best(&self) -> Option<&Candidate> {
        self.ranked.first()
    }
}

/// No kind can take the work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no sandbox kind can take this work: {}", skipped.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct PlacementError {
    /// Every kind considered, with why it was left out.
    pub skipped: Vec<Skipped>,
}

/// Rank the candidates of `req`.
pub fn place(req: &PlacementRequest<'_>) -> Result<Placement, PlacementError> {
    let mut ranked = Vec::new();
    let mut skipped = Vec::new();
    for &kind in req.candidates {
        if ranked.iter().any(|c: &Candidate| c.kind == kind)
            || skipped.iter().any(|s: &Skipped| s.kind == kind)
        {
            continue;
        }
        let mut skip = |reason: String| skipped.push(Skipped { kind, reason });
        if req.exclude.contains(&kind) {
            skip("it failed this work already".to_owned());
            continue;
        }
        let selection = match select_provider(req.host_os, kind, req.host, req.profiled) {
            Ok(s) => s,
            Err(e) => {
                skip(e.to_string());
                continue;
            }
        };
        let status = req.gate.status(kind, req.now);
        if let KindStatus::Demoted { until } = status {
            skip(format!("demoted after a failed verification until {until}"));
            continue;
        }
        let trust = if selection.verification_required {
            if !status.may_try() {
                skip("the verification gate does not admit it".to_owned());
                continue;
            }
            Enforcement::VerifiedPerSandbox
        } else {
            selection.classification.enforcement
        };
        ranked.push(Candidate {
            kind,
            trust,
            classification: selection.classification,
            needs_canary: selection.verification_required,
        });
    }
    // Stable: equal trust keeps the operator's order.
    ranked.sort_by_key(|c| std::cmp::Reverse(c.trust));
    if ranked.is_empty() {
        return Err(PlacementError { skipped });
    }
    Ok(Placement { ranked, skipped })
}

/// Place the work again after `failed` failed it (a failed canary demotes
/// the kind in the gate first; any other failure just leaves it out).
pub fn replace_after_failure(
    req: &PlacementRequest<'_>,
    failed: SandboxKind,
) -> Result<Placement, PlacementError> {
    let mut exclude = req.exclude.to_vec();
    exclude.push(failed);
    place(&PlacementRequest {
        exclude: &exclude,
        ..*req
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_with_tart() -> HostConfig {
        let mut host = HostConfig::default();
        host.verification.kinds.push(SandboxKind::Tart);
        host
    }

    #[test]
    fn linux_prefers_enforced_and_skips_unenforced_for_profiled_work() {
        let host = HostConfig::default();
        let gate = Gate::new(&host.verification);
        let kinds = [
            SandboxKind::Process,
            SandboxKind::Multipass,
            SandboxKind::Incus,
        ];
        let req = PlacementRequest {
            host_os: HostOs::Linux,
            candidates: &kinds,
            host: &host,
            gate: &gate,
            now: Timestamp(0),
            profiled: true,
            exclude: &[],
        };
        let p = place(&req).unwrap();
        let got: Vec<_> = p.ranked.iter().map(|c| c.kind).collect();
        assert_eq!(got, [SandboxKind::Multipass, SandboxKind::Incus]);
        assert_eq!(p.skipped[0].kind, SandboxKind::Process);
        let again = replace_after_failure(&req, SandboxKind::Multipass).unwrap();
        assert_eq!(again.best().unwrap().kind, SandboxKind::Incus);
        let err = replace_after_failure(
            &PlacementRequest {
                exclude: &[SandboxKind::Multipass],
                ..req
            },
            SandboxKind::Incus,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("no sandbox kind can take this work: process:"),
            "{err}"
        );
    }

    #[test]
    fn mac_ranks_attested_executor_above_verified_tart() {
        let mut host = host_with_tart();
        host.attested_executors.push(SandboxKind::MultipassRemote);
        let gate = Gate::new(&host.verification);
        let kinds = [
            SandboxKind::Tart,
            SandboxKind::MultipassRemote,
            SandboxKind::IncusRemote,
        ];
        let p = place(&PlacementRequest {
            host_os: HostOs::Macos,
            candidates: &kinds,
            host: &host,
            gate: &gate,
            now: Timestamp(0),
            profiled: true,
            exclude: &[],
        })
        .unwrap();
        let got: Vec<_> = p
            .ranked
            .iter()
            .map(|c| (c.kind, c.trust, c.needs_canary))
            .collect();
        assert_eq!(
            got,
            [
                (SandboxKind::MultipassRemote, Enforcement::Enforced, false),
                (SandboxKind::Tart, Enforcement::VerifiedPerSandbox, true),
            ]
        );
        // incus-remote is not attested: skipped for profiled work.
        assert_eq!(p.skipped[0].kind, SandboxKind::IncusRemote);
    }
}
