//! Rules that hold whatever the profiles say: what corral once enforced on
//! this host and the plan no longer names is dropped, by rules that do not
//! depend on any profile's chains (a removed profile has none left).
//!
//! - **Stamped bridges.** corral puts every bridge it uses (created or
//!   adopted) in the netdev group [`STAMP_GROUP`]. The inet base chains
//!   drop what enters (`iifgroup`) or leaves (`oifgroup`) by a bridge of
//!   that group *after* the verdict maps: a planned bridge is dispatched to
//!   its profile's chain, which always ends in a verdict (the `<p>-in`,
//!   `<p>-out` and `<p>-host` chains end in a drop or the profile's block),
//!   so only a bridge the plan does not name reaches these rules. There is
//!   no such rule in `prerouting`: its guard chains return, and every packet
//!   meets `input` or `forward` after it anyway.
//! - **Retired subnets.** Every subnet corral planned on this host before
//!   and the current plan lacks is in `retired4`/`retired6` (persisted in
//!   the applied record): dropped as a source in `prerouting` (whatever the
//!   interface it arrives on) and as a destination in `forward`.
//! - **Cut ports.** The ports of a bridge an apply removed with `--force`
//!   are set down and named in `cut_ports` (both tables), so a port brought
//!   up again still forwards nothing, bridged or routed.
//!
//! The set names hold an underscore (or a digit with no dash), which no
//! profile's sets have (theirs are `<profile>-…`).

use ipnet::IpNet;

use super::keyed::{Field, KeyPart, KeyValue, KeyedKind, KeyedSetPlan};
use super::model::{
    AddrFamily, AddrRange, Match, RulePlan, SetKind, SetPlan, Verdict, merge_ranges,
};

/// The netdev group (`IFLA_GROUP`) of every bridge corral uses: its stamp
/// in the kernel's own terms, which a rule can match (`iifgroup`), unlike
/// the alias. ("corl" in ASCII; any value other than 0, the default group.)
pub const STAMP_GROUP: u32 = 0x636f_726c;

/// Retired IPv4 subnets (interval set, inet table).
pub const RETIRED4: &str = "retired4";
/// Retired IPv6 subnets.
pub const RETIRED6: &str = "retired6";
/// Ports cut by a forced apply (interface names, both tables).
pub const CUT_PORTS: &str = "cut_ports";

/// The retired set of `family`.
pub fn retired_set_name(family: AddrFamily) -> &'static str {
    match family {
        AddrFamily::V4 => RETIRED4,
        AddrFamily::V6 => RETIRED6,
    }
}

/// `retired4`/`retired6` holding the `retired` subnets.
pub(super) fn retired_sets(retired: &[IpNet]) -> [SetPlan; 2] {
    [AddrFamily::V4, AddrFamily::V6].map(|family| SetPlan {
        name: retired_set_name(family).to_owned(),
        family,
        kind: SetKind::Interval,
        elements: merge_ranges(
            retired
                .iter()
                .map(|n| AddrRange::from_net(n.trunc()))
                .filter(|r| r.family() == family)
                .collect(),
        ),
        timeout: None,
        size: None,
        pinned: false,
    })
}

/// `cut_ports` holding `ports` (sorted, deduplicated).
pub(super) fn cut_ports_set(ports: &[String]) -> KeyedSetPlan {
    let mut s = KeyedSetPlan::new(CUT_PORTS, vec![KeyPart::IfName], KeyedKind::Static);
    s.elements = ports
        .iter()
        .map(|p| vec![KeyValue::IfName(p.clone())])
        .collect();
    s.elements.sort();
    s.elements.dedup();
    s
}

fn drop(m: Match) -> RulePlan {
    RulePlan::counted(vec![m], Verdict::Drop)
}

fn cut(field: Field) -> RulePlan {
    drop(Match::InSet {
        fields: vec![field],
        set: CUT_PORTS.to_owned(),
        negate: false,
    })
}

/// Appended to inet `prerouting`, after the dispatch.
pub(super) fn prerouting_tail() -> Vec<RulePlan> {
    vec![
        cut(Field::IifName),
        drop(Match::SaddrInSet(AddrFamily::V4, RETIRED4.to_owned())),
        drop(Match::SaddrInSet(AddrFamily::V6, RETIRED6.to_owned())),
    ]
}

/// Inserted into inet `forward` between the dispatch by output interface
/// and the one by input interface (so a planned bridge's sandbox cannot
/// send to an unplanned one either, whatever its mode accepts).
pub(super) fn forward_middle() -> Vec<RulePlan> {
    vec![
        drop(Match::OifGroup(STAMP_GROUP)),
        drop(Match::DaddrInSet(AddrFamily::V4, RETIRED4.to_owned())),
        drop(Match::DaddrInSet(AddrFamily::V6, RETIRED6.to_owned())),
        cut(Field::OifName),
    ]
}

/// Appended to inet `forward` and `input`, after the dispatch by input
/// interface.
pub(super) fn iif_tail() -> Vec<RulePlan> {
    vec![drop(Match::IifGroup(STAMP_GROUP)), cut(Field::IifName)]
}

/// First in the bridge table's `prerouting` (`iif`) and `forward` (both
/// ports).
pub(super) fn bridge_cut(both: bool) -> Vec<RulePlan> {
    let mut v = vec![cut(Field::IifName)];
    if both {
        v.push(cut(Field::OifName));
    }
    v
}

/// The retired subnets after an apply of a plan with `current` subnets
/// that replaces one with `previous` subnets, `retired` before: every
/// subnet ever planned here and not planned now. A retired subnet that
/// overlaps a current one leaves the list (the current profile's own rules
/// govern it again).
pub fn retire(retired: &[IpNet], previous: &[IpNet], current: &[IpNet]) -> Vec<IpNet> {
    let current: Vec<IpNet> = current.iter().map(IpNet::trunc).collect();
    let overlaps = |n: &IpNet| current.iter().any(|c| c.contains(n) || n.contains(c));
    let mut out: Vec<IpNet> = retired
        .iter()
        .chain(previous)
        .map(IpNet::trunc)
        .filter(|n| !overlaps(n))
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn a_removed_subnet_is_retired_until_planned_again() {
        let a = net("10.1.0.0/24");
        let b = net("10.2.0.0/24");
        let b6 = net("fd00:2::/64");
        let r = retire(&[], &[a, b, b6], &[a]);
        assert_eq!(r, vec![b, b6]);
        // Kept across later applies that do not plan it.
        assert_eq!(retire(&r, &[a], &[a]), r);
        // Planned again (or overlapped by a new subnet): no longer retired.
        assert_eq!(retire(&r, &[a], &[a, net("10.2.0.0/16")]), vec![b6]);
        // A host address with a prefix counts as its network.
        assert_eq!(
            retire(&[], &[net("10.3.0.1/24")], &[]),
            vec![net("10.3.0.0/24")]
        );
    }

    #[test]
    fn retired_sets_split_by_family() {
        let [v4, v6] = retired_sets(&[net("10.2.0.0/24"), net("fd00:2::/64")]);
        assert_eq!((v4.name.as_str(), v4.elements.len()), (RETIRED4, 1));
        assert_eq!((v6.name.as_str(), v6.elements.len()), (RETIRED6, 1));
        assert_eq!(
            cut_ports_set(&["b".into(), "a".into(), "a".into()])
                .elements
                .len(),
            2
        );
    }

    fn arb_net() -> impl Strategy<Value = IpNet> {
        (0u8..8, 16u8..=28).prop_map(|(o, l)| {
            IpNet::V4(ipnet::Ipv4Net::new(std::net::Ipv4Addr::new(10, o, 0, 0), l).unwrap())
        })
    }

    proptest! {
        /// The law: nothing current is retired, and every earlier subnet
        /// that no current subnet overlaps stays retired.
        #[test]
        fn retire_never_touches_the_current_plan(
            retired in prop::collection::vec(arb_net(), 0..6),
            previous in prop::collection::vec(arb_net(), 0..6),
            current in prop::collection::vec(arb_net(), 0..6),
        ) {
            let out = retire(&retired, &previous, &current);
            for n in &out {
                prop_assert!(!current.iter().any(|c| c.contains(n) || n.contains(c)));
            }
            for n in retired.iter().chain(&previous) {
                let overlapped = current.iter().any(|c| c.contains(n) || n.contains(c));
                prop_assert_eq!(out.contains(&n.trunc()), !overlapped);
            }
        }
    }
}
