//! Bridges an apply removes: every bridge corral created or uses (its
//! stamp, its group) that the new plan does not name. Their traffic is
//! already dropped by the fail-closed rules (`plan::fail_closed`); removal
//! takes the bridge away, and with it the gateway address a sandbox could
//! still talk to.

use serde::Serialize;

use super::HostError;
use super::report::RemovedBridge;
use crate::link::Links;
use crate::plan::HostPlan;

/// A bridge the plan does not name, with its ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnplannedBridge {
    /// Bridge name.
    pub name: String,
    /// Carries corral's stamp: corral created it and deletes it.
    pub stamped: bool,
    /// Its ports (sandboxes still attached).
    pub ports: Vec<String>,
}

/// "bridge `b` (profile removed from the configuration) still has ports
/// p1, p2" for every bridge of `bridges`.
pub(super) fn describe(bridges: &[UnplannedBridge]) -> String {
    let each: Vec<String> = bridges
        .iter()
        .map(|b| format!("bridge `{}` has port(s) {}", b.name, b.ports.join(", ")))
        .collect();
    format!(
        "the plan no longer names {} bridge(s) with sandboxes attached: {}",
        bridges.len(),
        each.join("; ")
    )
}

/// The bridges `plan` does not name that corral created or uses.
pub(super) async fn unplanned(
    plan: &HostPlan,
    links: &Links,
) -> Result<Vec<UnplannedBridge>, HostError> {
    let planned: Vec<&str> = plan.bridges.iter().map(|b| b.name.as_str()).collect();
    Ok(links
        .unplanned_bridges(&planned)
        .await?
        .into_iter()
        .map(|(b, ports)| UnplannedBridge {
            stamped: b.is_stamped_bridge(),
            name: b.name,
            ports,
        })
        .collect())
}

/// Sets every port of `leaving` down and returns the ports `cut_ports`
/// must hold: those of `leaving` and the earlier cuts that still exist
/// (a port that is gone cannot come back under its name as the same
/// sandbox; keeping it would only cut a stranger later).
pub(super) async fn cut_ports(
    plan: &HostPlan,
    leaving: &[UnplannedBridge],
    links: &Links,
) -> Result<Vec<String>, HostError> {
    let all = links.list().await?;
    let mut cut: Vec<String> = plan
        .cut_ports
        .iter()
        .filter(|p| all.iter().any(|l| &l.name == *p))
        .cloned()
        .collect();
    for port in leaving.iter().flat_map(|b| &b.ports) {
        // Down first: the port forwards nothing from here on, even before
        // the ruleset naming it is in.
        links.set_down(port).await?;
        cut.push(port.clone());
    }
    cut.sort();
    cut.dedup();
    Ok(cut)
}

/// Deletes the stamped bridges of `leaving`; an adopted one (corral's
/// group, not its stamp) is left in place and leaves the group.
pub(super) async fn remove(
    leaving: &[UnplannedBridge],
    links: &Links,
) -> Result<Vec<RemovedBridge>, HostError> {
    let mut out = Vec::with_capacity(leaving.len());
    for b in leaving {
        let deleted = if b.stamped {
            links.delete_stamped_bridge(&b.name).await?
        } else {
            links.set_group(&b.name, 0).await?;
            false
        };
        out.push(RemovedBridge {
            name: b.name.clone(),
            cut: b.ports.clone(),
            deleted,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_each_bridge_and_its_ports() {
        let text = describe(&[UnplannedBridge {
            name: "cb-b".into(),
            stamped: true,
            ports: vec!["veth1".into(), "veth2".into()],
        }]);
        assert!(
            text.contains("bridge `cb-b` has port(s) veth1, veth2"),
            "{text}"
        );
    }
}
