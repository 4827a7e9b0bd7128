//! Would the plan let this flow start? What revocation asks of every
//! conntrack entry after an apply or refresh (an entry the new plan would
//! not accept is deleted): the verdict of [`HostPlan::trace`] (see
//! [`super::trace`] for what is walked), without the explanation.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Serialize;

use super::HostPlan;
use super::model::AddrRange;
use super::trace::TraceVerdict;

/// The original direction of a flow, as conntrack records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
pub type Learned = BTreeMap<String, Vec<LearnedAddr>>;

/// One element of a dynamic set: an address, and for a pinned set the
/// sandbox address it opens to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct LearnedAddr {
    /// The sandbox address that resolved it (pinned sets); `None`: open
    /// to every sandbox of the profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asker: Option<IpAddr>,
    /// The learned address.
    pub addr: AddrRange,
}

impl LearnedAddr {
    /// Whether this element lets `src` reach `dst`.
    pub fn admits(&self, src: IpAddr, dst: IpAddr) -> bool {
        self.asker.is_none_or(|a| a == src) && self.addr.contains(dst)
    }
}

impl From<AddrRange> for LearnedAddr {
    fn from(addr: AddrRange) -> Self {
        LearnedAddr { asker: None, addr }
    }
}

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
    /// Judges `flow` against this plan: the verdict of [`HostPlan::trace`].
    pub fn judge(&self, flow: &Flow, learned: &Learned) -> Judgement {
        let trace = self.trace(flow, learned);
        match (trace.verdict, trace.profile) {
            (TraceVerdict::Allow, Some(profile)) => Judgement::Accepted { profile },
            (TraceVerdict::Block, Some(profile)) => Judgement::Refused { profile },
            _ => Judgement::NotCorrals,
        }
    }
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
                AddrRange::single("198.51.100.99".parse().unwrap()).into(),
                AddrRange::single("169.254.169.254".parse().unwrap()).into(),
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
