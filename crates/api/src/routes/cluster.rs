//! `GET /v1/cluster`: the same report as `corral cluster status --json`.

use axum::Json;
use axum::extract::State;
use corral_service::reports::{ClusterReport, cluster_report};

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// The Incus cluster's members as corral trusts them.
#[utoipa::path(
    get,
    path = "/v1/cluster",
    tag = "server",
    operation_id = "cluster",
    responses(
        (status = 200, description = "`corral.cluster.v1` (docs/json-schema.md), as `corral cluster status --json` prints it: each member's Incus status, standing (in rotation or drained, why, since), attestation age, whether profiled work may go there now, and its sandboxes. `clustered: false` off a cluster.", body = crate::schema::ClusterDoc),
        (status = 403, description = "`forbidden`: not an admin.", body = ErrorBody),
        (status = 502, description = "`provider`: Incus did not answer.", body = ErrorBody),
    )
)]
pub async fn get(State(state): State<AppState>) -> Result<Json<ClusterReport>, ApiError> {
    Ok(Json(cluster_report(state.sandboxes()).await?))
}
