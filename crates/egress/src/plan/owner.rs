//! Whose flow is it: established and related traffic is accepted only for
//! flows the profile itself started (or, towards the host, flows between
//! the host and the profile's own subnet), in the direction it owns them.
//!
//! Conntrack calls an ICMP error *related* to whatever flow its quoted
//! header names, whoever sends it. Accepting `ct state related` without
//! asking whose flow that is let a sandbox on `none` send a
//! dest-unreachable quoting another profile's flow: it left masqueraded to
//! that flow's peer, with any payload after the quoted header; sent
//! towards another profile's sandbox it was injected there, and a "frag
//! needed" quoting one of the host's own flows set the host's path MTU.
//!
//! The owner is read from the flow itself: `ct original ip saddr` (for a
//! related packet, the original source of the flow it is related to) must
//! lie in the profile's own subnet. Chosen over a conntrack zone per
//! bridge: a zone set at prerouting by input interface would put a
//! sandbox's outgoing packets and the world's replies (which arrive on the
//! uplink) in different zones unless every reply path set the zone too,
//! and zones change how masquerade and the guards' `ct state` see every
//! flow on the host; matching the original source changes nothing but the
//! accepts. The subnet is the profile's, not a single sandbox's: siblings
//! of one profile share its policy, so one sibling quoting another's flow
//! gains nothing its profile does not already grant (it still cannot reach
//! another profile or the host's own flows).
//!
//! - `<p>-out` (the sandbox's packets, forwarded): established or related
//!   in the original direction of a flow from the profile's subnet passes;
//!   any other related packet is dropped (an error quoting someone else's
//!   flow), before the profile's own rules could accept it as new traffic.
//! - `<p>-in` (to the sandbox): related packets from any sandbox subnet
//!   are dropped first (no flow between two profiles' bridges exists: the
//!   `<q>-in` chains drop everything new, so such an error is always
//!   forged), then replies to the profile's own flows pass. The `forward`
//!   chain consults `<q>-in` before `<p>-out`, so this is where an
//!   injection from another bridge is seen.
//! - `<p>-host` (to the host itself): established or related passes only
//!   for flows whose original source is in the profile's subnet (the
//!   sandbox's own flows to its gateway, and the host's flows from its
//!   gateway address into the subnet); any other related packet is
//!   dropped before the kernel's ICMP handling sees it, so a sandbox never
//!   sets the host's PMTU or takes a redirect for a flow not its own.

use corral_sandbox_core::{Profile, ProfileSet};
use ipnet::IpNet;

use super::guard::subnets;
use super::model::{AddrFamily, CtDir, Match, RulePlan, SetKind, SetPlan, Verdict};

/// The shared interval set of every profile's IPv4 subnet.
pub const SANDBOXES4: &str = "sandboxes4";
/// IPv6 twin of [`SANDBOXES4`].
pub const SANDBOXES6: &str = "sandboxes6";

fn sandboxes_set(family: AddrFamily) -> &'static str {
    match family {
        AddrFamily::V4 => SANDBOXES4,
        AddrFamily::V6 => SANDBOXES6,
    }
}

/// The two shared sets of every profile's subnets.
pub(super) fn sets(profiles: &ProfileSet) -> Vec<SetPlan> {
    let nets: Vec<IpNet> = profiles.iter().flat_map(subnets).collect();
    [AddrFamily::V4, AddrFamily::V6]
        .into_iter()
        .map(|fam| {
            let ranges = nets
                .iter()
                .map(|n| super::model::AddrRange::from_net(*n))
                .filter(|r| r.family() == fam)
                .collect();
            SetPlan {
                name: sandboxes_set(fam).to_owned(),
                family: fam,
                kind: SetKind::Interval,
                elements: super::model::merge_ranges(ranges),
                timeout: None,
                size: None,
                pinned: false,
            }
        })
        .collect()
}

fn own(net: IpNet, dir: Option<CtDir>) -> RulePlan {
    let mut m = vec![Match::CtEstablishedRelated];
    m.extend(dir.map(Match::CtDirection));
    m.push(Match::CtOrigSaddrIn(net));
    RulePlan::counted(m, Verdict::Accept)
}

/// `ct state related` comes first: every packet of the chain meets the
/// drop and its drop-log twin, and `<p>-in`'s source-set lookup would
/// otherwise run twice for every reply before the state test fails.
fn foreign_related(p: &Profile, kind: &str, matches: Vec<Match>) -> Vec<RulePlan> {
    let mut m = vec![Match::CtRelated];
    m.extend(matches);
    super::droplog::tap(
        &p.name,
        kind,
        "foreign-related",
        vec![RulePlan::counted(m, Verdict::Drop)],
    )
}

/// The first rules of `<p>-out`: the profile's own flows, then related
/// packets of anyone else's dropped.
pub fn out_rules(p: &Profile) -> Vec<RulePlan> {
    let mut rules: Vec<RulePlan> = subnets(p)
        .into_iter()
        .map(|n| own(n, Some(CtDir::Original)))
        .collect();
    rules.extend(foreign_related(p, "out", vec![]));
    rules
}

/// The first rules of `<p>-in`: related packets from any sandbox subnet
/// dropped, then replies to the profile's own flows.
pub fn in_rules(p: &Profile) -> Vec<RulePlan> {
    let mut rules = Vec::new();
    for fam in super::build::families(p) {
        rules.extend(foreign_related(
            p,
            "in",
            vec![Match::SaddrInSet(fam, sandboxes_set(fam).to_owned())],
        ));
    }
    rules.extend(subnets(p).into_iter().map(|n| own(n, Some(CtDir::Reply))));
    rules
}

/// The first rules of `<p>-host`: flows between the host and the
/// profile's subnet, either direction; then any other related packet
/// dropped.
pub fn host_rules(p: &Profile) -> Vec<RulePlan> {
    let mut rules: Vec<RulePlan> = subnets(p).into_iter().map(|n| own(n, None)).collect();
    rules.extend(foreign_related(p, "host", vec![]));
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::dev_profile;

    #[test]
    fn every_accept_of_established_traffic_names_the_profiles_own_subnet() {
        let p = dev_profile();
        let nets = subnets(&p);
        for rules in [out_rules(&p), in_rules(&p), host_rules(&p)] {
            let accepts: Vec<&RulePlan> = rules
                .iter()
                .filter(|r| r.verdict == Verdict::Accept)
                .collect();
            assert_eq!(accepts.len(), nets.len());
            for r in accepts {
                assert!(
                    r.matches
                        .iter()
                        .any(|m| matches!(m, Match::CtOrigSaddrIn(n) if nets.contains(n)))
                );
            }
        }
    }

    #[test]
    fn inbound_related_from_a_sandbox_is_dropped_before_any_accept() {
        let p = dev_profile();
        let rules = in_rules(&p);
        let first_accept = rules
            .iter()
            .position(|r| r.verdict == Verdict::Accept)
            .unwrap();
        let drops = rules[..first_accept]
            .iter()
            .filter(|r| r.verdict == Verdict::Drop)
            .filter(|r| r.matches.contains(&Match::CtRelated))
            .count();
        assert!(drops >= 1);
    }

    #[test]
    fn every_foreign_related_drop_tests_the_state_before_anything_else() {
        let p = dev_profile();
        for rules in [out_rules(&p), in_rules(&p), host_rules(&p)] {
            for r in rules.iter().filter(|r| r.verdict != Verdict::Accept) {
                assert_eq!(r.matches.first(), Some(&Match::CtRelated), "{r:?}");
            }
        }
    }
}
