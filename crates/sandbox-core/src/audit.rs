//! What the host saw a sandbox's traffic do: the network half of the audit
//! trail (the lifecycle half is the service's event log). Records are
//! made on the host only — from the kernel's drop log and the gateway's
//! resolver — so nothing inside a sandbox can write or forge one.
//!
//! Each serialises as one JSON object tagged by `event`, the same tag the
//! lifecycle events use, so one stream carries both (docs/json-schema.md).

use core::net::IpAddr;

use serde::{Deserialize, Serialize};

/// One network decision the host made for a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum NetRecord {
    /// A packet corral's rules blocked.
    Blocked(Blocked),
    /// Blocked packets a profile's log limit kept out of the log.
    Suppressed {
        /// The profile.
        profile: String,
        /// Packets blocked but not logged since the previous record.
        packets: u64,
    },
    /// The gateway's resolver answered a name.
    DnsAnswered(DnsDecision),
    /// The gateway's resolver refused a name (not on the profile's list).
    DnsRefused(DnsDecision),
    /// DNS decisions of one asker over its per-read budget: counted, not
    /// recorded one by one (a flood of lookups cannot flood the trail).
    DnsSuppressed {
        /// The profile whose gateway decided.
        profile: String,
        /// The asker's address.
        src: IpAddr,
        /// Decisions not recorded since the previous record.
        decisions: u64,
    },
    /// Addresses the gateway resolver answered but could not add to a
    /// learned set because it was full (the profile's `learned_max`): the
    /// kernel refused them, the set kept what it had.
    LearnRefused {
        /// The profile.
        profile: String,
        /// The learned set.
        set: String,
        /// Adds refused since the previous record.
        addresses: u64,
    },
}

impl NetRecord {
    /// The sandbox the record is about, when it was attributed to one.
    pub fn sandbox(&self) -> Option<&str> {
        match self {
            NetRecord::Blocked(b) => b.sandbox.as_deref(),
            NetRecord::DnsAnswered(d) | NetRecord::DnsRefused(d) => d.sandbox.as_deref(),
            NetRecord::Suppressed { .. }
            | NetRecord::DnsSuppressed { .. }
            | NetRecord::LearnRefused { .. } => None,
        }
    }

    /// The profile whose rules or resolver decided.
    pub fn profile(&self) -> &str {
        match self {
            NetRecord::Blocked(b) => &b.profile,
            NetRecord::DnsAnswered(d) | NetRecord::DnsRefused(d) => &d.profile,
            NetRecord::Suppressed { profile, .. }
            | NetRecord::DnsSuppressed { profile, .. }
            | NetRecord::LearnRefused { profile, .. } => profile,
        }
    }
}

/// A change to who may use corral (`corral grant`, `corral revoke`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AccessRecord {
    /// A user was granted sandbox rights (the restricted tier).
    Granted {
        /// The user's name.
        user: String,
        /// Their uid.
        uid: u32,
        /// The Incus project their sandboxes go in.
        project: String,
    },
    /// A user's grant was revoked (they are refused from the next request).
    Revoked {
        /// The user's name.
        user: String,
        /// Their uid.
        uid: u32,
        /// True when their sandboxes and project were deleted too.
        purged: bool,
        /// The sandboxes deleted with them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        deleted: Vec<String>,
    },
}

/// A blocked packet's header, and the rule that blocked it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    /// The sandbox that sent it (`None`: its source is bound to no known
    /// sandbox, e.g. a forged address — the guard rules name that).
    pub sandbox: Option<String>,
    /// The profile whose rules blocked it.
    pub profile: String,
    /// Stable id of the deciding rule (`<chain>/<what>`, e.g.
    /// `dev-out/unlisted`), the same across applies of the same config.
    pub rule: String,
    /// Source address as sent.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Transport protocol: `tcp`, `udp`, `icmp`, `icmpv6`, or the number.
    pub protocol: String,
    /// Source port (TCP, UDP, SCTP, UDP-Lite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<u16>,
    /// Destination port (TCP, UDP, SCTP, UDP-Lite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
    /// `drop` or `reject`.
    pub verdict: String,
}

/// A name the gateway's resolver was asked, and what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsDecision {
    /// The sandbox that asked (`None`: not attributed).
    pub sandbox: Option<String>,
    /// The profile whose gateway answered.
    pub profile: String,
    /// The asker's address.
    pub src: IpAddr,
    /// The name asked, lower case, without the final dot.
    pub name: String,
    /// The query type (`A`, `AAAA`, ...).
    pub qtype: String,
    /// The addresses answered (empty when refused), at most the first
    /// few dozen of a long answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<IpAddr>,
    /// Addresses of the answer beyond those recorded in `addresses`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_tagged_like_lifecycle_events() {
        let r = NetRecord::Blocked(Blocked {
            sandbox: Some("a".into()),
            profile: "dev".into(),
            rule: "dev-out/unlisted".into(),
            src: "10.90.0.5".parse().unwrap(),
            dst: "192.0.2.1".parse().unwrap(),
            protocol: "tcp".into(),
            sport: Some(40000),
            dport: Some(443),
            verdict: "drop".into(),
        });
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["event"], "blocked");
        assert_eq!(json["rule"], "dev-out/unlisted");
        assert_eq!(serde_json::from_value::<NetRecord>(json).unwrap(), r);
        let s = NetRecord::Suppressed {
            profile: "dev".into(),
            packets: 7,
        };
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["event"], "suppressed");
        assert_eq!(s.sandbox(), None);
        assert_eq!(s.profile(), "dev");
    }
}
