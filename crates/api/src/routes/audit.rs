//! The audit trail over HTTP: `GET /v1/audit` lists records (blocked
//! packets, DNS decisions, lifecycle, verification) with the filters of
//! `corral log`; `GET /v1/events/stream` follows it as server-sent events,
//! one `data:` line per record, the record's `event` as the SSE event name.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use corral_sandbox_core::verify::Clock as _;
use corral_service::WallClock;
use corral_service::audit::{AuditFilter, AuditLine, AuditLog, EntryKind, ocsf, parse_since};
use futures::Stream;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Records listed when neither `last` nor `since` says how many.
const DEFAULT_LAST: usize = 100;
/// Largest `last` accepted.
pub const MAX_LAST: usize = 10_000;
/// How often the stream looks for new records.
const POLL: Duration = Duration::from_millis(100);

/// Query parameters of both routes.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Only records about this sandbox.
    pub sandbox: Option<String>,
    /// Only records naming this profile.
    pub profile: Option<String>,
    /// Only these kinds, comma-separated: `blocked`, `dns`, `lifecycle`, `verification`, `access`.
    pub kind: Option<String>,
    /// Only records since: an age (`90s`, `10m`, `2h`, `1d`) or a UTC date-time.
    pub since: Option<String>,
    /// At most this many, the newest (default 100 unless `since` is given; at most 10000). Listing only.
    pub last: Option<usize>,
    /// `corral` (the default: the trail's own records) or `ocsf` (each record as an OCSF 1.4.0 event; docs/audit.md#ocsf).
    pub format: Option<AuditFormat>,
}

/// How records are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AuditFormat {
    /// The trail's own records (docs/json-schema.md#audit-records).
    #[default]
    Corral,
    /// OCSF events, one per record.
    Ocsf,
}

impl AuditFormat {
    fn write(self, line: &AuditLine) -> serde_json::Value {
        match self {
            AuditFormat::Corral => serde_json::to_value(line).unwrap_or_default(),
            AuditFormat::Ocsf => ocsf::event(line),
        }
    }
}

impl AuditParams {
    fn filter(&self) -> Result<AuditFilter, ApiError> {
        let since = self
            .since
            .as_deref()
            .map(|s| parse_since(s, WallClock.now()))
            .transpose()
            .map_err(ApiError::bad_request)?;
        let kinds = self
            .kind
            .as_deref()
            .map(|k| {
                k.split(',')
                    .map(str::parse::<EntryKind>)
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()
            .map_err(|e| ApiError::bad_request(anyhow::anyhow!("kind: {e}")))?
            .unwrap_or_default();
        if self.last.is_some_and(|l| l == 0 || l > MAX_LAST) {
            return Err(ApiError::bad_request(anyhow::anyhow!(
                "last must be 1 to {MAX_LAST}"
            )));
        }
        Ok(AuditFilter {
            sandbox: self.sandbox.clone(),
            profile: self.profile.clone(),
            since,
            kinds,
            last: self.last.or(since.is_none().then_some(DEFAULT_LAST)),
        })
    }
}

/// The answer of `GET /v1/audit`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditAnswer {
    /// How `records` are written.
    pub format: AuditFormat,
    /// The records, oldest first: the trail's own, or OCSF events.
    #[schema(value_type = Vec<Object>)]
    pub records: Vec<serde_json::Value>,
    /// Lines of the trail that did not parse (skipped).
    pub unreadable: usize,
}

fn params(query: Result<Query<AuditParams>, QueryRejection>) -> Result<AuditParams, ApiError> {
    // axum's own rejection is plain text; every error here is JSON.
    query.map(|Query(p)| p).map_err(|r| {
        ApiError::bad_request(anyhow::anyhow!("the query is not valid: {}", r.body_text()))
    })
}

/// The records the parameters select, oldest first.
#[utoipa::path(
    get,
    path = "/v1/audit",
    tag = "verification",
    operation_id = "audit",
    params(AuditParams),
    responses(
        (status = 200, description = "The records (schema: docs/json-schema.md#audit-records).", body = AuditAnswer),
        (status = 400, description = "`bad_request`: an unknown parameter or kind, a bad time, `last` out of range.", body = ErrorBody),
        (status = 403, description = "`forbidden`: not an admin.", body = ErrorBody),
        (status = 500, description = "`internal`: the trail could not be read.", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    query: Result<Query<AuditParams>, QueryRejection>,
) -> Result<Json<AuditAnswer>, ApiError> {
    let p = params(query)?;
    let format = p.format.unwrap_or_default();
    let filter = p.filter()?;
    let dir = state.settings().state_dir.clone();
    let (records, unreadable) =
        tokio::task::spawn_blocking(move || match AuditLog::open_existing(&dir)? {
            Some(log) => log.read(&filter),
            None => Ok((Vec::new(), 0)),
        })
        .await
        .map_err(|e| ApiError::internal(anyhow::anyhow!("the request's worker failed: {e}")))?
        .map_err(ApiError::internal)?;
    Ok(Json(AuditAnswer {
        format,
        records: records.iter().map(|l| format.write(l)).collect(),
        unreadable,
    }))
}

/// Records as they are written, as server-sent events (`last` is refused:
/// the stream starts now).
#[utoipa::path(
    get,
    path = "/v1/events/stream",
    tag = "verification",
    operation_id = "events_stream",
    params(AuditParams),
    responses(
        (status = 200, description = "`text/event-stream`: one event per record, named by its `event` field, its JSON as data; a comment every 15 s keeps the connection alive.", content_type = "text/event-stream", body = String),
        (status = 400, description = "`bad_request`: an unknown parameter or kind, or `last` given.", body = ErrorBody),
        (status = 403, description = "`forbidden`: not an admin.", body = ErrorBody),
        (status = 500, description = "`internal`: the trail could not be opened.", body = ErrorBody),
    )
)]
pub async fn stream(
    State(state): State<AppState>,
    query: Result<Query<AuditParams>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let p = params(query)?;
    if p.last.is_some() || p.since.is_some() {
        return Err(ApiError::bad_request(anyhow::anyhow!(
            "the stream starts now: list older records with GET /v1/audit (`since`, `last`)"
        )));
    }
    let format = p.format.unwrap_or_default();
    let filter = p.filter()?;
    let log = AuditLog::open(&state.settings().state_dir).map_err(ApiError::internal)?;
    let follower = log.follow();
    let events = futures::stream::unfold(
        (follower, std::collections::VecDeque::<AuditLine>::new()),
        move |(mut follower, mut queue)| {
            let filter = filter.clone();
            async move {
                loop {
                    if let Some(line) = queue.pop_front() {
                        let name = serde_json::to_value(&line.entry)
                            .ok()
                            .and_then(|v| {
                                v.get("event").and_then(|e| e.as_str().map(str::to_owned))
                            })
                            .unwrap_or_else(|| "record".to_owned());
                        let data = format.write(&line).to_string();
                        let event = SseEvent::default().event(name).data(data);
                        return Some((Ok(event), (follower, queue)));
                    }
                    tokio::time::sleep(POLL).await;
                    let (f, fresh) = tokio::task::spawn_blocking(move || {
                        let fresh = follower.poll();
                        (follower, fresh)
                    })
                    .await
                    .ok()?;
                    follower = f;
                    queue.extend(fresh.into_iter().filter(|l| filter.matches(l)));
                }
            }
        },
    );
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
