//! Interface addresses and routes.

use std::net::IpAddr;

use futures::TryStreamExt;
use ipnet::IpNet;
use netlink_packet_route::address::{AddressAttribute, AddressFlags};

use super::{LinkError, Links, errno};

impl Links {
    /// The addresses configured on `name`.
    pub async fn addresses(&self, name: &str) -> Result<Vec<IpNet>, LinkError> {
        let link = self.require(name).await?;
        let msgs: Vec<_> = self
            .handle
            .address()
            .get()
            .set_link_index_filter(link.index)
            .execute()
            .try_collect()
            .await
            .map_err(|e| LinkError::netlink(format!("read addresses of `{name}`"), e))?;
        let mut out = Vec::new();
        for msg in msgs {
            // The dump filter is applied in user space by rtnetlink only for
            // some kernels; check the index again.
            if msg.header.index != link.index {
                continue;
            }
            let addr = msg.attributes.iter().find_map(|a| match a {
                AddressAttribute::Local(ip) => Some(*ip),
                _ => None,
            });
            let addr = addr.or_else(|| {
                msg.attributes.iter().find_map(|a| match a {
                    AddressAttribute::Address(ip) => Some(*ip),
                    _ => None,
                })
            });
            if let Some(ip) = addr
                && let Ok(net) = IpNet::new(ip, msg.header.prefix_len)
            {
                out.push(net);
            }
        }
        Ok(out)
    }

    /// Every address of the namespace, by interface index, in one dump
    /// (checking many bridges one request each costs a dump per bridge).
    pub async fn all_addresses(
        &self,
    ) -> Result<std::collections::BTreeMap<u32, Vec<IpNet>>, LinkError> {
        let msgs: Vec<_> = self
            .handle
            .address()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(|e| LinkError::netlink("read addresses".to_owned(), e))?;
        let mut out: std::collections::BTreeMap<u32, Vec<IpNet>> = Default::default();
        for msg in msgs {
            let local = msg.attributes.iter().find_map(|a| match a {
                AddressAttribute::Local(ip) => Some(*ip),
                _ => None,
            });
            let addr = local.or_else(|| {
                msg.attributes.iter().find_map(|a| match a {
                    AddressAttribute::Address(ip) => Some(*ip),
                    _ => None,
                })
            });
            if let Some(ip) = addr
                && let Ok(net) = IpNet::new(ip, msg.header.prefix_len)
            {
                out.entry(msg.header.index).or_default().push(net);
            }
        }
        Ok(out)
    }

    /// Adds `addr` to `name` unless it is already there. IPv6 addresses are
    /// added without duplicate address detection (`IFA_F_NODAD`): corral owns
    /// the subnet, and a tentative gateway address would break the first
    /// seconds of traffic.
    pub async fn ensure_address(&self, name: &str, addr: IpNet) -> Result<(), LinkError> {
        if self.addresses(name).await?.contains(&addr) {
            return Ok(());
        }
        self.add_address(name, addr).await
    }

    /// Removes `addr` from `name`; an address that is not there is not an
    /// error (tests and the drill take a sandbox's address away to watch
    /// the gateway's announcement give it back).
    pub async fn delete_address(&self, name: &str, addr: IpNet) -> Result<(), LinkError> {
        let link = self.require(name).await?;
        let msgs: Vec<_> = self
            .handle
            .address()
            .get()
            .set_link_index_filter(link.index)
            .execute()
            .try_collect()
            .await
            .map_err(|e| LinkError::netlink(format!("read addresses of `{name}`"), e))?;
        for msg in msgs {
            let ip = msg.attributes.iter().find_map(|a| match a {
                AddressAttribute::Local(ip) | AddressAttribute::Address(ip) => Some(*ip),
                _ => None,
            });
            if msg.header.index == link.index
                && msg.header.prefix_len == addr.prefix_len()
                && ip == Some(addr.addr())
            {
                self.handle
                    .address()
                    .del(msg)
                    .execute()
                    .await
                    .map_err(|e| LinkError::netlink(format!("delete {addr} from `{name}`"), e))?;
                return Ok(());
            }
        }
        Ok(())
    }

    /// Adds `addr` to `name` (an existing identical address is not an error).
    pub async fn add_address(&self, name: &str, addr: IpNet) -> Result<(), LinkError> {
        let link = self.require(name).await?;
        let mut req = self
            .handle
            .address()
            .add(link.index, addr.addr(), addr.prefix_len());
        if addr.addr().is_ipv6() {
            req.message_mut()
                .attributes
                .push(AddressAttribute::Flags(AddressFlags::Nodad));
        }
        match req.execute().await {
            Ok(()) => Ok(()),
            Err(e) if errno(&e) == Some(libc::EEXIST) => Ok(()),
            Err(e) => Err(LinkError::netlink(
                format!("add address {addr} to `{name}`"),
                e,
            )),
        }
    }

    /// Adds a route to `dest` via gateway `via` (an existing identical route
    /// is not an error).
    pub async fn add_route(&self, dest: IpNet, via: IpAddr) -> Result<(), LinkError> {
        let msg = match (dest, via) {
            (IpNet::V4(d), IpAddr::V4(g)) => {
                rtnetlink::RouteMessageBuilder::<std::net::Ipv4Addr>::new()
                    .destination_prefix(d.addr(), d.prefix_len())
                    .gateway(g)
                    .build()
            }
            (IpNet::V6(d), IpAddr::V6(g)) => {
                rtnetlink::RouteMessageBuilder::<std::net::Ipv6Addr>::new()
                    .destination_prefix(d.addr(), d.prefix_len())
                    .gateway(g)
                    .build()
            }
            _ => {
                return Err(LinkError::MixedFamilies { dest, via });
            }
        };
        match self.handle.route().add(msg).execute().await {
            Ok(()) => Ok(()),
            Err(e) if errno(&e) == Some(libc::EEXIST) => Ok(()),
            Err(e) => Err(LinkError::netlink(format!("add route {dest} via {via}"), e)),
        }
    }

    /// Adds a default route via `via`.
    pub async fn add_default_route(&self, via: IpAddr) -> Result<(), LinkError> {
        let dest = match via {
            IpAddr::V4(_) => IpNet::V4(ipnet::Ipv4Net::default()),
            IpAddr::V6(_) => IpNet::V6(ipnet::Ipv6Net::default()),
        };
        self.add_route(dest, via).await
    }
}
