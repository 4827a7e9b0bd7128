//! The victim's view, read over rtnetlink: a namespace's IPv4/IPv6
//! neighbour table (who it believes holds an address) and a bridge's
//! forwarding database (which port it believes a MAC is behind). An attack
//! that poisons either shows up here.

use std::io;
use std::net::IpAddr;

use futures::TryStreamExt;
use netlink_packet_route::AddressFamily;
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};

use corral_egress::link::{LinkError, Links};
use corral_egress::netns::Netns;

use super::frame::Mac;

/// One neighbour entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// The address.
    pub ip: IpAddr,
    /// The MAC the namespace sends to for it (`None` while unresolved).
    pub mac: Option<Mac>,
    /// The interface it was learned on.
    pub ifindex: u32,
    /// Reachable, stale, failed, ...
    pub state: NeighbourState,
}

/// One forwarding-database entry of a bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdbEntry {
    /// The MAC.
    pub mac: Mac,
    /// The port (interface index) frames for it leave by.
    pub port: u32,
    /// The bridge it belongs to, when reported.
    pub bridge: Option<u32>,
    /// Static (`Noarp`/`Permanent`) or learned.
    pub state: NeighbourState,
}

fn mac_of(bytes: &[u8]) -> Option<Mac> {
    bytes.try_into().ok()
}

fn dump(ns: &Netns, family: AddressFamily) -> io::Result<Result<Vec<NeighbourMessage>, LinkError>> {
    ns.run_async(|| async move {
        let links = Links::connect()?;
        links
            .handle()
            .neighbours()
            .get()
            .set_address_family(family)
            .execute()
            .try_collect()
            .await
            .map_err(|e| LinkError::Netlink {
                op: "dump neighbours".to_owned(),
                source: e,
            })
    })
}

fn flatten(
    r: io::Result<Result<Vec<NeighbourMessage>, LinkError>>,
) -> io::Result<Vec<NeighbourMessage>> {
    r?.map_err(io::Error::other)
}

/// The IPv4 and IPv6 neighbour table of `ns`.
pub fn neighbours(ns: &Netns) -> io::Result<Vec<Neighbour>> {
    let mut out = Vec::new();
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        for m in flatten(dump(ns, family))? {
            let mut ip = None;
            let mut mac = None;
            for a in &m.attributes {
                match a {
                    NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                        ip = Some(IpAddr::V4(*v4));
                    }
                    NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                        ip = Some(IpAddr::V6(*v6));
                    }
                    NeighbourAttribute::LinkLayerAddress(b) => mac = mac_of(b),
                    _ => {}
                }
            }
            if let Some(ip) = ip {
                out.push(Neighbour {
                    ip,
                    mac,
                    ifindex: m.header.ifindex,
                    state: m.header.state,
                });
            }
        }
    }
    Ok(out)
}

/// Deletes `ns`'s entries for `ip` (so a fresh resolution starts clean).
pub fn forget(ns: &Netns, ip: IpAddr) -> io::Result<()> {
    let family = match ip {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    let victims: Vec<NeighbourMessage> = flatten(dump(ns, family))?
        .into_iter()
        .filter(|m| {
            m.attributes.iter().any(|a| match a {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => ip == *v4,
                NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => ip == *v6,
                _ => false,
            })
        })
        .collect();
    ns.run_async(|| async move {
        let links = Links::connect()?;
        for m in victims {
            // Gone already (expired in between) is fine.
            let _ = links.handle().neighbours().del(m).execute().await;
        }
        Ok::<_, LinkError>(())
    })?
    .map_err(io::Error::other)
}

/// The MAC `ns` currently holds for `ip`, if any (resolved entries only).
pub fn mac_for(ns: &Netns, ip: IpAddr) -> io::Result<Option<Mac>> {
    Ok(neighbours(ns)?
        .into_iter()
        .find(|n| n.ip == ip && n.mac.is_some() && n.state != NeighbourState::Failed)
        .and_then(|n| n.mac))
}

/// Every forwarding-database entry of every bridge in `ns`.
pub fn fdb(ns: &Netns) -> io::Result<Vec<FdbEntry>> {
    let mut out = Vec::new();
    for m in flatten(dump(ns, AddressFamily::Bridge))? {
        let mut mac = None;
        let mut bridge = None;
        for a in &m.attributes {
            match a {
                NeighbourAttribute::LinkLayerAddress(b) => mac = mac_of(b),
                NeighbourAttribute::Controller(c) => bridge = Some(*c),
                _ => {}
            }
        }
        if let Some(mac) = mac {
            out.push(FdbEntry {
                mac,
                port: m.header.ifindex,
                bridge,
                state: m.header.state,
            });
        }
    }
    Ok(out)
}

/// The port index `ns`'s bridges forward `mac` to, if learned or static.
pub fn port_of(ns: &Netns, mac: Mac) -> io::Result<Option<u32>> {
    Ok(fdb(ns)?.into_iter().find(|e| e.mac == mac).map(|e| e.port))
}
