//! The drill's carry-over row: an address the gateway resolver learned
//! stays reachable through an apply of an unrelated change, with no new
//! lookup (docs/gateway.md, "An apply keeps what the resolver learned").
//!
//! The change is one address added to the profile's deny set, nowhere
//! near the learned one; the lab's plan is applied again afterwards, so
//! the rows that follow see the host as before. The control is the same
//! probe from the simulated host, which corral does not filter.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use corral_egress::plan::{AddrFamily, AddrRange, HostPlan, names};
use corral_sandbox_core::Profile;

use crate::lab::topology::SandboxNs;
use crate::lab::{Lab, Observed, Probe, probe_from};

/// The row's probe label.
pub(crate) const CARRIED: &str =
    "learned address reachable after an unrelated apply, no new lookup";

/// The unrelated change: a documentation address denied.
const DENIED: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 201);

/// The lab's plan with [`DENIED`] in `profile`'s deny set.
fn unrelated_change(lab: &Lab, profile: &Profile) -> HostPlan {
    let mut plan = lab.plan.clone();
    let deny = names::deny_set(&profile.name, AddrFamily::V4);
    if let Some(s) = plan.inet.sets.iter_mut().find(|s| s.name == deny) {
        let r = AddrRange::single(IpAddr::V4(DENIED));
        if !s
            .elements
            .iter()
            .any(|e| e.start <= r.start && r.start <= e.end)
        {
            s.elements.push(r);
            s.elements.sort();
        }
    }
    plan
}

/// Applies an unrelated change after `sb` learned the address `probe`
/// goes to, probes it again without a lookup, and restores the lab's plan.
/// Returns what the probe saw and how long it took.
pub(crate) fn after_unrelated_apply(
    lab: &Lab,
    profile: &Profile,
    sb: &SandboxNs,
    probe: &Probe,
    timeout: Duration,
) -> (Observed, u64) {
    let changed = unrelated_change(lab, profile);
    let (observed, ms) = match lab.host.apply_after(&changed, Some(&lab.plan)) {
        Ok(report) if report.carried == 0 => (
            Observed::Error("the apply carried no learned address".to_owned()),
            0,
        ),
        Ok(_) => {
            let r = probe_from(&sb.ns, probe, timeout);
            (r.observed, r.ms)
        }
        Err(e) => (Observed::Error(format!("apply: {e}")), 0),
    };
    match lab.host.apply_after(&lab.plan, Some(&changed)) {
        Ok(_) => (observed, ms),
        Err(e) => (
            Observed::Error(format!("restoring the lab's plan: {e}")),
            ms,
        ),
    }
}
