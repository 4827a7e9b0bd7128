//! Plan rules as netlink expressions, and rules as comparable text.
//!
//! Each [`Match`] becomes the same expression sequence `nft` would emit for
//! it (an `ip daddr` in the inet family is preceded by a `meta nfproto`
//! check, a ct state test is a load, a bitwise mask and a non-zero
//! compare, interface names compare all 16 bytes). The same encoding is
//! used to apply and to compare with what the kernel returns, so a rule's
//! [`fingerprint`] is stable across apply and read-back. A ruleset loaded
//! by `nft -f` from `HostPlan::render_nft()` reads back expression for
//! expression identical to this encoding (`tests/nft_apply.rs`).

use std::net::IpAddr;

use nftnl_sys as sys;

use super::NftError;
use super::concat;
use super::obj::{Expr, ExprRef, Rule, cstr};
use crate::plan::{
    AddrFamily, Field, MapField, Match, PayloadBase, RejectKind, RulePlan, TableFamily, Verdict,
};

const REG1: u32 = libc::NFT_REG_1 as u32;
const REG_VERDICT: u32 = libc::NFT_REG_VERDICT as u32;
const NETWORK: u32 = libc::NFT_PAYLOAD_NETWORK_HEADER as u32;
const TRANSPORT: u32 = libc::NFT_PAYLOAD_TRANSPORT_HEADER as u32;
/// `ct state` bits (host byte order) for established and related.
const CT_ESTABLISHED_RELATED: u32 = (1 << 1) | (1 << 2);
/// `ct state` bit (host byte order) for new.
const CT_NEW: u32 = 1 << 3;
/// `ct state` bit of invalid.
const CT_INVALID: u32 = 1;
/// `ct state` bit (host byte order) for related.
const CT_RELATED: u32 = 1 << 2;
/// TCP header flag bits (byte 13).
const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;
/// `IP_CT_DIR_ORIGINAL`: the `dir` of a ct load of the original tuple.
const CT_DIR_ORIGINAL: u8 = 0;
/// `NFT_FIB_RESULT_ADDRTYPE`: the fib expression yields an `RTN_*` type.
const FIB_RESULT_ADDRTYPE: u32 = 3;
/// `NFTA_FIB_F_SADDR`: look the source address up.
const FIB_F_SADDR: u32 = 1;
/// The IPv6 fragment header's next-header number.
const IPPROTO_FRAGMENT: u8 = 44;
/// `NFT_EXTHDR_F_PRESENT`: the exthdr expression yields whether the
/// header exists (1) or not (0).
const EXTHDR_F_PRESENT: u32 = 1;
/// `NFT_EXTHDR_OP_IPV6`: walk the IPv6 extension headers.
const EXTHDR_OP_IPV6: u32 = 0;

fn e(name: &'static std::ffi::CStr) -> Result<Expr, NftError> {
    Expr::new(name)
}

fn meta(key: i32) -> Result<Expr, NftError> {
    Ok(e(c"meta")?
        .u32(sys::NFTNL_EXPR_META_KEY, key as u32)
        .u32(sys::NFTNL_EXPR_META_DREG, REG1))
}

fn cmp(op: i32, data: &[u8]) -> Result<Expr, NftError> {
    e(c"cmp")?
        .u32(sys::NFTNL_EXPR_CMP_SREG, REG1)
        .u32(sys::NFTNL_EXPR_CMP_OP, op as u32)
        .data(sys::NFTNL_EXPR_CMP_DATA, data)
}

fn payload(base: u32, offset: u32, len: u32) -> Result<Expr, NftError> {
    Ok(e(c"payload")?
        .u32(sys::NFTNL_EXPR_PAYLOAD_DREG, REG1)
        .u32(sys::NFTNL_EXPR_PAYLOAD_BASE, base)
        .u32(sys::NFTNL_EXPR_PAYLOAD_OFFSET, offset)
        .u32(sys::NFTNL_EXPR_PAYLOAD_LEN, len))
}

fn bitwise(mask: &[u8]) -> Result<Expr, NftError> {
    let xor = vec![0u8; mask.len()];
    e(c"bitwise")?
        .u32(sys::NFTNL_EXPR_BITWISE_SREG, REG1)
        .u32(sys::NFTNL_EXPR_BITWISE_DREG, REG1)
        .u32(sys::NFTNL_EXPR_BITWISE_LEN, mask.len() as u32)
        .data(sys::NFTNL_EXPR_BITWISE_MASK, mask)?
        .data(sys::NFTNL_EXPR_BITWISE_XOR, &xor)
}

/// An interface name as the kernel compares it: 16 bytes, NUL padded.
fn ifname(name: &str) -> Result<[u8; 16], NftError> {
    let bytes = name.as_bytes();
    if bytes.len() >= 16 {
        return Err(NftError::BadName(name.to_owned()));
    }
    let mut out = [0u8; 16];
    out[..bytes.len()].copy_from_slice(bytes);
    Ok(out)
}

fn nfproto(f: AddrFamily) -> Result<[Expr; 2], NftError> {
    let v = match f {
        AddrFamily::V4 => libc::NFPROTO_IPV4 as u8,
        AddrFamily::V6 => libc::NFPROTO_IPV6 as u8,
    };
    Ok([meta(libc::NFT_META_NFPROTO)?, cmp(libc::NFT_CMP_EQ, &[v])?])
}

/// (offset, length) of the source/destination address in the IP header.
fn addr_field(f: AddrFamily, dest: bool) -> (u32, u32) {
    match (f, dest) {
        (AddrFamily::V4, false) => (12, 4),
        (AddrFamily::V4, true) => (16, 4),
        (AddrFamily::V6, false) => (8, 16),
        (AddrFamily::V6, true) => (24, 16),
    }
}

fn addr_bytes(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

const ETH_P_IP: u16 = 0x0800;
const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IPV6: u16 = 0x86dd;

/// `ether type X`: the protocol check of the bridge family.
fn ethertype(t: u16) -> Result<[Expr; 2], NftError> {
    Ok([
        payload(libc::NFT_PAYLOAD_LL_HEADER as u32, 12, 2)?,
        cmp(libc::NFT_CMP_EQ, &t.to_be_bytes())?,
    ])
}

/// The protocol check before an address match: `meta nfproto` in inet,
/// `meta protocol` (the ethertype) in bridge — what `nft` emits.
fn l3_check(family: TableFamily, f: AddrFamily) -> Result<[Expr; 2], NftError> {
    match family {
        TableFamily::Inet => nfproto(f),
        TableFamily::Bridge => {
            let t = match f {
                AddrFamily::V4 => ETH_P_IP,
                AddrFamily::V6 => ETH_P_IPV6,
            };
            Ok([
                meta(libc::NFT_META_PROTOCOL)?,
                cmp(libc::NFT_CMP_EQ, &t.to_be_bytes())?,
            ])
        }
    }
}

/// Load and compare the first `prefix` bits of the field at `off` (`len`
/// bytes), as `nft` does: a prefix ending on a byte boundary loads only the
/// bytes it covers and needs no mask; any other prefix loads the whole
/// field and masks it.
fn prefix_match(
    off: u32,
    len: u32,
    net_bytes: &[u8],
    prefix: u8,
    op: i32,
) -> Result<Vec<Expr>, NftError> {
    if prefix == 0 {
        return Ok(Vec::new());
    }
    let n = len as usize;
    if prefix.is_multiple_of(8) {
        let whole = (usize::from(prefix) / 8).min(n);
        return Ok(vec![
            payload(NETWORK, off, whole as u32)?,
            cmp(op, &net_bytes[..whole])?,
        ]);
    }
    let mut mask = vec![0u8; n];
    for (i, m) in mask.iter_mut().enumerate() {
        let bits = u32::from(prefix).saturating_sub(8 * i as u32).min(8);
        *m = (0xffu16 << (8 - bits)) as u8;
    }
    Ok(vec![
        payload(NETWORK, off, len)?,
        bitwise(&mask)?,
        cmp(op, &net_bytes[..n])?,
    ])
}

/// The protocol a rule has already checked for, so a later match needs no
/// check of its own (`nft` emits each dependency once per rule).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Ctx {
    proto: Option<Proto>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Ip(AddrFamily),
    Arp,
}

impl Ctx {
    /// The check `want` needs (none when the rule already made it).
    fn need(&mut self, family: TableFamily, want: Proto) -> Result<Vec<Expr>, NftError> {
        if self.proto == Some(want) {
            return Ok(Vec::new());
        }
        self.proto = Some(want);
        Ok(match want {
            Proto::Ip(f) => Vec::from(l3_check(family, f)?),
            Proto::Arp => Vec::from(ethertype(ETH_P_ARP)?),
        })
    }
}

/// `ip saddr NET` / `ip6 daddr != NET` and friends.
fn net_match(
    family: TableFamily,
    net: ipnet::IpNet,
    dest: bool,
    op: i32,
    ctx: &mut Ctx,
) -> Result<Vec<Expr>, NftError> {
    let f = AddrFamily::of(net.addr());
    let (off, len) = addr_field(f, dest);
    let mut v = ctx.need(family, Proto::Ip(f))?;
    v.extend(prefix_match(
        off,
        len,
        &addr_bytes(net.network()),
        net.prefix_len(),
        op,
    )?);
    Ok(v)
}

fn ct(key: i32) -> Result<Expr, NftError> {
    Ok(e(c"ct")?
        .u32(sys::NFTNL_EXPR_CT_KEY, key as u32)
        .u32(sys::NFTNL_EXPR_CT_DREG, REG1))
}

/// `ct original ip saddr NET`: the family's own conntrack key (no
/// protocol check: the kernel breaks the rule for a flow of the other
/// family), the whole address loaded, masked and compared whole. The
/// mask is always there (the plan renders the match as `& MASK == NET`
/// for `nft -f`, which `nft` encodes the same way): libnftnl's text of a
/// shortened compare shows whole data words, so a byte-aligned prefix
/// without a mask would read back without its length.
fn ct_orig_saddr(net: ipnet::IpNet) -> Result<Vec<Expr>, NftError> {
    let key = match net {
        ipnet::IpNet::V4(_) => libc::NFT_CT_SRC_IP,
        ipnet::IpNet::V6(_) => libc::NFT_CT_SRC_IP6,
    };
    let load = e(c"ct")?
        .u32(sys::NFTNL_EXPR_CT_KEY, key as u32)
        .u8(sys::NFTNL_EXPR_CT_DIR, CT_DIR_ORIGINAL)
        .u32(sys::NFTNL_EXPR_CT_DREG, REG1);
    let bytes = addr_bytes(net.network());
    if net.prefix_len() == net.max_prefix_len() {
        return Ok(vec![load, cmp(libc::NFT_CMP_EQ, &bytes)?]);
    }
    let mask = addr_bytes(net.netmask());
    Ok(vec![load, bitwise(&mask)?, cmp(libc::NFT_CMP_EQ, &bytes)?])
}

/// The protocol checks `nft` puts before loading `fields`.
fn field_deps(fields: &[Field], family: TableFamily, ctx: &mut Ctx) -> Result<Vec<Expr>, NftError> {
    let mut v = Vec::new();
    for f in fields {
        match f {
            Field::ArpSenderMac | Field::ArpSenderIp => v.extend(ctx.need(family, Proto::Arp)?),
            Field::IpSaddr(af) | Field::IpDaddr(af) => v.extend(ctx.need(family, Proto::Ip(*af))?),
            _ => {}
        }
    }
    Ok(v)
}

fn port_cmp(offset: u32, r: &corral_sandbox_core::PortRange) -> Result<Vec<Expr>, NftError> {
    let mut v = vec![payload(TRANSPORT, offset, 2)?];
    if r.start() == r.end() {
        v.push(cmp(libc::NFT_CMP_EQ, &r.start().to_be_bytes())?);
    } else {
        // Two compares, as `nft` encodes a port range.
        v.push(cmp(libc::NFT_CMP_GTE, &r.start().to_be_bytes())?);
        v.push(cmp(libc::NFT_CMP_LTE, &r.end().to_be_bytes())?);
    }
    Ok(v)
}

fn match_exprs(m: &Match, family: TableFamily, ctx: &mut Ctx) -> Result<Vec<Expr>, NftError> {
    Ok(match m {
        Match::IifName(n) => vec![
            meta(libc::NFT_META_IIFNAME)?,
            cmp(libc::NFT_CMP_EQ, &ifname(n)?)?,
        ],
        Match::OifName(n) => vec![
            meta(libc::NFT_META_OIFNAME)?,
            cmp(libc::NFT_CMP_EQ, &ifname(n)?)?,
        ],
        Match::OifNameNot(n) => {
            vec![
                meta(libc::NFT_META_OIFNAME)?,
                cmp(libc::NFT_CMP_NEQ, &ifname(n)?)?,
            ]
        }
        Match::CtEstablishedRelated => vec![
            ct(libc::NFT_CT_STATE)?,
            bitwise(&CT_ESTABLISHED_RELATED.to_ne_bytes())?,
            cmp(libc::NFT_CMP_NEQ, &0u32.to_ne_bytes())?,
        ],
        Match::CtInvalid => vec![
            ct(libc::NFT_CT_STATE)?,
            bitwise(&CT_INVALID.to_ne_bytes())?,
            cmp(libc::NFT_CMP_NEQ, &0u32.to_ne_bytes())?,
        ],
        Match::CtDirection(d) => vec![
            ct(libc::NFT_CT_DIRECTION)?,
            cmp(libc::NFT_CMP_EQ, &[d.number()])?,
        ],
        Match::IifGroup(g) => vec![
            meta(libc::NFT_META_IIFGROUP)?,
            cmp(libc::NFT_CMP_EQ, &g.to_ne_bytes())?,
        ],
        Match::OifGroup(g) => vec![
            meta(libc::NFT_META_OIFGROUP)?,
            cmp(libc::NFT_CMP_EQ, &g.to_ne_bytes())?,
        ],
        Match::IifNameNot(n) => vec![
            meta(libc::NFT_META_IIFNAME)?,
            cmp(libc::NFT_CMP_NEQ, &ifname(n)?)?,
        ],
        Match::FibSaddrType(t) | Match::FibSaddrTypeNot(t) => {
            let op = if matches!(m, Match::FibSaddrType(_)) {
                libc::NFT_CMP_EQ
            } else {
                libc::NFT_CMP_NEQ
            };
            vec![
                e(c"fib")?
                    .u32(sys::NFTNL_EXPR_FIB_DREG, REG1)
                    .u32(sys::NFTNL_EXPR_FIB_RESULT, FIB_RESULT_ADDRTYPE)
                    .u32(sys::NFTNL_EXPR_FIB_FLAGS, FIB_F_SADDR),
                cmp(op, &t.number().to_ne_bytes())?,
            ]
        }
        Match::NfProto(f) => {
            ctx.proto = Some(Proto::Ip(*f));
            nfproto(*f)?.into()
        }
        Match::L4Proto(p) => vec![
            meta(libc::NFT_META_L4PROTO)?,
            cmp(libc::NFT_CMP_EQ, &[p.number()])?,
        ],
        Match::Dport(r) => port_cmp(2, r)?,
        Match::Sport(r) => port_cmp(0, r)?,
        Match::CtNew => vec![
            ct(libc::NFT_CT_STATE)?,
            bitwise(&CT_NEW.to_ne_bytes())?,
            cmp(libc::NFT_CMP_NEQ, &0u32.to_ne_bytes())?,
        ],
        Match::CtRelated => vec![
            ct(libc::NFT_CT_STATE)?,
            bitwise(&CT_RELATED.to_ne_bytes())?,
            cmp(libc::NFT_CMP_NEQ, &0u32.to_ne_bytes())?,
        ],
        Match::CtOrigSaddrIn(net) => ct_orig_saddr(*net)?,
        // What `nft` emits for `tcp flags & (fin|syn|rst|ack) != syn`: its
        // own protocol check, the flags byte, the mask, the compare.
        Match::TcpNotSyn => vec![
            meta(libc::NFT_META_L4PROTO)?,
            cmp(libc::NFT_CMP_EQ, &[libc::IPPROTO_TCP as u8])?,
            payload(TRANSPORT, 13, 1)?,
            bitwise(&[TCP_FIN | TCP_SYN | TCP_RST | TCP_ACK])?,
            cmp(libc::NFT_CMP_NEQ, &[TCP_SYN])?,
        ],
        Match::EtherType(t) => {
            ctx.proto = match *t {
                ETH_P_IP => Some(Proto::Ip(AddrFamily::V4)),
                ETH_P_IPV6 => Some(Proto::Ip(AddrFamily::V6)),
                ETH_P_ARP => Some(Proto::Arp),
                _ => None,
            };
            ethertype(*t)?.into()
        }
        Match::InSet {
            fields,
            set,
            negate,
        } => {
            let mut v = field_deps(fields, family, ctx)?;
            v.extend(concat::lookup(fields, set, *negate)?);
            v
        }
        Match::Bytes { field, value } => concat::bytes_eq(*field, value)?,
        Match::BitsSet { field, mask } => vec![
            concat::load(*field, REG1)?,
            bitwise(mask)?,
            cmp(libc::NFT_CMP_NEQ, &vec![0u8; mask.len()])?,
        ],
        Match::Ip6Fragment => vec![
            e(c"exthdr")?
                .u32(sys::NFTNL_EXPR_EXTHDR_DREG, REG1)
                .u8(sys::NFTNL_EXPR_EXTHDR_TYPE, IPPROTO_FRAGMENT)
                .u32(sys::NFTNL_EXPR_EXTHDR_OFFSET, 0)
                .u32(sys::NFTNL_EXPR_EXTHDR_LEN, 1)
                .u32(sys::NFTNL_EXPR_EXTHDR_FLAGS, EXTHDR_F_PRESENT)
                .u32(sys::NFTNL_EXPR_EXTHDR_OP, EXTHDR_OP_IPV6),
            cmp(libc::NFT_CMP_EQ, &[1])?,
        ],
        Match::Meter { set, fields, limit } => {
            let mut v = field_deps(fields, family, ctx)?;
            v.extend(concat::meter(fields, set, *limit)?);
            v
        }
        Match::ArpSenderIn(net) => {
            let mut v = ctx.need(family, Proto::Arp)?;
            // Sender protocol address of an Ethernet/IPv4 ARP packet.
            let bytes = net.network().octets();
            v.extend(prefix_match(
                14,
                4,
                &bytes,
                net.prefix_len(),
                libc::NFT_CMP_EQ,
            )?);
            v
        }
        Match::Icmpv6Type(t) => vec![payload(TRANSPORT, 0, 1)?, cmp(libc::NFT_CMP_EQ, &[*t])?],
        Match::DaddrInSet(f, set) | Match::SaddrInSet(f, set) => {
            let (off, len) = addr_field(*f, matches!(m, Match::DaddrInSet(..)));
            let mut v = ctx.need(family, Proto::Ip(*f))?;
            v.extend([
                payload(NETWORK, off, len)?,
                e(c"lookup")?
                    .u32(sys::NFTNL_EXPR_LOOKUP_SREG, REG1)
                    .str(sys::NFTNL_EXPR_LOOKUP_SET, &cstr(set)?)
                    .u32(sys::NFTNL_EXPR_LOOKUP_FLAGS, 0),
            ]);
            v
        }
        Match::Daddr(addr) => {
            let f = AddrFamily::of(*addr);
            let (off, len) = addr_field(f, true);
            let mut v = ctx.need(family, Proto::Ip(f))?;
            v.extend([
                payload(NETWORK, off, len)?,
                cmp(libc::NFT_CMP_EQ, &addr_bytes(*addr))?,
            ]);
            v
        }
        Match::SaddrIn(net) => net_match(family, *net, false, libc::NFT_CMP_EQ, ctx)?,
        Match::DaddrIn(net) => net_match(family, *net, true, libc::NFT_CMP_EQ, ctx)?,
        Match::SaddrNotIn(net) => net_match(family, *net, false, libc::NFT_CMP_NEQ, ctx)?,
        Match::ArpTargetIn(net) => {
            let mut v = ctx.need(family, Proto::Arp)?;
            // Target protocol address of an Ethernet/IPv4 ARP packet.
            let bytes = net.network().octets();
            v.extend(prefix_match(
                24,
                4,
                &bytes,
                net.prefix_len(),
                libc::NFT_CMP_EQ,
            )?);
            v
        }
    })
}

/// `FIELD vmap @map`: the field into a register, looked up with the
/// verdict register as the destination (what `nft` emits for it).
fn vmap_exprs(
    field: MapField,
    map: &str,
    family: TableFamily,
    ctx: &mut Ctx,
) -> Result<Vec<Expr>, NftError> {
    let (load, deps) = match field {
        MapField::IifName => (Field::IifName, Vec::new()),
        MapField::OifName => (Field::OifName, Vec::new()),
        MapField::Saddr(f) => (Field::IpSaddr(f), ctx.need(family, Proto::Ip(f))?),
        MapField::Daddr(f) => {
            let (offset, len) = addr_field(f, true);
            let at = Field::Raw {
                base: PayloadBase::Network,
                offset,
                len,
            };
            (at, ctx.need(family, Proto::Ip(f))?)
        }
        MapField::ArpSaddr => (Field::ArpSenderIp, ctx.need(family, Proto::Arp)?),
        // Target protocol address of an Ethernet/IPv4 ARP packet.
        MapField::ArpDaddr => (
            Field::Raw {
                base: PayloadBase::Network,
                offset: 24,
                len: 4,
            },
            ctx.need(family, Proto::Arp)?,
        ),
    };
    let mut v = deps;
    v.push(concat::load(load, REG1)?);
    v.push(
        e(c"lookup")?
            .u32(sys::NFTNL_EXPR_LOOKUP_SREG, REG1)
            .u32(sys::NFTNL_EXPR_LOOKUP_DREG, REG_VERDICT)
            .str(sys::NFTNL_EXPR_LOOKUP_SET, &cstr(map)?)
            .u32(sys::NFTNL_EXPR_LOOKUP_FLAGS, 0),
    );
    Ok(v)
}

fn verdict_exprs(v: &Verdict, family: TableFamily, ctx: &mut Ctx) -> Result<Vec<Expr>, NftError> {
    let imm = |code: i32| -> Result<Expr, NftError> {
        Ok(e(c"immediate")?
            .u32(sys::NFTNL_EXPR_IMM_DREG, REG_VERDICT)
            .u32(sys::NFTNL_EXPR_IMM_VERDICT, code as u32))
    };
    Ok(match v {
        Verdict::Accept => vec![imm(libc::NF_ACCEPT)?],
        Verdict::Drop => vec![imm(libc::NF_DROP)?],
        Verdict::Jump(chain) => {
            vec![imm(libc::NFT_JUMP)?.str(sys::NFTNL_EXPR_IMM_CHAIN, &cstr(chain)?)]
        }
        Verdict::Reject(RejectKind::TcpReset) => {
            vec![e(c"reject")?.u32(sys::NFTNL_EXPR_REJECT_TYPE, libc::NFT_REJECT_TCP_RST as u32)]
        }
        Verdict::Reject(RejectKind::IcmpxAdminProhibited) => vec![
            e(c"reject")?
                .u32(
                    sys::NFTNL_EXPR_REJECT_TYPE,
                    libc::NFT_REJECT_ICMPX_UNREACH as u32,
                )
                .u8(
                    sys::NFTNL_EXPR_REJECT_CODE,
                    libc::NFT_REJECT_ICMPX_ADMIN_PROHIBITED as u8,
                ),
        ],
        Verdict::Masquerade => vec![e(c"masq")?],
        Verdict::Return => vec![imm(libc::NFT_RETURN)?],
        Verdict::Vmap { field, map } => vmap_exprs(*field, map, family, ctx)?,
    })
}

/// Build the libnftnl rule for a plan rule in `family`/`table`/`chain`.
pub(crate) fn build_rule(
    family: TableFamily,
    table: &str,
    chain: &str,
    rule: &RulePlan,
) -> Result<Rule, NftError> {
    let mut r = Rule::new()?;
    r.set_u32(sys::NFTNL_RULE_FAMILY, u32::from(family.nfproto()));
    r.set_str(sys::NFTNL_RULE_TABLE, &cstr(table)?);
    r.set_str(sys::NFTNL_RULE_CHAIN, &cstr(chain)?);
    let mut ctx = Ctx::default();
    for m in &rule.matches {
        for x in match_exprs(m, family, &mut ctx)? {
            r.push(x);
        }
    }
    if rule.counter {
        r.push(e(c"counter")?);
    }
    if let Some(log) = &rule.log {
        r.push(
            e(c"log")?
                .str(sys::NFTNL_EXPR_LOG_PREFIX, &cstr(&log.prefix)?)
                .u16(sys::NFTNL_EXPR_LOG_GROUP, log.group)
                .u32(sys::NFTNL_EXPR_LOG_SNAPLEN, log.snaplen),
        );
    }
    for x in verdict_exprs(&rule.verdict, family, &mut ctx)? {
        r.push(x);
    }
    Ok(r)
}

/// One expression as `[ name body ]`, with counter values left out so a
/// planned rule and a live rule compare equal.
fn expr_text(x: &ExprRef<'_>) -> String {
    let name = x.name();
    if name == "counter" {
        return "[ counter ]".to_owned();
    }
    if name == "dynset" {
        // The kernel reports a dynset's timeout even when none was given
        // (0: the set's default), and refuses one on a set without
        // timeouts; compare without it when it is 0.
        return format!("[ {name} {} ]", x.text().replace(" timeout 0ms", ""));
    }
    format!("[ {name} {} ]", x.text())
}

/// A rule's expressions as one comparable line.
pub(crate) fn rule_text(r: &Rule) -> Result<String, NftError> {
    let mut parts = Vec::new();
    r.for_each_expr(|x| parts.push(expr_text(&x)))?;
    Ok(parts.join(" "))
}

/// The comparable text of a plan rule (what read-back will show when the
/// rule is in place).
pub fn fingerprint(family: TableFamily, chain: &str, rule: &RulePlan) -> Result<String, NftError> {
    rule_text(&build_rule(family, crate::plan::TABLE_NAME, chain, rule)?)
}

/// Counter values and verdict class of a live rule.
pub(crate) fn counters_and_class(
    r: &Rule,
) -> Result<(u64, u64, crate::plan::VerdictClass), NftError> {
    use crate::plan::VerdictClass;
    let (mut packets, mut bytes) = (0, 0);
    let mut class = VerdictClass::Other;
    r.for_each_expr(|x| match x.name().as_str() {
        "counter" => {
            packets = x.get_u64(sys::NFTNL_EXPR_CTR_PACKETS);
            bytes = x.get_u64(sys::NFTNL_EXPR_CTR_BYTES);
        }
        "reject" => class = VerdictClass::Blocked,
        "immediate" if x.is_set(sys::NFTNL_EXPR_IMM_VERDICT) => {
            class = match x.get_u32(sys::NFTNL_EXPR_IMM_VERDICT) as i32 {
                libc::NF_ACCEPT => VerdictClass::Accepted,
                libc::NF_DROP => VerdictClass::Blocked,
                _ => VerdictClass::Other,
            }
        }
        _ => {}
    })?;
    Ok((packets, bytes, class))
}

#[cfg(test)]
#[path = "expr_tests.rs"]
mod tests;
