//! Values, states and stateful expressions as `nft` prints them.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Field, Kind};

pub(super) fn limit_text(t: &[&str]) -> Option<String> {
    let rate = t.get(1)?;
    let burst = t.get(3)?;
    let kind = t.get(5)?;
    let over = t
        .get(7)
        .and_then(|f| f.strip_prefix("0x"))
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .is_some_and(|f| f & 1 != 0);
    let unit = if *kind == "bytes" { " bytes" } else { "" };
    let burst = match burst.parse::<u64>() {
        Ok(0) => String::new(),
        Ok(b) => format!(
            " burst {b}{}",
            if *kind == "bytes" {
                " bytes"
            } else {
                " packets"
            }
        ),
        Err(_) => String::new(),
    };
    Some(format!(
        "limit rate {}{rate}{unit}{burst}",
        if over { "over " } else { "" }
    ))
}

/// A stateful expression inside a dynset (`connlimit`, `limit`, `counter`).
pub(super) fn stateful(group: &str) -> Option<String> {
    let tokens: Vec<&str> = group.split_whitespace().collect();
    match *tokens.first()? {
        "connlimit" => {
            let count = tokens.get(2)?;
            let over = tokens.get(4).is_some_and(|f| *f == "1");
            Some(format!(
                "ct count {}{count}",
                if over { "over " } else { "" }
            ))
        }
        "limit" => limit_text(&tokens[1..]),
        "counter" => Some("counter".to_owned()),
        _ => None,
    }
}

pub(super) fn duration_text(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

pub(super) fn first4(b: &[u8]) -> [u8; 4] {
    let mut out = [0u8; 4];
    for (o, v) in out.iter_mut().zip(b) {
        *o = *v;
    }
    out
}

pub(super) fn ct_states(bits: u32) -> String {
    let names = [
        (1, "invalid"),
        (2, "established"),
        (4, "related"),
        (8, "new"),
        (64, "untracked"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        format!("{bits:#x}")
    } else {
        v.join(",")
    }
}

pub(super) fn icmpx_code(c: u32) -> String {
    match c {
        0 => "no-route".to_owned(),
        1 => "port-unreachable".to_owned(),
        2 => "host-unreachable".to_owned(),
        3 => "admin-prohibited".to_owned(),
        other => other.to_string(),
    }
}

pub(super) fn icmp_unreach_code(c: u32) -> String {
    match c {
        0 => "net-unreachable".to_owned(),
        1 => "host-unreachable".to_owned(),
        3 => "port-unreachable".to_owned(),
        13 => "admin-prohibited".to_owned(),
        other => other.to_string(),
    }
}

/// The value `data` (as loaded into `f`'s register) in `nft` syntax.
pub(super) fn value(f: &Field, data: &[u8]) -> String {
    let n = f.len.min(data.len());
    let d = &data[..n];
    // A masked or shortened address load is a prefix match.
    let prefix = match &f.mask {
        Some(m) => Some(m.iter().map(|b| b.count_ones() as usize).sum::<usize>()),
        None if f.len < f.full => Some(f.len * 8),
        None => None,
    };
    match f.kind {
        Kind::IfName => {
            let end = d.iter().position(|b| *b == 0).unwrap_or(d.len());
            format!("\"{}\"", String::from_utf8_lossy(&d[..end]))
        }
        Kind::NfProto => match d.first() {
            Some(2) => "ipv4".to_owned(),
            Some(10) => "ipv6".to_owned(),
            Some(x) => x.to_string(),
            None => String::new(),
        },
        Kind::L4Proto => match d.first() {
            Some(1) => "icmp".to_owned(),
            Some(6) => "tcp".to_owned(),
            Some(17) => "udp".to_owned(),
            Some(58) => "ipv6-icmp".to_owned(),
            Some(x) => x.to_string(),
            None => String::new(),
        },
        Kind::EtherType => match be16(d) {
            0x0800 => "ip".to_owned(),
            0x0806 => "arp".to_owned(),
            0x86dd => "ip6".to_owned(),
            0x8100 => "8021q".to_owned(),
            other => format!("0x{other:04x}"),
        },
        Kind::Port => be16(d).to_string(),
        Kind::Ipv4 => {
            let mut o = [0u8; 4];
            o[..n.min(4)].copy_from_slice(&d[..n.min(4)]);
            let a = Ipv4Addr::from(o);
            match prefix {
                Some(p) => format!("{a}/{p}"),
                None => a.to_string(),
            }
        }
        Kind::Ipv6 => {
            let mut o = [0u8; 16];
            o[..n.min(16)].copy_from_slice(&d[..n.min(16)]);
            let a = Ipv6Addr::from(o);
            match prefix {
                Some(p) => format!("{a}/{p}"),
                None => a.to_string(),
            }
        }
        Kind::Icmpv6Type => icmpv6_type(d.first().copied().unwrap_or(0)),
        Kind::IcmpType => d.first().copied().unwrap_or(0).to_string(),
        Kind::TcpFlags => tcp_flags(d.first().copied().unwrap_or(0)),
        Kind::CtState => ct_states(u32::from_ne_bytes(first4(d))),
        Kind::CtDirection => match d.first() {
            Some(0) => "original".to_owned(),
            Some(1) => "reply".to_owned(),
            Some(x) => x.to_string(),
            None => String::new(),
        },
        Kind::FibAddrType => match u32::from_ne_bytes(first4(d)) {
            1 => "unicast".to_owned(),
            2 => "local".to_owned(),
            3 => "broadcast".to_owned(),
            4 => "anycast".to_owned(),
            5 => "multicast".to_owned(),
            6 => "blackhole".to_owned(),
            7 => "unreachable".to_owned(),
            8 => "prohibit".to_owned(),
            other => other.to_string(),
        },
        Kind::Mac => d
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
        Kind::Present => d.first().copied().unwrap_or(0).to_string(),
        Kind::Group => u32::from_ne_bytes(first4(d)).to_string(),
        Kind::Raw => {
            let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
            format!("0x{hex}")
        }
    }
}

/// TCP flag bits by name, lowest first, as `nft` lists them.
pub(super) fn tcp_flags(b: u8) -> String {
    const NAMES: [&str; 8] = ["fin", "syn", "rst", "psh", "ack", "urg", "ecn", "cwr"];
    let names: Vec<&str> = (0..8)
        .filter(|i| b & (1 << i) != 0)
        .map(|i| NAMES[i])
        .collect();
    names.join(",")
}

fn icmpv6_type(t: u8) -> String {
    match t {
        1 => "destination-unreachable".to_owned(),
        128 => "echo-request".to_owned(),
        129 => "echo-reply".to_owned(),
        133 => "nd-router-solicit".to_owned(),
        134 => "nd-router-advert".to_owned(),
        135 => "nd-neighbor-solicit".to_owned(),
        136 => "nd-neighbor-advert".to_owned(),
        137 => "nd-redirect".to_owned(),
        other => other.to_string(),
    }
}

fn be16(d: &[u8]) -> u16 {
    match d {
        [a, b, ..] => u16::from_be_bytes([*a, *b]),
        [a] => u16::from(*a),
        [] => 0,
    }
}
