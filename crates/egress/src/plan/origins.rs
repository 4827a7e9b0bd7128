//! Where each allow entry lands in the plan (its sets, its addresses),
//! kept beside the plan for `corral explain`; the kernel never sees it.

use corral_sandbox_core::{AllowTarget, EgressMode, ProfileSet};

use super::build::families;
use super::explain::AllowOrigin;
use super::model::AddrRange;
use super::names;
use crate::resolve::Resolution;

/// Where each allow entry of each allowlist profile lands: its static sets
/// with its addresses (the CIDR, or the name's addresses resolved for this
/// plan) and the dynamic sets the gateway resolver fills from its name
/// (what [`HostPlan::trace`](super::HostPlan::trace) names an accept by).
/// Names missing from `resolution` have no addresses here; the build
/// refuses them.
pub(super) fn origins(profiles: &ProfileSet, resolution: &Resolution) -> Vec<AllowOrigin> {
    let mut out = Vec::new();
    for p in profiles.iter().filter(|p| p.mode == EgressMode::Allowlist) {
        for entry in &p.allow {
            let (proto, ports) = (entry.protocol, entry.ports);
            let (addresses, named) = match &entry.target {
                AllowTarget::Net(net) => (vec![AddrRange::from_net(*net)], false),
                AllowTarget::Host(host) => (
                    resolution
                        .get(host)
                        .unwrap_or_default()
                        .iter()
                        .map(|a| AddrRange::single(*a))
                        .collect(),
                    true,
                ),
                AllowTarget::Wildcard(_) => (Vec::new(), true),
            };
            let sets = if matches!(entry.target, AllowTarget::Wildcard(_)) {
                Vec::new()
            } else {
                families(p)
                    .into_iter()
                    .map(|f| names::allow_set(&p.name, f, proto, ports))
                    .collect()
            };
            let learned_sets = if named && p.dns.resolves() {
                families(p)
                    .into_iter()
                    .map(|f| names::dns_set(&p.name, f, proto, ports))
                    .collect()
            } else {
                Vec::new()
            };
            let name = match &entry.target {
                AllowTarget::Host(h) => Some(h.normalized()),
                AllowTarget::Wildcard(w) => Some(format!("*.{}", w.normalized())),
                AllowTarget::Net(_) => None,
            };
            out.push(AllowOrigin {
                profile: p.name.to_string(),
                entry: entry.to_string(),
                name,
                sets,
                learned_sets,
                addresses,
            });
        }
    }
    out
}
