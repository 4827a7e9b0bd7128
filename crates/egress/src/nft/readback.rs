//! Read corral's tables back from the kernel: chains, rules (as comparable
//! text plus counters), sets and their elements. Only `inet corral` and
//! `bridge corral` are read; a missing table is simply absent.

use std::ffi::c_char;
use std::net::IpAddr;

use nftnl_sys as sys;

use super::NftError;
use super::expr::{counters_and_class, rule_text};
use super::obj::{Chain, Rule, Set, Table, cstr};
use super::set::{learned_from_wire, ranges_from_wire};
use super::socket::{Msg, NlSocket};
use crate::plan::eval::LearnedAddr;
use crate::plan::{AddrFamily, AddrRange, SetKind, TABLE_NAME, TableFamily, VerdictClass};

/// Everything corral owns in the kernel right now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveState {
    /// The corral tables that exist (zero, one or two).
    pub tables: Vec<LiveTable>,
}

/// One live corral table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveTable {
    /// Family.
    pub family: TableFamily,
    /// Raw `NFT_TABLE_F_*` flags (`dormant` = 1 switches every chain off).
    pub flags: u32,
    /// Sets with their elements.
    pub sets: Vec<LiveSet>,
    /// Chains with their rules, in kernel order.
    pub chains: Vec<LiveChain>,
}

/// A live set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveSet {
    /// Name.
    pub name: String,
    /// Key family (from the key length); `None` for keys corral never uses.
    pub family: Option<AddrFamily>,
    /// Raw `NFT_SET_*` flags.
    pub flags: u32,
    /// Elements as ranges (single addresses for non-interval sets).
    pub elements: Vec<AddrRange>,
    /// Default element timeout in milliseconds (0 = none).
    pub timeout_ms: u64,
    /// Most elements the kernel holds (`NFTA_SET_DESC_SIZE`; 0 = no bound).
    pub size: u32,
    /// Milliseconds until each element of `elements` expires (dynamic
    /// sets; empty for interval sets).
    pub expires_ms: Vec<u64>,
    /// Keyed by `source . address` (a pinned learned set: `family` is the
    /// addresses', `elements` the learned addresses).
    pub pinned: bool,
    /// The sandbox address each element of `elements` opens to (pinned
    /// sets; empty otherwise).
    pub askers: Vec<IpAddr>,
    /// Key length in bytes.
    pub key_len: u32,
    /// Every element's key as the kernel stores it (keyed sets are
    /// compared on these).
    pub keys: Vec<Vec<u8>>,
    /// The set's user data: how `nft` is told to show its keys (see
    /// [`set_userdata`](crate::nft::set_userdata)).
    pub userdata: Vec<u8>,
    /// A verdict map's elements, sorted: (key bytes, whether it ends an
    /// interval, the chain its verdict jumps to; empty for an end).
    pub jumps: Vec<(Vec<u8>, bool, String)>,
}

impl LiveSet {
    /// A dynamic set's elements with the milliseconds each has left.
    pub fn learned(&self) -> Vec<(LearnedAddr, u64)> {
        let exp = self.expires_ms.iter().copied().chain(std::iter::repeat(0));
        let askers = self
            .askers
            .iter()
            .copied()
            .map(Some)
            .chain(std::iter::repeat(None));
        self.elements
            .iter()
            .zip(askers)
            .map(|(r, asker)| LearnedAddr { asker, addr: *r })
            .zip(exp)
            .collect()
    }
}

/// Hook, priority, type and policy of a live base chain, raw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveBase {
    /// Chain type (`filter`, `nat`).
    pub kind: String,
    /// Hook number.
    pub hook: u32,
    /// Priority.
    pub priority: i32,
    /// Policy verdict (`NF_ACCEPT` = 1).
    pub policy: u32,
}

/// A live chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveChain {
    /// Name.
    pub name: String,
    /// `Some` for base chains.
    pub base: Option<LiveBase>,
    /// Rules in order.
    pub rules: Vec<LiveRule>,
}

/// A live rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveRule {
    /// Kernel handle (stable while the rule exists).
    pub handle: u64,
    /// Expressions as comparable text (counter values left out).
    pub text: String,
    /// Counter packets.
    pub packets: u64,
    /// Counter bytes.
    pub bytes: u64,
    /// Whether the verdict accepts, blocks, or neither.
    pub class: VerdictClass,
}

impl LiveState {
    /// The live table of a family, if it exists.
    pub fn table(&self, family: TableFamily) -> Option<&LiveTable> {
        self.tables.iter().find(|t| t.family == family)
    }

    /// True when no corral table exists.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

impl LiveTable {
    /// A chain by name.
    pub fn chain(&self, name: &str) -> Option<&LiveChain> {
        self.chains.iter().find(|c| c.name == name)
    }

    /// A set by name.
    pub fn set(&self, name: &str) -> Option<&LiveSet> {
        self.sets.iter().find(|s| s.name == name)
    }
}

fn parse_err(what: &'static str) -> NftError {
    NftError::Parse(what)
}

/// Build a dump request of `ty` for `family`, with `payload` filling the
/// table filter.
fn request(
    buf: *mut c_char,
    seq: u32,
    ty: i32,
    family: TableFamily,
    payload: impl FnOnce(*mut libc::nlmsghdr),
) -> *mut libc::nlmsghdr {
    let flags = libc::NLM_F_DUMP as u16;
    // SAFETY: `buf` is the dump request buffer (64 KiB, zeroed).
    let h = unsafe { sys::nftnl_nlmsg_build_hdr(buf, ty as u16, family.nfproto(), flags, seq) };
    payload(h);
    h
}

fn table_names(sock: &NlSocket, family: TableFamily) -> Result<Vec<(String, u32)>, NftError> {
    let mut names = Vec::new();
    sock.dump(
        "tables",
        |buf, seq| request(buf, seq, libc::NFT_MSG_GETTABLE, family, |_| {}),
        |m: &Msg<'_>| {
            let t = Table::new()?;
            // SAFETY: `m.hdr` points at a complete message inside the
            // receive buffer; `t` is valid.
            if unsafe { sys::nftnl_table_nlmsg_parse(m.hdr, t.as_ptr()) } < 0 {
                return Err(parse_err("table"));
            }
            names.push((
                t.get_str(sys::NFTNL_TABLE_NAME),
                t.get_u32(sys::NFTNL_TABLE_FLAGS),
            ));
            Ok(())
        },
    )?;
    Ok(names)
}

fn read_chains(sock: &NlSocket, family: TableFamily) -> Result<Vec<LiveChain>, NftError> {
    let mut filter = Chain::new()?;
    filter.set_str(sys::NFTNL_CHAIN_TABLE, &cstr(TABLE_NAME)?);
    let mut out = Vec::new();
    sock.dump(
        "chains",
        |buf, seq| {
            request(buf, seq, libc::NFT_MSG_GETCHAIN, family, |h| {
                // SAFETY: `h` is the request header; `filter` is valid.
                unsafe { sys::nftnl_chain_nlmsg_build_payload(h, filter.as_ptr()) }
            })
        },
        |m: &Msg<'_>| {
            let c = Chain::new()?;
            // SAFETY: complete message; valid chain object.
            if unsafe { sys::nftnl_chain_nlmsg_parse(m.hdr, c.as_ptr()) } < 0 {
                return Err(parse_err("chain"));
            }
            if c.get_str(sys::NFTNL_CHAIN_TABLE) != TABLE_NAME {
                return Ok(());
            }
            let base = c.is_set(sys::NFTNL_CHAIN_HOOKNUM).then(|| LiveBase {
                kind: c.get_str(sys::NFTNL_CHAIN_TYPE),
                hook: c.get_u32(sys::NFTNL_CHAIN_HOOKNUM),
                priority: c.get_s32(sys::NFTNL_CHAIN_PRIO),
                policy: c.get_u32(sys::NFTNL_CHAIN_POLICY),
            });
            out.push(LiveChain {
                name: c.get_str(sys::NFTNL_CHAIN_NAME),
                base,
                rules: Vec::new(),
            });
            Ok(())
        },
    )?;
    Ok(out)
}

/// Each chain's rules, one dump per chain. One dump of the whole table
/// costs the kernel more than the table: it answers a dump in buffers of at
/// most 32 KiB, and each buffer after the first walks every rule of the
/// table again from the start to find where the last stopped (quadratic:
/// ~28,000 rules at 500 profiles). A chain named in the request is found
/// by hash, and its own rules are all it walks.
fn read_rules(
    sock: &NlSocket,
    family: TableFamily,
    chains: &mut [LiveChain],
) -> Result<(), NftError> {
    for c in chains.iter_mut() {
        let mut filter = Rule::new()?;
        filter.set_str(sys::NFTNL_RULE_TABLE, &cstr(TABLE_NAME)?);
        filter.set_str(sys::NFTNL_RULE_CHAIN, &cstr(&c.name)?);
        let rules = &mut c.rules;
        let name = c.name.as_str();
        sock.dump(
            "rules",
            |buf, seq| {
                request(buf, seq, libc::NFT_MSG_GETRULE, family, |h| {
                    // SAFETY: `h` is the request header; `filter` is valid.
                    unsafe { sys::nftnl_rule_nlmsg_build_payload(h, filter.as_ptr()) }
                })
            },
            |m: &Msg<'_>| {
                let r = Rule::new()?;
                // SAFETY: complete message; valid rule object.
                if unsafe { sys::nftnl_rule_nlmsg_parse(m.hdr, r.as_ptr()) } < 0 {
                    return Err(parse_err("rule"));
                }
                if r.get_str(sys::NFTNL_RULE_TABLE) != TABLE_NAME
                    || r.get_str(sys::NFTNL_RULE_CHAIN) != name
                {
                    return Ok(());
                }
                let (packets, bytes, class) = counters_and_class(&r)?;
                rules.push(LiveRule {
                    handle: r.get_u64(sys::NFTNL_RULE_HANDLE),
                    text: rule_text(&r)?,
                    packets,
                    bytes,
                    class,
                });
                Ok(())
            },
        )?;
    }
    Ok(())
}

fn read_sets(
    sock: &NlSocket,
    family: TableFamily,
    wanted: impl Fn(&str, u32) -> bool,
) -> Result<Vec<LiveSet>, NftError> {
    read_sets_with(sock, family, wanted, true)
}

/// A set's definition as dumped, before its elements are read.
struct SetHeader {
    name: String,
    flags: u32,
    key_len: u32,
    key_type: u32,
    timeout_ms: u64,
    userdata: Vec<u8>,
    size: u32,
}

fn read_sets_with(
    sock: &NlSocket,
    family: TableFamily,
    wanted: impl Fn(&str, u32) -> bool,
    meter_keys: bool,
) -> Result<Vec<LiveSet>, NftError> {
    let mut filter = Set::new()?;
    filter.set_str(sys::NFTNL_SET_TABLE, &cstr(TABLE_NAME)?);
    let mut found: Vec<SetHeader> = Vec::new();
    sock.dump(
        "sets",
        |buf, seq| {
            request(buf, seq, libc::NFT_MSG_GETSET, family, |h| {
                // SAFETY: `h` is the request header; `filter` is valid.
                unsafe { sys::nftnl_set_nlmsg_build_payload(h, filter.as_ptr()) }
            })
        },
        |m: &Msg<'_>| {
            let s = Set::new()?;
            // SAFETY: complete message; valid set object.
            if unsafe { sys::nftnl_set_nlmsg_parse(m.hdr, s.as_ptr()) } < 0 {
                return Err(parse_err("set"));
            }
            if s.get_str(sys::NFTNL_SET_TABLE) == TABLE_NAME {
                found.push(SetHeader {
                    name: s.get_str(sys::NFTNL_SET_NAME),
                    flags: s.get_u32(sys::NFTNL_SET_FLAGS),
                    key_len: s.get_u32(sys::NFTNL_SET_KEY_LEN),
                    key_type: s.get_u32(sys::NFTNL_SET_KEY_TYPE),
                    timeout_ms: s.get_u64(sys::NFTNL_SET_TIMEOUT),
                    userdata: s.get_data(sys::NFTNL_SET_USERDATA),
                    size: s.get_u32(sys::NFTNL_SET_DESC_SIZE),
                });
            }
            Ok(())
        },
    )?;
    let mut out = Vec::new();
    for SetHeader {
        name,
        flags,
        key_len,
        key_type,
        timeout_ms,
        userdata,
        size,
    } in found
    {
        if !wanted(&name, flags) {
            continue;
        }
        let (fam, pinned) = match (key_len, pinned_family(key_len, key_type)) {
            (_, Some(f)) => (Some(f), true),
            (4, None) => (Some(AddrFamily::V4), false),
            (16, None) => (Some(AddrFamily::V6), false),
            _ => (None, false),
        };
        let kind = if flags & libc::NFT_SET_INTERVAL as u32 != 0 {
            SetKind::Interval
        } else {
            SetKind::Dynamic
        };
        let is_meter = flags & libc::NFT_SET_EVAL as u32 != 0;
        let acc = if is_meter && !meter_keys {
            Set::new()?
        } else {
            read_elements(sock, family, &name)?
        };
        let is_map = flags & libc::NFT_SET_MAP as u32 != 0;
        let mut jumps: Vec<(Vec<u8>, bool, String)> = if is_map {
            let end = libc::NFT_SET_ELEM_INTERVAL_END as u32;
            acc.jump_elems()?
                .into_iter()
                .map(|(k, f, c)| (k, f & end != 0, c))
                .collect()
        } else {
            Vec::new()
        };
        jumps.sort();
        let elems = if is_map { Vec::new() } else { acc.elems()? };
        let (mut elements, mut expires_ms, mut askers) = (Vec::new(), Vec::new(), Vec::new());
        match (fam, kind) {
            (Some(f), SetKind::Interval) => elements = ranges_from_wire(f, kind, &elems),
            (Some(f), SetKind::Dynamic) => {
                for (e, ms) in learned_from_wire(f, pinned, &elems) {
                    elements.push(e.addr);
                    askers.extend(e.asker);
                    expires_ms.push(ms);
                }
            }
            (None, _) => {}
        }
        let mut keys: Vec<Vec<u8>> = elems.into_iter().map(|(k, _, _)| k).collect();
        keys.sort();
        out.push(LiveSet {
            name,
            family: fam,
            flags,
            elements,
            timeout_ms,
            size,
            expires_ms,
            pinned,
            askers,
            key_len,
            keys,
            userdata,
            jumps,
        });
    }
    Ok(out)
}

/// The family of a pinned learned set's key (`ipv4_addr . ipv4_addr` or
/// `ipv6_addr . ipv6_addr`), from its length and type.
fn pinned_family(key_len: u32, key_type: u32) -> Option<AddrFamily> {
    [AddrFamily::V4, AddrFamily::V6].into_iter().find(|&f| {
        let parts = crate::plan::SetPlan::pinned_key(f);
        crate::plan::keyed::key_len(&parts) == key_len
            && crate::plan::keyed::key_type(&parts) == key_type
    })
}

/// The set's elements, in a set object (read them with `elems` or
/// `jump_elems`).
fn read_elements(sock: &NlSocket, family: TableFamily, set: &str) -> Result<Set, NftError> {
    let mut req = Set::new()?;
    req.set_str(sys::NFTNL_SET_TABLE, &cstr(TABLE_NAME)?);
    req.set_str(sys::NFTNL_SET_NAME, &cstr(set)?);
    req.set_u32(sys::NFTNL_SET_FAMILY, u32::from(family.nfproto()));
    let acc = Set::new()?;
    sock.dump(
        "set elements",
        |buf, seq| {
            request(buf, seq, libc::NFT_MSG_GETSETELEM, family, |h| {
                // SAFETY: `h` is the request header; `req` is valid and
                // carries no elements.
                unsafe { sys::nftnl_set_elems_nlmsg_build_payload(h, req.as_ptr()) }
            })
        },
        |m: &Msg<'_>| {
            // SAFETY: complete message; elements are appended to `acc`.
            if unsafe { sys::nftnl_set_elems_nlmsg_parse(m.hdr, acc.as_ptr()) } < 0 {
                return Err(parse_err("set elements"));
            }
            Ok(())
        },
    )?;
    Ok(acc)
}

/// Read corral's tables in the current thread's network namespace.
pub fn read_live() -> Result<LiveState, NftError> {
    read_tables(true)
}

/// [`read_live`] without the keys of the meters (sets the kernel fills
/// itself, which drift does not compare): what a verify needs, one set
/// element dump per profile meter fewer.
pub fn read_live_enforcing() -> Result<LiveState, NftError> {
    read_tables(false)
}

fn read_tables(meter_keys: bool) -> Result<LiveState, NftError> {
    let sock = NlSocket::open()?;
    let mut state = LiveState::default();
    for family in [TableFamily::Inet, TableFamily::Bridge] {
        let Some(flags) = table_names(&sock, family)?
            .into_iter()
            .find_map(|(n, f)| (n == TABLE_NAME).then_some(f))
        else {
            continue;
        };
        let mut chains = read_chains(&sock, family)?;
        read_rules(&sock, family, &mut chains)?;
        let sets = read_sets_with(&sock, family, |_, _| true, meter_keys)?;
        state.tables.push(LiveTable {
            family,
            flags,
            sets,
            chains,
        });
    }
    Ok(state)
}

/// The gateway resolver's dynamic sets of `inet corral` with their
/// elements, and nothing else (no chains, rules or other sets): what an
/// apply carries into the new ruleset, read without dumping the whole
/// table.
pub fn read_learned() -> Result<LiveState, NftError> {
    let sock = NlSocket::open()?;
    let family = TableFamily::Inet;
    let Some(flags) = table_names(&sock, family)?
        .into_iter()
        .find_map(|(n, f)| (n == TABLE_NAME).then_some(f))
    else {
        return Ok(LiveState::default());
    };
    let other = (libc::NFT_SET_INTERVAL | libc::NFT_SET_MAP | libc::NFT_SET_EVAL) as u32;
    let timeout = libc::NFT_SET_TIMEOUT as u32;
    let sets = read_sets(&sock, family, |_, f| f & other == 0 && f & timeout != 0)?;
    Ok(LiveState {
        tables: vec![LiveTable {
            family,
            flags,
            sets,
            chains: Vec::new(),
        }],
    })
}

/// One set of a corral table with its elements, and nothing else (an
/// empty state when the table or the set does not exist).
pub fn read_set(family: TableFamily, name: &str) -> Result<LiveState, NftError> {
    let sock = NlSocket::open()?;
    let Some(flags) = table_names(&sock, family)?
        .into_iter()
        .find_map(|(n, f)| (n == TABLE_NAME).then_some(f))
    else {
        return Ok(LiveState::default());
    };
    let sets = read_sets(&sock, family, |n, _| n == name)?;
    Ok(LiveState {
        tables: vec![LiveTable {
            family,
            flags,
            sets,
            chains: Vec::new(),
        }],
    })
}
