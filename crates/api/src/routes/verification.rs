//! `GET /v1/verification`: the verification gate as the store holds it now
//! (the same database `corral gate` reads, so a demotion committed by
//! either front-end shows at once), with where each kind stands, and every
//! sandbox's last verdict.

use axum::Json;
use axum::extract::State;
use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::verify::{Clock as _, Gate, KindStatus, Timestamp};
use corral_service::WallClock;
use corral_service::store::SandboxRecord;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::state::AppState;

/// One kind's standing.
#[derive(Debug, Serialize, ToSchema)]
pub struct KindEntry {
    /// The kind.
    #[schema(value_type = String)]
    pub kind: SandboxKind,
    /// Where it stands (`eligible`, `demoted` until…, `probation` since…,
    /// `not-opted-in` for a kind with a demotion on record that is no
    /// longer opted in).
    #[serde(flatten)]
    #[schema(value_type = crate::schema::KindStatusDoc)]
    pub status: KindStatus,
    /// Why it was last demoted, while that is on record.
    pub demotion_reason: Option<String>,
}

/// The answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct VerificationAnswer {
    /// The database.
    pub path: String,
    /// When `kinds` was evaluated (ms since the Unix epoch).
    #[schema(value_type = u64)]
    pub now: Timestamp,
    /// Kinds opted in to per-sandbox verification.
    #[schema(value_type = Vec<String>)]
    pub opted_in: Vec<SandboxKind>,
    /// Every opted-in kind's standing, and any kind with a demotion on record.
    pub kinds: Vec<KindEntry>,
    /// What corral knows of each sandbox: kind, profile, last verification, verdict.
    #[schema(value_type = Vec<crate::schema::SandboxRecordDoc>)]
    pub sandboxes: Vec<SandboxRecord>,
}

/// The standing of every kind `gate` has opted in or holds a demotion
/// for, at `now`.
pub fn standings(gate: &Gate, now: Timestamp) -> Vec<KindEntry> {
    let demoted: Vec<SandboxKind> = gate.demotions().into_iter().map(|(k, ..)| k).collect();
    SandboxKind::ALL
        .into_iter()
        .filter(|k| gate.opted_in().contains(k) || demoted.contains(k))
        .map(|kind| KindEntry {
            kind,
            status: gate.status(kind, now),
            demotion_reason: gate.demotion_reason(kind).map(str::to_owned),
        })
        .collect()
}

/// The per-kind verification gate and every sandbox's last verdict, from
/// the store.
#[utoipa::path(
    get,
    path = "/v1/verification",
    tag = "verification",
    operation_id = "verification",
    responses(
        (status = 200, description = "The gate: opted-in kinds, where each stands now, and what corral knows of each sandbox.", body = VerificationAnswer),
        (status = 403, description = "`forbidden`: not an admin.", body = crate::error::ErrorBody),
        (status = 500, description = "`internal`: the store could not be read.", body = crate::error::ErrorBody),
    )
)]
pub async fn get(State(state): State<AppState>) -> Result<Json<VerificationAnswer>, ApiError> {
    let now = WallClock.now();
    let cfg = &state.settings().config.host.verification;
    let db = state.db();
    let gate = db.gate(cfg).map_err(ApiError::internal)?;
    Ok(Json(VerificationAnswer {
        path: db.path().display().to_string(),
        now,
        opted_in: gate.opted_in().to_vec(),
        kinds: standings(&gate, now),
        sandboxes: db.sandboxes().map_err(ApiError::internal)?,
    }))
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
