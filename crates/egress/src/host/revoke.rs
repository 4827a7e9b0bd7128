//! Revocation: after an apply or refresh, delete every tracked flow from a
//! profile subnet that the plan now in force would not let start. An
//! established flow is accepted before any address rule, so without this a
//! de-listed destination stays reachable for as long as the flow lives.

use serde::Serialize;

use crate::conntrack::Conntrack;
use crate::nft;
use crate::plan::HostPlan;
use crate::plan::eval::{Judgement, Learned};

use super::HostError;

/// What a revocation did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RevokeReport {
    /// Tracked flows from profile subnets that were examined.
    pub examined: usize,
    /// Flows deleted because the plan no longer allows them, as
    /// `profile proto src -> dst:port`.
    pub deleted: Vec<String>,
}

/// The elements of the gateway resolver's dynamic sets now, in the
/// current thread's namespace.
pub(crate) fn learned_now() -> Result<Learned, HostError> {
    let live = nft::read_learned()?;
    Ok(nft::learned(&live)
        .into_iter()
        .map(|(k, v)| (k, v.into_iter().map(|(e, _)| e).collect()))
        .collect())
}

/// Judges every tracked flow against `plan` (with the dynamic sets'
/// current elements) and deletes those it refuses. Runs in the current
/// thread's namespace.
pub(crate) fn revoke(plan: &HostPlan) -> Result<RevokeReport, HostError> {
    let learned = learned_now()?;
    let mut ct = Conntrack::open()?;
    let mut report = RevokeReport::default();
    for e in ct.list()? {
        match plan.judge(&e.flow, &learned) {
            Judgement::NotCorrals => {}
            Judgement::Accepted { .. } => report.examined += 1,
            Judgement::Refused { profile } => {
                report.examined += 1;
                ct.delete(&e)?;
                let port = e.flow.dport.map(|p| format!(":{p}")).unwrap_or_default();
                report.deleted.push(format!(
                    "{profile} proto {} {} -> {}{port}",
                    e.flow.protocol, e.flow.src, e.flow.dst
                ));
            }
        }
    }
    Ok(report)
}
