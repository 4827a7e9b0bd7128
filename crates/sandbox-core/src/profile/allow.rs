//! Allow entries: `host`, `*.suffix`, address or CIDR, each with an optional
//! port or port range and protocol.
//!
//! Text form (used by `corral.toml` and `networks.conf`):
//! `api.example.com`, `*.example.com:443`, `203.0.113.0/24:8000-8100/tcp`,
//! `[2001:db8::1]:443/udp`, `2001:db8::/32`.

use std::fmt;
use std::str::FromStr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::names::HostName;

/// Transport protocol an entry is limited to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP only.
    Tcp,
    /// UDP only.
    Udp,
}

/// An inclusive port range; a single port has `start == end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PortRange {
    start: u16,
    end: u16,
}

/// What an allow entry points at.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AllowTarget {
    /// One host name, resolved (A and AAAA) at apply time and by the gateway resolver.
    Host(HostName),
    /// `*.suffix`: any subdomain of the suffix (the gateway resolver admits them).
    Wildcard(HostName),
    /// An address (as a /32 or /128) or a CIDR.
    Net(IpNet),
}

/// One allow entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AllowEntry {
    /// Destination.
    pub target: AllowTarget,
    /// Optional destination port or range; `None` means every port.
    pub ports: Option<PortRange>,
    /// Optional protocol; `None` means TCP and UDP (and, without ports, every protocol).
    pub protocol: Option<Protocol>,
}

/// Why an allow entry's text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "allow entry `{}` is invalid: {}",
    crate::text::Shown(entry),
    crate::text::Shown(reason)
)]
pub struct AllowParseError {
    /// The entry as written.
    pub entry: String,
    /// What is wrong and what was expected.
    pub reason: String,
}

/// Why a port range was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PortRangeError {
    /// Port 0 cannot be a destination.
    #[error("port 0 is not a destination port; use 1 to 65535")]
    Zero,
    /// The first port is above the last.
    #[error("port range {start}-{end} is backwards; write the lower port first")]
    Backwards {
        /// The first port as written.
        start: u16,
        /// The last port as written.
        end: u16,
    },
}

impl PortRange {
    /// A range `start..=end`; refused when `start` is 0 or `start > end`.
    pub fn new(start: u16, end: u16) -> Result<Self, PortRangeError> {
        if start == 0 {
            return Err(PortRangeError::Zero);
        }
        if start > end {
            return Err(PortRangeError::Backwards { start, end });
        }
        Ok(Self { start, end })
    }

    /// A single port.
    pub fn single(port: u16) -> Result<Self, PortRangeError> {
        Self::new(port, port)
    }

    /// First port.
    pub fn start(&self) -> u16 {
        self.start
    }

    /// Last port (inclusive).
    pub fn end(&self) -> u16 {
        self.end
    }

    /// True when `port` is in the range.
    pub fn contains(&self, port: u16) -> bool {
        (self.start..=self.end).contains(&port)
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.start == self.end {
            write!(f, "{}", self.start)
        } else {
            write!(f, "{}-{}", self.start, self.end)
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        })
    }
}

impl fmt::Display for AllowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A port after an IPv6 address or CIDR needs brackets to be parsed back.
        let bracket =
            self.ports.is_some() && matches!(&self.target, AllowTarget::Net(IpNet::V6(_)));
        match &self.target {
            AllowTarget::Host(h) => write!(f, "{h}")?,
            AllowTarget::Wildcard(h) => write!(f, "*.{h}")?,
            AllowTarget::Net(net) => {
                let single = net.prefix_len() == net.max_prefix_len();
                match (single, bracket) {
                    (true, true) => write!(f, "[{}]", net.addr())?,
                    (true, false) => write!(f, "{}", net.addr())?,
                    (false, true) => write!(f, "[{net}]")?,
                    (false, false) => write!(f, "{net}")?,
                }
            }
        }
        if let Some(ports) = self.ports {
            write!(f, ":{ports}")?;
        }
        if let Some(proto) = self.protocol {
            write!(f, "/{proto}")?;
        }
        Ok(())
    }
}

impl FromStr for AllowEntry {
    type Err = AllowParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = |reason: String| AllowParseError {
            entry: text.to_owned(),
            reason,
        };
        let text_trim = text.trim();
        if text_trim.is_empty() {
            return Err(fail(
                "it is empty; expected a host, `*.suffix`, an address or a CIDR".to_owned(),
            ));
        }
        // Protocol suffix: `/tcp` or `/udp` (a CIDR's `/24` is numeric, so no clash).
        let (rest, protocol) = match text_trim.rsplit_once('/') {
            Some((head, "tcp")) => (head, Some(Protocol::Tcp)),
            Some((head, "udp")) => (head, Some(Protocol::Udp)),
            Some((_, tail)) if tail.chars().any(|c| c.is_ascii_alphabetic()) => {
                return Err(fail(format!(
                    "protocol `{tail}` is not supported; use `/tcp` or `/udp`"
                )));
            }
            _ => (text_trim, None),
        };
        let (target_text, port_text) = split_port(rest).map_err(&fail)?;
        let ports = match port_text {
            None => None,
            Some(p) => Some(parse_ports(p).map_err(&fail)?),
        };
        let target = parse_target(target_text).map_err(&fail)?;
        Ok(AllowEntry {
            target,
            ports,
            protocol,
        })
    }
}

/// Split `target[:ports]`, honouring `[v6]:port` and bare IPv6 (many colons).
fn split_port(text: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(inner) = text.strip_prefix('[') {
        let (addr, after) = inner
            .split_once(']')
            .ok_or_else(|| "`[` without a closing `]`".to_owned())?;
        return match after {
            "" => Ok((addr, None)),
            _ => match after.strip_prefix(':') {
                Some(p) => Ok((addr, Some(p))),
                None => Err(format!("unexpected `{after}` after `]`; expected `:port`")),
            },
        };
    }
    match text.matches(':').count() {
        0 => Ok((text, None)),
        1 => {
            let (t, p) = text.split_once(':').unwrap_or((text, ""));
            Ok((t, Some(p)))
        }
        _ => Ok((text, None)),
    }
}

fn parse_ports(text: &str) -> Result<PortRange, String> {
    let parse_one = |p: &str| -> Result<u16, String> {
        p.parse::<u16>()
            .map_err(|_| format!("port `{p}` is not a number from 1 to 65535"))
    };
    match text.split_once('-') {
        Some((a, b)) => PortRange::new(parse_one(a)?, parse_one(b)?).map_err(|e| e.to_string()),
        None => PortRange::single(parse_one(text)?).map_err(|e| e.to_string()),
    }
}

fn parse_target(text: &str) -> Result<AllowTarget, String> {
    if let Some(suffix) = text.strip_prefix("*.") {
        let host = HostName::new(suffix).map_err(|e| e.to_string())?;
        return Ok(AllowTarget::Wildcard(host));
    }
    if text.contains('*') {
        return Err("a wildcard must be a leading `*.` followed by a domain".to_owned());
    }
    if let Ok(net) = text.parse::<IpNet>() {
        if net.trunc() != net {
            return Err(format!(
                "CIDR `{net}` has host bits set; did you mean `{}`?",
                net.trunc()
            ));
        }
        return Ok(AllowTarget::Net(net));
    }
    if let Ok(addr) = text.parse::<core::net::IpAddr>() {
        return Ok(AllowTarget::Net(IpNet::from(addr)));
    }
    if text.contains('/') {
        return Err(format!("`{text}` is not a valid CIDR"));
    }
    HostName::new(text)
        .map(AllowTarget::Host)
        .map_err(|e| e.to_string())
}

impl TryFrom<String> for AllowEntry {
    type Error = AllowParseError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(text: &str) {
        let entry: AllowEntry = text.parse().unwrap();
        assert_eq!(entry.to_string(), text, "round trip of {text}");
    }

    #[test]
    fn round_trips() {
        for t in [
            "api.example.com",
            "*.example.com:443",
            "203.0.113.0/24:8000-8100/tcp",
            "[2001:db8::1]:443/udp",
            "2001:db8::/32",
            "[2001:db8::/32]:443",
            "192.0.2.7",
            "192.0.2.7:53/udp",
            "2001:db8::1",
        ] {
            rt(t);
        }
    }

    #[test]
    fn refusals() {
        let e = "x.com:0".parse::<AllowEntry>().unwrap_err();
        assert!(e.reason.contains("port 0"), "{e}");
        let e = "x.com:90-80".parse::<AllowEntry>().unwrap_err();
        assert!(e.reason.contains("backwards"), "{e}");
        let e = "x.com:70000".parse::<AllowEntry>().unwrap_err();
        assert!(e.reason.contains("1 to 65535"), "{e}");
        let e = "10.0.0.1/8".parse::<AllowEntry>().unwrap_err();
        assert!(e.reason.contains("host bits"), "{e}");
        let e = "x.com/sctp".parse::<AllowEntry>().unwrap_err();
        assert!(e.reason.contains("/tcp"), "{e}");
        assert!("foo*.com".parse::<AllowEntry>().is_err());
        assert!("under_score.com".parse::<AllowEntry>().is_err());
    }
}
