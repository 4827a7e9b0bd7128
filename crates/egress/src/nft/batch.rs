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

use super::obj::{Chain, Rule, Set, Table};

/// Head-room reserved before writing one message: larger than any message
/// corral builds (set-element messages are capped well below 64 KiB).
const MSG_ROOM: usize = 128 * 1024;

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
}

/// A finished transaction: bytes to send plus what each message does.
pub(crate) struct Finished {
    buf: Vec<u32>,
    used: usize,
    /// Sequence number of the end message (it carries NLM_F_ACK).
    pub(crate) end_seq: u32,
    notes: Vec<(u32, String)>,
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
        };
        let seq = b.next_seq();
        b.write(|p| {
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
    /// it wrote (read back from the header it returns).
    fn write(&mut self, build: impl FnOnce(*mut c_char) -> *mut libc::nlmsghdr) {
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
        debug_assert!(len <= MSG_ROOM, "message of {len} bytes overran its room");
        // Bytes past `used` were zeroed by `resize` and never written (each
        // message is written at `used` and ends before the new `used`), so
        // the next message starts on zeroed memory as libmnl expects.
        self.used += len.next_multiple_of(4);
    }

    fn object(
        &mut self,
        ty: i32,
        family: u16,
        flags: i32,
        note: String,
        payload: impl FnOnce(*mut libc::nlmsghdr),
    ) {
        let seq = self.next_seq();
        self.notes.push((seq, note));
        self.write(|p| {
            // SAFETY: `p` points at MSG_ROOM writable bytes.
            let hdr =
                unsafe { sys::nftnl_nlmsg_build_hdr(p, ty as u16, family, flags as u16, seq) };
            payload(hdr);
            hdr
        });
    }

    /// Add or delete a table.
    pub(crate) fn table(&mut self, op: Op, family: u16, t: &Table, note: String) {
        let (ty, flags) = match op {
            Op::Add => (libc::NFT_MSG_NEWTABLE, libc::NLM_F_CREATE),
            Op::Del => (libc::NFT_MSG_DELTABLE, 0),
        };
        self.object(ty, family, flags, note, |h| {
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
            |h| {
                // SAFETY: `h` is the header just built; `c` is valid.
                unsafe { sys::nftnl_chain_nlmsg_build_payload(h, c.as_ptr()) }
            },
        );
    }

    /// Append a rule to its chain.
    pub(crate) fn rule(&mut self, family: u16, r: &Rule, note: String) {
        let flags = libc::NLM_F_CREATE | libc::NLM_F_APPEND;
        self.object(libc::NFT_MSG_NEWRULE, family, flags, note, |h| {
            // SAFETY: `h` is the header just built; `r` is valid.
            unsafe { sys::nftnl_rule_nlmsg_build_payload(h, r.as_ptr()) }
        });
    }

    /// Add a set (without elements).
    pub(crate) fn set(&mut self, family: u16, s: &Set, note: String) {
        let flags = libc::NLM_F_CREATE;
        self.object(libc::NFT_MSG_NEWSET, family, flags, note, |h| {
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
        self.object(ty, family, flags, note, |h| {
            // SAFETY: `h` is the header just built; `s` is valid and its
            // element list fits in MSG_ROOM (callers chunk it).
            unsafe { sys::nftnl_set_elems_nlmsg_build_payload(h, s.as_ptr()) }
        });
    }

    /// Close the transaction. The end message asks for an ACK, so a
    /// successful commit is confirmed explicitly (kernels ≥ 6.10 honour it).
    pub(crate) fn finish(mut self) -> Finished {
        let seq = self.next_seq();
        self.write(|p| {
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
            notes: self.notes,
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
    }
}
