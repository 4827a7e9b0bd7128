//! A hostile authority for a name a profile lists, answering more records
//! than the profile's learned sets may hold (docs/security.md, "Learned
//! sets and the reserved list", class 4): one TCP answer carries them all,
//! through the profile's real gateway resolver, from the profile's own
//! sandbox.
//!
//! The drill's usual control (the lab before any rule) has no learned sets
//! to fill, so the control here is corral's own plan with the size taken
//! off the profile's learned sets: there the flood grows them past
//! `learned_max`. Under the plan they stop at `learned_max` and the address
//! learned before the flood is still there. Both halves load a ruleset of
//! their own, and the plan is loaded again at the end: the tables are
//! replaced whole, so the flood's elements never outlive the rows (the
//! rows that run afterwards learn afresh).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use corral_egress::nft::read_live;
use corral_egress::plan::{AddrFamily, HostPlan, SetKind};
use corral_gateway::probe::{query, query_tcp};
use corral_gateway::test_upstream::TestUpstream;
use corral_gateway::wire::{TYPE_A, TYPE_AAAA};
use corral_sandbox_core::{DnsPolicy, EgressMode, Profile};

use crate::dns::{allowed_name_entry, dns_sandbox};
use crate::lab::topology::SandboxNs;
use crate::lab::{Lab, LabGateways, Observed};
use crate::report::{DrillRow, Expect, judge};

/// How the rows' labels begin.
pub const PREFIX: &str = "learned sets class 4: ";

/// Records each flood answers past the profile's bound.
const PAST_THE_BOUND: u32 = 100;

/// The most records a flood answers: AAAA records take 28 bytes each in a
/// compressed answer, so 2,000 of them fit one 64 KiB TCP message. A
/// profile whose `learned_max` leaves no room past it gets no row (the
/// gateway lab's `gateway_bounds` proves the bound on a small set).
const MOST_RECORDS: u32 = 2_000;

/// Every add dnsmasq tries past the bound fails through libnftables' slow
/// error path (milliseconds each), so the flood's answer takes seconds.
const SLOW: Duration = Duration::from_secs(60);

/// The address each family learns before its flood: global space (a
/// reserved address would make the answer NXDOMAIN), never contacted.
fn early(family: AddrFamily) -> IpAddr {
    match family {
        AddrFamily::V4 => IpAddr::V4(Ipv4Addr::new(45, 1, 0, 1)),
        AddrFamily::V6 => IpAddr::V6(Ipv6Addr::new(0x2620, 0x4f, 0x8001, 0, 0, 0, 0, 1)),
    }
}

/// `n` distinct global addresses of `family`, none of them [`early`]'s;
/// only ever learned, never contacted.
fn flood(family: AddrFamily, n: u32) -> Vec<IpAddr> {
    (0..n)
        .map(|i| match family {
            AddrFamily::V4 => IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(45, 0, 0, 0)) + i)),
            AddrFamily::V6 => IpAddr::V6(Ipv6Addr::from(
                u128::from(Ipv6Addr::new(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0)) + u128::from(i) + 1,
            )),
        })
        .collect()
}

fn qtype(family: AddrFamily) -> u16 {
    match family {
        AddrFamily::V4 => TYPE_A,
        AddrFamily::V6 => TYPE_AAAA,
    }
}

/// The profile the rows run on: the first allowlist profile with a gateway
/// resolver, a name it lists, a sandbox, and room in one answer for more
/// records than its bound.
fn target(lab: &Lab) -> Option<(&Profile, &SandboxNs, String)> {
    lab.profiles.iter().find_map(|p| {
        if p.mode != EgressMode::Allowlist
            || p.dns != DnsPolicy::Gateway
            || p.learned_max.saturating_add(PAST_THE_BOUND) > MOST_RECORDS
        {
            return None;
        }
        let (name, ..) = allowed_name_entry(p)?;
        Some((p, dns_sandbox(lab, p.name.as_str())?, name))
    })
}

/// The profile's learned sets of `family` in `plan`.
fn learned_sets<'a>(plan: &'a HostPlan, p: &Profile, family: AddrFamily) -> Vec<&'a str> {
    let prefix = format!("{}-dns", p.name);
    plan.inet
        .sets
        .iter()
        .filter(|s| s.kind == SetKind::Dynamic && s.family == family && s.name.starts_with(&prefix))
        .map(|s| s.name.as_str())
        .collect()
}

/// The plan with the size taken off `p`'s learned sets: the rows' control.
fn unbounded(plan: &HostPlan, p: &Profile) -> HostPlan {
    let mut out = plan.clone();
    let prefix = format!("{}-dns", p.name);
    for s in &mut out.inet.sets {
        if s.kind == SetKind::Dynamic && s.name.starts_with(&prefix) {
            s.size = None;
        }
    }
    out
}

/// What one family's flood is judged on.
struct Flood<'a> {
    lab: &'a Lab,
    upstream: &'a TestUpstream,
    profile: &'a Profile,
    sb: &'a SandboxNs,
    name: &'a str,
    family: AddrFamily,
    timeout: Duration,
}

impl Flood<'_> {
    fn records(&self) -> u32 {
        self.profile.learned_max + PAST_THE_BOUND
    }

    /// Learns [`early`], then asks over TCP for the name answering
    /// [`Self::records`] addresses; landed when one of the profile's
    /// learned sets holds more than `learned_max` elements afterwards, or
    /// lost the early address.
    fn run(&self) -> Observed {
        let gw = SocketAddr::new(self.sb.gateway_v4.into(), 53);
        let qtype = qtype(self.family);
        let early = early(self.family);
        self.upstream.set(self.name, &[early], 3600);
        match self.sb.ns.run(|| query(gw, self.name, qtype, self.timeout)) {
            Ok(Ok(r)) if r.answers.iter().any(|a| a.addr == early) => {}
            Ok(r) => return Observed::Error(format!("learning the early address: {r:?}")),
            Err(e) => return Observed::Error(format!("cannot enter the sandbox: {e}")),
        }
        self.upstream
            .set(self.name, &flood(self.family, self.records()), 3600);
        let answered = match self.sb.ns.run(|| query_tcp(gw, self.name, qtype, SLOW)) {
            Ok(Ok(r)) => r.answers.len(),
            Ok(Err(e)) => return Observed::Error(format!("the flood over TCP: {e}")),
            Err(e) => return Observed::Error(format!("cannot enter the sandbox: {e}")),
        };
        let live = match self.lab.topo.host.run(read_live) {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => return Observed::Error(format!("reading the sets back: {e}")),
            Err(e) => return Observed::Error(format!("cannot enter the host: {e}")),
        };
        let names = learned_sets(&self.lab.plan, self.profile, self.family);
        let sets: Vec<_> = live
            .tables
            .iter()
            .flat_map(|t| &t.sets)
            .filter(|s| names.contains(&s.name.as_str()))
            .collect();
        let most = sets.iter().map(|s| s.elements.len()).max().unwrap_or(0);
        let kept = sets
            .iter()
            .any(|s| s.elements.iter().any(|r| r.start == early));
        let max = self.profile.learned_max as usize;
        if most > max || !kept {
            Observed::Connected
        } else {
            Observed::Rejected(format!(
                "{answered} records answered, at most {most} learned per set (bound {max}), \
                 the early address kept"
            ))
        }
    }
}

/// The rows (see the module docs): one per family the profile learns, the
/// plan in force again when this returns (or the rows say it could not be
/// put back).
pub(crate) fn rows(lab: &Lab, gateways: &LabGateways, timeout: Duration) -> Vec<DrillRow> {
    let Some((profile, sb, name)) = target(lab) else {
        return Vec::new();
    };
    let floods: Vec<Flood<'_>> = [AddrFamily::V4, AddrFamily::V6]
        .into_iter()
        .filter(|f| !learned_sets(&lab.plan, profile, *f).is_empty())
        .map(|family| Flood {
            lab,
            upstream: &gateways.upstream,
            profile,
            sb,
            name: &name,
            family,
            timeout,
        })
        .collect();
    let control: Vec<Observed> = match lab.load(&unbounded(&lab.plan, profile)) {
        Ok(()) => floods.iter().map(Flood::run).collect(),
        Err(e) => vec![Observed::Error(format!("control ruleset: {e}")); floods.len()],
    };
    let enforced: Vec<(Observed, u64)> = match lab.load(&lab.plan) {
        Ok(()) => floods
            .iter()
            .map(|f| {
                let start = Instant::now();
                let o = f.run();
                (
                    o,
                    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
                )
            })
            .collect(),
        Err(e) => vec![(Observed::Error(format!("loading the plan: {e}")), 0); floods.len()],
    };
    let restored = lab.load(&lab.plan);
    floods
        .iter()
        .zip(control)
        .zip(enforced)
        .map(|((f, c), (e, ms))| {
            let e = match &restored {
                Ok(()) => e,
                Err(err) => Observed::Error(format!("putting the plan back: {err}")),
            };
            DrillRow {
                probe: format!(
                    "{PREFIX}{} {} records for a listed name fill a learned set only to learned_max",
                    f.records(),
                    match f.family {
                        AddrFamily::V4 => "A",
                        AddrFamily::V6 => "AAAA",
                    }
                ),
                from: sb.name.clone(),
                to: format!("gateway {} ({name} over TCP)", sb.gateway_v4),
                expected: Expect::Block,
                verdict: judge(Expect::Block, &c, &e),
                observed: e,
                control: c,
                ms,
                packet: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flood_addresses_are_distinct_global_and_never_the_early_one() {
        for family in [AddrFamily::V4, AddrFamily::V6] {
            let v = flood(family, MOST_RECORDS);
            let set: std::collections::BTreeSet<_> = v.iter().collect();
            assert_eq!(set.len(), v.len());
            assert!(!set.contains(&early(family)));
            for ip in v.iter().chain([&early(family)]) {
                assert!(
                    corral_sandbox_core::reserved::is_global(*ip),
                    "{ip} is not global: the gateway would answer NXDOMAIN"
                );
            }
        }
    }
}
