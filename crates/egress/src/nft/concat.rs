//! Fields loaded into registers (one field, or a concatenation laid out
//! register after register), keyed-set lookups, raw byte compares and
//! meters — encoded as `nft` encodes them, so read-back compares equal.
//!
//! A concatenation puts each field at the next 32-bit register boundary.
//! The kernel reports a register at a 16-byte boundary as one of the four
//! 128-bit registers (`reg 1`..`reg 4`) and any other as a 32-bit one
//! (`reg 8`..), so that is how they are numbered here too.

use nftnl_sys as sys;

use super::NftError;
use super::obj::{Expr, cstr};
use crate::plan::{AddrFamily, Field, Limit, PayloadBase};

/// `NFT_CONNLIMIT_F_INV`: "over" the count.
const CONNLIMIT_F_INV: u32 = 1;
/// `NFT_LOOKUP_F_INV`: the key must be absent.
const LOOKUP_F_INV: u32 = 1;

/// The register holding the word at `word` (32-bit words from the start
/// of the data registers).
pub(crate) fn reg_at(word: u32) -> u32 {
    if word.is_multiple_of(4) {
        libc::NFT_REG_1 as u32 + word / 4
    } else {
        libc::NFT_REG32_00 as u32 + word
    }
}

fn base_number(b: PayloadBase) -> u32 {
    (match b {
        PayloadBase::Link => libc::NFT_PAYLOAD_LL_HEADER,
        PayloadBase::Network => libc::NFT_PAYLOAD_NETWORK_HEADER,
        PayloadBase::Transport => libc::NFT_PAYLOAD_TRANSPORT_HEADER,
    }) as u32
}

pub(crate) fn meta_to(key: i32, dreg: u32) -> Result<Expr, NftError> {
    Ok(Expr::new(c"meta")?
        .u32(sys::NFTNL_EXPR_META_KEY, key as u32)
        .u32(sys::NFTNL_EXPR_META_DREG, dreg))
}

pub(crate) fn payload_to(base: u32, offset: u32, len: u32, dreg: u32) -> Result<Expr, NftError> {
    Ok(Expr::new(c"payload")?
        .u32(sys::NFTNL_EXPR_PAYLOAD_DREG, dreg)
        .u32(sys::NFTNL_EXPR_PAYLOAD_BASE, base)
        .u32(sys::NFTNL_EXPR_PAYLOAD_OFFSET, offset)
        .u32(sys::NFTNL_EXPR_PAYLOAD_LEN, len))
}

/// The expression loading `f` into `dreg`.
pub(crate) fn load(f: Field, dreg: u32) -> Result<Expr, NftError> {
    let net = libc::NFT_PAYLOAD_NETWORK_HEADER as u32;
    match f {
        Field::IifName => meta_to(libc::NFT_META_IIFNAME, dreg),
        Field::OifName => meta_to(libc::NFT_META_OIFNAME, dreg),
        Field::EtherSaddr => payload_to(libc::NFT_PAYLOAD_LL_HEADER as u32, 6, 6, dreg),
        Field::ArpSenderMac => payload_to(net, 8, 6, dreg),
        Field::ArpSenderIp => payload_to(net, 14, 4, dreg),
        Field::IpSaddr(AddrFamily::V4) => payload_to(net, 12, 4, dreg),
        Field::IpSaddr(AddrFamily::V6) => payload_to(net, 8, 16, dreg),
        Field::IpDaddr(AddrFamily::V4) => payload_to(net, 16, 4, dreg),
        Field::IpDaddr(AddrFamily::V6) => payload_to(net, 24, 16, dreg),
        Field::Raw { base, offset, len } => payload_to(base_number(base), offset, len, dreg),
    }
}

/// Loads of `fields`, concatenated from the first data register on.
pub(crate) fn loads(fields: &[Field]) -> Result<Vec<Expr>, NftError> {
    let mut word = 0;
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        out.push(load(*f, reg_at(word))?);
        word += f.len().div_ceil(4);
    }
    Ok(out)
}

/// `FIELDS @set` / `FIELDS != @set`.
pub(crate) fn lookup(fields: &[Field], set: &str, negate: bool) -> Result<Vec<Expr>, NftError> {
    let mut v = loads(fields)?;
    v.push(
        Expr::new(c"lookup")?
            .u32(sys::NFTNL_EXPR_LOOKUP_SREG, reg_at(0))
            .str(sys::NFTNL_EXPR_LOOKUP_SET, &cstr(set)?)
            .u32(
                sys::NFTNL_EXPR_LOOKUP_FLAGS,
                if negate { LOOKUP_F_INV } else { 0 },
            ),
    );
    Ok(v)
}

/// `update @set { FIELDS limit rate over … }` / `add @set { FIELDS ct
/// count over … }`.
pub(crate) fn meter(fields: &[Field], set: &str, limit: Limit) -> Result<Vec<Expr>, NftError> {
    let mut v = loads(fields)?;
    let (op, inner) = match limit {
        Limit::RateOver { per_second, burst } => (
            libc::NFT_DYNSET_OP_UPDATE,
            Expr::new(c"limit")?
                .u64(sys::NFTNL_EXPR_LIMIT_RATE, per_second)
                .u64(sys::NFTNL_EXPR_LIMIT_UNIT, 1)
                .u32(sys::NFTNL_EXPR_LIMIT_BURST, burst)
                .u32(sys::NFTNL_EXPR_LIMIT_TYPE, libc::NFT_LIMIT_PKTS as u32)
                .u32(sys::NFTNL_EXPR_LIMIT_FLAGS, libc::NFT_LIMIT_F_INV as u32),
        ),
        Limit::CountOver(n) => (
            libc::NFT_DYNSET_OP_ADD,
            Expr::new(c"connlimit")?
                .u32(sys::NFTNL_EXPR_CONNLIMIT_COUNT, n)
                .u32(sys::NFTNL_EXPR_CONNLIMIT_FLAGS, CONNLIMIT_F_INV),
        ),
    };
    v.push(
        Expr::new(c"dynset")?
            .u32(sys::NFTNL_EXPR_DYNSET_SREG_KEY, reg_at(0))
            .u32(sys::NFTNL_EXPR_DYNSET_OP, op as u32)
            .str(sys::NFTNL_EXPR_DYNSET_SET_NAME, &cstr(set)?)
            .nest(sys::NFTNL_EXPR_DYNSET_EXPR, inner),
    );
    Ok(v)
}

/// `@nh,O,L VALUE`: raw bytes of `field` equal `value`.
pub(crate) fn bytes_eq(field: Field, value: &[u8]) -> Result<Vec<Expr>, NftError> {
    let reg = reg_at(0);
    Ok(vec![
        load(field, reg)?,
        Expr::new(c"cmp")?
            .u32(sys::NFTNL_EXPR_CMP_SREG, reg)
            .u32(sys::NFTNL_EXPR_CMP_OP, libc::NFT_CMP_EQ as u32)
            .data(sys::NFTNL_EXPR_CMP_DATA, value)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_are_numbered_as_the_kernel_reports_them() {
        // ifname (4 words) . ether (2 words) . ipv4: reg 1, reg 2, reg 14,
        // as `nft --debug=netlink` shows for such a concatenation.
        assert_eq!(reg_at(0), 1);
        assert_eq!(reg_at(4), 2);
        assert_eq!(reg_at(6), 14);
        assert_eq!(reg_at(8), 3);
    }
}
