//! The netfilter netlink socket: send one transaction, read its answers;
//! dump objects.
//!
//! The kernel processes an nftables batch inside the `sendmsg` call and
//! queues its answers in message order: errors, then the ACK of the last
//! object message (and, on kernels ≥ 6.10, of the end message). A commit
//! succeeds only once that final ACK is read and no error came before it;
//! an empty queue without it is not success. Both buffers are raised with
//! the `*BUFFORCE` options (root) so a 50k-element batch fits in one
//! message and its answers are not dropped.
//!
//! Only answers to our own requests count: a message whose port id is not
//! ours or whose sequence number we did not send is skipped. Every read has
//! a timeout, so a missing answer fails with [`NftError::Timeout`] instead
//! of hanging apply or verify.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::NftError;
use super::batch::Finished;

/// Receive buffer for one `recv` (dump messages are at most a few pages).
const RECV_BUF: usize = 256 * 1024;
const NLMSG_HDRLEN: usize = std::mem::size_of::<libc::nlmsghdr>();
/// How long one read waits for the kernel. Answers are queued within the
/// `sendmsg` call, so anything near this is a stuck kernel, not a slow one.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// An open netfilter netlink socket in the current network namespace.
pub(crate) struct NlSocket {
    sock: mnl::Socket,
    fd: RawFd,
    portid: u32,
    timeout: Duration,
    /// Sequence number of the next dump request.
    dump_seq: Cell<u32>,
    /// The receive buffer of every dump, allocated at the first: a read
    /// of a large table is thousands of dumps (one per set, one per
    /// chain), and a fresh 256 KiB buffer each is a fresh mapping the
    /// kernel zeroes each time.
    dump_buf: RefCell<Vec<u32>>,
    /// Whether the socket buffers were raised for dumps already.
    dump_grown: Cell<bool>,
}

impl std::fmt::Debug for NlSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NlSocket(fd {}, portid {})", self.fd, self.portid)
    }
}

fn setsockopt_int(fd: RawFd, level: i32, opt: i32, value: i32) -> io::Result<()> {
    // SAFETY: `value` lives for the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&value as *const i32).cast::<libc::c_void>(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// One parsed netlink message: its header and the whole message bytes.
pub(crate) struct Msg<'a> {
    pub(crate) hdr: *const libc::nlmsghdr,
    pub(crate) seq: u32,
    /// Port id the message is addressed to (ours for an answer).
    pub(crate) pid: u32,
    pub(crate) ty: u16,
    pub(crate) bytes: &'a [u8],
}

/// Split a receive buffer into messages.
fn messages(buf: &[u32], n: usize) -> Vec<Msg<'_>> {
    // SAFETY: `n` bytes of `buf` were filled by recv; u8 has no alignment.
    let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
    let mut out = Vec::new();
    let mut off = 0;
    while off + NLMSG_HDRLEN <= n {
        let word =
            |i: usize| u32::from_ne_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let len = word(off) as usize;
        if len < NLMSG_HDRLEN || off + len > n {
            break;
        }
        let ty = u16::from_ne_bytes([bytes[off + 4], bytes[off + 5]]);
        let seq = word(off + 8);
        let pid = word(off + 12);
        out.push(Msg {
            // `buf` is u32-aligned and messages are 4-byte aligned, so the
            // header pointer is properly aligned for nlmsghdr.
            hdr: bytes[off..].as_ptr().cast::<libc::nlmsghdr>(),
            seq,
            pid,
            ty,
            bytes: &bytes[off..off + len],
        });
        off += len.next_multiple_of(4);
    }
    out
}

/// The errno carried by an NLMSG_ERROR message (0 = ack).
fn error_code(m: &Msg<'_>) -> i32 {
    let b = m.bytes;
    if b.len() < NLMSG_HDRLEN + 4 {
        return -libc::EPROTO;
    }
    i32::from_ne_bytes([
        b[NLMSG_HDRLEN],
        b[NLMSG_HDRLEN + 1],
        b[NLMSG_HDRLEN + 2],
        b[NLMSG_HDRLEN + 3],
    ])
}

/// What the answers read so far say about a committed batch.
#[derive(Debug)]
struct Answers {
    portid: u32,
    /// Sequence numbers of the batch (begin..=end).
    seqs: std::ops::RangeInclusive<u32>,
    /// Answers that end the wait: the last object message's and the end's.
    last: [Option<u32>; 2],
    /// The first error: its sequence number and errno.
    first_error: Option<(u32, i32)>,
    /// The final ACK was read.
    done: bool,
}

impl Answers {
    fn new(portid: u32, batch: &Finished) -> Self {
        Answers {
            portid,
            seqs: 1..=batch.end_seq,
            last: [batch.last_seq, Some(batch.end_seq)],
            first_error: None,
            done: false,
        }
    }

    /// Take one message; anything that is not an answer to this batch is
    /// skipped.
    fn take(&mut self, m: &Msg<'_>) {
        if m.pid != self.portid || !self.seqs.contains(&m.seq) {
            return;
        }
        if m.ty != libc::NLMSG_ERROR as u16 {
            return;
        }
        let code = error_code(m);
        if code != 0 && self.first_error.is_none() {
            self.first_error = Some((m.seq, code));
        }
        if self.last.contains(&Some(m.seq)) {
            self.done = true;
        }
    }
}

impl NlSocket {
    /// Open and bind a socket in the current thread's network namespace.
    pub(crate) fn open() -> Result<Self, NftError> {
        let sock = mnl::Socket::new(mnl::Bus::Netfilter).map_err(NftError::Socket)?;
        // SAFETY: the socket is open for the life of `sock`.
        let fd = unsafe { mnl::mnl_sys::mnl_socket_get_fd(sock.as_raw_socket()) };
        let portid = sock.portid();
        // Errors echo only the failing header, not the whole (large) message.
        setsockopt_int(fd, libc::SOL_NETLINK, libc::NETLINK_CAP_ACK, 1)
            .map_err(NftError::Socket)?;
        let s = NlSocket {
            sock,
            fd,
            portid,
            timeout: READ_TIMEOUT,
            dump_buf: RefCell::new(Vec::new()),
            dump_grown: Cell::new(false),
            // Distinct from batch sequence numbers (which start at 1) and
            // from earlier runs, as `nft` does.
            dump_seq: Cell::new(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs() as u32)
                    .unwrap_or(1 << 20)
                    | (1 << 16),
            ),
        };
        s.set_timeout(READ_TIMEOUT)?;
        Ok(s)
    }

    /// Bound every blocking read by `t` (SO_RCVTIMEO).
    fn set_timeout(&self, t: Duration) -> Result<(), NftError> {
        let tv = libc::timeval {
            tv_sec: t.as_secs() as libc::time_t,
            tv_usec: libc::suseconds_t::from(t.subsec_micros()),
        };
        // SAFETY: `tv` lives for the call and its size is passed.
        let rc = unsafe {
            libc::setsockopt(
                self.fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast::<libc::c_void>(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(NftError::Socket(io::Error::last_os_error()));
        }
        Ok(())
    }

    /// One blocking read bounded by the timeout; `what` names what is being
    /// read for the timeout error.
    fn recv_or_timeout(&self, buf: &mut [u32], what: &str) -> Result<usize, NftError> {
        match self.recv(buf, 0) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(NftError::Timeout {
                what: what.to_owned(),
                secs: self.timeout.as_secs().max(1),
            }),
            Err(e) => Err(NftError::Socket(e)),
        }
    }

    /// Raise both socket buffers to hold `bytes` (needs CAP_NET_ADMIN).
    fn grow(&self, bytes: usize) -> Result<(), NftError> {
        let size = i32::try_from(bytes.max(1 << 20)).unwrap_or(i32::MAX);
        for opt in [libc::SO_SNDBUFFORCE, libc::SO_RCVBUFFORCE] {
            setsockopt_int(self.fd, libc::SOL_SOCKET, opt, size).map_err(NftError::Socket)?;
        }
        Ok(())
    }

    fn recv(&self, buf: &mut [u32], flags: i32) -> io::Result<usize> {
        // SAFETY: `buf` is writable for its whole byte length.
        let n = unsafe {
            libc::recv(
                self.fd,
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len() * 4,
                flags,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Send a whole transaction in one `sendmsg` and wait for its final
    /// ACK. Any error means the kernel aborted the whole transaction.
    pub(crate) fn commit(&self, batch: &Finished) -> Result<(), NftError> {
        if let Some(o) = &batch.overflow {
            return Err(o.error());
        }
        if batch.messages() == 0 {
            // Begin and end only: nothing to change.
            return Ok(());
        }
        let bytes = batch.bytes();
        self.grow(bytes.len() * 2)?;
        let sent = self.sock.send(bytes).map_err(NftError::Socket)?;
        if sent != bytes.len() {
            return Err(NftError::Socket(io::Error::other(format!(
                "sent {sent} of {} bytes of the batch",
                bytes.len()
            ))));
        }
        let mut buf = vec![0u32; RECV_BUF / 4];
        let mut answers = Answers::new(self.portid, batch);
        let what = "waiting for the answer to the nftables transaction";
        while !answers.done {
            let n = if answers.first_error.is_some() {
                // The batch failed; collect what is queued, wait no more.
                match self.recv(&mut buf, libc::MSG_DONTWAIT) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(NftError::Socket(e)),
                }
            } else {
                self.recv_or_timeout(&mut buf, what)?
            };
            for m in messages(&buf, n) {
                answers.take(&m);
            }
        }
        match answers.first_error {
            Some((seq, code)) => Err(NftError::Rejected {
                what: batch.note(seq),
                source: io::Error::from_raw_os_error(-code),
            }),
            None => Ok(()),
        }
    }

    /// Run one dump request and hand every answer message to `each`.
    /// `build` writes the request into the buffer it is given.
    pub(crate) fn dump(
        &self,
        what: &str,
        build: impl FnOnce(*mut libc::c_char, u32) -> *mut libc::nlmsghdr,
        mut each: impl FnMut(&Msg<'_>) -> Result<(), NftError>,
    ) -> Result<(), NftError> {
        if !self.dump_grown.get() {
            self.grow(4 << 20)?;
            self.dump_grown.set(true);
        }
        let mut req = vec![0u32; 16 * 1024];
        let seq = self.dump_seq.get();
        self.dump_seq.set(seq.wrapping_add(1));
        let hdr = build(req.as_mut_ptr().cast::<libc::c_char>(), seq);
        // SAFETY: `build` returned the header it wrote into `req`.
        let len = unsafe { (*hdr).nlmsg_len } as usize;
        if len > req.len() * 4 {
            // A request is a header and a few names; this is a bug, and the
            // write may already have gone past `req`, so stop here.
            return Err(NftError::MessageTooLarge {
                what: format!("the request to read {what}"),
                len,
                room: req.len() * 4,
            });
        }
        // SAFETY: `len` bytes of `req` were written.
        let bytes = unsafe { std::slice::from_raw_parts(req.as_ptr().cast::<u8>(), len) };
        self.sock.send(bytes).map_err(NftError::Socket)?;
        // A dump never runs inside another's `each` (one socket, one
        // request at a time); should one, it gets a buffer of its own.
        let mut shared = self.dump_buf.try_borrow_mut();
        let mut own = Vec::new();
        let buf: &mut Vec<u32> = match shared.as_deref_mut() {
            Ok(b) => b,
            Err(_) => &mut own,
        };
        if buf.len() < RECV_BUF / 4 {
            buf.resize(RECV_BUF / 4, 0);
        }
        let reading = format!("reading nftables {what}");
        loop {
            let n = self.recv_or_timeout(buf, &reading)?;
            for m in messages(buf, n) {
                if m.pid != self.portid || m.seq != seq {
                    // Not an answer to this request (a late answer to an
                    // earlier one, or a message the kernel sent unasked).
                    continue;
                }
                if m.ty == libc::NLMSG_DONE as u16 {
                    return Ok(());
                }
                if m.ty == libc::NLMSG_ERROR as u16 {
                    let code = error_code(&m);
                    if code == 0 {
                        continue;
                    }
                    return Err(NftError::Dump {
                        what: what.to_owned(),
                        source: io::Error::from_raw_os_error(-code),
                    });
                }
                each(&m)?;
            }
        }
    }
}

#[cfg(test)]
#[path = "socket_tests.rs"]
mod tests;
