//! A live rule back in `nft` syntax.
//!
//! Read-back gives each rule as libnftnl's expression text (`[ meta load
//! iifname => reg 1 ] [ cmp eq reg 1 0x7272... ]`): exact, and what drift
//! compares, but unreadable to an operator. [`nft_syntax`] turns that text
//! into the rule as `nft list ruleset` would print it (`iifname
//! "corral-iso" counter accept`), following the registers: a load names a
//! field, the compare, lookup or dynset that consumes the register says what
//! is done with it. Protocol checks that only guard a field of the same
//! protocol (`meta nfproto ipv4` before `ip daddr`) are left out, as `nft`
//! leaves them out. An expression it does not know stays in its bracket
//! form, so nothing is ever hidden.

#[cfg(test)]
mod tests;
mod values;

use std::collections::BTreeMap;

use values::{
    ct_states, duration_text, first4, icmp_unreach_code, icmpx_code, limit_text, stateful, value,
};

/// What a register holds, and so how to print the value compared with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    IfName,
    NfProto,
    L4Proto,
    EtherType,
    Ipv4,
    Ipv6,
    Port,
    Icmpv6Type,
    IcmpType,
    CtState,
    CtDirection,
    TcpFlags,
    FibAddrType,
    Mac,
    /// Whether a header exists (`exthdr ... present`: 1 or 0).
    Present,
    Group,
    Raw,
}

/// The protocol a rule has established (which header the network-header
/// offsets belong to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum L3 {
    Ip,
    Ip6,
    Arp,
}

#[derive(Debug, Clone)]
struct Field {
    text: String,
    kind: Kind,
    /// Bytes loaded (a shorter load of an address is a prefix match).
    len: usize,
    /// Bytes the whole field has (for the prefix length).
    full: usize,
    mask: Option<Vec<u8>>,
    /// The lower bound of a range whose upper compare is still to come.
    low: Option<String>,
    /// The protocol this field belongs to (a pending check of the same
    /// protocol is implied by it).
    l3: Option<L3>,
}

/// A protocol check held back until we know whether a field of the same
/// protocol follows (then `nft` would not print it).
struct Pending {
    text: String,
    l3: L3,
}

#[derive(Default)]
struct Decoder {
    regs: BTreeMap<u32, Field>,
    /// Registers in load order since the last consumer (a concatenation).
    order: Vec<u32>,
    l3: Option<L3>,
    /// The transport protocol a rule has established (`meta l4proto`).
    l4: Option<u8>,
    pending: Option<Pending>,
    out: Vec<String>,
}

/// `rule_text` (the `[ name body ]` groups read-back produces) in `nft`
/// syntax.
pub fn nft_syntax(rule_text: &str) -> String {
    let mut d = Decoder::default();
    for group in groups(rule_text) {
        d.expr(&group);
    }
    d.flush_pending();
    d.out.join(" ")
}

/// The top-level `[ ... ]` groups, without their brackets.
pub(crate) fn groups(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for c in text.chars() {
        match c {
            '[' => {
                if depth > 0 {
                    cur.push(c);
                }
                depth += 1;
            }
            ']' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    out.push(cur.trim().to_owned());
                    cur.clear();
                } else {
                    cur.push(c);
                }
            }
            _ if depth > 0 => cur.push(c),
            _ => {}
        }
    }
    out
}

/// The bytes of libnftnl's data words (`0x%08x` of each native-endian
/// 32-bit word).
fn words(tokens: &[&str]) -> Vec<u8> {
    tokens
        .iter()
        .filter_map(|t| t.strip_prefix("0x"))
        .filter_map(|h| u32::from_str_radix(h, 16).ok())
        .flat_map(u32::to_ne_bytes)
        .collect()
}

fn reg_of(token: Option<&&str>) -> Option<u32> {
    token.and_then(|t| t.trim_end_matches(',').parse().ok())
}

impl Decoder {
    fn emit(&mut self, s: String) {
        self.flush_pending();
        self.out.push(s);
    }

    fn flush_pending(&mut self) {
        if let Some(p) = self.pending.take() {
            self.out.push(p.text);
        }
    }

    fn load(&mut self, reg: u32, f: Field) {
        if let (Some(p), Some(l3)) = (&self.pending, f.l3)
            && p.l3 == l3
        {
            self.pending = None;
        }
        self.regs.insert(reg, f);
        self.order.retain(|r| *r != reg);
        self.order.push(reg);
    }

    fn field(text: impl Into<String>, kind: Kind, len: usize) -> Field {
        Field {
            text: text.into(),
            kind,
            len,
            full: len,
            mask: None,
            low: None,
            l3: None,
        }
    }

    fn expr(&mut self, group: &str) {
        let tokens: Vec<&str> = group.split_whitespace().collect();
        let Some((&name, rest)) = tokens.split_first() else {
            return;
        };
        let known = match name {
            "meta" => self.meta(rest),
            "payload" => self.payload(rest),
            "ct" => self.ct(rest),
            "fib" => self.fib(rest),
            "exthdr" => self.exthdr(rest),
            "bitwise" => self.bitwise(rest),
            "cmp" => self.cmp(rest),
            "range" => self.range(rest),
            "lookup" => self.lookup(rest),
            "dynset" => self.dynset(group, rest),
            "counter" => {
                self.emit("counter".to_owned());
                true
            }
            "immediate" => self.immediate(rest),
            "reject" => self.reject(rest),
            "masq" => {
                self.emit("masquerade".to_owned());
                true
            }
            "limit" => self.limit(rest),
            "log" => self.log(rest),
            _ => false,
        };
        if !known {
            self.emit(format!("[ {group} ]"));
        }
    }

    /// `load KEY => reg N`
    fn meta(&mut self, t: &[&str]) -> bool {
        let (Some(&"load"), Some(key), Some(reg)) = (t.first(), t.get(1), reg_of(t.get(4))) else {
            return false;
        };
        let f = match *key {
            "iifname" | "oifname" => Self::field(*key, Kind::IfName, 16),
            "iifgroup" | "oifgroup" => Self::field(*key, Kind::Group, 4),
            "nfproto" => Self::field("meta nfproto", Kind::NfProto, 1),
            "l4proto" => Self::field("meta l4proto", Kind::L4Proto, 1),
            "protocol" => Self::field("meta protocol", Kind::EtherType, 2),
            other => Self::field(format!("meta {other}"), Kind::Raw, 4),
        };
        self.load(reg, f);
        true
    }

    /// `load Lb @ BASE header + OFF => reg N`
    fn payload(&mut self, t: &[&str]) -> bool {
        let (Some(&"load"), Some(len), Some(base), Some(off), Some(reg)) = (
            t.first(),
            t.get(1)
                .and_then(|l| l.strip_suffix('b'))
                .and_then(|l| l.parse::<usize>().ok()),
            t.get(3),
            t.get(6).and_then(|o| o.parse::<usize>().ok()),
            reg_of(t.get(9)),
        ) else {
            return false;
        };
        let f = self.payload_field(base, off, len);
        self.load(reg, f);
        true
    }

    fn payload_field(&self, base: &str, off: usize, len: usize) -> Field {
        let named = |text: &str, kind: Kind, full: usize, l3: Option<L3>| Field {
            text: text.to_owned(),
            kind,
            len,
            full,
            mask: None,
            low: None,
            l3,
        };
        match (base, self.l3, off) {
            ("link", _, 12) if len == 2 => return named("ether type", Kind::EtherType, 2, None),
            ("link", _, 6) if len == 6 => return named("ether saddr", Kind::Mac, 6, None),
            ("link", _, 0) if len == 6 => return named("ether daddr", Kind::Mac, 6, None),
            ("network", Some(L3::Ip) | None, 12) if len <= 4 => {
                return named("ip saddr", Kind::Ipv4, 4, Some(L3::Ip));
            }
            ("network", Some(L3::Ip) | None, 16) if len <= 4 => {
                return named("ip daddr", Kind::Ipv4, 4, Some(L3::Ip));
            }
            ("network", Some(L3::Ip6), 8) if len <= 16 => {
                return named("ip6 saddr", Kind::Ipv6, 16, Some(L3::Ip6));
            }
            ("network", Some(L3::Ip6), 24) if len <= 16 => {
                return named("ip6 daddr", Kind::Ipv6, 16, Some(L3::Ip6));
            }
            ("network", Some(L3::Arp), 8) if len == 6 => {
                return named("arp saddr ether", Kind::Mac, 6, Some(L3::Arp));
            }
            ("network", Some(L3::Arp), 14) if len <= 4 => {
                return named("arp saddr ip", Kind::Ipv4, 4, Some(L3::Arp));
            }
            ("network", Some(L3::Arp), 18) if len == 6 => {
                return named("arp daddr ether", Kind::Mac, 6, Some(L3::Arp));
            }
            ("network", Some(L3::Arp), 24) if len <= 4 => {
                return named("arp daddr ip", Kind::Ipv4, 4, Some(L3::Arp));
            }
            ("transport", _, 0) if len == 1 && self.l4 == Some(58) => {
                return named("icmpv6 type", Kind::Icmpv6Type, 1, None);
            }
            ("transport", _, 0) if len == 1 && self.l4 == Some(1) => {
                return named("icmp type", Kind::IcmpType, 1, None);
            }
            ("transport", _, 13) if len == 1 && self.l4 == Some(6) => {
                return named("tcp flags", Kind::TcpFlags, 1, None);
            }
            ("transport", _, 0) if len == 2 => return named("th sport", Kind::Port, 2, None),
            ("transport", _, 2) if len == 2 => return named("th dport", Kind::Port, 2, None),
            _ => {}
        }
        let b = match base {
            "link" => "ll",
            "network" => "nh",
            "transport" => "th",
            other => other,
        };
        Self::field(format!("@{b},{},{}", off * 8, len * 8), Kind::Raw, len)
    }

    /// `load KEY => reg N` (optionally `, dir D`)
    fn ct(&mut self, t: &[&str]) -> bool {
        let (Some(&"load"), Some(key), Some(reg)) = (t.first(), t.get(1), reg_of(t.get(4))) else {
            return false;
        };
        let f = match *key {
            "state" => Self::field("ct state", Kind::CtState, 4),
            "direction" => Self::field("ct direction", Kind::CtDirection, 1),
            // The prefix length of a compare after a ct load is not in
            // libnftnl's text (the data words are whole): the network shows.
            "src_ip" | "src_ip6" | "dst_ip" | "dst_ip6" => {
                let dir = t.get(7).copied().unwrap_or("original");
                let (fam, kind, len) = if key.ends_with('6') {
                    ("ip6", Kind::Ipv6, 16)
                } else {
                    ("ip", Kind::Ipv4, 4)
                };
                let end = if key.starts_with("src") {
                    "saddr"
                } else {
                    "daddr"
                };
                Self::field(format!("ct {dir} {fam} {end}"), kind, len)
            }
            other => Self::field(format!("ct {other}"), Kind::Raw, 4),
        };
        self.load(reg, f);
        true
    }

    /// `saddr type => reg N` (the flags, the result, the register)
    fn fib(&mut self, t: &[&str]) -> bool {
        let Some(arrow) = t.iter().position(|x| *x == "=>") else {
            return false;
        };
        let Some(reg) = reg_of(t.get(arrow + 2)) else {
            return false;
        };
        let what = t[..arrow].join(" ");
        let kind = if what.ends_with("type") {
            Kind::FibAddrType
        } else {
            Kind::Raw
        };
        self.load(reg, Self::field(format!("fib {what}"), kind, 4));
        true
    }

    /// `load ipv6 1b @ TYPE + OFF present => reg N` (only the existence
    /// test of the fragment header is named; other loads stay visible).
    fn exthdr(&mut self, t: &[&str]) -> bool {
        let (Some(&"load"), Some(&"ipv6"), Some(&"44"), Some(&"present"), Some(reg)) =
            (t.first(), t.get(1), t.get(4), t.get(7), reg_of(t.get(10)))
        else {
            return false;
        };
        self.load(reg, Self::field("exthdr frag", Kind::Present, 1));
        true
    }

    /// `reg N = ( reg N & MASK ) ^ XOR`
    fn bitwise(&mut self, t: &[&str]) -> bool {
        let Some(reg) = reg_of(t.get(1)) else {
            return false;
        };
        let Some(amp) = t.iter().position(|x| *x == "&") else {
            return false;
        };
        let Some(close) = t.iter().position(|x| *x == ")") else {
            return false;
        };
        let mask = words(&t[amp + 1..close]);
        match self.regs.get_mut(&reg) {
            Some(f) => {
                f.mask = Some(mask);
                true
            }
            None => false,
        }
    }

    fn take(&mut self, reg: u32) -> Option<Field> {
        self.order.retain(|r| *r != reg);
        self.regs.remove(&reg)
    }

    /// `OP reg N DATA`
    fn cmp(&mut self, t: &[&str]) -> bool {
        let (Some(op), Some(reg)) = (t.first(), reg_of(t.get(2))) else {
            return false;
        };
        let data = words(&t[3..]);
        let Some(f) = self.take(reg) else {
            return false;
        };
        // `th dport >= A` then `th dport <= B` is nft's port range.
        if *op == "gte" && f.low.is_none() {
            let low = value(&f, &data);
            self.regs.insert(
                reg,
                Field {
                    low: Some(low),
                    ..f
                },
            );
            self.order.push(reg);
            return true;
        }
        if *op == "lte"
            && let Some(low) = &f.low
        {
            let high = value(&f, &data);
            self.emit(format!("{} {low}-{high}", f.text));
            return true;
        }
        let sym = match *op {
            "eq" => "",
            "neq" => "!= ",
            "lt" => "< ",
            "lte" => "<= ",
            "gt" => "> ",
            "gte" => ">= ",
            _ => return false,
        };
        // `ct state X` is a mask test: the mask names the states.
        if f.kind == Kind::CtState
            && *op == "neq"
            && data.iter().all(|b| *b == 0)
            && let Some(mask) = &f.mask
        {
            let states = ct_states(u32::from_ne_bytes(first4(mask)));
            self.emit(format!("ct state {states}"));
            return true;
        }
        if f.kind == Kind::Present && *op == "eq" {
            let word = if data.first() == Some(&1) {
                "exists"
            } else {
                "missing"
            };
            self.emit(format!("{} {word}", f.text));
            return true;
        }
        // A masked raw field: `@nh,48,16 & 0x3fff != 0x0000`.
        if f.kind == Kind::Raw
            && let Some(mask) = &f.mask
        {
            let hex: String = mask
                .iter()
                .take(f.len)
                .map(|b| format!("{b:02x}"))
                .collect();
            let v = value(&f, &data);
            self.emit(format!("{} & 0x{hex} {sym}{v}", f.text));
            return true;
        }
        // `tcp flags & MASK OP VALUE`, as `nft` lists it: `VALUE / MASK`.
        if f.kind == Kind::TcpFlags
            && let Some(mask) = &f.mask
        {
            // `tcp flags` implies its protocol: `nft` does not print the
            // check before it.
            if self.out.last().is_some_and(|t| t == "meta l4proto tcp") {
                self.out.pop();
            }
            let flags = |b: Option<&u8>| values::tcp_flags(b.copied().unwrap_or(0));
            self.emit(format!(
                "tcp flags {sym}{} / {}",
                flags(data.first()),
                flags(mask.first())
            ));
            return true;
        }
        let v = value(&f, &data);
        if f.kind == Kind::L4Proto && *op == "eq" {
            self.l4 = data.first().copied();
        }
        // A protocol check is held back: `nft` does not print it when a
        // field of that protocol follows.
        if *op == "eq" {
            let l3 = match (f.kind, v.as_str()) {
                (Kind::NfProto, "ipv4") | (Kind::EtherType, "ip") => Some(L3::Ip),
                (Kind::NfProto, "ipv6") | (Kind::EtherType, "ip6") => Some(L3::Ip6),
                (Kind::EtherType, "arp") => Some(L3::Arp),
                _ => None,
            };
            if let Some(l3) = l3 {
                self.flush_pending();
                self.l3 = Some(l3);
                self.pending = Some(Pending {
                    text: format!("{} {v}", f.text),
                    l3,
                });
                return true;
            }
        }
        self.emit(format!("{} {sym}{v}", f.text));
        true
    }

    /// `eq reg N FROM TO`
    fn range(&mut self, t: &[&str]) -> bool {
        let (Some(op), Some(reg)) = (t.first(), reg_of(t.get(2))) else {
            return false;
        };
        let Some(f) = self.take(reg) else {
            return false;
        };
        let data = words(&t[3..]);
        let half = data.len() / 2;
        let (a, b) = data.split_at(half);
        let sym = if *op == "neq" { "!= " } else { "" };
        self.emit(format!("{} {sym}{}-{}", f.text, value(&f, a), value(&f, b)));
        true
    }

    /// The registers a lookup or dynset reads from `first` on, in load
    /// order: one field, or a concatenation.
    fn key_from(&mut self, first: u32) -> Option<String> {
        let start = self.order.iter().position(|r| *r == first)?;
        let regs: Vec<u32> = self.order.drain(start..).collect();
        let parts: Vec<String> = regs
            .iter()
            .filter_map(|r| self.regs.remove(r))
            .map(|f| f.text)
            .collect();
        Some(parts.join(" . "))
    }

    /// `reg N set NAME [dreg M] FLAGS`
    fn lookup(&mut self, t: &[&str]) -> bool {
        let (Some(reg), Some(set)) = (reg_of(t.get(1)), t.get(3)) else {
            return false;
        };
        let map = t.contains(&"dreg");
        let inverted = t
            .last()
            .and_then(|f| f.strip_prefix("0x"))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .is_some_and(|f| f & 1 != 0);
        let Some(key) = self.key_from(reg) else {
            return false;
        };
        let s = if map {
            format!("{key} vmap @{set}")
        } else if inverted {
            format!("{key} != @{set}")
        } else {
            format!("{key} @{set}")
        };
        self.emit(s);
        true
    }

    /// `OP reg_key N set NAME timeout Tms [expr [ ... ]]`
    fn dynset(&mut self, group: &str, t: &[&str]) -> bool {
        let (Some(op), Some(reg), Some(set)) = (t.first(), reg_of(t.get(2)), t.get(4)) else {
            return false;
        };
        let timeout = t
            .get(6)
            .and_then(|x| x.strip_suffix("ms"))
            .and_then(|x| x.parse::<u64>().ok())
            .filter(|ms| *ms > 0)
            .map(|ms| format!(" timeout {}", duration_text(ms)))
            .unwrap_or_default();
        let Some(key) = self.key_from(reg) else {
            return false;
        };
        let inner: Vec<String> = match group.find("expr") {
            Some(at) => groups(&group[at..])
                .iter()
                .map(|g| stateful(g).unwrap_or_else(|| format!("[ {g} ]")))
                .collect(),
            None => Vec::new(),
        };
        let what = std::iter::once(format!("{key}{timeout}"))
            .chain(inner)
            .collect::<Vec<_>>()
            .join(" ");
        self.emit(format!("{op} @{set} {{ {what} }}"));
        true
    }

    /// `reg 0 VERDICT [-> CHAIN]`
    fn immediate(&mut self, t: &[&str]) -> bool {
        let (Some(&"reg"), Some(&"0"), Some(verdict)) = (t.first(), t.get(1), t.get(2)) else {
            return false;
        };
        let s = match (*verdict, t.get(3), t.get(4)) {
            ("jump" | "goto", Some(&"->"), Some(chain)) => format!("{verdict} {chain}"),
            ("accept" | "drop" | "continue" | "return", _, _) => (*verdict).to_owned(),
            _ => return false,
        };
        self.emit(s);
        true
    }

    /// `type T code C`
    fn reject(&mut self, t: &[&str]) -> bool {
        let (Some(ty), Some(code)) = (
            t.get(1).and_then(|x| x.parse::<u32>().ok()),
            t.get(3).and_then(|x| x.parse::<u32>().ok()),
        ) else {
            return false;
        };
        let s = match (ty, code) {
            (1, _) => "reject with tcp reset".to_owned(),
            (2, c) => format!("reject with icmpx type {}", icmpx_code(c)),
            (0, c) => format!("reject with icmp type {}", icmp_unreach_code(c)),
            _ => return false,
        };
        self.emit(s);
        true
    }

    /// `prefix P group G snaplen S qthreshold Q` (the NFLOG form; a
    /// syslog `log` stays in brackets). A prefix with spaces cannot be
    /// told apart from the words after it, so it is not decoded.
    fn log(&mut self, t: &[&str]) -> bool {
        let mut parts = vec!["log".to_owned()];
        let mut rest = t;
        if let [first, tail @ ..] = rest
            && *first == "prefix"
        {
            let Some((prefix, tail)) = tail.split_first() else {
                return false;
            };
            parts.push(format!("prefix \"{prefix}\""));
            rest = tail;
        }
        let [g, group, s, snaplen, q, qthreshold] = rest else {
            return false;
        };
        if (*g, *s, *q) != ("group", "snaplen", "qthreshold") {
            return false;
        }
        parts.push(format!("group {group}"));
        if *snaplen != "0" {
            parts.push(format!("snaplen {snaplen}"));
        }
        if *qthreshold != "0" {
            parts.push(format!("queue-threshold {qthreshold}"));
        }
        self.emit(parts.join(" "));
        true
    }

    /// `rate R/UNIT burst B type packets|bytes flags F`
    fn limit(&mut self, t: &[&str]) -> bool {
        let Some(s) = limit_text(t) else {
            return false;
        };
        self.emit(s);
        true
    }
}
