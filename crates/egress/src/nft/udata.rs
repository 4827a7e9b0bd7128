//! A set's user data: how `nft` learns to show a set's keys.
//!
//! The kernel keeps a set's key as a type number and a length; what the
//! bytes mean (their byte order, and for `typeof` sets the expressions the
//! key was built from) is carried in the set's user data
//! (`NFTA_SET_USERDATA`), a list of type–length–value records only
//! userspace reads. `nft list` needs it: without it, `nft` 1.0.6 prints a
//! single `ifname` key byte-reversed (every port name shows as `""`) and
//! aborts on a concatenation with a raw part (`integer` has no length of
//! its own: `concat_expr_msort_value: Assertion 'ilen > 0' failed`), which
//! takes down every listing of the host, `nft list tables` included.
//!
//! So every set corral creates carries the records `nft -f` writes for the
//! same set declared in `nft` syntax (`HostPlan::render_nft`): the key's
//! byte order, and for a concatenation or a raw part the key's `typeof`
//! expressions. Records are `u8` type, `u8` length, value; numbers are
//! host-order `u32` (libnftnl's `nftnl_udata_put_u32`).

use super::NftError;
use crate::plan::{
    Field, KeyPart, KeyedKind, KeyedSetPlan, MapKey, PayloadBase, SetPlan, TablePlan,
};

/// `NFTNL_UDATA_SET_KEYBYTEORDER`.
const KEY_BYTEORDER: u8 = 0;
/// `NFTNL_UDATA_SET_DATABYTEORDER`.
const DATA_BYTEORDER: u8 = 1;
/// `NFTNL_UDATA_SET_DATA_INTERVAL`.
const DATA_INTERVAL: u8 = 6;
/// `NFTNL_UDATA_SET_KEY_TYPEOF`.
const KEY_TYPEOF: u8 = 3;
/// `NFTNL_UDATA_SET_TYPEOF_EXPR` / `_DATA`, inside [`KEY_TYPEOF`].
const TYPEOF_EXPR: u8 = 0;
const TYPEOF_DATA: u8 = 1;
/// `NFTNL_UDATA_SET_KEY_CONCAT_SUB_TYPE` / `_DATA`, inside the nest of
/// one part of a concatenation (the nest's type is the part's index).
const CONCAT_SUB_TYPE: u8 = 0;
const CONCAT_SUB_DATA: u8 = 1;
/// `NFTNL_UDATA_META_KEY`.
const META_KEY: u8 = 0;
/// `NFTNL_UDATA_SET_KEY_PAYLOAD_{DESC,TYPE,BASE,OFFSET,LEN}`.
const PAYLOAD_DESC: u8 = 0;
const PAYLOAD_TYPE: u8 = 1;
const PAYLOAD_BASE: u8 = 2;
const PAYLOAD_OFFSET: u8 = 3;
const PAYLOAD_LEN: u8 = 4;

/// `nft`'s `enum byteorder`.
const BYTEORDER_INVALID: u32 = 0;
const BYTEORDER_HOST: u32 = 1;
const BYTEORDER_BIG: u32 = 2;

/// `nft`'s `enum expr_types`.
const EXPR_PAYLOAD: u32 = 7;
const EXPR_META: u32 = 9;
const EXPR_CONCAT: u32 = 13;

/// `nft`'s `enum proto_desc_id` and header field templates.
const DESC_RAW: u32 = 0;
const DESC_IP: u32 = 12;
const DESC_IP6: u32 = 13;
const DESC_ETHER: u32 = 17;
const IPHDR_SADDR: u32 = 11;
const IP6HDR_SADDR: u32 = 8;
const ETHHDR_SADDR: u32 = 2;

/// `nft`'s `enum proto_bases` of a raw payload.
fn base_number(b: PayloadBase) -> u32 {
    match b {
        PayloadBase::Link => 1,
        PayloadBase::Network => 2,
        PayloadBase::Transport => 3,
    }
}

/// The user data corral gives a set of `table`: what [`LiveSet::userdata`]
/// must read back as. `None` for a set not in the table.
///
/// [`LiveSet::userdata`]: crate::nft::LiveSet::userdata
pub fn set_userdata(table: &TablePlan, name: &str) -> Option<Result<Vec<u8>, NftError>> {
    if let Some(s) = table.sets.iter().find(|s| s.name == name) {
        return Some(address_set(s));
    }
    if let Some(m) = table.maps.iter().find(|m| m.name == name) {
        return Some(Ok(map(m.key)));
    }
    table
        .keyed_sets
        .iter()
        .find(|s| s.name == name)
        .map(keyed_set)
}

/// The user data of a verdict map: the key's byte order, the data's, and
/// that the data are no interval (what `nft -f` writes for `type K :
/// verdict`).
pub(crate) fn map(key: MapKey) -> Vec<u8> {
    let order = match key {
        MapKey::IfName => BYTEORDER_HOST,
        MapKey::Addr(_) => BYTEORDER_BIG,
    };
    let mut out = u32_record(KEY_BYTEORDER, order);
    out.extend(u32_record(DATA_BYTEORDER, BYTEORDER_INVALID));
    out.extend(u32_record(DATA_INTERVAL, 0));
    out
}

/// One record: type, length, value.
fn record(set: &str, ty: u8, value: &[u8]) -> Result<Vec<u8>, NftError> {
    let len = u8::try_from(value.len()).map_err(|_| NftError::SetKeyDescription {
        set: set.to_owned(),
        len: value.len(),
    })?;
    let mut out = vec![ty, len];
    out.extend_from_slice(value);
    Ok(out)
}

/// A record holding a host-order `u32`.
fn u32_record(ty: u8, v: u32) -> Vec<u8> {
    let mut out = vec![ty, 4];
    out.extend(v.to_ne_bytes());
    out
}

/// The user data of an address set (`type ipv4_addr` / `ipv6_addr`, or
/// for a pinned set `type ipv4_addr . ipv4_addr`).
pub(crate) fn address_set(set: &SetPlan) -> Result<Vec<u8>, NftError> {
    if set.pinned {
        return keyed_set(&KeyedSetPlan::new(&set.name, set.key(), KeyedKind::Runtime));
    }
    Ok(u32_record(KEY_BYTEORDER, BYTEORDER_BIG))
}

/// The byte order `nft` gives a key of one part.
fn byteorder(p: KeyPart) -> u32 {
    match p {
        KeyPart::IfName => BYTEORDER_HOST,
        KeyPart::Ether | KeyPart::Ipv4 | KeyPart::Ipv6 | KeyPart::Raw(_) => BYTEORDER_BIG,
    }
}

/// The `typeof` expression of one part: its expression type and records.
fn part_expr(p: KeyPart) -> (u32, Vec<u8>) {
    let records =
        |r: &[(u8, u32)]| -> Vec<u8> { r.iter().flat_map(|(t, v)| u32_record(*t, *v)).collect() };
    match p {
        KeyPart::IfName => (
            EXPR_META,
            records(&[(META_KEY, libc::NFT_META_IIFNAME as u32)]),
        ),
        KeyPart::Ether => (
            EXPR_PAYLOAD,
            records(&[(PAYLOAD_DESC, DESC_ETHER), (PAYLOAD_TYPE, ETHHDR_SADDR)]),
        ),
        KeyPart::Ipv4 => (
            EXPR_PAYLOAD,
            records(&[(PAYLOAD_DESC, DESC_IP), (PAYLOAD_TYPE, IPHDR_SADDR)]),
        ),
        KeyPart::Ipv6 => (
            EXPR_PAYLOAD,
            records(&[(PAYLOAD_DESC, DESC_IP6), (PAYLOAD_TYPE, IP6HDR_SADDR)]),
        ),
        KeyPart::Raw(f) => {
            let (base, offset, len) = match f {
                Field::Raw { base, offset, len } => (base_number(base), offset, len),
                // A raw part always holds a raw field (`Field::key_part`);
                // anything else is described by its own length.
                other => (base_number(PayloadBase::Network), 0, other.len()),
            };
            (
                EXPR_PAYLOAD,
                records(&[
                    (PAYLOAD_DESC, DESC_RAW),
                    (PAYLOAD_TYPE, 0),
                    (PAYLOAD_BASE, base),
                    (PAYLOAD_OFFSET, offset * 8),
                    (PAYLOAD_LEN, len * 8),
                ]),
            )
        }
    }
}

/// The `typeof` record of an expression of type `ty` described by `data`.
fn typeof_record(set: &str, ty: u32, data: &[u8]) -> Result<Vec<u8>, NftError> {
    let mut value = u32_record(TYPEOF_EXPR, ty);
    value.extend(record(set, TYPEOF_DATA, data)?);
    record(set, KEY_TYPEOF, &value)
}

/// The user data of a keyed set: as `nft -f` writes it for the set's
/// `type a . b` or, with a raw part, `typeof x . y` declaration.
pub(crate) fn keyed_set(set: &KeyedSetPlan) -> Result<Vec<u8>, NftError> {
    let name = set.name.as_str();
    match set.key.as_slice() {
        [KeyPart::Raw(f)] => {
            let (ty, data) = part_expr(KeyPart::Raw(*f));
            let mut out = u32_record(KEY_BYTEORDER, BYTEORDER_BIG);
            out.extend(typeof_record(name, ty, &data)?);
            Ok(out)
        }
        [one] => Ok(u32_record(KEY_BYTEORDER, byteorder(*one))),
        parts => {
            let mut out = u32_record(KEY_BYTEORDER, BYTEORDER_INVALID);
            // `type a . b` carries an empty concatenation (nft finds no
            // expression behind a plain type); `typeof` carries each part
            // in a record numbered by its position.
            let mut data = Vec::new();
            if set.has_raw_part() {
                for (i, p) in parts.iter().enumerate() {
                    let (ty, part) = part_expr(*p);
                    let mut sub = u32_record(CONCAT_SUB_TYPE, ty);
                    sub.extend(record(name, CONCAT_SUB_DATA, &part)?);
                    let index = u8::try_from(i).map_err(|_| NftError::SetKeyDescription {
                        set: name.to_owned(),
                        len: data.len(),
                    })?;
                    data.extend(record(name, index, &sub)?);
                }
            }
            out.extend(typeof_record(name, EXPR_CONCAT, &data)?);
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::KeyedKind;

    fn set(key: Vec<KeyPart>) -> KeyedSetPlan {
        KeyedSetPlan::new("s", key, KeyedKind::Static)
    }

    // The expected bytes are what `nft --debug=mnl -f` (nftables 1.0.6)
    // sent for the same declarations, on a little-endian host.
    #[cfg(target_endian = "little")]
    #[test]
    fn records_are_what_nft_writes() {
        assert_eq!(
            keyed_set(&set(vec![KeyPart::IfName])).unwrap(),
            [0, 4, 1, 0, 0, 0]
        );
        assert_eq!(
            keyed_set(&set(vec![KeyPart::Ether])).unwrap(),
            [0, 4, 2, 0, 0, 0]
        );
        let mut addrs = crate::plan::SetPlan {
            name: "dev-dns4".to_owned(),
            family: crate::plan::AddrFamily::V4,
            kind: crate::plan::SetKind::Dynamic,
            elements: Vec::new(),
            timeout: None,
            size: None,
            pinned: false,
        };
        assert_eq!(address_set(&addrs).unwrap(), [0, 4, 2, 0, 0, 0]);
        // A pinned set is a concatenation: `nft` reads its parts from the
        // key type, as for the bridge's `iifname . ether saddr` sets.
        addrs.pinned = true;
        assert_eq!(
            address_set(&addrs).unwrap(),
            keyed_set(&KeyedSetPlan::new(
                "dev-dns4",
                vec![KeyPart::Ipv4, KeyPart::Ipv4],
                KeyedKind::Runtime
            ))
            .unwrap()
        );
        // type ifname . ether_addr
        assert_eq!(
            keyed_set(&set(vec![KeyPart::IfName, KeyPart::Ether])).unwrap(),
            [0, 4, 0, 0, 0, 0, 3, 8, 0, 4, 13, 0, 0, 0, 1, 0]
        );
        // typeof iifname . ether saddr . @th,64,128
        let nd = KeyPart::Raw(Field::Raw {
            base: PayloadBase::Transport,
            offset: 8,
            len: 16,
        });
        let mut want = vec![0, 4, 0, 0, 0, 0, 3, 0x56, 0, 4, 13, 0, 0, 0, 1, 0x4e];
        want.extend([0, 0x0e, 0, 4, 9, 0, 0, 0, 1, 6, 0, 4, 6, 0, 0, 0]);
        want.extend([
            1, 0x14, 0, 4, 7, 0, 0, 0, 1, 0x0c, 0, 4, 0x11, 0, 0, 0, 1, 4, 2, 0, 0, 0,
        ]);
        want.extend([2, 0x26, 0, 4, 7, 0, 0, 0, 1, 0x1e]);
        want.extend([0, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 2, 4, 3, 0, 0, 0]);
        want.extend([3, 4, 0x40, 0, 0, 0, 4, 4, 0x80, 0, 0, 0]);
        assert_eq!(
            keyed_set(&set(vec![KeyPart::IfName, KeyPart::Ether, nd])).unwrap(),
            want
        );
        // typeof @th,16,48
        let raw = KeyPart::Raw(Field::Raw {
            base: PayloadBase::Transport,
            offset: 2,
            len: 6,
        });
        let mut want = vec![0, 4, 2, 0, 0, 0, 3, 0x26, 0, 4, 7, 0, 0, 0, 1, 0x1e];
        want.extend([0, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 2, 4, 3, 0, 0, 0]);
        want.extend([3, 4, 0x10, 0, 0, 0, 4, 4, 0x30, 0, 0, 0]);
        assert_eq!(keyed_set(&set(vec![raw])).unwrap(), want);
    }

    #[test]
    fn a_description_too_long_for_one_record_is_an_error() {
        let raw = KeyPart::Raw(Field::Raw {
            base: PayloadBase::Transport,
            offset: 0,
            len: 4,
        });
        assert!(keyed_set(&set(vec![raw; 16])).is_err());
    }
}
