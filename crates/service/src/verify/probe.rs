//! One probe from the calling thread's network stack (run it on a thread
//! inside the namespace whose view you want): a TCP connect, one UDP
//! datagram, one ICMP echo, one DNS query. Each is classified by what the
//! kernel said, within the check's bound.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use corral_gateway::probe::ProbeError;
use corral_gateway::wire::{RCODE_NOERROR, TYPE_A};
use corral_probes::{Observed as ProbeObserved, Probe};
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

/// How often [`tcp_from_global`] looks for a global source address.
const SOURCE_POLL: Duration = Duration::from_millis(20);

/// The source address the kernel picks for `to` (a UDP connect sends
/// nothing).
fn source_for(to: SocketAddr) -> io::Result<IpAddr> {
    let sock = UdpSocket::bind(unspecified(to.ip()))?;
    sock.connect(to)?;
    Ok(sock.local_addr()?.ip())
}

/// A TCP connect to the IPv6 `to` once the stack has a global source for
/// it, waiting within `bound`. A sandbox forms its IPv6 address from the
/// gateway's router advertisement (SLAAC) a moment after it starts and
/// holds it *tentative* for its duplicate address detection (about a
/// second): until then the kernel has no route, or picks the link-local
/// (or loopback) address, which no router forwards, and a connect from it times out
/// even after the address is ready (the socket keeps its source). A
/// connect from the link-local address proves nothing about egress.
pub fn tcp_from_global(to: SocketAddr, bound: Duration) -> Seen {
    let start = Instant::now();
    let mut last = String::new();
    loop {
        match source_for(to) {
            // A new namespace's loopback serves as the source when
            // nothing else does; a router forwards neither.
            Ok(IpAddr::V6(ip)) if ip.is_unicast_link_local() || ip.is_loopback() => {
                last = format!("only the source {ip}");
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NetworkUnreachable | io::ErrorKind::AddrNotAvailable
                ) =>
            {
                last = e.to_string();
            }
            // A global source, or an error waiting cannot cure: the connect
            // says what it is.
            _ => break,
        }
        if start.elapsed() + SOURCE_POLL >= bound {
            return Seen {
                observed: Observed::Unreachable,
                output: format!(
                    "no global IPv6 source address for {to} within {bound:?} (last: {last})"
                ),
                elapsed: start.elapsed(),
            };
        }
        std::thread::sleep(SOURCE_POLL);
    }
    let waited = start.elapsed();
    let mut seen = tcp(to, bound.saturating_sub(waited));
    seen.elapsed += waited;
    if waited >= SOURCE_POLL {
        seen.output = format!(
            "{} (after {} ms waiting for a global source: {last})",
            seen.output,
            waited.as_millis()
        );
    }
    seen
}

/// A UDP datagram to `to` (sent again on the DNS probe's schedule while
/// nothing answers, so one datagram lost on a loaded host is not read as
/// blocked): an answer, or the destination's own ICMP port unreachable
/// (which only the destination sends), means it got there; an ICMP
/// administratively prohibited or no answer means it did not.
pub fn udp(to: SocketAddr, bound: Duration) -> Seen {
    timed(|| {
        let run = || -> io::Result<usize> {
            let sock = UdpSocket::bind(unspecified(to.ip()))?;
            sock.connect(to)?;
            corral_gateway::probe::exchange(&sock, b"corral-canary", bound, |d| Some(d.len()))?
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no answer within {bound:?}"),
                    )
                })
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
    timed(|| echo_outcome(to, corral_probes::run(&Probe::Icmp { to }, bound).observed))
}

/// What an echo to `to` that ended as `observed` means for a check.
pub fn echo_outcome(to: IpAddr, observed: ProbeObserved) -> (Observed, String) {
    match observed {
        ProbeObserved::Connected => (Observed::Connected, format!("echo reply from {to}")),
        ProbeObserved::Rejected(why) => (Observed::Unreachable, why),
        ProbeObserved::TimedOut => (Observed::TimedOut, "no echo reply".to_owned()),
        ProbeObserved::Error(e) => (Observed::ProbeError(e.clone()), e),
    }
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

    /// The sibling bound against real packets: two namespaces on one
    /// bridge, made by a third. Ports not isolated (the control): the echo
    /// comes back within `SIBLING_BOUND`, ARP included, so the bound is
    /// long enough to see a sibling the sandbox can reach; isolated: no
    /// reply within it, and no reject either (the drop is silent).
    #[test]
    fn the_sibling_bound_sees_a_reachable_sibling_and_not_an_isolated_one() {
        use corral_sandbox_core::verify::SIBLING_BOUND;

        use crate::verify::sibling::tests::{isolate, lab};

        if !corral_test_support::gate::netns() {
            return;
        }
        let (host, a, _b) = lab();
        let to_b: IpAddr = "10.9.0.3".parse().unwrap();
        // The control: a reachable sibling answers within the bound. The
        // first echo also waits for ARP, and a loaded test run (every test
        // of this binary at once, on two cores) has been seen to push
        // three echoes in a row past 250 ms, so up to ten echoes, each
        // within the bound; one must answer.
        const TRIES: usize = 10;
        let mut seen = Vec::new();
        for _ in 0..TRIES {
            let open = a.run(|| ping(to_b, SIBLING_BOUND)).unwrap();
            if open.observed == Observed::Connected {
                break;
            }
            seen.push(open.output);
        }
        assert!(
            seen.len() < TRIES,
            "no echo reply within the bound: {seen:?}"
        );
        isolate(&host);
        let closed = a.run(|| ping(to_b, SIBLING_BOUND)).unwrap();
        assert_eq!(closed.observed, Observed::TimedOut, "{}", closed.output);
    }

    /// Two namespaces on a veth, the far one listening on an address it
    /// holds at once; the near one's address is added with duplicate
    /// address detection, as SLAAC adds a sandbox's. The control: just
    /// after that, the kernel's source for the listener is not that
    /// address (it is tentative). `tcp_from_global` waits, connects, and
    /// the listener sees the global address as the peer. With no IPv6
    /// route at all it gives up at the bound, saying why.
    #[test]
    fn an_ipv6_connect_waits_for_a_global_source() {
        use corral_egress::link::Links;
        use corral_egress::netns::Netns;

        if !corral_test_support::gate::netns() {
            return;
        }
        let (sb, dst) = (Netns::new().unwrap(), Netns::new().unwrap());
        let dst_fd = dst.fd();
        sb.run_async(|| async {
            let links = Links::connect().unwrap();
            links
                .create_veth("eth0", "peer0", Some(dst_fd))
                .await
                .unwrap();
            links.set_up("eth0").await.unwrap();
        })
        .unwrap();
        dst.run_async(|| async {
            let links = Links::connect().unwrap();
            links
                .add_address("peer0", "2001:db8:5::1/64".parse().unwrap())
                .await
                .unwrap();
            links.set_up("peer0").await.unwrap();
        })
        .unwrap();
        let listener = dst
            .run(|| TcpListener::bind("[2001:db8:5::1]:0"))
            .unwrap()
            .unwrap();
        let target = listener.local_addr().unwrap();
        let mine: IpAddr = "2001:db8:5::2".parse().unwrap();
        let before = sb
            .run(|| {
                // Not `Links::add_address`, which skips the detection.
                let added = std::process::Command::new("ip")
                    .args(["-6", "addr", "add", "2001:db8:5::2/64", "dev", "eth0"])
                    .status()
                    .unwrap();
                assert!(added.success());
                source_for(target)
            })
            .unwrap();
        assert!(
            !matches!(before, Ok(ip) if ip == mine),
            "the address was usable at once: {before:?}"
        );
        let seen = sb
            .run(|| tcp_from_global(target, Duration::from_secs(5)))
            .unwrap();
        assert_eq!(seen.observed, Observed::Connected, "{}", seen.output);
        assert!(
            seen.output.contains("waiting for a global source"),
            "{}",
            seen.output
        );
        let (_, peer) = listener.accept().unwrap();
        assert_eq!(peer.ip(), mine, "{}", seen.output);

        let nowhere: SocketAddr = "[2001:db8:9::1]:443".parse().unwrap();
        let bound = Duration::from_secs(1);
        let seen = sb.run(|| tcp_from_global(nowhere, bound)).unwrap();
        assert_eq!(seen.observed, Observed::Unreachable, "{}", seen.output);
        assert!(
            seen.output.contains("no global IPv6 source"),
            "{}",
            seen.output
        );
        assert!(seen.elapsed <= bound, "{:?}", seen.elapsed);
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

    /// A must-reach UDP check survives one lost datagram: a service that
    /// ignores the first datagram and answers the second is reached; one
    /// that never answers is not.
    #[test]
    fn a_udp_datagram_lost_once_is_sent_again() {
        let svc = UdpSocket::bind("127.0.0.1:0").unwrap();
        let at = svc.local_addr().unwrap();
        let answering = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            let (_, _) = svc.recv_from(&mut buf).unwrap();
            let (n, from) = svc.recv_from(&mut buf).unwrap();
            svc.send_to(&buf[..n], from).unwrap();
        });
        let seen = udp(at, Duration::from_secs(2));
        assert_eq!(seen.observed, Observed::Connected, "{}", seen.output);
        answering.join().unwrap();

        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let seen = udp(silent.local_addr().unwrap(), Duration::from_millis(700));
        assert_eq!(seen.observed, Observed::TimedOut, "{}", seen.output);
    }
}
