//! `GET /v1/events`: the event log both front-ends append to (lifecycle,
//! verification with per-check timings, alerts), oldest first.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use corral_service::shapes::EventList;
use corral_service::store::{EventQuery, StoredEvent};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Query parameters.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsParams {
    /// Only this sandbox's events.
    pub sandbox: Option<String>,
    /// Only events after this id (for polling).
    pub after: Option<i64>,
    /// At most this many, the newest (default 100, at most 10000).
    pub limit: Option<u32>,
}

/// The answer's description; the answer is
/// [`corral_service::shapes::EventList`], as `corral events --json`.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Schema-only: never constructed.
pub struct EventsAnswer {
    /// `corral.events.v1`.
    schema: String,
    /// The events, oldest first.
    #[schema(value_type = Vec<crate::schema::StoredEventDoc>)]
    events: Vec<StoredEvent>,
}

/// Largest `limit` accepted.
pub const MAX_LIMIT: u32 = 10_000;

/// The events the parameters select, oldest first.
#[utoipa::path(
    get,
    path = "/v1/events",
    tag = "verification",
    operation_id = "events",
    params(EventsParams),
    responses(
        (status = 200, description = "The events.", body = EventsAnswer),
        (status = 400, description = "`bad_request`: an unknown parameter, or a limit out of range.", body = ErrorBody),
        (status = 403, description = "`forbidden`: not an admin.", body = ErrorBody),
        (status = 500, description = "`internal`: the store could not be read.", body = ErrorBody),
    )
)]
pub async fn get(
    State(state): State<AppState>,
    query: Result<Query<EventsParams>, QueryRejection>,
) -> Result<Json<EventList>, ApiError> {
    // axum's own rejection is plain text; every error here is JSON.
    let Query(p) = query.map_err(|r| {
        ApiError::bad_request(anyhow::anyhow!("the query is not valid: {}", r.body_text()))
    })?;
    if p.limit.is_some_and(|l| l == 0 || l > MAX_LIMIT) {
        return Err(ApiError::bad_request(anyhow::anyhow!(
            "limit must be 1 to {MAX_LIMIT}"
        )));
    }
    let query = EventQuery {
        sandbox: p.sandbox,
        after: p.after,
        limit: p.limit,
    };
    let db = state.verifier().store().clone();
    let events = tokio::task::spawn_blocking(move || db.events(&query))
        .await
        .map_err(|e| ApiError::internal(anyhow::anyhow!("the request's worker failed: {e}")))?
        .map_err(ApiError::internal)?;
    Ok(Json(EventList::new(events)))
}
