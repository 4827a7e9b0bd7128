//! `GET /v1/verification`: the verification gate as the store holds it now
//! (the same database `corral gate` reads, so a demotion committed by
//! either front-end shows at once), with where each kind stands, and every
//! sandbox's last verdict.

use axum::Json;
use axum::extract::State;
use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::verify::{Clock as _, KindStatus, Timestamp};
use corral_service::WallClock;
use corral_service::shapes::GateView;
use corral_service::store::SandboxRecord;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::state::AppState;

/// One kind's standing (described; the answer is
/// [`corral_service::shapes::KindStanding`]).
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Schema-only: never constructed.
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

/// The answer, as `corral gate --json` (described; the answer is
/// [`corral_service::shapes::GateView`]).
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Schema-only: never constructed.
pub struct VerificationAnswer {
    /// `corral.gate.v1`.
    schema: String,
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
pub async fn get(State(state): State<AppState>) -> Result<Json<GateView>, ApiError> {
    let now = WallClock.now();
    let cfg = &state.settings().config.host.verification;
    let db = state.db();
    let gate = db.gate(cfg).map_err(ApiError::internal)?;
    let sandboxes = db.sandboxes().map_err(ApiError::internal)?;
    Ok(Json(GateView::new(db.path(), &gate, now, sandboxes)))
}
