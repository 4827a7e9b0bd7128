//! Which parts of a host plan enforce one profile: its own chains (and any
//! chain they jump to), the base chains that dispatch to them (and the
//! verdict maps they dispatch through: the map, and its elements that jump
//! to the profile's chains), the sets their rules look up, its bridge. Drift anywhere in that scope means the
//! profile is not enforced as planned; drift elsewhere (another profile's
//! chains or sets) does not stop this profile's sandboxes. Shared chains
//! that hold every profile's frames (the bridge table's port checks) and
//! their sets are in every profile's scope.

use std::collections::BTreeSet;

use corral_egress::drift::{Drift, DriftObject};
use corral_egress::host::HostDrift;
use corral_egress::plan::droplog::METER_SUFFIX as DROPLOG_SUFFIX;
use corral_egress::plan::{HostPlan, Match, TableFamily, Verdict};

/// The names that enforce one profile, per table family.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProfileScope {
    /// (family, chain) pairs: the profile's chains, what they jump to, and
    /// the base chains that jump to them.
    pub chains: BTreeSet<(TableFamily, String)>,
    /// (family, set) pairs looked up by those chains.
    pub sets: BTreeSet<(TableFamily, String)>,
    /// The profile's bridge.
    pub bridge: Option<String>,
}

impl ProfileScope {
    /// The scope of `profile` in `plan` (empty when the plan lacks it).
    pub fn of(plan: &HostPlan, profile: &str) -> Self {
        let mut scope = Self {
            bridge: plan
                .bridges
                .iter()
                .find(|b| b.profile.as_str() == profile)
                .map(|b| b.name.to_string()),
            ..Self::default()
        };
        for table in plan.tables() {
            let own: BTreeSet<String> = table
                .chains
                .iter()
                .filter(|c| c.profile.as_deref() == Some(profile))
                .map(|c| c.name.clone())
                .collect();
            // Chains reachable from the profile's own, by jumps.
            let mut reach = own.clone();
            loop {
                let more: Vec<String> = table
                    .chains
                    .iter()
                    .filter(|c| reach.contains(&c.name))
                    .flat_map(|c| &c.rules)
                    .filter_map(|r| match &r.verdict {
                        Verdict::Jump(to) if !reach.contains(to) => Some(to.clone()),
                        _ => None,
                    })
                    .collect();
                if more.is_empty() {
                    break;
                }
                reach.extend(more);
            }
            // Base chains that dispatch into them: by a jump, or by a
            // verdict map with an element jumping there (the map is then
            // in scope too).
            let dispatching_maps: BTreeSet<&str> = table
                .maps
                .iter()
                .filter(|m| m.chains().any(|c| own.contains(c)))
                .map(|m| m.name.as_str())
                .collect();
            for c in table.chains.iter().filter(|c| c.base.is_some()) {
                let dispatches = c.rules.iter().any(|r| match &r.verdict {
                    Verdict::Jump(to) => own.contains(to),
                    Verdict::Vmap { map, .. } => dispatching_maps.contains(map.as_str()),
                    _ => false,
                });
                if dispatches {
                    reach.insert(c.name.clone());
                }
            }
            scope.sets.extend(
                dispatching_maps
                    .iter()
                    .map(|m| (table.family, (*m).to_owned())),
            );
            // Shared chains every frame of every profile meets (the bridge
            // table's port checks, which cannot name a bridge): reachable
            // from a base chain without entering another profile's chain.
            let mut shared: BTreeSet<String> = table
                .chains
                .iter()
                .filter(|c| c.base.is_some() && c.profile.is_none())
                .map(|c| c.name.clone())
                .collect();
            loop {
                let more: Vec<String> = table
                    .chains
                    .iter()
                    .filter(|c| shared.contains(&c.name))
                    .flat_map(|c| &c.rules)
                    .filter_map(|r| match &r.verdict {
                        Verdict::Jump(to) if !shared.contains(to) => Some(to.clone()),
                        _ => None,
                    })
                    .filter(|to| {
                        table
                            .chains
                            .iter()
                            .any(|c| &c.name == to && c.profile.is_none())
                    })
                    .collect();
                if more.is_empty() {
                    break;
                }
                shared.extend(more);
            }
            reach.extend(shared);
            let own_meter = format!("{profile}{DROPLOG_SUFFIX}");
            for c in table.chains.iter().filter(|c| reach.contains(&c.name)) {
                for r in &c.rules {
                    for m in &r.matches {
                        match m {
                            // Another profile's drop-log budget, met in a
                            // shared base chain: it decides what is logged
                            // for that profile, never this one's verdicts.
                            Match::Meter { set, .. }
                                if set.ends_with(DROPLOG_SUFFIX) && *set != own_meter => {}
                            Match::DaddrInSet(_, set)
                            | Match::SaddrInSet(_, set)
                            | Match::InSet { set, .. }
                            | Match::Meter { set, .. } => {
                                scope.sets.insert((table.family, set.clone()));
                            }
                            _ => {}
                        }
                    }
                }
            }
            scope
                .chains
                .extend(reach.into_iter().map(|c| (table.family, c)));
        }
        scope
    }

    /// True when `drift` concerns this profile's enforcement.
    pub fn covers(&self, drift: &HostDrift) -> bool {
        match drift {
            HostDrift::Nft(d) => self.covers_nft(d),
            HostDrift::Bridge { name, .. } => self.bridge.as_deref() == Some(name.as_str()),
            // A port of the profile's bridge that is not isolated, or
            // neither bound nor quarantined, can reach its siblings.
            HostDrift::Port { bridge, .. } => self.bridge.as_deref() == Some(bridge.as_str()),
            // Forwarding and bridge-netfilter switches hold for every
            // profile's rules at once.
            HostDrift::Sysctl(_) => true,
            // A network the host gained since apply is reachable from every
            // profile until a refresh: fail closed.
            HostDrift::HostNetworks { .. } => true,
            // Packets from a detached port are dropped: enforcement holds,
            // a new sandbox is not at risk (verify still reports it).
            HostDrift::StraySource { .. } => false,
            // A bridge of corral's no profile governs: its traffic is
            // dropped, but the host is not what was applied (and a sandbox
            // on it is cut off, not enforced): no start until an apply
            // removes it.
            HostDrift::UnplannedBridge { .. } => true,
        }
    }

    fn covers_nft(&self, d: &Drift) -> bool {
        let object_name = |prefix: &str| {
            d.location
                .strip_prefix(prefix)
                .map(|rest| rest.split(' ').next().unwrap_or_default().to_owned())
        };
        match d.object {
            DriftObject::Table => true,
            DriftObject::Chain | DriftObject::Rule => {
                object_name("chain ").is_some_and(|c| self.chains.contains(&(d.family, c)))
            }
            DriftObject::Set => object_name("set ")
                .or_else(|| object_name("map "))
                .is_some_and(|s| self.sets.contains(&(d.family, s))),
            DriftObject::Element => match object_name("map ") {
                // A dispatch map holds every profile's element: only one
                // jumping to this profile's chains is this profile's.
                Some(m) => {
                    self.sets.contains(&(d.family, m))
                        && d.detail.rsplit("jump ").next().is_some_and(|to| {
                            d.detail.contains("jump ")
                                && self.chains.contains(&(d.family, to.to_owned()))
                        })
                }
                None => object_name("set ").is_some_and(|s| self.sets.contains(&(d.family, s))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use corral_egress::drift::DriftKind;
    use corral_egress::host::plan_settings;
    use corral_egress::plan::Resolution;
    use corral_sandbox_core::Config;

    use super::*;

    fn plan() -> HostPlan {
        let config = Config::builtin_default();
        HostPlan::build(
            &config.profiles,
            &plan_settings(&config.host),
            &Resolution::new(),
        )
        .unwrap()
    }

    fn nft(object: DriftObject, family: TableFamily, location: &str) -> HostDrift {
        HostDrift::Nft(Drift {
            kind: DriftKind::Missing,
            object,
            family,
            location: location.to_owned(),
            detail: String::new(),
        })
    }

    #[test]
    fn a_profile_owns_its_chains_their_dispatchers_and_their_sets() {
        let plan = plan();
        let s = ProfileScope::of(&plan, "internet");
        for (f, c) in [
            (TableFamily::Inet, "internet-out"),
            (TableFamily::Inet, "internet-in"),
            (TableFamily::Inet, "internet-host"),
            (TableFamily::Inet, "forward"),
            (TableFamily::Inet, "input"),
            (TableFamily::Bridge, "internet-ports"),
            (TableFamily::Bridge, "forward"),
            (TableFamily::Bridge, "prerouting"),
            (TableFamily::Bridge, "port-in"),
            (TableFamily::Bridge, "port-ip4"),
        ] {
            assert!(s.chains.contains(&(f, c.to_owned())), "{f:?} {c}: {s:?}");
        }
        assert!(
            !s.chains
                .contains(&(TableFamily::Inet, "isolated-out".to_owned()))
        );
        assert!(
            s.sets
                .contains(&(TableFamily::Inet, "reserved4".to_owned()))
        );
        assert_eq!(s.bridge.as_deref(), Some("corral-net"));
        // The port bindings every sandbox's frames are held to.
        for set in ["ports", "quarantine", "port-mac", "port-ip4", "port-ip6"] {
            assert!(
                s.sets.contains(&(TableFamily::Bridge, set.to_owned())),
                "{set}: {s:?}"
            );
        }

        assert!(s.covers(&nft(
            DriftObject::Table,
            TableFamily::Bridge,
            "table bridge corral"
        )));
        assert!(s.covers(&nft(
            DriftObject::Rule,
            TableFamily::Inet,
            "chain forward rule 3"
        )));
        assert!(s.covers(&nft(
            DriftObject::Chain,
            TableFamily::Inet,
            "chain internet-out"
        )));
        assert!(s.covers(&nft(
            DriftObject::Element,
            TableFamily::Inet,
            "set reserved4"
        )));
        // Another profile's chain, and a same-named chain in the other family.
        assert!(!s.covers(&nft(
            DriftObject::Chain,
            TableFamily::Inet,
            "chain isolated-out"
        )));
        assert!(!s.covers(&nft(
            DriftObject::Chain,
            TableFamily::Inet,
            "chain internet-ports"
        )));
        assert!(!s.covers(&HostDrift::Bridge {
            name: "corral-iso".into(),
            problem: "missing".into()
        }));
        assert!(s.covers(&HostDrift::Bridge {
            name: "corral-net".into(),
            problem: "down".into()
        }));
        assert_eq!(ProfileScope::of(&plan, "nope").bridge, None);
    }

    #[test]
    fn an_unplanned_bridge_and_the_fail_closed_sets_hold_every_profile() {
        let plan = plan();
        let unplanned = HostDrift::UnplannedBridge {
            name: "cb-old".to_owned(),
            ports: vec!["veth1".to_owned()],
        };
        for p in ["internet", "isolated", "allowlist"] {
            let s = ProfileScope::of(&plan, p);
            assert!(s.covers(&unplanned), "{p}");
            for (f, set) in [
                (TableFamily::Inet, "retired4"),
                (TableFamily::Inet, "retired6"),
                (TableFamily::Inet, "cut_ports"),
                (TableFamily::Bridge, "cut_ports"),
            ] {
                assert!(s.sets.contains(&(f, set.to_owned())), "{p} {f:?} {set}");
            }
        }
    }

    fn element(detail: &str) -> HostDrift {
        HostDrift::Nft(Drift {
            kind: DriftKind::Missing,
            object: DriftObject::Element,
            family: TableFamily::Inet,
            location: "map out_by_iif".to_owned(),
            detail: detail.to_owned(),
        })
    }

    #[test]
    fn a_profile_owns_the_dispatch_maps_and_only_its_own_elements() {
        let plan = plan();
        let s = ProfileScope::of(&plan, "internet");
        for map in ["out_by_iif", "in_by_oif", "guard_by_iif", "host_by_iif"] {
            assert!(
                s.sets.contains(&(TableFamily::Inet, map.to_owned())),
                "{map}: {s:?}"
            );
        }
        for c in [
            "prerouting",
            "postrouting",
            "internet-arrival",
            "internet-nat",
        ] {
            assert!(
                s.chains.contains(&(TableFamily::Inet, c.to_owned())),
                "{c}: {s:?}"
            );
        }
        assert!(s.covers(&element("\"corral-net\" : jump internet-out")));
        assert!(!s.covers(&element("\"corral-iso\" : jump isolated-out")));
        // A stranger's interface sent into this profile's chain.
        assert!(s.covers(&element("65766966 : jump internet-out")));
        assert!(s.covers(&nft(DriftObject::Set, TableFamily::Inet, "map out_by_iif")));
    }

    #[test]
    fn an_allowlist_profile_owns_its_allow_sets() {
        let plan = plan();
        let s = ProfileScope::of(&plan, "allowlist");
        let own: Vec<&String> = s
            .sets
            .iter()
            .map(|(_, n)| n)
            .filter(|n| n.starts_with("allowlist-"))
            .collect();
        assert!(!own.is_empty(), "{s:?}");
        assert!(!s.sets.iter().any(|(_, n)| n.starts_with("internet-")));
    }
}
