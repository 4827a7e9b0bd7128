//! The kernel's answer for one packet: `table inet corral` as read back
//! ([`LiveTable`]) run the way nf_tables runs it, expression by expression
//! over registers, for a packet built from a flow's tuple.
//!
//! The plan's evaluator ([`HostPlan::trace`](crate::plan::HostPlan::trace))
//! walks what corral meant to install; this one walks what the kernel
//! holds, so a rule inserted behind corral's back, a deleted one, a set
//! element added or removed or a chain policy changed decides here as it
//! decides for a real packet. It reads libnftnl's text of each expression
//! (the same text drift compares), loads fields from real header bytes
//! (an IPv4 or IPv6 header and a TCP SYN, a UDP datagram or an ICMP echo
//! request), compares, masks and looks up sets and verdict maps byte for
//! byte, and follows jumps, gotos, returns, accepts, drops, rejects and
//! base-chain policies through the hooks the packet passes: `prerouting`,
//! then `input` for the host itself or `forward` and `postrouting`.
//!
//! What a flow's tuple does not say is fixed as for the first packet of a
//! sandbox's new flow: conntrack state `new`, original direction (state
//! `invalid` in a chain that runs before conntrack, priority below −200),
//! a unicast source (`fib saddr type`), no IPv6 fragment header, no meter
//! or rate limit exceeded, and an ephemeral source port ([`EPHEMERAL`]).
//! An expression outside that model (a link-layer load, a mark, a quota, a
//! data map, …) reached on the packet's path ends the walk as
//! [`LiveVerdict::Unknown`] naming it: never a guess.
//!
//! The bridge table is not walked (it judges which port may send a frame,
//! not where a flow may go), as in the plan's evaluator.

use std::net::IpAddr;

use serde::Serialize;

use super::decode::nft_syntax;
use super::readback::{LiveChain, LiveSet, LiveTable};
use crate::plan::model::to_u128;
use crate::plan::{AddrFamily, AddrRange, names};

/// The source port a walked packet carries (rules matching a source port
/// see one from the kernel's ephemeral range, as a sandbox's socket has).
pub const EPHEMERAL: u16 = 40_000;

/// The link a refused packet is walked as leaving by: no name, no group.
static UNKNOWN_LINK: Iface = Iface {
    name: String::new(),
    group: 0,
};

/// Hook numbers (`NF_INET_*`).
const HOOK_PREROUTING: u32 = 0;
const HOOK_INPUT: u32 = 1;
const HOOK_FORWARD: u32 = 2;
const HOOK_POSTROUTING: u32 = 4;
/// `NF_IP_PRI_CONNTRACK`: a chain below it sees no conntrack entry yet.
const PRI_CONNTRACK: i32 = -200;
/// Deepest jump stack the kernel allows (`NFT_JUMP_STACK_SIZE`).
const JUMP_STACK: usize = 16;
/// Register file: the verdict register's 16 bytes, then 4 × 16 bytes.
const REG_BYTES: usize = 16 + 64;

/// An interface the packet passes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Iface {
    /// Its name.
    pub name: String,
    /// Its netdev group (`IFLA_GROUP`).
    pub group: u32,
}

/// The packet walked: a flow's tuple and where the kernel routes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Packet {
    /// IP protocol number (6, 17, 1, 58; others carry no transport header
    /// the walk knows).
    pub protocol: u8,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Destination port (TCP and UDP).
    pub dport: Option<u16>,
    /// The interface it arrives on (the profile's bridge).
    pub iif: Iface,
    /// Where the kernel's routing sends it after `prerouting`.
    pub route: Route,
}

/// The kernel's routing decision for a packet arriving on its bridge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// For the host itself: the `input` hook.
    Local,
    /// Forwarded out of this interface: `forward`, then `postrouting`.
    Forward(Iface),
    /// Routing refuses it (no route, forwarding off, a martian source, a
    /// blackhole). The rules are walked as for a packet forwarded out of
    /// a link that is not corral's (an uplink), so the answer says what
    /// corral's rules do; the trace's note says routing would not send it.
    Refused(String),
}

/// What the kernel does with the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveVerdict {
    /// It passes.
    Allow,
    /// A rule or a base chain's policy drops or rejects it.
    Block,
    /// An expression on its path is outside the walk's model (see
    /// [`LiveTrace::unknown`]).
    Unknown,
}

/// The live rule that decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveHit {
    /// Chain of `table inet corral`.
    pub chain: String,
    /// The rule's kernel handle.
    pub handle: u64,
    /// Its position in the chain, in kernel order (0-based).
    pub index: usize,
    /// The rule in `nft` syntax, decoded from the kernel's expressions.
    pub nft: String,
}

/// The live set (or verdict map) element a deciding rule matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveSetHit {
    /// Set name.
    pub name: String,
    /// The element holding the key, when the key is an address.
    pub element: Option<AddrRange>,
}

/// The walk of one packet through the live ruleset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveTrace {
    /// The verdict.
    pub verdict: LiveVerdict,
    /// Chains entered, in order.
    pub path: Vec<String>,
    /// The deciding rule (`None` when a policy decided, when no rule
    /// stopped the packet, or when the walk could not go on).
    pub rule: Option<LiveHit>,
    /// The base chain whose policy decided, when one did.
    pub policy: Option<String>,
    /// The last set element a lookup of the deciding rule matched.
    pub set: Option<LiveSetHit>,
    /// The expression the walk does not model, with its rule, when the
    /// verdict is `unknown`.
    pub unknown: Option<String>,
    /// Why the walk holds no rule at all (no table, a dormant table).
    pub note: Option<String>,
}

impl LiveTrace {
    fn new(verdict: LiveVerdict) -> Self {
        Self {
            verdict,
            path: Vec::new(),
            rule: None,
            policy: None,
            set: None,
            unknown: None,
            note: None,
        }
    }
}

/// Walks `pkt` through `table` (`inet corral` as read back; `None` when
/// the kernel holds no such table).
pub fn trace_live(table: Option<&LiveTable>, pkt: &Packet) -> LiveTrace {
    let Some(table) = table else {
        let mut t = LiveTrace::new(LiveVerdict::Allow);
        t.note = Some("the kernel holds no table inet corral: no corral rule stops it".to_owned());
        return t;
    };
    if table.flags & 1 != 0 {
        let mut t = LiveTrace::new(LiveVerdict::Allow);
        t.note = Some("table inet corral is dormant: none of its chains runs".to_owned());
        return t;
    }
    let hooks: &[u32] = match pkt.route {
        Route::Local => &[HOOK_PREROUTING, HOOK_INPUT],
        Route::Forward(_) | Route::Refused(_) => &[HOOK_PREROUTING, HOOK_FORWARD, HOOK_POSTROUTING],
    };
    let headers = Headers::of(pkt);
    let mut trace = LiveTrace::new(LiveVerdict::Allow);
    if let Route::Refused(why) = &pkt.route {
        trace.note = Some(format!(
            "routing refuses it now ({why}): walked as if it left by a link that is not corral's"
        ));
    }
    for &hook in hooks {
        let mut bases: Vec<&LiveChain> = table
            .chains
            .iter()
            .filter(|c| c.base.as_ref().is_some_and(|b| b.hook == hook))
            .collect();
        bases.sort_by_key(|c| c.base.as_ref().map_or(0, |b| b.priority));
        for base in bases {
            let priority = base.base.as_ref().map_or(0, |b| b.priority);
            let walker = Walker {
                table,
                pkt,
                headers: &headers,
                hook,
                tracked: priority > PRI_CONNTRACK,
            };
            match walker.base_chain(base, &mut trace.path) {
                End::Accept(hit) => {
                    // An accept ends this base chain only: the next one goes on.
                    trace.rule = hit.map(|(h, _)| h);
                }
                End::Policy { accept: true } => {}
                End::Policy { accept: false } => {
                    trace.verdict = LiveVerdict::Block;
                    trace.rule = None;
                    trace.policy = Some(base.name.clone());
                    return trace;
                }
                End::Block(hit, set) => {
                    trace.verdict = LiveVerdict::Block;
                    trace.rule = Some(hit);
                    trace.set = set;
                    return trace;
                }
                End::Unknown(what) => {
                    trace.verdict = LiveVerdict::Unknown;
                    trace.rule = None;
                    trace.unknown = Some(what);
                    return trace;
                }
            }
        }
    }
    // A packet let through into one of corral's bridges goes to another
    // sandbox: whether the flow works is decided also on its way back (the
    // other profile's chains and ownership checks, the bridge table),
    // which this walk of one packet does not model. Not a guess: unknown.
    if let Route::Forward(oif) = &pkt.route
        && oif.group == crate::plan::fail_closed::STAMP_GROUP
    {
        trace.verdict = LiveVerdict::Unknown;
        trace.rule = None;
        trace.unknown = Some(format!(
            "it leaves by {}, a corral bridge: the flow's reply path (that profile's chains, the bridge table) is not walked",
            oif.name
        ));
    }
    trace
}

/// The packet's headers as the wire carries them.
struct Headers {
    network: Vec<u8>,
    transport: Vec<u8>,
}

impl Headers {
    fn of(pkt: &Packet) -> Self {
        let sport = EPHEMERAL.to_be_bytes();
        let dport = pkt.dport.unwrap_or(0).to_be_bytes();
        let transport = match pkt.protocol {
            // A SYN: data offset 5 words, flags SYN, a window.
            6 => [
                &sport[..],
                &dport,
                &[0, 0, 0, 1],
                &[0, 0, 0, 0],
                &[0x50, 0x02, 0xfa, 0xf0],
                &[0, 0, 0, 0],
            ]
            .concat(),
            17 => [&sport[..], &dport, &[0, 8], &[0, 0]].concat(),
            // Echo request, id 1, sequence 1.
            1 => vec![8, 0, 0, 0, 0, 1, 0, 1],
            58 => vec![128, 0, 0, 0, 0, 1, 0, 1],
            _ => Vec::new(),
        };
        let len = transport.len();
        let network = match (pkt.src, pkt.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let total = (20 + len) as u16;
                let mut h = vec![0x45, 0];
                h.extend(total.to_be_bytes());
                h.extend([0, 1, 0x40, 0, 64, pkt.protocol, 0, 0]);
                h.extend(s.octets());
                h.extend(d.octets());
                h
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let mut h = vec![0x60, 0, 0, 0];
                h.extend((len as u16).to_be_bytes());
                h.extend([pkt.protocol, 64]);
                h.extend(s.octets());
                h.extend(d.octets());
                h
            }
            // A mixed tuple is no packet: headers stay empty and any load
            // from them breaks the rule.
            _ => Vec::new(),
        };
        Self { network, transport }
    }
}

/// How a chain (or a base chain) ended.
enum End {
    /// An accept (with the rule, unless a policy accepted).
    Accept(Option<(LiveHit, Option<LiveSetHit>)>),
    /// The base chain's policy.
    Policy { accept: bool },
    /// A drop or reject.
    Block(LiveHit, Option<LiveSetHit>),
    /// An expression outside the model.
    Unknown(String),
}

/// What one rule did.
enum Step {
    /// A match failed (or the rule has no verdict): the next rule.
    Next,
    Accept,
    Block,
    Jump(String),
    Goto(String),
    Return,
    Unknown(String),
}

struct Walker<'a> {
    table: &'a LiveTable,
    pkt: &'a Packet,
    headers: &'a Headers,
    hook: u32,
    /// The chain runs after conntrack has looked at the packet.
    tracked: bool,
}

/// A chain being walked and where in it.
struct Frame<'a> {
    chain: &'a LiveChain,
    next: usize,
}

impl Walker<'_> {
    fn base_chain(&self, base: &LiveChain, path: &mut Vec<String>) -> End {
        path.push(base.name.clone());
        let mut stack: Vec<Frame<'_>> = Vec::new();
        let mut cur = Frame {
            chain: base,
            next: 0,
        };
        let mut sent_to_sink: Option<(LiveHit, Option<LiveSetHit>)> = None;
        loop {
            let Some(rule) = cur.chain.rules.get(cur.next) else {
                // Off the end: back to the caller, or the base chain's policy.
                match stack.pop() {
                    Some(f) => {
                        cur = f;
                        continue;
                    }
                    None => {
                        let accept = base.base.as_ref().is_none_or(|b| b.policy == 1);
                        return End::Policy { accept };
                    }
                }
            };
            let index = cur.next;
            cur.next += 1;
            let mut set = None;
            let hit = || LiveHit {
                chain: cur.chain.name.clone(),
                handle: rule.handle,
                index,
                nft: nft_syntax(&rule.text),
            };
            let (target, push) = match self.rule(&rule.text, &mut set) {
                Step::Next => continue,
                Step::Accept => return End::Accept(Some((hit(), set))),
                Step::Block => {
                    // A profile's block sink drops for the shared rule
                    // that sent the packet there: that rule decided.
                    if names::is_sink(&cur.chain.name)
                        && let Some((h, s)) = sent_to_sink.take()
                    {
                        return End::Block(h, s);
                    }
                    return End::Block(hit(), set);
                }
                Step::Unknown(what) => {
                    return End::Unknown(format!(
                        "{what} in chain {} rule {index} (handle {}): `{}`",
                        cur.chain.name,
                        rule.handle,
                        nft_syntax(&rule.text)
                    ));
                }
                Step::Return => {
                    match stack.pop() {
                        Some(f) => cur = f,
                        None => {
                            let accept = base.base.as_ref().is_none_or(|b| b.policy == 1);
                            return End::Policy { accept };
                        }
                    }
                    continue;
                }
                Step::Jump(t) => (t, true),
                Step::Goto(t) => (t, false),
            };
            sent_to_sink =
                names::is_sink(&target).then(|| (hit(), set.filter(|s| s.element.is_some())));
            let Some(next) = self.table.chain(&target) else {
                return End::Unknown(format!(
                    "a jump to chain {target}, which the table does not hold"
                ));
            };
            if stack.len() >= JUMP_STACK {
                return End::Unknown(format!(
                    "jumps deeper than {JUMP_STACK} chains (at {target})"
                ));
            }
            path.push(target);
            let frame = Frame {
                chain: next,
                next: 0,
            };
            if push {
                stack.push(std::mem::replace(&mut cur, frame));
            } else {
                cur = frame;
            }
        }
    }

    /// Runs one rule's expressions over a fresh register file.
    fn rule(&self, text: &str, set_hit: &mut Option<LiveSetHit>) -> Step {
        let mut regs = [0u8; REG_BYTES];
        for group in super::decode::groups(text) {
            let t: Vec<&str> = group.split_whitespace().collect();
            let Some((&name, rest)) = t.split_first() else {
                continue;
            };
            let step = match name {
                "meta" => self.meta(rest, &mut regs),
                "payload" => self.payload(rest, &mut regs),
                "ct" => self.ct(rest, &mut regs),
                "fib" => fib(rest, &mut regs),
                "exthdr" => exthdr(rest, &mut regs),
                "bitwise" => bitwise(rest, &mut regs),
                "cmp" => cmp(rest, &regs),
                "range" => range(rest, &regs),
                "lookup" => self.lookup(rest, &regs, set_hit),
                "dynset" => dynset(&group),
                "limit" => limit(rest),
                "immediate" => return immediate(rest),
                "reject" => return Step::Block,
                // Neither changes the verdict: a counter counts, a log
                // copies the header to NFLOG, masquerade rewrites the
                // source of a flow that leaves anyway.
                "counter" | "log" | "masq" => Flow::Go,
                _ => Flow::Unknown(format!("expression `[ {group} ]`")),
            };
            match step {
                Flow::Go => {}
                Flow::Break => return Step::Next,
                Flow::Jump(chain) => return Step::Jump(chain),
                Flow::Unknown(what) => return Step::Unknown(what),
            }
        }
        Step::Next
    }

    /// `load KEY => reg N`
    fn meta(&self, t: &[&str], regs: &mut [u8; REG_BYTES]) -> Flow {
        let (Some(&"load"), Some(&key), Some(reg)) = (t.first(), t.get(1), reg_of(t.get(4))) else {
            return Flow::Unknown(format!("meta `{}`", t.join(" ")));
        };
        let pkt = self.pkt;
        let (v4, l4) = (pkt.dst.is_ipv4(), pkt.protocol);
        let value: Vec<u8> = match key {
            "iifname" => ifname(Some(&pkt.iif.name)),
            // No output device before routing or for the host: the kernel
            // stores an empty name.
            "oifname" => ifname(self.oif().map(|o| o.name.as_str())),
            "iifgroup" => pkt.iif.group.to_ne_bytes().to_vec(),
            "oifgroup" => match self.oif() {
                Some(o) => o.group.to_ne_bytes().to_vec(),
                None => return Flow::Break,
            },
            "nfproto" => vec![if v4 { 2 } else { 10 }],
            "l4proto" => vec![l4],
            "protocol" => (if v4 { 0x0800u16 } else { 0x86dd }).to_be_bytes().to_vec(),
            other => return Flow::Unknown(format!("meta {other}")),
        };
        store(regs, reg, &value)
    }

    /// The output device as the hook sees it.
    fn oif(&self) -> Option<&Iface> {
        match (&self.pkt.route, self.hook) {
            (Route::Forward(o), HOOK_FORWARD | HOOK_POSTROUTING) => Some(o),
            (Route::Refused(_), HOOK_FORWARD | HOOK_POSTROUTING) => Some(&UNKNOWN_LINK),
            _ => None,
        }
    }

    /// `load Lb @ BASE header + OFF => reg N`
    fn payload(&self, t: &[&str], regs: &mut [u8; REG_BYTES]) -> Flow {
        let (Some(&"load"), Some(len), Some(&base), Some(off), Some(reg)) = (
            t.first(),
            t.get(1)
                .and_then(|l| l.strip_suffix('b'))
                .and_then(|l| l.parse::<usize>().ok()),
            t.get(3),
            t.get(6).and_then(|o| o.parse::<usize>().ok()),
            reg_of(t.get(9)),
        ) else {
            return Flow::Unknown(format!("payload `{}`", t.join(" ")));
        };
        let header = match base {
            "network" => &self.headers.network,
            "transport" => &self.headers.transport,
            other => return Flow::Unknown(format!("a load from the {other} header")),
        };
        // A field past the header breaks the rule, as in the kernel.
        match header.get(off..off + len) {
            Some(bytes) => store(regs, reg, bytes),
            None => Flow::Break,
        }
    }

    /// `load KEY => reg N [, dir D]`
    fn ct(&self, t: &[&str], regs: &mut [u8; REG_BYTES]) -> Flow {
        let (Some(&"load"), Some(&key), Some(reg)) = (t.first(), t.get(1), reg_of(t.get(4))) else {
            return Flow::Unknown(format!("ct `{}`", t.join(" ")));
        };
        if key == "state" {
            // Before conntrack the packet has no entry: the kernel says invalid.
            let bit: u32 = if self.tracked { 1 << 3 } else { 1 };
            return store(regs, reg, &bit.to_ne_bytes());
        }
        if !self.tracked {
            return Flow::Break;
        }
        let dir = t.get(7).copied().unwrap_or("original");
        let (src, dst) = (self.pkt.src, self.pkt.dst);
        let (orig_src, orig_dst) = if dir == "reply" {
            (dst, src)
        } else {
            (src, dst)
        };
        let addr = |a: IpAddr, want_v6: bool| match a {
            IpAddr::V4(v) if !want_v6 => Some(v.octets().to_vec()),
            IpAddr::V6(v) if want_v6 => Some(v.octets().to_vec()),
            _ => None,
        };
        let value = match key {
            "direction" => Some(vec![0]),
            "src_ip" => addr(orig_src, false),
            "dst_ip" => addr(orig_dst, false),
            "src_ip6" => addr(orig_src, true),
            "dst_ip6" => addr(orig_dst, true),
            other => return Flow::Unknown(format!("ct {other}")),
        };
        match value {
            Some(v) => store(regs, reg, &v),
            // The other family's key: the kernel breaks the rule.
            None => Flow::Break,
        }
    }

    /// `reg N set NAME [dreg M] FLAGS`
    fn lookup(&self, t: &[&str], regs: &[u8; REG_BYTES], set_hit: &mut Option<LiveSetHit>) -> Flow {
        let (Some(reg), Some(&name)) = (reg_of(t.get(1)), t.get(3)) else {
            return Flow::Unknown(format!("lookup `{}`", t.join(" ")));
        };
        let dreg = t
            .iter()
            .position(|x| *x == "dreg")
            .and_then(|i| reg_of(t.get(i + 1)));
        let inverted = t
            .last()
            .and_then(|f| f.strip_prefix("0x"))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .is_some_and(|f| f & 1 != 0);
        let Some(set) = self.table.set(name) else {
            return Flow::Unknown(format!(
                "a lookup in set {name}, which the table does not hold"
            ));
        };
        let Some(at) = reg_offset(reg) else {
            return Flow::Unknown(format!("a lookup from register {reg}"));
        };
        let Some(key) = regs.get(at..at + set.key_len as usize) else {
            return Flow::Unknown(format!("a {}-byte key of set {name}", set.key_len));
        };
        match dreg {
            Some(0) => match map_target(set, key) {
                Some(chain) => {
                    *set_hit = Some(LiveSetHit {
                        name: name.to_owned(),
                        element: None,
                    });
                    Flow::Jump(chain.to_owned())
                }
                // No element: the rule ends, as a failed match.
                None => Flow::Break,
            },
            Some(_) => Flow::Unknown(format!("a data map lookup in {name}")),
            None => {
                let found = match member(set, key) {
                    Member::In(element) => Some(element),
                    Member::Out => None,
                    Member::Incomparable => {
                        return Flow::Unknown(format!(
                            "a lookup in set {name}, whose keys the walk cannot compare"
                        ));
                    }
                };
                if found.is_some() == inverted {
                    return Flow::Break;
                }
                if let Some(element) = found {
                    *set_hit = Some(LiveSetHit {
                        name: name.to_owned(),
                        element,
                    });
                }
                Flow::Go
            }
        }
    }
}

/// The outcome of one expression.
enum Flow {
    /// The rule goes on.
    Go,
    /// The rule ends without its verdict.
    Break,
    /// A verdict map's element: a jump to this chain.
    Jump(String),
    /// Outside the model.
    Unknown(String),
}

fn reg_of(token: Option<&&str>) -> Option<u32> {
    token.and_then(|t| t.trim_end_matches(',').parse().ok())
}

/// Byte offset of register `reg` in the file (the 16-byte registers 1-4
/// and the 4-byte registers 8-23 overlap as in the kernel).
fn reg_offset(reg: u32) -> Option<usize> {
    match reg {
        1..=4 => Some((reg as usize - 1) * 16),
        8..=23 => Some((reg as usize - 8) * 4),
        _ => None,
    }
    .map(|o| o + 16)
}

/// Stores `value` from `reg` on, zero-padding its last 32-bit word as the
/// kernel does.
fn store(regs: &mut [u8; REG_BYTES], reg: u32, value: &[u8]) -> Flow {
    let Some(at) = reg_offset(reg) else {
        return Flow::Unknown(format!("a load into register {reg}"));
    };
    let padded = value.len().div_ceil(4) * 4;
    let Some(dest) = regs.get_mut(at..at + padded) else {
        return Flow::Unknown(format!("a {}-byte load into register {reg}", value.len()));
    };
    dest.fill(0);
    dest[..value.len()].copy_from_slice(value);
    Flow::Go
}

fn ifname(name: Option<&str>) -> Vec<u8> {
    let mut b = name.unwrap_or("").as_bytes().to_vec();
    b.resize(16, 0);
    b
}

/// libnftnl's data words (`0x%08x` of native-endian 32-bit words) as bytes.
fn words(tokens: &[&str]) -> Vec<u8> {
    tokens
        .iter()
        .filter_map(|t| t.strip_prefix("0x"))
        .filter_map(|h| u32::from_str_radix(h, 16).ok())
        .flat_map(u32::to_ne_bytes)
        .collect()
}

fn reg_bytes(regs: &[u8; REG_BYTES], reg: u32, len: usize) -> Option<&[u8]> {
    let at = reg_offset(reg)?;
    regs.get(at..at + len)
}

/// `saddr type => reg N`: a sandbox's source is a unicast address
/// (`RTN_UNICAST`).
fn fib(t: &[&str], regs: &mut [u8; REG_BYTES]) -> Flow {
    match t {
        ["saddr", "type", "=>", "reg", r] => match reg_of(Some(r)) {
            Some(reg) => store(regs, reg, &1u32.to_ne_bytes()),
            None => Flow::Unknown(format!("fib `{}`", t.join(" "))),
        },
        _ => Flow::Unknown(format!("fib `{}`", t.join(" "))),
    }
}

/// `load ipv6 1b @ 44 + 0 present => reg N`: the first packet of a flow
/// is no fragment.
fn exthdr(t: &[&str], regs: &mut [u8; REG_BYTES]) -> Flow {
    match (t.get(4), t.get(7), reg_of(t.get(10))) {
        (Some(&"44"), Some(&"present"), Some(reg)) => store(regs, reg, &[0]),
        _ => Flow::Unknown(format!("exthdr `{}`", t.join(" "))),
    }
}

/// `reg N = ( reg M & MASK ) ^ XOR`
fn bitwise(t: &[&str], regs: &mut [u8; REG_BYTES]) -> Flow {
    let unknown = || Flow::Unknown(format!("bitwise `{}`", t.join(" ")));
    let (Some(dreg), Some(sreg)) = (reg_of(t.get(1)), reg_of(t.get(5))) else {
        return unknown();
    };
    let (Some(amp), Some(close), Some(caret)) = (
        t.iter().position(|x| *x == "&"),
        t.iter().position(|x| *x == ")"),
        t.iter().position(|x| *x == "^"),
    ) else {
        return unknown();
    };
    let mask = words(&t[amp + 1..close]);
    let xor = words(&t[caret + 1..]);
    let Some(src) = reg_bytes(regs, sreg, mask.len()).map(<[u8]>::to_vec) else {
        return unknown();
    };
    let out: Vec<u8> = src
        .iter()
        .zip(&mask)
        .zip(xor.iter().chain(std::iter::repeat(&0)))
        .map(|((s, m), x)| (s & m) ^ x)
        .collect();
    store(regs, dreg, &out)
}

/// `OP reg N DATA`: the kernel compares bytes (`memcmp`), which for the
/// big-endian fields of packets is their numeric order too.
fn cmp(t: &[&str], regs: &[u8; REG_BYTES]) -> Flow {
    let (Some(&op), Some(reg)) = (t.first(), reg_of(t.get(2))) else {
        return Flow::Unknown(format!("cmp `{}`", t.join(" ")));
    };
    let data = words(t.get(3..).unwrap_or(&[]));
    let Some(have) = reg_bytes(regs, reg, data.len()) else {
        return Flow::Unknown(format!("cmp `{}`", t.join(" ")));
    };
    let ord = have.cmp(&data[..]);
    let holds = match op {
        "eq" => ord.is_eq(),
        "neq" => ord.is_ne(),
        "lt" => ord.is_lt(),
        "lte" => ord.is_le(),
        "gt" => ord.is_gt(),
        "gte" => ord.is_ge(),
        other => return Flow::Unknown(format!("cmp operator {other}")),
    };
    if holds { Flow::Go } else { Flow::Break }
}

/// `OP reg N FROM TO`
fn range(t: &[&str], regs: &[u8; REG_BYTES]) -> Flow {
    let (Some(&op), Some(reg)) = (t.first(), reg_of(t.get(2))) else {
        return Flow::Unknown(format!("range `{}`", t.join(" ")));
    };
    let data = words(t.get(3..).unwrap_or(&[]));
    let (from, to) = data.split_at(data.len() / 2);
    let Some(have) = reg_bytes(regs, reg, from.len()) else {
        return Flow::Unknown(format!("range `{}`", t.join(" ")));
    };
    let inside = have >= from && have <= to;
    let holds = match op {
        "eq" => inside,
        "neq" => !inside,
        other => return Flow::Unknown(format!("range operator {other}")),
    };
    if holds { Flow::Go } else { Flow::Break }
}

/// A meter (`dynset … expr [ connlimit … flags 1 ]` or `[ limit … over ]`)
/// matches a source over its limit: a new flow is under it. A dynset with
/// no stateful expression adds its key and goes on.
fn dynset(group: &str) -> Flow {
    let Some(at) = group.find("expr") else {
        return Flow::Go;
    };
    let inner = super::decode::groups(&group[at..]);
    let over = |g: &String| {
        let t: Vec<&str> = g.split_whitespace().collect();
        let flags = t
            .iter()
            .position(|x| *x == "flags")
            .and_then(|i| t.get(i + 1))
            .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok());
        matches!(t.first(), Some(&"connlimit") | Some(&"limit"))
            && flags.is_some_and(|f| f & 1 != 0)
    };
    if !inner.is_empty() && inner.iter().all(over) {
        Flow::Break
    } else {
        Flow::Unknown(format!("a meter `[ {group} ]`"))
    }
}

/// `rate R/UNIT burst B type T flags F`: a rate not yet exceeded (as for
/// a flow's first packet); `over` (flag 1) inverts it.
fn limit(t: &[&str]) -> Flow {
    let flags = t
        .iter()
        .position(|x| *x == "flags")
        .and_then(|i| t.get(i + 1))
        .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok());
    match flags {
        Some(f) if f & 1 != 0 => Flow::Break,
        Some(_) => Flow::Go,
        None => Flow::Unknown(format!("limit `{}`", t.join(" "))),
    }
}

/// `reg 0 VERDICT [-> CHAIN]`
fn immediate(t: &[&str]) -> Step {
    match t {
        ["reg", "0", "accept", ..] => Step::Accept,
        ["reg", "0", "drop", ..] => Step::Block,
        ["reg", "0", "return", ..] => Step::Return,
        ["reg", "0", "continue", ..] => Step::Next,
        ["reg", "0", "jump", "->", chain, ..] => Step::Jump((*chain).to_owned()),
        ["reg", "0", "goto", "->", chain, ..] => Step::Goto((*chain).to_owned()),
        _ => Step::Unknown(format!("immediate `{}`", t.join(" "))),
    }
}

/// Whether a key is in a set.
enum Member {
    /// It is (with the element, for an address set).
    In(Option<AddrRange>),
    Out,
    /// The set's keys are neither addresses nor exact keys.
    Incomparable,
}

fn member(set: &LiveSet, key: &[u8]) -> Member {
    // A pinned set's key is the source, then the learned address: the hit
    // names the learned one.
    if let Some(f) = set.family
        && set.pinned
    {
        if !set.keys.iter().any(|k| k.as_slice() == key) {
            return Member::Out;
        }
        return match key.get(f.key_len()..).and_then(|k| addr_of(f, k)) {
            Some(a) => Member::In(Some(AddrRange::single(a))),
            None => Member::Incomparable,
        };
    }
    if let Some(f) = set.family {
        let Some(addr) = addr_of(f, key) else {
            return Member::Incomparable;
        };
        let k = to_u128(addr);
        return match set
            .elements
            .iter()
            .find(|r| r.family() == f && to_u128(r.start) <= k && k <= to_u128(r.end))
        {
            Some(r) => Member::In(Some(*r)),
            None => Member::Out,
        };
    }
    if set.flags & libc::NFT_SET_INTERVAL as u32 != 0 {
        return Member::Incomparable;
    }
    if set.keys.iter().any(|k| k.as_slice() == key) {
        Member::In(None)
    } else {
        Member::Out
    }
}

fn addr_of(f: AddrFamily, key: &[u8]) -> Option<IpAddr> {
    match f {
        AddrFamily::V4 => <[u8; 4]>::try_from(key).ok().map(IpAddr::from),
        AddrFamily::V6 => <[u8; 16]>::try_from(key).ok().map(IpAddr::from),
    }
}

/// The chain a verdict map sends `key` to: an exact element, or for an
/// interval map the interval holding it (elements are starts, each closed
/// by an end element one past its last key).
fn map_target<'s>(set: &'s LiveSet, key: &[u8]) -> Option<&'s str> {
    if set.flags & libc::NFT_SET_INTERVAL as u32 == 0 {
        return set
            .jumps
            .iter()
            .find(|(k, end, _)| !end && k.as_slice() == key)
            .map(|(_, _, c)| c.as_str());
    }
    // `jumps` is sorted by key; at one key a start sorts before an end, and
    // a start there wins (the end closes the interval before it).
    let mut best: Option<&(Vec<u8>, bool, String)> = None;
    for e in set.jumps.iter().filter(|(k, _, _)| k.as_slice() <= key) {
        match best {
            Some(b) if b.0 == e.0 && !b.1 => {}
            _ => best = Some(e),
        }
    }
    best.filter(|(_, end, _)| !end).map(|(_, _, c)| c.as_str())
}

#[cfg(test)]
#[path = "live_trace_tests.rs"]
mod tests;
