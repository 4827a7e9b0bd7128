//! `GET /v1/health`: each thing corrald depends on, checked now and
//! reported separately. 200 when every check holds; 503 with the same body
//! when one does not, so a probe can use the status alone and a person can
//! read which check failed and why.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use corral_sandbox_core::platform::Selection;
use corral_service::host::compare_with_applied;
use serde::Serialize;
use utoipa::ToSchema;

use crate::state::AppState;

/// How long the backend daemon gets to answer.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// One check's outcome.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Check {
    /// It holds.
    pub ok: bool,
    /// What was found (and what to do when it does not hold).
    pub detail: String,
}

impl Check {
    fn holds(detail: impl Into<String>) -> Self {
        Self {
            ok: true,
            detail: detail.into(),
        }
    }

    fn fails(detail: impl Into<String>) -> Self {
        Self {
            ok: false,
            detail: detail.into(),
        }
    }
}

/// Every check.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Checks {
    /// The sandbox backend (the Incus daemon) answers.
    pub provider: Check,
    /// The host's live enforcement equals what was applied (no drift).
    pub host: Check,
    /// Every applied profile's gateway (dnsmasq) runs.
    pub gateways: Check,
    /// The configuration corrald loaded is what was applied.
    pub config: Check,
}

impl Checks {
    fn all_hold(&self) -> bool {
        [&self.provider, &self.host, &self.gateways, &self.config]
            .iter()
            .all(|c| c.ok)
    }
}

/// The health answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` when every check holds, else `degraded`.
    #[schema(value_type = String, pattern = "^(ok|degraded)$")]
    pub status: &'static str,
    /// corrald's version.
    pub version: &'static str,
    /// Where the profiles came from.
    pub source: String,
    /// The target network namespace, `null` for the host.
    pub netns: Option<String>,
    /// The sandbox provider selected at start-up, as the matrix classed it.
    #[schema(value_type = crate::schema::SelectionDoc)]
    pub provider: Selection,
    /// Each check.
    pub checks: Checks,
}

/// Host drift, gateways and the configuration, from the applied record
/// and the live state (blocking netlink work).
fn host_checks(state: &AppState) -> (Check, Check, Check) {
    let config = match compare_with_applied(&state.settings().config, &state.store()) {
        Ok(c) if c.matches() => Check::holds(c.to_string()),
        Ok(c) => Check::fails(c.to_string()),
        Err(e) => Check::fails(format!("{:#}", anyhow::Error::new(e))),
    };
    let applied = match corral_service::host::applied(&state.store()) {
        Ok(Some(a)) => a,
        Ok(None) => {
            let why = "nothing has been applied to this host yet; run `corral host apply`";
            return (Check::fails(why), Check::fails(why), config);
        }
        Err(e) => {
            let why = format!("{:#}", anyhow::Error::new(e));
            return (Check::fails(why.clone()), Check::fails(why), config);
        }
    };
    let host = match state.host().and_then(|h| Ok(h.verify(&applied)?)) {
        Ok(drift) if drift.is_empty() => Check::holds("the live state equals what was applied"),
        Ok(drift) => Check::fails(format!(
            "{} difference(s) between what was applied and the live state (GET /v1/host/verify lists them); run `corral host apply`",
            drift.len()
        )),
        Err(e) => Check::fails(format!("cannot read the live state: {e:#}")),
    };
    let recorded = corral_gateway::status_recorded(&state.settings().state_dir);
    let mut down = Vec::new();
    for profile in &applied.config.profiles {
        let bridge = profile.bridge.to_string();
        match recorded.iter().find(|g| g.bridge == bridge) {
            Some(g) if g.status.is_up() => {}
            Some(g) => down.push(format!("{bridge}: {}", g.status)),
            None => down.push(format!("{bridge}: never started")),
        }
    }
    let gateways = if down.is_empty() {
        Check::holds(format!(
            "{} gateway(s) running or served by corral's gateway",
            applied.config.profiles.len()
        ))
    } else {
        Check::fails(format!(
            "not running: {}; `corral host apply` restarts them",
            down.join(", ")
        ))
    };
    (host, gateways, config)
}

/// Every check, now: 200 when all hold, else 503.
#[utoipa::path(
    get,
    path = "/v1/health",
    tag = "server",
    operation_id = "health",
    responses(
        (status = 200, description = "Every check holds.", body = Health),
        (status = 503, description = "A check does not hold: the same body, with `status` `degraded` and each check's detail.", body = Health),
    )
)]
pub async fn get(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let provider = match state.backend().ping(PING_TIMEOUT).await {
        Ok(()) => Check::holds("the Incus daemon answers"),
        Err(e) => Check::fails(e.to_string()),
    };
    let worker = state.clone();
    let (host, gateways, config) = tokio::task::spawn_blocking(move || host_checks(&worker))
        .await
        .unwrap_or_else(|e| {
            let why = format!("the health check's worker failed: {e}");
            (
                Check::fails(why.clone()),
                Check::fails(why.clone()),
                Check::fails(why),
            )
        });
    let checks = Checks {
        provider,
        host,
        gateways,
        config,
    };
    let ok = checks.all_hold();
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(Health {
            status: if ok { "ok" } else { "degraded" },
            version: env!("CARGO_PKG_VERSION"),
            source: state.settings().origin.to_string(),
            netns: state.settings().netns.clone(),
            provider: *state.backend().selection(),
            checks,
        }),
    )
}
