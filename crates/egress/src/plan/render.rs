//! A plan as `nft -f` text: for humans (`corral host plan`) and as the
//! baseline of the apply benchmark. The script replaces both corral tables
//! atomically (`table X; delete table X; table X { ... }` in one file is
//! one transaction), exactly like the netlink batch does.

use std::fmt::Write;

use ipnet::IpNet;

use super::HostPlan;
use super::keyed::{Field, KeyPart, KeyValue, KeyedKind, KeyedSetPlan, Limit, PayloadBase};
use super::model::{
    AddrFamily, AddrRange, ChainPlan, LogTap, Match, RejectKind, RulePlan, SetKind, SetPlan,
    TablePlan, Verdict,
};
use super::vmap::{MapElement, MapKey, MapKeyValue, VmapPlan};

/// Render the whole plan (both tables) as one `nft -f` script.
pub fn render(plan: &HostPlan) -> String {
    let mut out = String::new();
    for t in plan.tables() {
        // `table` adds the table when missing, so the delete cannot fail.
        let _ = writeln!(out, "table {} {}", t.family.keyword(), t.name);
        let _ = writeln!(out, "delete table {} {}", t.family.keyword(), t.name);
    }
    for t in plan.tables() {
        render_table(&mut out, t);
    }
    out
}

fn render_table(out: &mut String, t: &TablePlan) {
    let _ = writeln!(out, "table {} {} {{", t.family.keyword(), t.name);
    for s in &t.sets {
        render_set(out, s);
    }
    for s in &t.keyed_sets {
        render_keyed_set(out, s);
    }
    for m in &t.maps {
        render_map(out, m);
    }
    for c in &t.chains {
        render_chain(out, c);
    }
    out.push_str("}\n");
}

fn render_set(out: &mut String, s: &SetPlan) {
    let _ = writeln!(out, "\tset {} {{", s.name);
    let ty = match s.family {
        AddrFamily::V4 => "ipv4_addr",
        AddrFamily::V6 => "ipv6_addr",
    };
    if s.pinned {
        let _ = writeln!(out, "\t\ttype {ty} . {ty}");
    } else {
        let _ = writeln!(out, "\t\ttype {ty}");
    }
    let flags = match s.kind {
        SetKind::Interval => "interval",
        SetKind::Dynamic => "timeout",
    };
    let _ = writeln!(out, "\t\tflags {flags}");
    if let Some(t) = s.timeout {
        if t.subsec_millis() == 0 {
            let _ = writeln!(out, "\t\ttimeout {}s", t.as_secs());
        } else {
            let _ = writeln!(out, "\t\ttimeout {}ms", t.as_millis());
        }
    }
    if let Some(n) = s.size {
        let _ = writeln!(out, "\t\tsize {n}");
    }
    if !s.elements.is_empty() {
        out.push_str("\t\telements = { ");
        for (i, r) in s.elements.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&range_text(r));
        }
        out.push_str(" }\n");
    }
    out.push_str("\t}\n");
}

/// A network as `nft` prints it: a single address without its `/32` or
/// `/128`.
fn net_text(net: &IpNet) -> String {
    if net.prefix_len() == net.max_prefix_len() {
        net.addr().to_string()
    } else {
        net.to_string()
    }
}

fn render_keyed_set(out: &mut String, s: &KeyedSetPlan) {
    let _ = writeln!(out, "\tset {} {{", s.name);
    if s.has_raw_part() {
        let parts: Vec<String> = s.key.iter().map(|p| typeof_text(*p)).collect();
        let _ = writeln!(out, "\t\ttypeof {}", parts.join(" . "));
    } else {
        let parts: Vec<&str> = s.key.iter().map(|p| type_text(*p)).collect();
        let _ = writeln!(out, "\t\ttype {}", parts.join(" . "));
    }
    if let KeyedKind::Meter { timeout, size } = s.kind {
        let _ = writeln!(out, "\t\tsize {size}");
        match timeout {
            Some(t) => {
                let _ = writeln!(out, "\t\tflags dynamic,timeout");
                let _ = writeln!(out, "\t\ttimeout {}s", t.as_secs());
            }
            None => {
                let _ = writeln!(out, "\t\tflags dynamic");
            }
        }
    }
    if !s.elements.is_empty() {
        let elems: Vec<String> = s
            .elements
            .iter()
            .map(|e| keyed_element_text(s, e))
            .collect();
        let _ = writeln!(out, "\t\telements = {{ {} }}", elems.join(", "));
    }
    out.push_str("\t}\n");
}

fn render_map(out: &mut String, m: &VmapPlan) {
    let _ = writeln!(out, "\tmap {} {{", m.name);
    let key = match m.key {
        MapKey::IfName => "ifname",
        MapKey::Addr(AddrFamily::V4) => "ipv4_addr",
        MapKey::Addr(AddrFamily::V6) => "ipv6_addr",
    };
    let _ = writeln!(out, "\t\ttype {key} : verdict");
    if matches!(m.key, MapKey::Addr(_)) {
        let _ = writeln!(out, "\t\tflags interval");
    }
    if !m.elements.is_empty() {
        let elems: Vec<String> = m.elements.iter().map(map_element_text).collect();
        let _ = writeln!(out, "\t\telements = {{ {} }}", elems.join(", "));
    }
    out.push_str("\t}\n");
}

/// One element of a verdict map as `nft` writes it.
pub fn map_element_text(e: &MapElement) -> String {
    let key = match &e.key {
        MapKeyValue::IfName(n) => format!("\"{n}\""),
        MapKeyValue::Range(r) => range_text(r),
    };
    format!("{key} : jump {}", e.chain)
}

/// One element of a keyed set as `nft` writes it.
pub fn keyed_element_text(s: &KeyedSetPlan, e: &[KeyValue]) -> String {
    s.key
        .iter()
        .zip(e)
        .map(|(p, v)| value_text(*p, v))
        .collect::<Vec<_>>()
        .join(" . ")
}

fn type_text(p: KeyPart) -> &'static str {
    match p {
        KeyPart::IfName => "ifname",
        KeyPart::Ether => "ether_addr",
        KeyPart::Ipv4 => "ipv4_addr",
        KeyPart::Ipv6 => "ipv6_addr",
        KeyPart::Raw(_) => "integer",
    }
}

fn typeof_text(p: KeyPart) -> String {
    match p {
        KeyPart::IfName => "iifname".to_owned(),
        KeyPart::Ether => "ether saddr".to_owned(),
        KeyPart::Ipv4 => "ip saddr".to_owned(),
        KeyPart::Ipv6 => "ip6 saddr".to_owned(),
        KeyPart::Raw(f) => field_text(f),
    }
}

fn value_text(p: KeyPart, v: &KeyValue) -> String {
    match (p, v) {
        (KeyPart::Raw(_), v) => {
            let hex: String = v.bytes().iter().map(|b| format!("{b:02x}")).collect();
            format!("0x{hex}")
        }
        (_, KeyValue::IfName(n)) => format!("\"{n}\""),
        (_, KeyValue::Ether(m)) => mac_text(m),
        (_, KeyValue::V4(a)) => a.to_string(),
        (_, KeyValue::V6(a)) => a.to_string(),
    }
}

fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A field as `nft` writes it.
pub fn field_text(f: Field) -> String {
    match f {
        Field::IifName => "iifname".to_owned(),
        Field::OifName => "oifname".to_owned(),
        Field::EtherSaddr => "ether saddr".to_owned(),
        Field::ArpSenderMac => "arp saddr ether".to_owned(),
        Field::ArpSenderIp => "arp saddr ip".to_owned(),
        Field::IpSaddr(f) => format!("{} saddr", ip_kw(f)),
        Field::IpDaddr(f) => format!("{} daddr", ip_kw(f)),
        Field::Raw { base, offset, len } => {
            let b = match base {
                PayloadBase::Link => "ll",
                PayloadBase::Network => "nh",
                PayloadBase::Transport => "th",
            };
            format!("@{b},{},{}", offset * 8, len * 8)
        }
    }
}

fn fields_text(fields: &[Field]) -> String {
    fields
        .iter()
        .map(|f| field_text(*f))
        .collect::<Vec<_>>()
        .join(" . ")
}

fn ethertype_text(t: u16) -> String {
    match t {
        0x0800 => "ip".to_owned(),
        0x0806 => "arp".to_owned(),
        0x86dd => "ip6".to_owned(),
        0x8100 => "8021q".to_owned(),
        other => format!("0x{other:04x}"),
    }
}

/// `a.b.c.d`, `net/len`, or `first-last`.
pub fn range_text(r: &AddrRange) -> String {
    match r.as_net() {
        Some(net) if net.prefix_len() == net.max_prefix_len() => net.addr().to_string(),
        Some(net) => net.to_string(),
        None => format!("{}-{}", r.start, r.end),
    }
}

fn render_chain(out: &mut String, c: &ChainPlan) {
    let _ = writeln!(out, "\tchain {} {{", c.name);
    if let Some(b) = &c.base {
        let _ = writeln!(
            out,
            "\t\ttype {} hook {} priority {}; policy accept;",
            b.kind.keyword(),
            b.hook.keyword(),
            b.priority
        );
    }
    for r in &c.rules {
        let _ = writeln!(out, "\t\t{}", rule_source(r));
    }
    out.push_str("\t}\n");
}

/// One rule in `nft` syntax.
///
/// As `nft list` prints it: an `ether type` check that the next match's
/// field implies (`ether type ip` before `ip saddr …`) is left out, as `nft`
/// leaves it out, so a rule read back from the kernel decodes to this text.
pub fn rule_text(r: &RulePlan) -> String {
    rule_words(r, true)
}

/// A rule as `nft -f` loads it: every check spelled out (an explicit
/// `ether type` is encoded as the frame's ethertype; left implicit, `nft`
/// would check `meta protocol` instead).
fn rule_source(r: &RulePlan) -> String {
    rule_words(r, false)
}

/// The protocol an `ether type` check names, as `nft` tracks it.
#[derive(PartialEq)]
enum L3 {
    Ip(AddrFamily),
    Arp,
}

fn ethertype_l3(t: u16) -> Option<L3> {
    match t {
        0x0800 => Some(L3::Ip(AddrFamily::V4)),
        0x86dd => Some(L3::Ip(AddrFamily::V6)),
        0x0806 => Some(L3::Arp),
        _ => None,
    }
}

fn field_l3(f: &Field) -> Option<L3> {
    match f {
        Field::IpSaddr(af) | Field::IpDaddr(af) => Some(L3::Ip(*af)),
        Field::ArpSenderMac | Field::ArpSenderIp => Some(L3::Arp),
        _ => None,
    }
}

/// Whether `m` loads a field of protocol `l3` (which implies the check).
fn loads_field_of(m: &Match, l3: &L3) -> bool {
    match m {
        Match::Daddr(a) => *l3 == L3::Ip(AddrFamily::of(*a)),
        Match::SaddrIn(n) | Match::DaddrIn(n) | Match::SaddrNotIn(n) => {
            *l3 == L3::Ip(AddrFamily::of(n.addr()))
        }
        Match::DaddrInSet(f, _) | Match::SaddrInSet(f, _) => *l3 == L3::Ip(*f),
        Match::ArpTargetIn(_) | Match::ArpSenderIn(_) => *l3 == L3::Arp,
        Match::InSet { fields, .. } | Match::Meter { fields, .. } => {
            fields.iter().any(|f| field_l3(f).as_ref() == Some(l3))
        }
        _ => false,
    }
}

fn rule_words(r: &RulePlan, listing: bool) -> String {
    let mut parts: Vec<String> = Vec::with_capacity(r.matches.len() + 2);
    for (i, m) in r.matches.iter().enumerate() {
        if listing
            && let Match::EtherType(t) = m
            && let Some(l3) = ethertype_l3(*t)
            && r.matches.get(i + 1).is_some_and(|n| loads_field_of(n, &l3))
        {
            continue;
        }
        // `nft -f` input spells the mask out, so `nft` encodes it as corral
        // does (see `nft::expr`); a listing shows the prefix, as `nft` does.
        if !listing
            && let Match::CtOrigSaddrIn(net) = m
            && net.prefix_len() < net.max_prefix_len()
        {
            let f = AddrFamily::of(net.addr());
            parts.push(format!(
                "ct original {} saddr & {} == {}",
                ip_kw(f),
                net.netmask(),
                net.network()
            ));
            continue;
        }
        parts.push(match_text(m));
    }
    if r.counter {
        parts.push("counter".to_owned());
    }
    if let Some(log) = &r.log {
        parts.push(log_text(log));
    }
    parts.push(verdict_text(&r.verdict));
    parts.join(" ")
}

fn ip_kw(f: AddrFamily) -> &'static str {
    match f {
        AddrFamily::V4 => "ip",
        AddrFamily::V6 => "ip6",
    }
}

fn match_text(m: &Match) -> String {
    match m {
        Match::IifName(n) => format!("iifname \"{n}\""),
        Match::OifName(n) => format!("oifname \"{n}\""),
        Match::OifNameNot(n) => format!("oifname != \"{n}\""),
        Match::CtEstablishedRelated => "ct state established,related".to_owned(),
        Match::CtInvalid => "ct state invalid".to_owned(),
        Match::CtDirection(d) => format!("ct direction {}", d.keyword()),
        Match::IifNameNot(n) => format!("iifname != \"{n}\""),
        Match::FibSaddrType(t) => format!("fib saddr type {}", t.keyword()),
        Match::FibSaddrTypeNot(t) => format!("fib saddr type != {}", t.keyword()),
        Match::NfProto(f) => format!(
            "meta nfproto {}",
            match f {
                AddrFamily::V4 => "ipv4",
                AddrFamily::V6 => "ipv6",
            }
        ),
        Match::L4Proto(p) => format!("meta l4proto {}", p.keyword()),
        Match::Dport(r) => format!("th dport {r}"),
        Match::Icmpv6Type(t) => {
            let name = match t {
                133 => "nd-router-solicit".to_owned(),
                134 => "nd-router-advert".to_owned(),
                135 => "nd-neighbor-solicit".to_owned(),
                136 => "nd-neighbor-advert".to_owned(),
                137 => "nd-redirect".to_owned(),
                other => other.to_string(),
            };
            format!("icmpv6 type {name}")
        }
        Match::DaddrInSet(f, set) => format!("{} daddr @{set}", ip_kw(*f)),
        Match::SaddrInSet(f, set) => format!("{} saddr @{set}", ip_kw(*f)),
        Match::IifGroup(g) => format!("iifgroup {g}"),
        Match::OifGroup(g) => format!("oifgroup {g}"),
        Match::Daddr(a) => {
            let f = AddrFamily::of(*a);
            format!("{} daddr {a}", ip_kw(f))
        }
        Match::SaddrIn(net) => {
            let f = AddrFamily::of(net.addr());
            format!("{} saddr {}", ip_kw(f), net_text(net))
        }
        Match::DaddrIn(net) => {
            let f = AddrFamily::of(net.addr());
            format!("{} daddr {}", ip_kw(f), net_text(net))
        }
        Match::SaddrNotIn(net) => {
            let f = AddrFamily::of(net.addr());
            format!("{} saddr != {}", ip_kw(f), net_text(net))
        }
        Match::ArpTargetIn(net) => format!("arp daddr ip {}", net_text(&IpNet::V4(*net))),
        Match::ArpSenderIn(net) => format!("arp saddr ip {}", net_text(&IpNet::V4(*net))),
        Match::EtherType(t) => format!("ether type {}", ethertype_text(*t)),
        Match::Sport(r) => format!("th sport {r}"),
        Match::CtNew => "ct state new".to_owned(),
        Match::CtRelated => "ct state related".to_owned(),
        Match::CtOrigSaddrIn(net) => {
            let f = AddrFamily::of(net.addr());
            format!("ct original {} saddr {}", ip_kw(f), net_text(net))
        }
        Match::TcpNotSyn => "tcp flags != syn / fin,syn,rst,ack".to_owned(),
        Match::InSet {
            fields,
            set,
            negate,
        } => {
            let op = if *negate { "!= " } else { "" };
            format!("{} {op}@{set}", fields_text(fields))
        }
        Match::Bytes { field, value } => {
            let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
            format!("{} 0x{hex}", field_text(*field))
        }
        Match::BitsSet { field, mask } => {
            let hex = |b: &[u8]| -> String { b.iter().map(|x| format!("{x:02x}")).collect() };
            let zero = vec![0u8; mask.len()];
            format!(
                "{} & 0x{} != 0x{}",
                field_text(*field),
                hex(mask),
                hex(&zero)
            )
        }
        Match::Ip6Fragment => "exthdr frag exists".to_owned(),
        Match::Meter { set, fields, limit } => match limit {
            Limit::RateOver { per_second, burst } => format!(
                "update @{set} {{ {} limit rate over {per_second}/second burst {burst} packets }}",
                fields_text(fields)
            ),
            Limit::CountOver(n) => {
                format!("add @{set} {{ {} ct count over {n} }}", fields_text(fields))
            }
        },
    }
}

/// `log prefix "P" group G snaplen S`, as `nft` prints it.
pub(crate) fn log_text(log: &LogTap) -> String {
    format!(
        "log prefix \"{}\" group {} snaplen {}",
        log.prefix, log.group, log.snaplen
    )
}

fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::Accept => "accept".to_owned(),
        Verdict::Drop => "drop".to_owned(),
        Verdict::Reject(RejectKind::TcpReset) => "reject with tcp reset".to_owned(),
        Verdict::Reject(RejectKind::IcmpxAdminProhibited) => {
            "reject with icmpx type admin-prohibited".to_owned()
        }
        Verdict::Jump(c) => format!("jump {c}"),
        Verdict::Masquerade => "masquerade".to_owned(),
        Verdict::Return => "return".to_owned(),
        Verdict::Vmap { field, map } => format!("{} vmap @{map}", field.keyword()),
    }
}
