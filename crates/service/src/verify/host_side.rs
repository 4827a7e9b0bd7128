//! The host's side of a canary run, in the namespace corral acts on: the
//! listeners corral opens for the run (on its uplink address and on the
//! profile's gateway address), the controls (probes from the host's own
//! network stack, outside corral's forward and input rules), and what the
//! plan needs to know (uplink address, upstream resolver).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};

use corral_egress::netns::Netns;

/// Where route lookups for the uplink address go when no canary is set:
/// a documentation address (RFC 5737). Only the route is looked up; no
/// packet is sent.
const ROUTE_PROBE: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), 9);

/// The namespace the host's side of a run happens in.
#[derive(Debug)]
pub struct HostSide {
    ns: Netns,
}

impl HostSide {
    /// The host side in `ns`.
    pub fn new(ns: Netns) -> Self {
        Self { ns }
    }

    /// The namespace.
    pub fn ns(&self) -> &Netns {
        &self.ns
    }

    /// The address this host would send from toward `toward` (its uplink
    /// address): a UDP socket's connect looks the route up and sends
    /// nothing.
    pub fn uplink_address(&self, toward: Option<SocketAddr>) -> io::Result<IpAddr> {
        let dest = toward.filter(SocketAddr::is_ipv4).unwrap_or(ROUTE_PROBE);
        self.ns.run(|| {
            let sock = UdpSocket::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))?;
            sock.connect(dest)?;
            Ok(sock.local_addr()?.ip())
        })?
    }

    /// A TCP listener on `ip` (a free port) in the host's namespace, open
    /// while the returned value lives. Nothing accepts: the kernel
    /// completes a handshake into the backlog, which is all a control or a
    /// leak needs.
    pub fn listen(&self, ip: IpAddr) -> io::Result<(TcpListener, SocketAddr)> {
        self.ns.run(|| {
            let l = TcpListener::bind(SocketAddr::new(ip, 0))?;
            let a = l.local_addr()?;
            Ok((l, a))
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_and_the_uplink_in_an_anonymous_namespace() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let ns = Netns::new().unwrap();
        let side = HostSide::new(ns);
        // Only loopback is up there: no route to the documentation address.
        assert!(side.uplink_address(None).is_err());
        let (_l, addr) = side.listen(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        let seen = side
            .ns()
            .run(|| super::super::probe::tcp(addr, std::time::Duration::from_secs(2)))
            .unwrap();
        assert_eq!(
            seen.observed,
            corral_sandbox_core::verify::Observed::Connected
        );
    }
}
