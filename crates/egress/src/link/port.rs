//! Veth pairs and bridge ports (with bridge-port isolation).

use std::os::fd::{AsRawFd, BorrowedFd};

use super::{LinkError, Links};

impl Links {
    /// Creates a veth pair `name` ↔ `peer`. With `peer_ns`, the peer is
    /// created directly inside that namespace (by fd), so no second step
    /// moves it. Both ends start down.
    pub async fn create_veth(
        &self,
        name: &str,
        peer: &str,
        peer_ns: Option<BorrowedFd<'_>>,
    ) -> Result<(), LinkError> {
        let mut msg = rtnetlink::LinkVeth::new(name, peer).build();
        if let Some(fd) = peer_ns {
            set_peer_netns(&mut msg, fd.as_raw_fd());
        }
        self.handle
            .link()
            .add(msg)
            .execute()
            .await
            .map_err(|e| LinkError::netlink(format!("create veth `{name}`/`{peer}`"), e))
    }

    /// Makes `port` a port of `bridge` and sets its isolation flag
    /// (`IFLA_BRPORT_ISOLATED`: isolated ports cannot talk to each other,
    /// only to non-isolated ports such as the bridge's uplink).
    pub async fn attach_port(
        &self,
        port: &str,
        bridge: &str,
        isolated: bool,
    ) -> Result<(), LinkError> {
        let br = self.require(bridge).await?;
        let link = self.require(port).await?;
        let msg = rtnetlink::LinkUnspec::new_with_index(link.index)
            .controller(br.index)
            .build();
        self.handle
            .link()
            .set(msg)
            .execute()
            .await
            .map_err(|e| LinkError::netlink(format!("attach `{port}` to bridge `{bridge}`"), e))?;
        self.set_port_isolated(port, isolated).await
    }

    /// Sets or clears bridge-port isolation on an existing bridge port.
    pub async fn set_port_isolated(&self, port: &str, isolated: bool) -> Result<(), LinkError> {
        let link = self.require(port).await?;
        let msg = rtnetlink::LinkBridgePort::new(link.index)
            .isolated(isolated)
            .build();
        self.handle
            .link()
            .set_port(msg)
            .execute()
            .await
            .map_err(|e| LinkError::netlink(format!("set isolation on port `{port}`"), e))
    }
}

/// Puts `IFLA_NET_NS_FD` on the peer half of a veth request.
fn set_peer_netns(msg: &mut netlink_packet_route::link::LinkMessage, fd: i32) {
    use netlink_packet_route::link::{InfoData, InfoVeth, LinkAttribute, LinkInfo};
    for attr in &mut msg.attributes {
        if let LinkAttribute::LinkInfo(infos) = attr {
            for info in infos {
                if let LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))) = info {
                    peer.attributes.push(LinkAttribute::NetNsFd(fd));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_route::link::{InfoData, InfoVeth, LinkAttribute, LinkInfo};

    #[test]
    fn peer_netns_lands_on_the_peer_only() {
        let mut msg = rtnetlink::LinkVeth::new("a", "b").build();
        set_peer_netns(&mut msg, 42);
        assert!(!msg.attributes.contains(&LinkAttribute::NetNsFd(42)));
        let mut found = false;
        for attr in &msg.attributes {
            if let LinkAttribute::LinkInfo(infos) = attr {
                for info in infos {
                    if let LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))) = info {
                        found = peer.attributes.contains(&LinkAttribute::NetNsFd(42));
                    }
                }
            }
        }
        assert!(found);
    }
}
