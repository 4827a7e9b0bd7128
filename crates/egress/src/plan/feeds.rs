//! Which allowlist names feed each learned set: what an element of
//! `<profile>-dns4-tcp-443` can have come from.
//!
//! The gateway resolver adds the answers to a name into the learned sets of
//! the classes whose entries admit that name (a host entry, or a wildcard
//! at or above it). So every element of a learned set was admitted by one
//! of the set's entries, and stays admitted by a later plan whose entries
//! for that set include all of them: that is the rule an apply uses to
//! carry learned elements over (`host::carry`). The kernel keeps no record
//! of which name gave which element, so a set that lost any entry is
//! carried over empty.

use std::collections::{BTreeMap, BTreeSet};

use corral_sandbox_core::{AllowTarget, EgressMode, ProfileName, ProfileSet};
use serde::Serialize;

use super::model::AddrFamily;
use super::names;

/// The entries behind one learned set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Feed {
    /// The profile the set belongs to.
    pub profile: ProfileName,
    /// The set's address family.
    pub family: AddrFamily,
    /// The host and wildcard entries of the set's class, as written
    /// (`api.example.com`, `*.cdn.example`).
    pub names: BTreeSet<String>,
}

/// Every learned set of a plan, by set name.
pub type DnsFeeds = BTreeMap<String, Feed>;

/// What feeds the all-ports learned set of a profile whose lookups of
/// unlisted names are put to the operator (`approvals = "ask"`), in
/// [`Feed::names`] beside its entries: approvals turned off is an entry
/// lost, so the set keeps nothing through that apply.
pub const APPROVED: &str = "(names the operator approves)";

/// The feeds of every learned set `profiles` gives (allowlist profiles with
/// `dns = "gateway"`; the `dns6` sets only for profiles with IPv6).
pub fn dns_feeds(profiles: &ProfileSet) -> DnsFeeds {
    let mut out = DnsFeeds::new();
    for p in profiles.iter() {
        if p.mode != EgressMode::Allowlist || !p.dns.resolves() {
            continue;
        }
        let mut families = vec![AddrFamily::V4];
        if p.subnet_v6.is_some() {
            families.push(AddrFamily::V6);
        }
        if p.approvals != corral_sandbox_core::Approvals::Off {
            for &family in &families {
                out.entry(names::dns_set(&p.name, family, None, None))
                    .or_insert_with(|| Feed {
                        profile: p.name.clone(),
                        family,
                        names: BTreeSet::new(),
                    })
                    .names
                    .insert(APPROVED.to_owned());
            }
        }
        for e in &p.allow {
            let name = match &e.target {
                AllowTarget::Host(h) => h.to_string(),
                AllowTarget::Wildcard(w) => format!("*.{w}"),
                AllowTarget::Net(_) => continue,
            };
            for &family in &families {
                let set = names::dns_set(&p.name, family, e.protocol, e.ports);
                out.entry(set)
                    .or_insert_with(|| Feed {
                        profile: p.name.clone(),
                        family,
                        names: BTreeSet::new(),
                    })
                    .names
                    .insert(name.clone());
            }
        }
    }
    out
}

/// The profiles of which some learned set, present in both `before` and
/// `after`, lost an entry: until their gateway is restarted with the new
/// names, its resolver would still add answers for a removed name to a set
/// the new plan keeps (the apply stops these gateways before the new
/// ruleset goes in).
pub fn narrowed(before: &DnsFeeds, after: &DnsFeeds) -> BTreeSet<ProfileName> {
    before
        .iter()
        .filter_map(|(set, old)| {
            let new = after.get(set)?;
            (!old.names.is_subset(&new.names)).then(|| old.profile.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::profile;
    use crate::plan::{HostPlan, PlanSettings, Resolution, SetKind};

    fn set(allow: &[&str]) -> ProfileSet {
        let mut p = profile(
            "dev",
            "cb-dev",
            "10.90.0.0/24",
            EgressMode::Allowlist,
            allow,
        );
        p.subnet_v6 = Some("fd00:90::/64".parse().unwrap());
        p.allow_unresolved = true;
        ProfileSet::new(vec![p]).unwrap()
    }

    /// The names of the plan's learned (dynamic) sets.
    fn learned_sets(plan: &HostPlan) -> BTreeSet<&str> {
        plan.inet
            .sets
            .iter()
            .filter(|s| s.kind == SetKind::Dynamic)
            .map(|s| s.name.as_str())
            .collect()
    }

    #[test]
    fn every_learned_set_of_the_plan_has_a_feed_and_nothing_else_does() {
        let s = set(&[
            "api.example.com:443/tcp",
            "*.cdn.example:443/tcp",
            "*.x.example",
            "192.0.2.1",
        ]);
        let mut r = Resolution::new();
        r.insert(&"api.example.com".parse().unwrap(), []);
        let plan = HostPlan::build(&s, &PlanSettings::default(), &r).unwrap();
        let dynamic = learned_sets(&plan);
        let feeds = dns_feeds(&s);
        assert_eq!(dynamic, feeds.keys().map(String::as_str).collect());
        let f = &feeds["dev-dns6-tcp-443"];
        assert_eq!(f.family, AddrFamily::V6);
        assert_eq!(
            f.names.iter().map(String::as_str).collect::<Vec<_>>(),
            ["*.cdn.example", "api.example.com"]
        );
        assert_eq!(
            feeds["dev-dns4"].names.iter().collect::<Vec<_>>(),
            ["*.x.example"]
        );
    }

    #[test]
    fn a_profile_is_narrowed_only_when_a_kept_set_loses_a_name() {
        let feeds = |allow: &[&str]| dns_feeds(&set(allow));
        let both = feeds(&["*.a.example:443/tcp", "*.b.example:443/tcp"]);
        let grown = feeds(&[
            "*.a.example:443/tcp",
            "*.b.example:443/tcp",
            "*.c.example:443/tcp",
        ]);
        assert!(narrowed(&both, &grown).is_empty());
        assert!(narrowed(&both, &both).is_empty());
        let lost = feeds(&["*.b.example:443/tcp"]);
        assert_eq!(
            narrowed(&both, &lost)
                .iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>(),
            ["dev"]
        );
        // A set gone entirely cannot be fed by the old resolver.
        let moved = feeds(&["*.a.example:8443/tcp"]);
        assert!(narrowed(&feeds(&["*.a.example:443/tcp"]), &moved).is_empty());
    }

    #[test]
    fn no_learned_sets_without_the_gateway_resolver() {
        let mut s = set(&["*.cdn.example"]);
        let mut p = s.iter().next().unwrap().clone();
        p.dns = corral_sandbox_core::DnsPolicy::Off;
        s = ProfileSet::new(vec![p]).unwrap();
        assert!(dns_feeds(&s).is_empty());
    }

    #[test]
    fn approvals_plan_and_feed_the_all_ports_set_and_turning_them_off_removes_it() {
        let with = |approvals| {
            let mut p = set(&["api.example.com:443/tcp"])
                .iter()
                .next()
                .unwrap()
                .clone();
            p.dns = corral_sandbox_core::DnsPolicy::Corral;
            p.approvals = approvals;
            ProfileSet::new(vec![p]).unwrap()
        };
        let ask = with(corral_sandbox_core::Approvals::Ask { timeout_secs: 30 });
        let mut r = Resolution::new();
        r.insert(&"api.example.com".parse().unwrap(), []);
        let plan = HostPlan::build(&ask, &PlanSettings::default(), &r).unwrap();
        let dynamic = learned_sets(&plan);
        let feeds = dns_feeds(&ask);
        assert_eq!(dynamic, feeds.keys().map(String::as_str).collect());
        assert!(dynamic.contains("dev-dns4"), "{dynamic:?}");
        assert!(plan.set("dev-dns4").unwrap().pinned);
        assert!(feeds["dev-dns4"].names.contains(APPROVED));
        let off = dns_feeds(&with(corral_sandbox_core::Approvals::Off));
        assert!(!off.contains_key("dev-dns4"));
        assert!(
            narrowed(&feeds, &off).is_empty(),
            "the set is gone, not narrowed"
        );
    }
}
