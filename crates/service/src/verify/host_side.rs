//! The host's side of a canary run, in the namespace corral acts on: the
//! listeners corral opens for the run (on its uplink address and on the
//! profile's gateway address), the controls (probes from the host's own
//! network stack, outside corral's forward and input rules), and what the
//! plan needs to know (uplink address, upstream resolver).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV6, TcpListener, UdpSocket};
use std::path::Path;

use corral_egress::netns::Netns;
use corral_gateway::advert::{Advertisement, Router};
use corral_sandbox_core::Profile;
use corral_sandbox_core::sandbox::BoundNic;
use corral_sandbox_core::verify::{OWN_TARGET_V4, OWN_TARGET_V6, OwnTargets};

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

    /// Sends the gateway's router advertisement out of the sandbox's own
    /// port (`corral_gateway::advert`), so a sandbox whose link just came
    /// up forms its IPv6 address now rather than after its link-local
    /// address's detection (about a second), which `ipv6-allowed` would
    /// wait out. Nothing to do where the profile has no /64 to announce.
    pub fn advertise(&self, profile: &Profile, nic: &BoundNic) -> io::Result<()> {
        let Some(prefix) = profile
            .subnet_v6
            .filter(|n| n.prefix_len() == corral_egress::plan::bindings::SLAAC_PREFIX_LEN)
        else {
            return Ok(());
        };
        let dns = corral_gateway::serves_dns(profile)
            .then(|| profile.gateway_v6())
            .flatten();
        self.ns.run_async(|| async {
            let router = Router::of_bridge(profile.bridge.as_str()).await?;
            Advertisement {
                router,
                prefix,
                dns,
            }
            .send_on_port(nic.port.as_str(), nic.mac.octets())
        })?
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

/// Listeners on corral's own canary targets, open while this value lives
/// (the run's duration): nothing listens there between runs.
#[derive(Debug)]
pub struct OwnListeners {
    _v4: TcpListener,
    _v6: TcpListener,
}

/// Open a listener on each of corral's own targets, in the namespace
/// `corral host apply` pinned in `state_dir` (a free port each, so runs
/// at once never contend); the error says why the checks they serve
/// cannot run.
pub fn own_targets(state_dir: &Path) -> Result<(OwnListeners, OwnTargets), String> {
    let ns = corral_egress::own_targets::open(state_dir).map_err(|e| {
        format!("{e}; `corral host apply` sets them up when host.verification.canary or canary_v6 is not set")
    })?;
    let bound = ns.run(|| {
        let v4 = TcpListener::bind(SocketAddr::new(IpAddr::V4(OWN_TARGET_V4), 0))?;
        let v6 = TcpListener::bind(SocketAddr::V6(SocketAddrV6::new(OWN_TARGET_V6, 0, 0, 0)))?;
        let (a4, a6) = (v4.local_addr()?, v6.local_addr()?);
        Ok::<_, io::Error>((v4, v6, a4, a6))
    });
    let (v4, v6, a4, a6) = bound
        .and_then(|r| r)
        .map_err(|e| format!("cannot listen on corral's own targets ({OWN_TARGET_V4}, {OWN_TARGET_V6}): {e}; run `corral host apply` again"))?;
    let SocketAddr::V6(a6) = a6 else {
        return Err(format!(
            "the listener on {OWN_TARGET_V6} reports an IPv4 address"
        ));
    };
    Ok((
        OwnListeners { _v4: v4, _v6: v6 },
        OwnTargets { v4: a4, v6: a6 },
    ))
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
