//! ICMP / ICMPv6 echo over a raw socket (needs CAP_NET_RAW: root).

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use crate::Observed;

static NEXT_ID: AtomicU16 = AtomicU16::new(0x4300);

const V4_ECHO_REQUEST: u8 = 8;
const V4_ECHO_REPLY: u8 = 0;
const V4_UNREACHABLE: u8 = 3;
const V6_UNREACHABLE: u8 = 1;
const V6_ECHO_REQUEST: u8 = 128;
const V6_ECHO_REPLY: u8 = 129;

/// Sends one echo request to `to` and waits up to `timeout` for its reply
/// or an ICMP error that quotes it.
pub(crate) fn echo(to: IpAddr, timeout: Duration) -> Observed {
    echo_until(to, timeout, None).unwrap_or(Observed::TimedOut)
}

/// Like [`echo`], but gives up early, with `None`, once `stop` becomes
/// readable: the caller learned the echo's fate some other way (the
/// canary's sibling check, from the bridge) and wants the socket gone.
pub fn echo_until(to: IpAddr, timeout: Duration, stop: Option<BorrowedFd<'_>>) -> Option<Observed> {
    match echo_inner(to, timeout, stop) {
        Ok(o) => o,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Some(Observed::Error(format!(
            "raw ICMP socket refused ({e}); CAP_NET_RAW is missing, run as root"
        ))),
        Err(e) => Some(crate::classify(&e)),
    }
}

fn echo_inner(
    to: IpAddr,
    timeout: Duration,
    stop: Option<BorrowedFd<'_>>,
) -> io::Result<Option<Observed>> {
    // Distinct ids keep concurrent probes in one namespace apart (a raw
    // socket sees every ICMP packet of the namespace).
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let (family, proto, req_type) = match to {
        IpAddr::V4(_) => (libc::AF_INET, libc::IPPROTO_ICMP, V4_ECHO_REQUEST),
        IpAddr::V6(_) => (libc::AF_INET6, libc::IPPROTO_ICMPV6, V6_ECHO_REQUEST),
    };
    // SAFETY: plain socket(2); the fd is owned at once.
    let raw = unsafe { libc::socket(family, libc::SOCK_RAW | libc::SOCK_CLOEXEC, proto) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh valid fd owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut packet = vec![req_type, 0, 0, 0];
    packet.extend_from_slice(&id.to_be_bytes());
    packet.extend_from_slice(&1u16.to_be_bytes());
    packet.extend_from_slice(b"corral-icmp-probe");
    if to.is_ipv4() {
        // The kernel fills the ICMPv6 checksum itself, not the ICMPv4 one.
        let sum = checksum(&packet);
        packet[2..4].copy_from_slice(&sum.to_be_bytes());
    }
    let (addr, len) = sockaddr(to);
    // SAFETY: `packet` and `addr` are valid for the lengths given.
    let sent = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            packet.as_ptr().cast(),
            packet.len(),
            0,
            (&raw const addr).cast(),
            len,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 1500];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Some(Observed::TimedOut));
        }
        match wait(&sock, stop, left)? {
            Ready::Reply => {}
            Ready::Stop => return Ok(None),
            Ready::Nothing => continue,
        }
        let mut from: libc::sockaddr_storage = zeroed_storage();
        let mut from_len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: `buf` and `from` are valid for the lengths given.
        let n = unsafe {
            libc::recvfrom(
                sock.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
                (&raw mut from).cast(),
                &mut from_len,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
            ) {
                continue;
            }
            return Err(e);
        }
        let n = usize::try_from(n).unwrap_or(0);
        let verdict = match to {
            IpAddr::V4(_) => parse_v4(&buf[..n], id),
            IpAddr::V6(_) => parse_v6(&buf[..n], id),
        };
        if let Some(v) = verdict {
            return Ok(Some(v));
        }
    }
}

enum Ready {
    Reply,
    Stop,
    Nothing,
}

/// Wait up to `left` for the socket or `stop` to be readable.
fn wait(sock: &OwnedFd, stop: Option<BorrowedFd<'_>>, left: Duration) -> io::Result<Ready> {
    let mut fds = [
        libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop.map_or(-1, |s| s.as_raw_fd()),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // Round up: a sub-millisecond rest must not spin at 0.
    let ms = i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
    // SAFETY: two valid pollfds (a negative fd is ignored by poll).
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(Ready::Nothing);
        }
        return Err(e);
    }
    if fds[1].revents != 0 {
        return Ok(Ready::Stop);
    }
    if fds[0].revents != 0 {
        return Ok(Ready::Reply);
    }
    Ok(Ready::Nothing)
}

/// An IPv4 raw read includes the IP header.
fn parse_v4(pkt: &[u8], id: u16) -> Option<Observed> {
    let ihl = usize::from(pkt.first()? & 0x0f) * 4;
    let icmp = pkt.get(ihl..)?;
    match *icmp.first()? {
        V4_ECHO_REPLY if read_u16(icmp, 4)? == id => Some(Observed::Connected),
        V4_UNREACHABLE => {
            let inner = icmp.get(8..)?;
            let inner_ihl = usize::from(inner.first()? & 0x0f) * 4;
            let quoted = inner.get(inner_ihl..)?;
            (quoted.first() == Some(&V4_ECHO_REQUEST) && read_u16(quoted, 4)? == id)
                .then(|| Observed::Rejected(format!("ICMP unreachable code {}", icmp[1])))
        }
        _ => None,
    }
}

/// An IPv6 raw read starts at the ICMPv6 header.
fn parse_v6(icmp: &[u8], id: u16) -> Option<Observed> {
    match *icmp.first()? {
        V6_ECHO_REPLY if read_u16(icmp, 4)? == id => Some(Observed::Connected),
        V6_UNREACHABLE => {
            // 8-byte error header, 40-byte quoted IPv6 header, quoted ICMPv6.
            let quoted = icmp.get(48..)?;
            (quoted.first() == Some(&V6_ECHO_REQUEST) && read_u16(quoted, 4)? == id)
                .then(|| Observed::Rejected(format!("ICMPv6 unreachable code {}", icmp[1])))
        }
        _ => None,
    }
}

fn read_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// RFC 1071 Internet checksum.
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    // The loop above folded `sum` into 16 bits.
    !(sum as u16)
}

fn zeroed_storage() -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
    unsafe { std::mem::zeroed() }
}

fn sockaddr(ip: IpAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let mut storage = zeroed_storage();
    match ip {
        IpAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin) };
            (storage, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        IpAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: 0,
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.octets(),
                },
                sin6_scope_id: 0,
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin6) };
            (storage, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_matches_rfc1071_example() {
        // RFC 1071 section 3 example bytes sum to 0xddf2; the checksum is its complement.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn v4_unreachable_quoting_our_echo_is_rejected() {
        let mut pkt = vec![0x45; 1];
        pkt.resize(20, 0);
        pkt.extend_from_slice(&[V4_UNREACHABLE, 3, 0, 0, 0, 0, 0, 0]);
        let mut inner = vec![0x45];
        inner.resize(20, 0);
        pkt.extend_from_slice(&inner);
        pkt.extend_from_slice(&[V4_ECHO_REQUEST, 0, 0, 0, 0x12, 0x34, 0, 1]);
        assert!(matches!(
            parse_v4(&pkt, 0x1234),
            Some(Observed::Rejected(_))
        ));
        assert_eq!(parse_v4(&pkt, 0x9999), None);
    }

    #[test]
    fn v6_reply_needs_our_id() {
        let reply = [V6_ECHO_REPLY, 0, 0, 0, 0xab, 0xcd, 0, 1];
        assert_eq!(parse_v6(&reply, 0xabcd), Some(Observed::Connected));
        assert_eq!(parse_v6(&reply, 0xabce), None);
        assert_eq!(parse_v6(&[], 1), None);
    }
}
