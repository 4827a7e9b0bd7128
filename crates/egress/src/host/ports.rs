//! The ports of corral's bridges: every one isolated, every one either
//! bound (its binding in the plan) or quarantined (in the bridge table's
//! run-time `quarantine` set, where it may only ask for a lease) — the
//! sweep makes it so, verify reports any port that is not.

use std::collections::BTreeSet;

use serde::Serialize;

use super::HostError;
use super::report::HostDrift;
use crate::link::{CORRAL_BRIDGE_NETFILTER, LinkState, Links};
use crate::nft::{self, LiveState};
use crate::plan::bridge::sets::QUARANTINE;
use crate::plan::{HostPlan, KeyValue, KeyedSetPlan, TableFamily};

/// What a sweep did to one port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortReport {
    /// The port.
    pub port: String,
    /// Its bridge.
    pub bridge: String,
    /// Bound (else quarantined).
    pub bound: bool,
    /// Isolation was off and the sweep turned it on.
    pub isolated_now: bool,
}

fn quarantine_set(plan: &HostPlan) -> Option<&KeyedSetPlan> {
    plan.bridge.keyed_sets.iter().find(|s| s.name == QUARANTINE)
}

/// Port names in the live quarantine set.
fn quarantined(live: &LiveState) -> BTreeSet<String> {
    live.table(TableFamily::Bridge)
        .and_then(|t| t.set(QUARANTINE))
        .map(|s| {
            s.keys
                .iter()
                .map(|k| {
                    let end = k.iter().position(|b| *b == 0).unwrap_or(k.len());
                    String::from_utf8_lossy(&k[..end]).into_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every port of every planned bridge, with its bridge (absent bridges
/// have none).
async fn ports(plan: &HostPlan, links: &Links) -> Result<Vec<(String, LinkState)>, HostError> {
    // One dump of every link, not one per bridge: a host of hundreds of
    // profiles would otherwise dump its links hundreds of times.
    let all = links.list().await?;
    let mut out = Vec::new();
    for b in &plan.bridges {
        let Some(br) = all.iter().find(|l| l.name == b.name.as_str()) else {
            continue;
        };
        for p in all.iter().filter(|l| l.controller == Some(br.index)) {
            out.push((b.name.to_string(), p.clone()));
        }
    }
    Ok(out)
}

/// Isolates every port of the plan's bridges and quarantines every one
/// without a binding (un-quarantining bound ones and ones that are gone),
/// in one nftables transaction.
pub(super) async fn sweep(plan: &HostPlan, links: &Links) -> Result<Vec<PortReport>, HostError> {
    let mut reports = Vec::new();
    let mut want = BTreeSet::new();
    for (bridge, p) in ports(plan, links).await? {
        let isolated_now = p.isolated != Some(true);
        if isolated_now {
            links.set_port_isolated(&p.name, true).await?;
        }
        let bound = plan.binding(&p.name).is_some();
        if !bound {
            want.insert(p.name.clone());
        }
        reports.push(PortReport {
            port: p.name,
            bridge,
            bound,
            isolated_now,
        });
    }
    let Some(set) = quarantine_set(plan) else {
        return Ok(reports);
    };
    let have = quarantined(&nft::read_set(TableFamily::Bridge, QUARANTINE)?);
    let name = |n: &String| vec![KeyValue::IfName(n.clone())];
    let add: Vec<_> = want.difference(&have).map(name).collect();
    let remove: Vec<_> = have.difference(&want).map(name).collect();
    nft::update_keyed(TableFamily::Bridge, set, &add, &remove)?;
    Ok(reports)
}

/// Port and bridge-switch drift: a bridge whose br_netfilter switches are
/// not corral's; a port not isolated; a port neither bound nor
/// quarantined; a bound port on another bridge than its binding's.
pub(super) async fn drift(
    plan: &HostPlan,
    links: &Links,
    live: &LiveState,
) -> Result<Vec<HostDrift>, HostError> {
    let mut out = Vec::new();
    let all = links.list().await?;
    for b in &plan.bridges {
        if let Some(link) = all.iter().find(|l| l.name == b.name.as_str())
            && link.kind.as_deref() == Some("bridge")
            && link.netfilter != Some(CORRAL_BRIDGE_NETFILTER)
        {
            out.push(HostDrift::Bridge {
                name: b.name.to_string(),
                problem: format!(
                    "br_netfilter switches are {:?}, planned {:?}",
                    link.netfilter, CORRAL_BRIDGE_NETFILTER
                ),
            });
        }
    }
    let quarantine = quarantined(live);
    for (bridge, p) in ports(plan, links).await? {
        let mut problem = |what: String| {
            out.push(HostDrift::Port {
                port: p.name.clone(),
                bridge: bridge.clone(),
                problem: what,
            });
        };
        if p.isolated != Some(true) {
            problem("not isolated: it could reach the bridge's other ports".to_owned());
        }
        match plan.binding(&p.name) {
            Some(b) if b.bridge.as_str() != bridge => problem(format!(
                "bound to bridge {}, but is a port of {bridge}",
                b.bridge
            )),
            Some(_) => {}
            None if !quarantine.contains(&p.name) => problem(
                "neither bound nor quarantined: bind it (or sweep the ports to quarantine it)"
                    .to_owned(),
            ),
            None => {}
        }
    }
    Ok(out)
}
