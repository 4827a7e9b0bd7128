//! Whether a bridge forwarded one ARP request, seen from the bridge's own
//! network namespace (needs CAP_NET_RAW: root).
//!
//! Bridge-port isolation drops a frame between two isolated ports before
//! any netfilter hook, silently: no drop-log record, no reject. What the
//! kernel does show is the order in which a broadcast frame is handled.
//! A packet socket bound to every interface of the bridge's namespace sees
//! the request three ways, all in one softirq and in this order:
//!
//! 1. coming in on the sender's port (taps run before the bridge's rx
//!    handler);
//! 2. going out of every port the bridge floods it to (the flood transmits
//!    synchronously, and a transmit is tapped before the driver gets it);
//! 3. coming in on the bridge device itself (local delivery, which the
//!    bridge does only after the flood).
//!
//! So once (3) arrives with no (2) before it, the flood is over and sent
//! the request out of no port: positive evidence that nothing behind the
//! bridge was asked, without waiting for an answer that cannot come.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

const ETH_P_ALL: u16 = 0x0003;
const ETH_P_ARP: u16 = 0x0806;
const ARP_REQUEST: u16 = 1;
/// `sll_pkttype` of a frame the host transmits.
const PACKET_OUTGOING: u8 = 4;

/// Who sends the request: the sandbox's link address and IPv4 address on
/// the interface facing the bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpSender {
    /// Link-layer address.
    pub mac: [u8; 6],
    /// IPv4 address (the request's sender protocol address).
    pub ip: Ipv4Addr,
}

/// What the tap saw of the sender's request for the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// The request came in on interface `port`, and the bridge took it
    /// in itself (interface `bridge`) having sent it out of no port.
    NotForwarded {
        /// The sender's port (its ifindex in the tap's namespace).
        port: u32,
        /// The interface of the local delivery (the bridge).
        bridge: u32,
    },
    /// A copy of the request left through interface `out`.
    Forwarded {
        /// The ifindex it left through.
        out: u32,
    },
    /// The request was not seen both ways within the wait.
    NotSeen,
}

/// The sender this thread's namespace would ask `to` from: the interface
/// whose IPv4 network holds `to`, its address and link address.
pub fn sender_towards(to: Ipv4Addr) -> io::Result<ArpSender> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head`, freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found: Option<(Vec<u8>, Ipv4Addr)> = None;
    let mut macs: Vec<(Vec<u8>, [u8; 6])> = Vec::new();
    let mut at = head;
    while !at.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let ifa = unsafe { &*at };
        at = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: a NUL-terminated name owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_bytes()
            .to_vec();
        // SAFETY: ifa_addr is non-null and starts with a family.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if family == libc::AF_PACKET {
            // SAFETY: an AF_PACKET address is a sockaddr_ll.
            let ll = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_ll>() };
            if ll.sll_halen == 6 {
                let mut mac = [0u8; 6];
                mac.copy_from_slice(&ll.sll_addr[..6]);
                macs.push((name, mac));
            }
        } else if family == libc::AF_INET && !ifa.ifa_netmask.is_null() {
            // SAFETY: AF_INET addresses and their masks are sockaddr_in.
            let (addr, mask) = unsafe {
                (
                    &*ifa.ifa_addr.cast::<libc::sockaddr_in>(),
                    &*ifa.ifa_netmask.cast::<libc::sockaddr_in>(),
                )
            };
            let ip = Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
            let mask = u32::from_be(mask.sin_addr.s_addr);
            if mask != 0 && u32::from(ip) & mask == u32::from(to) & mask && found.is_none() {
                found = Some((name, ip));
            }
        }
    }
    // SAFETY: the list from getifaddrs above, freed once.
    unsafe { libc::freeifaddrs(head) };
    let Some((name, ip)) = found else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface here has an IPv4 network holding {to}"),
        ));
    };
    let mac = macs
        .into_iter()
        .find_map(|(n, mac)| (n == name).then_some(mac))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "interface {} (towards {to}) has no link-layer address",
                    String::from_utf8_lossy(&name)
                ),
            )
        })?;
    Ok(ArpSender { mac, ip })
}

/// A packet socket on every interface of the namespace it was opened in,
/// keeping ARP frames only, both directions.
#[derive(Debug)]
pub struct ArpTap {
    fd: OwnedFd,
}

impl ArpTap {
    /// Open the tap in the calling thread's network namespace (it stays
    /// there). Open it before the request can be sent.
    pub fn open() -> io::Result<ArpTap> {
        // ETH_P_ALL, not ETH_P_ARP: only an all-protocol tap sees frames
        // the host transmits (step 2 above).
        // SAFETY: plain socket(2); the fd is owned at once.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(ETH_P_ALL.to_be()),
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh valid fd owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // In the kernel, so the host's other traffic never wakes the
        // reader: load the ethertype; ARP → keep all, else drop.
        let mut code = [
            libc::sock_filter {
                code: 0x28,
                jt: 0,
                jf: 0,
                k: 12,
            },
            libc::sock_filter {
                code: 0x15,
                jt: 0,
                jf: 1,
                k: u32::from(ETH_P_ARP),
            },
            libc::sock_filter {
                code: 0x06,
                jt: 0,
                jf: 0,
                k: 0xffff,
            },
            libc::sock_filter {
                code: 0x06,
                jt: 0,
                jf: 0,
                k: 0,
            },
        ];
        let prog = libc::sock_fprog {
            len: code.len() as u16,
            filter: code.as_mut_ptr(),
        };
        // SAFETY: `prog` points at `code`, alive for the call.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&raw const prog).cast(),
                size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ArpTap { fd })
    }

    /// Wait up to `timeout` for `from`'s request for `to` to be settled
    /// one way or the other (see the module's note).
    pub fn wait(&self, from: &ArpSender, to: Ipv4Addr, timeout: Duration) -> io::Result<Fence> {
        let deadline = Instant::now() + timeout;
        let mut port: Option<u32> = None;
        let mut buf = [0u8; 128];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Fence::NotSeen);
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if rc == 0 {
                continue;
            }
            // SAFETY: zeroed sockaddr_ll is valid; filled by recvfrom.
            let mut ll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: `buf` and `ll` are valid for the lengths given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&raw mut ll).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) {
                    continue;
                }
                return Err(e);
            }
            let frame = &buf[..usize::try_from(n).unwrap_or(0)];
            if !is_request(frame, from, to) {
                continue;
            }
            let ifindex = u32::try_from(ll.sll_ifindex).unwrap_or(0);
            if ll.sll_pkttype == PACKET_OUTGOING {
                return Ok(Fence::Forwarded { out: ifindex });
            }
            match port {
                None => port = Some(ifindex),
                // The sender's own retransmission, on its port again.
                Some(p) if p == ifindex => {}
                Some(p) => {
                    return Ok(Fence::NotForwarded {
                        port: p,
                        bridge: ifindex,
                    });
                }
            }
        }
    }
}

/// `frame` (Ethernet) is `from`'s ARP request for `to`.
fn is_request(frame: &[u8], from: &ArpSender, to: Ipv4Addr) -> bool {
    let Some(arp) = frame.get(14..42) else {
        return false;
    };
    frame[12..14] == ETH_P_ARP.to_be_bytes()
        && frame[6..12] == from.mac
        && arp[0..2] == 1u16.to_be_bytes()
        && arp[2..4] == 0x0800u16.to_be_bytes()
        && arp[4] == 6
        && arp[5] == 4
        && arp[6..8] == ARP_REQUEST.to_be_bytes()
        && arp[8..14] == from.mac
        && arp[14..18] == from.ip.octets()
        && arp[24..28] == to.octets()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(mac: [u8; 6], spa: [u8; 4], tpa: [u8; 4], op: u16) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&mac);
        f.extend_from_slice(&ETH_P_ARP.to_be_bytes());
        f.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
        f.extend_from_slice(&op.to_be_bytes());
        f.extend_from_slice(&mac);
        f.extend_from_slice(&spa);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&tpa);
        f
    }

    #[test]
    fn only_the_senders_request_for_the_target_matches() {
        let me = ArpSender {
            mac: [2, 0, 0, 0, 0, 1],
            ip: Ipv4Addr::new(10, 9, 0, 2),
        };
        let to = Ipv4Addr::new(10, 9, 0, 3);
        assert!(is_request(
            &request(me.mac, [10, 9, 0, 2], [10, 9, 0, 3], 1),
            &me,
            to
        ));
        // A reply, another target, another sender, a short frame.
        assert!(!is_request(
            &request(me.mac, [10, 9, 0, 2], [10, 9, 0, 3], 2),
            &me,
            to
        ));
        assert!(!is_request(
            &request(me.mac, [10, 9, 0, 2], [10, 9, 0, 4], 1),
            &me,
            to
        ));
        assert!(!is_request(
            &request([2, 0, 0, 0, 0, 9], [10, 9, 0, 2], [10, 9, 0, 3], 1),
            &me,
            to
        ));
        assert!(!is_request(&[0u8; 20], &me, to));
    }
}
