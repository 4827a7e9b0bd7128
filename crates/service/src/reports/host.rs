//! The host's enforcement as reports: `host plan`, `host verify` and
//! `host status` (CLI `--json`; corrald's `/v1/host/*`).

use corral_egress::host::{HostDrift, Status};
use corral_egress::plan::{BridgePlan, SysctlPlan};
use corral_gateway::GatewayState;
use corral_sandbox_core::ProfileSet;
use serde::Serialize;

use super::{DriftView, drift_views};
use crate::host::Planned;
use crate::host::wiring::{self, Wiring};
use crate::provider::Backend;

/// `applied` when `planned` is what was last applied, else
/// `configuration`.
pub fn basis(planned: &Planned) -> &'static str {
    if planned.from_applied {
        "applied"
    } else {
        "configuration"
    }
}

/// The plan and how the live state differs, schema `corral.host-plan.v1`.
#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    /// `corral.host-plan.v1`.
    pub schema: &'static str,
    /// Where the configuration came from.
    pub source: String,
    /// What the plan was built from (`configuration`: `host plan` shows
    /// what an apply would enforce).
    pub basis: &'static str,
    /// The network namespace, when not this host's.
    pub netns: Option<String>,
    /// The rules in `nft -f` syntax.
    pub nft: String,
    /// The bridges.
    pub bridges: Vec<BridgePlan>,
    /// The sysctls.
    pub sysctls: Vec<SysctlPlan>,
    /// How many rules.
    pub rules: usize,
    /// How many set elements.
    pub elements: usize,
    /// The live state equals the plan.
    pub in_sync: bool,
    /// Every difference.
    pub drift: Vec<DriftView>,
}

impl PlanReport {
    /// The report of `planned` against `drift`, on `netns`.
    pub fn new(planned: &Planned, netns: Option<String>, drift: &[HostDrift]) -> Self {
        let plan = &planned.plan;
        Self {
            schema: "corral.host-plan.v1",
            source: planned.origin.clone(),
            basis: basis(planned),
            netns,
            nft: plan.render_nft(),
            bridges: plan.bridges.clone(),
            sysctls: plan.sysctls.clone(),
            rules: plan.rule_count(),
            elements: plan.element_count(),
            in_sync: drift.is_empty(),
            drift: drift_views(drift),
        }
    }
}

/// Every difference from the plan, schema `corral.host-verify.v1`.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    /// `corral.host-verify.v1`.
    pub schema: &'static str,
    /// Where the configuration came from.
    pub source: String,
    /// `applied` or `configuration`.
    pub basis: &'static str,
    /// The network namespace, when not this host's.
    pub netns: Option<String>,
    /// No drift.
    pub in_sync: bool,
    /// Every difference.
    pub drift: Vec<DriftView>,
}

impl VerifyReport {
    /// The report of `drift` from `planned`, on `netns`.
    pub fn new(planned: &Planned, netns: Option<String>, drift: &[HostDrift]) -> Self {
        Self {
            schema: "corral.host-verify.v1",
            source: planned.origin.clone(),
            basis: basis(planned),
            netns,
            in_sync: drift.is_empty(),
            drift: drift_views(drift),
        }
    }
}

/// The live state beside the plan, schema `corral.host-status.v1`.
#[derive(Debug, Clone, Serialize)]
pub struct StatusReport {
    /// `corral.host-status.v1`.
    pub schema: &'static str,
    /// Where the configuration came from.
    pub source: String,
    /// `applied` or `configuration`.
    pub basis: &'static str,
    /// The network namespace, when not this host's.
    pub netns: Option<String>,
    /// Each bridge's gateway.
    pub gateways: Vec<GatewayState>,
    /// Which sandbox is on which bridge, and which is off its profile's;
    /// `None` when not looked for (`sandboxes_note` says why).
    pub sandboxes: Option<Wiring>,
    /// Why `sandboxes` was not looked for.
    pub sandboxes_note: Option<String>,
    /// Bridges, counters, sets, the drift count.
    #[serde(flatten)]
    pub status: Status,
}

impl StatusReport {
    /// The report of `status` and `gateways` against `planned`, with the
    /// sandboxes' wiring (or why it was not read).
    pub fn new(
        planned: &Planned,
        netns: Option<String>,
        status: Status,
        gateways: Vec<GatewayState>,
        wiring: Result<Wiring, String>,
    ) -> Self {
        let (sandboxes, sandboxes_note) = match wiring {
            Ok(w) => (Some(w), None),
            Err(why) => (None, Some(why)),
        };
        Self {
            schema: "corral.host-status.v1",
            source: planned.origin.clone(),
            basis: basis(planned),
            netns,
            gateways,
            sandboxes,
            sandboxes_note,
            status,
        }
    }
}

/// The sandboxes' wiring to corral's bridges as `backend` reports it, or
/// why it was not read: instances of a local daemon live in this host's
/// namespace, so for another namespace (`netns`) nothing is looked for.
pub async fn wiring_for(
    backend: &Backend,
    profiles: &ProfileSet,
    netns: Option<&str>,
) -> Result<Wiring, String> {
    if netns.is_some() {
        return Err(
            "not looked for: the local Incus daemon's instances live in this host's namespace"
                .to_owned(),
        );
    }
    match wiring::read(backend, profiles, &[]).await {
        Ok(Some(w)) => Ok(w),
        Ok(None) => Err("not looked for: the backend cannot tell".to_owned()),
        Err(e) => Err(format!(
            "not looked for: cannot list the sandboxes: {}",
            crate::error::chain(&e)
        )),
    }
}
