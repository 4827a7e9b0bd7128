//! The host's own networks: every directly connected network (the subnet
//! of each address on each interface but loopback and corral's bridges)
//! and every router its routes go through. No sandbox reaches them, in any
//! mode: on a host whose LAN or uplink is public (a provider's /24, a lab)
//! the reserved ranges do not cover them.
//!
//! They are read at apply and again by every `corral host refresh` (the
//! systemd timer runs one every 15 minutes; run it from a network hook to
//! follow an address or route change at once), which updates the
//! `hostnet4`/`hostnet6` set elements in place; `corral host verify`
//! reports when the host's networks differ from what was applied.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use futures::TryStreamExt;
use ipnet::IpNet;
use netlink_packet_route::address::{AddressAttribute, AddressScope};
use netlink_packet_route::route::{RouteAddress, RouteAttribute};
use serde::Serialize;

use crate::link::{LinkError, Links};

/// What the host is directly connected to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostNetworks {
    /// Subnets of the host's addresses (loopback, link-local and corral's
    /// bridges left out), truncated to their network.
    pub networks: Vec<IpNet>,
    /// Gateways of the host's routes.
    pub routers: Vec<IpAddr>,
}

impl HostNetworks {
    /// Networks and routers (as /32 and /128) in one sorted list: what the
    /// plan blocks.
    pub fn to_nets(&self) -> Vec<IpNet> {
        let set: BTreeSet<IpNet> = self
            .networks
            .iter()
            .copied()
            .chain(self.routers.iter().map(|r| IpNet::from(*r)))
            .collect();
        set.into_iter().collect()
    }
}

fn link_local(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

fn route_ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

impl Links {
    /// The host's networks and routers, leaving out the interfaces named in
    /// `exclude` (the plan's bridges), every bridge with corral's stamp or
    /// group, and loopback.
    pub async fn host_networks(&self, exclude: &[&str]) -> Result<HostNetworks, LinkError> {
        let links = self.list().await?;
        let skip: BTreeSet<u32> = links
            .iter()
            // A bridge of corral's no plan names is on its way out (an
            // apply removes it), and its traffic is dropped meanwhile: its
            // subnet is not one of the host's networks. corral's own canary
            // link stands in for the internet (an `internet` profile must
            // reach it), so it is not one either.
            .filter(|l| {
                l.name == "lo"
                    || l.name == crate::own_targets::VETH
                    || exclude.contains(&l.name.as_str())
                    || l.is_corral_bridge()
            })
            .map(|l| l.index)
            .collect();
        let addrs: Vec<_> = self
            .handle()
            .address()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(|e| LinkError::netlink("read the host's addresses", e))?;
        let mut networks = BTreeSet::new();
        for msg in addrs {
            if skip.contains(&msg.header.index) || msg.header.scope == AddressScope::Host {
                continue;
            }
            let ip = msg
                .attributes
                .iter()
                .find_map(|a| match a {
                    AddressAttribute::Local(ip) => Some(*ip),
                    _ => None,
                })
                .or_else(|| {
                    msg.attributes.iter().find_map(|a| match a {
                        AddressAttribute::Address(ip) => Some(*ip),
                        _ => None,
                    })
                });
            if let Some(ip) = ip
                && !link_local(ip)
                && let Ok(net) = IpNet::new(ip, msg.header.prefix_len)
            {
                networks.insert(net.trunc());
            }
        }
        let mut routers = BTreeSet::new();
        for version in [rtnetlink::IpVersion::V4, rtnetlink::IpVersion::V6] {
            let msg = match version {
                rtnetlink::IpVersion::V4 => {
                    rtnetlink::RouteMessageBuilder::<Ipv4Addr>::new().build()
                }
                rtnetlink::IpVersion::V6 => {
                    rtnetlink::RouteMessageBuilder::<Ipv6Addr>::new().build()
                }
            };
            let routes: Vec<_> = self
                .handle()
                .route()
                .get(msg)
                .execute()
                .try_collect()
                .await
                .map_err(|e| LinkError::netlink("read the host's routes", e))?;
            for r in routes {
                let oif = r.attributes.iter().find_map(|a| match a {
                    RouteAttribute::Oif(i) => Some(*i),
                    _ => None,
                });
                if oif.is_some_and(|i| skip.contains(&i)) {
                    continue;
                }
                for a in &r.attributes {
                    match a {
                        RouteAttribute::Gateway(g) => routers.extend(route_ip(g)),
                        RouteAttribute::MultiPath(hops) => {
                            for h in hops {
                                for ha in &h.attributes {
                                    if let RouteAttribute::Gateway(g) = ha {
                                        routers.extend(route_ip(g));
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        // A link-local router (IPv6 routers usually are) is reserved anyway.
        routers.retain(|r| !link_local(*r));
        Ok(HostNetworks {
            networks: networks.into_iter().collect(),
            routers: routers.into_iter().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nets_merge_networks_and_routers() {
        let h = HostNetworks {
            networks: vec!["192.0.2.0/24".parse().unwrap()],
            routers: vec![
                "198.51.100.1".parse().unwrap(),
                "2001:db8::1".parse().unwrap(),
            ],
        };
        let nets: Vec<String> = h.to_nets().iter().map(ToString::to_string).collect();
        assert_eq!(nets, ["192.0.2.0/24", "198.51.100.1/32", "2001:db8::1/128"]);
    }

    #[test]
    fn a_namespace_reports_its_connected_networks_and_routers() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let ns = crate::netns::Netns::new().unwrap();
        let found = ns
            .run_async(|| async {
                let links = Links::connect().unwrap();
                links.create_veth("up0", "peer0", None).await.unwrap();
                links.create_veth("cb-x", "peer1", None).await.unwrap();
                for (l, a) in [
                    ("up0", "192.0.2.5/24"),
                    ("up0", "2001:db8:7::5/64"),
                    ("cb-x", "10.77.0.1/24"),
                ] {
                    links.add_address(l, a.parse().unwrap()).await.unwrap();
                }
                for l in ["up0", "peer0", "cb-x", "peer1"] {
                    links.set_up(l).await.unwrap();
                }
                links
                    .add_default_route("192.0.2.1".parse().unwrap())
                    .await
                    .unwrap();
                links.host_networks(&["cb-x"]).await.unwrap()
            })
            .unwrap();
        let nets: Vec<String> = found.networks.iter().map(ToString::to_string).collect();
        assert_eq!(nets, ["192.0.2.0/24", "2001:db8:7::/64"], "{found:?}");
        assert_eq!(found.routers, vec!["192.0.2.1".parse::<IpAddr>().unwrap()]);
    }
}
