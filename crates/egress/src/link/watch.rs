//! Link events: a route netlink socket subscribed to link changes in one
//! namespace, so a daemon learns at once that a NIC was plugged into (or
//! pulled from) a bridge — e.g. a sandbox created behind corral's back —
//! and can sweep the bridges' ports (isolate it, quarantine it) without
//! polling.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::LinkAttribute;
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use crate::netns::Netns;

/// What the kernel reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEvent {
    /// A link with a master (a bridge port) appeared or changed, or a link
    /// went away: the ports of a bridge may have changed.
    Ports,
    /// The socket's buffer overflowed and events were lost: anything may
    /// have changed.
    Lost,
}

/// A socket that hears about link changes in the namespace it was opened
/// in (the socket stays there whatever thread reads it).
#[derive(Debug)]
pub struct LinkWatch {
    socket: Socket,
    buf: Vec<u8>,
}

impl LinkWatch {
    /// Opens the watch inside `ns`.
    pub fn open(ns: &Netns) -> io::Result<Self> {
        let socket = ns.run(|| -> io::Result<Socket> {
            let mut socket = Socket::new(NETLINK_ROUTE)?;
            socket.bind(&SocketAddr::new(0, 0))?;
            socket.add_membership(libc::RTNLGRP_LINK)?;
            Ok(socket)
        })??;
        Ok(Self {
            socket,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Waits up to `timeout` for events that may have changed a bridge's
    /// ports; `None` when nothing relevant arrived in time. Events that
    /// concern no port (a link's counters, an address) are skipped.
    pub fn next(&mut self, timeout: Duration) -> io::Result<Option<LinkEvent>> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if !poll_readable(self.socket.as_raw_fd(), left)? {
                return Ok(None);
            }
            match self.socket.recv(&mut &mut self.buf[..], 0) {
                Ok(n) => {
                    if concerns_ports(&self.buf[..n]) {
                        return Ok(Some(LinkEvent::Ports));
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Ok(Some(LinkEvent::Lost));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// True when a read of `fd` would not block, waiting up to `timeout`.
pub(crate) fn poll_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut fd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd that lives across the call; the count says
    // one.
    let rc = unsafe { libc::poll(&raw mut fd, 1, ms) };
    match rc {
        0 => Ok(false),
        n if n > 0 => Ok(true),
        _ => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}

/// True when the datagram holds a link message that may change a bridge's
/// ports: a new or changed link with a master, or a link deleted.
fn concerns_ports(mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        let Ok(msg) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes) else {
            // Unparsable: say yes, a sweep is cheap and idempotent.
            return true;
        };
        match &msg.payload {
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(link))
                if link
                    .attributes
                    .iter()
                    .any(|a| matches!(a, LinkAttribute::Controller(_))) =>
            {
                return true;
            }
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelLink(_)) => return true,
            _ => {}
        }
        let len = usize::try_from(msg.header.length).unwrap_or(0);
        if len == 0 || len > bytes.len() {
            return false;
        }
        bytes = &bytes[len..];
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::Links;

    #[test]
    fn a_port_joining_a_bridge_is_heard_and_a_quiet_namespace_is_not() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let ns = Netns::new().unwrap();
        let mut watch = LinkWatch::open(&ns).unwrap();
        assert_eq!(watch.next(Duration::from_millis(50)).unwrap(), None);
        ns.run_async(|| async {
            let links = Links::connect()?;
            links.create_veth("lw-a", "lw-b", None).await?;
            links.create_bridge("lw-br").await?;
            links.attach_port("lw-a", "lw-br", false).await
        })
        .unwrap()
        .unwrap();
        let mut heard = None;
        for _ in 0..20 {
            if let Some(e) = watch.next(Duration::from_secs(1)).unwrap() {
                heard = Some(e);
                break;
            }
        }
        assert_eq!(heard, Some(LinkEvent::Ports));
    }
}
