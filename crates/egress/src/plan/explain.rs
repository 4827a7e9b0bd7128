//! `corral explain`: what an operator asks (`DEST[:PORT][/PROTO]`), where
//! each allow entry landed in the plan ([`AllowOrigin`]), and a
//! [`Trace`](super::trace::Trace) said in words. The verdict itself comes
//! only from [`HostPlan::trace`]; nothing here decides.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use corral_sandbox_core::admission::NamePattern;
use serde::Serialize;

use super::HostPlan;
use super::model::AddrRange;
use super::names;
use super::render::range_text;
use super::trace::{Trace, TraceVerdict};

/// Where one allow entry of a profile landed in the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllowOrigin {
    /// The profile.
    pub profile: String,
    /// The entry as the operator wrote it (`api.example.com:443/tcp`).
    pub entry: String,
    /// The name it lists (`api.example.com`, `*.example.org`; lower case),
    /// `None` for an address or CIDR.
    pub name: Option<String>,
    /// The interval sets holding its addresses (one per family).
    pub sets: Vec<String>,
    /// The dynamic sets the gateway resolver fills from its name.
    pub learned_sets: Vec<String>,
    /// Its addresses in this plan: the CIDR, or the name's addresses
    /// resolved at apply.
    pub addresses: Vec<AddrRange>,
}

impl AllowOrigin {
    /// Whether this entry lists host name `name` (lower case, no trailing
    /// dot): a host entry of that name, or a wildcard `*.w` with `name` a
    /// strict subdomain of `w`.
    pub fn lists_name(&self, name: &str) -> bool {
        self.name
            .as_deref()
            .is_some_and(|n| NamePattern::from_written(n).admits(name))
    }
}

/// The protocol of a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// TCP (a SYN).
    Tcp,
    /// UDP (a datagram).
    Udp,
    /// ICMP echo (ICMPv6 for an IPv6 destination).
    Icmp,
}

impl Proto {
    /// The IP protocol number towards `dst`.
    pub fn number(self, dst: IpAddr) -> u8 {
        match (self, dst) {
            (Proto::Tcp, _) => 6,
            (Proto::Udp, _) => 17,
            (Proto::Icmp, IpAddr::V4(_)) => 1,
            (Proto::Icmp, IpAddr::V6(_)) => 58,
        }
    }
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
        })
    }
}

/// A destination as asked: `DEST[:PORT][/PROTO]`, where DEST is an IP
/// address (IPv6 in brackets when a port follows) or a host name; the
/// protocol defaults to `tcp` with a port and to `icmp` without one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Question {
    /// The address or host name (lower case, no trailing dot).
    pub dest: String,
    /// The destination port (TCP and UDP).
    pub port: Option<u16>,
    /// The protocol.
    pub proto: Proto,
}

/// A destination that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "destination `{text}` is invalid: {reason}; expected DEST[:PORT][/PROTO], e.g. `203.0.113.7:443/tcp`, `[2001:db8::1]:53/udp`, `api.example.com:443`, `198.51.100.1/icmp`"
)]
pub struct QuestionError {
    /// The text as given.
    pub text: String,
    /// What is wrong.
    pub reason: String,
}

impl Question {
    /// The destination as an address, when it is one.
    pub fn ip(&self) -> Option<IpAddr> {
        self.dest.parse().ok()
    }
}

impl FromStr for Question {
    type Err = QuestionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| QuestionError {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let t = text.trim();
        let (rest, proto) = match t.rsplit_once('/') {
            Some((rest, p)) => {
                let proto = match p.to_ascii_lowercase().as_str() {
                    "tcp" => Proto::Tcp,
                    "udp" => Proto::Udp,
                    "icmp" | "icmpv6" | "ping" => Proto::Icmp,
                    _ => return Err(bad(&format!("`{p}` is not tcp, udp or icmp"))),
                };
                (rest, Some(proto))
            }
            None => (t, None),
        };
        let (dest, port) = if let Some(inner) = rest.strip_prefix('[') {
            let (addr, after) = inner
                .split_once(']')
                .ok_or_else(|| bad("a `[` without its `]`"))?;
            match after {
                "" => (addr, None),
                a => (
                    addr,
                    Some(
                        a.strip_prefix(':')
                            .ok_or_else(|| bad("`]` must be followed by `:PORT`"))?,
                    ),
                ),
            }
        } else if rest.matches(':').count() > 1 {
            // A bare IPv6 address: no port (brackets are needed for one).
            (rest, None)
        } else {
            match rest.split_once(':') {
                Some((d, p)) => (d, Some(p)),
                None => (rest, None),
            }
        };
        let port = port
            .map(|p| match p.parse::<u16>() {
                Ok(0) | Err(_) => Err(bad(&format!("`{p}` is not a port (1-65535)"))),
                Ok(n) => Ok(n),
            })
            .transpose()?;
        let dest = dest.trim_end_matches('.').to_ascii_lowercase();
        if dest.is_empty() {
            return Err(bad("no destination"));
        }
        if dest.parse::<IpAddr>().is_err() {
            if dest.contains(':') {
                return Err(bad(&format!("`{dest}` is not an IPv6 address")));
            }
            corral_sandbox_core::HostName::new(dest.clone()).map_err(|e| {
                bad(&format!(
                    "`{dest}` is neither an address nor a host name ({e})"
                ))
            })?;
        }
        let proto = match (proto, port) {
            (Some(Proto::Icmp), Some(_)) => return Err(bad("icmp has no port")),
            (Some(p @ (Proto::Tcp | Proto::Udp)), None) => {
                return Err(bad(&format!("{p} needs a port")));
            }
            (Some(p), _) => p,
            (None, Some(_)) => Proto::Tcp,
            (None, None) => Proto::Icmp,
        };
        Ok(Self { dest, port, proto })
    }
}

impl fmt::Display for Question {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v6 = self.dest.contains(':');
        match (self.port, v6) {
            (Some(p), true) => write!(f, "[{}]:{p}", self.dest)?,
            (Some(p), false) => write!(f, "{}:{p}", self.dest)?,
            (None, _) => f.write_str(&self.dest)?,
        }
        write!(f, "/{}", self.proto)
    }
}

impl HostPlan {
    /// The allow entries of `profile` that list host name `name` (exact
    /// host entries and wildcards above it), as written.
    pub fn entries_listing(&self, profile: &str, name: &str) -> Vec<String> {
        self.origins
            .iter()
            .filter(|o| o.profile == profile && o.lists_name(name))
            .map(|o| o.entry.clone())
            .collect()
    }
}

/// Why the deciding rule decided, in a few words.
pub fn reason(trace: &Trace) -> String {
    let dst = trace.flow.dst;
    let profile = trace.profile.as_deref().unwrap_or("?");
    let Some(rule) = &trace.rule else {
        return match trace.verdict {
            TraceVerdict::NotCorrals => format!("{} is in no profile's subnet", trace.flow.src),
            _ => "no corral rule stops it (the base chain's policy accepts)".to_owned(),
        };
    };
    if let Some(set) = &trace.set {
        let el = range_text(&set.element);
        let n = set.name.as_str();
        return match trace.verdict {
            TraceVerdict::Allow if set.learned => format!(
                "{dst} was learned by the gateway resolver into {n} (element {el}) from a name of {}",
                or_list(&trace.entries, "an entry no longer in the profile")
            ),
            TraceVerdict::Allow => format!(
                "allow entry {} of profile {profile} lists {dst} (set {n}, element {el})",
                or_list(&trace.entries, "(none found)")
            ),
            _ if n == names::RESERVED4 || n == names::RESERVED6 => {
                format!(
                    "{dst} is in reserved or private space ({el}), which no name or internet mode reaches"
                )
            }
            _ if n == names::HOSTNET4 || n == names::HOSTNET6 => {
                format!("{dst} is on one of the host's own networks ({el})")
            }
            _ if n.contains("-deny") => format!("{dst} is on a deny list ({el}, set {n})"),
            _ => format!("{dst} is in set {n} ({el})"),
        };
    }
    let chain = rule.chain.as_str();
    match trace.verdict {
        TraceVerdict::Allow if chain.ends_with("-host") => {
            format!(
                "the gateway of profile {profile} serves this (DHCP, DNS or neighbour discovery)"
            )
        }
        TraceVerdict::Allow if rule.nft.contains("meta nfproto") => {
            format!("profile {profile} is in internet mode and {dst} is public")
        }
        TraceVerdict::Allow => format!("rule {chain}#{} accepts it", rule.index),
        _ if chain.ends_with("-in") => "traffic between sandboxes is never allowed".to_owned(),
        _ if chain.ends_with("-guard") && rule.nft.contains("nfproto ipv6") => {
            format!("profile {profile} has no IPv6")
        }
        _ if chain.ends_with("-guard")
            || chain == names::SHARED_GUARD
            || chain.ends_with("-arrival")
            || chain == names::PREROUTING =>
        {
            "the source or destination is one no sandbox may use".to_owned()
        }
        _ if chain.ends_with("-host") => format!(
            "the gateway of profile {profile} takes only DHCP, DNS and neighbour discovery from its sandboxes"
        ),
        _ if rule.nft.contains("dport 53 ") => {
            "DNS leaves a sandbox only to its gateway resolver".to_owned()
        }
        _ => format!("nothing in profile {profile} allows it, so its block action applies"),
    }
}

fn or_list(entries: &[String], none: &str) -> String {
    if entries.is_empty() {
        return none.to_owned();
    }
    entries
        .iter()
        .map(|e| format!("`{e}`"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The verdict word of a trace.
pub fn verdict_word(v: TraceVerdict) -> &'static str {
    match v {
        TraceVerdict::Allow => "allow",
        TraceVerdict::Block => "block",
        TraceVerdict::NotCorrals => "not corral's",
    }
}

/// One line: verdict, what was asked, the deciding rule and why.
pub fn one_line(trace: &Trace, asked: &str) -> String {
    let by = trace.rule.as_ref().map_or_else(
        || "no rule".to_owned(),
        |r| format!("{}#{} `{}`", r.chain, r.index, r.nft),
    );
    format!(
        "{} {asked} from profile {}: {by}: {}",
        verdict_word(trace.verdict),
        trace.profile.as_deref().unwrap_or("-"),
        reason(trace)
    )
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
