//! `GET /v1/verification`: the verification gate as loaded at start-up from
//! `<state_dir>/verification.json`, with where each opted-in kind stands now.

use axum::Json;
use axum::extract::State;
use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::verify::{Clock as _, Gate, KindStatus, Timestamp};
use serde::Serialize;

use crate::gate_store::WallClock;
use crate::state::AppState;

/// One opted-in kind's standing.
#[derive(Debug, Serialize)]
pub struct KindEntry {
    /// The kind.
    pub kind: SandboxKind,
    /// Where it stands (`eligible`, `demoted` until…, `probation` since…).
    #[serde(flatten)]
    pub status: KindStatus,
    /// Why it was last demoted, while that is on record.
    pub demotion_reason: Option<String>,
}

/// The answer.
#[derive(Debug, Serialize)]
pub struct VerificationAnswer {
    /// The record's file.
    pub path: String,
    /// When `kinds` was evaluated (ms since the Unix epoch).
    pub now: Timestamp,
    /// Every opted-in kind's standing at `now`.
    pub kinds: Vec<KindEntry>,
    /// The gate's whole state, as stored.
    pub gate: Gate,
}

/// The standing of every kind `gate` has opted in, at `now`.
pub fn standings(gate: &Gate, now: Timestamp) -> Vec<KindEntry> {
    SandboxKind::ALL
        .into_iter()
        .filter_map(|kind| {
            let status = gate.status(kind, now);
            (status != KindStatus::NotOptedIn).then(|| KindEntry {
                kind,
                status,
                demotion_reason: gate.demotion_reason(kind).map(str::to_owned),
            })
        })
        .collect()
}

/// The gate's state.
pub async fn get(State(state): State<AppState>) -> Json<VerificationAnswer> {
    let now = WallClock.now();
    let gate = state.gate();
    Json(VerificationAnswer {
        path: state.gate_store().path().display().to_string(),
        now,
        kinds: standings(gate, now),
        gate: gate.clone(),
    })
}

#[cfg(test)]
mod tests {
    use corral_sandbox_core::config::VerificationConfig;

    use super::*;

    #[test]
    fn only_opted_in_kinds_are_listed() {
        let gate = Gate::new(&VerificationConfig {
            kinds: vec![SandboxKind::Tart],
            ..VerificationConfig::default()
        });
        let s = standings(&gate, Timestamp(5));
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].kind, SandboxKind::Tart);
        let v = serde_json::to_value(&s[0]).unwrap();
        assert_eq!(v["status"], "eligible");
        assert!(standings(&Gate::new(&VerificationConfig::default()), Timestamp(5)).is_empty());
    }
}
