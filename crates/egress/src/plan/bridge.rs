//! `table bridge corral`: frames on the ports of corral's bridges.
//!
//! Both base chains sit at priority −200 (`filter` of the bridge family),
//! below every hook br_netfilter registers (−1 and 0): the kernel orders a
//! hook's functions by priority, so these chains run first whatever was
//! registered first and whether br_netfilter is loaded or not. (At priority
//! 0 a chain registered before br_netfilter's hooks — corral's own apply
//! order, and every boot — is skipped for every frame br_netfilter hands
//! to the IP hooks.)
//!
//! - `prerouting` (every frame as it arrives, before the bridge learns its
//!   source MAC): a bound port (`@ports`) goes through `port-in`: the
//!   frame's source MAC must be the port's; ARP must carry the port's
//!   sender pair (or sender 0.0.0.0, a probe); IPv4 and IPv6 must come
//!   from the port's addresses (IPv4 0.0.0.0 only as a DHCP client, IPv6
//!   `::` only for duplicate address detection); neighbour advertisements
//!   may only claim the port's addresses, and neighbour discovery
//!   link-layer options must be the port's MAC; router advertisements,
//!   redirects and DHCP server messages are dropped; DHCP requests must
//!   name the port's MAC as client; any other ethertype — 802.1Q tags and
//!   802.1Q-in-802.1Q included — is dropped. DHCP and DNS are rate-limited
//!   per port. IPv4 fragments and IPv6 packets with a fragment header are
//!   dropped first: a rule cannot read a transport field a fragment lacks.
//!   A port corral found on one of its bridges without a binding
//!   (`@quarantine`) may only send unfragmented DHCP requests, never from
//!   a bound MAC nor naming one as `chaddr`.
//! - `forward` (frames from one port to another): every frame from or to a
//!   bound or quarantined port is dropped, whatever it carries; then, for
//!   ports corral does not know yet, frames carrying a profile's addresses
//!   (`<profile>-ports`, reached through verdict maps keyed by the
//!   profiles' subnets: `super::unknown_ports`).
//! - `postrouting` (every frame leaving by a port, the gateway's own
//!   included): a DHCP server message leaves by a bound port only when its
//!   `chaddr` is that port's MAC, and never by a quarantined port.
//!
//! The kernels we run on lack `CONFIG_NFT_BRIDGE_META` (`meta ibrname`
//! fails with EOPNOTSUPP), so a rule cannot name the bridge: ports are
//! named instead (bound ports, and ports found on corral's bridges), and
//! for ports not named yet the profiles' subnets identify their frames.

use corral_sandbox_core::ProfileSet;
use ipnet::{IpNet, Ipv4Net};

use super::bindings::PortBinding;
use super::build::base;
use super::keyed::{Field, KeyPart, KeyValue, KeyedKind, KeyedSetPlan, Limit, PayloadBase};
use super::model::{
    AddrFamily, ChainPlan, ChainType, Hook, L4Proto, Match, RulePlan, TABLE_NAME, TableFamily,
    TablePlan, Verdict,
};
use super::{droplog, names};
use corral_sandbox_core::PortRange;

/// Priority of both base chains: the bridge family's `filter`, below
/// br_netfilter's hooks (−1, 0).
pub const PRIORITY: i32 = -200;
/// The lowest priority br_netfilter registers a bridge hook at
/// (`NF_BR_PRI_BRNF - 1`): a chain must sit below it to see every frame.
pub const BR_NETFILTER_LOWEST: i32 = -1;

/// DHCP messages a port may send per second (after [`DHCP_BURST`]).
pub const DHCP_RATE: u64 = 5;
/// DHCP messages a port may send at once.
pub const DHCP_BURST: u32 = 20;
/// DNS queries over UDP a port may send per second (after [`DNS_BURST`]).
pub const DNS_RATE: u64 = 50;
/// DNS queries over UDP a port may send at once.
pub const DNS_BURST: u32 = 500;
/// How long a meter remembers an idle port.
pub const METER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Set names of the bridge table.
pub mod sets {
    /// Bound ports (interface names).
    pub const PORTS: &str = "ports";
    /// Ports found on corral's bridges without a binding.
    pub const QUARANTINE: &str = "quarantine";
    /// Every bound MAC.
    pub const MACS: &str = "macs";
    /// Port . MAC.
    pub const PORT_MAC: &str = "port-mac";
    /// Port . MAC . IPv4 address.
    pub const PORT_IP4: &str = "port-ip4";
    /// Port . MAC . IPv6 address (global and link-local).
    pub const PORT_IP6: &str = "port-ip6";
    /// Port . MAC . neighbour advertisement target (raw, same elements as
    /// `port-ip6`).
    pub const PORT_ND_TARGET: &str = "port-nd-target";
    /// Port . link-layer address in an ND option or a DHCP request (raw,
    /// same elements as `port-mac`).
    pub const PORT_LLADDR: &str = "port-lladdr";
    /// Every bound MAC as a DHCP `chaddr` (raw, same elements as `macs`).
    pub const BOUND_CHADDR: &str = "bound-chaddr";
    /// Per-port DHCP rate meter.
    pub const DHCP_RATE: &str = "dhcp-rate";
    /// Per-port DNS rate meter.
    pub const DNS_RATE: &str = "dns-rate";
}

/// Chain names of the bridge table (besides the base chains and
/// `<profile>-ports`).
mod chains {
    pub const PREROUTING: &str = "prerouting";
    pub const PORT_IN: &str = "port-in";
    pub const PORT_ARP: &str = "port-arp";
    pub const PORT_IP4: &str = "port-ip4";
    pub const PORT_IP6: &str = "port-ip6";
    pub const PORT_IP6_UNSPEC: &str = "port-ip6-unspec";
    pub const PORT_NA: &str = "port-na";
    pub const PORT_NS: &str = "port-ns";
    pub const PORT_RS: &str = "port-rs";
    pub const QUARANTINE_IN: &str = "quarantine-in";
    pub const POSTROUTING: &str = "postrouting";
}

const ETH_IP: u16 = 0x0800;
const ETH_ARP: u16 = 0x0806;
const ETH_IP6: u16 = 0x86dd;

fn th(offset: u32, len: u32) -> Field {
    Field::Raw {
        base: PayloadBase::Transport,
        offset,
        len,
    }
}

fn nh(offset: u32, len: u32) -> Field {
    Field::Raw {
        base: PayloadBase::Network,
        offset,
        len,
    }
}

/// The neighbour advertisement target (ICMPv6 bytes 8..24).
fn nd_target() -> Field {
    th(8, 16)
}

/// A link-layer address option's address, the option starting at `at`.
fn option_mac(at: u32) -> Field {
    th(at + 2, 6)
}

/// `chaddr` of a DHCP message (UDP header 8 + BOOTP offset 28).
fn dhcp_chaddr() -> Field {
    th(36, 6)
}

/// An IPv4 fragment: more-fragments set or a fragment offset (the flags
/// and offset word, bytes 6..8 of the header, but the don't-fragment bit).
fn ip4_fragment() -> [Match; 2] {
    [
        Match::EtherType(ETH_IP),
        Match::BitsSet {
            field: nh(6, 2),
            mask: vec![0x3f, 0xff],
        },
    ]
}

/// An IPv6 packet with a fragment header.
fn ip6_fragment() -> [Match; 2] {
    [Match::EtherType(ETH_IP6), Match::Ip6Fragment]
}

fn port(p: u16) -> PortRange {
    // Callers pass fixed non-zero ports.
    PortRange::single(p).unwrap_or_else(|_| unreachable!("{p} is a valid port"))
}

fn r(matches: Vec<Match>, verdict: Verdict) -> RulePlan {
    RulePlan::counted(matches, verdict)
}

/// `rule`, a blocking rule of the shared chain `chain`, with its drop-log
/// twins (`l2-<chain>/<word>`, the per-port budget).
fn logged(chain: &str, word: &str, rule: RulePlan) -> Vec<RulePlan> {
    droplog::tap_l2(chain, word, vec![rule])
}

fn jump(c: &str) -> Verdict {
    Verdict::Jump(c.to_owned())
}

fn in_set(fields: Vec<Field>, set: &str) -> Match {
    Match::InSet {
        fields,
        set: set.to_owned(),
        negate: false,
    }
}

fn not_in_set(fields: Vec<Field>, set: &str) -> Match {
    Match::InSet {
        fields,
        set: set.to_owned(),
        negate: true,
    }
}

fn icmpv6(t: u8) -> [Match; 2] {
    [Match::L4Proto(L4Proto::Icmpv6), Match::Icmpv6Type(t)]
}

fn udp(dport: Option<u16>, sport: Option<u16>) -> Vec<Match> {
    let mut m = vec![Match::L4Proto(L4Proto::Udp)];
    m.extend(sport.map(|p| Match::Sport(port(p))));
    m.extend(dport.map(|p| Match::Dport(port(p))));
    m
}

fn meter(set: &str, per_second: u64, burst: u32) -> Match {
    Match::Meter {
        set: set.to_owned(),
        fields: vec![Field::IifName],
        limit: Limit::RateOver { per_second, burst },
    }
}

/// ICMPv6 payload length (the IPv6 header's, with no extension headers).
fn ip6_payload_len(n: u16) -> Match {
    Match::Bytes {
        field: nh(4, 2),
        value: n.to_be_bytes().to_vec(),
    }
}

/// Build `table bridge corral` for `profiles` with `bindings` (validated).
///
/// `cut_ports` (ports a forced apply cut) forward nothing either way.
pub(super) fn table(
    profiles: &ProfileSet,
    bindings: &[PortBinding],
    cut_ports: &[String],
) -> TablePlan {
    let mut keyed = keyed_sets(bindings);
    keyed.push(super::fail_closed::cut_ports_set(cut_ports));
    let mut t = TablePlan {
        family: TableFamily::Bridge,
        name: TABLE_NAME.to_owned(),
        sets: Vec::new(),
        keyed_sets: keyed,
        maps: Vec::new(),
        chains: Vec::new(),
    };
    if profiles.is_empty() {
        return t;
    }
    t.chains.extend(port_chains());
    t.keyed_sets.push(droplog::l2_meter_plan());
    let fwd = |word: &str, field: Field, set: &str| {
        logged(
            names::FORWARD,
            word,
            r(vec![in_set(vec![field], set)], Verdict::Drop),
        )
    };
    // Cut ports first: not even a frame carrying a planned profile's
    // addresses reaches that profile's `<p>-ports` from or to one.
    let mut forward = super::fail_closed::bridge_cut(true);
    forward.extend(
        [
            fwd("port-to-port", Field::IifName, sets::PORTS),
            fwd("port-to-port", Field::OifName, sets::PORTS),
            fwd("quarantined", Field::IifName, sets::QUARANTINE),
            fwd("quarantined", Field::OifName, sets::QUARANTINE),
        ]
        .concat(),
    );
    forward.extend(super::unknown_ports::dispatch(&mut t, profiles));
    t.chains.push(base(
        chains::PREROUTING,
        ChainType::Filter,
        Hook::Prerouting,
        PRIORITY,
        super::fail_closed::bridge_cut(false)
            .into_iter()
            .chain([
                r(
                    vec![in_set(vec![Field::IifName], sets::PORTS)],
                    jump(chains::PORT_IN),
                ),
                r(
                    vec![in_set(vec![Field::IifName], sets::QUARANTINE)],
                    jump(chains::QUARANTINE_IN),
                ),
            ])
            .collect(),
    ));
    t.chains.push(base(
        names::FORWARD,
        ChainType::Filter,
        Hook::Forward,
        PRIORITY,
        forward,
    ));
    t.chains.push(base(
        chains::POSTROUTING,
        ChainType::Filter,
        Hook::Postrouting,
        PRIORITY,
        dhcp_replies(),
    ));
    t
}

/// Frames leaving by a sandbox port, the gateway's own included (the
/// bridge's local output reaches postrouting too): a DHCP server message
/// goes only to the port whose bound MAC it names as `chaddr`, never to a
/// quarantined port, so a broadcast OFFER, ACK or NAK (which echo the
/// client's transaction id) reaches its client alone.
fn dhcp_replies() -> Vec<RulePlan> {
    // The compares first: every frame leaving by any port meets this
    // chain, and most fail on them before a set lookup.
    let reply = || [vec![Match::EtherType(ETH_IP)], udp(None, Some(67))].concat();
    let word = |rule| logged(chains::POSTROUTING, "dhcp-reply", rule);
    [
        word(r(
            [
                reply(),
                vec![in_set(vec![Field::OifName], sets::QUARANTINE)],
            ]
            .concat(),
            Verdict::Drop,
        )),
        word(r(
            [
                reply(),
                vec![in_set(vec![Field::OifName], sets::PORTS)],
                vec![not_in_set(
                    vec![Field::OifName, dhcp_chaddr()],
                    sets::PORT_LLADDR,
                )],
            ]
            .concat(),
            Verdict::Drop,
        )),
    ]
    .concat()
}

/// The keyed sets, their static elements from `bindings`.
fn keyed_sets(bindings: &[PortBinding]) -> Vec<KeyedSetPlan> {
    use KeyPart::{Ether, IfName, Ipv4, Ipv6};
    let meter_kind = KeyedKind::Meter {
        size: super::keyed::METER_SIZE,
        timeout: Some(METER_TIMEOUT),
    };
    let mut ports = KeyedSetPlan::new(sets::PORTS, vec![IfName], KeyedKind::Static);
    let quarantine = KeyedSetPlan::new(sets::QUARANTINE, vec![IfName], KeyedKind::Runtime);
    let mut macs = KeyedSetPlan::new(sets::MACS, vec![Ether], KeyedKind::Static);
    let mut port_mac = KeyedSetPlan::new(sets::PORT_MAC, vec![IfName, Ether], KeyedKind::Static);
    let mut ip4 = KeyedSetPlan::new(sets::PORT_IP4, vec![IfName, Ether, Ipv4], KeyedKind::Static);
    let mut ip6 = KeyedSetPlan::new(sets::PORT_IP6, vec![IfName, Ether, Ipv6], KeyedKind::Static);
    let mut target = KeyedSetPlan::new(
        sets::PORT_ND_TARGET,
        vec![IfName, Ether, KeyPart::Raw(nd_target())],
        KeyedKind::Static,
    );
    let mut lladdr = KeyedSetPlan::new(
        sets::PORT_LLADDR,
        vec![IfName, KeyPart::Raw(option_mac(24))],
        KeyedKind::Static,
    );
    let mut chaddr = KeyedSetPlan::new(
        sets::BOUND_CHADDR,
        vec![KeyPart::Raw(dhcp_chaddr())],
        KeyedKind::Static,
    );
    for b in bindings {
        let name = KeyValue::IfName(b.port.to_string());
        let mac = KeyValue::Ether(b.mac.octets());
        ports.elements.push(vec![name.clone()]);
        macs.elements.push(vec![mac.clone()]);
        chaddr.elements.push(vec![mac.clone()]);
        port_mac.elements.push(vec![name.clone(), mac.clone()]);
        lladdr.elements.push(vec![name.clone(), mac.clone()]);
        ip4.elements
            .push(vec![name.clone(), mac.clone(), KeyValue::V4(b.v4)]);
        for a in b.v6_addrs() {
            ip6.elements
                .push(vec![name.clone(), mac.clone(), KeyValue::V6(a)]);
            target
                .elements
                .push(vec![name.clone(), mac.clone(), KeyValue::V6(a)]);
        }
    }
    let mut all = vec![
        ports,
        quarantine,
        macs,
        port_mac,
        ip4,
        ip6,
        target,
        lladdr,
        chaddr,
        KeyedSetPlan::new(sets::DHCP_RATE, vec![IfName], meter_kind),
        KeyedSetPlan::new(sets::DNS_RATE, vec![IfName], meter_kind),
    ];
    for s in &mut all {
        s.elements.sort();
        s.elements.dedup();
    }
    all
}

fn port_chains() -> Vec<ChainPlan> {
    let plain = |name: &str, rules| ChainPlan {
        name: name.to_owned(),
        base: None,
        profile: None,
        rules,
    };
    let any_ip4 = Ipv4Net::new(std::net::Ipv4Addr::UNSPECIFIED, 32)
        .unwrap_or_else(|_| unreachable!("/32 is a valid prefix"));
    let unspec4 = IpNet::V4(any_ip4);
    let unspec6 = IpNet::V6(
        ipnet::Ipv6Net::new(std::net::Ipv6Addr::UNSPECIFIED, 128)
            .unwrap_or_else(|_| unreachable!("/128 is a valid prefix")),
    );
    let arp_shape = Match::Bytes {
        field: nh(0, 6),
        // Ethernet, IPv4, 6-byte and 4-byte addresses: the only ARP whose
        // fields sit where the rules read them.
        value: vec![0, 1, 8, 0, 6, 4],
    };
    let port_in = [
        logged(
            chains::PORT_IN,
            "wrong-mac",
            r(
                vec![not_in_set(
                    vec![Field::IifName, Field::EtherSaddr],
                    sets::PORT_MAC,
                )],
                Verdict::Drop,
            ),
        ),
        vec![
            r(vec![Match::EtherType(ETH_ARP)], jump(chains::PORT_ARP)),
            r(vec![Match::EtherType(ETH_IP)], jump(chains::PORT_IP4)),
            r(vec![Match::EtherType(ETH_IP6)], jump(chains::PORT_IP6)),
        ],
        logged(chains::PORT_IN, "ethertype", r(vec![], Verdict::Drop)),
    ]
    .concat();
    let port_arp = vec![
        r(
            vec![
                Match::EtherType(ETH_ARP),
                arp_shape.clone(),
                in_set(
                    vec![Field::IifName, Field::ArpSenderMac, Field::ArpSenderIp],
                    sets::PORT_IP4,
                ),
            ],
            Verdict::Accept,
        ),
        r(
            vec![
                Match::EtherType(ETH_ARP),
                arp_shape,
                Match::ArpSenderIn(any_ip4),
                in_set(vec![Field::IifName, Field::ArpSenderMac], sets::PORT_MAC),
            ],
            Verdict::Accept,
        ),
    ];
    let port_arp = [
        port_arp,
        logged(chains::PORT_ARP, "spoofed", r(vec![], Verdict::Drop)),
    ]
    .concat();
    // A client without an address yet. (No source port check: `nft`
    // would merge it with the destination port into one compare.)
    let dhcp_client = |typed: Match| {
        let mut m = vec![typed, Match::SaddrIn(unspec4)];
        m.extend(udp(Some(67), None));
        m
    };
    let ip4 = |word: &str, rule: RulePlan| logged(chains::PORT_IP4, word, rule);
    // A fragment's transport header is missing (offset ≠ 0) or may end
    // before the fields the rules below read (a first fragment cut before
    // `chaddr`): a rule whose load fails does not match, so a fragment would
    // pass every drop here. The host's stack reassembles what reaches it.
    let port_ip4 = [
        ip4("fragment", r(ip4_fragment().to_vec(), Verdict::Drop)),
        ip4("dhcp-server", r(udp(None, Some(67)), Verdict::Drop)),
        ip4(
            "dhcp-flood",
            r(
                [
                    udp(Some(67), None),
                    vec![meter(sets::DHCP_RATE, DHCP_RATE, DHCP_BURST)],
                ]
                .concat(),
                Verdict::Drop,
            ),
        ),
        ip4(
            "dhcp-chaddr",
            r(
                [
                    udp(Some(67), None),
                    vec![not_in_set(
                        vec![Field::IifName, dhcp_chaddr()],
                        sets::PORT_LLADDR,
                    )],
                ]
                .concat(),
                Verdict::Drop,
            ),
        ),
        ip4(
            "dns-flood",
            r(
                [
                    udp(Some(53), None),
                    vec![meter(sets::DNS_RATE, DNS_RATE, DNS_BURST)],
                ]
                .concat(),
                Verdict::Drop,
            ),
        ),
        vec![
            r(
                vec![
                    Match::EtherType(ETH_IP),
                    in_set(
                        vec![
                            Field::IifName,
                            Field::EtherSaddr,
                            Field::IpSaddr(AddrFamily::V4),
                        ],
                        sets::PORT_IP4,
                    ),
                ],
                Verdict::Accept,
            ),
            r(dhcp_client(Match::EtherType(ETH_IP)), Verdict::Accept),
        ],
        ip4("forged-source", r(vec![], Verdict::Drop)),
    ]
    .concat();
    let ip6 = |word: &str, rule: RulePlan| logged(chains::PORT_IP6, word, rule);
    let mut port_ip6 = ip6("fragment", r(ip6_fragment().to_vec(), Verdict::Drop));
    // Router advertisements, redirects and router renumbering: a sandbox
    // is never a router.
    for t in [134, 137, 138] {
        port_ip6.extend(ip6("router", r(icmpv6(t).to_vec(), Verdict::Drop)));
    }
    port_ip6.extend(ip6("dhcp6-server", r(udp(None, Some(547)), Verdict::Drop)));
    port_ip6.extend(ip6(
        "dns-flood",
        r(
            [
                udp(Some(53), None),
                vec![meter(sets::DNS_RATE, DNS_RATE, DNS_BURST)],
            ]
            .concat(),
            Verdict::Drop,
        ),
    ));
    port_ip6.push(r(
        vec![Match::EtherType(ETH_IP6), Match::SaddrIn(unspec6)],
        jump(chains::PORT_IP6_UNSPEC),
    ));
    port_ip6.extend(ip6(
        "forged-source",
        r(
            vec![
                Match::EtherType(ETH_IP6),
                not_in_set(
                    vec![
                        Field::IifName,
                        Field::EtherSaddr,
                        Field::IpSaddr(AddrFamily::V6),
                    ],
                    sets::PORT_IP6,
                ),
            ],
            Verdict::Drop,
        ),
    ));
    port_ip6.extend([
        r(icmpv6(136).to_vec(), jump(chains::PORT_NA)),
        r(icmpv6(135).to_vec(), jump(chains::PORT_NS)),
        r(icmpv6(133).to_vec(), jump(chains::PORT_RS)),
        r(vec![], Verdict::Accept),
    ]);
    let port_ip6_unspec = [
        // Duplicate address detection, and the MLDv2 report sent with it.
        vec![
            r(icmpv6(135).to_vec(), Verdict::Accept),
            r(icmpv6(143).to_vec(), Verdict::Accept),
        ],
        logged(
            chains::PORT_IP6_UNSPEC,
            "unspecified",
            r(vec![], Verdict::Drop),
        ),
    ]
    .concat();
    // An ND message: no options, or exactly one link-layer option of
    // `kind` at `at` naming the port's MAC.
    let nd_options = |chain: &str, base_len: u16, kind: u8, at: u32| {
        let mut rules = vec![
            r(vec![ip6_payload_len(base_len)], Verdict::Accept),
            r(
                vec![
                    ip6_payload_len(base_len + 8),
                    Match::Bytes {
                        field: th(at, 2),
                        value: vec![kind, 1],
                    },
                    in_set(vec![Field::IifName, option_mac(at)], sets::PORT_LLADDR),
                ],
                Verdict::Accept,
            ),
        ];
        rules.extend(logged(chain, "spoofed", r(vec![], Verdict::Drop)));
        rules
    };
    let mut port_na = logged(
        chains::PORT_NA,
        "spoofed",
        r(
            vec![not_in_set(
                vec![Field::IifName, Field::EtherSaddr, nd_target()],
                sets::PORT_ND_TARGET,
            )],
            Verdict::Drop,
        ),
    );
    port_na.extend(nd_options(chains::PORT_NA, 24, 2, 24));
    let quarantined = |rule: RulePlan| logged(chains::QUARANTINE_IN, "quarantined", rule);
    let quarantine_in = [
        quarantined(r(
            vec![in_set(vec![Field::EtherSaddr], sets::MACS)],
            Verdict::Drop,
        )),
        logged(
            chains::QUARANTINE_IN,
            "fragment",
            r(ip4_fragment().to_vec(), Verdict::Drop),
        ),
        // A bound sandbox's MAC as `chaddr`: the gateway would offer that
        // sandbox's reservation, and a DECLINE of it would disable it.
        logged(
            chains::QUARANTINE_IN,
            "bound-chaddr",
            r(
                [
                    vec![Match::EtherType(ETH_IP)],
                    udp(Some(67), None),
                    vec![in_set(vec![dhcp_chaddr()], sets::BOUND_CHADDR)],
                ]
                .concat(),
                Verdict::Drop,
            ),
        ),
        quarantined(r(
            [
                vec![Match::EtherType(ETH_IP)],
                udp(Some(67), None),
                vec![meter(sets::DHCP_RATE, DHCP_RATE, DHCP_BURST)],
            ]
            .concat(),
            Verdict::Drop,
        )),
        vec![r(dhcp_client(Match::EtherType(ETH_IP)), Verdict::Accept)],
        quarantined(r(vec![], Verdict::Drop)),
    ]
    .concat();
    vec![
        plain(chains::PORT_ARP, port_arp),
        plain(chains::PORT_IP4, port_ip4),
        plain(chains::PORT_IP6_UNSPEC, port_ip6_unspec),
        plain(chains::PORT_NA, port_na),
        plain(chains::PORT_NS, nd_options(chains::PORT_NS, 24, 1, 24)),
        plain(chains::PORT_RS, nd_options(chains::PORT_RS, 8, 1, 8)),
        plain(chains::PORT_IP6, port_ip6),
        plain(chains::PORT_IN, port_in),
        plain(chains::QUARANTINE_IN, quarantine_in),
    ]
}
