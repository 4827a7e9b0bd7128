//! Upper bounds of the bytes each nftables message takes, computed from
//! the object before libnftnl writes it. libnftnl's builders write into
//! the buffer they are given without knowing its size, so the batch
//! compares these bounds with the room it reserves and never hands over a
//! message that might not fit.
//!
//! Every attribute the object carries is read back through libnftnl's own
//! getters (its exact length: a string with its NUL, an integer at its
//! size, data at its length) and counted at its aligned length plus
//! [`ATTR_OVERHEAD`]: its own header and up to three nests libnftnl wraps
//! around a value (an immediate's verdict is data → verdict → code).

use std::ffi::c_void;

use nftnl_sys as sys;

use super::obj::{Chain, Rule, Set, Table};

/// The netlink header and the nfgenmsg every message starts with.
const HEADER: usize = 16 + 4;

/// An attribute's header plus three nest headers around it.
const ATTR_OVERHEAD: usize = 4 + 3 * 4;

/// An expression held as another expression's value (a dynset's
/// per-element limit), counted generously: libnftnl hands it back as a
/// pointer, not as bytes.
const NESTED_EXPR: usize = 1024;

/// The most bytes a batch begin or end message takes.
pub(crate) const BATCH_MESSAGE: usize = HEADER + 16;

fn attr(len: u32) -> usize {
    ATTR_OVERHEAD + (len as usize).next_multiple_of(4)
}

/// Sums [`attr`] over the attributes `0..max` that `is_set`, each at the
/// length `get` reports (an attribute `get` gives no length for counts as
/// [`NESTED_EXPR`]).
fn attrs(max: u32, is_set: impl Fn(u16) -> bool, get: impl Fn(u16) -> Option<u32>) -> usize {
    (0..max)
        .filter_map(|a| u16::try_from(a).ok())
        .filter(|a| is_set(*a))
        .map(|a| get(a).map_or(NESTED_EXPR, attr))
        .fold(0, usize::saturating_add)
}

/// libnftnl's flag test and data getter of one object type.
type IsSet<T> = unsafe extern "C" fn(*const T, u16) -> bool;
type GetData<T> = unsafe extern "C" fn(*const T, u16, *mut u32) -> *const c_void;

/// The attributes of the object at `p`, read through its type's getters.
///
/// # Safety
/// `p` is a live object of the type `is_set` and `get` take.
unsafe fn object_attrs<T>(p: *const T, max: u32, is_set: IsSet<T>, get: GetData<T>) -> usize {
    attrs(
        max,
        // SAFETY: `p` is live (the caller's contract); the test only reads.
        |a| unsafe { is_set(p, a) },
        |a| {
            let mut len = 0u32;
            // SAFETY: as above; the getter only writes `len`.
            let v = unsafe { get(p, a, &mut len) };
            (!v.is_null()).then_some(len)
        },
    )
}

/// A table message.
pub(crate) fn table(t: &Table) -> usize {
    let (is_set, get): (IsSet<_>, GetData<_>) =
        (sys::nftnl_table_is_set, sys::nftnl_table_get_data);
    // SAFETY: `t` is a live table, and these are its getters.
    HEADER + unsafe { object_attrs(t.as_ptr(), sys::__NFTNL_TABLE_MAX, is_set, get) }
}

/// A chain message.
pub(crate) fn chain(c: &Chain) -> usize {
    let (is_set, get): (IsSet<_>, GetData<_>) =
        (sys::nftnl_chain_is_set, sys::nftnl_chain_get_data);
    // SAFETY: `c` is a live chain, and these are its getters.
    HEADER + unsafe { object_attrs(c.as_ptr(), sys::__NFTNL_CHAIN_MAX, is_set, get) }
}

/// A set message (its attributes; elements travel in their own messages,
/// bounded by [`elems`]).
pub(crate) fn set(s: &Set) -> usize {
    let (is_set, get): (IsSet<_>, GetData<_>) = (sys::nftnl_set_is_set, sys::nftnl_set_get_data);
    // SAFETY: `s` is a live set, and these are its getters.
    HEADER + unsafe { object_attrs(s.as_ptr(), sys::__NFTNL_SET_MAX, is_set, get) }
}

/// A rule message: its own attributes and every expression's.
pub(crate) fn rule(r: &Rule) -> usize {
    let (is_set, get): (IsSet<_>, GetData<_>) = (sys::nftnl_rule_is_set, sys::nftnl_rule_get_data);
    let own = // SAFETY: `r` is a live rule, and these are its getters.
    HEADER + unsafe { object_attrs(r.as_ptr(), sys::__NFTNL_RULE_MAX, is_set, get) };
    // The expressions' list nest.
    let mut total = own.saturating_add(4);
    let counted = r.for_each_expr(|e| {
        let e = e.as_ptr();
        // The list element and data nests around the expression.
        let nests = 2 * 4;
        let each = attrs(
            // An expression's attribute flags are one 32-bit word.
            32,
            // SAFETY: valid expression; only reads its flags.
            |a| unsafe { sys::nftnl_expr_is_set(e, a) },
            |a| {
                let mut len = 0u32;
                // SAFETY: valid expression; the getter only writes `len`.
                // An expression-valued attribute comes back as a pointer
                // with no length: counted as NESTED_EXPR.
                let v = unsafe { sys::nftnl_expr_get(e, a, &mut len) };
                (!v.is_null() && len > 0).then_some(len)
            },
        );
        total = total.saturating_add(each + nests);
    });
    if counted.is_err() {
        // No iterator (out of memory): no bound can be computed, so none
        // is trusted.
        return usize::MAX;
    }
    total
}

/// An upper bound of the bytes an element message of `s` takes: the
/// header, the set's identity and, per element, its nest plus every
/// attribute it carries at full aligned length (fixed-size ones at their
/// size, expressions at a generous 1 KiB).
pub(crate) fn elems(s: &Set) -> usize {
    const HEAD: usize = HEADER + 2 * (4 + 256) + 8 + 4;
    const NEST: usize = 4;
    let fixed = [
        (sys::NFTNL_SET_ELEM_FLAGS, 8),
        (sys::NFTNL_SET_ELEM_TIMEOUT, 12),
        (sys::NFTNL_SET_ELEM_EXPIRATION, 12),
        (sys::NFTNL_SET_ELEM_VERDICT, 16),
        (sys::NFTNL_SET_ELEM_EXPR, 1024),
        (sys::NFTNL_SET_ELEM_EXPRESSIONS, 1024),
    ];
    let sized = [
        sys::NFTNL_SET_ELEM_KEY,
        sys::NFTNL_SET_ELEM_KEY_END,
        sys::NFTNL_SET_ELEM_DATA,
        sys::NFTNL_SET_ELEM_CHAIN,
        sys::NFTNL_SET_ELEM_USERDATA,
        sys::NFTNL_SET_ELEM_OBJREF,
    ];
    let mut total = HEAD;
    // SAFETY: valid set; the iterator is destroyed before returning and the
    // elements it yields are owned by the set; `nftnl_set_elem_get` only
    // writes the attribute length into `len`.
    unsafe {
        let iter = sys::nftnl_set_elems_iter_create(s.as_ptr());
        if iter.is_null() {
            // Out of memory: no bound can be computed, so none is trusted.
            return usize::MAX;
        }
        let mut e = sys::nftnl_set_elems_iter_next(iter);
        while !e.is_null() {
            total = total.saturating_add(NEST);
            for (attr, size) in fixed {
                if sys::nftnl_set_elem_is_set(e, attr as u16) {
                    total = total.saturating_add(size);
                }
            }
            for attr in sized {
                if sys::nftnl_set_elem_is_set(e, attr as u16) {
                    let mut len: u32 = 0;
                    sys::nftnl_set_elem_get(e, attr as u16, &mut len);
                    total = total.saturating_add(8 + (len as usize).next_multiple_of(4));
                }
            }
            e = sys::nftnl_set_elems_iter_next(iter);
        }
        sys::nftnl_set_elems_iter_destroy(iter);
    }
    total
}
