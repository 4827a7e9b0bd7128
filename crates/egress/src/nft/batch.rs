//! One nftables transaction as one contiguous buffer.
//!
//! libnftnl's own batch splits messages into pages, and pages sent as
//! separate `sendmsg` calls fail beyond ~128 KiB (measured on the Debian 12
//! kernels corral is tested on). This batch is a single growing buffer —
//! begin message, every object message, end message — sent with one
//! `sendmsg`, so the kernel sees one transaction however many set elements
//! it carries.

use std::ffi::c_char;

use nftnl_sys as sys;

use super::NftError;
use super::obj::{Chain, Rule, Set, Table};

/// Head-room reserved before writing one message: larger than any message
/// corral builds (set-element messages are capped well below 64 KiB).
const MSG_ROOM: usize = 128 * 1024;

/// An upper bound of the bytes an element message of `s` takes: the
/// header, the set's identity and, per element, its nest plus every
/// attribute it carries at full aligned length (fixed-size ones at their
/// size, expressions at a generous 1 KiB).
fn elems_wire_bound(s: &Set) -> usize {
    const HEAD: usize = 16 + 4 + 2 * (4 + 256) + 8 + 4;
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

/// What an object message does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Create (tables and chains: create-or-keep; rules: append; elements:
    /// exclusive, an existing element is an error).
    Add,
    /// Delete.
    Del,
}

/// A transaction being built.
pub(crate) struct Batch {
    /// `u32` words so every message header is 4-byte aligned.
    buf: Vec<u32>,
    /// Bytes used.
    used: usize,
    /// Next sequence number.
    seq: u32,
    /// What each sequence number does, for error messages.
    notes: Vec<(u32, String)>,
    /// Byte offset of the last object message (it is asked for an ACK).
    last_obj: Option<usize>,
    /// The first message that did not fit its room; the batch is refused.
    overflow: Option<Overflow>,
}

/// A message that did not fit the room it was given: what it was, how
/// long it was (or would have been), the room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Overflow {
    pub(crate) what: String,
    pub(crate) len: usize,
    pub(crate) room: usize,
}

impl Overflow {
    pub(crate) fn error(&self) -> NftError {
        NftError::MessageTooLarge {
            what: self.what.clone(),
            len: self.len,
            room: self.room,
        }
    }
}

/// A finished transaction: bytes to send plus what each message does.
pub(crate) struct Finished {
    buf: Vec<u32>,
    used: usize,
    /// Sequence number of the end message (it carries NLM_F_ACK).
    pub(crate) end_seq: u32,
    /// Sequence number of the last object message (it carries NLM_F_ACK,
    /// so kernels that do not acknowledge the end message still answer).
    pub(crate) last_seq: Option<u32>,
    notes: Vec<(u32, String)>,
    /// Set when a message did not fit: the batch must not be sent.
    pub(crate) overflow: Option<Overflow>,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Batch({} bytes, {} messages)",
            self.used,
            self.notes.len()
        )
    }
}

impl Batch {
    /// A batch holding only its begin message.
    pub(crate) fn new() -> Self {
        let mut b = Batch {
            buf: Vec::new(),
            used: 0,
            seq: 1,
            notes: Vec::new(),
            last_obj: None,
            overflow: None,
        };
        let seq = b.next_seq();
        b.write("the batch begin message", 0, |p| {
            // SAFETY: `p` points at MSG_ROOM writable, zeroed bytes.
            unsafe { sys::nftnl_batch_begin(p, seq) }
        });
        b
    }

    fn next_seq(&mut self) -> u32 {
        let s = self.seq;
        self.seq = self.seq.wrapping_add(1);
        s
    }

    /// Number of object messages so far.
    pub(crate) fn len(&self) -> usize {
        self.notes.len()
    }

    /// Make room, run `build` at the write position, advance by the length
    /// it wrote (read back from the header it returns). `bound` is an upper
    /// bound of the message length known before building (0: small fixed
    /// messages); a message that is or could be longer than its room is
    /// not built, or not kept, and the batch is refused at send time.
    /// Returns the offset the message was written at.
    fn write(
        &mut self,
        what: &str,
        bound: usize,
        build: impl FnOnce(*mut c_char) -> *mut libc::nlmsghdr,
    ) -> Option<usize> {
        if self.overflow.is_some() {
            return None;
        }
        if bound > MSG_ROOM {
            self.overflow = Some(Overflow {
                what: what.to_owned(),
                len: bound,
                room: MSG_ROOM,
            });
            return None;
        }
        let need_words = (self.used + MSG_ROOM).div_ceil(4);
        if self.buf.len() < need_words {
            let grow = need_words.max(self.buf.len() * 2);
            self.buf.resize(grow, 0);
        }
        // SAFETY: `used` is within the buffer and 4-aligned; MSG_ROOM
        // bytes after it are allocated and zeroed.
        let at = unsafe { self.buf.as_mut_ptr().cast::<u8>().add(self.used) };
        let hdr = build(at.cast::<c_char>());
        // SAFETY: `build` returned the header it wrote at `at`.
        let len = unsafe { (*hdr).nlmsg_len } as usize;
        if len > MSG_ROOM {
            // Only reachable if `bound` underestimated: keep nothing of it
            // and refuse the batch rather than send a corrupt one.
            self.buf[self.used / 4..].fill(0);
            self.overflow = Some(Overflow {
                what: what.to_owned(),
                len,
                room: MSG_ROOM,
            });
            return None;
        }
        // Bytes past `used` were zeroed by `resize` and never written (each
        // message is written at `used` and ends before the new `used`), so
        // the next message starts on zeroed memory as libmnl expects.
        let at = self.used;
        self.used += len.next_multiple_of(4);
        Some(at)
    }

    fn object(
        &mut self,
        ty: i32,
        family: u16,
        flags: i32,
        note: String,
        bound: usize,
        payload: impl FnOnce(*mut libc::nlmsghdr),
    ) {
        let seq = self.next_seq();
        let at = self.write(&note, bound, |p| {
            // SAFETY: `p` points at MSG_ROOM writable bytes.
            let hdr =
                unsafe { sys::nftnl_nlmsg_build_hdr(p, ty as u16, family, flags as u16, seq) };
            payload(hdr);
            hdr
        });
        if at.is_some() {
            self.last_obj = at;
        }
        self.notes.push((seq, note));
    }

    /// Add or delete a table.
    pub(crate) fn table(&mut self, op: Op, family: u16, t: &Table, note: String) {
        let (ty, flags) = match op {
            Op::Add => (libc::NFT_MSG_NEWTABLE, libc::NLM_F_CREATE),
            Op::Del => (libc::NFT_MSG_DELTABLE, 0),
        };
        self.object(ty, family, flags, note, 0, |h| {
            // SAFETY: `h` is the header just built; `t` is valid.
            unsafe { sys::nftnl_table_nlmsg_build_payload(h, t.as_ptr()) }
        });
    }

    /// Add a chain.
    pub(crate) fn chain(&mut self, family: u16, c: &Chain, note: String) {
        self.object(
            libc::NFT_MSG_NEWCHAIN,
            family,
            libc::NLM_F_CREATE,
            note,
            0,
            |h| {
                // SAFETY: `h` is the header just built; `c` is valid.
                unsafe { sys::nftnl_chain_nlmsg_build_payload(h, c.as_ptr()) }
            },
        );
    }

    /// Append a rule to its chain.
    pub(crate) fn rule(&mut self, family: u16, r: &Rule, note: String) {
        let flags = libc::NLM_F_CREATE | libc::NLM_F_APPEND;
        self.object(libc::NFT_MSG_NEWRULE, family, flags, note, 0, |h| {
            // SAFETY: `h` is the header just built; `r` is valid.
            unsafe { sys::nftnl_rule_nlmsg_build_payload(h, r.as_ptr()) }
        });
    }

    /// Add a set (without elements).
    pub(crate) fn set(&mut self, family: u16, s: &Set, note: String) {
        let flags = libc::NLM_F_CREATE;
        self.object(libc::NFT_MSG_NEWSET, family, flags, note, 0, |h| {
            // SAFETY: `h` is the header just built; `s` is valid.
            unsafe { sys::nftnl_set_nlmsg_build_payload(h, s.as_ptr()) }
        });
    }

    /// Add or delete the elements carried by `s` (one message).
    pub(crate) fn elems(&mut self, op: Op, family: u16, s: &Set, note: String) {
        let (ty, flags) = match op {
            Op::Add => (
                libc::NFT_MSG_NEWSETELEM,
                libc::NLM_F_CREATE | libc::NLM_F_EXCL,
            ),
            Op::Del => (libc::NFT_MSG_DELSETELEM, 0),
        };
        let bound = elems_wire_bound(s);
        self.object(ty, family, flags, note, bound, |h| {
            // SAFETY: `h` is the header just built; `s` is valid and its
            // elements need at most `bound` bytes, checked against
            // MSG_ROOM before this runs.
            unsafe { sys::nftnl_set_elems_nlmsg_build_payload(h, s.as_ptr()) }
        });
    }

    /// Close the transaction. The end message asks for an ACK, so a
    /// successful commit is confirmed explicitly (kernels ≥ 6.10 honour it).
    pub(crate) fn finish(mut self) -> Finished {
        let last_seq = self.notes.last().map(|(s, _)| *s);
        if let Some(at) = self.last_obj {
            // SAFETY: a message header was written at `at` (4-aligned,
            // within `used`).
            unsafe {
                let h = self
                    .buf
                    .as_mut_ptr()
                    .cast::<u8>()
                    .add(at)
                    .cast::<libc::nlmsghdr>();
                (*h).nlmsg_flags |= libc::NLM_F_ACK as u16;
            }
        }
        let seq = self.next_seq();
        self.write("the batch end message", 0, |p| {
            // SAFETY: `p` points at MSG_ROOM writable bytes; the returned
            // header is the one just written.
            unsafe {
                let h = sys::nftnl_batch_end(p, seq);
                (*h).nlmsg_flags |= libc::NLM_F_ACK as u16;
                h
            }
        });
        Finished {
            buf: self.buf,
            used: self.used,
            end_seq: seq,
            last_seq,
            notes: self.notes,
            overflow: self.overflow,
        }
    }
}

impl Finished {
    /// The bytes to send.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `used` bytes of the u32 buffer were written; u8 has no
        // alignment requirement.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), self.used) }
    }

    /// What the message with `seq` does.
    pub(crate) fn note(&self, seq: u32) -> String {
        self.notes
            .iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| format!("message {seq} of the batch"))
    }

    /// Number of object messages.
    pub(crate) fn messages(&self) -> usize {
        self.notes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nft::obj::cstr;

    #[test]
    fn messages_are_contiguous_and_aligned() {
        let mut b = Batch::new();
        for i in 0..200 {
            let mut t = Table::new().unwrap();
            t.set_str(sys::NFTNL_TABLE_NAME, &cstr(&format!("t{i}")).unwrap());
            b.table(Op::Add, libc::NFPROTO_INET as u16, &t, format!("table {i}"));
        }
        assert_eq!(b.len(), 200);
        let f = b.finish();
        let bytes = f.bytes();
        let mut off = 0;
        let mut n = 0;
        while off < bytes.len() {
            let len = u32::from_ne_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
            assert!(len >= 16);
            off += len.next_multiple_of(4);
            n += 1;
        }
        assert_eq!(off, bytes.len());
        assert_eq!(n, 202, "begin + 200 + end");
        assert_eq!(f.note(f.end_seq - 1), "table 199");
        assert_eq!(f.last_seq, Some(f.end_seq - 1));
        assert!(f.overflow.is_none());
    }

    fn header_at(bytes: &[u8], off: usize) -> (usize, u16, u32) {
        let len = u32::from_ne_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
        let flags = u16::from_ne_bytes(bytes[off + 6..off + 8].try_into().unwrap());
        let seq = u32::from_ne_bytes(bytes[off + 8..off + 12].try_into().unwrap());
        (len, flags, seq)
    }

    fn set_with(n: usize, key_len: usize) -> Set {
        let mut s = Set::new().unwrap();
        s.set_str(sys::NFTNL_SET_TABLE, &cstr("corral").unwrap());
        s.set_str(sys::NFTNL_SET_NAME, &cstr("big").unwrap());
        for i in 0..n {
            let mut key = vec![0u8; key_len];
            key[..8].copy_from_slice(&(i as u64).to_be_bytes());
            s.add_elem(&key, None).unwrap();
        }
        s
    }

    #[test]
    fn the_last_object_message_and_the_end_ask_for_an_ack() {
        let mut b = Batch::new();
        let t = Table::new().unwrap();
        b.table(Op::Add, libc::NFPROTO_INET as u16, &t, "t1".into());
        b.table(Op::Add, libc::NFPROTO_INET as u16, &t, "t2".into());
        let f = b.finish();
        let bytes = f.bytes();
        let mut acked = Vec::new();
        let mut off = 0;
        while off < bytes.len() {
            let (len, flags, seq) = header_at(bytes, off);
            if flags & libc::NLM_F_ACK as u16 != 0 {
                acked.push(seq);
            }
            off += len.next_multiple_of(4);
        }
        assert_eq!(acked, vec![f.end_seq - 1, f.end_seq]);
    }

    #[test]
    fn the_element_bound_covers_the_real_message() {
        let s = set_with(300, 16);
        let mut b = Batch::new();
        let before = b.used;
        b.elems(Op::Add, libc::NFPROTO_INET as u16, &s, "elems".into());
        let written = b.used - before;
        let bound = elems_wire_bound(&s);
        assert!(written <= bound, "{written} > {bound}");
        assert!(written > 300 * 16, "{written}");
    }

    #[test]
    fn an_oversized_message_is_refused_and_nothing_of_it_is_kept() {
        // 4000 elements of 40-byte keys: far more than MSG_ROOM.
        let s = set_with(4000, 40);
        let mut b = Batch::new();
        let t = Table::new().unwrap();
        b.table(Op::Add, libc::NFPROTO_INET as u16, &t, "table".into());
        let used = b.used;
        b.elems(
            Op::Add,
            libc::NFPROTO_INET as u16,
            &s,
            "adding 4000 elements of set big".into(),
        );
        assert_eq!(b.used, used, "nothing of the refused message was kept");
        b.table(Op::Add, libc::NFPROTO_INET as u16, &t, "later".into());
        assert_eq!(b.used, used, "a refused batch takes no more messages");
        let f = b.finish();
        let o = f.overflow.clone().expect("the batch is refused");
        assert_eq!(o.what, "adding 4000 elements of set big");
        assert!(o.len > MSG_ROOM && o.room == MSG_ROOM, "{o:?}");
        let msg = o.error().to_string();
        assert!(msg.contains("adding 4000 elements of set big"), "{msg}");
    }
}
