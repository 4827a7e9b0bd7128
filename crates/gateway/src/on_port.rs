//! Frames sent out of one sandbox's port, bypassing the bridge: the
//! host-side interface of a sandbox's NIC belongs to that sandbox alone,
//! so a frame written there reaches no sibling, whatever its destination
//! address says. The router advertisement and the DHCP server's replies
//! leave this way.
//!
//! Needs CAP_NET_RAW, in the network namespace of the port.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Sends `frame` (a whole Ethernet frame, header included) out of `port`
/// to `to_mac`, `ethertype` naming what it carries, on a socket of its
/// own (for a frame sent now and then; a server keeps a [`PortSender`]).
pub(crate) fn send(port: &str, to_mac: [u8; 6], ethertype: u16, frame: &[u8]) -> io::Result<()> {
    PortSender::open()?.send(port, to_mac, ethertype, frame)
}

/// A packet socket that sends out of any port by name. Kept open by a
/// server: closing a packet socket waits for an RCU grace period (7–15 ms
/// measured here), which a socket per reply would add to every reply.
#[derive(Debug)]
pub(crate) struct PortSender {
    fd: OwnedFd,
}

impl PortSender {
    /// Opens the socket (CAP_NET_RAW, in the ports' network namespace).
    pub(crate) fn open() -> io::Result<Self> {
        // Protocol 0: this socket only sends, so it never queues a frame.
        // SAFETY: plain socket(2); the fd is owned at once.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh valid fd owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Self { fd })
    }

    /// Sends `frame` out of `port` to `to_mac` (see [`send`]).
    pub(crate) fn send(
        &self,
        port: &str,
        to_mac: [u8; 6],
        ethertype: u16,
        frame: &[u8],
    ) -> io::Result<()> {
        let index = if_index(port)?;
        // SAFETY: all-zero is a valid sockaddr_ll; the fields follow.
        let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        to.sll_family = libc::AF_PACKET as u16;
        to.sll_protocol = ethertype.to_be();
        to.sll_ifindex = index;
        to.sll_halen = 6;
        to.sll_addr[..6].copy_from_slice(&to_mac);
        // SAFETY: `frame` and `to` are alive for the call, lengths are theirs.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&raw const to).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

pub(crate) fn if_index(name: &str) -> io::Result<i32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name holds a NUL"))?;
    // SAFETY: a NUL-terminated name alive for the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("interface `{name}`: {e}")));
    }
    i32::try_from(index).map_err(|_| io::Error::other("interface index out of range"))
}
