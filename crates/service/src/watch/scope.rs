//! Which drift the watch reacts to, and which profiles it touches.

use std::collections::BTreeSet;

use corral_egress::host::HostDrift;
use corral_egress::plan::HostPlan;

/// True for drift a re-apply of the recorded plan puts right and that
/// someone (or something) other than corral caused: nftables objects,
/// bridges, sysctls, ports. The host's own networks changing is not
/// tampering (`corral host refresh` takes them in), and stray-source
/// counters only report what the rules already dropped; an unplanned
/// bridge is held by the fail-closed rules whatever the re-apply does.
pub fn reacts_to(d: &HostDrift) -> bool {
    matches!(
        d,
        HostDrift::Nft(_)
            | HostDrift::Bridge { .. }
            | HostDrift::Sysctl(_)
            | HostDrift::Port { .. }
    )
}

/// The profiles of `plan` that `drift` concerns. A change to anything
/// shared — a table, a base chain, a set of every profile, a global
/// sysctl — concerns them all.
pub fn affected(plan: &HostPlan, drift: &[&HostDrift]) -> Vec<String> {
    let all: Vec<String> = plan.bridges.iter().map(|b| b.profile.to_string()).collect();
    let of_bridge = |name: &str| {
        plan.bridges
            .iter()
            .find(|b| b.name.as_str() == name)
            .map(|b| b.profile.to_string())
    };
    let mut out = BTreeSet::new();
    for d in drift {
        let one = match d {
            HostDrift::Bridge { name, .. } => of_bridge(name),
            HostDrift::Port { bridge, .. } => of_bridge(bridge),
            HostDrift::Sysctl(s) => plan
                .bridges
                .iter()
                .find(|b| s.key.split('.').any(|part| part == b.name.as_str()))
                .map(|b| b.profile.to_string()),
            HostDrift::Nft(n) => {
                // Per-profile chains and sets are named `<profile>-…`.
                let object = n
                    .location
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned();
                all.iter()
                    .filter(|p| object.starts_with(&format!("{p}-")))
                    .max_by_key(|p| p.len())
                    .cloned()
            }
            // An unplanned bridge belongs to no profile of the plan: the
            // fail-closed rules already drop its traffic, and verify names it.
            HostDrift::HostNetworks { .. }
            | HostDrift::StraySource { .. }
            | HostDrift::UnplannedBridge { .. } => continue,
        };
        match one {
            Some(p) => {
                out.insert(p);
            }
            None => return all,
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_egress::drift::{Drift, DriftKind, DriftObject};
    use corral_egress::plan::test_support::profile;
    use corral_egress::plan::{PlanSettings, TableFamily};
    use corral_egress::resolve::Resolution;
    use corral_sandbox_core::{EgressMode, ProfileSet};

    fn two_profiles() -> HostPlan {
        let set = ProfileSet::new(vec![
            profile("dev", "cb-dev", "10.93.1.0/24", EgressMode::Internet, &[]),
            profile("dev-b", "cb-devb", "10.93.2.0/24", EgressMode::None, &[]),
        ])
        .unwrap();
        HostPlan::build(&set, &PlanSettings::default(), &Resolution::new()).unwrap()
    }

    fn nft(object: DriftObject, location: &str) -> HostDrift {
        HostDrift::Nft(Drift {
            kind: DriftKind::Missing,
            object,
            family: TableFamily::Inet,
            location: location.to_owned(),
            detail: String::new(),
        })
    }

    #[test]
    fn a_profiles_own_objects_name_it_and_shared_ones_name_all() {
        let plan = two_profiles();
        let profiles: Vec<String> = plan.bridges.iter().map(|b| b.profile.to_string()).collect();
        let p = "dev".to_owned();
        // The longest profile prefix wins: `dev-b-out` is dev-b's.
        let longer = nft(DriftObject::Chain, "chain dev-b-out");
        assert_eq!(affected(&plan, &[&longer]), vec!["dev-b".to_owned()]);
        let own = nft(DriftObject::Set, &format!("set {p}-allow4"));
        assert_eq!(affected(&plan, &[&own]), vec![p.clone()]);
        let rule = nft(DriftObject::Rule, &format!("chain {p}-out rule 2"));
        assert_eq!(affected(&plan, &[&rule]), vec![p.clone()]);
        let table = nft(DriftObject::Table, "table inet corral");
        assert_eq!(affected(&plan, &[&table]), profiles);
        let base = nft(DriftObject::Chain, "chain forward");
        assert_eq!(affected(&plan, &[&own, &base]), profiles);
        let bridge = HostDrift::Bridge {
            name: "cb-dev".to_owned(),
            problem: "down".into(),
        };
        assert_eq!(affected(&plan, &[&bridge]), vec![p]);
    }

    #[test]
    fn the_hosts_own_networks_changing_is_not_reacted_to() {
        let d = HostDrift::HostNetworks {
            new: "192.0.2.0/24".into(),
            gone: String::new(),
        };
        assert!(!reacts_to(&d));
        assert!(reacts_to(&nft(DriftObject::Table, "table inet corral")));
    }
}
