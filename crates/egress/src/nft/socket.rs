//! The netfilter netlink socket: send one transaction, read its answers;
//! dump objects.
//!
//! The kernel processes an nftables batch inside the `sendmsg` call, so by
//! the time it returns every answer is queued on the socket: reading until
//! the queue is empty collects them all. Both buffers are raised with the
//! `*BUFFORCE` options (root) so a 50k-element batch fits in one message
//! and its answers are not dropped.

use std::io;
use std::os::fd::RawFd;

use super::NftError;
use super::batch::Finished;

/// Receive buffer for one `recv` (dump messages are at most a few pages).
const RECV_BUF: usize = 256 * 1024;
const NLMSG_HDRLEN: usize = std::mem::size_of::<libc::nlmsghdr>();

/// An open netfilter netlink socket in the current network namespace.
pub(crate) struct NlSocket {
    sock: mnl::Socket,
    fd: RawFd,
    portid: u32,
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
        out.push(Msg {
            // `buf` is u32-aligned and messages are 4-byte aligned, so the
            // header pointer is properly aligned for nlmsghdr.
            hdr: bytes[off..].as_ptr().cast::<libc::nlmsghdr>(),
            seq,
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
        Ok(NlSocket { sock, fd, portid })
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

    /// Send a whole transaction in one `sendmsg` and collect its answers.
    /// Any error means the kernel aborted the whole transaction.
    pub(crate) fn commit(&self, batch: &Finished) -> Result<(), NftError> {
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
        let mut first_error: Option<NftError> = None;
        loop {
            let n = match self.recv(&mut buf, libc::MSG_DONTWAIT) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(NftError::Socket(e)),
            };
            let mut done = false;
            for m in messages(&buf, n) {
                if m.ty != libc::NLMSG_ERROR as u16 {
                    continue;
                }
                let code = error_code(&m);
                if code != 0 && first_error.is_none() {
                    first_error = Some(NftError::Rejected {
                        what: batch.note(m.seq),
                        source: io::Error::from_raw_os_error(-code),
                    });
                }
                if m.seq == batch.end_seq {
                    done = true;
                }
            }
            if done {
                break;
            }
        }
        match first_error {
            Some(e) => Err(e),
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
        self.grow(4 << 20)?;
        let mut req = vec![0u32; 16 * 1024];
        let seq = 1u32;
        let hdr = build(req.as_mut_ptr().cast::<libc::c_char>(), seq);
        // SAFETY: `build` returned the header it wrote into `req`.
        let len = unsafe { (*hdr).nlmsg_len } as usize;
        // SAFETY: `len` bytes of `req` were written.
        let bytes = unsafe { std::slice::from_raw_parts(req.as_ptr().cast::<u8>(), len) };
        self.sock.send(bytes).map_err(NftError::Socket)?;
        let mut buf = vec![0u32; RECV_BUF / 4];
        loop {
            let n = self.recv(&mut buf, 0).map_err(NftError::Socket)?;
            for m in messages(&buf, n) {
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
mod tests {
    use super::*;

    #[test]
    fn splits_messages_and_reads_error_codes() {
        let mut buf = vec![0u32; 16];
        // Two NLMSG_ERROR messages of 20 bytes: error -2 (seq 7) and ack (seq 8).
        let words: [u32; 10] = [
            20,
            libc::NLMSG_ERROR as u32,
            7,
            0,
            (-2i32) as u32,
            20,
            libc::NLMSG_ERROR as u32,
            8,
            0,
            0,
        ];
        buf[..10].copy_from_slice(&words);
        let ms = messages(&buf, 40);
        assert_eq!(ms.len(), 2);
        assert_eq!((ms[0].seq, error_code(&ms[0])), (7, -2));
        assert_eq!((ms[1].seq, error_code(&ms[1])), (8, 0));
        // A truncated tail is ignored, not read past.
        assert_eq!(messages(&buf, 30).len(), 1);
    }
}
