//! The verification gate as the store holds it (`corral gate`, `GET
//! /v1/verification`).

use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::verify::{Gate, KindStatus, Timestamp};
use serde::Serialize;

use crate::store::SandboxRecord;

/// The gate's schema id.
pub const GATE: &str = "corral.gate.v1";

/// One kind's standing.
#[derive(Debug, Clone, Serialize)]
pub struct KindStanding {
    /// The kind.
    pub kind: SandboxKind,
    /// Where it stands (`eligible`, `demoted` until…, `probation` since…,
    /// `not-opted-in` for a kind with a demotion on record that is no
    /// longer opted in).
    #[serde(flatten)]
    pub status: KindStatus,
    /// Why it was last demoted, while that is on record.
    pub demotion_reason: Option<String>,
}

/// The standing of every kind `gate` has opted in or holds a demotion
/// for, at `now`.
pub fn standings(gate: &Gate, now: Timestamp) -> Vec<KindStanding> {
    let demoted: Vec<SandboxKind> = gate.demotions().into_iter().map(|(k, ..)| k).collect();
    SandboxKind::ALL
        .into_iter()
        .filter(|k| gate.opted_in().contains(k) || demoted.contains(k))
        .map(|kind| KindStanding {
            kind,
            status: gate.status(kind, now),
            demotion_reason: gate.demotion_reason(kind).map(str::to_owned),
        })
        .collect()
}

/// `corral gate --json`, `GET /v1/verification`.
#[derive(Debug, Clone, Serialize)]
pub struct GateView {
    /// [`GATE`].
    pub schema: &'static str,
    /// The database.
    pub path: String,
    /// When `kinds` was evaluated (ms since the Unix epoch).
    pub now: Timestamp,
    /// Kinds opted in to per-sandbox verification.
    pub opted_in: Vec<SandboxKind>,
    /// Every opted-in kind's standing, and any kind with a demotion on record.
    pub kinds: Vec<KindStanding>,
    /// What corral knows of each sandbox.
    pub sandboxes: Vec<SandboxRecord>,
}

impl GateView {
    /// `gate` (stored at `path`) at `now`, with the store's `sandboxes`.
    pub fn new(
        path: &std::path::Path,
        gate: &Gate,
        now: Timestamp,
        sandboxes: Vec<SandboxRecord>,
    ) -> Self {
        Self {
            schema: GATE,
            path: path.display().to_string(),
            now,
            opted_in: gate.opted_in().to_vec(),
            kinds: standings(gate, now),
            sandboxes,
        }
    }
}

#[cfg(test)]
mod tests {
    use corral_sandbox_core::config::VerificationConfig;

    use super::*;

    #[test]
    fn opted_in_and_demoted_kinds_are_listed() {
        let mut gate = Gate::new(&VerificationConfig {
            kinds: vec![SandboxKind::Tart],
            ..VerificationConfig::default()
        });
        let s = standings(&gate, Timestamp(5));
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].kind, SandboxKind::Tart);
        let v = serde_json::to_value(&s[0]).unwrap();
        assert_eq!(v["status"], "eligible");
        gate.restore_demotion(SandboxKind::Multipass, Timestamp(10), "old".into());
        let s = standings(&gate, Timestamp(5));
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].kind, SandboxKind::Multipass);
        assert_eq!(
            serde_json::to_value(&s[0]).unwrap()["status"],
            "not-opted-in"
        );
        assert!(standings(&Gate::new(&VerificationConfig::default()), Timestamp(5)).is_empty());
    }
}
