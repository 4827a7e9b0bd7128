//! The one evaluator of a plan: which rule of `table inet corral` decides
//! the first packet of a flow from a sandbox, walked through the same base
//! chains, jumps and returns the kernel follows.
//!
//! The walk: `prerouting` (→ `<p>-arrival` by source subnet, then
//! `<p>-guard` by interface); then, for a destination that is one of the
//! host's addresses on a profile bridge (a gateway), `input` (→
//! `<p>-host`), and for every other destination `forward` (→ `<q>-in` when
//! it leaves by a profile bridge, then `<p>-out`). A verdict map is
//! followed like the jump its element holds. An `accept` ends a base chain and the next hook goes on; a
//! drop or reject ends the walk; a base chain that ends without a verdict
//! takes its policy (`accept`).
//!
//! What the plan cannot know is fixed as for a sandbox's own packet: the
//! packet arrives on the profile's bridge, its source is a unicast address,
//! it is the first packet of a new flow in the original direction, no
//! per-source meter is over its limit, and it is no neighbour discovery.
//! The bridge table (which port may send which source) is not walked: it
//! judges who sent a frame, not where it may go. A destination that is one
//! of the host's other addresses is walked as forwarded (the plan knows
//! the host's networks, which `<p>-out` blocks, not its addresses).
//!
//! Set lookups use the plan's elements for interval sets and `learned`
//! (read back from the kernel) for the gateway resolver's dynamic sets; a
//! pinned set's element admits only the sandbox address it was learned for.
//! [`HostPlan::judge`](super::eval) is a projection of this walk.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use super::eval::{Flow, Learned};
use super::keyed::Field;
use super::model::{AddrFamily, AddrRange, AddrType, ChainPlan, Match, RulePlan, SetKind, Verdict};
use super::vmap::MapField;
use super::{BridgePlan, HostPlan, names, render};

/// What the walk ends in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceVerdict {
    /// The packet passes (a rule accepted it, or no rule stopped it).
    Allow,
    /// A rule drops or rejects it.
    Block,
    /// The source is in no profile subnet (or is the host's own address
    /// on a bridge): not a sandbox's packet, corral does not judge it.
    NotCorrals,
}

/// The rule that decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleHit {
    /// Chain of `table inet corral`.
    pub chain: String,
    /// Position of the rule in its chain (0-based, as the plan orders it).
    pub index: usize,
    /// The rule in `nft` syntax, as `nft list` prints it.
    pub nft: String,
}

/// The set element that made the deciding rule match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetHit {
    /// Set name.
    pub name: String,
    /// The element (an address or range) holding the destination.
    pub element: AddrRange,
    /// A dynamic set: the element was learned by the gateway resolver.
    pub learned: bool,
}

/// The walk of one flow through the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trace {
    /// The flow walked.
    pub flow: Flow,
    /// The profile whose bridge the packet arrives on.
    pub profile: Option<String>,
    /// The verdict.
    pub verdict: TraceVerdict,
    /// Chains entered, in order.
    pub path: Vec<String>,
    /// The deciding rule; `None` when a base chain's policy decided (or
    /// the flow is not corral's).
    pub rule: Option<RuleHit>,
    /// The set element the deciding rule matched, if it matched a set.
    pub set: Option<SetHit>,
    /// The allow entries of the profile behind an accepting set match, as
    /// the operator wrote them: the entries whose addresses hold the
    /// destination for a static set, the names whose answers fill it for
    /// a learned set.
    pub entries: Vec<String>,
}

/// The packet's situation the rules look at beyond its tuple.
struct Ctx<'a> {
    flow: &'a Flow,
    learned: &'a Learned,
    iif: &'a str,
    /// The profile bridge it leaves by (`None`: the uplink or the host).
    oif: Option<&'a str>,
}

enum Outcome {
    /// Fell off the chain or returned.
    Continue,
    /// Accept, drop or reject by this rule.
    Decided {
        accept: bool,
        hit: RuleHit,
        set: Option<SetHit>,
    },
}

impl HostPlan {
    /// Walks `flow` from the sandbox side (the profile is the one whose
    /// subnet holds the source).
    pub fn trace(&self, flow: &Flow, learned: &Learned) -> Trace {
        let owns = |b: &BridgePlan, a: IpAddr| match a {
            IpAddr::V4(v4) => b.gateway_v4.trunc().contains(&v4),
            IpAddr::V6(v6) => b.gateway_v6.is_some_and(|n| n.trunc().contains(&v6)),
        };
        match self.bridges.iter().find(|b| owns(b, flow.src)) {
            Some(b) if !self.is_gateway(flow.src) => self.walk_from(b, flow, learned),
            _ => Trace {
                flow: *flow,
                profile: None,
                verdict: TraceVerdict::NotCorrals,
                path: Vec::new(),
                rule: None,
                set: None,
                entries: Vec::new(),
            },
        }
    }

    /// Walks a packet of `protocol` to `dst` (`dport`) from a sandbox of
    /// `profile`, with the profile's first sandbox address of the
    /// destination's family as the source (the unspecified address when
    /// the profile has no subnet of that family). `None` when the plan has
    /// no such profile.
    pub fn trace_profile(
        &self,
        profile: &str,
        protocol: u8,
        dst: IpAddr,
        dport: Option<u16>,
        learned: &Learned,
    ) -> Option<Trace> {
        let bridge = self
            .bridges
            .iter()
            .find(|b| b.profile.as_str() == profile)?;
        let src = match dst {
            IpAddr::V4(_) => IpAddr::V4(next_v4(bridge.gateway_v4.addr())),
            IpAddr::V6(_) => bridge
                .gateway_v6
                .map_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED), |n| {
                    IpAddr::V6(Ipv6Addr::from(u128::from(n.addr()).wrapping_add(1)))
                }),
        };
        let flow = Flow {
            protocol,
            src,
            dst,
            dport,
        };
        Some(self.walk_from(bridge, &flow, learned))
    }

    /// Whether `a` is the host's address on a profile bridge.
    pub fn is_gateway(&self, a: IpAddr) -> bool {
        self.bridges.iter().any(|b| {
            IpAddr::V4(b.gateway_v4.addr()) == a
                || b.gateway_v6.is_some_and(|n| IpAddr::V6(n.addr()) == a)
        })
    }

    fn walk_from(&self, bridge: &BridgePlan, flow: &Flow, learned: &Learned) -> Trace {
        let local = self.is_gateway(flow.dst);
        let oif = if local {
            None
        } else {
            self.bridges
                .iter()
                .find(|b| match flow.dst {
                    IpAddr::V4(v4) => b.gateway_v4.trunc().contains(&v4),
                    IpAddr::V6(v6) => b.gateway_v6.is_some_and(|n| n.trunc().contains(&v6)),
                })
                .map(|b| b.name.as_str())
        };
        let ctx = Ctx {
            flow,
            learned,
            iif: bridge.name.as_str(),
            oif,
        };
        let mut trace = Trace {
            flow: *flow,
            profile: Some(bridge.profile.to_string()),
            verdict: TraceVerdict::Allow,
            path: Vec::new(),
            rule: None,
            set: None,
            entries: Vec::new(),
        };
        let hooks = [
            names::PREROUTING,
            if local { names::INPUT } else { names::FORWARD },
        ];
        for hook in hooks {
            let Some(chain) = self.chain(hook) else {
                continue;
            };
            match self.walk(chain, &ctx, &mut trace.path, 0) {
                Outcome::Continue => {}
                Outcome::Decided {
                    accept: true,
                    hit,
                    set,
                } => {
                    trace.rule = Some(hit);
                    trace.set = set;
                }
                Outcome::Decided {
                    accept: false,
                    hit,
                    set,
                } => {
                    trace.verdict = TraceVerdict::Block;
                    trace.rule = Some(hit);
                    trace.set = set;
                    return trace;
                }
            }
        }
        if let (Some(set), Some(profile)) = (&trace.set, &trace.profile) {
            trace.entries = self.entries_behind(profile, set, flow.dst);
        }
        trace
    }

    fn chain(&self, name: &str) -> Option<&ChainPlan> {
        self.inet.chains.iter().find(|c| c.name == name)
    }

    /// The first terminal verdict of `chain` (jumps followed; corral's
    /// chains jump at most two deep, `depth` bounds a malformed plan).
    fn walk(&self, chain: &ChainPlan, ctx: &Ctx<'_>, path: &mut Vec<String>, depth: u8) -> Outcome {
        path.push(chain.name.clone());
        for (index, rule) in chain.rules.iter().enumerate() {
            let Some(set) = self.rule_matches(rule, ctx) else {
                continue;
            };
            let hit = || RuleHit {
                chain: chain.name.clone(),
                index,
                nft: render::rule_text(rule),
            };
            match &rule.verdict {
                Verdict::Accept => {
                    return Outcome::Decided {
                        accept: true,
                        hit: hit(),
                        set,
                    };
                }
                Verdict::Drop | Verdict::Reject(_) => {
                    return Outcome::Decided {
                        accept: false,
                        hit: hit(),
                        set,
                    };
                }
                Verdict::Return => return Outcome::Continue,
                Verdict::Jump(target) => {
                    if let Some(next) = self.chain(target).filter(|_| depth < 8)
                        && let d @ Outcome::Decided { .. } = self.walk(next, ctx, path, depth + 1)
                    {
                        return d;
                    }
                }
                Verdict::Vmap { field, map } => {
                    // One lookup, then exactly a jump (or the next rule when
                    // the map holds nothing for the packet).
                    if let Some(next) = self
                        .map_target(*field, map, ctx)
                        .and_then(|t| self.chain(t))
                        .filter(|_| depth < 8)
                        && let d @ Outcome::Decided { .. } = self.walk(next, ctx, path, depth + 1)
                    {
                        return sunk(d, &next.name, hit, set);
                    }
                }
                Verdict::Masquerade => {}
            }
        }
        Outcome::Continue
    }

    /// The chain verdict map `map` sends the packet to.
    fn map_target(&self, field: MapField, map: &str, ctx: &Ctx<'_>) -> Option<&str> {
        let map = self.inet.maps.iter().find(|m| m.name == map)?;
        match field {
            MapField::IifName => map.chain_for_name(ctx.iif),
            MapField::OifName => map.chain_for_name(ctx.oif?),
            MapField::Saddr(f) => (AddrFamily::of(ctx.flow.src) == f)
                .then(|| map.chain_for_addr(ctx.flow.src))
                .flatten(),
            MapField::Daddr(f) => (AddrFamily::of(ctx.flow.dst) == f)
                .then(|| map.chain_for_addr(ctx.flow.dst))
                .flatten(),
            // ARP is a frame, not a flow: no flow is an ARP packet.
            MapField::ArpSaddr | MapField::ArpDaddr => None,
        }
    }

    /// `Some` when every match of `rule` holds, with the set element a
    /// set match found (`Some(None)` when the rule matched no set).
    #[allow(clippy::option_option)]
    fn rule_matches(&self, rule: &RulePlan, ctx: &Ctx<'_>) -> Option<Option<SetHit>> {
        let flow = ctx.flow;
        let fam = AddrFamily::of(flow.dst);
        let mut hit = None;
        for m in &rule.matches {
            let holds = match m {
                // The first packet of a flow is new, in the original direction.
                Match::CtEstablishedRelated | Match::CtInvalid | Match::CtRelated => false,
                Match::CtNew => true,
                // A new flow's original source is the packet's own.
                Match::CtOrigSaddrIn(n) => n.contains(&flow.src),
                // The first packet of a TCP flow is a SYN.
                Match::TcpNotSyn => false,
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
                        && match self.set_element(name, flow.src, flow.dst, ctx.learned) {
                            Some(h) => {
                                hit = Some(h);
                                true
                            }
                            None => false,
                        }
                }
                Match::SaddrInSet(f, name) => {
                    AddrFamily::of(flow.src) == *f
                        && self
                            .set_element(name, flow.src, flow.src, ctx.learned)
                            .is_some()
                }
                // corral stamps every bridge it plans with its group, and a
                // traced flow enters by a planned bridge or the uplink.
                Match::IifGroup(g) => {
                    *g == super::fail_closed::STAMP_GROUP && self.is_bridge(ctx.iif)
                }
                Match::OifGroup(g) => {
                    *g == super::fail_closed::STAMP_GROUP
                        && ctx.oif.is_some_and(|o| self.is_bridge(o))
                }
                Match::Daddr(a) => *a == flow.dst,
                Match::DaddrIn(n) => n.contains(&flow.dst),
                Match::SaddrIn(n) => n.contains(&flow.src),
                Match::SaddrNotIn(n) => {
                    AddrFamily::of(n.addr()) == AddrFamily::of(flow.src) && !n.contains(&flow.src)
                }
                Match::IifName(i) => i == ctx.iif,
                Match::IifNameNot(i) => i != ctx.iif,
                Match::OifName(o) => ctx.oif == Some(o.as_str()),
                Match::OifNameNot(o) => ctx.oif != Some(o.as_str()),
                // A sandbox's own address is a unicast one.
                Match::FibSaddrType(t) => *t == AddrType::Unicast,
                Match::FibSaddrTypeNot(t) => *t != AddrType::Unicast,
                // Neighbour discovery and ARP are not flows worth explaining.
                Match::Icmpv6Type(_) | Match::ArpTargetIn(_) => false,
                // A pinned learned set; any other keyed lookup is a
                // bridge-family frame check, below.
                Match::InSet {
                    fields,
                    set,
                    negate: false,
                } => match self.pinned_lookup(fields, set, flow, ctx.learned) {
                    Some(h) => {
                        hit = Some(h);
                        true
                    }
                    None => false,
                },
                // Bridge-family matches (frames, not flows) and source ports,
                // which a flow's tuple here does not carry.
                Match::ArpSenderIn(_)
                | Match::EtherType(_)
                | Match::Sport(_)
                | Match::InSet { .. }
                | Match::Bytes { .. }
                | Match::BitsSet { .. }
                | Match::Ip6Fragment => false,
            };
            if !holds {
                return None;
            }
        }
        Some(hit)
    }

    fn is_bridge(&self, name: &str) -> bool {
        self.bridges.iter().any(|b| b.name.as_str() == name)
    }

    /// The element of set `name` holding `dst`: the plan's elements for an
    /// interval set, `learned` for a dynamic one (for a pinned set, only an
    /// element learned for `src`).
    fn set_element(
        &self,
        name: &str,
        src: IpAddr,
        dst: IpAddr,
        learned: &Learned,
    ) -> Option<SetHit> {
        let set = self.set(name)?;
        let element = match set.kind {
            SetKind::Interval => *set.elements.iter().find(|r| in_range(r, dst))?,
            SetKind::Dynamic => {
                learned
                    .get(name)?
                    .iter()
                    .find(|e| e.addr.contains(dst) && (!set.pinned || e.asker == Some(src)))?
                    .addr
            }
        };
        Some(SetHit {
            name: name.to_owned(),
            element,
            learned: set.kind == SetKind::Dynamic,
        })
    }

    /// `ip saddr . ip daddr @set` on a pinned learned set (the only keyed
    /// lookup a flow's tuple answers): the element learned for this source.
    fn pinned_lookup(
        &self,
        fields: &[Field],
        name: &str,
        flow: &Flow,
        learned: &Learned,
    ) -> Option<SetHit> {
        let fam = AddrFamily::of(flow.dst);
        if fields != [Field::IpSaddr(fam), Field::IpDaddr(fam)]
            || !self.set(name).is_some_and(|s| s.pinned)
        {
            return None;
        }
        self.set_element(name, flow.src, flow.dst, learned)
    }

    /// The allow entries of `profile` behind a set hit (see [`Trace::entries`]).
    fn entries_behind(&self, profile: &str, set: &SetHit, dst: IpAddr) -> Vec<String> {
        self.origins
            .iter()
            .filter(|o| o.profile == profile)
            .filter(|o| {
                if set.learned {
                    o.learned_sets.contains(&set.name)
                } else {
                    o.sets.contains(&set.name) && o.addresses.iter().any(|r| in_range(r, dst))
                }
            })
            .map(|o| o.entry.clone())
            .collect()
    }
}

fn in_range(r: &AddrRange, a: IpAddr) -> bool {
    r.contains(a)
}

fn next_v4(a: Ipv4Addr) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(a).wrapping_add(1))
}
/// A verdict a profile's block sink reached was decided by the shared
/// rule that sent the packet there: that rule (and its set) is the hit.
fn sunk(d: Outcome, sink: &str, hit: impl FnOnce() -> RuleHit, set: Option<SetHit>) -> Outcome {
    match d {
        Outcome::Decided { accept, .. } if names::is_sink(sink) => Outcome::Decided {
            accept,
            hit: hit(),
            set,
        },
        d => d,
    }
}
