//! The gateway's router advertisement, sent out of one sandbox's port at
//! once (docs/gateway.md, "IPv6 addressing").
//!
//! A sandbox forms its IPv6 address (SLAAC) from the gateway's
//! advertisement. Left to itself it asks for one only once its link-local
//! address has passed duplicate address detection, a second or more after
//! its link came up, and the gateway answers that request to the
//! link-local address alone; a sandbox ignores any advertisement sent to
//! its link-local address while that address is still tentative. It does
//! take one sent to all nodes at any time. So corral sends, out of the
//! sandbox's own port only (a packet socket on the host-side interface,
//! which no sibling shares), the advertisement the gateway would send:
//! the same fields and options, in the order dnsmasq writes them (its
//! own answers are compared with these in `tests/gateway_advert.rs`). It
//! says nothing the gateway does not say anyway, and a sandbox can neither
//! trigger nor shape it.
//!
//! Needs CAP_NET_RAW, in the network namespace of the bridge.

use std::io;
use std::net::{IpAddr, Ipv6Addr};

use corral_egress::link::Links;
use ipnet::Ipv6Net;

const ETH_P_IPV6: u16 = 0x86dd;
const ICMPV6: u8 = 58;
const ROUTER_ADVERTISEMENT: u8 = 134;
/// ff02::1, all nodes on the link.
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// What dnsmasq (2.90) advertises for `ra-only` with no lease time:
/// current hop limit 64, router lifetime 1,800 s, infinite prefix and
/// resolver lifetimes, on-link and autonomous.
const HOP_LIMIT: u8 = 64;
const ROUTER_LIFETIME_SECS: u16 = 1_800;
const INFINITE: u32 = u32::MAX;
const ON_LINK_AUTONOMOUS: u8 = 0xc0;

/// The router as the sandbox sees it: the bridge's link-layer and
/// link-local addresses and its MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Router {
    /// The bridge's MAC.
    pub mac: [u8; 6],
    /// The bridge's link-local address: the source of the gateway's
    /// advertisements, so the router the sandbox learns is the same one.
    pub link_local: Ipv6Addr,
    /// The bridge's MTU.
    pub mtu: u32,
}

impl Router {
    /// Reads `bridge`'s addresses and MTU over rtnetlink, in the calling
    /// thread's network namespace.
    pub async fn of_bridge(bridge: &str) -> io::Result<Router> {
        let failed = |e: corral_egress::link::LinkError| io::Error::other(e.to_string());
        let links = Links::connect().map_err(failed)?;
        let link = links.require(bridge).await.map_err(failed)?;
        let missing = |what: &str| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("bridge `{bridge}` has no {what} (is it up, with IPv6 on?)"),
            )
        };
        let link_local = links
            .addresses(bridge)
            .await
            .map_err(failed)?
            .into_iter()
            .find_map(|n| match n.addr() {
                IpAddr::V6(ip) if ip.is_unicast_link_local() => Some(ip),
                _ => None,
            })
            .ok_or_else(|| missing("link-local IPv6 address"))?;
        Ok(Router {
            mac: link.mac.ok_or_else(|| missing("Ethernet address"))?,
            link_local,
            mtu: link.mtu.ok_or_else(|| missing("MTU"))?,
        })
    }
}

/// One advertisement: the router, the profile's /64 and, when the gateway
/// resolves names, its IPv6 address as the resolver (RDNSS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advertisement {
    /// Who advertises.
    pub router: Router,
    /// The prefix sandboxes form their address in.
    pub prefix: Ipv6Net,
    /// The resolver to announce, if any.
    pub dns: Option<Ipv6Addr>,
}

impl Advertisement {
    /// The ICMPv6 message, with its checksum for `router.link_local` →
    /// `dst`. Options in dnsmasq's order: prefix, MTU, source link-layer
    /// address, resolver.
    pub fn icmp(&self, dst: Ipv6Addr) -> Vec<u8> {
        let mut m = vec![ROUTER_ADVERTISEMENT, 0, 0, 0, HOP_LIMIT, 0];
        m.extend_from_slice(&ROUTER_LIFETIME_SECS.to_be_bytes());
        m.extend_from_slice(&[0; 8]); // reachable time, retransmit timer: unspecified
        m.extend_from_slice(&[3, 4, self.prefix.prefix_len(), ON_LINK_AUTONOMOUS]);
        m.extend_from_slice(&INFINITE.to_be_bytes());
        m.extend_from_slice(&INFINITE.to_be_bytes());
        m.extend_from_slice(&[0; 4]);
        m.extend_from_slice(&self.prefix.network().octets());
        m.extend_from_slice(&[5, 1, 0, 0]);
        m.extend_from_slice(&self.router.mtu.to_be_bytes());
        m.extend_from_slice(&[1, 1]);
        m.extend_from_slice(&self.router.mac);
        if let Some(dns) = self.dns {
            m.extend_from_slice(&[25, 3, 0, 0]);
            m.extend_from_slice(&INFINITE.to_be_bytes());
            m.extend_from_slice(&dns.octets());
        }
        let sum = checksum(&self.router.link_local, &dst, &m);
        m[2..4].copy_from_slice(&sum.to_be_bytes());
        m
    }

    /// The whole frame to `to_mac`: IPv6 to all nodes, hop limit 255.
    pub fn frame(&self, to_mac: [u8; 6]) -> Vec<u8> {
        let icmp = self.icmp(ALL_NODES);
        let mut f = Vec::with_capacity(14 + 40 + icmp.len());
        f.extend_from_slice(&to_mac);
        f.extend_from_slice(&self.router.mac);
        f.extend_from_slice(&ETH_P_IPV6.to_be_bytes());
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&u16::try_from(icmp.len()).unwrap_or(0).to_be_bytes());
        f.extend_from_slice(&[ICMPV6, 255]);
        f.extend_from_slice(&self.router.link_local.octets());
        f.extend_from_slice(&ALL_NODES.octets());
        f.extend_from_slice(&icmp);
        f
    }

    /// Sends it out of `port` (the host-side interface of one sandbox's
    /// NIC, in the calling thread's namespace) to `to_mac`, the sandbox's
    /// MAC, bypassing the bridge: no other port gets it.
    pub fn send_on_port(&self, port: &str, to_mac: [u8; 6]) -> io::Result<()> {
        crate::on_port::send(port, to_mac, ETH_P_IPV6, &self.frame(to_mac))
    }
}

/// The one's-complement checksum of ICMPv6 (RFC 4443 §2.3) over the
/// pseudo-header and `body` (whose checksum field is zero).
fn checksum(src: &Ipv6Addr, dst: &Ipv6Addr, body: &[u8]) -> u16 {
    let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let mut bytes = Vec::with_capacity(40 + body.len() + 1);
    bytes.extend_from_slice(&src.octets());
    bytes.extend_from_slice(&dst.octets());
    bytes.extend_from_slice(&len.to_be_bytes());
    bytes.extend_from_slice(&[0, 0, 0, ICMPV6]);
    bytes.extend_from_slice(body);
    if bytes.len() % 2 == 1 {
        bytes.push(0);
    }
    let mut sum: u32 = bytes
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    // The fold above leaves at most 16 bits.
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What dnsmasq 2.90 sent (captured on a bridge with `enable-ra`,
    /// `dhcp-range=fd00:77::,ra-only,64` and
    /// `dhcp-option=option6:dns-server,[fd00:77::1]`), unicast to the
    /// link-local address that asked, from the bridge's.
    const DNSMASQ: &str = "8600cf3d400007080000000000000000030440c0ffffffffffffffff00000000\
fd00007700000000000000000000000005010000000005dc01018a7de18c65b019030000ffffffff\
fd000077000000000000000000000001";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn captured() -> Advertisement {
        Advertisement {
            router: Router {
                mac: [0x8a, 0x7d, 0xe1, 0x8c, 0x65, 0xb0],
                link_local: "fe80::a80f:7ff:fe29:c915".parse().unwrap(),
                mtu: 1500,
            },
            prefix: "fd00:77::/64".parse().unwrap(),
            dns: Some("fd00:77::1".parse().unwrap()),
        }
    }

    #[test]
    fn the_message_is_dnsmasqs_byte_for_byte() {
        // The same destination as the capture, so the checksums agree too.
        let to: Ipv6Addr = "fe80::cc88:63ff:fe72:8a8a".parse().unwrap();
        assert_eq!(captured().icmp(to), hex(DNSMASQ));
    }

    #[test]
    fn without_a_resolver_there_is_no_rdnss_option() {
        let a = Advertisement {
            dns: None,
            ..captured()
        };
        let m = a.icmp(ALL_NODES);
        assert_eq!(m.len(), hex(DNSMASQ).len() - 24);
        assert!(!m[16..].chunks(8).any(|c| c[0] == 25));
    }

    #[test]
    fn the_frame_goes_to_all_nodes_from_the_router_with_a_valid_checksum() {
        let a = captured();
        let to = [2, 0, 0, 0, 0, 9];
        let f = a.frame(to);
        assert_eq!(&f[..6], &to);
        assert_eq!(&f[6..12], &a.router.mac);
        let ip = &f[14..54];
        assert_eq!((ip[6], ip[7]), (ICMPV6, 255));
        assert_eq!(&ip[8..24], &a.router.link_local.octets());
        assert_eq!(&ip[24..40], &ALL_NODES.octets());
        // Data holding its own correct checksum sums to zero.
        assert_eq!(checksum(&a.router.link_local, &ALL_NODES, &f[54..]), 0);
    }
}
