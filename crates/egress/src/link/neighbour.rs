//! Forgetting a namespace's neighbour entries for one address, so that the
//! next packet to it starts a fresh resolution (an ARP request or a
//! neighbour solicitation sent at once) instead of waiting on an entry
//! already being resolved, whose next probe is up to a second away.
//! The canary's sibling check needs that request on the wire to read the
//! bridge's verdict on it.

use std::net::IpAddr;

use futures::TryStreamExt;
use netlink_packet_route::AddressFamily;
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage};

use super::{LinkError, Links, errno};
use crate::plan::AddrFamily;

impl Links {
    /// This namespace's neighbour table for `family`, as the kernel dumps it.
    pub async fn neighbours(&self, family: AddrFamily) -> Result<Vec<NeighbourMessage>, LinkError> {
        let family = match family {
            AddrFamily::V4 => AddressFamily::Inet,
            AddrFamily::V6 => AddressFamily::Inet6,
        };
        self.handle()
            .neighbours()
            .get()
            .set_address_family(family)
            .execute()
            .try_collect()
            .await
            .map_err(|e| LinkError::netlink("dump the neighbours", e))
    }

    /// Deletes every neighbour entry for `ip` (on any interface of this
    /// namespace); how many went. An entry that vanished meanwhile is not
    /// an error.
    pub async fn forget_neighbour(&self, ip: IpAddr) -> Result<usize, LinkError> {
        let mut gone = 0;
        for entry in self.neighbours(AddrFamily::of(ip)).await? {
            let names_ip = entry.attributes.iter().any(|a| match a {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(d)) => IpAddr::V4(*d) == ip,
                NeighbourAttribute::Destination(NeighbourAddress::Inet6(d)) => IpAddr::V6(*d) == ip,
                _ => false,
            });
            if !names_ip {
                continue;
            }
            match self.handle().neighbours().del(entry).execute().await {
                Ok(()) => gone += 1,
                Err(e) if errno(&e) == Some(libc::ENOENT) => {}
                Err(e) => return Err(LinkError::netlink(format!("forget the neighbour {ip}"), e)),
            }
        }
        Ok(gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::Netns;

    /// A veth pair in a fresh namespace, a neighbour entry for an address
    /// on it (the control: it is listed), forgotten: gone, and a second
    /// forget finds nothing.
    #[test]
    fn a_forgotten_neighbour_is_gone() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let ns = Netns::new().unwrap();
        let ip: IpAddr = "10.77.0.2".parse().unwrap();
        let (before, gone, after, again) = ns
            .run_async(|| async move {
                let links = Links::connect()?;
                links.create_veth("n0", "n1", None).await?;
                links
                    .add_address("n0", "10.77.0.1/24".parse().unwrap())
                    .await?;
                links.set_up("n0").await?;
                links.set_up("n1").await?;
                let index = links.require("n0").await?.index;
                links
                    .handle()
                    .neighbours()
                    .add(index, ip)
                    .link_layer_address(&[2, 0, 0, 0, 0, 2])
                    .execute()
                    .await
                    .map_err(|e| LinkError::netlink("add a neighbour", e))?;
                let count = |links: Links| async move {
                    Ok::<_, LinkError>(links.neighbours(AddrFamily::V4).await?.len())
                };
                let before = count(links.clone()).await?;
                let gone = links.forget_neighbour(ip).await?;
                let after = count(links.clone()).await?;
                let again = links.forget_neighbour(ip).await?;
                Ok::<_, LinkError>((before, gone, after, again))
            })
            .unwrap()
            .unwrap();
        assert_eq!((before, gone, after, again), (1, 1, 0, 0));
    }
}
