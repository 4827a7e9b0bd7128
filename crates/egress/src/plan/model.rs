//! The nftables data model of a plan: tables of sets and chains, chains of
//! rules, rules as a list of matches, an optional counter and one verdict.
//!
//! The model is deliberately small: exactly the matches corral needs, each
//! with one meaning. The same values are rendered to `nft -f` text
//! (`plan::render`) and encoded as netlink expressions (`nft::expr`), so the
//! two paths cannot drift apart in what they express.

use std::net::IpAddr;

use corral_sandbox_core::PortRange;
use ipnet::IpNet;
use serde::Serialize;

use super::keyed::{Field, KeyedSetPlan, Limit};
pub use super::ranges::{AddrRange, merge_ranges};
pub(crate) use super::ranges::{from_u128, max_value, to_u128};
use super::vmap::{MapField, VmapPlan};

/// The one table name corral owns, in both families.
pub const TABLE_NAME: &str = "corral";

/// nftables family of a corral table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TableFamily {
    /// `inet`: IPv4 and IPv6 (filter and nat).
    Inet,
    /// `bridge`: frames between bridge ports.
    Bridge,
}

impl TableFamily {
    /// The family keyword of `nft` syntax.
    pub fn keyword(self) -> &'static str {
        match self {
            TableFamily::Inet => "inet",
            TableFamily::Bridge => "bridge",
        }
    }

    /// The `NFPROTO_*` number netlink uses for the family.
    pub fn nfproto(self) -> u16 {
        match self {
            TableFamily::Inet => libc::NFPROTO_INET as u16,
            TableFamily::Bridge => libc::NFPROTO_BRIDGE as u16,
        }
    }
}

/// Address family of a set key or an address match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AddrFamily {
    /// IPv4 (`ipv4_addr`).
    V4,
    /// IPv6 (`ipv6_addr`).
    V6,
}

impl AddrFamily {
    /// The family of an address.
    pub fn of(addr: IpAddr) -> Self {
        match addr {
            IpAddr::V4(_) => AddrFamily::V4,
            IpAddr::V6(_) => AddrFamily::V6,
        }
    }

    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            AddrFamily::V4 => 4,
            AddrFamily::V6 => 16,
        }
    }
}

/// One table: sets first (rules look them up), then chains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TablePlan {
    /// Family (`inet` or `bridge`).
    pub family: TableFamily,
    /// Table name; always [`TABLE_NAME`].
    pub name: String,
    /// Named sets, in declaration order.
    pub sets: Vec<SetPlan>,
    /// Keyed sets (concatenated keys, meters), after `sets`.
    pub keyed_sets: Vec<KeyedSetPlan>,
    /// Verdict maps the base chains dispatch through (see
    /// [`super::vmap`]), after the keyed sets.
    pub maps: Vec<VmapPlan>,
    /// Chains: regular chains first, then base chains that jump to them.
    pub chains: Vec<ChainPlan>,
}

/// How a set holds its elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SetKind {
    /// `flags interval`: address ranges (CIDRs), filled by corral.
    Interval,
    /// `flags timeout`: single addresses added at run time by the gateway
    /// resolver (dnsmasq's nftset), empty in the plan.
    Dynamic,
}

/// A named set of addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetPlan {
    /// Set name (`reserved4`, `<profile>-allow4`, `<profile>-dns6`, ...).
    pub name: String,
    /// Key type.
    pub family: AddrFamily,
    /// Interval or dynamic.
    pub kind: SetKind,
    /// Sorted, merged, non-adjacent inclusive ranges (always empty for
    /// dynamic sets).
    pub elements: Vec<AddrRange>,
    /// Default element timeout (dynamic sets): an element added without a
    /// timeout of its own expires after this long. `None` for interval sets.
    pub timeout: Option<std::time::Duration>,
    /// Most elements the kernel holds (`size`; dynamic sets, from the
    /// profile's `learned_max`): an add to a full set fails and changes
    /// nothing already there. `None` for interval sets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u32>,
    /// Keyed by `source . address` (dynamic sets of profiles on corral's
    /// gateway): an element opens the address only to the sandbox address
    /// that resolved it, not to the whole profile.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
}

impl SetPlan {
    /// The key's parts: one address, or for a pinned set the sandbox's
    /// address and then the learned one.
    pub fn key(&self) -> Vec<super::KeyPart> {
        if self.pinned {
            Self::pinned_key(self.family)
        } else {
            vec![address_part(self.family)]
        }
    }

    /// The key of a pinned set of `family`'s addresses.
    pub fn pinned_key(family: AddrFamily) -> Vec<super::KeyPart> {
        vec![address_part(family), address_part(family)]
    }
}

pub(crate) fn address_part(family: AddrFamily) -> super::KeyPart {
    match family {
        AddrFamily::V4 => super::KeyPart::Ipv4,
        AddrFamily::V6 => super::KeyPart::Ipv6,
    }
}

/// A base chain's hook, as nftables names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Hook {
    /// Packets (or frames) as they arrive, before routing or bridging
    /// decisions (and, for bridged frames, before the bridge learns their
    /// source address).
    Prerouting,
    /// Packets to the host itself.
    Input,
    /// Packets (or bridged frames) passing through.
    Forward,
    /// Packets leaving (used for NAT).
    Postrouting,
}

impl Hook {
    /// The hook keyword of `nft` syntax.
    pub fn keyword(self) -> &'static str {
        match self {
            Hook::Prerouting => "prerouting",
            Hook::Input => "input",
            Hook::Forward => "forward",
            Hook::Postrouting => "postrouting",
        }
    }

    /// The `NF_INET_*` / `NF_BR_*` hook number (the numbers coincide for
    /// these hooks).
    pub fn number(self) -> u32 {
        match self {
            Hook::Prerouting => libc::NF_INET_PRE_ROUTING as u32,
            Hook::Input => libc::NF_INET_LOCAL_IN as u32,
            Hook::Forward => libc::NF_INET_FORWARD as u32,
            Hook::Postrouting => libc::NF_INET_POST_ROUTING as u32,
        }
    }
}

/// Chain type of a base chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChainType {
    /// `type filter`.
    Filter,
    /// `type nat`.
    Nat,
}

impl ChainType {
    /// The type keyword of `nft` syntax (also what netlink carries).
    pub fn keyword(self) -> &'static str {
        match self {
            ChainType::Filter => "filter",
            ChainType::Nat => "nat",
        }
    }
}

/// What makes a chain a base chain. Policy is always `accept`: corral
/// governs only traffic of its own bridges, everything else passes untouched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct BaseChain {
    /// Chain type.
    pub kind: ChainType,
    /// Hook.
    pub hook: Hook,
    /// Priority.
    pub priority: i32,
}

/// One chain and its rules, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainPlan {
    /// Chain name.
    pub name: String,
    /// `Some` for base chains.
    pub base: Option<BaseChain>,
    /// The profile whose traffic the chain's verdicts count (per-profile
    /// chains); `None` for base chains.
    pub profile: Option<String>,
    /// Rules in evaluation order.
    pub rules: Vec<RulePlan>,
}

/// A transport protocol as `meta l4proto` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum L4Proto {
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// ICMPv6 (58).
    Icmpv6,
}

impl L4Proto {
    /// IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            L4Proto::Tcp => libc::IPPROTO_TCP as u8,
            L4Proto::Udp => libc::IPPROTO_UDP as u8,
            L4Proto::Icmpv6 => libc::IPPROTO_ICMPV6 as u8,
        }
    }

    /// `nft` keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            L4Proto::Tcp => "tcp",
            L4Proto::Udp => "udp",
            L4Proto::Icmpv6 => "ipv6-icmp",
        }
    }
}

/// One match of a rule. All matches of a rule must hold (logical and).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    /// `iifname "X"`.
    IifName(String),
    /// `oifname "X"`.
    OifName(String),
    /// `oifname != "X"`.
    OifNameNot(String),
    /// `ct state established,related`.
    CtEstablishedRelated,
    /// `ct state invalid`: conntrack could not place the packet in a flow.
    CtInvalid,
    /// `ct direction original` / `ct direction reply`.
    CtDirection(CtDir),
    /// `iifname != "X"`.
    IifNameNot(String),
    /// `fib saddr type X`: what the host's routing table says the source
    /// address is (local, broadcast, multicast, ...).
    FibSaddrType(AddrType),
    /// `fib saddr type != X`.
    FibSaddrTypeNot(AddrType),
    /// `meta nfproto ipv4` / `meta nfproto ipv6`.
    NfProto(AddrFamily),
    /// `meta l4proto X`.
    L4Proto(L4Proto),
    /// `th dport N` or `th dport A-B` (needs an `L4Proto` match before it).
    Dport(PortRange),
    /// `icmpv6 type N` (needs `L4Proto(Icmpv6)` before it).
    Icmpv6Type(u8),
    /// `ip daddr @set` / `ip6 daddr @set`.
    DaddrInSet(AddrFamily, String),
    /// `ip saddr @set` / `ip6 saddr @set`.
    SaddrInSet(AddrFamily, String),
    /// `iifgroup N`: the input interface is in netdev group N.
    IifGroup(u32),
    /// `oifgroup N`: the output interface is in netdev group N.
    OifGroup(u32),
    /// `ip daddr A` / `ip6 daddr A`.
    Daddr(IpAddr),
    /// `ip saddr NET` / `ip6 saddr NET` (in the bridge family the
    /// protocol check is on the ethertype).
    SaddrIn(IpNet),
    /// `ip daddr NET` / `ip6 daddr NET`.
    DaddrIn(IpNet),
    /// `ip saddr != NET` / `ip6 saddr != NET`.
    SaddrNotIn(IpNet),
    /// `arp daddr ip NET` (bridge family: ARP asking for an address in NET).
    ArpTargetIn(ipnet::Ipv4Net),
    /// `arp saddr ip NET` (bridge family: ARP from an address in NET).
    ArpSenderIn(ipnet::Ipv4Net),
    /// `ether type X` (bridge family): the ethertype as the frame carries
    /// it, so an 802.1Q tag shows as 0x8100 even when the kernel has moved
    /// the tag out of the frame. Network-layer matches after it in the same
    /// rule need no protocol check of their own.
    EtherType(u16),
    /// `th sport N` or `th sport A-B` (needs an `L4Proto` match before it).
    Sport(PortRange),
    /// `ct state new`.
    CtNew,
    /// `ct state related`: an ICMP error (or an expected flow) that
    /// conntrack ties to an existing flow.
    CtRelated,
    /// `ct original ip saddr NET` / `ct original ip6 saddr NET`: the flow
    /// this packet belongs to (for a related packet: the flow it is related
    /// to) was started from an address in NET.
    CtOrigSaddrIn(IpNet),
    /// `tcp flags & (fin|syn|rst|ack) != syn` (needs `L4Proto(Tcp)` before
    /// it): anything but a plain SYN, the one packet that may start a TCP
    /// flow.
    TcpNotSyn,
    /// `F1 . F2 @set` (or `!= @set` when `negate`): the fields, concatenated,
    /// are (not) a key of the keyed set.
    InSet {
        /// Fields, in the set's key order.
        fields: Vec<Field>,
        /// Keyed set name.
        set: String,
        /// Match when the key is absent.
        negate: bool,
    },
    /// `@nh,O,L VALUE`: raw bytes equal `value` (the field is raw).
    Bytes {
        /// Where the bytes are.
        field: Field,
        /// What they must be.
        value: Vec<u8>,
    },
    /// `@nh,O,L & MASK != 0`: some bit of `mask` is set in the raw
    /// field (an IPv4 fragment: more-fragments or a fragment offset).
    BitsSet {
        /// Where the bits are (raw).
        field: Field,
        /// Which bits; as long as the field.
        mask: Vec<u8>,
    },
    /// `exthdr frag exists`: an IPv6 packet with a fragment header
    /// anywhere in its chain of extension headers.
    Ip6Fragment,
    /// `update @set { F limit rate over R/second burst B packets }` or
    /// `add @set { F ct count over N }`: holds when this key is over its
    /// limit.
    Meter {
        /// Meter (keyed set of kind `Meter`) name.
        set: String,
        /// The key fields.
        fields: Vec<Field>,
        /// The limit per key.
        limit: Limit,
    },
}

/// A conntrack direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CtDir {
    /// The direction of the packet that created the entry.
    Original,
    /// The answer direction.
    Reply,
}

impl CtDir {
    /// `IP_CT_DIR_*`.
    pub fn number(self) -> u8 {
        match self {
            CtDir::Original => 0,
            CtDir::Reply => 1,
        }
    }

    /// `nft` keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            CtDir::Original => "original",
            CtDir::Reply => "reply",
        }
    }
}

/// An address type of the routing table (`RTN_*`), as `fib ... type` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AddrType {
    /// An ordinary address reached through a route (`RTN_UNICAST`).
    Unicast,
    /// An address of the host itself (`RTN_LOCAL`).
    Local,
    /// A broadcast address (`RTN_BROADCAST`; `0.0.0.0` reads as one too).
    Broadcast,
    /// A multicast address (`RTN_MULTICAST`).
    Multicast,
}

impl AddrType {
    /// `RTN_*` value.
    pub fn number(self) -> u32 {
        match self {
            AddrType::Unicast => 1,
            AddrType::Local => 2,
            AddrType::Broadcast => 3,
            AddrType::Multicast => 5,
        }
    }

    /// `nft` keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            AddrType::Unicast => "unicast",
            AddrType::Local => "local",
            AddrType::Broadcast => "broadcast",
            AddrType::Multicast => "multicast",
        }
    }
}

/// How to reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectKind {
    /// `reject with tcp reset` (needs `meta l4proto tcp` before it).
    TcpReset,
    /// `reject with icmpx admin-prohibited`.
    IcmpxAdminProhibited,
}

/// The verdict (or terminal statement) of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// `accept`.
    Accept,
    /// `drop`.
    Drop,
    /// `reject with ...`.
    Reject(RejectKind),
    /// `jump CHAIN`.
    Jump(String),
    /// `masquerade`.
    Masquerade,
    /// `return`: leave this chain, continue after the jump.
    Return,
    /// `FIELD vmap @map`: jump to the chain the map holds for the
    /// packet's field; go on with the next rule when it holds none.
    Vmap {
        /// The field looked up.
        field: MapField,
        /// The verdict map.
        map: String,
    },
}

impl Verdict {
    /// How this verdict counts in per-profile status.
    pub fn class(&self) -> VerdictClass {
        match self {
            Verdict::Accept => VerdictClass::Accepted,
            Verdict::Drop | Verdict::Reject(_) => VerdictClass::Blocked,
            Verdict::Jump(_) | Verdict::Masquerade | Verdict::Return | Verdict::Vmap { .. } => {
                VerdictClass::Other
            }
        }
    }
}

/// What a verdict means for counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VerdictClass {
    /// The packet was let through.
    Accepted,
    /// The packet was dropped or rejected.
    Blocked,
    /// Neither (jump, masquerade): not counted in status.
    Other,
}

/// One rule: matches, then a counter, then the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct RulePlan {
    /// Matches, in evaluation order.
    pub matches: Vec<Match>,
    /// Whether a counter precedes the verdict (always true in plans corral
    /// builds; kept explicit so the invariant is testable).
    pub counter: bool,
    /// The verdict.
    pub verdict: Verdict,
    /// A copy of the packet's header to the drop log, after the counter
    /// and before the verdict (see [`super::droplog`]). Never changes the
    /// verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<LogTap>,
}

/// `log prefix "PREFIX" group G snaplen S`: the packet's first `snaplen`
/// bytes (its headers) to NFLOG group `group`, tagged with `prefix`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct LogTap {
    /// `<rule id>:<verdict>` (see [`super::droplog::prefix`]).
    pub prefix: String,
    /// NFLOG group.
    pub group: u16,
    /// Bytes of the packet copied.
    pub snaplen: u32,
}

impl RulePlan {
    /// A rule with a counter.
    pub fn counted(matches: Vec<Match>, verdict: Verdict) -> Self {
        Self {
            matches,
            counter: true,
            verdict,
            log: None,
        }
    }
}
