//! A one-shot DNS client for probes: send one query over UDP (or TCP), wait
//! for the matching answer. Over UDP the query is sent again, as every stub
//! resolver does, when no answer came: a datagram lost once on a loaded
//! host must not read as a resolver that does not answer. Call it from
//! inside the namespace whose view you want (e.g. through
//! [`crate::netns::Netns::run`]).

use std::io;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use super::wire::{self, Response, WireError};

/// Why a probe query got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The query could not be built.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// Sending failed (e.g. rejected by a firewall with ICMP unreachable).
    #[error("DNS query for `{name}` to {server} failed: {source}")]
    Io {
        /// The name asked.
        name: String,
        /// The server asked.
        server: SocketAddr,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// No answer in time (dropped on the way, or nobody listens).
    #[error("DNS query for `{name}` to {server}{} got no answer within {timeout:?}", from.map(|f| format!(" from {f}")).unwrap_or_default())]
    Timeout {
        /// The name asked.
        name: String,
        /// The server asked.
        server: SocketAddr,
        /// The address it was asked from, when the socket had one (which
        /// source a lost lookup used is the first question about it).
        from: Option<SocketAddr>,
        /// How long we waited.
        timeout: Duration,
    },
}

/// How long the first UDP send waits for its answer before the datagram is
/// sent again; each later wait is twice the one before (0.5 s, 1 s, 2 s, …,
/// all within the caller's timeout). A caller's timeout of 500 ms or less
/// sends exactly once.
pub const FIRST_RETRANSMIT: Duration = Duration::from_millis(500);

/// Sends `msg` on the connected `sock` and waits for a datagram `accept`
/// takes (it returns `Some`), sending `msg` again after
/// [`FIRST_RETRANSMIT`] and then at doubling intervals, until `timeout`:
/// `Ok(None)` when nothing was taken in time. Any receive error but a
/// timeout (e.g. the ICMP port unreachable a connected socket reports as
/// refused) ends the wait with that error.
pub fn exchange<T>(
    sock: &UdpSocket,
    msg: &[u8],
    timeout: Duration,
    mut accept: impl FnMut(&[u8]) -> Option<T>,
) -> io::Result<Option<T>> {
    let deadline = Instant::now() + timeout;
    let mut wait = FIRST_RETRANSMIT;
    let mut resend = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        let now = Instant::now();
        let left = deadline.saturating_duration_since(now);
        if left.is_zero() {
            return Ok(None);
        }
        if now >= resend {
            sock.send(msg)?;
            resend = now + wait;
            wait = wait.saturating_mul(2);
        }
        let until_resend = resend.saturating_duration_since(now);
        sock.set_read_timeout(Some(left.min(until_resend).max(Duration::from_millis(1))))?;
        match sock.recv(&mut buf) {
            Ok(n) => {
                if let Some(taken) = accept(&buf[..n]) {
                    return Ok(Some(taken));
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Asks `server` for `name` of type `qtype`; returns its response. The
/// same query (same id) is sent again on [`exchange`]'s schedule until an
/// answer or `timeout`.
pub fn query(
    server: SocketAddr,
    name: &str,
    qtype: u16,
    timeout: Duration,
) -> Result<Response, ProbeError> {
    let io_err = |source: io::Error| ProbeError::Io {
        name: name.to_owned(),
        server,
        source,
    };
    let bind: SocketAddr = if server.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let sock = UdpSocket::bind(bind).map_err(io_err)?;
    sock.connect(server).map_err(io_err)?;
    let id = query_id();
    let msg = wire::encode_query(id, name, qtype)?;
    // Anything but our response (a stray or forged packet) is ignored.
    exchange(&sock, &msg, timeout, |d| wire::parse_response(d, id).ok())
        .map_err(io_err)?
        .ok_or_else(|| ProbeError::Timeout {
            name: name.to_owned(),
            server,
            from: sock.local_addr().ok(),
            timeout,
        })
}

/// Like [`query`], over TCP (length-prefixed messages, RFC 1035 4.2.2).
pub fn query_tcp(
    server: SocketAddr,
    name: &str,
    qtype: u16,
    timeout: Duration,
) -> Result<Response, ProbeError> {
    let io_err = |source: io::Error| match source.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ProbeError::Timeout {
            name: name.to_owned(),
            server,
            from: None,
            timeout,
        },
        _ => ProbeError::Io {
            name: name.to_owned(),
            server,
            source,
        },
    };
    let mut stream = TcpStream::connect_timeout(&server, timeout).map_err(io_err)?;
    stream.set_read_timeout(Some(timeout)).map_err(io_err)?;
    stream.set_write_timeout(Some(timeout)).map_err(io_err)?;
    let id = query_id();
    let msg = wire::encode_query(id, name, qtype)?;
    // A query is at most ~270 bytes, far below the 64 KiB length prefix.
    let len = u16::try_from(msg.len()).unwrap_or(u16::MAX);
    stream.write_all(&len.to_be_bytes()).map_err(io_err)?;
    stream.write_all(&msg).map_err(io_err)?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).map_err(io_err)?;
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut buf).map_err(io_err)?;
    Ok(wire::parse_response(&buf, id)?)
}

/// A query id that differs between calls (no need for crypto: probes only
/// must not mistake one answer for another).
fn query_id() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (nanos as u16) ^ NEXT.fetch_add(0x9e37, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_upstream::TestUpstream;
    use crate::wire::{RCODE_NXDOMAIN, TYPE_A};

    #[test]
    fn asks_and_times_out_on_loopback() {
        let up = TestUpstream::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        up.set("a.test", &["198.18.0.9".parse().unwrap()], 30);
        let r = query(up.addr(), "A.test", TYPE_A, Duration::from_secs(2)).unwrap();
        assert_eq!(r.answers.len(), 1);
        assert_eq!(r.answers[0].ttl, 30);
        let r = query(up.addr(), "b.test", TYPE_A, Duration::from_secs(2)).unwrap();
        assert_eq!(r.rcode, RCODE_NXDOMAIN);
        let r = query_tcp(up.addr(), "a.test", TYPE_A, Duration::from_secs(2)).unwrap();
        assert_eq!(r.answers.len(), 1);
        assert_eq!(up.queried_names(), vec!["a.test", "b.test", "a.test"]);

        // A bound socket that never answers.
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let err = query(
            silent.local_addr().unwrap(),
            "a.test",
            TYPE_A,
            Duration::from_millis(100),
        )
        .unwrap_err();
        assert!(matches!(err, ProbeError::Timeout { .. }), "{err}");
    }

    /// A query lost once (a relay drops the first datagram and passes the
    /// second on) is answered; the sends keep to the schedule.
    #[test]
    fn a_lost_datagram_is_sent_again() {
        let up = TestUpstream::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        up.set("a.test", &["198.18.0.9".parse().unwrap()], 30);
        let relay = UdpSocket::bind("127.0.0.1:0").unwrap();
        let relay_addr = relay.local_addr().unwrap();
        let to = up.addr();
        let relayed = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let (_, first_from) = relay.recv_from(&mut buf).unwrap();
            let first_at = Instant::now();
            let (n, from) = relay.recv_from(&mut buf).unwrap();
            let gap = first_at.elapsed();
            assert_eq!(from, first_from, "sent again from the same socket");
            let out = UdpSocket::bind("127.0.0.1:0").unwrap();
            out.send_to(&buf[..n], to).unwrap();
            let (m, _) = out.recv_from(&mut buf).unwrap();
            relay.send_to(&buf[..m], from).unwrap();
            gap
        });
        let r = query(relay_addr, "a.test", TYPE_A, Duration::from_secs(3)).unwrap();
        assert_eq!(r.answers.len(), 1);
        let gap = relayed.join().unwrap();
        assert!(gap >= FIRST_RETRANSMIT, "resent after {gap:?}");

        // Unanswered, within 2 s: sent at 0, 0.5 s and 1.5 s.
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let at = silent.local_addr().unwrap();
        let err = query(at, "a.test", TYPE_A, Duration::from_secs(2)).unwrap_err();
        assert!(matches!(err, ProbeError::Timeout { .. }), "{err}");
        silent.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 512];
        let sends = std::iter::from_fn(|| silent.recv(&mut buf).ok()).count();
        assert_eq!(sends, 3);
    }
}
