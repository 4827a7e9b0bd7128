//! Would the plan let this flow start? The rules of a plan evaluated on
//! the original direction of a flow, as the kernel would evaluate its
//! first packet: what revocation asks of every conntrack entry after an
//! apply or refresh (an entry the new plan would not accept is deleted).
//!
//! Only what the first packet of a flow from a sandbox meets is modelled:
//! the owning profile by source subnet (a source in no profile subnet is
//! not corral's flow), sandbox-to-sandbox destinations (never accepted),
//! then `<p>-host` for a destination on the profile's gateway and
//! `<p>-out` for everything else. Set lookups use the plan's elements for
//! interval sets and `learned` (read back from the kernel) for the
//! gateway resolver's dynamic sets.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::model::{AddrFamily, AddrRange, ChainPlan, Match, RulePlan, SetKind, Verdict, to_u128};
use super::{HostPlan, names};

/// The original direction of a flow, as conntrack records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// IP protocol number (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, ...).
    pub protocol: u8,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Destination port (TCP, UDP, SCTP, ...); `None` for ICMP and others.
    pub dport: Option<u16>,
}

/// Elements of the dynamic sets, by set name (what the gateway resolver
/// has added and not yet expired).
pub type Learned = BTreeMap<String, Vec<AddrRange>>;

/// What the plan says about a flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// No profile subnet holds the source: not a sandbox's flow.
    NotCorrals,
    /// The profile's rules would let the flow start.
    Accepted {
        /// The profile.
        profile: String,
    },
    /// The profile's rules would block it.
    Refused {
        /// The profile.
        profile: String,
    },
}

impl HostPlan {
    /// Judges `flow` against this plan (see the module docs).
    pub fn judge(&self, flow: &Flow, learned: &Learned) -> Judgement {
        let owns = |b: &super::BridgePlan, a: IpAddr| match a {
            IpAddr::V4(v4) => b.gateway_v4.trunc().contains(&v4),
            IpAddr::V6(v6) => b.gateway_v6.is_some_and(|n| n.trunc().contains(&v6)),
        };
        let Some(bridge) = self.bridges.iter().find(|b| owns(b, flow.src)) else {
            return Judgement::NotCorrals;
        };
        let is_gateway = |a: IpAddr| {
            self.bridges.iter().any(|b| {
                IpAddr::V4(b.gateway_v4.addr()) == a
                    || b.gateway_v6.is_some_and(|n| IpAddr::V6(n.addr()) == a)
            })
        };
        if is_gateway(flow.src) {
            // The host itself, from its address on the bridge.
            return Judgement::NotCorrals;
        }
        let profile = bridge.profile.to_string();
        let gateway = is_gateway(flow.dst);
        let refused = || Judgement::Refused {
            profile: profile.clone(),
        };
        if !gateway && self.bridges.iter().any(|b| owns(b, flow.dst)) {
            return refused();
        }
        let chain = if gateway {
            names::host_chain(&bridge.profile)
        } else {
            names::out_chain(&bridge.profile)
        };
        let Some(chain) = self.inet.chains.iter().find(|c| c.name == chain) else {
            return refused();
        };
        if self.walk(chain, flow, learned) {
            Judgement::Accepted { profile }
        } else {
            refused()
        }
    }

    /// The verdict of the first rule of `chain` that matches (a chain
    /// without a matching terminal rule refuses: corral's chains end in a
    /// block or drop).
    fn walk(&self, chain: &ChainPlan, flow: &Flow, learned: &Learned) -> bool {
        for rule in &chain.rules {
            if !rule_matches(self, rule, flow, learned) {
                continue;
            }
            match rule.verdict {
                Verdict::Accept => return true,
                Verdict::Drop | Verdict::Reject(_) => return false,
                Verdict::Jump(_) | Verdict::Masquerade | Verdict::Return => {}
            }
        }
        false
    }
}

fn in_ranges(ranges: &[AddrRange], a: IpAddr) -> bool {
    ranges.iter().any(|r| {
        r.family() == AddrFamily::of(a)
            && to_u128(r.start) <= to_u128(a)
            && to_u128(a) <= to_u128(r.end)
    })
}

fn rule_matches(plan: &HostPlan, rule: &RulePlan, flow: &Flow, learned: &Learned) -> bool {
    let fam = AddrFamily::of(flow.dst);
    rule.matches.iter().all(|m| match m {
        // The first packet of a flow is new, in the original direction.
        Match::CtEstablishedRelated | Match::CtInvalid => false,
        Match::CtNew => true,
        // A new flow is under any per-source limit (the TCP/53 cap).
        Match::Meter { .. } => false,
        Match::CtDirection(d) => *d == super::model::CtDir::Original,
        Match::NfProto(f) => *f == fam,
        Match::L4Proto(p) => p.number() == flow.protocol,
        Match::Dport(r) => flow
            .dport
            .is_some_and(|p| (r.start()..=r.end()).contains(&p)),
        Match::DaddrInSet(f, name) => {
            *f == fam
                && match plan.set(name) {
                    Some(s) if s.kind == SetKind::Interval => in_ranges(&s.elements, flow.dst),
                    Some(_) => learned
                        .get(name)
                        .is_some_and(|els| in_ranges(els, flow.dst)),
                    None => false,
                }
        }
        Match::Daddr(a) => *a == flow.dst,
        Match::DaddrIn(n) => n.contains(&flow.dst),
        Match::SaddrIn(n) => n.contains(&flow.src),
        Match::SaddrNotIn(n) => {
            AddrFamily::of(n.addr()) == AddrFamily::of(flow.src) && !n.contains(&flow.src)
        }
        // Interface, type and ICMPv6 matches are not part of a flow's
        // tuple; corral's out and host chains use them only for neighbour
        // discovery, never for a flow worth keeping.
        Match::IifName(_)
        | Match::OifName(_)
        | Match::IifNameNot(_)
        | Match::OifNameNot(_)
        | Match::FibSaddrType(_)
        | Match::FibSaddrTypeNot(_)
        | Match::Icmpv6Type(_)
        | Match::ArpTargetIn(_) => false,
        // Bridge-family matches (frames, not flows) and source ports,
        // which a flow's tuple here does not carry.
        Match::ArpSenderIn(_)
        | Match::EtherType(_)
        | Match::Sport(_)
        | Match::InSet { .. }
        | Match::Bytes { .. } => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::sample_plan;

    fn flow(proto: u8, src: &str, dst: &str, dport: Option<u16>) -> Flow {
        Flow {
            protocol: proto,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            dport,
        }
    }

    fn accepted(j: &Judgement) -> bool {
        matches!(j, Judgement::Accepted { .. })
    }

    #[test]
    fn allowlist_classes_and_ports_hold() {
        let plan = sample_plan();
        let none = Learned::new();
        // dev: api.example.com:443/tcp resolved to 192.0.2.10.
        assert!(accepted(
            &plan.judge(&flow(6, "10.90.0.5", "192.0.2.10", Some(443)), &none)
        ));
        assert!(!accepted(
            &plan.judge(&flow(6, "10.90.0.5", "192.0.2.10", Some(80)), &none)
        ));
        assert!(!accepted(
            &plan.judge(&flow(17, "10.90.0.5", "192.0.2.10", Some(443)), &none)
        ));
        // 203.0.113.0/24 any port, 198.51.100.7:8000-8100 tcp and udp.
        assert!(accepted(
            &plan.judge(&flow(17, "10.90.0.5", "203.0.113.9", Some(9)), &none)
        ));
        assert!(accepted(&plan.judge(
            &flow(17, "10.90.0.5", "198.51.100.7", Some(8050)),
            &none
        )));
        assert!(!accepted(&plan.judge(
            &flow(6, "10.90.0.5", "198.51.100.7", Some(8101)),
            &none
        )));
        // DNS anywhere but the gateway: refused; to the gateway: accepted.
        assert!(!accepted(
            &plan.judge(&flow(17, "10.90.0.5", "203.0.113.9", Some(53)), &none)
        ));
        assert!(accepted(
            &plan.judge(&flow(17, "10.90.0.5", "10.90.0.1", Some(53)), &none)
        ));
        // Not corral's (also the host's own flows from its gateway address);
        // sandbox to sandbox.
        assert_eq!(
            plan.judge(&flow(6, "192.168.1.5", "192.0.2.10", Some(443)), &none),
            Judgement::NotCorrals
        );
        assert_eq!(
            plan.judge(&flow(1, "10.90.0.1", "10.90.0.5", None), &none),
            Judgement::NotCorrals
        );
        assert!(!accepted(
            &plan.judge(&flow(6, "10.90.0.5", "10.91.0.5", Some(443)), &none)
        ));
    }

    #[test]
    fn learned_elements_count_only_in_their_class_and_never_when_reserved() {
        let plan = sample_plan();
        let mut learned = Learned::new();
        let set = "dev-dns4-tcp-443".to_owned();
        assert!(
            plan.set(&set).is_some(),
            "{:?}",
            plan.inet.sets.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        learned.insert(
            set,
            vec![
                AddrRange::single("198.51.100.99".parse().unwrap()),
                AddrRange::single("169.254.169.254".parse().unwrap()),
            ],
        );
        assert!(accepted(&plan.judge(
            &flow(6, "10.90.0.5", "198.51.100.99", Some(443)),
            &learned
        )));
        assert!(!accepted(&plan.judge(
            &flow(6, "10.90.0.5", "198.51.100.99", Some(80)),
            &learned
        )));
        assert!(!accepted(&plan.judge(
            &flow(6, "10.90.0.5", "169.254.169.254", Some(443)),
            &learned
        )));
    }

    #[test]
    fn internet_refuses_reserved_and_none_refuses_all() {
        let plan = sample_plan();
        let none = Learned::new();
        assert!(accepted(
            &plan.judge(&flow(6, "10.91.0.5", "8.8.8.8", Some(443)), &none)
        ));
        assert!(!accepted(
            &plan.judge(&flow(6, "10.91.0.5", "100.64.0.1", Some(443)), &none)
        ));
        assert!(!accepted(
            &plan.judge(&flow(6, "10.92.0.5", "8.8.8.8", Some(443)), &none)
        ));
    }
}
