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
        elements.retain(|(r, ms)| {
            *ms > 0
                && r.family() == new.family
                && reserved::refusal(r.start, plan.host_nets(), &deny).is_none()
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
            .map(|(r, ms)| (r.start.to_string(), ms))
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
}
