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
use super::wire;

/// Head-room reserved before writing one message: larger than any message
/// corral builds (set-element messages are capped well below 64 KiB). A
/// message whose bound ([`wire`]) exceeds it is never handed to libnftnl,
/// which writes without knowing the room it has.
const MSG_ROOM: usize = 128 * 1024;

/// What an object message does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Create (tables and chains: create-or-keep; rules: append; elements:
    /// exclusive, an existing element is an error).
    Add,
    /// Elements only: create, or leave an existing element as it is
    /// (no `NLM_F_EXCL`), so a resolver that learns an address twice does
    /// not fail its transaction.
    Upsert,
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
        b.write("the batch begin message", wire::BATCH_MESSAGE, |p| {
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
    /// bound of the message length computed from the object before
    /// building ([`wire`]); a message that could be longer than its room
    /// is not built, and the batch is refused at send time.
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
            // Only reachable if `bound` underestimated (a bug in `wire`):
            // keep nothing of it and refuse the batch rather than send a
            // corrupt one.
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
            Op::Add | Op::Upsert => (libc::NFT_MSG_NEWTABLE, libc::NLM_F_CREATE),
            Op::Del => (libc::NFT_MSG_DELTABLE, 0),
        };
        self.object(ty, family, flags, note, wire::table(t), |h| {
            // SAFETY: `h` is the header just built; `t` is valid and its
            // message was bounded against MSG_ROOM before this runs.
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
            wire::chain(c),
            |h| {
                // SAFETY: `h` is the header just built; `c` is valid and its
                // message was bounded against MSG_ROOM before this runs.
                unsafe { sys::nftnl_chain_nlmsg_build_payload(h, c.as_ptr()) }
            },
        );
    }

    /// Append a rule to its chain.
    pub(crate) fn rule(&mut self, family: u16, r: &Rule, note: String) {
        let flags = libc::NLM_F_CREATE | libc::NLM_F_APPEND;
        self.object(
            libc::NFT_MSG_NEWRULE,
            family,
            flags,
            note,
            wire::rule(r),
            |h| {
                // SAFETY: `h` is the header just built; `r` is valid and its
                // message was bounded against MSG_ROOM before this runs.
                unsafe { sys::nftnl_rule_nlmsg_build_payload(h, r.as_ptr()) }
            },
        );
    }

    /// Add a set (without elements).
    pub(crate) fn set(&mut self, family: u16, s: &Set, note: String) {
        let flags = libc::NLM_F_CREATE;
        self.object(
            libc::NFT_MSG_NEWSET,
            family,
            flags,
            note,
            wire::set(s),
            |h| {
                // SAFETY: `h` is the header just built; `s` is valid and its
                // message was bounded against MSG_ROOM before this runs.
                unsafe { sys::nftnl_set_nlmsg_build_payload(h, s.as_ptr()) }
            },
        );
    }

    /// Add or delete the elements carried by `s` (one message).
    pub(crate) fn elems(&mut self, op: Op, family: u16, s: &Set, note: String) {
        let (ty, flags) = match op {
            Op::Add => (
                libc::NFT_MSG_NEWSETELEM,
                libc::NLM_F_CREATE | libc::NLM_F_EXCL,
            ),
            Op::Upsert => (libc::NFT_MSG_NEWSETELEM, libc::NLM_F_CREATE),
            Op::Del => (libc::NFT_MSG_DELSETELEM, 0),
        };
        let bound = wire::elems(s);
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
        self.write("the batch end message", wire::BATCH_MESSAGE, |p| {
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
        let bound = wire::elems(&s);
        assert!(written <= bound, "{written} > {bound}");
        assert!(written > 300 * 16, "{written}");
    }

    fn rule_of(exprs: usize) -> Rule {
        use crate::nft::obj::Expr;
        let mut r = Rule::new().unwrap();
        r.set_str(sys::NFTNL_RULE_TABLE, &cstr("corral").unwrap());
        r.set_str(sys::NFTNL_RULE_CHAIN, &cstr("forward").unwrap());
        for _ in 0..exprs {
            r.push(
                Expr::new(c"cmp")
                    .unwrap()
                    .u32(sys::NFTNL_EXPR_CMP_SREG, 1)
                    .u32(sys::NFTNL_EXPR_CMP_OP, 0)
                    .data(sys::NFTNL_EXPR_CMP_DATA, &[0xab; 64])
                    .unwrap(),
            );
        }
        let inner = Expr::new(c"limit")
            .unwrap()
            .u64(sys::NFTNL_EXPR_LIMIT_RATE, 10)
            .u64(sys::NFTNL_EXPR_LIMIT_UNIT, 1);
        r.push(
            Expr::new(c"dynset")
                .unwrap()
                .u32(sys::NFTNL_EXPR_DYNSET_SREG_KEY, 1)
                .str(sys::NFTNL_EXPR_DYNSET_SET_NAME, &cstr("meter").unwrap())
                .nest(sys::NFTNL_EXPR_DYNSET_EXPR, inner),
        );
        r.push(
            Expr::new(c"immediate")
                .unwrap()
                .u32(sys::NFTNL_EXPR_IMM_DREG, 0)
                .u32(sys::NFTNL_EXPR_IMM_VERDICT, libc::NF_ACCEPT as u32),
        );
        r
    }

    /// Each kind of message, written, is no longer than the bound the
    /// batch checked before writing it.
    #[test]
    fn every_bound_covers_its_message() {
        let family = libc::NFPROTO_INET as u16;
        let mut t = Table::new().unwrap();
        t.set_str(sys::NFTNL_TABLE_NAME, &cstr("corral").unwrap());
        t.set_u32(sys::NFTNL_TABLE_FLAGS, 0);
        let mut c = Chain::new().unwrap();
        c.set_str(sys::NFTNL_CHAIN_TABLE, &cstr("corral").unwrap());
        c.set_str(sys::NFTNL_CHAIN_NAME, &cstr("forward").unwrap());
        c.set_str(sys::NFTNL_CHAIN_TYPE, &cstr("filter").unwrap());
        c.set_u32(sys::NFTNL_CHAIN_HOOKNUM, 2);
        c.set_s32(sys::NFTNL_CHAIN_PRIO, -200);
        c.set_u32(sys::NFTNL_CHAIN_POLICY, 0);
        let mut s = Set::new().unwrap();
        s.set_str(sys::NFTNL_SET_TABLE, &cstr("corral").unwrap());
        s.set_str(sys::NFTNL_SET_NAME, &cstr("allow_v4").unwrap());
        s.set_u32(sys::NFTNL_SET_KEY_LEN, 4);
        s.set_u32(sys::NFTNL_SET_FLAGS, 0x7);
        s.set_data(sys::NFTNL_SET_USERDATA, &[1; 200]);
        let r = rule_of(40);
        let mut b = Batch::new();
        let mut check = |name: &str, bound: usize, write: &mut dyn FnMut(&mut Batch)| {
            let before = b.used;
            write(&mut b);
            let written = b.used - before;
            assert!(
                written > 20 && written <= bound,
                "{name}: {written} > {bound}"
            );
        };
        check("table", wire::table(&t), &mut |b| {
            b.table(Op::Add, family, &t, "t".into())
        });
        check("chain", wire::chain(&c), &mut |b| {
            b.chain(family, &c, "c".into())
        });
        check("set", wire::set(&s), &mut |b| b.set(family, &s, "s".into()));
        check("rule", wire::rule(&r), &mut |b| {
            b.rule(family, &r, "r".into())
        });
        assert!(b.finish().overflow.is_none());
    }

    /// A rule too long for the room is refused on its bound, before
    /// libnftnl writes a byte of it (writing it would run past the room
    /// reserved). Control: the same rule, shorter, is written.
    #[test]
    fn an_oversized_rule_is_refused_before_it_is_written() {
        let family = libc::NFPROTO_INET as u16;
        let mut b = Batch::new();
        let short = rule_of(10);
        let used = b.used;
        b.rule(family, &short, "short rule".into());
        assert!(b.used > used, "control: a short rule is written");
        let long = rule_of(3000);
        assert!(wire::rule(&long) > MSG_ROOM);
        let used = b.used;
        let words = b.buf.len();
        b.rule(family, &long, "a rule of 3000 comparisons".into());
        assert_eq!(b.used, used, "nothing of the refused rule was kept");
        assert!(
            b.buf[used / 4..].iter().all(|w| *w == 0) && b.buf.len() == words,
            "nothing of it was written"
        );
        let o = b.finish().overflow.expect("the batch is refused");
        assert_eq!(o.what, "a rule of 3000 comparisons");
        assert!(o.len > MSG_ROOM, "{o:?}");
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
