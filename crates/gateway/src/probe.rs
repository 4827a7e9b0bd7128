//! A one-shot DNS client for probes: send one query over UDP (or TCP), wait
//! for the matching answer. Call it from inside the namespace whose view you want
//! (e.g. through [`crate::netns::Netns::run`]).

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
    #[error("DNS query for `{name}` to {server} got no answer within {timeout:?}")]
    Timeout {
        /// The name asked.
        name: String,
        /// The server asked.
        server: SocketAddr,
        /// How long we waited.
        timeout: Duration,
    },
}

/// Asks `server` for `name` of type `qtype`; returns its response.
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
    sock.send(&msg).map_err(io_err)?;
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ProbeError::Timeout {
                name: name.to_owned(),
                server,
                timeout,
            });
        }
        sock.set_read_timeout(Some(left)).map_err(io_err)?;
        match sock.recv(&mut buf) {
            Ok(n) => {
                // Anything but our response (a stray or forged packet) is ignored.
                if let Ok(resp) = wire::parse_response(&buf[..n], id) {
                    return Ok(resp);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(io_err(e)),
        }
    }
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
}
