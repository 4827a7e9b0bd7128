//! One probe from the calling thread's network stack (run it on a thread
//! inside the namespace whose view you want): a TCP connect, one UDP
//! datagram, one ICMP echo, one DNS query. Each is classified by what the
//! kernel said, within the check's bound.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use corral_drill::lab::{Observed as DrillObserved, Probe};
use corral_gateway::probe::ProbeError;
use corral_gateway::wire::{RCODE_NOERROR, TYPE_A};
use corral_sandbox_core::verify::Observed;

/// What one probe saw, with a line of evidence and how long it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The classification.
    pub observed: Observed,
    /// What the kernel or the answer said.
    pub output: String,
    /// Wall time.
    pub elapsed: Duration,
}

/// A name corral asks a server when it only wants to know whether the
/// server answers (`.invalid` never exists, RFC 6761).
pub const ANY_NAME: &str = "corral-canary.invalid";

fn timed(f: impl FnOnce() -> (Observed, String)) -> Seen {
    let start = Instant::now();
    let (observed, output) = f();
    Seen {
        observed,
        output,
        elapsed: start.elapsed(),
    }
}

/// Classify a socket error: refused is a reset (TCP); unreachable is an
/// ICMP unreachable or administratively prohibited, or no route.
fn classify(e: &io::Error) -> Observed {
    match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => Observed::TimedOut,
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset => Observed::Refused,
        io::ErrorKind::HostUnreachable
        | io::ErrorKind::NetworkUnreachable
        | io::ErrorKind::PermissionDenied
        | io::ErrorKind::AddrNotAvailable => Observed::Unreachable,
        _ => Observed::ProbeError(e.to_string()),
    }
}

/// A TCP connect to `to`.
pub fn tcp(to: SocketAddr, bound: Duration) -> Seen {
    timed(|| match TcpStream::connect_timeout(&to, bound) {
        Ok(_) => (Observed::Connected, format!("connected to {to}")),
        Err(e) => (classify(&e), e.to_string()),
    })
}

/// One UDP datagram to `to`: an answer, or the destination's own ICMP port
/// unreachable (which only the destination sends), means it got there; an
/// ICMP administratively prohibited or no answer means it did not.
pub fn udp(to: SocketAddr, bound: Duration) -> Seen {
    timed(|| {
        let run = || -> io::Result<usize> {
            let sock = UdpSocket::bind(unspecified(to.ip()))?;
            sock.connect(to)?;
            sock.set_read_timeout(Some(bound))?;
            sock.send(b"corral-canary")?;
            let mut buf = [0u8; 512];
            sock.recv(&mut buf)
        };
        match run() {
            Ok(n) => (Observed::Connected, format!("{n}-byte answer from {to}")),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => (
                Observed::Connected,
                format!("ICMP port unreachable from {to}: the datagram reached it"),
            ),
            Err(e) => (classify(&e), e.to_string()),
        }
    })
}

/// One ICMP (or ICMPv6) echo request to `to` (a raw socket: root).
pub fn ping(to: IpAddr, bound: Duration) -> Seen {
    timed(|| {
        let r = corral_drill::lab::probe::run(&Probe::Icmp { to }, bound);
        match r.observed {
            DrillObserved::Connected => (Observed::Connected, format!("echo reply from {to}")),
            DrillObserved::Rejected(why) => (Observed::Unreachable, why),
            DrillObserved::TimedOut => (Observed::TimedOut, "no echo reply".to_owned()),
            DrillObserved::Error(e) => (Observed::ProbeError(e.clone()), e),
        }
    })
}

/// One DNS query to `server`, only to learn whether it is reached: any
/// answer, or its port unreachable, counts.
pub fn resolver(server: SocketAddr, bound: Duration) -> Seen {
    timed(
        || match corral_gateway::probe::query(server, ANY_NAME, TYPE_A, bound) {
            Ok(r) => (
                Observed::Connected,
                format!("{server} answered (rcode {})", r.rcode),
            ),
            Err(ProbeError::Io { source, .. })
                if source.kind() == io::ErrorKind::ConnectionRefused =>
            {
                (
                    Observed::Connected,
                    format!("ICMP port unreachable from {server}: the query reached it"),
                )
            }
            Err(ProbeError::Io { source, .. }) => (classify(&source), source.to_string()),
            Err(e @ ProbeError::Timeout { .. }) => (Observed::TimedOut, e.to_string()),
            Err(e) => (Observed::ProbeError(e.to_string()), e.to_string()),
        },
    )
}

/// Ask `server` for `name`'s addresses.
pub fn lookup(server: SocketAddr, name: &str, bound: Duration) -> Seen {
    timed(
        || match corral_gateway::probe::query(server, name, TYPE_A, bound) {
            Ok(r) if r.rcode == RCODE_NOERROR && !r.answers.is_empty() => {
                let addrs: Vec<IpAddr> = r.answers.iter().map(|a| a.addr).collect();
                let text = format!("{server} answered {name} with {addrs:?}");
                (Observed::Resolved(addrs), text)
            }
            Ok(r) => (
                Observed::NotResolved,
                format!(
                    "{server} answered {name} with rcode {} and no address",
                    r.rcode
                ),
            ),
            Err(ProbeError::Io { source, .. }) => (classify(&source), source.to_string()),
            Err(e @ ProbeError::Timeout { .. }) => (Observed::TimedOut, e.to_string()),
            Err(e) => (Observed::ProbeError(e.to_string()), e.to_string()),
        },
    )
}

/// Resolve `name` at `server`, then connect to its first address on `port`.
pub fn tcp_name(server: SocketAddr, name: &str, port: u16, bound: Duration) -> Seen {
    let start = Instant::now();
    let looked = lookup(server, name, bound);
    let Observed::Resolved(addrs) = &looked.observed else {
        return Seen {
            observed: Observed::ProbeError(format!("{name} did not resolve: {}", looked.output)),
            output: looked.output,
            elapsed: start.elapsed(),
        };
    };
    let Some(first) = addrs.first() else {
        return Seen {
            observed: Observed::ProbeError(format!("{name} resolved to nothing")),
            output: looked.output,
            elapsed: start.elapsed(),
        };
    };
    let left = bound
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(1));
    let mut seen = tcp(SocketAddr::new(*first, port), left);
    seen.output = format!("{}; {}", looked.output, seen.output);
    seen.elapsed = start.elapsed();
    seen
}

fn unspecified(like: IpAddr) -> SocketAddr {
    match like {
        IpAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        IpAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn errors_classify_by_kind() {
        let e = |k| io::Error::from(k);
        assert_eq!(
            classify(&e(io::ErrorKind::ConnectionRefused)),
            Observed::Refused
        );
        assert_eq!(
            classify(&e(io::ErrorKind::HostUnreachable)),
            Observed::Unreachable
        );
        assert_eq!(
            classify(&e(io::ErrorKind::PermissionDenied)),
            Observed::Unreachable
        );
        assert_eq!(classify(&e(io::ErrorKind::TimedOut)), Observed::TimedOut);
        assert!(matches!(
            classify(&e(io::ErrorKind::InvalidInput)),
            Observed::ProbeError(_)
        ));
    }

    /// Loopback only: a listener connects, a closed port refuses, a closed
    /// UDP port's port unreachable counts as reached.
    #[test]
    fn loopback_probes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let open = l.local_addr().unwrap();
        let bound = Duration::from_secs(2);
        assert_eq!(tcp(open, bound).observed, Observed::Connected);
        drop(l);
        assert_eq!(tcp(open, bound).observed, Observed::Refused);
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let closed = u.local_addr().unwrap();
        drop(u);
        let seen = udp(closed, bound);
        assert_eq!(seen.observed, Observed::Connected, "{}", seen.output);
        assert!(seen.output.contains("port unreachable"), "{}", seen.output);
    }
}
