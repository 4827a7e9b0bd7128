//! The drill's IPv6 addressing row: a sandbox of a profile with a /64
//! gets its address from the gateway's router advertisement (SLAAC), that
//! address is the one its port is bound to, and from it the sandbox
//! reaches its IPv6 allowlist and nothing else (docs/gateway.md, "IPv6
//! addressing").
//!
//! The sandbox's static IPv6 address is taken away, a router solicitation
//! sent; the gateway's answer must give the same address back. Then the
//! first IPv6 allow entry with a TCP port must connect and an unlisted
//! public IPv6 address must not. The control: both destinations answer the
//! simulated host, which corral does not filter.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use corral_egress::link::Links;
use corral_egress::netns::Netns;
use corral_egress::plan::bindings::SLAAC_PREFIX_LEN;
use corral_sandbox_core::{AllowTarget, EgressMode, Profile, Protocol};
use ipnet::{IpNet, Ipv6Net};

use crate::lab::topology::{PUBLIC_V6, SandboxNs};
use crate::lab::{Lab, Observed, Probe, first_host, probe_from};

/// The row's probe label.
pub(crate) const V6_ONLY_ALLOWLIST: &str =
    "v6 sandbox addressed by the gateway (RA, SLAAC) reaches only its v6 allowlist";

/// How long the address may take to come back.
const ADDRESS_WAIT: Duration = Duration::from_secs(5);

/// The first IPv6 allow entry's TCP destination, and an unlisted public
/// IPv6 address on the same port.
fn targets(p: &Profile) -> Option<(SocketAddr, SocketAddr)> {
    let allowed = p.allow.iter().find_map(|e| match e.target {
        AllowTarget::Net(n @ IpNet::V6(_)) if e.protocol != Some(Protocol::Udp) => Some(
            SocketAddr::new(first_host(n), e.ports.map_or(443, |r| r.start())),
        ),
        _ => None,
    })?;
    let unlisted = PUBLIC_V6
        .iter()
        .map(|a| SocketAddr::new(IpAddr::V6(*a), allowed.port()))
        .find(|a| {
            !p.allow.iter().any(|e| match e.target {
                AllowTarget::Net(n) => n.contains(&a.ip()),
                _ => false,
            })
        })?;
    Some((allowed, unlisted))
}

/// Whether this row applies to `p`: an allowlist with a /64 and an IPv6
/// TCP entry.
pub(crate) fn applies(p: &Profile) -> bool {
    p.mode == EgressMode::Allowlist
        && p.subnet_v6
            .is_some_and(|n| n.prefix_len() == SLAAC_PREFIX_LEN)
        && targets(p).is_some()
}

/// Sends one router solicitation (no options) to all-routers on `eth0`.
pub fn solicit(ns: &Netns) -> std::io::Result<()> {
    ns.run(|| {
        // SAFETY: plain socket calls on a descriptor this function owns
        // and closes; every pointer is to a live local of the right size.
        unsafe {
            let fd = libc::socket(libc::AF_INET6, libc::SOCK_RAW, libc::IPPROTO_ICMPV6);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let index = libc::if_nametoindex(c"eth0".as_ptr());
            let hops: libc::c_int = 255;
            libc::setsockopt(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_MULTICAST_HOPS,
                (&hops as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
            let mut to: libc::sockaddr_in6 = std::mem::zeroed();
            to.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            to.sin6_addr.s6_addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2).octets();
            to.sin6_scope_id = index;
            // Type 133, code 0, checksum (the kernel fills it), reserved.
            let rs = [133u8, 0, 0, 0, 0, 0, 0, 0];
            let sent = libc::sendto(
                fd,
                rs.as_ptr().cast(),
                rs.len(),
                0,
                (&to as *const libc::sockaddr_in6).cast(),
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            );
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if sent < 0 { Err(err) } else { Ok(()) }
        }
    })?
}

fn has_address(ns: &Netns, addr: IpNet) -> bool {
    ns.run_async(|| async { Links::connect()?.addresses("eth0").await })
        .ok()
        .and_then(Result::ok)
        .is_some_and(|a| a.contains(&addr))
}

/// The row's control and observation, and the time the address took.
pub(crate) fn run(
    lab: &Lab,
    p: &Profile,
    sb: &SandboxNs,
    timeout: Duration,
) -> (String, Observed, Observed, u64) {
    let Some((allowed, unlisted)) = targets(p) else {
        let e = Observed::Error("the profile has no IPv6 TCP allow entry".to_owned());
        return ("-".to_owned(), e.clone(), e, 0);
    };
    let to = format!("tcp {allowed} / {unlisted}");
    let (Some(v6), Some(net)) = (sb.v6, p.subnet_v6) else {
        let e = Observed::Error("the sandbox has no IPv6 address".to_owned());
        return (to, e.clone(), e, 0);
    };
    let host = |a: SocketAddr| probe_from(&lab.topo.host, &Probe::Tcp { to: a }, timeout).observed;
    let control = match (host(allowed), host(unlisted)) {
        (Observed::Connected, Observed::Connected) => Observed::Connected,
        (Observed::Connected, other) | (other, _) => other,
    };
    let bound = IpNet::V6(Ipv6Net::new(v6, net.prefix_len()).unwrap_or_else(|_| Ipv6Net::from(v6)));
    let removed = sb
        .ns
        .run_async(|| async { Links::connect()?.delete_address("eth0", bound).await });
    if !matches!(removed, Ok(Ok(()))) || has_address(&sb.ns, bound) {
        return (
            to,
            control,
            Observed::Error("could not take the address away".to_owned()),
            0,
        );
    }
    let start = Instant::now();
    if let Err(e) = solicit(&sb.ns) {
        return (
            to,
            control,
            Observed::Error(format!("router solicitation: {e}")),
            0,
        );
    }
    while !has_address(&sb.ns, bound) || start.elapsed() > ADDRESS_WAIT {
        if start.elapsed() > ADDRESS_WAIT {
            return (
                to,
                control,
                Observed::Error(format!(
                    "no {bound} from the gateway within {ADDRESS_WAIT:?}"
                )),
                0,
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let from = |a: SocketAddr| probe_from(&sb.ns, &Probe::Tcp { to: a }, timeout).observed;
    // A fresh address is used once duplicate address detection is done.
    let reach = (0..10)
        .map(|_| {
            let r = from(allowed);
            if r != Observed::Connected {
                std::thread::sleep(Duration::from_millis(200));
            }
            r
        })
        .find(|r| *r == Observed::Connected)
        .unwrap_or_else(|| from(allowed));
    let observed = match (reach, from(unlisted)) {
        (Observed::Connected, Observed::Connected) => {
            Observed::Error(format!("the unlisted {unlisted} was reached"))
        }
        (Observed::Connected, _) => Observed::Connected,
        (other, _) => other,
    };
    (to, control, observed, ms)
}
