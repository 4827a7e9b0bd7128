//! `GET /v1/explain?profile=P|sandbox=N&dest=DEST[:PORT][/PROTO]`: would
//! the plan in force let this packet from a sandbox through, and which
//! rule decides (`corral explain`'s answer). Admins may name any profile or
//! sandbox; a restricted caller only its own sandboxes.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use corral_egress::plan::explain::Question;
use corral_service::Caller;
use corral_service::host::{ExplainError, Explanation, Subject};
use serde::Deserialize;
use utoipa::IntoParams;

use super::sandboxes::authorize;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Query parameters: `dest` and exactly one of `profile` and `sandbox`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExplainParams {
    /// The profile whose sandboxes send the packet (admins only).
    pub profile: Option<String>,
    /// The sandbox that sends it (its profile, and its bound addresses as
    /// the source).
    pub sandbox: Option<String>,
    /// `DEST[:PORT][/PROTO]`: an address (IPv6 in brackets before a port)
    /// or a host name; tcp, udp or icmp (default tcp with a port, icmp
    /// without).
    pub dest: String,
}

/// The verdict for each traced address, the deciding rule and why.
#[utoipa::path(
    get,
    path = "/v1/explain",
    tag = "host",
    operation_id = "explain",
    params(ExplainParams),
    responses(
        (status = 200, description = "The explanation (the body of `corral explain --json` without `schema`, see docs/json-schema.md). A block is an answer too: 200.", body = crate::schema::ExplanationDoc),
        (status = 400, description = "`bad_request`: no `dest`, a `dest` that does not parse, neither or both of `profile` and `sandbox`, or an unknown parameter.", body = ErrorBody),
        (status = 403, description = "`forbidden`: a restricted caller named a profile; `not_owner`: a restricted caller's request for a sandbox it did not create; `permission_denied`: the kernel refused.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox; `unknown_profile`: the plan in force has no such profile (or the sandbox has no network).", body = ErrorBody),
        (status = 500, description = "`internal`: reading the plan or the learned addresses failed.", body = ErrorBody),
    )
)]
pub async fn get(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<ExplainParams>, QueryRejection>,
) -> Result<Json<Explanation>, ApiError> {
    let Query(p) = query.map_err(|r| {
        ApiError::bad_request(anyhow::anyhow!("the query is not valid: {}", r.body_text()))
    })?;
    let question: Question = p.dest.parse().map_err(ApiError::bad_request)?;
    let (mut subject, nic) = match (p.profile, p.sandbox) {
        (Some(profile), None) => {
            if !caller.is_admin() {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    anyhow::anyhow!(
                        "a restricted caller explains its own sandboxes only: pass `sandbox=NAME`"
                    ),
                ));
            }
            let subject = Subject {
                profile,
                ..Subject::default()
            };
            (subject, None)
        }
        (None, Some(name)) => {
            authorize(&state, &caller, &name).await?;
            let info = {
                let _turn = state.turn().await?;
                state.sandboxes().info(&name).await?
            };
            let Some(profile) = info.profile else {
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    "unknown_profile",
                    anyhow::anyhow!("sandbox `{name}` has no network: it reaches nothing"),
                ));
            };
            let subject = Subject {
                profile: profile.to_string(),
                sandbox: Some(name),
                ..Subject::default()
            };
            (subject, info.nic)
        }
        _ => {
            return Err(ApiError::bad_request(anyhow::anyhow!(
                "name exactly one of `profile` and `sandbox`"
            )));
        }
    };
    let answer = tokio::task::spawn_blocking(move || -> Result<Explanation, ApiError> {
        let planned = state.plan_to_check().map_err(ApiError::internal)?;
        if let Some(b) = nic.as_ref().and_then(|n| {
            planned
                .plan
                .binding(n.port.as_str())
                .filter(|b| b.mac == n.mac)
        }) {
            subject.v4 = Some(b.v4);
            subject.v6 = b.v6;
        }
        let host = state.host().map_err(ApiError::internal)?;
        host.explain(&planned, &subject, &question)
            .map_err(|e| match e {
                ExplainError::NoProfile { .. } => {
                    ApiError::new(StatusCode::NOT_FOUND, "unknown_profile", e)
                }
                other => ApiError::internal(other),
            })
    })
    .await
    .map_err(|e| ApiError::internal(anyhow::anyhow!("the request's worker failed: {e}")))??;
    Ok(Json(answer))
}
