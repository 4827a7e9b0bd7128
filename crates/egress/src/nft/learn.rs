//! Addresses a resolver learned, added to the dynamic sets of
//! `table inet corral` in one transaction per answer.
//!
//! The add is not exclusive: an address already in its set is left as it
//! is (the same answer asked twice must not fail), so one transaction
//! either adds every new address of an answer or — a set full, a set
//! gone — none, and the resolver refuses the answer (fail closed: an
//! address is handed out only once the set lets it through).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use nftnl_sys as sys;

use super::NftError;
use super::apply::{BatchStats, send};
use super::batch::{Batch, Op};
use super::set::{ELEMS_PER_MSG, carrier, timeout_ms};
use crate::plan::TableFamily;

/// One address for one dynamic set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnElement {
    /// The set (`<profile>-dns4-tcp-443`, ...; its family must be the
    /// address's).
    pub set: String,
    /// The address.
    pub addr: IpAddr,
    /// The sandbox address it opens to, for a pinned set (`source .
    /// address` keys); `None` for a set keyed by the address alone.
    pub asker: Option<IpAddr>,
    /// How long it stays; `None`: the set's default timeout.
    pub timeout: Option<Duration>,
}

fn octets(addr: IpAddr) -> Vec<u8> {
    match addr {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

impl LearnElement {
    /// The element's key: the asker's address, then the learned one.
    fn key(&self) -> Vec<u8> {
        let mut k = self.asker.map(octets).unwrap_or_default();
        k.extend(octets(self.addr));
        k
    }
}

/// Adds `elements` to their sets in `table inet corral` of the current
/// thread's network namespace, in one transaction: all of them or none.
/// An element already present stays with the lifetime it had (the kernel
/// does not reset it); `None` when there is nothing to add. A full set
/// fails the whole transaction ([`NftError::is_set_full`]).
pub fn learn(elements: &[LearnElement]) -> Result<Option<BatchStats>, NftError> {
    let mut by_set: BTreeMap<&str, Vec<&LearnElement>> = BTreeMap::new();
    for e in elements {
        by_set.entry(e.set.as_str()).or_default().push(e);
    }
    let mut b = Batch::new();
    for (set, elems) in by_set {
        for chunk in elems.chunks(ELEMS_PER_MSG) {
            let mut s = carrier(TableFamily::Inet, set)?;
            // Declared from the first element, so one of another key shape
            // in the same set is refused here rather than by the kernel.
            let len = chunk.first().map_or(0, |e| e.key().len());
            s.set_u32(sys::NFTNL_SET_KEY_LEN, len as u32);
            for e in chunk {
                s.add_elem_timeout(&e.key(), None, e.timeout.map(timeout_ms))?;
            }
            b.elems(
                Op::Upsert,
                TableFamily::Inet.nfproto(),
                &s,
                format!("learning {} addresses into set {set}", chunk.len()),
            );
        }
    }
    if b.len() == 0 {
        return Ok(None);
    }
    send(&b.finish()).map(Some)
}
