//! `AF_PACKET` sockets: whole Ethernet frames in and out of one interface.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use corral_egress::netns::Netns;

use super::Marker;
use super::frame::Mac;

/// Which way a captured frame went through the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Arrived on the interface (from its peer).
    Incoming,
    /// Sent out of the interface (by this namespace).
    Outgoing,
}

/// A frame a [`PacketSocket`] received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The whole frame, link layer first.
    pub frame: Vec<u8>,
    /// In or out.
    pub direction: Direction,
}

/// A raw packet socket bound to one interface of one namespace (the
/// socket keeps the namespace it was made in, whatever thread uses it).
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
    mac: Mac,
    name: String,
}

/// `ETH_P_ALL` in network byte order, as `socket(2)` and `bind(2)` want it.
fn eth_p_all() -> u16 {
    (libc::ETH_P_ALL as u16).to_be()
}

impl PacketSocket {
    /// Opens a socket on `ifname` inside `ns` that sends frames as given
    /// and receives every frame of the interface (needs CAP_NET_RAW).
    pub fn open(ns: &Netns, ifname: &str) -> io::Result<Self> {
        let name = ifname.to_owned();
        ns.run(move || Self::open_here(&name))?
    }

    fn open_here(ifname: &str) -> io::Result<Self> {
        let cname = std::ffi::CString::new(ifname)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
        // SAFETY: if_nametoindex reads a NUL-terminated string we own.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface {ifname} in this namespace"),
            ));
        }
        let ifindex = i32::try_from(ifindex).map_err(io::Error::other)?;
        // SAFETY: plain socket(2); the fd is owned at once below.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(eth_p_all()),
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh valid fd owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let addr = sockaddr_ll(ifindex);
        // SAFETY: `addr` is a valid sockaddr_ll for the length given.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const addr).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let mac = hw_addr(&fd, ifname)?;
        Ok(Self {
            fd,
            ifindex,
            mac,
            name: ifname.to_owned(),
        })
    }

    /// The interface's own MAC address.
    pub fn mac(&self) -> Mac {
        self.mac
    }

    /// The interface name.
    pub fn interface(&self) -> &str {
        &self.name
    }

    /// Puts `frame` on the wire exactly as given.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        let addr = sockaddr_ll(self.ifindex);
        // SAFETY: `frame` and `addr` are valid for the lengths given.
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&raw const addr).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        if usize::try_from(sent).ok() != Some(frame.len()) {
            return Err(io::Error::other(format!(
                "sent {sent} of {} bytes on {}",
                frame.len(),
                self.name
            )));
        }
        Ok(())
    }

    /// The next frame within `timeout`, or `None`.
    pub fn recv(&self, timeout: Duration) -> io::Result<Option<Received>> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&raw mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(e)
            };
        }
        if rc == 0 {
            return Ok(None);
        }
        let mut buf = vec![0u8; 65_536];
        // SAFETY: zeroed sockaddr_ll is a valid out-parameter.
        let mut from: libc::sockaddr_ll = unsafe { zeroed() };
        let mut from_len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `buf` and `from` are valid for the lengths given.
        let n = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
                (&raw mut from).cast(),
                &raw mut from_len,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(None)
            } else {
                Err(e)
            };
        }
        buf.truncate(usize::try_from(n).unwrap_or(0));
        let direction = if from.sll_pkttype == libc::PACKET_OUTGOING {
            Direction::Outgoing
        } else {
            Direction::Incoming
        };
        Ok(Some(Received {
            frame: buf,
            direction,
        }))
    }
}

/// Listens on an interface where an attack's frames would arrive: open it
/// *before* sending, then ask [`Capture::saw`].
#[derive(Debug)]
pub struct Capture {
    socket: PacketSocket,
}

impl Capture {
    /// Starts capturing on `ifname` inside `ns`.
    pub fn open(ns: &Netns, ifname: &str) -> io::Result<Self> {
        Ok(Self {
            socket: PacketSocket::open(ns, ifname)?,
        })
    }

    /// The socket, e.g. to learn the interface's MAC.
    pub fn socket(&self) -> &PacketSocket {
        &self.socket
    }

    /// Whether a frame carrying `marker` arrives within `timeout`.
    pub fn saw(&self, marker: &Marker, timeout: Duration) -> io::Result<bool> {
        Ok(self
            .wait_for(timeout, |r| {
                r.direction == Direction::Incoming && marker.found_in(&r.frame)
            })?
            .is_some())
    }

    /// The first frame within `timeout` that `pred` accepts.
    pub fn wait_for(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&Received) -> bool,
    ) -> io::Result<Option<Received>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            match self.socket.recv(left)? {
                Some(r) if pred(&r) => return Ok(Some(r)),
                _ => {}
            }
        }
    }
}

fn sockaddr_ll(ifindex: i32) -> libc::sockaddr_ll {
    // SAFETY: all-zero is a valid sockaddr_ll; the fields that matter are
    // set below.
    let mut a: libc::sockaddr_ll = unsafe { zeroed() };
    a.sll_family = libc::AF_PACKET as u16;
    a.sll_protocol = eth_p_all();
    a.sll_ifindex = ifindex;
    a
}

/// The interface's MAC, by SIOCGIFHWADDR on `fd` (same namespace).
fn hw_addr(fd: &OwnedFd, ifname: &str) -> io::Result<Mac> {
    // SAFETY: all-zero is a valid ifreq.
    let mut req: libc::ifreq = unsafe { zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(ifname.bytes().take(15)) {
        *dst = src as libc::c_char;
    }
    // SAFETY: SIOCGIFHWADDR fills `req.ifr_ifru` for the named interface.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &raw mut req) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: after SIOCGIFHWADDR the union holds a sockaddr.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *m = *b as u8;
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use corral_egress::link::Links;

    use super::*;
    use crate::raw::frame::{self, Link, Transport};

    /// Two namespaces joined by a veth: a frame sent raw from one side is
    /// captured on the other, its marker found; a frame with another
    /// marker is not mistaken for it.
    #[test]
    fn a_raw_frame_crosses_a_veth_and_is_recognised_by_its_marker() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let a = Netns::new().unwrap();
        let b = Netns::new().unwrap();
        a.run_async(|| async {
            let links = Links::connect().unwrap();
            links.create_veth("va", "vb", Some(b.fd())).await.unwrap();
            links.set_up("va").await.unwrap();
        })
        .unwrap();
        b.run_async(|| async {
            Links::connect().unwrap().set_up("vb").await.unwrap();
        })
        .unwrap();
        let tx = PacketSocket::open(&a, "va").unwrap();
        let rx = Capture::open(&b, "vb").unwrap();
        let sent = Marker::fresh();
        let other = Marker::fresh();
        let src: IpAddr = "203.0.113.7".parse().unwrap();
        let dst: IpAddr = "198.51.100.9".parse().unwrap();
        let f = frame::ip(
            &Link::new(tx.mac(), rx.socket().mac()),
            src,
            dst,
            64,
            Transport::Udp { sport: 9, dport: 9 },
            sent.bytes(),
        )
        .unwrap();
        // The carrier of a fresh veth may take a moment: resend until seen.
        let mut seen = false;
        for _ in 0..20 {
            tx.send(&f).unwrap();
            if rx.saw(&sent, Duration::from_millis(100)).unwrap() {
                seen = true;
                break;
            }
        }
        assert!(seen, "the frame never arrived on the peer");
        assert!(!rx.saw(&other, Duration::from_millis(200)).unwrap());
    }
}
