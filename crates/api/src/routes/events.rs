//! `GET /v1/events`: the event log both front-ends append to (lifecycle,
//! verification with per-check timings, alerts), oldest first.

use axum::Json;
use axum::extract::{Query, State};
use corral_service::store::{EventQuery, StoredEvent};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::state::AppState;

/// Query parameters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsParams {
    /// Only this sandbox's events.
    pub sandbox: Option<String>,
    /// Only events after this id (for polling).
    pub after: Option<i64>,
    /// At most this many, the newest (default 100, at most 10000).
    pub limit: Option<u32>,
}

/// The answer.
#[derive(Debug, Serialize)]
pub struct EventsAnswer {
    /// The events, oldest first.
    pub events: Vec<StoredEvent>,
}

/// Largest `limit` accepted.
pub const MAX_LIMIT: u32 = 10_000;

/// The events the parameters select.
pub async fn get(
    State(state): State<AppState>,
    Query(p): Query<EventsParams>,
) -> Result<Json<EventsAnswer>, ApiError> {
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
    Ok(Json(EventsAnswer { events }))
}
