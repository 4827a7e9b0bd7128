//! The probes and how a socket error is classified.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::Transport;

/// What to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Probe {
    /// TCP connect, then one echo round trip.
    Tcp {
        /// Destination.
        to: SocketAddr,
    },
    /// One UDP datagram and its echo.
    Udp {
        /// Destination.
        to: SocketAddr,
    },
    /// One ICMP (or ICMPv6) echo request.
    Icmp {
        /// Destination.
        to: IpAddr,
    },
}

impl Probe {
    /// A TCP or UDP probe.
    pub fn l4(transport: Transport, to: SocketAddr) -> Self {
        match transport {
            Transport::Tcp => Probe::Tcp { to },
            Transport::Udp => Probe::Udp { to },
        }
    }

    /// Destination address.
    pub fn ip(&self) -> IpAddr {
        match self {
            Probe::Tcp { to } | Probe::Udp { to } => to.ip(),
            Probe::Icmp { to } => *to,
        }
    }
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Probe::Tcp { to } => write!(f, "tcp {to}"),
            Probe::Udp { to } => write!(f, "udp {to}"),
            Probe::Icmp { to } => write!(f, "icmp {to}"),
        }
    }
}

/// How a probe ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "observed", content = "detail")]
pub enum Observed {
    /// The destination answered.
    Connected,
    /// Refused fast: TCP reset or ICMP unreachable/prohibited.
    Rejected(String),
    /// No answer before the timeout: dropped.
    TimedOut,
    /// The probe could not run or failed for another reason.
    Error(String),
}

impl Observed {
    /// Connected.
    pub fn reached(&self) -> bool {
        matches!(self, Observed::Connected)
    }

    /// Rejected or timed out: the packet did not get through.
    pub fn blocked(&self) -> bool {
        matches!(self, Observed::Rejected(_) | Observed::TimedOut)
    }
}

/// A probe's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// What ended the probe.
    pub observed: Observed,
    /// Wall time, milliseconds.
    pub ms: u64,
}

/// Runs `probe` on this thread with `timeout` for each wait.
pub fn run(probe: &Probe, timeout: Duration) -> ProbeResult {
    let start = Instant::now();
    let observed = match probe {
        Probe::Tcp { to } => tcp(*to, timeout),
        Probe::Udp { to } => udp(*to, timeout),
        Probe::Icmp { to } => crate::icmp::echo(*to, timeout),
    };
    ProbeResult {
        observed,
        ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

const PAYLOAD: &[u8] = b"corral-probe";

fn tcp(to: SocketAddr, timeout: Duration) -> Observed {
    let mut stream = match TcpStream::connect_timeout(&to, timeout) {
        Ok(s) => s,
        Err(e) => return classify(&e),
    };
    let round_trip = (|| -> io::Result<bool> {
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.write_all(PAYLOAD)?;
        let mut buf = [0u8; PAYLOAD.len()];
        stream.read_exact(&mut buf)?;
        Ok(buf == PAYLOAD)
    })();
    match round_trip {
        Ok(true) => Observed::Connected,
        Ok(false) => Observed::Error("the echo came back altered".into()),
        Err(e) => classify(&e),
    }
}

fn udp(to: SocketAddr, timeout: Duration) -> Observed {
    let bind: SocketAddr = if to.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let result = (|| -> io::Result<bool> {
        let sock = UdpSocket::bind(bind)?;
        // A connected socket receives ICMP errors as ECONNREFUSED etc.
        sock.connect(to)?;
        sock.set_read_timeout(Some(timeout))?;
        sock.send(PAYLOAD)?;
        let mut buf = [0u8; 64];
        let n = sock.recv(&mut buf)?;
        Ok(&buf[..n] == PAYLOAD)
    })();
    match result {
        Ok(true) => Observed::Connected,
        Ok(false) => Observed::Error("the echo came back altered".into()),
        Err(e) => classify(&e),
    }
}

/// Maps a socket error to what it means for reachability.
pub fn classify(e: &io::Error) -> Observed {
    if matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    ) {
        return Observed::TimedOut;
    }
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => {
            Observed::Rejected("connection refused (reset or port unreachable)".into())
        }
        Some(libc::EHOSTUNREACH) => Observed::Rejected("host unreachable (ICMP)".into()),
        Some(libc::ENETUNREACH) => Observed::Rejected("network unreachable".into()),
        Some(libc::EACCES) => Observed::Rejected("administratively prohibited (ICMP)".into()),
        Some(libc::ECONNRESET) => Observed::Rejected("connection reset".into()),
        Some(libc::ETIMEDOUT) => Observed::TimedOut,
        _ => Observed::Error(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_classify_by_errno() {
        let e = |n| io::Error::from_raw_os_error(n);
        assert!(matches!(
            classify(&e(libc::ECONNREFUSED)),
            Observed::Rejected(_)
        ));
        assert!(matches!(
            classify(&e(libc::EHOSTUNREACH)),
            Observed::Rejected(_)
        ));
        assert!(matches!(classify(&e(libc::EACCES)), Observed::Rejected(_)));
        assert_eq!(classify(&e(libc::ETIMEDOUT)), Observed::TimedOut);
        assert_eq!(classify(&e(libc::EAGAIN)), Observed::TimedOut);
        assert!(matches!(classify(&e(libc::EINVAL)), Observed::Error(_)));
        assert!(Observed::TimedOut.blocked() && !Observed::TimedOut.reached());
        assert!(!Observed::Error("x".into()).blocked());
    }
}
