//! From profiles and resolved addresses to the two corral tables.
//!
//! Per profile (the source, arrival, direction and host-input rules are
//! in [`super::guard`], the reserved lists in [`super::reserved`]):
//! - `inet corral`, chain `<p>-out` (sandbox → world): established/related
//!   accept in the original direction of the profile's own flows, related
//!   packets of other flows dropped (see [`super::owner`]); DNS to anything blocked (the
//!   gateway resolver is reached via input); the deny lists (host-wide and
//!   the profile's) blocked; then by mode:
//!   - `internet`: reserved ranges and the host's own networks blocked,
//!     everything else accepted (IPv6 only with an IPv6 subnet);
//!   - `allowlist`: the operator's CIDR entries and the names resolved at
//!     apply (one interval set per (protocol, ports) class), then reserved
//!     ranges and host networks blocked, then the addresses the gateway
//!     resolver learned (one dynamic set per class, so a name's port limit
//!     holds);
//!   - `none`: nothing;
//!
//!   then the profile's block action.
//! - `<p>-in` (world → sandbox): replies only; the base chain jumps here
//!   *before* any `<p>-out`, so traffic between two corral bridges (or two
//!   ports of one bridge, when bridged traffic reaches the inet hooks) is
//!   dropped unless it is a reply.
//! - `<p>-nat` (nat): masquerade the profile's subnets leaving by any
//!   interface but their own bridge (or only by the uplink, when set).
//! - `<p>-arrival`: the profile's sources arriving anywhere but its bridge.
//!
//! The base chains reach these through verdict maps (see
//! [`super::vmap`]): `prerouting` by source subnet (→ `<p>-arrival`) and
//! input interface (→ `shared_guard`, which reaches `<p>-guard` by the
//! same interface), `forward` by output interface (→
//! `<p>-in`) then input interface (→ `<p>-out`), `input` by input
//! interface (→ `<p>-host`), `postrouting` by source subnet (→ `<p>-nat`).
//! - `bridge corral`: see [`super::bridge`].
//!
//! Every rule carries a counter. No rule depends on an address count: all
//! addresses live in set elements.

use std::collections::BTreeSet;
use std::net::IpAddr;

use corral_sandbox_core::{
    AllowTarget, BlockAction, DnsPolicy, EgressMode, PortRange, Profile, ProfileSet, Protocol,
};
use ipnet::IpNet;

use super::keyed::Field;
use super::model::{
    AddrFamily, AddrRange, BaseChain, ChainPlan, ChainType, Hook, L4Proto, Match, RejectKind,
    RulePlan, SetKind, SetPlan, TABLE_NAME, TableFamily, TablePlan, Verdict, merge_ranges,
};
use super::names;
use super::reserved::{self, RESERVED_V4, RESERVED_V6};
use super::vmap::{self, MapField, MapKey, MapKeyValue, VmapPlan};
use super::{PlanError, PlanSettings};
use super::{fail_closed, guard};
use crate::resolve::Resolution;

/// Priority of the prerouting guard: after conntrack (-200), so `ct state`
/// is known, and before destination NAT (-100), so sources are seen as sent.
pub const GUARD_PRIORITY: i32 = -150;

/// A (protocol, ports) class of allow entries; one set per class and family.
type Class = (Option<Protocol>, Option<PortRange>);

/// Build both tables.
pub(super) fn tables(
    profiles: &ProfileSet,
    settings: &PlanSettings,
    resolution: &Resolution,
) -> Result<(TablePlan, TablePlan), PlanError> {
    let mut inet = TablePlan {
        family: TableFamily::Inet,
        name: TABLE_NAME.to_owned(),
        sets: Vec::new(),
        keyed_sets: Vec::new(),
        maps: Vec::new(),
        chains: Vec::new(),
    };

    if !profiles.is_empty() {
        inet.sets
            .push(interval_set(names::RESERVED4, AddrFamily::V4, &RESERVED_V4));
        inet.sets
            .push(interval_set(names::RESERVED6, AddrFamily::V6, &RESERVED_V6));
        for (name, fam) in [
            (names::HOSTNET4, AddrFamily::V4),
            (names::HOSTNET6, AddrFamily::V6),
        ] {
            inet.sets.push(nets_set(
                name,
                fam,
                settings.host_networks.as_deref().unwrap_or_default(),
            ));
        }
        inet.sets.extend(super::owner::sets(profiles));
    }

    // One verdict map per dispatch (see `super::vmap`): the base chains'
    // cost does not grow with the number of profiles.
    let mut guard_map = VmapPlan::new(vmap::GUARD_BY_IIF, MapKey::IfName);
    let mut shared_guard_map = VmapPlan::new(vmap::SHARED_GUARD_BY_IIF, MapKey::IfName);
    let mut blocked_map = VmapPlan::new(vmap::BLOCKED_BY_IIF, MapKey::IfName);
    let mut suppressed_map = VmapPlan::new(vmap::SUPPRESSED_BY_IIF, MapKey::IfName);
    let mut in_map = VmapPlan::new(vmap::IN_BY_OIF, MapKey::IfName);
    let mut out_map = VmapPlan::new(vmap::OUT_BY_IIF, MapKey::IfName);
    let mut host_map = VmapPlan::new(vmap::HOST_BY_IIF, MapKey::IfName);
    let by_saddr = |name: fn(AddrFamily) -> &'static str| {
        [AddrFamily::V4, AddrFamily::V6].map(|f| VmapPlan::new(name(f), MapKey::Addr(f)))
    };
    let mut arrival_maps = by_saddr(vmap::arrival_by_saddr);
    let mut nat_maps = by_saddr(vmap::nat_by_saddr);
    let mut input = Vec::new();

    for p in profiles {
        let br = p.bridge.to_string();
        let (sets, out_rules) = out_chain(p, settings, resolution)?;
        inet.sets.extend(sets);
        inet.chains.push(chain(
            &names::guard_chain(&p.name),
            p,
            guard::guard_rules(p),
        ));
        for (name, rules) in guard::sink_chains(p) {
            inet.chains.push(chain(&name, p, rules));
        }
        inet.keyed_sets.extend(super::gateway_guard::sets(p));
        inet.keyed_sets.push(super::droplog::meter_plan(&p.name));
        inet.keyed_sets.extend(super::flow_limits::sets(p));
        inet.chains.extend(super::flow_limits::chains(p));
        inet.chains
            .push(chain(&names::out_chain(&p.name), p, out_rules));
        inet.chains
            .push(chain(&names::in_chain(&p.name), p, guard::in_rules(p)));
        inet.chains
            .push(chain(&names::host_chain(&p.name), p, guard::host_rules(p)));
        inet.chains.push(chain(
            &names::arrival_chain(&p.name),
            p,
            guard::arrival_rules(p),
        ));

        let iface = || MapKeyValue::IfName(br.clone());
        guard_map.push(iface(), names::guard_chain(&p.name));
        shared_guard_map.push(iface(), names::SHARED_GUARD.to_owned());
        blocked_map.push(iface(), names::blocked_chain(&p.name));
        suppressed_map.push(iface(), names::suppressed_chain(&p.name));
        in_map.push(iface(), names::in_chain(&p.name));
        out_map.push(iface(), names::out_chain(&p.name));
        host_map.push(iface(), names::host_chain(&p.name));
        let mut nat = Vec::new();
        for net in guard::subnets(p) {
            let fam = AddrFamily::of(net.addr());
            let i = usize::from(fam == AddrFamily::V6);
            let range = MapKeyValue::Range(AddrRange::from_net(net));
            arrival_maps[i].push(range.clone(), names::arrival_chain(&p.name));
            if p.mode != EgressMode::None {
                let leaving = match &settings.uplink {
                    Some(uplink) => Match::OifName(uplink.clone()),
                    None => Match::OifNameNot(br.clone()),
                };
                nat.push(RulePlan::counted(
                    vec![Match::SaddrIn(net), leaving],
                    Verdict::Masquerade,
                ));
                nat_maps[i].push(range, names::nat_chain(&p.name));
            }
        }
        if !nat.is_empty() {
            inet.chains.push(chain(&names::nat_chain(&p.name), p, nat));
        }
    }
    let mut prerouting = Vec::new();
    for m in &arrival_maps {
        prerouting.extend(dispatch(m, MapField::Saddr(family_of(m))));
    }
    prerouting.extend(dispatch(&shared_guard_map, MapField::IifName));
    if !profiles.is_empty() {
        inet.chains.push(ChainPlan {
            name: names::SHARED_GUARD.to_owned(),
            base: None,
            profile: None,
            rules: guard::shared_guard_rules(),
        });
        inet.keyed_sets.push(super::droplog::shared_meter_plan());
    }
    prerouting.extend(fail_closed::prerouting_tail());
    input.extend(dispatch(&host_map, MapField::IifName));
    input.extend(fail_closed::iif_tail());
    let mut nat = Vec::new();
    for m in &nat_maps {
        nat.extend(dispatch(m, MapField::Saddr(family_of(m))));
    }

    let mut forward = Vec::new();
    if let Some(mp) = &settings.multipass_bridge {
        let mp = mp.to_string();
        forward.push(RulePlan::counted(
            vec![Match::IifName(mp.clone())],
            Verdict::Drop,
        ));
        forward.push(RulePlan::counted(
            vec![Match::OifName(mp.clone())],
            Verdict::Drop,
        ));
        inet.chains.push(ChainPlan {
            name: names::MULTIPASS_HOST.to_owned(),
            base: None,
            profile: None,
            rules: guard::multipass_host_rules(),
        });
        input.insert(
            0,
            RulePlan::counted(
                vec![Match::IifName(mp)],
                Verdict::Jump(names::MULTIPASS_HOST.to_owned()),
            ),
        );
    }
    forward.extend(dispatch(&in_map, MapField::OifName));
    forward.extend(fail_closed::forward_middle());
    forward.extend(dispatch(&out_map, MapField::IifName));
    forward.extend(fail_closed::iif_tail());
    inet.sets
        .extend(fail_closed::retired_sets(&settings.retired));
    inet.keyed_sets
        .push(fail_closed::cut_ports_set(&settings.cut_ports));
    inet.maps = [
        guard_map,
        shared_guard_map,
        blocked_map,
        suppressed_map,
        in_map,
        out_map,
        host_map,
    ]
    .into_iter()
    .chain(arrival_maps)
    .chain(nat_maps)
    .filter(|m| !m.elements.is_empty())
    .map(|mut m| {
        m.elements.sort();
        m
    })
    .collect();

    {
        inet.chains.push(base(
            names::PREROUTING,
            ChainType::Filter,
            Hook::Prerouting,
            GUARD_PRIORITY,
            prerouting,
        ));
    }
    inet.chains.push(base(
        names::FORWARD,
        ChainType::Filter,
        Hook::Forward,
        0,
        forward,
    ));
    inet.chains
        .push(base(names::INPUT, ChainType::Filter, Hook::Input, 0, input));
    inet.chains.push(base(
        names::POSTROUTING,
        ChainType::Nat,
        Hook::Postrouting,
        100,
        nat,
    ));
    Ok((
        inet,
        super::bridge::table(profiles, &[], &settings.cut_ports),
    ))
}

/// `FIELD vmap @map`, when the map has elements (an empty map would
/// only cost a lookup).
fn dispatch(map: &VmapPlan, field: MapField) -> Option<RulePlan> {
    (!map.elements.is_empty()).then(|| {
        RulePlan::counted(
            vec![],
            Verdict::Vmap {
                field,
                map: map.name.clone(),
            },
        )
    })
}

fn family_of(map: &VmapPlan) -> AddrFamily {
    match map.key {
        MapKey::Addr(f) => f,
        MapKey::IfName => AddrFamily::V4,
    }
}

pub(super) fn chain(name: &str, profile: &Profile, rules: Vec<RulePlan>) -> ChainPlan {
    ChainPlan {
        name: name.to_owned(),
        base: None,
        profile: Some(profile.name.to_string()),
        rules,
    }
}

pub(super) fn base(
    name: &str,
    kind: ChainType,
    hook: Hook,
    priority: i32,
    rules: Vec<RulePlan>,
) -> ChainPlan {
    ChainPlan {
        name: name.to_owned(),
        base: Some(BaseChain {
            kind,
            hook,
            priority,
        }),
        profile: None,
        rules,
    }
}

fn interval_set(name: &str, family: AddrFamily, nets: &[&str]) -> SetPlan {
    let nets: Vec<IpNet> = nets.iter().filter_map(|n| n.parse().ok()).collect();
    nets_set(name, family, &nets)
}

/// An interval set of the `family` members of `nets`.
fn nets_set(name: &str, family: AddrFamily, nets: &[IpNet]) -> SetPlan {
    let ranges = nets
        .iter()
        .map(|n| AddrRange::from_net(*n))
        .filter(|r| r.family() == family)
        .collect();
    SetPlan {
        name: name.to_owned(),
        family,
        kind: SetKind::Interval,
        elements: merge_ranges(ranges),
        timeout: None,
        size: None,
        pinned: false,
    }
}

/// Rules blocking what `matches` select, by the profile's block action.
/// Reject answers TCP with a reset and everything else with ICMP(v6)
/// administratively prohibited, so probes fail fast.
pub(super) fn block(matches: Vec<Match>, action: BlockAction) -> Vec<RulePlan> {
    if action == BlockAction::Drop {
        return vec![RulePlan::counted(matches, Verdict::Drop)];
    }
    let proto = matches.iter().find_map(|m| match m {
        Match::L4Proto(p) => Some(*p),
        _ => None,
    });
    match proto {
        Some(L4Proto::Tcp) => vec![RulePlan::counted(
            matches,
            Verdict::Reject(RejectKind::TcpReset),
        )],
        Some(_) => vec![RulePlan::counted(
            matches,
            Verdict::Reject(RejectKind::IcmpxAdminProhibited),
        )],
        None => {
            let mut tcp = matches.clone();
            tcp.push(Match::L4Proto(L4Proto::Tcp));
            vec![
                RulePlan::counted(tcp, Verdict::Reject(RejectKind::TcpReset)),
                RulePlan::counted(matches, Verdict::Reject(RejectKind::IcmpxAdminProhibited)),
            ]
        }
    }
}

/// Matches selecting one class: protocol then ports. A class with ports but
/// no protocol expands to a TCP and a UDP variant.
fn class_matches(class: Class) -> Vec<Vec<Match>> {
    let l4 = |p: Protocol| match p {
        Protocol::Tcp => L4Proto::Tcp,
        Protocol::Udp => L4Proto::Udp,
    };
    match class {
        (None, None) => vec![vec![]],
        (Some(p), None) => vec![vec![Match::L4Proto(l4(p))]],
        (Some(p), Some(r)) => vec![vec![Match::L4Proto(l4(p)), Match::Dport(r)]],
        (None, Some(r)) => vec![
            vec![Match::L4Proto(L4Proto::Tcp), Match::Dport(r)],
            vec![Match::L4Proto(L4Proto::Udp), Match::Dport(r)],
        ],
    }
}

pub(super) fn families(p: &Profile) -> Vec<AddrFamily> {
    let mut f = vec![AddrFamily::V4];
    if p.subnet_v6.is_some() {
        f.push(AddrFamily::V6);
    }
    f
}

fn out_chain(
    p: &Profile,
    settings: &PlanSettings,
    resolution: &Resolution,
) -> Result<(Vec<SetPlan>, Vec<RulePlan>), PlanError> {
    let mut sets = Vec::new();
    let mut rules = super::owner::out_rules(p);
    rules.extend(super::flow_limits::out_rules(p));
    for proto in [L4Proto::Udp, L4Proto::Tcp] {
        rules.extend(out_tap(
            p,
            "dns",
            block(
                vec![Match::L4Proto(proto), Match::Dport(dns_port())],
                p.block,
            ),
        ));
    }
    let deny: Vec<IpNet> = settings.deny.iter().chain(&p.deny).copied().collect();
    for fam in [AddrFamily::V4, AddrFamily::V6] {
        let set = nets_set(&names::deny_set(&p.name, fam), fam, &deny);
        if !set.elements.is_empty() {
            rules.extend(out_tap(
                p,
                "denied",
                block(vec![Match::DaddrInSet(fam, set.name.clone())], p.block),
            ));
            sets.push(set);
        }
    }
    match p.mode {
        EgressMode::None => {}
        EgressMode::Internet => {
            rules.extend(refuse_reserved(p));
            rules.push(RulePlan::counted(
                vec![Match::NfProto(AddrFamily::V4)],
                Verdict::Accept,
            ));
            if p.subnet_v6.is_some() {
                rules.push(RulePlan::counted(
                    vec![Match::NfProto(AddrFamily::V6)],
                    Verdict::Accept,
                ));
            }
        }
        EgressMode::Allowlist => {
            let (s, r) = allowlist(p, settings, resolution, &deny)?;
            sets.extend(s);
            rules.extend(r);
        }
    }
    rules.extend(out_tap(p, "unlisted", block(vec![], p.block)));
    Ok((sets, rules))
}

/// `rules` of `<p>-out`, logged under `word` (see [`super::droplog`]).
fn out_tap(p: &Profile, word: &str, rules: Vec<RulePlan>) -> Vec<RulePlan> {
    super::droplog::tap(&p.name, "out", word, rules)
}

/// Reserved ranges and the host's own networks, blocked (both families:
/// a profile without IPv6 never gets here with IPv6, the guard dropped it).
fn refuse_reserved(p: &Profile) -> Vec<RulePlan> {
    let mut rules = Vec::new();
    for fam in families(p) {
        let (reserved, hostnet) = match fam {
            AddrFamily::V4 => (names::RESERVED4, names::HOSTNET4),
            AddrFamily::V6 => (names::RESERVED6, names::HOSTNET6),
        };
        for (set, word) in [(reserved, "reserved"), (hostnet, "hostnet")] {
            rules.extend(out_tap(
                p,
                word,
                block(vec![Match::DaddrInSet(fam, set.to_owned())], p.block),
            ));
        }
    }
    rules
}

fn dns_port() -> PortRange {
    // 53 is a valid, non-zero port: `single` cannot fail here.
    PortRange::single(53).unwrap_or_else(|_| unreachable!("53 is a valid port"))
}

/// Accept rules for `set` (one per family member of the class).
fn class_accepts(fam: AddrFamily, set: &str, class: Class) -> Vec<RulePlan> {
    class_accepts_keyed(Match::DaddrInSet(fam, set.to_owned()), class)
}

/// The accepts of `class` behind the set lookup `lookup`.
fn class_accepts_keyed(lookup: Match, class: Class) -> Vec<RulePlan> {
    class_matches(class)
        .into_iter()
        .map(|ms| {
            let mut m = vec![lookup.clone()];
            m.extend(ms);
            RulePlan::counted(m, Verdict::Accept)
        })
        .collect()
}

/// Sets and rules of an allowlist profile: static accepts, reserved and
/// host networks refused, learned accepts (see the module docs).
fn allowlist(
    p: &Profile,
    settings: &PlanSettings,
    resolution: &Resolution,
    deny: &[IpNet],
) -> Result<(Vec<SetPlan>, Vec<RulePlan>), PlanError> {
    // Classes in a stable order, each with its ranges per family.
    let mut classes: Vec<(Class, Vec<AddrRange>)> = Vec::new();
    let mut dns_classes: BTreeSet<Class> = BTreeSet::new();
    for entry in &p.allow {
        let class: Class = (entry.protocol, entry.ports);
        let ranges: Vec<AddrRange> = match &entry.target {
            AllowTarget::Net(net) => vec![AddrRange::from_net(*net)],
            AllowTarget::Host(host) => {
                dns_classes.insert(class);
                let addrs = resolution.get(host).ok_or_else(|| PlanError::NotResolved {
                    profile: p.name.to_string(),
                    host: host.to_string(),
                })?;
                if addrs.is_empty() && !p.allow_unresolved {
                    return Err(PlanError::Unresolved {
                        profile: p.name.to_string(),
                        host: host.to_string(),
                    });
                }
                for a in addrs {
                    if let Some(why) = reserved::refusal(
                        *a,
                        settings.host_networks.as_deref().unwrap_or_default(),
                        deny,
                    ) {
                        return Err(PlanError::Refused {
                            profile: p.name.to_string(),
                            host: host.to_string(),
                            refused: format!("{a}, which corral refuses: {why}"),
                        });
                    }
                }
                addrs
                    .iter()
                    .map(|a: &IpAddr| AddrRange::single(*a))
                    .collect()
            }
            AllowTarget::Wildcard(_) => {
                dns_classes.insert(class);
                continue;
            }
        };
        match classes.iter_mut().find(|(c, _)| *c == class) {
            Some((_, rs)) => rs.extend(ranges),
            None => classes.push((class, ranges)),
        }
    }
    classes.sort_by_key(|(c, _)| *c);
    // A name the operator approves opens to the asker on every port: the
    // learned set of the class without a protocol or ports.
    if p.approvals != corral_sandbox_core::Approvals::Off {
        dns_classes.insert((None, None));
    }

    let mut sets = Vec::new();
    let mut rules = Vec::new();
    for (class, ranges) in classes {
        for fam in families(p) {
            let name = names::allow_set(&p.name, fam, class.0, class.1);
            let mine = ranges
                .iter()
                .copied()
                .filter(|r| r.family() == fam)
                .collect();
            rules.extend(class_accepts(fam, &name, class));
            sets.push(SetPlan {
                name,
                family: fam,
                kind: SetKind::Interval,
                elements: merge_ranges(mine),
                timeout: None,
                size: None,
                pinned: false,
            });
        }
    }
    rules.extend(refuse_reserved(p));
    if p.dns.resolves() {
        // corral's resolver knows which sandbox asked; dnsmasq's nftset
        // adds the address alone.
        let pinned = p.dns == DnsPolicy::Corral;
        for class in &dns_classes {
            for fam in families(p) {
                let name = names::dns_set(&p.name, fam, class.0, class.1);
                let lookup = if pinned {
                    Match::InSet {
                        fields: vec![Field::IpSaddr(fam), Field::IpDaddr(fam)],
                        set: name.clone(),
                        negate: false,
                    }
                } else {
                    Match::DaddrInSet(fam, name.clone())
                };
                rules.extend(class_accepts_keyed(lookup, *class));
                sets.push(SetPlan {
                    name,
                    family: fam,
                    kind: SetKind::Dynamic,
                    elements: Vec::new(),
                    timeout: Some(super::DNS_SET_TIMEOUT),
                    size: Some(p.learned_max),
                    pinned,
                });
            }
        }
    }
    Ok((sets, rules))
}
