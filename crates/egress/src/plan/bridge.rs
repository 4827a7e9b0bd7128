//! `table bridge corral`: what happens to frames between the ports of
//! corral's bridges.
//!
//! Chain `<p>-ports`: frames between two bridge ports carrying the
//! profile's addresses (IPv4/IPv6 source or destination in its subnets,
//! ARP for an address in its IPv4 subnet) dropped. Only port-to-port
//! frames reach the bridge forward hook (traffic to and from the host uses
//! the input/output hooks), so this never blocks a sandbox's own egress.
//! The kernels we run on lack `CONFIG_NFT_BRIDGE_META` (`meta ibrname`
//! fails with EOPNOTSUPP), so the bridge cannot be named in the rule: the
//! profile's subnets identify its frames instead. IPv6 link-local and
//! non-IP frames between ports are left to bridge-port isolation and, for
//! IP, to the inet forward chain (`bridge-nf-call-ip6tables = 1`).

use corral_sandbox_core::{Profile, ProfileSet};
use ipnet::IpNet;

use super::build::{base, chain};
use super::model::{ChainType, Hook, Match, RulePlan, TABLE_NAME, TableFamily, TablePlan, Verdict};
use super::names;

/// Build `table bridge corral`.
pub(super) fn table(profiles: &ProfileSet) -> TablePlan {
    let mut bridge = TablePlan {
        family: TableFamily::Bridge,
        name: TABLE_NAME.to_owned(),
        sets: Vec::new(),
        chains: Vec::new(),
    };
    let mut l2 = Vec::new();
    for p in profiles {
        bridge
            .chains
            .push(chain(&names::ports_chain(&p.name), p, port_rules(p)));
        l2.push(RulePlan::counted(
            vec![],
            Verdict::Jump(names::ports_chain(&p.name)),
        ));
    }
    bridge.chains.push(base(
        names::FORWARD,
        ChainType::Filter,
        Hook::Forward,
        0,
        l2,
    ));
    bridge
}

fn port_rules(p: &Profile) -> Vec<RulePlan> {
    let v4 = IpNet::V4(p.subnet_v4.trunc());
    let mut rules = vec![
        RulePlan::counted(vec![Match::SaddrIn(v4)], Verdict::Drop),
        RulePlan::counted(vec![Match::DaddrIn(v4)], Verdict::Drop),
        RulePlan::counted(vec![Match::ArpTargetIn(p.subnet_v4.trunc())], Verdict::Drop),
    ];
    if let Some(v6) = p.subnet_v6 {
        let v6 = IpNet::V6(v6.trunc());
        rules.push(RulePlan::counted(vec![Match::SaddrIn(v6)], Verdict::Drop));
        rules.push(RulePlan::counted(vec![Match::DaddrIn(v6)], Verdict::Drop));
    }
    rules
}
