//! Which learned elements an apply carries into the new ruleset.
//!
//! The whole ruleset is replaced in one transaction; without a carry-over
//! every address the gateway resolver learned would vanish with it, and a
//! sandbox whose resolver still caches an answer (up to the TTL cap corral
//! hands out, longer in guests that ignore TTLs) would be cut off a name it
//! is still allowed to reach. So the elements of a learned set are added
//! back, in the same transaction and with the lifetime each had left, when
//! all of these hold:
//!
//! - the new plan has a learned set of that name (same profile, family and
//!   class: `plan::names::dns_set`);
//! - every entry that fed it in the plan in force before feeds it in the
//!   new plan too (`plan::feeds`): the kernel does not record which name
//!   gave which element, so a set that lost any entry keeps nothing;
//! - the address is not one the new plan refuses for names (reserved
//!   ranges, the host's networks, the profile's and the host's deny lists);
//! - in a pinned set, the sandbox address it opens to is bound to the same
//!   port and MAC in both plans: an address handed to another sandbox
//!   since gets nothing its predecessor resolved;
//! - it fits: a set whose `learned_max` shrank keeps the elements with the
//!   longest lifetime left, up to its new size.
//!
//! Without the previous plan nothing is carried: an element whose origin
//! is unknown is never vouched for. Flows to elements left behind are
//! revoked by the apply's last step like any other the plan refuses.

use crate::nft::{Learned, LiveState, learned};
use crate::plan::{AddrRange, HostPlan, SetKind, names, reserved};

/// What of `live`'s learned sets `plan` keeps, given the plan `before` that
/// was in force while they were learned.
pub(crate) fn kept_learned(
    plan: &HostPlan,
    before: Option<&HostPlan>,
    live: &LiveState,
) -> Learned {
    let Some(before) = before else {
        return Learned::new();
    };
    let mut keep = learned(live);
    keep.retain(|set, elements| {
        let (Some(new), Some(old)) = (plan.dns_feeds.get(set), before.dns_feeds.get(set)) else {
            return false;
        };
        if !plan.set(set).is_some_and(|s| s.kind == SetKind::Dynamic)
            || new.profile != old.profile
            || !old.names.is_subset(&new.names)
        {
            return false;
        }
        let deny: Vec<ipnet::IpNet> = plan
            .set(&names::deny_set(&new.profile, new.family))
            .map(|s| s.elements.iter().filter_map(AddrRange::as_net).collect())
            .unwrap_or_default();
        elements.retain(|(e, ms)| {
            *ms > 0
                && e.addr.family() == new.family
                && reserved::refusal(e.addr.start, plan.host_nets(), &deny).is_none()
                && e.asker.is_none_or(|a| same_sandbox(before, plan, a))
        });
        // A set made smaller keeps the elements with the longest lifetime
        // left: adding more than the size would fail the whole apply.
        let cap = plan
            .set(set)
            .and_then(|s| s.size)
            .map_or(usize::MAX, |n| n as usize);
        if elements.len() > cap {
            elements.sort_by_key(|e| std::cmp::Reverse(e.1));
            elements.truncate(cap);
        }
        !elements.is_empty()
    });
    keep
}

/// Whether `addr` is bound to one sandbox (port and MAC) in both plans.
fn same_sandbox(before: &HostPlan, plan: &HostPlan, addr: std::net::IpAddr) -> bool {
    let bound = |p: &HostPlan| {
        p.bindings
            .iter()
            .find(|b| {
                std::net::IpAddr::V4(b.v4) == addr || b.v6.map(std::net::IpAddr::V6) == Some(addr)
            })
            .map(|b| (b.port.clone(), b.mac))
    };
    bound(before).is_some_and(|b| Some(b) == bound(plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nft::{LiveSet, LiveTable};
    use crate::plan::test_support::profile;
    use crate::plan::{AddrFamily, PlanSettings, Resolution, TableFamily};
    use corral_sandbox_core::{EgressMode, ProfileSet};

    fn plan(allow: &[&str], deny: &[&str]) -> HostPlan {
        let mut p = profile(
            "dev",
            "cb-dev",
            "10.90.0.0/24",
            EgressMode::Allowlist,
            allow,
        );
        p.deny = deny.iter().map(|d| d.parse().unwrap()).collect();
        let set = ProfileSet::new(vec![p]).unwrap();
        HostPlan::build(&set, &PlanSettings::default(), &Resolution::new()).unwrap()
    }

    fn live(set: &str, elems: &[(&str, u64)]) -> LiveState {
        let (elements, expires_ms) = elems
            .iter()
            .map(|(a, ms)| (AddrRange::single(a.parse().unwrap()), *ms))
            .unzip();
        LiveState {
            tables: vec![LiveTable {
                family: TableFamily::Inet,
                flags: 0,
                chains: Vec::new(),
                sets: vec![LiveSet {
                    name: set.to_owned(),
                    family: Some(AddrFamily::V4),
                    flags: libc::NFT_SET_TIMEOUT as u32,
                    elements,
                    timeout_ms: 600_000,
                    size: 0,
                    expires_ms,
                    pinned: false,
                    askers: Vec::new(),
                    key_len: 4,
                    keys: Vec::new(),
                    userdata: Vec::new(),
                    jumps: Vec::new(),
                }],
            }],
        }
    }

    const SET: &str = "dev-dns4-tcp-443";

    fn kept(new: &HostPlan, old: Option<&HostPlan>, elems: &[(&str, u64)]) -> Vec<(String, u64)> {
        kept_learned(new, old, &live(SET, elems))
            .remove(SET)
            .unwrap_or_default()
            .into_iter()
            .map(|(e, ms)| (e.addr.start.to_string(), ms))
            .collect()
    }

    #[test]
    fn an_unrelated_change_keeps_elements_with_their_time_left() {
        let old = plan(&["*.a.example:443/tcp"], &[]);
        let new = plan(
            &[
                "*.a.example:443/tcp",
                "*.b.example:443/tcp",
                "192.0.2.7:80/tcp",
            ],
            &[],
        );
        assert_eq!(
            kept(&new, Some(&old), &[("192.0.2.1", 41_000)]),
            [("192.0.2.1".to_owned(), 41_000)]
        );
    }

    #[test]
    fn nothing_is_kept_without_the_previous_plan() {
        let p = plan(&["*.a.example:443/tcp"], &[]);
        assert!(kept(&p, None, &[("192.0.2.1", 41_000)]).is_empty());
    }

    #[test]
    fn a_set_that_lost_an_entry_keeps_nothing() {
        let old = plan(&["*.a.example:443/tcp", "*.b.example:443/tcp"], &[]);
        let new = plan(&["*.b.example:443/tcp"], &[]);
        assert!(new.set(SET).is_some(), "the class set itself stays");
        assert!(kept(&new, Some(&old), &[("192.0.2.1", 41_000)]).is_empty());
    }

    #[test]
    fn a_name_moved_to_another_class_leaves_its_old_set_empty() {
        let old = plan(&["*.a.example:443/tcp"], &[]);
        let new = plan(&["*.a.example:8443/tcp"], &[]);
        assert!(kept(&new, Some(&old), &[("192.0.2.1", 41_000)]).is_empty());
    }

    #[test]
    fn refused_and_expired_elements_are_dropped() {
        let old = plan(&["*.a.example:443/tcp"], &[]);
        let new = plan(&["*.a.example:443/tcp"], &["192.0.2.0/28"]);
        let got = kept(
            &new,
            Some(&old),
            &[
                ("192.0.2.1", 9_000),
                ("169.254.169.254", 9_000),
                ("192.0.2.99", 0),
                ("192.0.2.200", 5),
            ],
        );
        assert_eq!(got, [("192.0.2.200".to_owned(), 5)]);
    }

    #[test]
    fn a_smaller_size_keeps_the_longest_lived() {
        let old = plan(&["*.a.example:443/tcp"], &[]);
        let elems = [
            ("192.0.2.1", 1_000),
            ("192.0.2.2", 9_000),
            ("192.0.2.3", 5_000),
        ];
        // Control: at the default size all three are carried.
        assert_eq!(kept(&old, Some(&old), &elems).len(), 3);
        let mut p = profile(
            "dev",
            "cb-dev",
            "10.90.0.0/24",
            EgressMode::Allowlist,
            &["*.a.example:443/tcp"],
        );
        p.learned_max = 2;
        let set = ProfileSet::new(vec![p]).unwrap();
        let new = HostPlan::build(&set, &PlanSettings::default(), &Resolution::new()).unwrap();
        assert_eq!(new.set(SET).unwrap().size, Some(2));
        let got = kept(&new, Some(&old), &elems);
        assert_eq!(
            got,
            [
                ("192.0.2.2".to_owned(), 9_000),
                ("192.0.2.3".to_owned(), 5_000)
            ]
        );
    }

    /// `dev` on corral's gateway (pinned sets), its sandboxes bound as
    /// `bound` (port, MAC's last byte, address).
    fn pinned_plan(bound: &[(&str, u8, &str)]) -> HostPlan {
        let mut p = profile(
            "dev",
            "cb-dev",
            "10.90.0.0/24",
            EgressMode::Allowlist,
            &["*.a.example:443/tcp"],
        );
        p.dns = corral_sandbox_core::DnsPolicy::Corral;
        let set = ProfileSet::new(vec![p]).unwrap();
        let bindings = bound
            .iter()
            .map(|(port, mac, v4)| crate::plan::PortBinding {
                port: corral_sandbox_core::InterfaceName::new(*port).unwrap(),
                bridge: corral_sandbox_core::BridgeName::new("cb-dev").unwrap(),
                mac: corral_sandbox_core::MacAddr([2, 0, 0, 0, 0, *mac]),
                v4: v4.parse().unwrap(),
                v6: None,
            })
            .collect();
        HostPlan::build(&set, &PlanSettings::default(), &Resolution::new())
            .unwrap()
            .with_bindings(&set, bindings)
            .unwrap()
    }

    #[test]
    fn a_pinned_element_stays_only_while_its_asker_is_the_same_sandbox() {
        let mut state = live(SET, &[("192.0.2.1", 9_000), ("192.0.2.2", 9_000)]);
        let s = &mut state.tables[0].sets[0];
        s.pinned = true;
        s.askers = vec!["10.90.0.5".parse().unwrap(), "10.90.0.6".parse().unwrap()];
        let old = pinned_plan(&[("c0s5", 5, "10.90.0.5"), ("c0s6", 6, "10.90.0.6")]);
        // .5 keeps its port and MAC; .6 now belongs to another sandbox.
        let new = pinned_plan(&[("c0s5", 5, "10.90.0.5"), ("c0s7", 7, "10.90.0.6")]);
        let got: Vec<(Option<String>, String)> = kept_learned(&new, Some(&old), &state)
            .remove(SET)
            .unwrap_or_default()
            .into_iter()
            .map(|(e, _)| (e.asker.map(|a| a.to_string()), e.addr.start.to_string()))
            .collect();
        assert_eq!(
            got,
            [(Some("10.90.0.5".to_owned()), "192.0.2.1".to_owned())]
        );
    }
}
