//! A plan as `nft -f` text: for humans (`corral host plan`) and as the
//! baseline of the apply benchmark. The script replaces both corral tables
//! atomically (`table X; delete table X; table X { ... }` in one file is
//! one transaction), exactly like the netlink batch does.

use std::fmt::Write;

use ipnet::IpNet;

use super::HostPlan;
use super::model::{
    AddrFamily, AddrRange, ChainPlan, Match, RejectKind, RulePlan, SetKind, SetPlan, TablePlan,
    Verdict,
};

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
    let _ = writeln!(out, "\t\ttype {ty}");
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
        let _ = writeln!(out, "\t\t{}", rule_text(r));
    }
    out.push_str("\t}\n");
}

/// One rule in `nft` syntax.
pub fn rule_text(r: &RulePlan) -> String {
    let mut parts: Vec<String> = r.matches.iter().map(match_text).collect();
    if r.counter {
        parts.push("counter".to_owned());
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
                135 => "nd-neighbor-solicit".to_owned(),
                136 => "nd-neighbor-advert".to_owned(),
                other => other.to_string(),
            };
            format!("icmpv6 type {name}")
        }
        Match::DaddrInSet(f, set) => format!("{} daddr @{set}", ip_kw(*f)),
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
    }
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
    }
}
