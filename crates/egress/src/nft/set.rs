//! Named sets and their elements on the wire.
//!
//! An interval set stores a range `a..=b` as two elements: key `a`, and key
//! `b + 1` flagged `NFT_SET_ELEM_INTERVAL_END` (the first address *after*
//! the range). A range reaching the top of the address space has no end
//! element: the kernel treats an open start as running to the end. Reading
//! back inverts this (and ignores a lone end element at `0.0.0.0`/`::`,
//! which `nft -f` adds in front of fresh interval sets).

use nftnl_sys as sys;

use super::NftError;
use super::batch::{Batch, Op};
use super::obj::{Set, cstr};
use super::udata;
use crate::plan::eval::LearnedAddr;
use crate::plan::keyed;
use crate::plan::model::{from_u128, max_value, to_u128};
use crate::plan::{
    AddrFamily, AddrRange, KeyPart, KeyValue, KeyedKind, KeyedSetPlan, MapElement, MapKey,
    MapKeyValue, SetKind, SetPlan, TABLE_NAME, TableFamily, VmapPlan,
};

/// Elements per netlink message: keeps one message far below the 64 KiB a
/// nested attribute can hold (an IPv6 element is ~40 bytes on the wire).
pub(crate) const ELEMS_PER_MSG: usize = 1024;

fn flags(kind: SetKind) -> u32 {
    match kind {
        SetKind::Interval => libc::NFT_SET_INTERVAL as u32,
        SetKind::Dynamic => libc::NFT_SET_TIMEOUT as u32,
    }
}

/// A timeout in the milliseconds netlink carries.
pub(crate) fn timeout_ms(t: std::time::Duration) -> u64 {
    u64::try_from(t.as_millis()).unwrap_or(u64::MAX)
}

/// A set object carrying only identity (table, name, family).
pub(crate) fn carrier(family: TableFamily, name: &str) -> Result<Set, NftError> {
    let mut s = Set::new()?;
    s.set_str(sys::NFTNL_SET_TABLE, &cstr(TABLE_NAME)?);
    s.set_str(sys::NFTNL_SET_NAME, &cstr(name)?);
    s.set_u32(sys::NFTNL_SET_FAMILY, u32::from(family.nfproto()));
    Ok(s)
}

/// The set definition (no elements).
pub(crate) fn definition(family: TableFamily, set: &SetPlan, id: u32) -> Result<Set, NftError> {
    let mut s = carrier(family, &set.name)?;
    s.set_u32(sys::NFTNL_SET_ID, id);
    s.set_u32(sys::NFTNL_SET_FLAGS, flags(set.kind));
    let key = set.key();
    s.set_u32(sys::NFTNL_SET_KEY_TYPE, keyed::key_type(&key));
    s.set_u32(sys::NFTNL_SET_KEY_LEN, keyed::key_len(&key));
    s.set_data(sys::NFTNL_SET_USERDATA, &udata::address_set(set)?);
    if let Some(t) = set.timeout {
        s.set_u64(sys::NFTNL_SET_TIMEOUT, timeout_ms(t));
    }
    if let Some(n) = set.size {
        s.set_u32(sys::NFTNL_SET_DESC_SIZE, n);
    }
    Ok(s)
}

/// The `NFT_SET_*` flags a keyed set of `kind` has.
pub fn keyed_flags(kind: KeyedKind) -> u32 {
    match kind {
        KeyedKind::Static | KeyedKind::Runtime => 0,
        KeyedKind::Meter { timeout: None, .. } => libc::NFT_SET_EVAL as u32,
        KeyedKind::Meter {
            timeout: Some(_), ..
        } => (libc::NFT_SET_EVAL | libc::NFT_SET_TIMEOUT) as u32,
    }
}

/// The definition of a keyed set (no elements).
pub(crate) fn keyed_definition(
    family: TableFamily,
    set: &KeyedSetPlan,
    id: u32,
) -> Result<Set, NftError> {
    let mut s = carrier(family, &set.name)?;
    s.set_u32(sys::NFTNL_SET_ID, id);
    s.set_u32(sys::NFTNL_SET_FLAGS, keyed_flags(set.kind));
    s.set_u32(sys::NFTNL_SET_KEY_TYPE, set.key_type());
    s.set_u32(sys::NFTNL_SET_KEY_LEN, set.key_len());
    s.set_data(sys::NFTNL_SET_USERDATA, &udata::keyed_set(set)?);
    if let KeyedKind::Meter { timeout, size } = set.kind {
        s.set_u32(sys::NFTNL_SET_DESC_SIZE, size);
        if let Some(t) = timeout {
            s.set_u64(sys::NFTNL_SET_TIMEOUT, timeout_ms(t));
        }
    }
    Ok(s)
}

/// Queue messages adding (or deleting) `elements` of keyed `set`.
pub(crate) fn queue_keyed_elements(
    batch: &mut Batch,
    op: Op,
    family: TableFamily,
    set: &KeyedSetPlan,
    elements: &[Vec<KeyValue>],
) -> Result<(), NftError> {
    for chunk in elements.chunks(ELEMS_PER_MSG) {
        let mut s = carrier(family, &set.name)?;
        // Not sent with elements; lets `add_elem` check each key's length.
        s.set_u32(sys::NFTNL_SET_KEY_LEN, set.key_len());
        for e in chunk {
            s.add_elem(&set.key_bytes(e), None)?;
        }
        let verb = if op == Op::Add { "adding" } else { "deleting" };
        batch.elems(
            op,
            family.nfproto(),
            &s,
            format!("{verb} {} elements of set {}", chunk.len(), set.name),
        );
    }
    Ok(())
}

/// `NFT_DATA_VERDICT`: a map's data are verdicts.
const DATA_VERDICT: u32 = 0xffff_ff00;

/// The `NFT_SET_*` flags of a verdict map keyed by `key`.
pub fn map_flags(key: MapKey) -> u32 {
    let interval = match key {
        MapKey::IfName => 0,
        MapKey::Addr(_) => libc::NFT_SET_INTERVAL,
    };
    (libc::NFT_SET_MAP | interval) as u32
}

/// (datatype, key length) of a map's key, as `nft` records them.
fn map_key(key: MapKey) -> (u32, u32) {
    match key {
        MapKey::IfName => (KeyPart::IfName.datatype(), key.len()),
        MapKey::Addr(f) => (crate::plan::model::address_part(f).datatype(), key.len()),
    }
}

/// The definition of a verdict map (no elements).
pub(crate) fn map_definition(
    family: TableFamily,
    map: &VmapPlan,
    id: u32,
) -> Result<Set, NftError> {
    let mut s = carrier(family, &map.name)?;
    let (ty, len) = map_key(map.key);
    s.set_u32(sys::NFTNL_SET_ID, id);
    s.set_u32(sys::NFTNL_SET_FLAGS, map_flags(map.key));
    s.set_u32(sys::NFTNL_SET_KEY_TYPE, ty);
    s.set_u32(sys::NFTNL_SET_KEY_LEN, len);
    s.set_u32(sys::NFTNL_SET_DATA_TYPE, DATA_VERDICT);
    s.set_data(sys::NFTNL_SET_USERDATA, &udata::map(map.key));
    Ok(s)
}

/// The wire elements of a verdict map: (key, flags, jump target; `None`
/// for an interval's end element).
pub fn map_wire_elements(elements: &[MapElement]) -> Vec<(Vec<u8>, Option<u32>, Option<String>)> {
    let mut out = Vec::with_capacity(elements.len() * 2);
    for e in elements {
        match &e.key {
            MapKeyValue::IfName(n) => {
                let mut b = n.as_bytes().to_vec();
                b.resize(16, 0);
                out.push((b, None, Some(e.chain.clone())));
            }
            MapKeyValue::Range(r) => {
                let f = r.family();
                let wire = wire_elements(f, SetKind::Interval, std::slice::from_ref(r));
                for (key, flags) in wire {
                    let chain = flags.is_none().then(|| e.chain.clone());
                    out.push((key, flags, chain));
                }
            }
        }
    }
    out
}

/// Queue the message adding every element of `map`.
pub(crate) fn queue_map_elements(
    batch: &mut Batch,
    family: TableFamily,
    map: &VmapPlan,
) -> Result<(), NftError> {
    // Whole elements per message: a range's end never leaves its start.
    for elements in map.elements.chunks(ELEMS_PER_MSG / 2) {
        let chunk = map_wire_elements(elements);
        let mut s = carrier(family, &map.name)?;
        for (key, flags, chain) in &chunk {
            let c = chain.as_deref().map(cstr).transpose()?;
            s.add_elem_jump(key, *flags, c.as_deref())?;
        }
        batch.elems(
            Op::Add,
            family.nfproto(),
            &s,
            format!("adding {} elements of map {}", chunk.len(), map.name),
        );
    }
    Ok(())
}

fn key_bytes(family: AddrFamily, v: u128) -> Vec<u8> {
    match family {
        AddrFamily::V4 => (v as u32).to_be_bytes().to_vec(),
        AddrFamily::V6 => v.to_be_bytes().to_vec(),
    }
}

/// The wire elements of `ranges`: (key, flags).
pub(crate) fn wire_elements(
    family: AddrFamily,
    kind: SetKind,
    ranges: &[AddrRange],
) -> Vec<(Vec<u8>, Option<u32>)> {
    let mut out = Vec::with_capacity(ranges.len() * 2);
    for r in ranges {
        let (start, end) = (to_u128(r.start), to_u128(r.end));
        out.push((key_bytes(family, start), None));
        if kind == SetKind::Interval && end != max_value(family) {
            out.push((
                key_bytes(family, end + 1),
                Some(libc::NFT_SET_ELEM_INTERVAL_END as u32),
            ));
        }
    }
    out
}

/// Queue messages adding (or deleting) `ranges` of `set` into `batch`,
/// chunked so each message stays small.
pub(crate) fn queue_elements(
    batch: &mut Batch,
    op: Op,
    family: TableFamily,
    set: &SetPlan,
    ranges: &[AddrRange],
) -> Result<(), NftError> {
    let wire = wire_elements(set.family, set.kind, ranges);
    // Chunks end on a whole range: never split a start from its end.
    let mut chunk: Vec<(Vec<u8>, Option<u32>)> = Vec::new();
    let flush =
        |batch: &mut Batch, chunk: &mut Vec<(Vec<u8>, Option<u32>)>| -> Result<(), NftError> {
            if chunk.is_empty() {
                return Ok(());
            }
            let mut s = carrier(family, &set.name)?;
            s.set_u32(sys::NFTNL_SET_KEY_LEN, set.family.key_len() as u32);
            for (key, f) in chunk.iter() {
                s.add_elem(key, *f)?;
            }
            let verb = if op == Op::Add { "adding" } else { "deleting" };
            batch.elems(
                op,
                family.nfproto(),
                &s,
                format!("{verb} {} elements of set {}", chunk.len(), set.name),
            );
            chunk.clear();
            Ok(())
        };
    for (key, f) in wire {
        let is_start = f.is_none();
        if is_start && chunk.len() >= ELEMS_PER_MSG {
            flush(batch, &mut chunk)?;
        }
        chunk.push((key, f));
    }
    flush(batch, &mut chunk)
}

fn decode(family: AddrFamily, k: &[u8]) -> Option<u128> {
    match family {
        AddrFamily::V4 => k
            .try_into()
            .ok()
            .map(|b: [u8; 4]| u128::from(u32::from_be_bytes(b))),
        AddrFamily::V6 => k.try_into().ok().map(u128::from_be_bytes),
    }
}

/// Elements of a dynamic set read back from the kernel: each address
/// (after the sandbox address it opens to, in a pinned set) with the
/// milliseconds until it expires, sorted.
pub(crate) fn learned_from_wire(
    family: AddrFamily,
    pinned: bool,
    elems: &[(Vec<u8>, u32, u64)],
) -> Vec<(LearnedAddr, u64)> {
    let len = family.key_len();
    let addr = |k: &[u8]| from_u128(family, decode(family, k)?);
    let mut out: Vec<(LearnedAddr, u64)> = elems
        .iter()
        .filter_map(|(k, _, exp)| {
            let e = if pinned {
                let (asker, learned) = (k.get(..len)?, k.get(len..)?);
                LearnedAddr {
                    asker: Some(addr(asker)?),
                    addr: AddrRange::single(addr(learned)?),
                }
            } else {
                AddrRange::single(addr(k)?).into()
            };
            Some((e, *exp))
        })
        .collect();
    out.sort();
    out
}

/// The key of learned element `e` in `set`: the address, or in a pinned
/// set the sandbox address and then the learned one.
pub(crate) fn learned_key(set: &SetPlan, e: &LearnedAddr) -> Vec<u8> {
    let mut key = Vec::with_capacity(keyed::key_len(&set.key()) as usize);
    if set.pinned
        && let Some(a) = e.asker
    {
        key.extend(key_bytes(set.family, to_u128(a)));
    }
    key.extend(key_bytes(set.family, to_u128(e.addr.start)));
    key
}

/// Queue messages adding learned elements with their remaining lifetime
/// (an element re-added without a timeout would get the set's default
/// afresh, living longer than its answer allowed).
pub(crate) fn queue_learned(
    batch: &mut Batch,
    family: TableFamily,
    set: &SetPlan,
    elems: &[(LearnedAddr, u64)],
) -> Result<(), NftError> {
    for chunk in elems.chunks(ELEMS_PER_MSG) {
        let mut s = carrier(family, &set.name)?;
        s.set_u32(sys::NFTNL_SET_KEY_LEN, keyed::key_len(&set.key()));
        for (e, ms) in chunk {
            s.add_elem_timeout(&learned_key(set, e), None, (*ms > 0).then_some(*ms))?;
        }
        batch.elems(
            Op::Add,
            family.nfproto(),
            &s,
            format!(
                "keeping {} learned elements of set {}",
                chunk.len(),
                set.name
            ),
        );
    }
    Ok(())
}

/// Rebuild ranges from wire elements read back from the kernel.
pub(crate) fn ranges_from_wire(
    family: AddrFamily,
    kind: SetKind,
    elems: &[(Vec<u8>, u32, u64)],
) -> Vec<AddrRange> {
    let end_flag = libc::NFT_SET_ELEM_INTERVAL_END as u32;
    let mut keys: Vec<(u128, bool)> = elems
        .iter()
        .filter_map(|(k, f, _)| decode(family, k).map(|v| (v, f & end_flag != 0)))
        .collect();
    if kind != SetKind::Interval {
        keys.sort();
        return keys
            .into_iter()
            .filter_map(|(v, _)| from_u128(family, v).map(AddrRange::single))
            .collect();
    }
    // Ends sort before starts at the same key (an end closes the previous
    // range exclusively).
    keys.sort_by_key(|(v, is_end)| (*v, !*is_end));
    let mut out = Vec::new();
    let mut open: Option<u128> = None;
    for (v, is_end) in keys {
        match (is_end, open) {
            (false, None) => open = Some(v),
            (false, Some(_)) => {} // a start inside an open range: keep the outer one
            (true, Some(s)) if v > s => {
                if let (Some(a), Some(b)) = (from_u128(family, s), from_u128(family, v - 1)) {
                    out.push(AddrRange { start: a, end: b });
                }
                open = None;
            }
            (true, _) => {} // lone end (e.g. the leading 0.0.0.0 of `nft -f`)
        }
    }
    if let Some(s) = open
        && let (Some(a), Some(b)) = (from_u128(family, s), from_u128(family, max_value(family)))
    {
        out.push(AddrRange { start: a, end: b });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(a: &str, b: &str) -> AddrRange {
        AddrRange {
            start: a.parse().unwrap(),
            end: b.parse().unwrap(),
        }
    }

    fn round_trip(f: AddrFamily, ranges: Vec<AddrRange>) {
        let wire: Vec<(Vec<u8>, u32, u64)> = wire_elements(f, SetKind::Interval, &ranges)
            .into_iter()
            .rev()
            .map(|(k, fl)| (k, fl.unwrap_or(0), 0))
            .collect();
        assert_eq!(ranges_from_wire(f, SetKind::Interval, &wire), ranges);
    }

    #[test]
    fn interval_encoding_round_trips() {
        round_trip(
            AddrFamily::V4,
            vec![r("0.0.0.0", "0.255.255.255"), r("10.0.0.0", "10.0.0.0")],
        );
        round_trip(AddrFamily::V4, vec![r("224.0.0.0", "255.255.255.255")]);
        round_trip(
            AddrFamily::V6,
            vec![
                r("::1", "::1"),
                r("ff00::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
            ],
        );
    }

    #[test]
    fn end_element_is_the_first_address_after_the_range() {
        let w = wire_elements(
            AddrFamily::V4,
            SetKind::Interval,
            &[r("10.0.0.0", "10.255.255.255")],
        );
        assert_eq!(w[0], (vec![10, 0, 0, 0], None));
        assert_eq!(w[1], (vec![11, 0, 0, 0], Some(1)));
    }

    #[test]
    fn a_leading_lone_end_element_is_ignored() {
        let wire = vec![
            (vec![0, 0, 0, 0], 1, 0),
            (vec![1, 2, 3, 4], 0, 0),
            (vec![1, 2, 3, 5], 1, 0),
        ];
        assert_eq!(
            ranges_from_wire(AddrFamily::V4, SetKind::Interval, &wire),
            vec![r("1.2.3.4", "1.2.3.4")]
        );
    }
}
